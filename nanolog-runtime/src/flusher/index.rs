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
use crate::wire::index::{
    put_index, put_run, thread_bit, Ids, Row, Run, RunBlocks, MOST_CONTEXT_BITS, MOST_KEPT,
    MOST_RUN_BITS, MOST_SITE_BITS, RUN_BODY,
};
use crate::wire::tag;
use crate::wire::totals::Totals;

/// A write's records get an INDEX entry when they take at least this much
/// of the file: the entry (about 30 bytes) is then at most 6% of them. A
/// flusher writing a few records a millisecond makes smaller writes: they
/// are summed up together, a run of them at a time (see [`OpenRun`]).
const INDEXED: usize = 512;

/// A run of small writes ends once it takes this much of the file: its
/// RUN entry (335 bytes) is then half a percent of it, and a reader that
/// cannot leave the run out walks at most this far past it.
const RUN_BYTES: u64 = 64 << 10;

/// A write this large (its dictionary entries, its records) is not put in
/// a run: the stretches a RUN entry lists stay under 2 MiB (3-byte
/// varints, see `RUN_BODY`).
const RUN_MOST_WRITE: usize = 1 << 20;

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

/// Whether a write of `len` bytes of records summed up in `sum` gets an
/// INDEX entry of its own ([`put`]); the others are small, summed up in
/// runs (not the one that ends the file, which a reader always reads).
pub(super) fn indexed(sum: &Summary, len: usize) -> bool {
    len >= INDEXED && !sum.ends
}

/// Whether a write of `lead` bytes ahead of `len` bytes of records summed
/// up in `sum` goes into a run.
pub(super) fn runs(sum: &Summary, lead: usize, len: usize) -> bool {
    !indexed(sum, len) && !sum.ends && lead + len <= RUN_MOST_WRITE
}

/// The placeholder of a run's RUN entry, put ahead of its first write's
/// entries: a whole entry of [`RUN_BODY`] zero bytes (a run of length 0:
/// none, to a reader), filled in when the run ends ([`OpenRun::entry`]).
pub(super) fn placeholder() -> Vec<u8> {
    let mut out = Vec::with_capacity(crate::wire::FRAME_LEN + RUN_BODY);
    put_entry(&mut out, tag::RUN, |b| b.resize(b.len() + RUN_BODY, 0));
    out
}

/// A run of small writes being made (FORMAT.md, "RUN"): a flusher that
/// writes every millisecond or so, a few records at a time, makes writes
/// too small for an INDEX entry each (24 bytes a record at one record a
/// write, against an entry's 30). Without one, a reader walks each of
/// their entries: a quiet service's day-long file (86 M records) took
/// seconds to give its last lines. Its writes are summed up together
/// instead, in the RUN entry put ahead of the first of them, whose body is
/// written once the run ends: a reader steps over the whole run, reading
/// only the dictionary entries and clock pairs it lists.
pub(super) struct OpenRun {
    /// The file it is in (`Writer::at`).
    generation: u64,
    /// Where its RUN entry starts.
    at: u64,
    /// Where its writes start (its entry's end) and where the last ends.
    start: u64,
    end: u64,
    records: u64,
    first_tick: u64,
    last_tick: u64,
    levels: u8,
    threads: u64,
    /// A write with a gap: any site and context.
    any: bool,
    sites: Vec<u32>,
    contexts: Vec<u32>,
    /// The writes' first regions (their dictionary entries and clock
    /// pairs), as offsets in the file.
    kept: Vec<(u64, u64)>,
    /// The blocks its writes' records were written as.
    blocks: RunBlocks,
}

impl OpenRun {
    /// A run whose RUN entry is written at `at` of the file of generation
    /// `generation`.
    pub(super) fn new(generation: u64, at: u64) -> OpenRun {
        let start = at + (crate::wire::FRAME_LEN + RUN_BODY) as u64;
        OpenRun {
            generation,
            at,
            start,
            end: start,
            records: 0,
            first_tick: u64::MAX,
            last_tick: 0,
            levels: 0,
            threads: 0,
            any: false,
            sites: Vec::new(),
            contexts: Vec::new(),
            kept: Vec::new(),
            blocks: RunBlocks::default(),
        }
    }

    /// Whether a write of `lead` bytes (its first region) and `len` (its
    /// records) to the file of generation `generation` can join the run:
    /// the same file, the run not too long, a stretch left for its first
    /// region.
    pub(super) fn takes(&self, generation: u64, lead: usize, len: usize) -> bool {
        generation == self.generation
            && self.end - self.start + (lead + len) as u64 <= RUN_BYTES
            && (lead == 0 || self.kept.len() < MOST_KEPT)
    }

    /// The write at `at` of `lead` bytes of first region then `len` bytes
    /// of `records` records, summed up in `sum` and `tally`, was written;
    /// its records as a block of `block`'s codec and raw length, if so.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        at: u64,
        lead: usize,
        len: usize,
        records: u64,
        block: Option<(u8, usize)>,
        sum: &Summary,
        tally: &Totals,
    ) {
        if let Some((codec, raw)) = block {
            match codec {
                crate::wire::block::DEFLATE_COMPACT => self.blocks.deflate += 1,
                _ => self.blocks.lz4 += 1,
            }
            self.blocks.bytes += len as u64;
            self.blocks.raw += raw as u64;
        }
        if lead > 0 {
            self.kept.push((at, at + lead as u64));
        }
        self.end = at + (lead + len) as u64;
        self.records += records;
        self.first_tick = self.first_tick.min(sum.gap_first.min(tally.first_tick));
        self.last_tick = self.last_tick.max(sum.gap_last.max(tally.last_tick));
        self.levels |= sum.levels;
        self.threads |= sum.threads;
        self.any |= sum.levels == u8::MAX;
        if !self.any {
            self.sites.extend(tally.sites_counted());
            self.contexts.extend_from_slice(&sum.contexts);
            // (Kept short: a run's records switch between a few contexts
            // again and again.)
            for ids in [&mut self.sites, &mut self.contexts] {
                if ids.len() > 1024 {
                    ids.sort_unstable();
                    ids.dedup();
                }
            }
        }
    }

    /// The file it is in, and where its RUN entry is.
    pub(super) fn place(&self) -> (u64, u64) {
        (self.generation, self.at)
    }

    /// Its RUN entry, of the placeholder's length; `None` if its body would
    /// not fit (it does by [`RUN_BODY`]'s reckoning).
    pub(super) fn entry(mut self) -> Option<Vec<u8>> {
        let len = self.end - self.start;
        let bits = (len as usize / 8).min(MOST_RUN_BITS);
        let row = Row {
            offset: self.start,
            len,
            records: self.records,
            first_tick: if self.first_tick == u64::MAX {
                0
            } else {
                self.first_tick
            },
            last_tick: self.last_tick,
            levels: self.levels,
            threads: self.threads,
            sites: filter(&mut self.sites, self.any, bits),
            contexts: filter(&mut self.contexts, self.any, bits),
        };
        let mut out = Vec::with_capacity(crate::wire::FRAME_LEN + RUN_BODY);
        let kept = std::mem::take(&mut self.kept);
        let blocks = self.blocks;
        put_entry(&mut out, tag::RUN, |b| {
            put_run(b, &Run { row, kept, blocks })
        });
        (out.len() == crate::wire::FRAME_LEN + RUN_BODY).then_some(out)
    }
}

/// The filter of ids `ids` (made unique here) in at most `bits` bits, or
/// "any" when `any` (a write or run with a gap: `decode` shows gaps
/// whatever it filters), for an INDEX or RUN entry.
fn filter(ids: &mut Vec<u32>, any: bool, bits: usize) -> Ids {
    if any {
        return Ids::ANY;
    }
    ids.sort_unstable();
    ids.dedup();
    Ids::of(ids, bits)
}

/// Appends to `out` the INDEX entry of the write's records, `len` bytes
/// holding `records` records summed up in `sum` and `tally`, when they are
/// worth one.
pub(super) fn put(out: &mut Vec<u8>, sum: &mut Summary, tally: &Totals, len: usize, records: u64) {
    if !indexed(sum, len) {
        return;
    }
    let first = sum.gap_first.min(tally.first_tick);
    // (A write with a gap holds any site and context: `decode` shows its
    // gaps whatever it filters.)
    let gap = sum.levels == u8::MAX;
    // (By the ids the write's counts used, not the whole table of every
    // site ever met.)
    sum.sites.clear();
    sum.sites.extend(tally.sites_counted());
    // (At most a bit for 8 bytes of the write: a filter stays within 1/64
    // of what it indexes.)
    let bits = |most: usize| (len / 8).min(most);
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
        sites: filter(&mut sum.sites, gap, bits(MOST_SITE_BITS)),
        contexts: filter(&mut sum.contexts, gap, bits(MOST_CONTEXT_BITS)),
    };
    put_entry(out, tag::INDEX, |b| put_index(b, &row));
}
