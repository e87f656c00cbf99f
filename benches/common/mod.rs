//! Timing helpers shared by the benches (each bench uses some of them).
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// The NanoLog paper's Table 3 messages, in the order of [`table3_calls!`].
pub const TABLE3: [&str; 6] = [
    "staticString",
    "stringConcat",
    "singleInteger",
    "twoIntegers",
    "singleDouble",
    "complexFormat",
];

/// A Table 3 message made `n` times in a loop: `op(n)`.
pub type Op = fn(u64);

/// The six Table 3 calls as `[Op; 6]`, in [`TABLE3`] order, through the
/// logging macro named by the tokens given (`$m!(...)`): the same literal
/// text as the paper's benchmark, `%d` as i32, `%lu` u64, `%u` u32,
/// `%0.6lf` `{:.6}`. Each op makes its call `n` times in a loop of its own,
/// the call expanded in the loop's body as in C++ NanoLog's benchmark (and
/// in users' code): timing `n` calls of a function pointer would add a call,
/// a return and the callee's register saves to every message. Shared by
/// `benches/table3.rs`, `benches/split.rs` and `bench-peers`.
#[allow(unused_macros)]
macro_rules! table3_calls {
    ($($m:tt)+) => {
        [
            |n: u64| for _ in 0..n { $($m)+!("Starting backup replica garbage collector thread") },
            |n: u64| for _ in 0..n { $($m)+!(
                "Opened session with coordinator at {}",
                "basic+udp:host=192.168.1.140,port=12246"
            ) },
            |n: u64| for _ in 0..n { $($m)+!("Backup storage speeds (min): {} MB/s read", 181i32) },
            |n: u64| for _ in 0..n { $($m)+!(
                "buffer has consumed {} bytes of extra storage, current allocation: {} bytes",
                1032024u64,
                1016544u64
            ) },
            |n: u64| for _ in 0..n { $($m)+!("Using tombstone ratio balancer with ratio = {:.6}", 0.400000f64) },
            |n: u64| for _ in 0..n { $($m)+!(
                "Initialized InfUdDriver buffers: {} receive buffers ({} MB), {} transmit buffers ({} MB), took {:.1} ms",
                50000u64,
                97u32,
                50u32,
                0u32,
                26.2f64
            ) },
        ]
    };
}

/// Removes a log and the finished files of earlier runs kept beside it.
pub fn remove_set(path: &std::path::Path) {
    for (p, _) in nanolog::reader::finished_files(path).unwrap_or_default() {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(path);
    let mut lock = path.as_os_str().to_os_string();
    lock.push(".lock");
    let _ = std::fs::remove_file(lock);
}

/// Calls timed in one burst: they fit the default 1 MiB ring.
pub const BURST: u64 = 16_384;

/// Times `iters` calls of `call` in bursts that fit the ring, flushing
/// between bursts outside the timing, so the flusher's speed does not leak
/// into a per-call figure.
pub fn bursts(iters: u64, logger: &nanolog::Logger, mut call: impl FnMut(u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BURST.min(iters - done);
        let t = Instant::now();
        for i in 0..n {
            call(i);
        }
        total += t.elapsed();
        done += n;
        logger.flush().expect("flush");
    }
    total
}

/// The TSC, as the logger reads it.
#[inline(always)]
pub fn tsc() -> u64 {
    nanolog_runtime::clock::now()
}

/// The `p`-th percentile of sorted samples, by nearest rank.
/// Times `samples` calls of `op` one by one with the TSC (an empty
/// `rdtsc` pair's `overhead` subtracted), busy-waiting `wait` ticks after
/// each so calls do not queue behind one another; the ticks each took,
/// sorted (read percentiles with [`nearest_rank`]).
pub fn timed_calls(samples: usize, wait: u64, overhead: u64, mut op: impl FnMut()) -> Vec<u64> {
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = tsc();
        op();
        let t1 = tsc();
        lat.push((t1 - t0).saturating_sub(overhead));
        while tsc() - t1 < wait {
            std::hint::spin_loop();
        }
    }
    lat.sort_unstable();
    lat
}

pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> T {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// The median of `v` (the mean of the middle two for an even count), or
/// `None` if `v` is empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let k = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[k]),
        _ => Some((v[k - 1] + v[k]) / 2.0),
    }
}

/// The median cost in ticks of two back-to-back TSC reads, over `samples`
/// pairs: the timer's own overhead, subtracted from timed calls.
pub fn empty_tsc_pair(samples: usize) -> u64 {
    let mut empty: Vec<u64> = (0..samples)
        .map(|_| {
            let t0 = tsc();
            let t1 = tsc();
            t1 - t0
        })
        .collect();
    empty.sort_unstable();
    nearest_rank(&empty, 50.0)
}

/// The round trip of one cache line between two threads, ns (median of
/// nine batches of 20,000). On a virtual machine the host may run the two
/// vCPUs on cores near each other or far apart, and move them within
/// seconds; every figure that has two threads share lines (a logger and
/// its writer thread) moves with this one.
pub fn rtt() -> f64 {
    use std::hint::spin_loop;
    use std::sync::atomic::{
        AtomicU64,
        Ordering::{Acquire, Release},
    };

    #[repr(align(128))]
    struct Line(AtomicU64);
    static PING: Line = Line(AtomicU64::new(0));
    static PONG: Line = Line(AtomicU64::new(0));
    const N: u64 = 20_000;
    const BATCHES: u64 = 9;
    PING.0.store(0, Release);
    PONG.0.store(0, Release);
    let echo = std::thread::spawn(|| {
        for i in 1..=N * BATCHES {
            while PING.0.load(Acquire) != i {
                spin_loop();
            }
            PONG.0.store(i, Release);
        }
    });
    let mut batches: Vec<f64> = (0..BATCHES)
        .map(|b| {
            let t = Instant::now();
            for i in b * N + 1..=(b + 1) * N {
                PING.0.store(i, Release);
                while PONG.0.load(Acquire) != i {
                    spin_loop();
                }
            }
            t.elapsed().as_nanos() as f64 / N as f64
        })
        .collect();
    echo.join().expect("echo thread");
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

/// Prints the cores' round trip ([`rtt`]) `when` a run starts or ends, the
/// line every harness's output carries so a reader can tell near cores from
/// far ones.
pub fn print_rtt(when: &str) {
    println!(
        "cache-line round trip between the two cores at the {when}: {:.0} ns",
        rtt()
    );
}
