//! The pre-scan of a narrow filter: the stops of the records it passes,
//! found a wave of extents at a time across cores before the streams
//! read them.

use super::*;

/// What a narrow filter's pre-scan found of an item of a stream.
#[derive(Debug, Clone, Default)]
pub(super) enum Scan {
    /// Read it whole (not an extent, not pre-scanned, or given up on).
    #[default]
    Whole,
    /// In a wave not yet pre-scanned.
    Pending,
    /// Only the records at these stops are read.
    Stops(Vec<Stop>),
}

/// An extent to pre-scan (see [`Merge::plan_prescan`]).
pub(super) struct Job<'a> {
    stream: usize,
    item: usize,
    /// The first of its stream's extents to pre-scan.
    first: bool,
    file: &'a LogFile,
    file_ix: usize,
    /// Where its item is in its file (the order waves take).
    at: usize,
    thread: u32,
    start: usize,
    end: usize,
    ctx: u32,
}

/// About this many bytes of extents a pre-scan wave: memory and the time
/// to the first record stay bounded however large the set.
pub(super) const WAVE_BYTES: usize = 64 << 20;

/// At most a stop per this many bytes of an extent.
pub(super) const BYTES_PER_STOP: usize = 256;

impl<'a> Merge<'a> {
    /// Under a narrow filter (a level or site), before the first event:
    /// plans the pre-scan of every extent the streams will read, each
    /// stream's first then in file order, done a wave at a time as the
    /// streams reach them
    /// ([`Merge::prescan_wave`]). Reading one record in a thousand, the
    /// merge was a serial walk of every record's header on one core; a
    /// wave finds the stops of the records the filter passes, half its
    /// extents on another core, and the streams then read only those.
    pub(super) fn plan_prescan(&mut self) {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        let mut jobs = Vec::new();
        for (c, s) in self.streams.iter().enumerate() {
            for (i, item) in s.items.iter().enumerate().skip(s.next_item) {
                let Item::Extent { start, end, ctx } = *item else {
                    continue;
                };
                let at = s.file.offset_of(item);
                if s.file.lazy_block(start).is_some()
                    || at < self.filter.min_offset
                    || self.filter.max_offset.is_some_and(|m| at >= m)
                {
                    continue;
                }
                let first = jobs.last().is_none_or(|j: &Job<'a>| j.stream != c);
                jobs.push(Job {
                    stream: c,
                    item: i,
                    first,
                    file: s.file,
                    file_ix: s.file_ix,
                    at,
                    thread: s.thread,
                    start,
                    end,
                    ctx,
                });
            }
        }
        let total: usize = jobs.iter().map(|j| j.end - j.start).sum();
        if total < self.prescan_min {
            return;
        }
        // Each stream's first extent first (the merge reads every
        // stream's first record before it gives one: a late file's too),
        // then file order, the order a set's files are read in.
        jobs.sort_unstable_by_key(|j| (!j.first, j.file_ix, j.at));
        for j in &jobs {
            let s = &mut self.streams[j.stream];
            if s.stops.is_empty() {
                s.stops = vec![Scan::Whole; s.items.len()];
            }
            s.stops[j.item] = Scan::Pending;
        }
        self.jobs = jobs;
    }

    /// Pre-scans the next wave of [`Merge::plan_prescan`]'s extents (about
    /// [`WAVE_BYTES`] of them, in its order), this thread and another
    /// taking half each. An extent whose walk fails, that passes more than
    /// a record per [`BYTES_PER_STOP`] bytes (a filter that passes much:
    /// the stops would cost memory for nothing), or whose file was cut
    /// meanwhile is read whole, as without a pre-scan: the output is the
    /// same.
    pub(super) fn prescan_wave(&mut self) {
        /// A pre-scanning thread gives back the pages behind it once it
        /// has gone this far in a file.
        const STRETCH_BYTES: usize = 4 << 20;
        let first = self.next_job;
        let mut bytes = 0;
        let last = self.jobs[first..]
            .iter()
            .position(|j| {
                bytes += j.end - j.start;
                bytes >= self.wave_bytes
            })
            .map_or(self.jobs.len(), |i| first + i + 1);
        self.next_job = last;
        let wave = &self.jobs[first..last];
        let (allowed, plans, clocks) = (&self.allowed, &self.plans, &self.clocks);
        let until = self.filter.until_ns.is_some();
        let scan = |j: &Job<'a>| -> Scan {
            let mut ext = Extent::new(j.file, j.thread, j.start, j.end, j.ctx, Clock::Untimed);
            let (allowed, plans) = (&allowed[j.file_ix][..], &plans[j.file_ix][..]);
            let mut stops = Vec::new();
            let most = (j.end - j.start) / BYTES_PER_STOP + 1;
            while let Some(rec) = ext.next_allowed(&clocks[j.file_ix], allowed, plans, until) {
                let Some(stop) = rec.ok().and_then(|r| ext.stop_of(r.tick())) else {
                    return Scan::Whole;
                };
                stops.push(stop);
                if stops.len() > most {
                    return Scan::Whole;
                }
            }
            if ext.shrank() {
                return Scan::Whole;
            }
            Scan::Stops(stops)
        };
        // Two halves of about equal bytes: this thread takes the first.
        let mut half = 0;
        let split = wave
            .iter()
            .position(|j| {
                half += j.end - j.start;
                half * 2 >= bytes
            })
            .map_or(wave.len(), |i| i + 1);
        let (mine, theirs) = wave.split_at(split);
        // Each half's pages go back as it goes, a few MiB at a time (a
        // wave is 64 MiB: held to its end, a file's worth of pages stayed
        // mapped): from a file's first extent in the stretch to its last
        // (an extent is often smaller than the unit pages go back in).
        let scan_all = |jobs: &[Job<'a>]| -> Vec<Scan> {
            let mut out = Vec::with_capacity(jobs.len());
            let mut stretch: Option<(usize, usize, usize)> = None;
            for j in jobs {
                out.push(scan(j));
                stretch = match stretch {
                    Some((f, a, b)) if f == j.file_ix && j.start >= a => {
                        let b = b.max(j.end);
                        if b - a >= STRETCH_BYTES {
                            j.file.scanned(a, b);
                            Some((f, b, b))
                        } else {
                            Some((f, a, b))
                        }
                    }
                    Some((f, a, b)) => {
                        self.files[f].scanned(a, b);
                        Some((j.file_ix, j.start, j.end))
                    }
                    None => Some((j.file_ix, j.start, j.end)),
                };
            }
            if let Some((f, a, b)) = stretch {
                self.files[f].scanned(a, b);
            }
            out
        };
        let (found, other) = std::thread::scope(|s| {
            let other = s.spawn(|| scan_all(theirs));
            let found: Vec<_> = scan_all(mine);
            // A panic there (a bug): that half is read whole.
            (found, other.join().ok())
        });
        let found = found
            .into_iter()
            .chain(other.into_iter().flatten())
            .chain(std::iter::repeat(Scan::Whole));
        for (j, scan) in (first..last).zip(found) {
            let (c, item) = (self.jobs[j].stream, self.jobs[j].item);
            self.streams[c].stops[item] = scan;
        }
    }
}
