//! Reading the records: extents split across cores, each record added
//! to its group without formatting.

use std::ops::Range;

use nanolog_runtime::reader::{Head, LogFile, ReadError, Record, Wave};
use nanolog_runtime::wire::totals::{Tally, Totals as Counted};

use super::percentile;
use super::*;

/// The results of the files scanned so far.
#[derive(Default)]
pub(super) struct Totals {
    pub(super) total: Partial,
    /// `--arg`'s values, per worker of each scan (tens of MB for a large
    /// log: they stay in the workers' vectors).
    pub(super) values: Vec<percentile::Values>,
    /// Per work item, numbered across scans in file order: its values' sum.
    pub(super) sums: Vec<(usize, f64)>,
    /// Work items of the scans so far.
    pub(super) items: usize,
}

/// What a scan reads: a file's extents, or a run of them read as the file
/// is indexed.
pub(super) trait Extents: Sync {
    fn extent_count(&self) -> usize;
    fn scan_extents_of(
        &self,
        range: Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    );
    fn tally_extents(&self, range: Range<usize>, f: impl FnMut(Result<Head<'_>, ReadError>));
}

impl Extents for LogFile {
    fn extent_count(&self) -> usize {
        LogFile::extent_count(self)
    }
    fn scan_extents_of(
        &self,
        range: Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        LogFile::scan_extents_of(self, range, allowed, f)
    }
    fn tally_extents(&self, range: Range<usize>, f: impl FnMut(Result<Head<'_>, ReadError>)) {
        LogFile::tally_extents(self, range, f)
    }
}

impl Extents for Wave<'_> {
    fn extent_count(&self) -> usize {
        Wave::extent_count(self)
    }
    fn scan_extents_of(
        &self,
        range: Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        Wave::scan_extents_of(self, range, allowed, f)
    }
    fn tally_extents(&self, range: Range<usize>, f: impl FnMut(Result<Head<'_>, ReadError>)) {
        Wave::tally_extents(self, range, f)
    }
}

/// The extents of a file from its `first` on: those after a checkpoint.
pub(super) struct After<'a> {
    pub(super) file: &'a LogFile,
    pub(super) first: usize,
}

impl Extents for After<'_> {
    fn extent_count(&self) -> usize {
        self.file.extent_count().saturating_sub(self.first)
    }
    fn scan_extents_of(
        &self,
        range: Range<usize>,
        allowed: &[bool],
        f: impl FnMut(Result<Record<'_>, ReadError>),
    ) {
        let range = range.start + self.first..range.end + self.first;
        self.file.scan_extents_of(range, allowed, f)
    }
    fn tally_extents(&self, range: Range<usize>, f: impl FnMut(Result<Head<'_>, ReadError>)) {
        let range = range.start + self.first..range.end + self.first;
        self.file.tally_extents(range, f)
    }
}

/// Extents a work item takes at least: a small file (a set of thousands)
/// is scanned on the calling thread, without starting others.
pub(super) const MIN_ITEM: usize = 8;

impl Totals {
    /// Scans `sources`, of the files `first..` of the plan, on every core.
    pub(super) fn scan(&mut self, plan: &StatsPlan, sources: &[impl Extents], first: usize) {
        // Work items: (file, extent range), about four per core.
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut work = Vec::new();
        for (fi, f) in sources.iter().enumerate() {
            let n = f.extent_count();
            let step = n.div_ceil(cores * 4).max(MIN_ITEM);
            let mut s = 0;
            while s < n {
                work.push((fi, s..(s + step).min(n)));
                s += step;
            }
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let groups = plan.groups.keys.len();
        let base = self.items;
        let worker = || {
            let mut p = Partial::new(groups);
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((fi, range)) = work.get(i) else {
                    break;
                };
                scan(plan, &sources[*fi], first + fi, range.clone(), &mut p);
                if plan.arg.is_some() {
                    p.sums.push((base + i, p.values.take_sum()));
                }
            }
            p
        };
        let workers = cores.min(work.len()).max(1);
        let partials: Vec<Partial> = if workers == 1 {
            vec![worker()]
        } else {
            std::thread::scope(|sc| {
                let handles: Vec<_> = (0..workers).map(|_| sc.spawn(worker)).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Partial::new(groups)))
                    .collect()
            })
        };
        self.items += work.len();
        let total = &mut self.total;
        total.rows.resize(groups, Row::default());
        for mut p in partials {
            let mut values = std::mem::take(&mut p.values);
            values.park();
            self.values.push(values);
            self.sums.append(&mut p.sums);
            for (t, r) in total.rows.iter_mut().zip(&p.rows) {
                t.merge(r);
            }
            for (k, c) in p.series {
                *total.series.entry(k).or_default() += c;
            }
            total.non_numeric = total.non_numeric.take().or(p.non_numeric);
            total.errors.extend(p.errors);
            for (fi, ticks) in p.ticks {
                let t = total.ticks.entry(fi).or_default();
                if t.len() < ticks.len() {
                    t.resize(ticks.len(), (u64::MAX, 0));
                }
                for ((lo, hi), (l, h)) in t.iter_mut().zip(ticks) {
                    *lo = (*lo).min(l);
                    *hi = (*hi).max(h);
                }
            }
        }
    }

    /// File `fi` is answered by its writer's counts `t` (see
    /// [`answered_by`], [`answered_from`]): each site's (or thread's)
    /// records, bytes and time range added to its group's.
    pub(super) fn counted(&mut self, plan: &StatsPlan, fi: usize, f: &LogFile, t: &Counted) {
        let map = f.time_map();
        let rows = &mut self.total.rows;
        rows.resize(plan.groups.keys.len(), Row::default());
        let mut add = |g: u32, d: &Tally| {
            if let Some(row) = rows.get_mut(g as usize) {
                row.count += d.records;
                row.bytes += d.bytes;
                row.span(map.unix_ns(d.first_tick), map.unix_ns(d.last_tick));
            }
        };
        let sel = &plan.selected[fi];
        if plan.needs_pairs() {
            // A thread's records of the sites selected.
            let Some(pairs) = t.pairs() else {
                return;
            };
            for (thread, site, d) in pairs {
                let g = plan.groups.threads[fi].get(&thread);
                if let (true, Some(&g)) = (sel.get(site as usize).copied().unwrap_or(false), g) {
                    add(g, d);
                }
            }
            return;
        }
        if plan.by == GroupBy::Thread {
            for (id, d) in t.threads.iter() {
                let g = plan.groups.threads[fi].get(&id);
                if let (true, Some(&g)) = (d.records > 0, g) {
                    add(g, d);
                }
            }
            return;
        }
        for (id, d) in t.sites.iter() {
            let site = f.site(id).filter(|_| d.records > 0);
            let selected = sel.get(id as usize).copied().unwrap_or(false);
            if let (Some(site), true) = (site, selected) {
                add(plan.groups.of(plan.by, fi, site, 0), d);
            }
        }
    }

    /// File `fi` is read whole: its groups' first and last ticks become
    /// times, by its clock. (A file's map from ticks to time never goes
    /// backwards, so they are its first and last times, mapped once each:
    /// a lookup in the clock pairs for every record was half of `stats`'
    /// time.)
    pub(super) fn finish_file(&mut self, fi: usize, f: &LogFile) {
        let Some(ticks) = self.total.ticks.remove(&fi) else {
            return;
        };
        let map = f.time_map();
        for (row, (lo, hi)) in self.total.rows.iter_mut().zip(ticks) {
            if lo <= hi {
                row.span(map.unix_ns(lo), map.unix_ns(hi));
            }
        }
    }
}

pub(super) fn scan(
    plan: &StatsPlan,
    f: &impl Extents,
    fi: usize,
    range: Range<usize>,
    p: &mut Partial,
) {
    let sel = &plan.selected[fi];
    // Per group: the first and last tick of its records in the file.
    let ticks = p.ticks.entry(fi).or_default();
    ticks.resize(p.rows.len(), (u64::MAX, 0));
    if plan.arg.is_none() && plan.every_ns.is_none() {
        // Counts, bytes and time ranges: a record's head is all it takes,
        // its values stepped over unread (a third of the time of reading
        // each record whole).
        let mut last = None;
        f.tally_extents(range, |head| {
            let head = match head {
                Ok(h) => h,
                Err(e) => {
                    p.errors.push(e.to_string());
                    return;
                }
            };
            let id = head.site.id as usize;
            if !sel.get(id).copied().unwrap_or(false) {
                return;
            }
            let g = plan
                .groups
                .of_run(plan.by, fi, head.site, head.thread, &mut last)
                as usize;
            p.rows[g].count_one(u64::from(head.len));
            let (lo, hi) = &mut ticks[g];
            *lo = (*lo).min(head.tick);
            *hi = (*hi).max(head.tick);
        });
        return;
    }
    // Blocks past the file's resident budget inflated one at a time as the
    // scan reaches them; the records of sites not selected stepped over.
    let mut last = None;
    f.scan_extents_of(range, sel, |rec| {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                p.errors.push(e.to_string());
                return;
            }
        };
        let id = rec.site().id as usize;
        if let Some(arg) = &plan.arg {
            let Some(n) = arg.per_file[fi].get(id).copied().flatten() else {
                // A selected site without an argument of that name.
                return;
            };
            match rec.arg(n) {
                Some(v) => match v.as_f64() {
                    Some(x) => p.values.push(x),
                    None => {
                        p.non_numeric
                            .get_or_insert_with(|| kind_name(&v).to_owned());
                    }
                },
                None => {
                    p.non_numeric.get_or_insert_with(|| "missing".to_owned());
                }
            }
            return;
        }
        // `--every` (counts and bytes without it are tallied above).
        let group = plan
            .groups
            .of_run(plan.by, fi, rec.site(), rec.thread(), &mut last);
        let every = plan.every_ns.unwrap_or(i64::MAX);
        let ns = rec.unix_ns();
        *p.series
            .entry((ns.div_euclid(every) * every, group))
            .or_default() += 1;
    });
}
