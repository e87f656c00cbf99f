//! The figures of issue #2, measured side by side in one run:
//!
//! - per-call latency (median, p99) of a static message and of one integer,
//!   each call timed with the TSC, with room in the ring;
//! - bytes per record on disk for both;
//! - records per second for 10 million static messages from one thread until
//!   `flush()` returns (the paper's Figure 4 workload).
//!
//! `cargo bench --bench throughput` (set `NANOLOG_BENCH_N` to change 10M).

mod common;

use std::time::Instant;

use common::{empty_tsc_pair, nearest_rank, tsc};
use nanolog::Logger;

/// Per-call ticks of `call`, in bursts that fit the ring.
fn latencies(logger: &Logger, samples: usize, mut call: impl FnMut(u64)) -> Vec<u64> {
    let mut v = Vec::with_capacity(samples);
    let mut i = 0u64;
    while v.len() < samples {
        for _ in 0..8_192 {
            let t0 = tsc();
            call(i);
            let t1 = tsc();
            v.push(t1 - t0);
            i += 1;
        }
        logger.flush().unwrap();
    }
    v
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n: u64 = std::env::var("NANOLOG_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let dir = std::env::temp_dir();
    let hz = nanolog_runtime::clock::ticks_per_second();
    let ns = |ticks: u64| ticks as f64 * 1e9 / hz;

    let overhead = empty_tsc_pair(200_000);

    let path = dir.join("nanolog-bench-latency.nlog");
    let logger = Logger::builder().path(&path).start().unwrap();
    let samples = 1_000_000;
    let mut stat = latencies(&logger, samples, |_| {
        nanolog::info!("Starting backup replica garbage collector thread")
    });
    let mut int = latencies(&logger, samples, |i| {
        nanolog::info!(
            "Backup storage speeds (min/avg): {} MB/s",
            std::hint::black_box(i % 1000)
        )
    });
    drop(logger);
    stat.sort_unstable();
    int.sort_unstable();
    println!(
        "machine: {} cores, TSC {:.3} GHz; timer overhead {:.1} ns (subtracted)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        hz / 1e9,
        ns(overhead)
    );
    for (name, v) in [("static message", &stat), ("one integer", &int)] {
        let adj = |p: f64| ns(nearest_rank(v, p).saturating_sub(overhead));
        println!("latency  {name:<16} median {:6.1} ns   p90 {:6.1} ns   p99 {:6.1} ns   p99.9 {:7.1} ns", adj(50.0), adj(90.0), adj(99.0), adj(99.9));
    }

    // Bytes per record, and throughput until flush() returns.
    for (name, which) in [("static message", 0), ("one integer", 1)] {
        let path = dir.join(format!("nanolog-bench-throughput-{which}.nlog"));
        let logger = Logger::builder().path(&path).start().unwrap();
        let t = Instant::now();
        if which == 0 {
            for _ in 0..n {
                nanolog::info!("Starting backup replica garbage collector thread");
            }
        } else {
            for i in 0..n {
                nanolog::info!(
                    "Backup storage speeds (min/avg): {} MB/s",
                    std::hint::black_box(i % 1000)
                );
            }
        }
        let logged = t.elapsed();
        logger.flush().unwrap();
        let flushed = t.elapsed();
        let stats = logger.stats();
        drop(logger);
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(stats.logged, n);
        println!(
            "throughput {name:<16} {n} records: {:6.1} M/s until flush() returned ({:.1} M/s calls alone); {:.2} bytes/record on disk ({size} bytes)",
            n as f64 / flushed.as_secs_f64() / 1e6,
            n as f64 / logged.as_secs_f64() / 1e6,
            size as f64 / n as f64
        );
        let _ = std::fs::remove_file(&path);
    }

    // The text mirror's cost on the flusher (issue #7): one integer, without
    // a mirror, with one whose level passes nothing, and with one that renders
    // every record (into io::sink, so only rendering is measured).
    let mirrors: [(&str, Option<nanolog::Level>); 3] = [
        ("no mirror", None),
        ("mirror at Error", Some(nanolog::Level::Error)),
        ("mirror every record", Some(nanolog::Level::Info)),
    ];
    for (name, level) in mirrors {
        let path = dir.join("nanolog-bench-throughput-mirror.nlog");
        let mut b = Logger::builder().path(&path);
        if let Some(l) = level {
            b = b.mirror(std::io::sink(), l);
        }
        let logger = b.start().unwrap();
        let t = Instant::now();
        for i in 0..n {
            nanolog::info!(
                "Backup storage speeds (min/avg): {} MB/s",
                std::hint::black_box(i % 1000)
            );
        }
        logger.flush().unwrap();
        let flushed = t.elapsed();
        let stats = logger.stats();
        drop(logger);
        println!(
            "mirror   {name:<20} {n} records: {:6.1} M/s until flush() returned; {} lines skipped",
            n as f64 / flushed.as_secs_f64() / 1e6,
            stats.mirror_skipped
        );
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_file(&path);
}
