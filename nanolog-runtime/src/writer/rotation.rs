//! When a set rolls: the time boundaries, and the policy a writer keeps.

use std::path::PathBuf;

use crate::fileset::Retention;

/// Time-based rolling: a new file at each UTC boundary of this length
/// ([`Builder::rotate_every`](crate::Builder::rotate_every)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rotation {
    /// At the start of every minute (UTC).
    Minutely,
    /// At the start of every hour (UTC).
    Hourly,
    /// At midnight UTC.
    Daily,
}

impl Rotation {
    pub(super) fn period_ns(self) -> i64 {
        const MIN: i64 = 60_000_000_000;
        match self {
            Rotation::Minutely => MIN,
            Rotation::Hourly => 60 * MIN,
            Rotation::Daily => 24 * 60 * MIN,
        }
    }

    /// The first boundary after `unix_ns`.
    pub(super) fn next_after(self, unix_ns: i64) -> i64 {
        let p = self.period_ns();
        (unix_ns.div_euclid(p) + 1) * p
    }
}

/// When and how the file set rolls, and what it keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) rotate_bytes: Option<u64>,
    pub(crate) rotate_every: Option<Rotation>,
    pub(crate) retention: Retention,
    /// Added to the wall clock when deciding time boundaries (tests only:
    /// puts a boundary seconds away instead of up to a minute).
    pub(crate) clock_offset_ns: i64,
    /// Also write one unrotated log of the same run here (tests only: the
    /// decode of the rolled set must equal the decode of this file).
    pub(crate) unrotated_copy: Option<PathBuf>,
}
