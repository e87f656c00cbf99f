//! TOTALS entries (tag 14, FORMAT.md): what a finished file holds, counted
//! by its writer and written right ahead of its END, so that `nanolog info`
//! and `nanolog stats` answer from the file's dictionary and its end
//! instead of reading every record.

use super::{get_varint, put_varint};

/// A file's records counted as they are written: by call site and by
/// thread, with their ticks' range, the records threads dropped and those
/// the writer lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// The earliest tick of a record (`u64::MAX` with none) ...
    pub first_tick: u64,
    /// ... and the latest (0 with none).
    pub last_tick: u64,
    /// Records the writer lost (a failed write, the live file deleted or
    /// cut back under it): the gaps of thread `dict::WRITER_THREAD`.
    pub lost: u64,
    /// Records by site id.
    pub sites: Vec<u64>,
    /// `[records, dropped]` by thread id.
    pub threads: Vec<[u64; 2]>,
    /// By site id (as long as `sites`): its records' bytes and ticks.
    pub site_detail: Vec<Detail>,
    /// By thread id (as long as `threads`): its records' bytes and ticks.
    pub thread_detail: Vec<Detail>,
    /// The details are known: counted here, or read from an entry that has
    /// them (writers since 2026-11-29, the commit after 254e764).
    pub detailed: bool,
}

/// The bytes and the tick range of some records (a site's, a thread's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Their bytes in the file, as a reader measures a record (its site id,
    /// tick delta and arguments; not the context switches between them).
    pub bytes: u64,
    /// The earliest tick (`u64::MAX` with none) ...
    pub first_tick: u64,
    /// ... and the latest (0 with none).
    pub last_tick: u64,
}

impl Default for Detail {
    fn default() -> Detail {
        Detail {
            bytes: 0,
            first_tick: u64::MAX,
            last_tick: 0,
        }
    }
}

impl Detail {
    #[inline(always)]
    fn count(&mut self, bytes: u64, first: u64, last: u64) {
        self.bytes += bytes;
        self.first_tick = self.first_tick.min(first);
        self.last_tick = self.last_tick.max(last);
    }

    fn add(&mut self, o: &Detail) {
        self.count(o.bytes, o.first_tick, o.last_tick);
    }
}

impl Totals {
    /// No record yet.
    pub fn new() -> Totals {
        Totals {
            first_tick: u64::MAX,
            detailed: true,
            ..Totals::default()
        }
    }

    /// The records counted.
    pub fn records(&self) -> u64 {
        self.sites.iter().sum()
    }

    /// `n` records of site `site` from thread `thread`, of `bytes` bytes,
    /// the first at tick `first` and the last at `last`: a few additions
    /// and compares (the tables grow, cold, the first time an id is met).
    /// (The file's first tick is the writer's to keep: an extent's first.)
    #[inline(always)]
    pub fn count(&mut self, site: u32, thread: u32, n: u64, bytes: u64, first: u64, last: u64) {
        self.last_tick = self.last_tick.max(last);
        let (s, t) = (site as usize, thread as usize);
        if s >= self.sites.len() {
            grow(&mut self.sites, site, 0);
            grow(&mut self.site_detail, site, Detail::default());
        }
        if t >= self.threads.len() {
            grow(&mut self.threads, thread, [0; 2]);
            grow(&mut self.thread_detail, thread, Detail::default());
        }
        if let (Some(c), Some(d)) = (self.sites.get_mut(s), self.site_detail.get_mut(s)) {
            *c += n;
            d.count(bytes, first, last);
        }
        if let (Some(c), Some(d)) = (self.threads.get_mut(t), self.thread_detail.get_mut(t)) {
            c[0] += n;
            d.count(bytes, first, last);
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
        if thread as usize >= self.threads.len() {
            grow(&mut self.threads, thread, [0; 2]);
            grow(&mut self.thread_detail, thread, Detail::default());
        }
        if let Some(c) = self.threads.get_mut(thread as usize) {
            c[1] += n;
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Totals) {
        self.first_tick = self.first_tick.min(other.first_tick);
        self.last_tick = self.last_tick.max(other.last_tick);
        self.lost += other.lost;
        self.detailed &= other.detailed;
        if self.sites.len() < other.sites.len() {
            self.sites.resize(other.sites.len(), 0);
            self.site_detail
                .resize(other.sites.len(), Detail::default());
        }
        for (a, b) in self.sites.iter_mut().zip(&other.sites) {
            *a += b;
        }
        for (a, b) in self.site_detail.iter_mut().zip(&other.site_detail) {
            a.add(b);
        }
        if self.threads.len() < other.threads.len() {
            self.threads.resize(other.threads.len(), [0; 2]);
            self.thread_detail
                .resize(other.threads.len(), Detail::default());
        }
        for (a, b) in self.threads.iter_mut().zip(&other.threads) {
            a[0] += b[0];
            a[1] += b[1];
        }
        for (a, b) in self.thread_detail.iter_mut().zip(&other.thread_detail) {
            a.add(b);
        }
    }

    /// Back to no record, keeping the tables' memory.
    pub fn clear(&mut self) {
        self.first_tick = u64::MAX;
        self.last_tick = 0;
        self.lost = 0;
        self.sites.iter_mut().for_each(|c| *c = 0);
        self.threads.iter_mut().for_each(|c| *c = [0; 2]);
        self.site_detail.fill(Detail::default());
        self.thread_detail.fill(Detail::default());
    }
}

#[cold]
fn grow<T: Clone>(v: &mut Vec<T>, id: u32, zero: T) -> &mut Vec<T> {
    v.resize(id as usize + 1, zero);
    v
}

/// Appends the body of a TOTALS entry: `records, first tick, last tick less
/// first, lost`, then the sites with records (`count`, then `id, records`
/// each), then the threads with records or drops (`count`, then `id,
/// records, dropped` each), all varints. With no record both ticks are 0.
/// Then the details, in the order of the sites and of the threads listed:
/// `bytes, first tick less the file's first, last tick less first` each
/// (`0, 0, 0` for a thread with drops only).
pub fn put_totals(out: &mut Vec<u8>, t: &Totals) {
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
    let sites = t.sites.iter().enumerate().filter(|(_, &c)| c > 0);
    put_varint(out, sites.clone().count() as u64);
    for (id, &c) in sites.clone() {
        put_varint(out, id as u64);
        put_varint(out, c);
    }
    let threads = t
        .threads
        .iter()
        .enumerate()
        .filter(|(_, c)| c[0] + c[1] > 0);
    put_varint(out, threads.clone().count() as u64);
    for (id, c) in threads.clone() {
        put_varint(out, id as u64);
        put_varint(out, c[0]);
        put_varint(out, c[1]);
    }
    let put_detail = |out: &mut Vec<u8>, d: Option<&Detail>| match d {
        Some(d) if d.first_tick <= d.last_tick => {
            put_varint(out, d.bytes);
            put_varint(out, d.first_tick.saturating_sub(first));
            put_varint(out, d.last_tick - d.first_tick);
        }
        _ => out.extend_from_slice(&[0, 0, 0]),
    };
    for (id, _) in sites {
        put_detail(out, t.site_detail.get(id));
    }
    for (id, _) in threads {
        put_detail(out, t.thread_detail.get(id));
    }
}

/// The largest site or thread id a TOTALS entry read may name: its tables
/// are indexed by id, so a damaged id cannot make them large.
const MAX_ID: u64 = 1 << 24;

/// The slot of id `id` in `v`, grown to it; `None` for an id past
/// [`MAX_ID`].
fn at<T: Clone>(v: &mut Vec<T>, id: u64, zero: T) -> Option<&mut T> {
    let id = u32::try_from(id).ok().filter(|&i| u64::from(i) < MAX_ID)?;
    if v.len() <= id as usize {
        grow(v, id, zero);
    }
    v.get_mut(id as usize)
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
    let sites = next()?;
    let mut site_ids = Vec::new();
    for _ in 0..sites {
        let (id, c) = (next()?, next()?);
        let slot = at(&mut t.sites, id, 0)?;
        *slot = slot.checked_add(c)?;
        site_ids.push(id as usize);
    }
    let threads = next()?;
    let mut thread_ids = Vec::new();
    for _ in 0..threads {
        let (id, r, d) = (next()?, next()?, next()?);
        let slot = at(&mut t.threads, id, [0; 2])?;
        *slot = [slot[0].checked_add(r)?, slot[1].checked_add(d)?];
        thread_ids.push(id as usize);
    }
    let by_sites = t.sites.iter().try_fold(0u64, |a, &c| a.checked_add(c))?;
    let by_threads = t
        .threads
        .iter()
        .try_fold(0u64, |a, c| a.checked_add(c[0]))?;
    if by_sites != records || by_threads != records {
        return None;
    }
    t.site_detail = vec![Detail::default(); t.sites.len()];
    t.thread_detail = vec![Detail::default(); t.threads.len()];
    t.detailed = read_details(&mut t, &site_ids, &thread_ids, &mut next).is_some();
    if !t.detailed {
        t.site_detail.fill(Detail::default());
        t.thread_detail.fill(Detail::default());
    }
    Some(t)
}

/// Reads the details of the sites and threads listed (ids repeated in a
/// list are not: those are not details to trust), and checks them: each
/// range inside the file's, the sites' bytes adding up to the threads'.
fn read_details(
    t: &mut Totals,
    sites: &[usize],
    threads: &[usize],
    next: &mut impl FnMut() -> Option<u64>,
) -> Option<()> {
    let (first, last) = (t.first_tick, t.last_tick);
    let mut read = |d: &mut Detail, records: u64| -> Option<u64> {
        let (bytes, from, span) = (next()?, next()?, next()?);
        if records == 0 {
            return (bytes == 0).then_some(0);
        }
        let lo = first.checked_add(from)?;
        let hi = lo.checked_add(span)?;
        if hi > last || d.first_tick <= d.last_tick {
            return None;
        }
        *d = Detail {
            bytes,
            first_tick: lo,
            last_tick: hi,
        };
        Some(bytes)
    };
    let mut by_sites = 0u64;
    for &id in sites {
        let records = *t.sites.get(id)?;
        by_sites = by_sites.checked_add(read(t.site_detail.get_mut(id)?, records)?)?;
    }
    let mut by_threads = 0u64;
    for &id in threads {
        let records = t.threads.get(id)?[0];
        by_threads = by_threads.checked_add(read(t.thread_detail.get_mut(id)?, records)?)?;
    }
    (by_sites == by_threads).then_some(())
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
        let mut body = Vec::new();
        put_totals(&mut body, &t);
        let back = get_totals(&body).unwrap();
        assert_eq!(back.records(), 16);
        assert_eq!((back.first_tick, back.last_tick), (900, 2_000));
        assert_eq!(back.lost, 2);
        assert_eq!(back.sites.get(3), Some(&11));
        assert_eq!(back.sites.get(1), Some(&5));
        assert_eq!(back.threads.get(1), Some(&[10, 0]));
        assert_eq!(back.threads.get(2), Some(&[6, 0]));
        assert_eq!(back.threads.get(7), Some(&[0, 4]));
        assert_eq!(back, t, "the details read back as counted");
        assert_eq!(back.site_detail[3].bytes, 109);
        assert_eq!(back.thread_detail[2].first_tick, 900);
        // Cut short in the details: the counts stand, the details are not
        // known; in the counts, or a count that does not add up: not
        // totals.
        let short = get_totals(&body[..body.len() - 1]).unwrap();
        assert!(!short.detailed);
        assert_eq!(
            (short.sites.clone(), short.threads.clone()),
            (t.sites.clone(), t.threads.clone())
        );
        assert_eq!(short.site_detail[3], Detail::default());
        assert_eq!(get_totals(&body[..6]), None);
        // Details that do not add up (a site's bytes changed): not known.
        let mut odd = t.clone();
        odd.site_detail[3].bytes += 1;
        let mut odd_body = Vec::new();
        put_totals(&mut odd_body, &odd);
        assert!(!get_totals(&odd_body).unwrap().detailed);
        body[0] += 1;
        assert_eq!(get_totals(&body), None);
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
}
