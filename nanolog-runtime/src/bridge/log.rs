//! The `log` crate's records into nanolog: [`capture_log`].

use std::cell::RefCell;
use std::fmt::Write as _;

use super::template::{self, Pieces};
use super::{Arg, Key};
use crate::error::Error;
use crate::filter;
use crate::level::Level;
use crate::wire::format::ArgKind;

struct Bridge;

static BRIDGE: Bridge = Bridge;

thread_local! {
    /// The calling thread's buffer for formatting messages.
    static MESSAGE: RefCell<Pieces> = RefCell::new(Pieces::default());
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
        if record.key_values().count() > 0 {
            return log_with_fields(record, &key);
        }
        let logged = MESSAGE.try_with(|m| {
            let Ok(mut m) = m.try_borrow_mut() else {
                return false;
            };
            format_message(&mut m, record);
            template::log_message(site, &key, &m, &[]);
            true
        });
        if logged != Ok(true) {
            // A re-entrant call (a Display impl that logs) or a thread
            // being torn down: a buffer of its own.
            let mut m = Pieces::default();
            format_message(&mut m, record);
            template::log_message(site, &key, &m, &[]);
        }
    }

    fn flush(&self) {
        let _ = crate::logger::flush();
    }
}

/// A record with key-values (the `log` crate's `kv`: `info!(order = 7;
/// "placed")`): they become the site's named fields, typed where the value
/// is a number, a bool or a string, else as the value's text.
#[cold]
fn log_with_fields(record: &log::Record<'_>, gate: &Key<'_>) {
    struct Fields(Vec<(String, Arg<String>)>);
    impl<'kvs> log::kv::VisitSource<'kvs> for Fields {
        fn visit_pair(
            &mut self,
            key: log::kv::Key<'kvs>,
            value: log::kv::Value<'kvs>,
        ) -> Result<(), log::kv::Error> {
            let v = if let Some(b) = value.to_bool() {
                Arg::Bool(b)
            } else if let Some(u) = value.to_u64() {
                Arg::U64(u)
            } else if let Some(i) = value.to_i64() {
                Arg::I64(i)
            } else if let Some(x) = value.to_f64() {
                Arg::F64(x)
            } else if let Some(t) = value.to_borrowed_str() {
                Arg::Str(t.to_owned())
            } else {
                Arg::Str(value.to_string())
            };
            self.0.push((key.as_str().to_owned(), v));
            Ok(())
        }
    }
    let mut f = Fields(Vec::new());
    let _ = record.key_values().visit(&mut f);
    let kinds: Vec<(&str, ArgKind)> = f.0.iter().map(|(n, v)| (n.as_str(), v.kind())).collect();
    let key = Key {
        fields: &kinds,
        ..*gate
    };
    let site = super::site(&key);
    let mut m = Pieces::default();
    format_message(&mut m, record);
    let args: Vec<Arg<&str>> = f.0.iter().map(|(_, v)| v.as_str_arg()).collect();
    template::log_message(site, &key, &m, &args);
}

/// Formats the record's message into `m`, write by write (the pieces its
/// template is learnt from); a panicking `Display` impl leaves
/// `<Display panicked>` rather than unwinding into the caller's `log!`.
fn format_message(m: &mut Pieces, record: &log::Record<'_>) {
    m.format(|m| m.write_fmt(*record.args()), "<Display panicked>");
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
