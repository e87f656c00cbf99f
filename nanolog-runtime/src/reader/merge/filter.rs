//! What a merge yields ([`Event`]) and which records ([`Filter`]).

use super::{Gap, LogFile, Record, SiteEntry};
use crate::level::Level;

/// Which records to yield. Everything here is decided from the dictionary and
/// the record header, before arguments are formatted.
#[derive(Default)]
pub struct Filter {
    /// Minimum level.
    pub min_level: Option<Level>,
    /// Earliest time, Unix ns (inclusive).
    pub since_ns: Option<i64>,
    /// Latest time, Unix ns (inclusive).
    pub until_ns: Option<i64>,
    /// Only these thread ids (in every file) ...
    pub threads: Option<Vec<u32>>,
    /// ... or, with it or alone, the threads of these names, each file's
    /// own (a thread's id is its run's: another run may have given that id
    /// to another thread).
    pub thread_names: Option<Vec<String>>,
    /// Only call sites for which this returns true.
    #[allow(clippy::type_complexity)]
    pub site: Option<Box<dyn Fn(&SiteEntry) -> bool>>,
    /// Leave out dropped-record gaps.
    pub no_gaps: bool,
    /// Only entries at or after this byte offset (for following a growing file).
    pub min_offset: usize,
    /// Only entries before this byte offset (a batch of a file, from
    /// [`LogFile::batch_end`]); `None`: to the end.
    pub max_offset: Option<usize>,
}

impl Filter {
    /// Whether it wants the records of thread `id` of `file`.
    pub fn wants_thread(&self, file: &LogFile, id: u32) -> bool {
        if self.threads.is_none() && self.thread_names.is_none() {
            return true;
        }
        self.threads.as_ref().is_some_and(|t| t.contains(&id))
            || self
                .thread_names
                .as_ref()
                .zip(file.thread_name(id))
                .is_some_and(|(names, name)| names.iter().any(|n| n == name))
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("min_level", &self.min_level)
            .field("since_ns", &self.since_ns)
            .field("until_ns", &self.until_ns)
            .field("threads", &self.threads)
            .field("thread_names", &self.thread_names)
            .field("site", &self.site.as_ref().map(|_| ".."))
            .field("min_offset", &self.min_offset)
            .field("max_offset", &self.max_offset)
            .finish()
    }
}

/// An item of the merged stream.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A record.
    Record(Record<'a>),
    /// Records the thread dropped (`OnFull::Drop`, or larger than its ring).
    Gap(Gap, &'a LogFile),
}

impl Event<'_> {
    /// When it happened: the record's time, or a gap's first dropped record's.
    pub fn unix_ns(&self) -> i64 {
        match self {
            Event::Record(r) => r.unix_ns(),
            Event::Gap(g, _) => g.first_unix_ns,
        }
    }
}
