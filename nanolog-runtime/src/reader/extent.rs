//! Walking the records of an extent (one thread's run of records).

use super::error::ReadError;
use super::file::{Item, LogFile, Wave};
use super::map::Behind;
use super::record::{Head, Record};
use super::time::TimeMap;
use crate::wire::dict::SiteEntry;
use crate::wire::record::{SkipPlan, Strings};
use crate::wire::{self, get_varint};

/// Reading a file's records: every one, or those of a range of extents.
impl LogFile {
    /// Every record of every thread, thread by thread (not in time order; see
    /// [`Merge`](crate::reader::Merge) for that).
    pub fn records(&self) -> impl Iterator<Item = Result<Record<'_>, ReadError>> + '_ {
        self.streams
            .iter()
            .flat_map(move |(&thread, items)| {
                items.iter().flat_map(move |it| match *it {
                    Item::Extent { start, end, ctx } => {
                        Some(Extent::new(self, thread, start, end, ctx, Clock::OwnFile))
                    }
                    Item::Drop { .. } => None,
                })
            })
            .flatten()
    }

    /// The records of every extent in `range` (extents counted in file
    /// order), for splitting work across threads. Records come thread-run by
    /// thread-run, not in time order.
    pub fn records_of_extents(&self, range: std::ops::Range<usize>) -> ExtentRecords<'_> {
        ExtentRecords::new(self, self.order(), range)
    }

    /// Calls `f` with each record of the extents in `range` (as
    /// [`LogFile::records_of_extents`] gives them), inflating the blocks
    /// past the file's resident budget into one buffer of its own, one
    /// block at a time, as it reaches them: memory does not grow with the
    /// file's size.
    pub fn scan_extents(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        Walk::File(self).scan(range, f);
    }

    /// Calls `f` with the head of each record of the extents in `range`
    /// (as [`LogFile::scan_extents`] gives them): its site, thread, tick
    /// and length, its values stepped over unread (by their nibble codes
    /// where the site's arguments are numbers). Damage and a file cut
    /// while read are told as `scan_extents` tells them.
    pub fn tally_extents(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnMut(Result<Head<'_>, ReadError>),
    ) {
        Walk::File(self).tally(range, f);
    }

    /// Calls `f` with each record of a call site `allowed` admits (by site
    /// id) in the extents in `range`, as [`LogFile::scan_extents`] gives
    /// them; the others are stepped over unread, as
    /// [`LogFile::tally_extents`] steps over their values.
    pub fn scan_extents_of(
        &self,
        range: std::ops::Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        Walk::File(self).scan_of(range, allowed, f);
    }

    /// Per site id, how its records' arguments are stepped over unread
    /// (`None`: by their kinds, one by one).
    fn skip_plans(&self) -> Vec<Option<SkipPlan>> {
        self.site_slots()
            .iter()
            .map(|slot| slot.as_ref().and_then(|s| SkipPlan::of(&s.kinds)))
            .collect()
    }

    /// The earliest and the latest tick of the file's records and drop
    /// gaps, or `None` when it has none: what a reader of a large set needs
    /// to know which files' records interleave. The earliest is
    /// [`LogFile::first_tick`]'s; the latest takes each thread's last
    /// extent, read through.
    pub fn tick_span(&self) -> Option<(u64, u64)> {
        let first = self.first_tick(0)?;
        let mut last = first;
        for items in self.streams.values() {
            for it in items {
                if let Item::Drop { ix, .. } = *it {
                    last = last.max(self.drop_info(ix).last);
                }
            }
            // A thread's records are in time order: its latest is in its
            // last extent (a damaged one gives the records before the
            // damage).
            let extent = items.iter().rev().find_map(|it| match *it {
                Item::Extent { start, end, .. } => Some((start, end)),
                Item::Drop { .. } => None,
            });
            if let Some((start, end)) = extent {
                let ext = Extent::new(self, 0, start, end, 0, Clock::Untimed);
                for r in ext.map_while(Result::ok) {
                    last = last.max(r.tick());
                }
            }
        }
        Some((first, last))
    }
}

/// Reading a [`Wave`]'s records (the type is the index's, in `file/scan.rs`).
impl<'w> Wave<'w> {
    /// The file, as indexed up to the run's end.
    pub fn file(&self) -> &'w LogFile {
        self.file
    }

    /// How many extents the run holds.
    pub fn extent_count(&self) -> usize {
        extents(&self.file.order()[self.items.clone()]).count()
    }

    /// Calls `f` with each record of the run's extents in `range`
    /// (counted in file order from the run's first), as
    /// [`LogFile::scan_extents`] does.
    pub fn scan_extents(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        Walk::Wave(self).scan(range, f);
    }

    /// Calls `f` with each record of a call site `allowed` admits in the
    /// run's extents in `range`, as [`LogFile::scan_extents_of`] does.
    pub fn scan_extents_of(
        &self,
        range: std::ops::Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        Walk::Wave(self).scan_of(range, allowed, f);
    }

    /// Calls `f` with the head of each record of the run's extents in
    /// `range`, as [`LogFile::tally_extents`] does.
    pub fn tally_extents(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnMut(Result<Head<'_>, ReadError>),
    ) {
        Walk::Wave(self).tally(range, f);
    }
}

/// A walk of a range of extents, the one behind the `scan_extents`,
/// `scan_extents_of` and `tally_extents` of a file and of a wave: where
/// their bodies are read from.
enum Walk<'w> {
    /// The file's own: its mapped bytes, its resident blocks, and the
    /// blocks past its budget inflated one at a time into the walk's
    /// buffer.
    File(&'w LogFile),
    /// A run of the file whose blocks were inflated ahead, as a wave (its
    /// extents before the wave's bytes read as the file's own).
    Wave(&'w Wave<'w>),
}

impl<'w> Walk<'w> {
    fn file(&self) -> &'w LogFile {
        match self {
            Walk::File(f) => f,
            Walk::Wave(w) => w.file,
        }
    }

    /// The file's order, or the run's part of it.
    fn items(&self) -> &'w [(u32, Item)] {
        match self {
            Walk::File(f) => f.order(),
            Walk::Wave(w) => &w.file.order()[w.items.clone()],
        }
    }

    fn scan(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        self.each_extent(range, |ext| ext.for_each(&mut f));
    }

    fn tally(&self, range: std::ops::Range<usize>, mut f: impl FnMut(Result<Head<'_>, ReadError>)) {
        let plans = self.file().skip_plans();
        self.each_extent(range, |ext| ext.heads(&plans, &mut f));
    }

    fn scan_of(
        &self,
        range: std::ops::Range<usize>,
        allowed: &[bool],
        mut f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        let plans = self.file().skip_plans();
        self.each_extent(range, |ext| ext.records_of(allowed, &plans, &mut f));
    }

    /// Calls `f` with each extent in `range` (counted in the walk's
    /// order), unstamped, over the wave's inflated bytes, a block past the
    /// file's budget inflated into one buffer, or the file's own bytes,
    /// whose pages go back as the walk passes them (a worker's range is a
    /// stretch of the file).
    fn each_extent(&self, range: std::ops::Range<usize>, mut f: impl FnMut(&mut Extent<'_>)) {
        let file = self.file();
        let mut buf = Vec::new();
        let mut loaded = None;
        let mut behind = None;
        let mut last = 0;
        for (thread, start, end, ctx) in extents(self.items()).skip(range.start).take(range.len()) {
            let body = match self {
                Walk::Wave(w) if start >= w.base => {
                    w.bytes.get(start - w.base..end - w.base).unwrap_or(&[])
                }
                _ => {
                    let at = file.file_offset(start);
                    last = end;
                    file.passed(behind.get_or_insert_with(|| Behind::at(at)), at);
                    match file.lazy_block(start) {
                        Some(b) => {
                            if loaded != Some(b) {
                                file.inflate_block(b, &mut buf);
                                loaded = Some(b);
                            }
                            file.in_block(b, &buf, start..end)
                        }
                        None => file.bytes(start..end),
                    }
                }
            };
            f(&mut Extent::over(
                file,
                thread,
                start,
                end,
                ctx,
                Clock::Untimed,
                body,
            ));
        }
        if let Some(behind) = behind.as_mut() {
            file.done_with(behind, file.file_offset(last));
        }
    }
}

/// The extents among `items` (a file's order, or part of it), in their
/// order: (thread, start, end, context), as `scan_extents` counts them.
fn extents(items: &[(u32, Item)]) -> impl Iterator<Item = (u32, usize, usize, u32)> + '_ {
    items.iter().filter_map(|&(thread, it)| match it {
        Item::Extent { start, end, ctx } => Some((thread, start, end, ctx)),
        Item::Drop { .. } => None,
    })
}

/// The records of a range of extents, from [`LogFile::records_of_extents`];
/// their wall-clock time is computed only when asked for.
pub struct ExtentRecords<'a> {
    file: &'a LogFile,
    items: std::slice::Iter<'a, (u32, Item)>,
    skip: usize,
    left: usize,
    current: Option<Extent<'a>>,
}

impl<'a> ExtentRecords<'a> {
    pub(super) fn new(
        file: &'a LogFile,
        order: &'a [(u32, Item)],
        range: std::ops::Range<usize>,
    ) -> ExtentRecords<'a> {
        ExtentRecords {
            file,
            items: order.iter(),
            skip: range.start,
            left: range.len(),
            current: None,
        }
    }
}

impl<'a> Iterator for ExtentRecords<'a> {
    type Item = Result<Record<'a>, ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.current.as_mut() {
                match e.next() {
                    Some(r) => return Some(r),
                    None => self.current = None,
                }
            }
            if self.left == 0 {
                return None;
            }
            let &(thread, item) = self.items.next()?;
            let Item::Extent { start, end, ctx } = item else {
                continue;
            };
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.left -= 1;
            self.current = Some(Extent::new(
                self.file,
                thread,
                start,
                end,
                ctx,
                Clock::Untimed,
            ));
        }
    }
}

/// The records of one extent, in order.
pub(crate) struct Extent<'a> {
    file: &'a LogFile,
    thread: u32,
    /// The context of its next record (see `Item::Extent`): where the
    /// extent starts, then its last context switch.
    ctx: u32,
    /// The context its last switch named, as the file numbers contexts (0
    /// before its first): a switch of format version 7 states its context
    /// as the difference from it.
    switched: u32,
    /// Its file is of version 7 on (see `switched`).
    relative_switches: bool,
    body: &'a [u8],
    body_offset: usize,
    pos: usize,
    tick: u64,
    failed: bool,
    /// Its bytes are the file's mapped pages (not a block's inflated
    /// bytes, which no truncation of the file can take away).
    mapped: bool,
    rec_start: usize,
    /// How its records are stamped when iterated.
    clock: Clock,
    /// How its file stores strings (taken once, not per record).
    strings: Strings<'a>,
    /// Its bytes are gone since the file was indexed (a block that no
    /// longer inflates: the file was cut or rewritten while being read):
    /// said once, as its first item.
    gone: bool,
}

/// Where a record of an extent starts, and the extent's state there: what
/// it takes to read that record alone ([`Extent::record_at`]). A merge
/// under a narrow filter finds its records' stops on both cores first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stop {
    pos: usize,
    /// The tick before the record's (its delta is added to it).
    tick: u64,
    ctx: u32,
    switched: u32,
}

/// Which clock stamps an extent's records with wall-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The file's own time map, when the record is made.
    OwnFile,
    /// None now: computed from the file's time map when asked for.
    Untimed,
}

impl<'a> Extent<'a> {
    /// The records of the extent body at `[start, end)` of `file`.
    pub(crate) fn new(
        file: &'a LogFile,
        thread: u32,
        start: usize,
        end: usize,
        ctx: u32,
        clock: Clock,
    ) -> Extent<'a> {
        Self::over(file, thread, start, end, ctx, clock, file.bytes(start..end))
    }

    /// The records of the extent body at `[start, end)` of `file`, whose
    /// bytes are `body` (inflated by the caller).
    pub(crate) fn over(
        file: &'a LogFile,
        thread: u32,
        start: usize,
        end: usize,
        ctx: u32,
        clock: Clock,
        body: &'a [u8],
    ) -> Extent<'a> {
        debug_assert!(body.is_empty() || body.len() == end - start);
        let base = wire::extent::get_header(body).1;
        Extent {
            file,
            thread,
            ctx,
            switched: 0,
            relative_switches: file.header().version >= 7,
            body,
            body_offset: start,
            pos: base.map_or(body.len(), |(_, pos)| pos),
            tick: base.map_or(0, |(tick, _)| tick),
            failed: base.is_none(),
            gone: body.is_empty() && end > start,
            mapped: start < crate::wire::block::INFLATED,
            rec_start: 0,
            clock,
            strings: file.strings(),
        }
    }

    /// The next record, stamped by `time` (or left to be stamped on demand
    /// by its file's map, if `None`); `None` at the end of the extent. After
    /// damage (an `Err`), the rest of the extent is skipped.
    #[inline]
    pub(crate) fn next_record(
        &mut self,
        time: Option<&TimeMap>,
    ) -> Option<Result<Record<'a>, ReadError>> {
        let (site, tick) = match self.next_header()? {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        Some(self.take_args(site).map(|(args, len)| {
            let ns = time.map(|t| t.unix_ns(tick));
            Record::new(self.file, site, self.thread, self.ctx, tick, args, len, ns)
        }))
    }

    /// The next record of a call site `allowed` admits (indexed by site
    /// id), stamped by `time`. Records of other sites are stepped over
    /// unstamped, by their `plans` entry if they have one, else by their
    /// kinds; damage is found as [`Extent::next_record`] finds it. A reader
    /// of 0.1% of the records spends its time here, so a refused record
    /// costs its header and its lengths only. With `until`, one
    /// refused record in [`CHECK_EVERY`] in a row is returned stamped, for
    /// the caller to see its stream has passed the window's end.
    #[inline]
    pub(crate) fn next_allowed(
        &mut self,
        time: &TimeMap,
        allowed: &[bool],
        plans: &[Option<SkipPlan>],
        until: bool,
    ) -> Option<Result<Record<'a>, ReadError>> {
        let mut passed = 0u32;
        loop {
            // Refused sites with a plan (`plans`), no context switch:
            // stepped over by their headers and nibble codes, in a loop on
            // locals (the position stays in a register; through `self` it
            // went by memory, a store and a load a record). Anything else,
            // and every CHECK_EVERY-th record under `until`, takes the
            // general path below.
            if !self.failed {
                let body = self.body;
                let (mut pos, mut tick, mut rec_start) = (self.pos, self.tick, self.rec_start);
                while !(until && (passed + 1).is_multiple_of(CHECK_EVERY)) {
                    let mut at = pos;
                    let plan = get_varint(body, &mut at)
                        .filter(|&id| id != u64::from(wire::CONTEXT_SWITCH))
                        .and_then(|id| plans.get(usize::try_from(id).ok()?)?.as_ref());
                    let Some(plan) = plan else { break };
                    let Some(delta) = get_varint(body, &mut at) else {
                        break;
                    };
                    let Some(len) = plan.args_len(body, at) else {
                        break;
                    };
                    rec_start = pos;
                    pos = at + len;
                    tick = tick.wrapping_add(delta);
                    passed += 1;
                }
                (self.pos, self.tick, self.rec_start) = (pos, tick, rec_start);
            }
            let (site, tick) = match self.next_header() {
                Some(Ok(h)) => h,
                Some(Err(e)) => return Some(Err(self.shrank_or(e))),
                // Refused records' pages were not checked (below).
                None if passed > 0 && self.mapped && self.file.shrank() && !self.failed => {
                    return Some(Err(self.fail(SHRANK)));
                }
                None => return None,
            };
            let keep = allowed.get(site.id as usize).copied().unwrap_or(false);
            passed += 1;
            if !(keep || until && passed.is_multiple_of(CHECK_EVERY)) {
                // A refused record: only its lengths are read. A page the
                // file no longer covers is counted when read (`GuardedMap`),
                // and the count is checked by the next record handed out, or
                // here at a failure or the extent's end: a shrink is told as
                // such, never as damage.
                let skipped =
                    wire::record::skip_args(&site.kinds, self.body, &mut self.pos, &self.strings);
                if skipped.is_none() {
                    let e = self.fail("malformed record arguments");
                    return Some(Err(self.shrank_or(e)));
                }
                continue;
            }
            return Some(self.take_args(site).map(|(args, len)| {
                let ns = Some(time.unix_ns(tick));
                Record::new(self.file, site, self.thread, self.ctx, tick, args, len, ns)
            }));
        }
    }

    /// The next record's head, its arguments stepped over by `plans` (per
    /// site id; a site without one by its kinds), unread and their pages
    /// untouched: a file cut under the reader is found at a failure or the
    /// extent's end, and told as such, as [`Extent::next_allowed`] does.
    #[inline]
    pub(crate) fn next_head(
        &mut self,
        plans: &[Option<SkipPlan>],
    ) -> Option<Result<Head<'a>, ReadError>> {
        let (site, tick) = match self.next_unchecked_header()? {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = self.step_args(site, plans) {
            return Some(Err(e));
        }
        Some(Ok(Head {
            site,
            thread: self.thread,
            tick,
            len: (self.pos - self.rec_start) as u32,
        }))
    }

    /// [`Extent::next_header`] for a reader whose records' pages are not
    /// each touched (their values stepped over unread): a file cut under
    /// it is found at a failure or the extent's end, and told as such.
    #[inline(always)]
    fn next_unchecked_header(&mut self) -> Option<Result<(&'a SiteEntry, u64), ReadError>> {
        match self.next_header() {
            Some(Ok(h)) => Some(Ok(h)),
            Some(Err(e)) => Some(Err(self.shrank_or(e))),
            None if self.shrank() && !self.failed => Some(Err(self.fail(SHRANK))),
            None => None,
        }
    }

    /// Calls `f` with each of its records' heads ([`Extent::next_head`]).
    fn heads(
        &mut self,
        plans: &[Option<SkipPlan>],
        f: &mut impl FnMut(Result<Head<'a>, ReadError>),
    ) {
        while let Some(h) = self.next_head(plans) {
            f(h);
        }
    }

    /// Calls `f` with each of its records of a call site `allowed` admits
    /// ([`Extent::next_of`]).
    fn records_of(
        &mut self,
        allowed: &[bool],
        plans: &[Option<SkipPlan>],
        f: &mut impl FnMut(Result<Record<'a>, ReadError>),
    ) {
        while let Some(r) = self.next_of(allowed, plans) {
            f(r);
        }
    }

    /// The next record of a call site `allowed` admits (by site id), left
    /// to be stamped on demand; the others' arguments stepped over unread
    /// by `plans`, as [`Extent::next_head`] steps over them.
    #[inline]
    pub(crate) fn next_of(
        &mut self,
        allowed: &[bool],
        plans: &[Option<SkipPlan>],
    ) -> Option<Result<Record<'a>, ReadError>> {
        loop {
            let (site, tick) = match self.next_unchecked_header()? {
                Ok(h) => h,
                Err(e) => return Some(Err(e)),
            };
            if allowed.get(site.id as usize).copied().unwrap_or(false) {
                return Some(self.take_args(site).map(|(args, len)| {
                    Record::new(
                        self.file,
                        site,
                        self.thread,
                        self.ctx,
                        tick,
                        args,
                        len,
                        None,
                    )
                }));
            }
            if let Err(e) = self.step_args(site, plans) {
                return Some(Err(e));
            }
        }
    }

    /// Steps over the arguments of a record of `site` unread: by its plan,
    /// else (or where the plan fails) by its kinds, so that damage is
    /// found at the byte a reading of the values finds it.
    #[inline(always)]
    fn step_args(&mut self, site: &SiteEntry, plans: &[Option<SkipPlan>]) -> Result<(), ReadError> {
        let planned = match plans.get(site.id as usize) {
            Some(Some(plan)) => plan.args_len(self.body, self.pos).map(|n| self.pos + n),
            _ => None,
        };
        let end = planned.or_else(|| {
            wire::record::skip_args(&site.kinds, self.body, &mut self.pos, &self.strings)
                .map(|()| self.pos)
        });
        match end {
            Some(end) => {
                self.pos = end;
                Ok(())
            }
            None => {
                let e = self.fail("malformed record arguments");
                Err(self.shrank_or(e))
            }
        }
    }

    /// The stop of the record [`Extent::next_allowed`] just returned, whose
    /// tick is `tick`.
    pub(crate) fn stop_of(&self, tick: u64) -> Option<Stop> {
        let mut at = self.rec_start;
        get_varint(self.body, &mut at)?;
        let delta = get_varint(self.body, &mut at)?;
        Some(Stop {
            pos: self.rec_start,
            tick: tick.wrapping_sub(delta),
            ctx: self.ctx,
            switched: self.switched,
        })
    }

    /// The record at `stop` (from [`Extent::stop_of`] on an extent of the
    /// same bytes), stamped by `time`, read and checked as
    /// [`Extent::next_record`] reads one.
    pub(crate) fn record_at(
        &mut self,
        stop: Stop,
        time: &TimeMap,
    ) -> Option<Result<Record<'a>, ReadError>> {
        if self.failed || stop.pos >= self.body.len() {
            return None;
        }
        self.pos = stop.pos;
        self.tick = stop.tick;
        self.ctx = stop.ctx;
        self.switched = stop.switched;
        self.next_record(Some(time))
    }

    /// Whether its file's mapped bytes were cut since it was opened.
    pub(crate) fn shrank(&self) -> bool {
        self.mapped && self.file.shrank()
    }

    /// `e`, or the file's shrink if its mapped bytes were cut while read
    /// (the cause of whatever damage was found after).
    fn shrank_or(&mut self, e: ReadError) -> ReadError {
        if self.mapped && self.file.shrank() {
            self.file.malformed(self.body_offset + self.pos, SHRANK)
        } else {
            e
        }
    }

    /// The next record's header fields, without decoding its arguments:
    /// `(site, tick)`; then [`Extent::take_args`] must be called.
    #[inline(always)]
    fn next_header(&mut self) -> Option<Result<(&'a SiteEntry, u64), ReadError>> {
        if self.gone {
            self.gone = false;
            return Some(Err(self.fail(
                "a compressed block no longer inflates (the file changed while being read)",
            )));
        }
        let mut site_id;
        loop {
            if self.pos >= self.body.len() || self.failed {
                return None;
            }
            self.rec_start = self.pos;
            site_id = get_varint(self.body, &mut self.pos);
            if site_id != Some(u64::from(wire::CONTEXT_SWITCH)) {
                break;
            }
            // The thread's context changes here (version 2): the records
            // after are in the context it names (from version 7, by its
            // difference from the one the extent's previous switch named).
            let Some(v) = get_varint(self.body, &mut self.pos) else {
                return Some(Err(self.fail("truncated context switch")));
            };
            let ctx = if self.relative_switches {
                i64::from(self.switched)
                    .checked_add(wire::unzigzag(v))
                    .and_then(|c| u32::try_from(c).ok())
            } else {
                u32::try_from(v).ok()
            };
            let Some(ctx) = ctx else {
                return Some(Err(self.fail("context switch out of range")));
            };
            self.switched = ctx;
            self.ctx = self.file.context_of(ctx);
        }
        let delta = get_varint(self.body, &mut self.pos);
        let (Some(site_id), Some(delta)) = (site_id, delta) else {
            return Some(Err(self.fail("truncated record header")));
        };
        let Some(site) = u32::try_from(site_id)
            .ok()
            .and_then(|id| self.file.site(id))
        else {
            return Some(Err(
                self.fail("record of a call site missing from the dictionary")
            ));
        };
        self.tick = self.tick.wrapping_add(delta);
        Some(Ok((site, self.tick)))
    }

    /// The record's arguments and its total length in bytes.
    #[inline(always)]
    fn take_args(&mut self, site: &SiteEntry) -> Result<(&'a [u8], u32), ReadError> {
        let start = self.pos;
        let skipped = wire::record::skip_args(&site.kinds, self.body, &mut self.pos, &self.strings);
        // Skipping reads lengths, not every value byte: read a byte of each
        // page the record spans, so a page the file no longer covers faults
        // now, on this thread, and is counted before the check below.
        if self.mapped {
            touch_pages(&self.body[self.rec_start..self.pos.min(self.body.len())]);
        }
        if self.mapped && self.file.shrank() {
            return Err(self.fail(SHRANK));
        }
        match skipped {
            Some(()) => Ok((
                &self.body[start..self.pos],
                (self.pos - self.rec_start) as u32,
            )),
            None => Err(self.fail("malformed record arguments")),
        }
    }

    fn fail(&mut self, reason: &'static str) -> ReadError {
        self.failed = true;
        self.file.malformed(self.body_offset + self.pos, reason)
    }
}

impl<'a> Iterator for Extent<'a> {
    type Item = Result<Record<'a>, ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let file = self.file;
        let time = match self.clock {
            Clock::OwnFile => Some(file.time_map()),
            Clock::Untimed => None,
        };
        self.next_record(time)
    }
}

/// Why an extent of a mapped file stopped when the file was cut under it.
const SHRANK: &str = "the file shrank while being read (truncated by another program)";

/// How many refused records in a row [`Extent::next_allowed`] steps over
/// before it returns one, stamped, for a window's end to be checked.
const CHECK_EVERY: u32 = 256;

/// Reads one byte of every page `bytes` spans (see `Extent::take_args`).
#[inline]
fn touch_pages(bytes: &[u8]) {
    const PAGE: usize = 4096;
    let mut i = PAGE - (bytes.as_ptr() as usize % PAGE);
    while i < bytes.len() {
        std::hint::black_box(bytes[i]);
        i += PAGE;
    }
    if let Some(last) = bytes.last() {
        std::hint::black_box(*last);
    }
}
