//! TOTALS entries (tag 14, FORMAT.md): what a finished file holds, counted
//! by its writer and written right ahead of its END, so that `nanolog info`
//! and `nanolog stats` answer from the file's dictionary and its end
//! instead of reading every record.

use std::collections::BTreeMap;

use super::{get_varint, put_varint};

/// A file's records counted as they are written: by call site, by thread,
/// and by both, with their ticks' range, the records threads dropped and
/// those the writer lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// The earliest tick of a record (`u64::MAX` with none) ...
    pub first_tick: u64,
    /// ... and the latest (0 with none).
    pub last_tick: u64,
    /// Records the writer lost (a failed write, the live file deleted or
    /// cut back under it): the gaps of thread `dict::WRITER_THREAD`.
    pub lost: u64,
    /// By site id (its `dropped` 0).
    pub sites: Tallies,
    /// By thread id.
    pub threads: Tallies,
    /// The bytes and ticks of the tallies are known: counted here, or read
    /// from an entry that has them (writers since 2026-11-29, the commit
    /// after 254e764); otherwise they are those of no record.
    pub detailed: bool,
    /// By thread and site: each thread's records of each site, while they
    /// are known (`None`: a writer before them, the entry's pairs damaged,
    /// or more pairs than [`MAX_PAIRS`] in the file).
    pub pairs: Option<BTreeMap<(u32, u32), Tally>>,
    /// The records of the thread being counted, by site, not yet in
    /// `pairs` (see [`Totals::count`]).
    run: Run,
    /// The ids of `sites` and `threads` whose tallies are not empty, if
    /// known (see [`InUse`]).
    in_use: InUse,
}

/// Ids below this are kept in a table by id ([`Tallies`]): a count is an
/// index, and a table of them all takes 2.5 MiB at most.
const DENSE_IDS: u32 = 1 << 16;

/// Tallies by id (sites' or threads'): those of ids below 65,536 in
/// a table by id, the others in a map. Thread ids only grow (each thread
/// that logs takes the next), so a process whose threads come and go
/// reaches ids of hundreds of thousands: a table to them took 40 bytes an
/// id ever numbered, in each file's totals as read and in the writer's,
/// and a damaged or crafted TOTALS entry of 20 bytes naming id 2^24 - 1
/// made a reader take 1.3 GB (2026-11-30, d179320). An id past them costs
/// an entry of the map.
#[derive(Debug, Clone, Default)]
pub struct Tallies {
    dense: Vec<Tally>,
    sparse: BTreeMap<u32, Tally>,
}

/// What [`Tallies`] gives for an id it does not hold.
static EMPTY: Tally = Tally::NONE;

impl Tallies {
    /// The tally of `id`, if held (an empty one may be).
    pub fn get(&self, id: u32) -> Option<&Tally> {
        match id < DENSE_IDS {
            true => self.dense.get(id as usize),
            false => self.sparse.get(&id),
        }
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut Tally> {
        match id < DENSE_IDS {
            true => self.dense.get_mut(id as usize),
            false => self.sparse.get_mut(&id),
        }
    }

    /// The tally of `id`, empty from now on (an id past the table: no
    /// longer held).
    fn take(&mut self, id: u32) -> Tally {
        match id < DENSE_IDS {
            true => self.dense.get_mut(id as usize).map(std::mem::take),
            false => self.sparse.remove(&id),
        }
        .unwrap_or_default()
    }

    /// The tally of `id`, held from now on.
    #[inline]
    fn slot(&mut self, id: u32) -> &mut Tally {
        if id >= DENSE_IDS {
            return self.sparse.entry(id).or_default();
        }
        if self.dense.len() <= id as usize {
            grow(&mut self.dense, id);
        }
        &mut self.dense[id as usize]
    }

    /// Every tally held, empty ones too, in the order of their ids.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Tally)> + Clone + '_ {
        (self.dense.iter().enumerate())
            .map(|(id, t)| (id as u32, t))
            .chain(self.sparse.iter().map(|(&id, t)| (id, t)))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Tally> + '_ {
        self.dense.iter_mut().chain(self.sparse.values_mut())
    }

    /// Every tally empty (the table's memory kept).
    fn empty(&mut self) {
        self.dense.fill(Tally::default());
        self.sparse.clear();
    }
}

/// Equal when they hold the same tallies that are not [`Tally::default`]:
/// two tables of the same counts grown to other ids are equal.
impl PartialEq for Tallies {
    fn eq(&self, other: &Tallies) -> bool {
        let held = |t: &Tallies| {
            t.iter()
                .filter(|(_, d)| **d != Tally::default())
                .map(|(id, d)| (id, *d))
                .collect::<Vec<_>>()
        };
        held(self) == held(other)
    }
}

impl Eq for Tallies {}

/// The tally of an id (an empty one for an id not held).
impl std::ops::Index<u32> for Tallies {
    type Output = Tally;

    fn index(&self, id: u32) -> &Tally {
        self.get(id).unwrap_or(&EMPTY)
    }
}

/// The tally of an id, held from then on.
impl std::ops::IndexMut<u32> for Tallies {
    fn index_mut(&mut self, id: u32) -> &mut Tally {
        self.slot(id)
    }
}

/// The ids whose tallies are not empty, each once, per table: a write's
/// totals are added to the file's and cleared by them, not by the tables'
/// whole length. Thread ids only grow (each thread that logs takes the
/// next), so a process whose threads come and go has tables of hundreds of
/// thousands of them: added and zeroed whole at every write, they made a
/// steady load cost the process 2.9x its CPU after 100,000 threads had
/// come and gone, 5.2x after 400,000 (BENCHMARKS.md, "Reading"). Kept by
/// this type's own methods; derived, not part of what the totals say.
#[derive(Debug, Clone, Default)]
struct InUse {
    /// The lists are whole (not for tables filled by id, as read).
    known: bool,
    sites: Vec<u32>,
    threads: Vec<u32>,
}

impl InUse {
    /// The lists, if whole.
    fn lists(&mut self) -> Option<(&mut Vec<u32>, &mut Vec<u32>)> {
        self.known.then_some((&mut self.sites, &mut self.threads))
    }

    /// Whole lists, empty.
    fn new() -> InUse {
        InUse {
            known: true,
            ..InUse::default()
        }
    }
}

impl PartialEq for InUse {
    fn eq(&self, _: &InUse) -> bool {
        true
    }
}

impl Eq for InUse {}

impl Tally {
    /// No record and no drop.
    fn is_empty(&self) -> bool {
        self.records == 0 && self.dropped == 0
    }
}

/// Tally `id` of `v` (grown to it), noted in `used` when it was empty.
#[inline]
fn used_slot<'a>(v: &'a mut Tallies, used: Option<&mut Vec<u32>>, id: u32) -> &'a mut Tally {
    let t = v.slot(id);
    if let (true, Some(used)) = (t.is_empty(), used) {
        used.push(id);
    }
    t
}

/// The most (thread, site) pairs a file's totals keep: past them a file's
/// pairs are given up (its TOTALS entry lists none), so that a process of
/// many threads and many sites spends no more than a few MiB on them.
pub const MAX_PAIRS: usize = 1 << 14;

/// The thread whose records are being counted and its tallies by site (by
/// site id, with the ids touched): the writer drains a thread's records
/// in runs, so counting a record by thread and site costs an index into a
/// table, as by site alone; the run goes into the pairs when another
/// thread's records come, or when the totals are read
/// ([`Totals::settle`]). Scratch space, not part of what the totals say.
#[derive(Debug, Clone, Default)]
struct Run {
    thread: Option<u32>,
    by_site: Tallies,
    touched: Vec<u32>,
}

impl PartialEq for Run {
    fn eq(&self, _: &Run) -> bool {
        true
    }
}

impl Eq for Run {}

/// The records of a site or a thread: how many, their bytes and tick
/// range, and a thread's drops. One per id, so that counting a run of
/// records touches one line of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Records.
    pub records: u64,
    /// Records the thread dropped (its ring full).
    pub dropped: u64,
    /// The records' bytes in the file, as a reader measures a record (its
    /// site id, tick delta and arguments; not the context switches between
    /// them).
    pub bytes: u64,
    /// The earliest tick of a record (`u64::MAX` with none) ...
    pub first_tick: u64,
    /// ... and the latest (0 with none).
    pub last_tick: u64,
}

impl Tally {
    /// No record and no drop, of no tick.
    const NONE: Tally = Tally {
        records: 0,
        dropped: 0,
        bytes: 0,
        first_tick: u64::MAX,
        last_tick: 0,
    };
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::NONE
    }
}

impl Tally {
    #[inline(always)]
    fn count(&mut self, n: u64, bytes: u64, first: u64, last: u64) {
        self.records += n;
        self.bytes += bytes;
        self.first_tick = self.first_tick.min(first);
        self.last_tick = self.last_tick.max(last);
    }

    fn add(&mut self, o: &Tally) {
        self.count(o.records, o.bytes, o.first_tick, o.last_tick);
        self.dropped += o.dropped;
    }

    /// Its records' bytes and ticks cleared (not known).
    fn counts_only(self) -> Tally {
        Tally {
            records: self.records,
            dropped: self.dropped,
            ..Tally::default()
        }
    }
}

impl Totals {
    /// No record yet.
    pub fn new() -> Totals {
        Totals {
            first_tick: u64::MAX,
            detailed: true,
            pairs: Some(BTreeMap::new()),
            in_use: InUse::new(),
            ..Totals::default()
        }
    }

    /// Each thread's records of each site: `(thread, site, tally)` in the
    /// order of thread and site, if known.
    /// (Counted by [`Totals::count`]: once settled.)
    pub fn pairs(&self) -> Option<impl Iterator<Item = (u32, u32, &Tally)>> {
        debug_assert!(self.run.touched.is_empty(), "pairs read before settle");
        let pairs = self.pairs.as_ref()?;
        Some(pairs.iter().map(|(&(t, s), d)| (t, s, d)))
    }

    /// The records counted (settled: see [`Totals::settle`]).
    pub fn records(&self) -> u64 {
        self.sites.iter().map(|(_, s)| s.records).sum()
    }

    /// `n` records of site `site` from thread `thread`, of `bytes` bytes,
    /// the first at tick `first` and the last at `last`: counted by site in
    /// the run of the thread's records (see `Run`), a few additions and
    /// compares on one line of memory (the table grows, cold, the first
    /// time an id is met); the run goes into the site's, the thread's and
    /// the pair's tallies once a run. (So `sites`, `threads` and the pairs
    /// show them once settled: see [`Totals::settle`]. The file's first
    /// tick is the writer's to keep: an extent's first.)
    #[inline(always)]
    pub fn count(&mut self, site: u32, thread: u32, n: u64, bytes: u64, first: u64, last: u64) {
        self.last_tick = self.last_tick.max(last);
        if self.run.thread != Some(thread) {
            self.settle();
            self.run.thread = Some(thread);
        }
        let run = &mut self.run;
        used_slot(&mut run.by_site, Some(&mut run.touched), site).count(n, bytes, first, last);
    }

    /// The ids of the sites with records (settled: see [`Totals::settle`]):
    /// by the ids in use where they are kept, a write's few, not by the
    /// whole table.
    pub fn sites_counted(&self) -> impl Iterator<Item = u32> + '_ {
        let (used, all) = match self.in_use.known {
            true => (&self.in_use.sites[..], None),
            false => (&[][..], Some(self.sites.iter().map(|(id, _)| id))),
        };
        (used.iter().copied().chain(all.into_iter().flatten()))
            .filter(|&id| self.sites.get(id).is_some_and(|s| s.records > 0))
    }

    /// These totals with the run being counted in their tallies: as they
    /// are, or a settled copy.
    fn settled(&self) -> std::borrow::Cow<'_, Totals> {
        if self.run.touched.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut t = self.clone();
        t.settle();
        std::borrow::Cow::Owned(t)
    }

    /// The run of the thread being counted goes into the sites', the
    /// thread's and the pairs' tallies (adding the totals to others' and
    /// writing them take it as it is; reading `sites`, `threads`, the pairs
    /// or [`Totals::records`] wants it settled).
    pub fn settle(&mut self) {
        let run = &mut self.run;
        let Some(thread) = run.thread else {
            return;
        };
        for site in run.touched.drain(..) {
            let d = run.by_site.take(site);
            if d.is_empty() {
                continue;
            }
            let (sites, threads) = self.in_use.lists().unzip();
            used_slot(&mut self.sites, sites, site).add(&d);
            used_slot(&mut self.threads, threads, thread).add(&d);
            if let Some(pairs) = &mut self.pairs {
                add_pair(pairs, (thread, site), &d);
                if pairs.len() > MAX_PAIRS {
                    self.pairs = None;
                }
            }
        }
    }

    /// Records of ticks `first..=last` were counted.
    #[inline(always)]
    pub fn ticks(&mut self, first: u64, last: u64) {
        self.first_tick = self.first_tick.min(first);
        self.last_tick = self.last_tick.max(last);
    }

    /// `n` records thread `thread` dropped.
    pub fn dropped(&mut self, thread: u32, n: u64) {
        if n > 0 {
            let threads = self.in_use.lists().map(|l| l.1);
            used_slot(&mut self.threads, threads, thread).dropped += n;
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Totals) {
        self.settle();
        let other = &*other.settled();
        match (&mut self.pairs, &other.pairs) {
            (Some(mine), Some(theirs)) => {
                for (&k, d) in theirs {
                    add_pair(mine, k, d);
                }
                if mine.len() > MAX_PAIRS {
                    self.pairs = None;
                }
            }
            (mine, _) => *mine = None,
        }
        self.first_tick = self.first_tick.min(other.first_tick);
        self.last_tick = self.last_tick.max(other.last_tick);
        self.lost += other.lost;
        self.detailed &= other.detailed;
        // By their ids in use when known: a write's few, not the tables'
        // length.
        let theirs = &other.in_use;
        let (sites, threads) = self.in_use.lists().unzip();
        add_table(
            &mut self.sites,
            sites,
            &other.sites,
            theirs.known.then_some(&theirs.sites[..]),
        );
        add_table(
            &mut self.threads,
            threads,
            &other.threads,
            theirs.known.then_some(&theirs.threads[..]),
        );
    }

    /// Back to no record, keeping the tables' memory.
    pub fn clear(&mut self) {
        self.first_tick = u64::MAX;
        self.last_tick = 0;
        self.lost = 0;
        match self.in_use.lists() {
            Some((sites, threads)) => {
                reset(&mut self.sites, sites);
                reset(&mut self.threads, threads);
            }
            None => {
                self.sites.empty();
                self.threads.empty();
                self.in_use = InUse::new();
            }
        }
        reset(&mut self.run.by_site, &mut self.run.touched);
        match &mut self.pairs {
            Some(p) => p.clear(),
            None => self.pairs = Some(BTreeMap::new()),
        }
    }
}

/// Empties the tallies of ids `ids` of `v`, and the list.
fn reset(v: &mut Tallies, ids: &mut Vec<u32>) {
    for id in ids.drain(..) {
        v.take(id);
    }
}

/// Adds the tallies `theirs` (those of ids `their_ids` if known, else all)
/// to `mine`, noting in `used` the ids of `mine` they make not empty.
fn add_table(
    mine: &mut Tallies,
    mut used: Option<&mut Vec<u32>>,
    theirs: &Tallies,
    their_ids: Option<&[u32]>,
) {
    let mut add = |id: u32, b: &Tally| {
        if !b.is_empty() {
            used_slot(mine, used.as_deref_mut(), id).add(b);
        }
    };
    match their_ids {
        Some(ids) => {
            for &id in ids {
                if let Some(b) = theirs.get(id) {
                    add(id, b);
                }
            }
        }
        None => {
            for (id, b) in theirs.iter() {
                add(id, b);
            }
        }
    }
}

/// Adds `d` to pair `k`'s tally.
fn add_pair(pairs: &mut BTreeMap<(u32, u32), Tally>, k: (u32, u32), d: &Tally) {
    pairs.entry(k).or_default().add(d);
}

#[cold]
fn grow(v: &mut Vec<Tally>, id: u32) -> &mut Vec<Tally> {
    v.resize(id as usize + 1, Tally::default());
    v
}

/// Appends the body of a TOTALS entry: `records, first tick, last tick less
/// first, lost`, then the sites with records (`count`, then `id, records`
/// each), then the threads with records or drops (`count`, then `id,
/// records, dropped` each), all varints. With no record both ticks are 0.
/// Then the details, in the order of the sites and of the threads listed:
/// `bytes, first tick less the file's first, last tick less first` each
/// (`0, 0, 0` for a thread with drops only). Then, when the pairs are
/// known, their count and each pair in the order of thread and site:
/// `thread, site, records, bytes, first tick less the file's first, last
/// tick less first`. (`t` settled: see [`Totals::settle`].)
pub fn put_totals(out: &mut Vec<u8>, t: &Totals) {
    let t = &*t.settled();
    let records = t.records();
    let (first, last) = if t.first_tick <= t.last_tick {
        (t.first_tick, t.last_tick)
    } else {
        (0, 0)
    };
    put_varint(out, records);
    put_varint(out, first);
    put_varint(out, last - first);
    put_varint(out, t.lost);
    let sites = t.sites.iter().filter(|(_, s)| s.records > 0);
    put_varint(out, sites.clone().count() as u64);
    for (id, s) in sites.clone() {
        put_varint(out, u64::from(id));
        put_varint(out, s.records);
    }
    let threads = t.threads.iter().filter(|(_, c)| c.records + c.dropped > 0);
    put_varint(out, threads.clone().count() as u64);
    for (id, c) in threads.clone() {
        put_varint(out, u64::from(id));
        put_varint(out, c.records);
        put_varint(out, c.dropped);
    }
    let detail = |out: &mut Vec<u8>, d: &Tally| {
        if d.records > 0 && d.first_tick <= d.last_tick {
            put_varint(out, d.bytes);
            put_varint(out, d.first_tick.saturating_sub(first));
            put_varint(out, d.last_tick - d.first_tick);
        } else {
            out.extend_from_slice(&[0, 0, 0]);
        }
    };
    for (_, d) in sites.chain(threads) {
        detail(out, d);
    }
    if let Some(pairs) = &t.pairs {
        let pairs = pairs.iter().filter(|(_, d)| d.records > 0);
        put_varint(out, pairs.clone().count() as u64);
        for (&(thread, site), d) in pairs {
            put_varint(out, u64::from(thread));
            put_varint(out, u64::from(site));
            put_varint(out, d.records);
            detail(out, d);
        }
    }
}

/// The largest site or thread id a TOTALS entry read may name (as its
/// writer's reader did before [`Tallies`]: an id past it is damage).
const MAX_ID: u64 = 1 << 24;

/// The slot of id `id` in `v`; `None` for an id past [`MAX_ID`].
fn at(v: &mut Tallies, id: u64) -> Option<&mut Tally> {
    let id = u32::try_from(id).ok().filter(|&i| u64::from(i) < MAX_ID)?;
    Some(v.slot(id))
}

/// The totals of a TOTALS entry's body; `None` if it is malformed or does
/// not add up (its record count is not its sites'). Its details are taken
/// when it has them and they add up (`Totals::detailed`); bytes after them
/// are left for later revisions.
pub fn get_totals(body: &[u8]) -> Option<Totals> {
    let mut pos = 0;
    let mut next = || get_varint(body, &mut pos);
    let records = next()?;
    let first = next()?;
    let last = first.checked_add(next()?)?;
    let mut t = Totals::new();
    if records > 0 {
        t.ticks(first, last);
    }
    t.lost = next()?;
    let mut listed = Vec::new();
    let sites = next()?;
    for _ in 0..sites {
        let (id, c) = (next()?, next()?);
        let slot = at(&mut t.sites, id)?;
        slot.records = slot.records.checked_add(c)?;
        listed.push((false, id as u32));
    }
    let threads = next()?;
    for _ in 0..threads {
        let (id, r, d) = (next()?, next()?, next()?);
        let slot = at(&mut t.threads, id)?;
        slot.records = slot.records.checked_add(r)?;
        slot.dropped = slot.dropped.checked_add(d)?;
        listed.push((true, id as u32));
    }
    let sum = |v: &Tallies| {
        v.iter()
            .try_fold(0u64, |a, (_, c)| a.checked_add(c.records))
    };
    if sum(&t.sites)? != records || sum(&t.threads)? != records {
        return None;
    }
    t.detailed = read_details(&mut t, &listed, &mut next).is_some();
    if !t.detailed {
        for d in t.sites.iter_mut().chain(t.threads.iter_mut()) {
            *d = d.counts_only();
        }
    }
    t.pairs = None;
    if t.detailed {
        t.pairs = read_pairs(&t, &mut next);
    }
    // (Its tables were filled by id: which are in use is not kept.)
    t.in_use = InUse::default();
    Some(t)
}

/// Reads the pairs of thread and site after the details, and checks them:
/// each pair's thread and site listed, their counts and bytes adding up to
/// each site's and each thread's, each range inside its site's and its
/// thread's. `None` when there are none (a writer before them) or they do
/// not hold.
fn read_pairs(
    t: &Totals,
    next: &mut impl FnMut() -> Option<u64>,
) -> Option<BTreeMap<(u32, u32), Tally>> {
    let n = next()?;
    if n > MAX_PAIRS as u64 {
        return None;
    }
    let mut pairs = BTreeMap::new();
    // Per site and per thread: the records and bytes of their pairs.
    // (Kept by id, as many as the pairs at most: the tables may be long.)
    let mut sums: [BTreeMap<u32, (u64, u64)>; 2] = Default::default();
    for _ in 0..n {
        let (thread, site) = (next()?, next()?);
        let (records, bytes, from, span) = (next()?, next()?, next()?, next()?);
        let (thread, site) = (u32::try_from(thread).ok()?, u32::try_from(site).ok()?);
        let lo = t.first_tick.checked_add(from)?;
        let d = Tally {
            records,
            dropped: 0,
            bytes,
            first_tick: lo,
            last_tick: lo.checked_add(span)?,
        };
        for (i, id) in [site, thread].into_iter().enumerate() {
            let of = [&t.sites, &t.threads][i].get(id)?;
            if records == 0 || d.first_tick < of.first_tick || d.last_tick > of.last_tick {
                return None;
            }
            let sum = sums[i].entry(id).or_default();
            *sum = (sum.0.checked_add(records)?, sum.1.checked_add(bytes)?);
        }
        if pairs.insert((thread, site), d).is_some() {
            return None;
        }
    }
    for (v, sum) in [&t.sites, &t.threads].into_iter().zip(&sums) {
        let counted = v.iter().filter(|(_, d)| d.records > 0);
        if counted.clone().count() != sum.len()
            || counted
                .into_iter()
                .any(|(id, d)| sum.get(&id) != Some(&(d.records, d.bytes)))
        {
            return None;
        }
    }
    Some(pairs)
}

/// Reads the details of the sites and threads `listed` (`true`: a thread),
/// and checks them: each range inside the file's, an id listed twice
/// given one, the sites' bytes adding up to the threads'.
fn read_details(
    t: &mut Totals,
    listed: &[(bool, u32)],
    next: &mut impl FnMut() -> Option<u64>,
) -> Option<()> {
    let (first, last) = (t.first_tick, t.last_tick);
    let mut bytes = [0u64; 2];
    for &(thread, id) in listed {
        let (b, from, span) = (next()?, next()?, next()?);
        let d = if thread { &mut t.threads } else { &mut t.sites }.get_mut(id)?;
        if d.records == 0 {
            if b != 0 {
                return None;
            }
            continue;
        }
        let lo = first.checked_add(from)?;
        let hi = lo.checked_add(span)?;
        if hi > last || d.first_tick <= d.last_tick {
            return None;
        }
        (d.bytes, d.first_tick, d.last_tick) = (b, lo, hi);
        bytes[usize::from(thread)] = bytes[usize::from(thread)].checked_add(b)?;
    }
    (bytes[0] == bytes[1]).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_read_back_as_counted() {
        let mut t = Totals::new();
        t.count(3, 1, 10, 100, 1_000, 1_500);
        t.count(1, 2, 5, 40, 1_200, 2_000);
        t.count(3, 2, 1, 9, 900, 900);
        t.dropped(7, 4);
        t.ticks(1_000, 2_000);
        t.ticks(900, 1_500);
        t.lost = 2;
        t.settle();
        let mut body = Vec::new();
        put_totals(&mut body, &t);
        let back = get_totals(&body).unwrap();
        assert_eq!(back.records(), 16);
        assert_eq!((back.first_tick, back.last_tick), (900, 2_000));
        assert_eq!(back.lost, 2);
        let counts = |v: &Tallies| {
            v.iter()
                .map(|(_, c)| [c.records, c.dropped])
                .collect::<Vec<_>>()
        };
        assert_eq!(counts(&back.sites), [[0, 0], [5, 0], [0, 0], [11, 0]]);
        assert_eq!(counts(&back.threads)[1..3], [[10, 0], [6, 0]]);
        assert_eq!(counts(&back.threads)[7], [0, 4]);
        assert_eq!(back, t, "the bytes and ticks read back as counted");
        assert_eq!(back.sites[3].bytes, 109);
        assert_eq!(back.threads[2].first_tick, 900);
        let pairs: Vec<_> = back
            .pairs()
            .unwrap()
            .map(|(t, s, d)| (t, s, d.records, d.bytes, d.first_tick, d.last_tick))
            .collect();
        assert_eq!(
            pairs,
            [
                (1, 3, 10, 100, 1_000, 1_500),
                (2, 1, 5, 40, 1_200, 2_000),
                (2, 3, 1, 9, 900, 900)
            ]
        );
        // Cut short in the details: the counts stand, the bytes and ticks
        // are not known; in the counts, or a count that does not add up:
        // not totals.
        let short = get_totals(&body[..body.len() - 1]).unwrap();
        assert!(short.detailed, "the pairs cut short, not the details");
        assert!(short.pairs.is_none());
        let before_pairs = body.len() - pairs_len(&t);
        let short = get_totals(&body[..before_pairs - 1]).unwrap();
        assert!(!short.detailed);
        assert!(short.pairs.is_none());
        assert_eq!(counts(&short.sites), counts(&t.sites));
        assert_eq!(counts(&short.threads), counts(&t.threads));
        assert_eq!(short.sites[3].bytes, 0);
        assert_eq!(short.sites[3].first_tick, u64::MAX);
        assert_eq!(get_totals(&body[..6]), None);
        // Details that do not add up (a site's bytes changed): not known.
        let mut odd = t.clone();
        odd.sites[3].bytes += 1;
        let mut odd_body = Vec::new();
        put_totals(&mut odd_body, &odd);
        assert!(!get_totals(&odd_body).unwrap().detailed);
        // Pairs that do not add up to their sites' and threads' counts, or
        // stand outside their ranges: not known; the rest stands.
        let mut odd = t.clone();
        for (k, d) in [((1, 3), 1), ((2, 3), 0)] {
            odd.pairs.as_mut().unwrap().get_mut(&k).unwrap().records += d;
        }
        let mut odd_body = Vec::new();
        put_totals(&mut odd_body, &odd);
        let odd_back = get_totals(&odd_body).unwrap();
        assert!(odd_back.detailed && odd_back.pairs.is_none());
        let mut odd = t.clone();
        odd.pairs
            .as_mut()
            .unwrap()
            .get_mut(&(2, 3))
            .unwrap()
            .last_tick = 2_000;
        let mut odd_body = Vec::new();
        put_totals(&mut odd_body, &odd);
        assert!(
            get_totals(&odd_body).unwrap().pairs.is_none(),
            "past site 3's last tick"
        );
        body[0] += 1;
        assert_eq!(get_totals(&body), None);
    }

    /// The bytes of `t`'s pairs in its entry.
    fn pairs_len(t: &Totals) -> usize {
        let (mut with, mut without) = (Vec::new(), Vec::new());
        put_totals(&mut with, t);
        let mut bare = t.clone();
        bare.pairs = None;
        put_totals(&mut without, &bare);
        with.len() - without.len()
    }

    /// Whether no tally of `t` holds a record or a drop.
    fn all_empty(t: &Totals) -> bool {
        t.sites
            .iter()
            .chain(t.threads.iter())
            .all(|(_, d)| d.is_empty())
    }

    /// A write's totals are added and cleared by the ids they used (a
    /// process numbers every thread that ever logged): the file's totals
    /// come out as those of the same writes added over their whole tables,
    /// each write starts empty, its sites with records are those a scan of
    /// its table finds, and totals read from a file (which ids they use
    /// not kept) add whole.
    #[test]
    fn writes_add_and_clear_by_the_ids_they_used() {
        let mut file = Totals::new();
        let mut whole = Totals::default();
        let mut write = Totals::new();
        let scanned = |t: &Totals| {
            let mut ids: Vec<u32> = (t.sites.iter())
                .filter(|(_, s)| s.records > 0)
                .map(|(id, _)| id)
                .collect();
            ids.sort_unstable();
            ids
        };
        for w in 0..3u32 {
            for (site, thread) in [(1, 100_000 + w), (2, 7), (1, 7)] {
                write.count(site, thread, 2, 10, 50 + u64::from(w), 60);
                write.ticks(50, 60);
            }
            write.dropped(90_000 + w, 3);
            write.settle();
            let mut counted: Vec<u32> = write.sites_counted().collect();
            counted.sort_unstable();
            assert_eq!(counted, scanned(&write));
            file.add(&write);
            // The same write, which ids it used not known: added whole.
            let mut unkept = write.clone();
            unkept.in_use = InUse::default();
            assert_eq!(unkept.sites_counted().collect::<Vec<_>>(), scanned(&write));
            whole.add(&unkept);
            write.clear();
            assert!(all_empty(&write));
        }
        assert_eq!(file.records(), 18);
        assert_eq!(file.threads[7].records, 12);
        assert_eq!(file.threads[90_001].dropped, 3);
        assert_eq!(file.sites, whole.sites);
        assert_eq!(file.threads, whole.threads);
        let mut body = Vec::new();
        put_totals(&mut body, &file);
        let read = get_totals(&body).unwrap();
        let mut again = Totals::new();
        again.add(&read);
        assert_eq!(again.threads[100_002].records, 2);
        assert_eq!(again.records(), 18);
        again.clear();
        assert!(all_empty(&again));
    }

    /// Pairs counted in runs of one thread's records, across writes added
    /// into a file's totals, read back as each thread's records of each
    /// site; past [`MAX_PAIRS`] a file's pairs are given up, and known
    /// again in the next file.
    #[test]
    fn pairs_add_up_across_runs_and_writes() {
        let mut file = Totals::new();
        let mut write = Totals::new();
        for (site, thread, tick) in [(1, 7, 10), (2, 7, 11), (1, 8, 12), (1, 7, 13)] {
            write.count(site, thread, 1, 3, tick, tick);
            write.ticks(tick, tick);
        }
        write.settle();
        file.add(&write);
        write.clear();
        write.count(2, 8, 2, 6, 20, 21);
        write.ticks(20, 21);
        write.settle();
        file.add(&write);
        let mut body = Vec::new();
        put_totals(&mut body, &file);
        let back = get_totals(&body).unwrap();
        let pairs: Vec<_> = back
            .pairs()
            .unwrap()
            .map(|(t, s, d)| (t, s, d.records))
            .collect();
        assert_eq!(pairs, [(7, 1, 2), (7, 2, 1), (8, 1, 1), (8, 2, 2)]);
        assert_eq!(back.pairs().unwrap().next().unwrap().2.last_tick, 13);

        let mut many = Totals::new();
        for i in 0..=MAX_PAIRS as u32 {
            many.count(i % 4096, i / 4096, 1, 1, 5, 5);
        }
        many.ticks(5, 5);
        many.settle();
        assert!(many.pairs.is_none(), "given up past the limit");
        let mut body = Vec::new();
        put_totals(&mut body, &many);
        let back = get_totals(&body).unwrap();
        assert!(back.detailed && back.pairs.is_none());
        file.add(&many);
        assert!(
            file.pairs.is_none(),
            "a file with such a write gives them up too"
        );
        file.clear();
        file.add(&write);
        assert_eq!(file.pairs().unwrap().count(), 1, "the next file knows them");
    }

    #[test]
    fn no_records_and_a_merged_write_read_back() {
        let mut file = Totals::new();
        let mut body = Vec::new();
        put_totals(&mut body, &file);
        let back = get_totals(&body).unwrap();
        assert_eq!((back.records(), back.first_tick), (0, u64::MAX));
        let mut write = Totals::new();
        write.count(2, 1, 3, 30, 50, 60);
        write.ticks(50, 60);
        file.add(&write);
        write.clear();
        write.count(0, 4, 1, 7, 70, 70);
        write.ticks(70, 70);
        file.add(&write);
        assert_eq!(file.records(), 4);
        assert_eq!((file.first_tick, file.last_tick), (50, 70));
        // A damaged id far out is refused, not a table of that size.
        let mut body = Vec::new();
        for v in [1, 5, 0, 0, 1, u64::from(u32::MAX), 1, 0] {
            put_varint(&mut body, v);
        }
        assert_eq!(get_totals(&body), None);
    }

    /// Ids past the table by id (a churning process's threads, a damaged
    /// entry's) cost an entry each, not a table to them: an entry of a few
    /// bytes naming site and thread 2^24 - 1 reads back whole with tables
    /// of two entries; a writer's totals of such a thread add, clear and
    /// write as a small id's do.
    #[test]
    fn large_ids_cost_an_entry_not_a_table_to_them() {
        let big = (1u32 << 24) - 1;
        let mut t = Totals::new();
        t.count(big, big, 3, 30, 10, 20);
        t.count(2, 400_000, 1, 10, 15, 15);
        t.ticks(10, 20);
        t.settle();
        let mut body = Vec::new();
        put_totals(&mut body, &t);
        assert!(body.len() < 64, "{} bytes", body.len());
        let back = get_totals(&body).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.sites[big].records, 3);
        assert_eq!(back.threads[400_000].bytes, 10);
        assert_eq!(back.threads[5].records, 0, "an id not held: empty");
        for v in [&back.sites, &back.threads] {
            assert!(v.dense.len() <= 3, "{} dense tallies", v.dense.len());
        }
        assert_eq!(back.threads.sparse.len(), 2);
        // A write of those ids added to a file's and cleared: the file
        // keeps them, the write holds none.
        let mut file = Totals::new();
        file.add(&t);
        file.add(&t);
        assert_eq!(file.threads[big].records, 6);
        t.clear();
        assert!(all_empty(&t));
        assert!(t.threads.sparse.is_empty());
        // Past MAX_ID: damage, not taken.
        let mut bad = Vec::new();
        for v in [1, 0, 0, 0, 1, 1 << 24, 1, 0] {
            put_varint(&mut bad, v);
        }
        assert_eq!(get_totals(&bad), None);
    }
}
