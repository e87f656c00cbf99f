//! TOTALS entries (tag 14, FORMAT.md): what a finished file holds, counted
//! by its writer and written right ahead of its END, so that `nanolog info`
//! answers from the file's dictionary and its end instead of reading every
//! record.

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
}

impl Totals {
    /// No record yet.
    pub fn new() -> Totals {
        Totals {
            first_tick: u64::MAX,
            ..Totals::default()
        }
    }

    /// The records counted.
    pub fn records(&self) -> u64 {
        self.sites.iter().sum()
    }

    /// `n` records of site `site` from thread `thread`, the last at tick
    /// `last`: two additions and a compare (the tables grow, cold, the
    /// first time an id is met). (The first tick is the writer's to keep:
    /// an extent's first.)
    #[inline(always)]
    pub fn count(&mut self, site: u32, thread: u32, n: u64, last: u64) {
        self.last_tick = self.last_tick.max(last);
        match self.sites.get_mut(site as usize) {
            Some(c) => *c += n,
            None => grow(&mut self.sites, site, 0)[site as usize] += n,
        }
        match self.threads.get_mut(thread as usize) {
            Some(c) => c[0] += n,
            None => grow(&mut self.threads, thread, [0; 2])[thread as usize][0] += n,
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
        match self.threads.get_mut(thread as usize) {
            Some(c) => c[1] += n,
            None => grow(&mut self.threads, thread, [0; 2])[thread as usize][1] += n,
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Totals) {
        self.first_tick = self.first_tick.min(other.first_tick);
        self.last_tick = self.last_tick.max(other.last_tick);
        self.lost += other.lost;
        if self.sites.len() < other.sites.len() {
            self.sites.resize(other.sites.len(), 0);
        }
        for (a, b) in self.sites.iter_mut().zip(&other.sites) {
            *a += b;
        }
        if self.threads.len() < other.threads.len() {
            self.threads.resize(other.threads.len(), [0; 2]);
        }
        for (a, b) in self.threads.iter_mut().zip(&other.threads) {
            a[0] += b[0];
            a[1] += b[1];
        }
    }

    /// Back to no record, keeping the tables' memory.
    pub fn clear(&mut self) {
        self.first_tick = u64::MAX;
        self.last_tick = 0;
        self.lost = 0;
        self.sites.iter_mut().for_each(|c| *c = 0);
        self.threads.iter_mut().for_each(|c| *c = [0; 2]);
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
    for (id, &c) in sites {
        put_varint(out, id as u64);
        put_varint(out, c);
    }
    let threads = t
        .threads
        .iter()
        .enumerate()
        .filter(|(_, c)| c[0] + c[1] > 0);
    put_varint(out, threads.clone().count() as u64);
    for (id, c) in threads {
        put_varint(out, id as u64);
        put_varint(out, c[0]);
        put_varint(out, c[1]);
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
/// not add up (its record count is not its sites'). Bytes after the fields
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
    for _ in 0..sites {
        let (id, c) = (next()?, next()?);
        let slot = at(&mut t.sites, id, 0)?;
        *slot = slot.checked_add(c)?;
    }
    let threads = next()?;
    for _ in 0..threads {
        let (id, r, d) = (next()?, next()?, next()?);
        let slot = at(&mut t.threads, id, [0; 2])?;
        *slot = [slot[0].checked_add(r)?, slot[1].checked_add(d)?];
    }
    let by_sites = t.sites.iter().try_fold(0u64, |a, &c| a.checked_add(c))?;
    let by_threads = t
        .threads
        .iter()
        .try_fold(0u64, |a, c| a.checked_add(c[0]))?;
    (by_sites == records && by_threads == records).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_read_back_as_counted() {
        let mut t = Totals::new();
        t.count(3, 1, 10, 0);
        t.count(1, 2, 5, 0);
        t.count(3, 2, 1, 0);
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
        // Cut short, or a count that does not add up: not totals.
        assert_eq!(get_totals(&body[..body.len() - 1]), None);
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
        write.count(2, 1, 3, 0);
        write.ticks(50, 60);
        file.add(&write);
        write.clear();
        write.count(0, 4, 1, 0);
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
