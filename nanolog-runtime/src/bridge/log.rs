//! The `log` crate's records into nanolog: [`capture_log`].

use std::cell::RefCell;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{Arg, Key};
use crate::error::Error;
use crate::filter;
use crate::level::Level;

struct Bridge;

static BRIDGE: Bridge = Bridge;

thread_local! {
    /// The calling thread's buffer for formatting messages.
    static MESSAGE: RefCell<String> = const { RefCell::new(String::new()) };
}

impl log::Log for Bridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        filter::enabled(Level::from_log(metadata.level()), metadata.target())
    }

    fn log(&self, record: &log::Record<'_>) {
        let module = record.module_path().unwrap_or("");
        let key = Key {
            level: Level::from_log(record.level()),
            target: record.target(),
            file: record.file().unwrap_or("<unknown>"),
            line: record.line().unwrap_or(0),
            module,
            fields: &[],
            message: true,
        };
        let site = super::site(&key);
        if !site.enabled(&key) {
            return;
        }
        if let Some(s) = record.args().as_str() {
            super::log(site, &key, &[Arg::Str(s)]);
            return;
        }
        let logged = MESSAGE.try_with(|m| {
            let Ok(mut m) = m.try_borrow_mut() else {
                return false;
            };
            format_message(&mut m, record);
            super::log(site, &key, &[Arg::Str(&m)]);
            true
        });
        if logged != Ok(true) {
            // A re-entrant call (a Display impl that logs) or a thread
            // being torn down: a buffer of its own.
            let mut m = String::new();
            format_message(&mut m, record);
            super::log(site, &key, &[Arg::Str(&m)]);
        }
    }

    fn flush(&self) {
        let _ = crate::logger::flush();
    }
}

/// Formats the record's message into `m`; a panicking `Display` impl leaves
/// `<Display panicked>` rather than unwinding into the caller's `log!`.
fn format_message(m: &mut String, record: &log::Record<'_>) {
    m.clear();
    let ok = catch_unwind(AssertUnwindSafe(|| {
        let _ = write!(m, "{}", record.args());
    }));
    if ok.is_err() {
        m.clear();
        m.push_str("<Display panicked>");
    }
}

/// Makes every record of the `log` crate (`log::info!` and the others, in
/// the program and in its dependencies) a record of the running nanolog
/// logger: its level, target, module, file and line, and its message,
/// formatted on the calling thread (the slow path). Records are filtered by
/// the logger's directives (per target); `log::max_level()` follows them.
///
/// Call once per process. Fails if another `log` logger is installed.
pub fn capture_log() -> Result<(), Error> {
    log::set_logger(&BRIDGE).map_err(|_| Error::LogLoggerInstalled)?;
    filter::on_max_level_change(max_level_changed);
    Ok(())
}

/// The filter changed: let `log`'s macros skip what it disables.
fn max_level_changed(max: Option<Level>) {
    log::set_max_level(max.map_or(log::LevelFilter::Off, |l| l.to_log().to_level_filter()));
}
