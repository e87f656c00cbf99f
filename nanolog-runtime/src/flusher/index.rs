//! The file's sparse index as the flusher keeps it: what each write's
//! records hold (their ticks, levels and threads, summed up as `drain`
//! compacts them), one row a write, written into the file as an INDEX entry
//! once the rows cover [`INDEX_BYTES`] of it, before a roll and at the end
//! (FORMAT.md, "INDEX").
//!
//! A write's records are its own region of the file: the dictionary entries
//! and clock pairs they need go ahead of them, in a region of their own
//! (`State::write_buffer`), so a reader can leave the records out and still
//! read every name, span and time they do not hold.

use crate::wire::frame::put_entry;
use crate::wire::index::{put_index, thread_bit, Row};
use crate::wire::tag;

/// Write an INDEX entry once its rows cover this much of the file ...
const INDEX_BYTES: u64 = 4 << 20;
/// ... or hold this many writes (a flusher writing a few records a
/// millisecond makes small writes: a row costs about 20 bytes of index).
const INDEX_ROWS: usize = 4096;

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
    /// Records of thread `thread` at levels `levels` (bits) from tick
    /// `first` to `last`.
    #[inline(always)]
    pub(super) fn add(&mut self, thread: u32, levels: u8, first: u64, last: u64) {
        self.first = self.first.min(first);
        self.last = self.last.max(last);
        self.levels |= levels;
        self.threads |= thread_bit(thread);
    }

    /// Records dropped (a gap, which no level filter leaves out).
    pub(super) fn add_gap(&mut self, thread: u32, first: u64, last: u64) {
        self.add(thread, u8::MAX, first.min(last), last.max(first));
    }
}

/// The rows not yet in an INDEX entry of the file being written.
#[derive(Default)]
pub(super) struct Index {
    rows: Vec<Row>,
    bytes: u64,
}

impl Index {
    /// The write of `records` records summed up in `sum`, at `[offset,
    /// offset + len)` of the file.
    pub(super) fn push(&mut self, sum: &Summary, offset: u64, len: u64, records: u64) {
        if len == 0 || sum.ends {
            return;
        }
        self.rows.push(Row {
            offset,
            len,
            records,
            first_tick: if sum.first == u64::MAX { 0 } else { sum.first },
            last_tick: sum.last,
            levels: sum.levels,
            threads: sum.threads,
        });
        self.bytes += len;
    }

    /// Whether the rows are due to be written.
    pub(super) fn due(&self) -> bool {
        self.bytes >= INDEX_BYTES || self.rows.len() >= INDEX_ROWS
    }

    /// Appends the INDEX entry of the rows to `out` (nothing when there are
    /// none); they are let go once [`Index::written`] says it reached the
    /// file.
    pub(super) fn put(&self, out: &mut Vec<u8>) -> usize {
        if !self.rows.is_empty() {
            put_entry(out, tag::INDEX, |b| put_index(b, &self.rows));
        }
        self.rows.len()
    }

    /// The first `n` rows are in the file.
    pub(super) fn written(&mut self, n: usize) {
        self.rows.drain(..n.min(self.rows.len()));
        self.bytes = self.rows.iter().map(|r| r.len).sum();
    }

    /// The file they were of is gone (begun again in place).
    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.bytes = 0;
    }
}
