//! Writes a benchmark log: `cargo run --release --example gen_log -- PATH THREADS TOTAL`.
//! Each thread logs TOTAL/THREADS records of the mix in `common/workload.rs`.

#[path = "common/workload.rs"]
mod workload;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "bench.nlog".into());
    let threads: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4);
    let total: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000_000);
    let logger = nanolog::Logger::builder().path(&path).start()?;
    workload::log_mixed_threads(threads, total);
    logger.flush()?;
    let s = logger.stats();
    println!(
        "{}: {} records from {threads} threads, {} bytes",
        path, s.logged, s.bytes_written
    );
    Ok(())
}
