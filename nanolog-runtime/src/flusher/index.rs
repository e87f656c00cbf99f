//! The file's sparse index as the flusher keeps it: what each write's
//! records hold (their ticks, levels and threads, summed up as `drain`
//! compacts them), said by an INDEX entry right ahead of them (FORMAT.md,
//! "INDEX").
//!
//! A write's records are its own region of the file: the dictionary entries
//! and clock pairs they need go ahead of them, in a region of their own
//! (`State::write_buffer`), so a reader can step over the records and still
//! read every name, span and time they do not hold.

use crate::wire::frame::put_entry;
use crate::wire::index::{put_index, thread_bit, Row};
use crate::wire::tag;

/// A write's records get an INDEX entry when they take at least this much
/// of the file: the entry (about 30 bytes) is then at most 6% of them. A
/// flusher writing a few records a millisecond makes smaller writes, read
/// whole (a reader's walk goes through their few entries).
const INDEXED: usize = 512;

/// What the records of the write being filled hold.
#[derive(Clone, Copy)]
pub(super) struct Summary {
    first: u64,
    last: u64,
    levels: u8,
    threads: u64,
    /// The write ends the file (an END after its records): not a row, so
    /// a reader always reads it.
    pub(super) ends: bool,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            first: u64::MAX,
            last: 0,
            levels: 0,
            threads: 0,
            ends: false,
        }
    }
}

impl Summary {
    /// An extent of thread `thread` opens at tick `first`: its records'
    /// ticks are that or later.
    pub(super) fn extent(&mut self, thread: u32, first: u64) {
        self.first = self.first.min(first);
        self.threads |= thread_bit(thread);
    }

    /// Records of the open extent at the levels of `levels` (bits), the
    /// last of them at tick `last`: an OR and a compare a record or run.
    #[inline(always)]
    pub(super) fn records(&mut self, levels: u8, last: u64) {
        self.levels |= levels;
        self.last = self.last.max(last);
    }

    /// Records dropped (a gap, which no level filter leaves out).
    pub(super) fn add_gap(&mut self, thread: u32, first: u64, last: u64) {
        self.extent(thread, first.min(last));
        self.records(u8::MAX, last.max(first));
    }
}

/// Appends to `out` the INDEX entry of the write's records, `len` bytes
/// holding `records` records summed up in `sum`, when they are worth one.
pub(super) fn put(out: &mut Vec<u8>, sum: &Summary, len: usize, records: u64) {
    if len < INDEXED || sum.ends {
        return;
    }
    let row = Row {
        offset: 0,
        len: len as u64,
        records,
        first_tick: if sum.first == u64::MAX { 0 } else { sum.first },
        last_tick: sum.last,
        levels: sum.levels,
        threads: sum.threads,
    };
    put_entry(out, tag::INDEX, |b| put_index(b, &row));
}
