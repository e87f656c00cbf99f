//! Nearest-rank percentiles of values spread over several collections (one
//! per `stats` worker), found without gathering them into one.
//!
//! A value's place in `f64::total_cmp`'s order is an unsigned key. Each
//! collection counts its values under each 16-bit prefix of that key as
//! they come (with its minimum and maximum), while they are in cache; the
//! counts then say which prefix each wanted rank falls under, and one pass
//! over the values in place takes out only those under these prefixes to
//! select among. Gathering them all into one vector (faulting in a new page
//! every 4 KiB) and selecting in it, plus a pass for the minimum and
//! maximum, took 48 of `stats --arg`'s 160 ms on 5 M values (the min/max
//! pass alone 15-19 ms: 40 MB read again); this takes 12.

/// Where a value sorts under `f64::total_cmp`, as an unsigned number:
/// negatives (sign bit set) reversed below the positives.
#[inline]
fn order_key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

const PREFIX_BITS: u32 = 16;

#[inline]
fn prefix(v: f64) -> usize {
    (order_key(v) >> (64 - PREFIX_BITS)) as usize
}

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `count` values: the
/// 0-based rank of the value it is.
fn rank(p: f64, count: usize) -> usize {
    (((p / 100.0) * count as f64).ceil().max(1.0) as usize).min(count) - 1
}

/// Values in the order they came, counted by prefix as they came: the
/// latest [`HELD`] in memory, those before them written out to a file of
/// the process's own (see [`Spill`]), so a question over a day's log (70 M
/// values of an argument) holds tens of MB, not the 8 bytes a value it
/// held before (845 MB peak for `stats --arg` of a gigabyte set, measured
/// 2026-12-01 at ba8b345).
pub(crate) struct Values {
    /// The latest values, in the order they came.
    held: Vec<f64>,
    /// The values before them: where each run of them is in the spill
    /// file (its first byte, how many values), in order.
    runs: Vec<(u64, usize)>,
    /// How many values there are in all.
    len: usize,
    /// Per prefix: how many of the values have it.
    counts: Vec<usize>,
    /// The least and the greatest by `<` (NaNs passed over).
    min: f64,
    max: f64,
    /// The sum of the values pushed since [`Values::take_sum`] last took it.
    sum: f64,
}

/// Values held in memory per part before they are written out (32 MiB;
/// the unit tests write out every few thousand, and park, gather and read
/// back by the same few thousands, so their cases take every path).
#[cfg(not(test))]
const HELD: usize = 1 << 22;
#[cfg(test)]
const HELD: usize = 3000;

/// Values the parts that are done ([`Values::park`]) keep in memory, all
/// of them together (48 MiB): a set read a file at a time has a part per
/// file and worker, and a file's question that fits is not written out.
#[cfg(not(test))]
const PARKED: usize = 6 << 20;
#[cfg(test)]
const PARKED: usize = 5000;

/// Values the parts that are done hold in memory now.
static PARKED_NOW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Default for Values {
    /// No values yet; the counts' memory (512 KiB) taken from the
    /// allocator zeroed, its pages touched only where values fall.
    fn default() -> Values {
        Values {
            held: Vec::new(),
            runs: Vec::new(),
            len: 0,
            counts: vec![0; 1 << PREFIX_BITS],
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            sum: -0.0,
        }
    }
}

impl Values {
    #[inline]
    pub(crate) fn push(&mut self, v: f64) {
        self.counts[prefix(v)] += 1;
        // Comparisons, not `f64::min` (a library call a value here): NaNs
        // compare false, so they are passed over as `min` would.
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        if self.held.len() >= HELD {
            self.write_out();
        }
        self.held.push(v);
        self.len += 1;
        self.sum += v;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The sum of the values pushed since it was last taken, added in the
    /// order they came.
    pub(crate) fn take_sum(&mut self) -> f64 {
        std::mem::replace(&mut self.sum, -0.0)
    }

    /// No more values come: what it holds past [`PARKED`] is written out.
    pub(crate) fn park(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        // (Relaxed: a count of memory, parked by one thread at a time.)
        let now = PARKED_NOW.load(Relaxed);
        if now + self.held.len() > PARKED {
            self.write_out();
        }
        PARKED_NOW.store(now + self.held.len(), Relaxed);
        // (A buffer that held more goes back.)
        self.held.shrink_to_fit();
    }

    /// The held values go to the spill file (kept held if it cannot take
    /// them: a temporary directory that is full or read-only costs memory,
    /// not the answer).
    fn write_out(&mut self) {
        if let Some(at) = Spill::append(&self.held) {
            self.runs.push((at, self.held.len()));
            self.held.clear();
        }
    }

    /// Calls `f` with every value, in the order they came. A spill file
    /// that cannot be read back (removed under us, a disk error) is an
    /// error: the values are gone.
    pub(crate) fn for_each(&self, mut f: impl FnMut(f64)) -> std::io::Result<()> {
        let mut chunk = Vec::new();
        for &(at, n) in &self.runs {
            let mut done = 0;
            while done < n {
                let take = (n - done).min(READ_CHUNK);
                Spill::read(at + (done * 8) as u64, take, &mut chunk)?;
                chunk.iter().for_each(|&v| f(v));
                done += take;
            }
        }
        self.held.iter().for_each(|&v| f(v));
        Ok(())
    }
}

/// Values read back from the spill file at a time (512 KiB).
#[cfg(not(test))]
const READ_CHUNK: usize = 1 << 16;
#[cfg(test)]
const READ_CHUNK: usize = 1000;

/// The file the values of every part are written out to: created in the
/// temporary directory with the first run, its name removed at once (on
/// Unix the open file lives on, unnamed, until the process ends, so
/// nothing is left behind by a crash), appended to in runs at offsets
/// taken under a lock, read back by offset. Elsewhere than Unix nothing is
/// written out.
struct Spill {
    // (Read and written by offset on Unix only.)
    #[cfg_attr(not(unix), allow(dead_code))]
    file: std::fs::File,
    /// Where the next run goes.
    end: std::sync::Mutex<u64>,
    /// A run could not be written: the values stay in memory from then on.
    failed: std::sync::atomic::AtomicBool,
}

static SPILL: std::sync::OnceLock<Option<Spill>> = std::sync::OnceLock::new();

impl Spill {
    fn get() -> Option<&'static Spill> {
        SPILL.get_or_init(Spill::create).as_ref()
    }

    #[cfg(unix)]
    fn create() -> Option<Spill> {
        let dir = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!("nanolog-values-{}-{nanos}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .ok()?;
        let _ = std::fs::remove_file(&path);
        Some(Spill::over(file))
    }

    #[cfg(unix)]
    fn over(file: std::fs::File) -> Spill {
        Spill {
            file,
            end: std::sync::Mutex::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    #[cfg(not(unix))]
    fn create() -> Option<Spill> {
        None
    }

    /// Writes `values` as a run; where it starts, or `None` if it could
    /// not be written (the values stay where they were).
    fn append(values: &[f64]) -> Option<u64> {
        Spill::get()?.append_run(values)
    }

    /// [`Spill::append`] into this file.
    fn append_run(&self, values: &[f64]) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        // (Once a write failed, a full disk, none is tried again: every
        // value pushed past the bound would otherwise try the whole run
        // again. Relaxed: a hint; a racing writer fails on its own.)
        if self.failed.load(Relaxed) {
            return None;
        }
        let at = {
            let mut end = self
                .end
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let at = *end;
            *end += values.len() as u64 * 8;
            at
        };
        // (A run that failed leaves a hole no run names.)
        let mut bytes = Vec::with_capacity(READ_CHUNK * 8);
        let mut to = at;
        for chunk in values.chunks(READ_CHUNK) {
            bytes.clear();
            bytes.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
            if self.write_at(&bytes, to).is_err() {
                self.failed.store(true, Relaxed);
                return None;
            }
            to += bytes.len() as u64;
        }
        Some(at)
    }

    /// The `n` values from byte `at` on, into `out`.
    fn read(at: u64, n: usize, out: &mut Vec<f64>) -> std::io::Result<()> {
        let spill = Spill::get().ok_or_else(|| std::io::Error::other("no spill file"))?;
        let mut bytes = vec![0u8; n * 8];
        spill.read_at(&mut bytes, at)?;
        out.clear();
        out.extend(
            bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        );
        Ok(())
    }

    #[cfg(unix)]
    fn write_at(&self, bytes: &[u8], at: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.file, bytes, at)
    }

    #[cfg(unix)]
    fn read_at(&self, bytes: &mut [u8], at: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, bytes, at)
    }

    #[cfg(not(unix))]
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
        Err(std::io::Error::other("no spill file"))
    }

    #[cfg(not(unix))]
    fn read_at(&self, _: &mut [u8], _: u64) -> std::io::Result<()> {
        Err(std::io::Error::other("no spill file"))
    }
}

/// The least and the greatest of all the values of `parts`, by `<` (NaNs
/// passed over); `None` when there are none that compare.
pub(crate) fn min_max(parts: &[Values]) -> (Option<f64>, Option<f64>) {
    let min = parts
        .iter()
        .map(|p| p.min)
        .fold(f64::INFINITY, |a, b| if b < a { b } else { a });
    let max = parts
        .iter()
        .map(|p| p.max)
        .fold(f64::NEG_INFINITY, |a, b| if b > a { b } else { a });
    let any = parts.iter().any(|p| p.len() > 0);
    (any.then_some(min), any.then_some(max))
}

/// The value whose order key is `k` (see [`order_key`]).
fn from_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

/// Values gathered at most to select a percentile among (32 MiB, twice
/// that while the parts' are put together): past that, the candidates are narrowed by the next 16 bits of their keys
/// first, a pass over the values each time.
#[cfg(not(test))]
const GATHERED: usize = 1 << 22;
#[cfg(test)]
const GATHERED: usize = 2000;

/// A wanted rank, as the passes narrow it: the values whose keys start
/// with `prefix` (its `bits` high bits) hold it, `under` of them, it the
/// `rank`th among them.
#[derive(Clone, Copy)]
struct Narrowed {
    prefix: u64,
    bits: u32,
    rank: usize,
    under: usize,
}

impl Narrowed {
    #[inline]
    fn holds(&self, key: u64) -> bool {
        self.bits == 0 || key >> (64 - self.bits) == self.prefix
    }
}

/// Per `ps`, the nearest-rank percentile of all the values of `parts`
/// (`None` when there are none), ordered as `f64::total_cmp` orders; an
/// error if written-out values cannot be read back.
///
/// The prefixes counted as the values came say under which one each
/// wanted rank falls; the values under it are gathered and selected among
/// when there are at most [`GATHERED`] of them, else a pass counts them by
/// their next 16 bits first (a narrow distribution: a day of latencies
/// between 1.0 and 1.1 ms). Memory stays bounded however many values
/// there are; each narrowing costs a pass.
pub(crate) fn percentiles<const N: usize>(
    parts: &[Values],
    ps: [f64; N],
) -> std::io::Result<[Option<f64>; N]> {
    let count: usize = parts.iter().map(Values::len).sum();
    if count == 0 {
        return Ok([None; N]);
    }
    let mut below = vec![0usize; 1 << PREFIX_BITS];
    let mut sum = 0;
    for (i, b) in below.iter_mut().enumerate() {
        *b = sum;
        sum += parts.iter().map(|p| p.counts[i]).sum::<usize>();
    }
    let mut wanted = ps.map(|p| {
        let r = rank(p, count);
        let i = below.partition_point(|&b| b <= r) - 1;
        let under = below.get(i + 1).copied().unwrap_or(count) - below[i];
        Narrowed {
            prefix: i as u64,
            bits: PREFIX_BITS,
            rank: r - below[i],
            under,
        }
    });
    // Narrowed until each is few enough to gather, or a single key.
    loop {
        let wide: Vec<usize> = (0..N)
            .filter(|&w| wanted[w].under > GATHERED && wanted[w].bits < 64)
            .collect();
        if wide.is_empty() {
            break;
        }
        let looked: Vec<Narrowed> = wide.iter().map(|&w| wanted[w]).collect();
        let counted = per_part(parts, |part| {
            let mut counts = vec![vec![0usize; 1 << 16]; looked.len()];
            let read = part.for_each(|v| {
                let k = order_key(v);
                for (c, n) in counts.iter_mut().zip(&looked) {
                    if n.holds(k) {
                        c[((k >> (48 - n.bits)) & 0xffff) as usize] += 1;
                    }
                }
            });
            read.map(|()| counts)
        });
        let counted = counted.into_iter().collect::<std::io::Result<Vec<_>>>()?;
        for (j, &w) in wide.iter().enumerate() {
            let n = &mut wanted[w];
            let mut seen = 0;
            for sub in 0..1usize << 16 {
                let here: usize = counted.iter().map(|c| c[j][sub]).sum();
                if n.rank < seen + here {
                    n.prefix = n.prefix << 16 | sub as u64;
                    n.bits += 16;
                    n.rank -= seen;
                    n.under = here;
                    break;
                }
                seen += here;
            }
        }
    }
    // The ranks under one key are that key's value; the others are
    // gathered, per distinct prefix, and selected among.
    let mut gather: Vec<(u64, u32)> = wanted
        .iter()
        .filter(|n| n.bits < 64)
        .map(|n| (n.prefix, n.bits))
        .collect();
    gather.sort_unstable();
    gather.dedup();
    let looked: Vec<Narrowed> = gather
        .iter()
        .map(|&(prefix, bits)| Narrowed {
            prefix,
            bits,
            rank: 0,
            under: 0,
        })
        .collect();
    let taken = per_part(parts, |part| {
        let mut out = vec![Vec::new(); looked.len()];
        let read = part.for_each(|v| {
            let k = order_key(v);
            for (o, n) in out.iter_mut().zip(&looked) {
                if n.holds(k) {
                    o.push(v);
                }
            }
        });
        read.map(|()| out)
    });
    let taken = taken.into_iter().collect::<std::io::Result<Vec<_>>>()?;
    let mut under: Vec<Vec<f64>> = (0..gather.len())
        .map(|k| taken.iter().flat_map(|t| t[k].iter().copied()).collect())
        .collect();
    Ok(wanted.map(|n| {
        if n.bits == 64 {
            return Some(from_key(n.prefix));
        }
        let k = gather.binary_search(&(n.prefix, n.bits)).ok()?;
        // (The values gathered are those the counts counted: the rank is
        // among them.)
        let among = under.get_mut(k).filter(|u| n.rank < u.len())?;
        let (_, v, _) = among.select_nth_unstable_by(n.rank, f64::total_cmp);
        Some(*v)
    }))
}

/// `f` of each part, the parts taken on by threads of their own when there
/// are several large ones.
fn per_part<T: Send>(parts: &[Values], f: impl Fn(&Values) -> T + Sync) -> Vec<T> {
    if parts.iter().filter(|p| p.len() > 1 << 16).count() < 2 {
        return parts.iter().map(&f).collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = parts.iter().map(|p| s.spawn(|| f(p))).collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(t) => t,
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that cannot be written (a full disk; here a file open for
    /// reading only) is not tried again: the next takes no room and writes
    /// nothing.
    #[cfg(unix)]
    #[test]
    fn after_a_failed_run_none_is_tried_again() {
        let spill = Spill::over(std::fs::File::open("/dev/null").unwrap());
        let end = || *spill.end.lock().unwrap();
        assert_eq!(spill.append_run(&[1.0; 10]), None);
        assert_eq!(end(), 80, "the first run was tried");
        assert_eq!(spill.append_run(&[2.0; 10]), None);
        assert_eq!(end(), 80, "the second was tried too");
    }

    /// The percentiles the plain way: everything in one vector, sorted.
    fn sorted_way(parts: &[Vec<f64>], ps: &[f64]) -> Vec<Option<f64>> {
        let mut all: Vec<f64> = parts.iter().flatten().copied().collect();
        all.sort_by(f64::total_cmp);
        ps.iter()
            .map(|&p| (!all.is_empty()).then(|| all[rank(p, all.len())]))
            .collect()
    }

    fn same(a: &[Option<f64>], b: &[Option<f64>]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| match (x, y) {
                (Some(x), Some(y)) => x.to_bits() == y.to_bits(),
                (None, None) => true,
                _ => false,
            })
    }

    #[test]
    fn the_order_key_orders_as_total_cmp_does() {
        let vs = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1.0 + f64::EPSILON,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        for a in vs {
            for b in vs {
                assert_eq!(order_key(a).cmp(&order_key(b)), a.total_cmp(&b), "{a} {b}");
            }
        }
    }

    #[test]
    fn percentiles_match_sorting_for_all_kinds_of_values() {
        let ps = [0.1, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0];
        // A small generator (xorshift), so the test needs no crate.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let cases: Vec<Vec<Vec<f64>>> = vec![
            vec![],
            vec![vec![], vec![]],
            vec![vec![42.0]],
            // Sequence numbers, as a counter argument logs them, over two workers.
            vec![
                (0..300_000).map(f64::from).collect(),
                (300_000..500_000).map(f64::from).collect(),
            ],
            // All equal: one prefix holds every value.
            vec![vec![7.25; 100_000], vec![7.25; 90_000]],
            // Signs, zeros, infinities and NaNs among random bit patterns.
            (0..3)
                .map(|_| {
                    (0..70_000)
                        .map(|i| match i % 11 {
                            0 => f64::NAN,
                            1 => -0.0,
                            2 => f64::NEG_INFINITY,
                            _ => f64::from_bits(next()),
                        })
                        .collect()
                })
                .collect(),
            // Latencies: a narrow range, where many values share a prefix.
            vec![(0..200_000)
                .map(|_| 1.0 + (next() % 1000) as f64 / 997.0)
                .collect()],
        ];
        for (i, parts) in cases.iter().enumerate() {
            let want = sorted_way(parts, &ps);
            let values: Vec<Values> = parts
                .iter()
                .map(|part| {
                    let mut v = Values::default();
                    for &x in part {
                        v.push(x);
                    }
                    // As `stats` takes them: the sum, then parked.
                    let sum: f64 = part.iter().sum();
                    assert_eq!(v.take_sum().to_bits(), sum.to_bits(), "case {i}");
                    v.park();
                    v
                })
                .collect();
            // Written out or held, every value comes back in its order.
            for (part, v) in parts.iter().zip(&values) {
                let mut back = Vec::new();
                v.for_each(|x| back.push(x)).unwrap();
                let bits = |xs: &[f64]| xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&back), bits(part), "case {i}");
                assert_eq!(v.len(), part.len());
            }
            let got = percentiles(&values, ps).unwrap();
            assert!(same(&got, &want), "case {i}: {got:?} against {want:?}");
            let all: Vec<f64> = parts.iter().flatten().copied().collect();
            let (min, max) = min_max(&values);
            let want_min = all.iter().copied().filter(|v| !v.is_nan()).reduce(f64::min);
            let want_max = all.iter().copied().filter(|v| !v.is_nan()).reduce(f64::max);
            if all.is_empty() {
                assert_eq!((min, max), (None, None));
            } else {
                assert_eq!(min, Some(want_min.unwrap_or(f64::INFINITY)), "case {i}");
                assert_eq!(max, Some(want_max.unwrap_or(f64::NEG_INFINITY)), "case {i}");
            }
        }
    }
}
