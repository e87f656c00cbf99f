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
use crate::wire::index::{put_index, thread_bit, Ids, Row, MOST_CONTEXT_BITS, MOST_SITE_BITS};
use crate::wire::tag;
use crate::wire::totals::Totals;

/// A write's records get an INDEX entry when they take at least this much
/// of the file: the entry (about 30 bytes) is then at most 6% of them. A
/// flusher writing a few records a millisecond makes smaller writes, read
/// whole (a reader's walk goes through their few entries).
const INDEXED: usize = 512;

/// What the records of the write being filled hold, beside what the
/// write's [`Totals`] count (the records' first and last tick are theirs).
pub(super) struct Summary {
    /// The earliest and latest tick of the write's gaps (DROPs).
    gap_first: u64,
    gap_last: u64,
    levels: u8,
    threads: u64,
    /// The contexts its records switch to, each time (sorted and made
    /// unique once, when the write's entry is made).
    contexts: Vec<u32>,
    /// The write ends the file (an END after its records): not a row, so
    /// a reader always reads it.
    pub(super) ends: bool,
    /// The sites its counts name, made when its entry is (kept for its
    /// memory).
    sites: Vec<u32>,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            gap_first: u64::MAX,
            gap_last: 0,
            levels: 0,
            threads: 0,
            contexts: Vec::new(),
            ends: false,
            sites: Vec::new(),
        }
    }
}

impl Summary {
    /// An extent of thread `thread` opens (its first tick goes to the
    /// write's `Totals`).
    pub(super) fn extent(&mut self, thread: u32) {
        self.threads |= thread_bit(thread);
    }

    /// Records of the open extent at the levels of `levels` (bits): an OR a
    /// record or run (their last tick goes to the write's `Totals`).
    #[inline(always)]
    pub(super) fn records(&mut self, levels: u8) {
        self.levels |= levels;
    }

    /// The open extent's records switch to context `ctx` (not 0): a push
    /// a switch to another than the last (a request's records switch
    /// between its spans, of one such context).
    #[inline(always)]
    pub(super) fn context(&mut self, ctx: u32) {
        if self.contexts.last() != Some(&ctx) {
            self.contexts.push(ctx);
        }
    }

    /// Back to no record, keeping its buffers' memory.
    pub(super) fn clear(&mut self) {
        let mut contexts = std::mem::take(&mut self.contexts);
        contexts.clear();
        *self = Summary {
            contexts,
            sites: std::mem::take(&mut self.sites),
            ..Summary::default()
        };
    }

    /// Records dropped (a gap, which no level filter leaves out).
    pub(super) fn add_gap(&mut self, thread: u32, first: u64, last: u64) {
        self.extent(thread);
        self.levels = u8::MAX;
        self.gap_first = self.gap_first.min(first.min(last));
        self.gap_last = self.gap_last.max(last.max(first));
    }
}

/// Appends to `out` the INDEX entry of the write's records, `len` bytes
/// holding `records` records summed up in `sum` and `tally`, when they are
/// worth one.
pub(super) fn put(out: &mut Vec<u8>, sum: &mut Summary, tally: &Totals, len: usize, records: u64) {
    if len < INDEXED || sum.ends {
        return;
    }
    let first = sum.gap_first.min(tally.first_tick);
    // (A write with a gap holds any site and context: `decode` shows its
    // gaps whatever it filters.)
    let gap = sum.levels == u8::MAX;
    sum.contexts.sort_unstable();
    sum.contexts.dedup();
    let row = Row {
        offset: 0,
        len: len as u64,
        records,
        first_tick: if first == u64::MAX { 0 } else { first },
        last_tick: sum.gap_last.max(tally.last_tick),
        levels: sum.levels,
        threads: sum.threads,
        // The sites the write's counts name (made once a write, not a
        // record); a write with a gap holds "any".
        sites: if gap {
            Ids::ANY
        } else {
            // (By the ids the write's counts used, not the whole table of
            // every site ever met.)
            sum.sites.clear();
            sum.sites.extend(tally.sites_counted());
            // (At most a bit for 8 bytes of the write: the filter stays
            // within 1/64 of what it indexes.)
            Ids::of(&sum.sites, (len / 8).min(MOST_SITE_BITS))
        },
        contexts: if gap {
            Ids::ANY
        } else {
            Ids::of(&sum.contexts, (len / 8).min(MOST_CONTEXT_BITS))
        },
    };
    put_entry(out, tag::INDEX, |b| put_index(b, &row));
}
