//! Helpers shared by the integration tests.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code, unused_macros)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One logger per process: the tests of a binary take turns.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A log path in the temporary directory, unique to this process and `name`.
pub fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nanolog-{name}-{}.nlog", std::process::id()))
}

/// Removes the log at `path` and the earlier runs' files a later `start`
/// kept beside it (`stem.<UTC start>Z[.n].ext`).
pub fn remove_with_kept(path: &Path) {
    let _ = std::fs::remove_file(path);
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return;
    };
    let prefix = format!("{}.", stem.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        // `20261123T153100.123456789Z.nlog` or `...Z.1.nlog`.
        if rest.len() > 26 && rest.as_bytes()[8] == b'T' && rest.contains("Z.") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A log file removed when the test ends.
pub struct TempLog(pub PathBuf);

impl Drop for TempLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Logs the call with `nanolog::info!` and pushes `format!` of the same
/// literal and arguments onto `$expected`, the message it must decode to.
macro_rules! case {
    ($expected:ident, $($t:tt)*) => {{
        nanolog::info!($($t)*);
        $expected.push(format!($($t)*));
    }};
}
