//! Writes a benchmark log: `cargo run --release --example gen_log -- PATH THREADS TOTAL`.
//! Each thread logs TOTAL/THREADS records, cycling through the paper's
//! Figure 7 message ("Hello World # {}") and a few other kinds.

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
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..total / threads {
                    match i % 4 {
                        0 | 1 => nanolog::info!("Hello World # {}", i),
                        2 => nanolog::info!("Starting backup replica garbage collector thread"),
                        _ => nanolog::warn!(
                            "request {} from worker {} took {:.3} ms",
                            i,
                            t,
                            (i % 1000) as f64 / 7.0
                        ),
                    }
                }
            });
        }
    });
    logger.flush()?;
    let s = logger.stats();
    println!(
        "{}: {} records from {threads} threads, {} bytes",
        path, s.logged, s.bytes_written
    );
    Ok(())
}
