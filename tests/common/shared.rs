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

/// A log path in the temporary directory, unique to this process and `name`.
pub fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nanolog-{name}-{}.nlog", std::process::id()))
}
