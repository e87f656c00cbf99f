//! Helpers shared by the integration tests.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code, unused_macros, unused_imports)]

use std::path::{Path, PathBuf};

mod reaped;
pub use reaped::{Reaped, SpawnReaped};
mod shared;
pub use shared::{lock_of, serial, temp};

/// Removes the log at `path` and the finished files of its set (an earlier
/// run's file a later `start` kept beside it, rolled files).
pub fn remove_with_kept(path: &Path) {
    let _ = std::fs::remove_file(path);
    for (f, _) in nanolog::reader::finished_files(path).unwrap_or_default() {
        let _ = std::fs::remove_file(f);
    }
}

/// Every record of the log at `path`, in time order: its message, the names
/// of its spans outermost first joined by `:`, and whether some are lost.
pub fn messages_and_spans(path: &Path) -> Vec<(String, String, bool)> {
    use nanolog::reader::{Event, Filter, LogFile, Merge};
    let files = [LogFile::open(path).unwrap()];
    let mut seen = Vec::new();
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            let spans: Vec<String> = r.spans().iter().map(|s| s.name().to_owned()).collect();
            seen.push((r.message(), spans.join(":"), r.spans_lost()));
        }
    }
    seen
}

/// A log file removed when the test ends.
pub struct TempLog(pub PathBuf);

impl Drop for TempLog {
    /// The log and its lock file (`app.nlog.lock`, left by a logger that
    /// stopped: the lock is the kernel's, on the file's descriptor).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(lock_of(&self.0));
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

/// The top-level entries of `file` as (start, end, tag), frames included.
pub fn entries(file: &[u8]) -> Vec<(usize, usize, u8)> {
    let mut v = Vec::new();
    let mut at = 48;
    while at + 9 <= file.len() {
        let len = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap()) as usize;
        v.push((at, at + 9 + len, file[at]));
        at += 9 + len;
    }
    v
}
