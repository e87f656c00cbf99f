//! The NanoLog paper's Table 3 messages under the protocol of issue #9, for
//! comparison with the authors' C++ NanoLog measured on this machine type:
//!
//! - latency: 1,000,000 calls after 4,194,304 warm-up calls (every ring page
//!   touched), each timed with the TSC, a 100 ns busy-wait between calls,
//!   the median empty TSC pair subtracted, nearest-rank percentiles;
//! - throughput: 100M calls (static) or 20M (others) from one thread as fast
//!   as possible, from the first call until `flush()` returns, default 1 MiB
//!   ring; the record count checked by reading the file back; bytes/record.
//!   Each run writes a new file, the previous run's deleted first, so that no
//!   run starts with the page cache of the ones before it.
//!
//! Throughput is the median of `NANOLOG_T3_RUNS` runs (default 3), from one
//! logging thread and from two (each making half the calls). The first row,
//! `floor`, is the least a call can cost under the same protocol: a TSC read
//! and a 16-byte store into a 1 MiB buffer, no logger.
//! `cargo bench --bench table3` (`NANOLOG_T3_SCALE=10` divides the counts;
//! `NANOLOG_T3_COMPRESS=0` turns the flusher's compression off;
//! `NANOLOG_T3_CRASH_SAFE=0` keeps the rings on the heap, no area: the
//! crash-safe rings' cost, measured in one build).

#[macro_use]
mod common;

use std::time::Instant;

use common::{
    empty_tsc_pair, median, nearest_rank, print_rtt, remove_set, timed_calls, tsc, Op, TABLE3,
};
use nanolog::reader::LogFile;
use nanolog::Logger;

/// The six messages with their call counts (100 M for the static one, 20 M
/// for the others).
fn ops() -> [(&'static str, Op, u64); 6] {
    let calls: [Op; 6] = table3_calls!(nanolog::info);
    std::array::from_fn(|i| {
        let count = if i == 0 { 100_000_000 } else { 20_000_000 };
        (TABLE3[i], calls[i], count)
    })
}

/// The floor: a TSC read and a 16-byte store per call into a 1 MiB buffer
/// (what a staging-ring write cannot go below), under the same protocol.
fn floor(scale: u64, wait: u64, overhead: u64, ns: &dyn Fn(u64) -> f64) {
    let mut buf = vec![[0u64; 2]; 1 << 16];
    let mut i = 0usize;
    let mut op = |buf: &mut Vec<[u64; 2]>| {
        let slot = &mut buf[i & ((1 << 16) - 1)];
        *slot = [tsc(), i as u64];
        i = i.wrapping_add(1);
        std::hint::black_box(slot);
    };
    for _ in 0..4_194_304 / scale {
        op(&mut buf);
    }
    let samples = (1_000_000 / scale) as usize;
    let lat = timed_calls(samples, wait, overhead, || op(&mut buf));
    let n = 100_000_000 / scale;
    let t = Instant::now();
    for _ in 0..n {
        op(&mut buf);
    }
    let rate = n as f64 / t.elapsed().as_secs_f64() / 1e6;
    println!(
        "{:<14} {:>6.0} {:>6.0} {:>7.0}   {:>9.1} {:>9} {:>9.2}",
        "floor",
        ns(nearest_rank(&lat, 50.0)),
        ns(nearest_rank(&lat, 99.0)),
        ns(nearest_rank(&lat, 99.9)),
        rate,
        "-",
        16.0
    );
}

fn main() {
    let scale: u64 = std::env::var("NANOLOG_T3_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let runs: usize = std::env::var("NANOLOG_T3_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    // NANOLOG_T3_COMPRESS=0: the flusher writes every batch as it is.
    let compress = std::env::var("NANOLOG_T3_COMPRESS").map_or(true, |v| v != "0");
    let crash_safe = std::env::var("NANOLOG_T3_CRASH_SAFE").map_or(true, |v| v != "0");
    let dir = std::env::temp_dir();
    let hz = nanolog_runtime::clock::ticks_per_second();
    let ns = |ticks: u64| ticks as f64 * 1e9 / hz;
    let wait = (100e-9 * hz) as u64;
    let overhead = empty_tsc_pair(1_000_000);
    println!(
        "machine: {} cores, TSC {:.3} GHz, empty TSC pair {:.1} ns (subtracted); runs {runs}, scale 1/{scale}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        hz / 1e9,
        ns(overhead)
    );
    print_rtt("start");
    println!(
        "{:<14} {:>6} {:>6} {:>7}   {:>9} {:>9} {:>9}",
        "message", "p50", "p99", "p99.9", "M msg/s", "2thr M/s", "B/rec"
    );
    floor(scale, wait, overhead, &ns);
    for (name, op, count) in ops() {
        let path = dir.join(format!("nanolog-table3-{name}-{}.nlog", std::process::id()));

        // Latency.
        let logger = Logger::builder()
            .path(&path)
            .compress(compress)
            .crash_safe(crash_safe)
            .start()
            .expect("start");
        op(4_194_304 / scale);
        logger.flush().expect("flush");
        let samples = (1_000_000 / scale) as usize;
        let lat = timed_calls(samples, wait, overhead, || op(1));
        drop(logger);

        // Throughput, median of `runs`.
        let n = count / scale;
        let mut rates = Vec::new();
        let mut bytes = 0;
        for _ in 0..runs {
            // Each run into a file of its own making: the previous run's file,
            // kept as a finished file, would hold its page cache, and on this
            // VM fresh guest pages cost a host fault each (measured 2026-11-24:
            // `git show 81b8c7a:BENCHMARKS.md`, "Why the file-heavy figures swing").
            remove_set(&path);
            let logger = Logger::builder()
                .path(&path)
                .compress(compress)
                .crash_safe(crash_safe)
                .start()
                .expect("start");
            let t = Instant::now();
            op(n);
            logger.flush().expect("flush");
            rates.push(n as f64 / t.elapsed().as_secs_f64() / 1e6);
            drop(logger);
            bytes = std::fs::metadata(&path).expect("log").len();
        }
        let file = LogFile::open(&path).expect("read back");
        let read = file.records().filter(Result::is_ok).count() as u64;
        assert_eq!(read, n, "{name}: {read} records read back, {n} logged");

        // Two logging threads, half the calls each.
        let mut rates2 = Vec::new();
        for _ in 0..runs {
            remove_set(&path);
            let logger = Logger::builder()
                .path(&path)
                .compress(compress)
                .crash_safe(crash_safe)
                .start()
                .expect("start");
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        op(n / 2);
                    });
                }
            });
            logger.flush().expect("flush");
            rates2.push((n / 2 * 2) as f64 / t.elapsed().as_secs_f64() / 1e6);
            drop(logger);
        }
        let read2 = LogFile::open(&path)
            .expect("read back")
            .records()
            .filter(Result::is_ok)
            .count() as u64;
        assert_eq!(
            read2,
            n / 2 * 2,
            "{name}: two threads, {read2} records read back"
        );
        println!(
            "{name:<14} {:>6.0} {:>6.0} {:>7.0}   {:>9.1} {:>9.1} {:>9.2}",
            ns(nearest_rank(&lat, 50.0)),
            ns(nearest_rank(&lat, 99.0)),
            ns(nearest_rank(&lat, 99.9)),
            median(rates).unwrap_or(f64::NAN),
            median(rates2).unwrap_or(f64::NAN),
            bytes as f64 / n as f64
        );
        remove_set(&path);
    }
    print_rtt("end");
}
