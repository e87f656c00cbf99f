//! Interleaving threads and files into one time order: a heap over one cursor
//! per (file, thread), each already in time order (as NanoLog's decompressor merges). Memory is one
//! cursor per stream, whatever the size of the logs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::extent::{Clock, Extent, Stop};
use super::file::{Block, Gap, Item, LogFile, SharedBlocks};
use super::map::Behind;
use super::{ReadError, Record, SiteEntry, TimeMap};
use crate::wire::block::INFLATED;
use crate::wire::record::SkipPlan;

mod batches;
mod filter;
mod prescan;
mod unsorted;

use batches::BlockCache;
pub use batches::{Batch, Batches};
pub use filter::{Event, Filter};
use prescan::{Job, Scan, WAVE_BYTES};

/// (time, clock domain, tick, file, thread, cursor) of a cursor's pending
/// event: the order of the merged output. Within one clock (one process's
/// files) ties are broken by tick, so roll boundaries keep their order.
type HeapKey = (i64, usize, u64, usize, u32, usize);

enum Opened<'a> {
    Extent(Extent<'a>, Option<Block>),
    Gap(Event<'a>),
    Nothing,
}

/// The batches after its streams ended that a file's pages are given back
/// at again ([`Merge::sweep`]): past how far rendering lags the merge (a
/// few batches a worker).
const SWEEPS: u32 = 64;

/// How far the slowest stream of a file goes on between two of
/// [`Merge::sweep`]'s looks at it.
const SWEEP_STEP: usize = 2 << 20;

struct Stream<'a> {
    file: &'a LogFile,
    file_ix: usize,
    thread: u32,
    items: &'a [Item],
    next_item: usize,
    extent: Option<Extent<'a>>,
    /// The block `extent` reads, when the merge inflated it (see
    /// `BlockCache`): held while it does.
    held: Option<Block>,
    /// An event read from `held` was handed out: a batch holds its block.
    emitted: bool,
    done: bool,
    /// Per item (empty: all [`Scan::Whole`]), what the pre-scan of a
    /// narrow filter found.
    stops: Vec<Scan>,
    /// The stops of the extent being read, and the next one.
    reading: Option<(Vec<Stop>, usize)>,
}

impl Stream<'_> {
    /// It has no more events: its block is let go, to the batch being
    /// filled if it gave a record of it.
    fn finish(&mut self) -> Option<Block> {
        self.done = true;
        self.extent = None;
        self.switch(None)
    }

    /// It reads block `held` (or none) now: the one before, if it gave a
    /// record of it, for the batch being filled to hold.
    fn switch(&mut self, held: Option<Block>) -> Option<Block> {
        let old = std::mem::replace(&mut self.held, held);
        std::mem::take(&mut self.emitted).then_some(old).flatten()
    }
}

/// The merged (or, with [`Merge::unsorted`], file-order) stream of events.
pub struct Merge<'a> {
    files: &'a [LogFile],
    allowed: Vec<Vec<bool>>,
    /// Whether `allowed` refuses a site of some file (a level or site
    /// filter): records are then taken by [`Extent::next_allowed`].
    narrowed: bool,
    /// Per file and site id, how a refused site's records are stepped over
    /// (`None`: admitted, or by its kinds).
    plans: Vec<Vec<Option<SkipPlan>>>,
    /// Below this many bytes of extents to read, no pre-scan
    /// ([`Merge::plan_prescan`]).
    prescan_min: usize,
    /// The extents to pre-scan, in order, and the next wave's first.
    jobs: Vec<Job<'a>>,
    /// About this many bytes of extents a wave ([`WAVE_BYTES`]).
    wave_bytes: usize,
    next_job: usize,
    filter: Filter,
    streams: Vec<Stream<'a>>,
    heap: BinaryHeap<Reverse<HeapKey>>,
    /// The key of the cursor whose event comes next (not in `heap`).
    current: Option<HeapKey>,
    pending: Vec<Option<Event<'a>>>,
    sorted: bool,
    started: bool,
    /// Unsorted mode: position in files and their entry order.
    u_file: usize,
    u_item: usize,
    u_extent: Option<Extent<'a>>,
    u_held: Option<Block>,
    u_emitted: bool,
    /// Read through [`Batches`]: blocks past a file's resident budget are
    /// inflated here, not into the file's own cache.
    cache: Option<BlockCache>,
    errors: Vec<ReadError>,
    /// Per file, the clock its ticks are read by: files written by one
    /// process (a rolled set) share one map built from all their clock
    /// pairs, so records on both sides of a roll keep their order.
    clocks: Vec<std::sync::Arc<TimeMap>>,
    /// Per file, the index of the first file sharing its clock.
    domains: Vec<usize>,
    /// Per file, its pages behind every stream of it go back to the
    /// kernel (see [`Behind`]), looked at again from the offset beside it
    /// on (a quarter chunk on from the last look).
    behind: Vec<(Behind, usize)>,
    /// Per file, its slowest stream's offset at [`Merge::sweep`]'s last
    /// look.
    swept: Vec<usize>,
    /// Files whose streams all ended, with the batches they are still
    /// given back at (see [`Merge::sweep`]).
    ended: Vec<(usize, u32)>,
    /// Per file, its streams (they are made file by file): what a look
    /// behind them, or at whether they all ended, goes through.
    of_file: Vec<std::ops::Range<usize>>,
}

impl<'a> Merge<'a> {
    /// Events of all `files` in time order.
    pub fn new(files: &'a [LogFile], filter: Filter) -> Merge<'a> {
        Self::build(files, filter, true)
    }

    /// Events in file order: each file's entries as written, files one after another.
    pub fn unsorted(files: &'a [LogFile], filter: Filter) -> Merge<'a> {
        Self::build(files, filter, false)
    }

    fn build(files: &'a [LogFile], filter: Filter, sorted: bool) -> Merge<'a> {
        let allowed = files
            .iter()
            .map(|f| {
                f.site_slots()
                    .iter()
                    .map(|slot| {
                        slot.as_ref().is_some_and(|s| {
                            filter.min_level.is_none_or(|l| s.level >= l)
                                && filter.site.as_ref().is_none_or(|p| p(s))
                        })
                    })
                    .collect()
            })
            .collect::<Vec<Vec<bool>>>();
        // (A site id no entry defines is refused too, but no filter is
        // needed for that: a record of one is damage either way.)
        let narrowed = files.iter().zip(&allowed).any(|(f, allowed)| {
            f.site_slots()
                .iter()
                .zip(allowed)
                .any(|(slot, &keep)| slot.is_some() && !keep)
        });
        let plans = files
            .iter()
            .zip(&allowed)
            .map(|(f, allowed)| {
                f.site_slots()
                    .iter()
                    .zip(allowed)
                    .map(|(slot, &keep)| {
                        slot.as_ref()
                            .filter(|_| narrowed && !keep)
                            .and_then(|s| SkipPlan::of(&s.kinds))
                    })
                    .collect()
            })
            .collect();
        let mut streams = Vec::new();
        let mut of_file = vec![0..0; files.len()];
        if sorted {
            for (file_ix, f) in files.iter().enumerate() {
                let first = streams.len();
                for thread in f.stream_ids() {
                    if !filter.wants_thread(f, thread) {
                        continue;
                    }
                    let items = f.stream(thread);
                    streams.push(Stream {
                        file: f,
                        file_ix,
                        thread,
                        items,
                        // Items are in file order: skip those before
                        // `min_offset` by bisection, not one by one (a
                        // shipper reads a large file a batch at a time).
                        next_item: items.partition_point(|it| f.offset_of(it) < filter.min_offset),
                        extent: None,
                        held: None,
                        emitted: false,
                        done: false,
                        stops: Vec::new(),
                        reading: None,
                    });
                }
                of_file[file_ix] = first..streams.len();
            }
        }
        let n = streams.len();
        let (clocks, domains) = shared_clocks(files);
        let u_item = files.first().map_or(0, |f| {
            f.order()
                .partition_point(|(_, it)| f.offset_of(it) < filter.min_offset)
        });
        Merge {
            files,
            allowed,
            narrowed,
            plans,
            // Below this much to walk, a thread costs more than it saves.
            prescan_min: 4 << 20,
            jobs: Vec::new(),
            wave_bytes: WAVE_BYTES,
            next_job: 0,
            filter,
            streams,
            heap: BinaryHeap::with_capacity(n),
            current: None,
            pending: vec![None; n],
            sorted,
            started: false,
            u_file: 0,
            u_item,
            u_extent: None,
            u_held: None,
            u_emitted: false,
            cache: None,
            errors: Vec::new(),
            clocks,
            domains,
            behind: files.iter().map(|_| (Behind::default(), 0)).collect(),
            ended: Vec::new(),
            swept: vec![0; files.len()],
            of_file,
        }
    }

    /// A stream of file `file_ix` opened an extent at offset `at`: once a
    /// quarter chunk on from the last look, the pages before every stream
    /// of the file go back (its streams move together, as their threads'
    /// records interleave in time and in the file alike).
    ///
    /// A stream that waits (its next record is later than the merge has
    /// reached: the last record of a thread that stopped logging, say)
    /// holds only the extent it reads: the pages around it that the
    /// file's other streams read go back as well. Holding every page after
    /// the least stream's extent, a merge of a group of rolled files kept
    /// each file's last stretch mapped until the group's end: 190 MB of a
    /// 445 MB set for `--level error` (measured 2026-12-06).
    fn release_behind(&mut self, file_ix: usize, at: usize) {
        let next = &mut self.behind[file_ix].1;
        if at < *next {
            return;
        }
        *next = at.saturating_add(Behind::CHUNK / 4);
        let least = self.slowest(file_ix);
        let file = &self.files[file_ix];
        file.passed(&mut self.behind[file_ix].0, least.unwrap_or(usize::MAX));
        // Between the least stream and this one: around the extents the
        // file's live streams read.
        let mut held: Vec<(usize, usize)> = self.streams[self.of_file[file_ix].clone()]
            .iter()
            .filter(|s| !s.done)
            .filter_map(|s| match s.items.get(s.next_item.saturating_sub(1))? {
                &Item::Extent { start, end, .. } if end <= INFLATED => Some((start, end)),
                it => {
                    let at = s.file.offset_of(it);
                    Some((at, at.saturating_add(1)))
                }
            })
            .collect();
        held.sort_unstable();
        let mut from = least.unwrap_or(usize::MAX);
        for (a, b) in held {
            if a > from {
                file.release_range(from, a.min(at));
            }
            from = from.max(b);
        }
    }

    /// Where the slowest live stream of file `file_ix` reads (the offset of
    /// its current item; `usize::MAX` for one not reading yet), `None` when
    /// none is live.
    fn slowest(&self, file_ix: usize) -> Option<usize> {
        self.streams[self.of_file[file_ix].clone()]
            .iter()
            .filter(|s| !s.done)
            .map(|s| {
                let reading = s.items.get(s.next_item.saturating_sub(1));
                reading.map_or(usize::MAX, |it| s.file.offset_of(it))
            })
            .min()
    }

    /// A stream of file `file_ix` ended: once they all have, the file's
    /// pages go back.
    fn stream_done(&mut self, file_ix: usize) {
        let live = self.streams[self.of_file[file_ix].clone()]
            .iter()
            .any(|s| !s.done);
        if !live {
            self.files[file_ix].done_with(&mut self.behind[file_ix].0, usize::MAX);
            self.ended.push((file_ix, SWEEPS));
        }
    }

    /// Gives back again the pages of the files whose streams ended a few
    /// batches ago: their last records are rendered after the merge has
    /// left them (on other threads, batches behind), each mapping the
    /// pages around it again. A narrow read of a group of rolled files
    /// (`decode --level error`: a record every few pages) otherwise kept
    /// several megabytes of each file mapped to the group's end.
    ///
    /// The files still read are given back behind their slowest stream
    /// once it has gone [`SWEEP_STEP`] on since the last time: the pages
    /// rendering mapped again behind the merge go then, not a chunk later.
    fn sweep(&mut self) {
        let (files, behind) = (self.files, &mut self.behind);
        self.ended.retain_mut(|(f, left)| {
            files[*f].done_with(&mut behind[*f].0, usize::MAX);
            *left -= 1;
            *left > 0
        });
        for (file_ix, file) in self.files.iter().enumerate() {
            let least = self.slowest(file_ix);
            let swept = &mut self.swept[file_ix];
            if let Some(least) =
                least.filter(|&l| l != usize::MAX && l >= swept.saturating_add(SWEEP_STEP))
            {
                *swept = least;
                file.done_with(&mut self.behind[file_ix].0, least);
            }
        }
    }

    /// Tests only: pre-scans under a narrow filter (see
    /// [`Merge::plan_prescan`]) from `min_bytes` of extents on (4 MiB
    /// unless set), in waves of `wave_bytes` (64 MiB).
    #[doc(hidden)]
    pub fn __prescan(mut self, min_bytes: usize, wave_bytes: usize) -> Self {
        self.prescan_min = min_bytes;
        self.wave_bytes = wave_bytes.max(1);
        self
    }

    /// Reads file `file_ix` (an index into the files given) by `clock`,
    /// not by its own clock pairs: a reader given one file of a set at a
    /// time (a follower) stamps its records as a reader of the whole set
    /// does, with the union of the set's pairs ([`TimeMap::union`]). Call
    /// before the first event. (Files read by one clock may share it: an
    /// `Arc<TimeMap>` is taken as it is.)
    pub fn set_clock(&mut self, file_ix: usize, clock: impl Into<std::sync::Arc<TimeMap>>) {
        if let Some(c) = self.clocks.get_mut(file_ix) {
            *c = clock.into();
        }
    }

    /// The files being read.
    pub fn files(&self) -> &'a [LogFile] {
        self.files
    }

    fn keep_record(&self, file_ix: usize, rec: &Record<'a>) -> Option<bool> {
        // Some(false): skip; None: past `until`, the stream is finished.
        let ns = rec.unix_ns();
        if self.filter.until_ns.is_some_and(|u| ns > u) {
            return None;
        }
        if self.filter.since_ns.is_some_and(|s| ns < s) {
            return Some(false);
        }
        Some(
            self.allowed[file_ix]
                .get(rec.site().id as usize)
                .copied()
                .unwrap_or(false),
        )
    }

    fn keep_gap(&self, file: &LogFile, g: &Gap) -> bool {
        !self.filter.no_gaps
            && (g.is_lost() || self.filter.wants_thread(file, g.thread))
            && self.filter.since_ns.is_none_or(|s| g.last_unix_ns >= s)
            && self.filter.until_ns.is_none_or(|u| g.first_unix_ns <= u)
    }

    /// What a thread's next item yields: an extent to read, a gap to
    /// report, or nothing (filtered out, or before `min_offset`).
    fn open_item(
        &mut self,
        file: &'a LogFile,
        file_ix: usize,
        thread: u32,
        item: Item,
    ) -> Opened<'a> {
        if self.past_max(file, &item) || file.offset_of(&item) < self.filter.min_offset {
            return Opened::Nothing;
        }
        match item {
            Item::Extent { start, end, ctx } => {
                let lazy = self.cache.as_mut().zip(file.lazy_block(start));
                let Some((cache, b)) = lazy else {
                    let e = Extent::new(file, thread, start, end, ctx, Clock::Untimed);
                    return Opened::Extent(e, None);
                };
                let blk = cache.blocks.get(file, file_ix, b);
                // SAFETY: the bytes are a `Vec` in an `Arc` that nothing
                // writes after it is made; this slice is read while the
                // `Arc` is held: by the stream that reads the extent (the
                // `Block` returned beside it, until it switches), then by
                // every `Batch` a record of it is put in. A record handed
                // out comes from its stream's block; `Batches::fill` gives
                // the batch the blocks the streams hold when it starts and
                // when it ends, and each block a stream left meanwhile
                // after a record of it was handed out (`Stream::switch`).
                // A merge with a cache hands out records only through
                // batches, whose events are borrowed from the batch: none
                // outlives the blocks it holds.
                let all: &'a [u8] = unsafe { std::slice::from_raw_parts(blk.as_ptr(), blk.len()) };
                let body = file.in_block(b, all, start..end);
                let e = Extent::over(file, thread, start, end, ctx, Clock::Untimed, body);
                Opened::Extent(e, Some(blk))
            }
            Item::Drop { ix, .. } => {
                let d = file.drop_info(ix);
                let g = Gap::stamped(&self.clocks[file_ix], thread, d.count, d.first, d.last);
                if self.keep_gap(file, &g) {
                    Opened::Gap(Event::Gap(g, file))
                } else {
                    Opened::Nothing
                }
            }
        }
    }

    /// Whether `item` lies at or after `max_offset` (and so do the items
    /// after it in its file).
    fn past_max(&self, file: &LogFile, item: &Item) -> bool {
        self.filter
            .max_offset
            .is_some_and(|m| file.offset_of(item) >= m)
    }

    /// Advances cursor `c` to its next kept event.
    fn advance(&mut self, c: usize) -> Option<Event<'a>> {
        loop {
            let cur = &mut self.streams[c];
            if cur.done {
                return None;
            }
            // The stream's next record in the extent it reads, if it reads
            // one: by the stops its pre-scan found (only the records the
            // filter passes, and those `until` is checked by), else record
            // by record (stepping over refused sites' records unread).
            let clock = &self.clocks[cur.file_ix];
            let next = match (cur.extent.as_mut(), cur.reading.as_mut()) {
                (Some(ext), Some((stops, i))) => {
                    let next = stops.get(*i).and_then(|&stop| ext.record_at(stop, clock));
                    *i += 1;
                    Some(match next {
                        Some(Ok(rec)) => Some(rec),
                        Some(Err(e)) => {
                            self.errors.push(e);
                            None
                        }
                        None => None,
                    })
                }
                (Some(ext), None) => {
                    let until = self.filter.until_ns.is_some();
                    Some(if self.narrowed {
                        let n = (&self.allowed[cur.file_ix][..], &self.plans[cur.file_ix][..]);
                        extent_next_allowed(ext, clock, n, until, &mut self.errors)
                    } else {
                        extent_next(ext, clock, &mut self.errors)
                    })
                }
                (None, _) => None,
            };
            if let Some(rec) = next {
                let Some(rec) = rec else {
                    cur.extent = None;
                    cur.reading = None;
                    continue;
                };
                let file_ix = cur.file_ix;
                match self.keep_record(file_ix, &rec) {
                    Some(true) => return Some(Event::Record(rec)),
                    Some(false) => continue,
                    None => {
                        let left = self.streams[c].finish();
                        self.left(left);
                        self.stream_done(file_ix);
                        return None;
                    }
                }
            }
            let Some(&item) = cur.items.get(cur.next_item) else {
                let left = cur.finish();
                let file_ix = cur.file_ix;
                self.left(left);
                self.stream_done(file_ix);
                return None;
            };
            cur.next_item += 1;
            let (file, file_ix, thread) = (cur.file, cur.file_ix, cur.thread);
            if self.past_max(file, &item) {
                let left = self.streams[c].finish();
                self.left(left);
                self.stream_done(file_ix);
                return None;
            }
            match self.open_item(file, file_ix, thread, item) {
                Opened::Extent(e, held) => {
                    let ix = self.streams[c].next_item - 1;
                    while matches!(self.streams[c].stops.get(ix), Some(Scan::Pending))
                        && self.next_job < self.jobs.len()
                    {
                        self.prescan_wave();
                    }
                    let cur = &mut self.streams[c];
                    cur.reading = match cur.stops.get_mut(ix).map(std::mem::take) {
                        Some(Scan::Stops(v)) => Some((v, 0)),
                        _ => None,
                    };
                    cur.extent = Some(e);
                    let left = cur.switch(held);
                    self.left(left);
                    self.release_behind(file_ix, file.offset_of(&item));
                }
                Opened::Gap(ev) => return Some(ev),
                Opened::Nothing => {}
            }
        }
    }

    fn key(&self, c: usize, ev: &Event<'a>) -> HeapKey {
        let cur = &self.streams[c];
        let (ns, tick) = match ev {
            Event::Record(r) => (r.unix_ns(), r.tick()),
            Event::Gap(g, _) => (g.first_unix_ns, g.first_tick),
        };
        (
            ns,
            self.domains[cur.file_ix],
            tick,
            cur.file_ix,
            cur.thread,
            c,
        )
    }

    fn push(&mut self, c: usize, ev: Event<'a>) {
        let key = self.key(c, &ev);
        self.heap.push(Reverse(key));
        self.pending[c] = Some(ev);
    }

    fn next_sorted(&mut self) -> Option<Event<'a>> {
        if !self.started {
            self.started = true;
            if self.narrowed {
                self.plan_prescan();
            }
            for c in 0..self.streams.len() {
                if let Some(ev) = self.advance(c) {
                    self.push(c, ev);
                }
            }
            self.current = self.heap.pop().map(|Reverse(k)| k);
        }
        // The cursor with the earliest event is kept out of the heap: while
        // its next event is still no later than the heap's earliest (a thread
        // that ran alone for a while), no heap operation is needed.
        let key = self.current?;
        let c = key.5;
        // Copied out, not taken: `take` wrote a `None` over the 72-byte slot
        // and read it back at once, a store-forwarding stall that was half
        // the merge's own time. The slot is overwritten below, or cleared
        // when the cursor ends.
        let ev = self.pending[c]?;
        self.streams[c].emitted = true;
        match self.advance(c) {
            Some(next) => {
                let k = self.key(c, &next);
                self.pending[c] = Some(next);
                match self.heap.peek_mut() {
                    Some(mut top) if top.0 < k => {
                        self.current = Some(top.0);
                        *top = Reverse(k);
                    }
                    _ => self.current = Some(k),
                }
            }
            None => {
                self.pending[c] = None;
                self.current = self.heap.pop().map(|Reverse(k)| k);
            }
        }
        Some(ev)
    }

    /// A block a stream left after giving records of it: held by the batch
    /// being filled (without a cache, there is none).
    fn left(&mut self, blk: Option<Block>) {
        if let (Some(blk), Some(cache)) = (blk, self.cache.as_mut()) {
            cache.left.push(blk);
        }
    }

    /// Damaged extents met so far (their remaining records are skipped).
    pub fn take_errors(&mut self) -> Vec<ReadError> {
        std::mem::take(&mut self.errors)
    }
}

impl<'a> Iterator for Merge<'a> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        if self.sorted {
            self.next_sorted()
        } else {
            self.next_unsorted()
        }
    }
}

/// The next record of `ext`, stamped by `clock`; `None` at the end of the
/// extent, or at damage (reported in `errors`; the rest of the extent is
/// skipped).
#[inline]
fn extent_next<'a>(
    ext: &mut Extent<'a>,
    clock: &TimeMap,
    errors: &mut Vec<ReadError>,
) -> Option<Record<'a>> {
    match ext.next_record(Some(clock))? {
        Ok(rec) => Some(rec),
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

/// [`extent_next`] under a level or site filter: the next record of a site
/// `allowed` admits, or one to check `until` by (see
/// [`Extent::next_allowed`]). Kept out of line: the unfiltered reader's
/// loop stays as it was.
#[inline(never)]
fn extent_next_allowed<'a>(
    ext: &mut Extent<'a>,
    clock: &TimeMap,
    (allowed, plans): (&[bool], &[Option<SkipPlan>]),
    until: bool,
    errors: &mut Vec<ReadError>,
) -> Option<Record<'a>> {
    match ext.next_allowed(clock, allowed, plans, until)? {
        Ok(rec) => Some(rec),
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

/// Each file's clock (see [`ClockGroups`](super::ClockGroups): the same
/// process id and the same calibrated rate, measured once per process, so
/// equal bit for bit only within one process), and the index of the first
/// file of its group.
fn shared_clocks(files: &[LogFile]) -> (Vec<std::sync::Arc<TimeMap>>, Vec<usize>) {
    let mut groups = super::ClockGroups::default();
    let group: Vec<usize> = files.iter().map(|f| groups.add(f)).collect();
    let maps = groups.maps();
    // Each file's domain: the index of the first file of its group.
    let mut first = vec![usize::MAX; maps.len()];
    let domains = group
        .iter()
        .enumerate()
        .map(|(j, &g)| {
            if first[g] == usize::MAX {
                first[g] = j;
            }
            first[g]
        })
        .collect();
    let clocks = group
        .iter()
        .map(|&g| std::sync::Arc::clone(&maps[g]))
        .collect();
    (clocks, domains)
}
