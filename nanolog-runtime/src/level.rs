//! Levels.

use std::fmt;
use std::str::FromStr;

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

impl Level {
    /// The `log` crate's level of the same name.
    pub(crate) fn to_log(self) -> log::Level {
        match self {
            Level::Trace => log::Level::Trace,
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        }
    }

    /// The level of a `log` crate level of the same name.
    #[cfg_attr(not(feature = "log"), allow(dead_code))]
    pub(crate) fn from_log(l: log::Level) -> Level {
        match l {
            log::Level::Trace => Level::Trace,
            log::Level::Debug => Level::Debug,
            log::Level::Info => Level::Info,
            log::Level::Warn => Level::Warn,
            log::Level::Error => Level::Error,
        }
    }
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
