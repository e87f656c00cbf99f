//! The latency of `Logger::sync()` (one record logged, then flushed and
//! `fdatasync`ed) against `flush()` alone, on the machine's temp directory.
//! Prints percentiles; run with `cargo bench --bench sync`.

use std::time::{Duration, Instant};

fn percentiles(mut v: Vec<Duration>) -> String {
    v.sort();
    let at = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    format!(
        "p50 {:>9.1?}  p90 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}",
        at(0.5),
        at(0.9),
        at(0.99),
        v[v.len() - 1]
    )
}

fn main() {
    let dir = std::env::var_os("NANOLOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("nanolog-sync-bench-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    const ROUNDS: u32 = 300;
    for (name, sync) in [("flush", false), ("sync", true)] {
        let mut times = Vec::with_capacity(ROUNDS as usize);
        for i in 0..ROUNDS + 20 {
            nanolog::info!("audit record {} of {}", i, name);
            let t = Instant::now();
            if sync {
                logger.sync().unwrap();
            } else {
                logger.flush().unwrap();
            }
            if i >= 20 {
                times.push(t.elapsed());
            }
        }
        println!(
            "{name:>5}: {ROUNDS} rounds, one record each: {}",
            percentiles(times)
        );
    }
    println!("file: {}", path.display());
    drop(logger);
    let _ = std::fs::remove_file(&path);
}
