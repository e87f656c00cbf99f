//! Levels and the run-time level test every call makes first.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// The importance of a record, ordered `Trace < Debug < Info < Warn < Error`.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The most detailed level.
    Trace = 0,
    /// Details for debugging.
    Debug = 1,
    /// Normal operation (the default minimum).
    Info = 2,
    /// Something unexpected that the program survives.
    Warn = 3,
    /// A failure.
    Error = 4,
}

/// Above every level: nothing is enabled (no logger runs).
pub(crate) const OFF: u8 = 5;

/// The minimum enabled level, or [`OFF`] while no logger runs. Read with one
/// relaxed load on every call: the level is advisory, and a call that races a
/// change may go either way, as in every logger.
static MIN_LEVEL: AtomicU8 = AtomicU8::new(OFF);

impl Level {
    /// Every level, from `Trace` to `Error`.
    pub const ALL: [Level; 5] = [
        Level::Trace,
        Level::Debug,
        Level::Info,
        Level::Warn,
        Level::Error,
    ];

    /// The upper-case name used in decoded output: `INFO`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }

    /// The level with this on-disk number.
    pub fn from_u8(v: u8) -> Option<Level> {
        Level::ALL.get(usize::from(v)).copied()
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The error of parsing a [`Level`] from a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseLevelError(String);

impl fmt::Display for ParseLevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown level `{}` (expected trace, debug, info, warn or error)",
            self.0
        )
    }
}

impl std::error::Error for ParseLevelError {}

impl FromStr for Level {
    type Err = ParseLevelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
            .or_else(|| {
                s.trim()
                    .eq_ignore_ascii_case("warning")
                    .then_some(Level::Warn)
            })
            .ok_or_else(|| ParseLevelError(s.to_owned()))
    }
}

/// Whether a call at `level` is enabled now. One relaxed load and a compare.
#[inline(always)]
pub fn enabled_at_runtime(level: Level) -> bool {
    level as u8 >= MIN_LEVEL.load(Ordering::Relaxed)
}

/// Changes the minimum level of the running logger, at once. (A logger
/// started later takes its builder's level; with no logger running this does
/// nothing.)
pub fn set_level(level: Level) {
    // One read-modify-write, not a load then a store: a logger's stop
    // (`deactivate`) that falls between the two would otherwise be undone,
    // and calls would evaluate their arguments with no logger running.
    // Relaxed: the level is advisory (see MIN_LEVEL); atomicity is what
    // matters here, and every RMW of one atomic sees the latest value.
    let _ = MIN_LEVEL.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
        (cur != OFF).then_some(level as u8)
    });
}

pub(crate) fn activate(level: Level) {
    MIN_LEVEL.store(level as u8, Ordering::Relaxed);
}

pub(crate) fn deactivate() {
    MIN_LEVEL.store(OFF, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::Level;

    /// `Site::per_level` and `log!` index sites by the level's discriminant.
    #[test]
    fn all_is_in_discriminant_order() {
        for (i, l) in Level::ALL.into_iter().enumerate() {
            assert_eq!(l as usize, i);
        }
    }
}
