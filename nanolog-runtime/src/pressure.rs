//! Whether the machine's threads wait for a core: the flusher naps longer
//! between its passes while they do.
//!
//! Each wake of the flusher takes a core. On a machine with an idle core
//! that costs the application nothing; on one whose cores the application
//! keeps busy it preempts a thread that was waiting to run, and a flusher
//! that wakes every 20 us does so thousands of times a second (the tokio
//! service of `service_cost`, 4 workers on 2 cores: BENCHMARKS.md,
//! "Longer naps while threads wait for cores"). Linux says how long runnable threads waited for a core in
//! its pressure stall information (`cpu.pressure` of the process's cgroup,
//! else `/proc/pressure/cpu`: the microseconds during which some thread
//! waited); the flusher reads it every few milliseconds. Elsewhere, or
//! where the kernel keeps no such count, the machine never counts as
//! crowded and the flusher naps as it always did.

use std::time::Duration;

/// How often the share is read (a read is one system call).
pub(crate) const EVERY: Duration = Duration::from_millis(4);

/// The longer share is judged over the last this many reads (about 32
/// ms). The kernel's total moves in steps of its tick (4 ms here: reads 4
/// ms apart in a service whose threads kept waiting said 0 for some, then
/// the time of two), so a share over one interval says little.
const READS: usize = 9;

/// Crowded once some thread waited for a core this share (in 1/1024ths)
/// of the last two intervals between reads (about 8 ms): half.
const SHORT_CROWDED: u64 = 512;

/// ... and until the share of the last [`READS`]' time is under this: a
/// quarter. The tokio service of `service_cost` read 0.24 / 0.58 / 0.73 /
/// 0.89 (tenth, quartile, median, three quarters) over 32 ms in its
/// rounds, 0 between them.
const LONG_CROWDED: u64 = 256;

/// The pressure file, and what it said last.
pub(crate) struct Pressure {
    #[cfg(target_os = "linux")]
    file: Option<std::fs::File>,
    /// The stall totals of the last [`READS`] reads (us) and when they
    /// were read (ns since `origin`), oldest first.
    reads: [(u64, u64); READS],
    /// How many reads there have been (up to [`READS`]).
    count: usize,
    origin: std::time::Instant,
    crowded: bool,
}

impl Pressure {
    /// The pressure of this process's cgroup, or of the whole machine; one
    /// that is never crowded where neither can be read.
    pub(crate) fn open() -> Pressure {
        Pressure {
            #[cfg(target_os = "linux")]
            file: linux::open(),
            reads: [(0, 0); READS],
            count: 0,
            origin: std::time::Instant::now(),
            crowded: false,
        }
    }

    /// Whether threads wait for cores, as [`Pressure::note`] judged the
    /// last reads.
    pub(crate) fn crowded(&self) -> bool {
        self.crowded
    }

    /// Reads the stall total and judges the last [`READS`] reads' time.
    pub(crate) fn sample(&mut self) {
        #[cfg(target_os = "linux")]
        let total = self.file.as_ref().and_then(linux::stalled_us);
        #[cfg(not(target_os = "linux"))]
        let total: Option<u64> = None;
        let Some(total) = total else {
            self.crowded = false;
            return;
        };
        let now = self.origin.elapsed().as_nanos() as u64;
        self.note(total, now);
    }

    /// Takes in a read of the stall total `total` (us) at `now` (ns).
    ///
    /// Crowded as soon as the last two intervals (about 8 ms) were half
    /// stalled, and until the last [`READS`]' time (about 32 ms) is less
    /// than a quarter stalled: the naps lengthen as the machine fills, and
    /// shorten once it has had cores to spare a while.
    fn note(&mut self, total: u64, now: u64) {
        self.reads.rotate_left(1);
        self.reads[READS - 1] = (total, now);
        self.count = (self.count + 1).min(READS);
        let share = |(before, then): (u64, u64)| {
            let wall = now.saturating_sub(then);
            if wall == 0 {
                return 0;
            }
            total.saturating_sub(before).saturating_mul(1000 * 1024) / wall
        };
        if self.count > 1 {
            let short = share(self.reads[READS - self.count.min(3)]);
            let long = share(self.reads[READS - self.count]);
            self.crowded = short >= SHORT_CROWDED || long >= LONG_CROWDED;
        }
    }
}

/// The `total=` of a pressure file's `some` line (microseconds).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    total.parse().ok()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    /// The process's cgroup's `cpu.pressure` (cgroup v2: a container's
    /// own, throttling by its quota included), else the machine's.
    pub(super) fn open() -> Option<File> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            })
            .map(|path| format!("/sys/fs/cgroup{}/cpu.pressure", path.trim_end_matches('/')));
        let file = own
            .and_then(|p| File::open(p).ok())
            .filter(|f| stalled_us(f).is_some())
            .or_else(|| File::open("/proc/pressure/cpu").ok())?;
        // A kernel built with the file but booted without PSI fails the read.
        stalled_us(&file).map(|_| file)
    }

    /// The file's stall total, read again from its start.
    pub(super) fn stalled_us(file: &File) -> Option<u64> {
        let mut buf = [0u8; 256];
        let n = file.read_at(&mut buf, 0).ok()?;
        super::some_total(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_some_total_is_read_from_a_pressure_file() {
        let text = "some avg10=0.93 avg60=36.30 avg300=45.80 total=4402820883\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(some_total(text), Some(4_402_820_883));
        assert_eq!(some_total("full avg10=0.00 total=5\n"), None);
        assert_eq!(some_total("some avg10=0.00 total=x\n"), None);
        assert_eq!(some_total(""), None);
    }

    /// Reads 4 ms apart of a total that rises by `stalls[i]` us before
    /// read `i`; whether each read left the pressure crowded.
    fn judged(stalls: &[u64]) -> Vec<bool> {
        let mut p = Pressure::open();
        let mut total = 1_000_000;
        stalls
            .iter()
            .enumerate()
            .map(|(i, s)| {
                total += s;
                p.note(total, i as u64 * 4_000_000);
                p.crowded
            })
            .collect()
    }

    #[test]
    fn crowded_as_soon_as_threads_wait_and_spare_after_a_while() {
        // Nothing waits: never crowded.
        assert!(judged(&[0; 12]).iter().all(|c| !c));
        // A stall the kernel counts in steps of its tick (4 ms, some
        // reads 0): crowded from the first step on, throughout.
        let steps = [0, 0, 4_000, 0, 4_000, 4_000, 0, 4_000, 4_000, 4_000];
        assert_eq!(
            judged(&steps),
            [false, false, true, true, true, true, true, true, true, true]
        );
        // Then nothing waits again: crowded until the last 32 ms are
        // under a quarter stalled, spare after.
        let mut calm = vec![4_000; 10];
        calm.extend([0; 10]);
        let c = judged(&calm);
        assert!(c[1..10].iter().all(|&c| c), "{c:?}");
        assert!(c[10] && c[11], "{c:?}");
        assert!(c[16..].iter().all(|&c| !c), "{c:?}");
    }

    #[test]
    fn a_pressure_that_cannot_be_read_is_never_crowded() {
        let mut p = Pressure::open();
        #[cfg(target_os = "linux")]
        {
            p.file = None;
        }
        p.crowded = true;
        p.sample();
        p.sample();
        assert!(!p.crowded());
    }
}
