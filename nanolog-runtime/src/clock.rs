//! The timestamp clock: the CPU's own counter where it has one user code may
//! read (the TSC by `rdtsc` on x86_64, the virtual counter `CNTVCT_EL0` on
//! aarch64), a monotonic nanosecond clock elsewhere.
//!
//! Producers read only [`now`], one instruction on x86_64 and aarch64. The
//! mapping to wall time is the flusher's business: it records (tick, Unix ns)
//! pairs, and the reader interpolates between them, so what [`ticks_per_second`]
//! gets wrong by calibration the pairs correct.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The current tick.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` exists on every x86_64 CPU and has no preconditions; it
        // only reads the time-stamp counter.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        aarch64::counter()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fallback_ns()
    }
}

/// The generic timer's virtual counter, which ARMv8-A requires of every core
/// and which Linux, macOS and Windows all let user code read (Linux's own
/// vDSO clock reads it; a kernel working around a faulty timer traps the
/// read and emulates it, slower but correct).
#[cfg(target_arch = "aarch64")]
mod aarch64 {
    /// `CNTVCT_EL0`. No `isb` before it: like `rdtsc` (not `rdtscp`) the
    /// read may be taken a few instructions early, which a log's timestamp
    /// does not notice and the hot path would pay ~20 cycles for.
    #[inline(always)]
    pub(super) fn counter() -> u64 {
        let t: u64;
        // SAFETY: reading CNTVCT_EL0 touches no memory, stack or flags, and
        // is permitted at EL0 on every OS this builds for (the kernel sets
        // CNTKCTL_EL1.EL0VCTEN, as its vDSO needs); `t` is a plain output.
        unsafe {
            core::arch::asm!("mrs {t}, cntvct_el0", t = out(reg) t,
                options(nomem, nostack, preserves_flags));
        }
        t
    }

    /// `CNTFRQ_EL0`: the counter's frequency as firmware programmed it
    /// (0 when it did not).
    pub(super) fn nominal_hz() -> u64 {
        let f: u64;
        // SAFETY: as in `counter`: a register read, readable at EL0.
        unsafe {
            core::arch::asm!("mrs {f}, cntfrq_el0", f = out(reg) f,
                options(nomem, nostack, preserves_flags));
        }
        f
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn fallback_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Nanoseconds since the Unix epoch, by the system clock.
pub fn unix_ns() -> i64 {
    let ns = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    };
    #[cfg(feature = "test-hooks")]
    let ns = ns + WALL_STEP.load(std::sync::atomic::Ordering::Relaxed);
    ns
}

/// Tests only: how far the wall clock has been stepped.
#[cfg(feature = "test-hooks")]
static WALL_STEP: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Tests only: steps this process's view of the wall clock by `delta_ns`
/// (negative: back), as an operator's `date -s` or an NTP step would.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn __step_wall_clock(delta_ns: i64) {
    WALL_STEP.fetch_add(delta_ns, std::sync::atomic::Ordering::Relaxed);
}

/// The latest wall-clock time a pair of this process has said.
static LAST_PAIR_NS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);

/// A (tick, Unix ns) pair taken as close together as the OS allows.
///
/// Its time is never earlier than one an earlier pair of this process
/// said: a wall clock stepped back (an NTP step, `date -s`) gives the
/// latest time said so far instead. A reader makes a process's pairs
/// non-decreasing over all its files anyway (FORMAT.md, CLOCK); written so,
/// each file already holds the times its whole set maps to, and a reader
/// of a few files of a large set (a follower, `ship`) needs only the pairs
/// around their ticks to print what `decode` of the set prints.
pub fn pair() -> (u64, i64) {
    // Bracket the system-clock read with two tick reads and keep the narrowest
    // of a few tries, so a preemption between the reads does not skew the pair.
    let mut best = (u64::MAX, 0u64, 0i64);
    for _ in 0..5 {
        let t0 = now();
        let ns = unix_ns();
        let t1 = now();
        let width = t1.wrapping_sub(t0);
        if width < best.0 {
            best = (width, t0 / 2 + t1 / 2 + (t0 & t1 & 1), ns);
        }
    }
    // Relaxed: one variable, whose modification order alone decides what
    // each pair says; nothing else is published through it.
    let before = LAST_PAIR_NS.fetch_max(best.2, std::sync::atomic::Ordering::Relaxed);
    (best.1, before.max(best.2))
}

/// Ticks per second, measured once per process.
pub fn ticks_per_second() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

/// What the counter's own frequency register says, where it has one.
fn nominal_hz() -> Option<u64> {
    #[cfg(target_arch = "aarch64")]
    {
        Some(aarch64::nominal_hz()).filter(|&f| f > 0)
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        None
    }
}

fn calibrate() -> f64 {
    if cfg!(not(any(target_arch = "x86_64", target_arch = "aarch64"))) {
        return 1e9;
    }
    // 20 ms against the monotonic clock: good to about 1e-4, and the periodic
    // clock pairs in the file correct what is left of the error.
    let window = Duration::from_millis(20);
    let i0 = Instant::now();
    let t0 = now();
    while i0.elapsed() < window {
        std::hint::spin_loop();
    }
    let t1 = now();
    let elapsed = i0.elapsed();
    let measured = (t1.wrapping_sub(t0)) as f64 / elapsed.as_secs_f64();
    rate(nominal_hz(), measured)
}

/// The rate a file's header states, from the counter's stated frequency
/// (aarch64's `CNTFRQ_EL0`) and a measured one. The stated one is exact
/// when firmware set it right, so it is taken when the measurement agrees
/// within 1%; firmware that set it wrong (it happens) loses to the
/// measurement. A measurement that is no rate at all (a counter that did
/// not move) gives 1 GHz, the fallback clock's.
fn rate(nominal: Option<u64>, measured: f64) -> f64 {
    let measured_ok = measured.is_finite() && measured > 1e6;
    match nominal {
        Some(f) if measured_ok && ((f as f64 - measured) / measured).abs() < 0.01 => f as f64,
        Some(f) if !measured_ok && f as f64 > 1e6 => f as f64,
        _ if measured_ok => measured,
        _ => 1e9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::TimeMap;

    #[test]
    fn the_stated_frequency_is_taken_when_the_measurement_agrees() {
        // Graviton's 1.05 GHz, Apple's 24 MHz, Ampere's 25 MHz: measured
        // within 1e-4, the stated rate is exact.
        for f in [1_050_000_000u64, 24_000_000, 25_000_000] {
            assert_eq!(rate(Some(f), f as f64 * (1.0 + 1e-4)), f as f64);
        }
        // Firmware that stated the wrong frequency loses to the measurement.
        assert_eq!(rate(Some(100_000_000), 24e6), 24e6);
        // No stated rate (x86_64's TSC): the measurement.
        assert_eq!(rate(None, 2.596e9), 2.596e9);
        // A counter that did not move: the stated rate, else 1 GHz.
        assert_eq!(rate(Some(24_000_000), 0.0), 24e6);
        assert_eq!(rate(None, 0.0), 1e9);
        assert_eq!(rate(Some(0), f64::NAN), 1e9);
    }

    /// A counter of `hz` that runs `drift` fast against the wall clock: the
    /// header's rate is the stated one, the clock pairs the flusher writes
    /// every `resync` ns correct the drift, so every tick between pairs
    /// maps to its wall time within the counter's own resolution (the
    /// pairs' ticks are counter reads too).
    fn check_resync(hz: f64, drift: f64, resync_ns: i64) {
        let true_hz = hz * (1.0 + drift);
        let base_tick = 123_456_789_000u64;
        let base_ns = 1_764_000_000_000_000_000i64;
        let tick_of = |ns_since: i64| base_tick + (ns_since as f64 * true_hz / 1e9) as u64;
        let pairs: Vec<(u64, i64)> = (0..=10)
            .map(|i| (tick_of(i * resync_ns), base_ns + i * resync_ns))
            .collect();
        let map = TimeMap::new(hz, pairs);
        let tick_ns = 1e9 / true_hz;
        let mut last = i64::MIN;
        for step in 0..=10_000i64 {
            let ns_since = step * resync_ns / 1_000;
            let mapped = map.unix_ns(tick_of(ns_since));
            let err = (mapped - (base_ns + ns_since)).abs() as f64;
            // A tick's width for the tick read, one for the pair's own tick,
            // and the fixed point's nanosecond.
            assert!(
                err <= 2.0 * tick_ns + 1.0,
                "{hz} Hz, drift {drift}: {err} ns off at {ns_since} ns"
            );
            assert!(mapped >= last, "went back at {ns_since} ns");
            last = mapped;
        }
        // Past the last pair the header's rate extrapolates: off by the
        // drift times the distance, no more.
        let beyond = 11 * resync_ns;
        let err = (map.unix_ns(tick_of(beyond)) - (base_ns + beyond)).abs() as f64;
        assert!(err <= resync_ns as f64 * drift.abs() * 1.01 + 2.0 * tick_ns + 1.0);
    }

    #[test]
    fn counters_of_aarch64_servers_and_laptops_map_to_wall_time() {
        // Graviton 3's 1.05 GHz, Graviton 2's 121.875 MHz, Apple's and
        // Ampere's 24/25 MHz; a counter 50 ppm fast, one 20 ppm slow, and
        // x86_64's TSC for comparison; pairs a second apart.
        for hz in [1.05e9, 121.875e6, 24e6, 25e6, 2.596e9] {
            for drift in [0.0, 50e-6, -20e-6] {
                check_resync(hz, drift, 1_000_000_000);
            }
        }
    }

    #[test]
    fn ticks_advance_at_the_calibrated_rate() {
        // On this machine's own counter (whichever `now` reads): 50 ms by
        // the monotonic clock is 50 ms of ticks at the calibrated rate,
        // within a few percent (a preemption may widen the window).
        let hz = ticks_per_second();
        let (t0, i0) = (now(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (t1, elapsed) = (now(), i0.elapsed());
        let ticks_s = t1.wrapping_sub(t0) as f64 / hz;
        let ratio = ticks_s / elapsed.as_secs_f64();
        assert!((0.9..1.1).contains(&ratio), "ticks/elapsed = {ratio}");
    }
}
