//! The two sides of a ring timed apart, for the Table 3 messages: the
//! logging thread alone (the flusher held, so no other core reads the lines
//! it writes), then the flusher alone draining what it wrote (until
//! `flush()` returns: compaction and the write to the OS).
//!
//! End-to-end throughput (`benches/table3.rs`) has both threads at once and,
//! on a virtual machine, the latency of moving cache lines between its two
//! cores, which the host can change from one second to the next; each side
//! alone varies far less, so a change to either shows here first.
//!
//! Each round logs `CALLS` records into a ring that holds them all; the
//! figures are the median and the 90th percentile of `NANOLOG_SPLIT_ROUNDS`
//! rounds (default 101): the 90th is the machine at its best.
//! `cargo bench --bench split` (`NANOLOG_SPLIT_ONLY=twoIntegers` for one message).

#[macro_use]
mod common;

use std::time::Instant;

use common::{nearest_rank, remove_set, Op, TABLE3};
use nanolog::Logger;

/// Records per round: the largest message's records (64 bytes each) fill
/// half the ring.
const CALLS: u64 = 32_768;
const RING: usize = 4 << 20;
/// The file rolls at this size and only the last finished one is kept, so
/// the pages of the one before go back to the page cache's free pool and
/// are written again at once. On this machine's VM, pages freed longer ago
/// are the host's again and cost a fault on the next write (measured
/// 2026-11-24: `git show 81b8c7a:BENCHMARKS.md`, "Why the file-heavy
/// figures swing"),
/// which one growing file would time instead of the flusher. The price: the
/// flusher also deletes a file every 16 MiB, about a tenth of its time on
/// complexFormat under `perf`, but the same tenth every run.
const ROLL: u64 = 16 << 20;

/// The median and the 90th percentile (nearest rank) of the rounds' rates.
fn p50_p90(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (nearest_rank(&v, 50.0), nearest_rank(&v, 90.0))
}

fn main() {
    let rounds: usize = std::env::var("NANOLOG_SPLIT_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(101);
    let dir = std::env::temp_dir().join(format!("nanolog-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let calls: [Op; 6] = table3_calls!(nanolog::info);
    println!("| message | logging thread alone, M calls/s, p50 / p90 | flusher alone, M records/s, p50 / p90 |");
    println!("|---|---|---|");
    let only = std::env::var("NANOLOG_SPLIT_ONLY").ok();
    for (name, call) in TABLE3.iter().zip(calls) {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let path = dir.join(format!("{name}.nlog"));
        let logger = Logger::builder()
            .path(&path)
            .staging_capacity(RING)
            .rotate_bytes(ROLL)
            .max_files(1)
            .start()
            .expect("start");
        // Register the site, attach the ring and touch all of it.
        call(RING as u64 / 16);
        logger.flush().expect("flush");
        let (mut producer, mut flusher) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            logger.__hold_flusher(true);
            let t0 = Instant::now();
            call(CALLS);
            let t1 = Instant::now();
            logger.__hold_flusher(false);
            logger.flush().expect("flush");
            let t2 = Instant::now();
            producer.push(CALLS as f64 / (t1 - t0).as_secs_f64() / 1e6);
            flusher.push(CALLS as f64 / (t2 - t1).as_secs_f64() / 1e6);
        }
        drop(logger);
        let (p, f) = (p50_p90(producer), p50_p90(flusher));
        println!(
            "| {name} | {:.1} / {:.1} | {:.1} / {:.1} |",
            p.0, p.1, f.0, f.1
        );
        remove_set(&path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
