//! The timestamp clock: `rdtsc` on x86_64, a monotonic nanosecond clock elsewhere.
//!
//! Producers read only [`now`], one instruction on x86_64. The mapping to wall
//! time is the flusher's business: it records (tick, Unix ns) pairs, and the
//! reader interpolates between them.

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
    #[cfg(not(target_arch = "x86_64"))]
    {
        fallback_ns()
    }
}

#[cfg(not(target_arch = "x86_64"))]
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

/// A (tick, Unix ns) pair taken as close together as the OS allows.
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
    (best.1, best.2)
}

/// Ticks per second, measured once per process.
pub fn ticks_per_second() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

fn calibrate() -> f64 {
    if cfg!(not(target_arch = "x86_64")) {
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
    let hz = (t1.wrapping_sub(t0)) as f64 / elapsed.as_secs_f64();
    if hz.is_finite() && hz > 1e6 {
        hz
    } else {
        1e9
    }
}
