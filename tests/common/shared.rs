//! Helpers both test trees use (the facade's `tests/` and the CLI's): one
//! definition, included by each tree's `common` module.
// Each test binary that includes this file uses some of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One logger per process: the tests of a binary that log take turns.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A log path in the temporary directory, unique to this process and `name`;
/// the log and its lock file are removed when the test process exits.
pub fn temp(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nanolog-{name}-{}.nlog", std::process::id()));
    remove_at_exit(&path);
    path
}

/// The logs handed out by [`temp`], removed at exit by [`remove_made`].
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

#[cfg(unix)]
fn remove_at_exit(path: &std::path::Path) {
    let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    if made.is_empty() {
        // SAFETY: `remove_made` is an `extern "C" fn()` that does not
        // unwind (it ignores every error and takes a lock no thread holds
        // at exit: `temp` holds it only inside this call); libtest's
        // `process::exit` runs it once, after every test has returned.
        unsafe {
            libc::atexit(remove_made);
        }
    }
    if !made.iter().any(|p| p == path) {
        made.push(path.to_path_buf());
    }
}

#[cfg(not(unix))]
fn remove_at_exit(_: &std::path::Path) {}

/// Removes each log [`temp`] handed out, and the lock file beside it.
#[cfg(unix)]
extern "C" fn remove_made() {
    let made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    for path in made.iter() {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(lock_of(path));
    }
}

/// The lock file a logger writing `path` keeps beside it (`app.nlog.lock`).
pub fn lock_of(path: &std::path::Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}
