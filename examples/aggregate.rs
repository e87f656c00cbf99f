//! The NanoLog paper's Figure 7 on the reader API: min, mean and max of the
//! argument of "Hello World # {}", straight from the binary values.
//!
//! `cargo run --release --example aggregate [-- app.nlog]` (without a path it
//! first writes a log of 1,000,000 such records).

use nanolog::reader::LogFile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args().nth(1) {
        Some(p) => p,
        None => {
            let logger = nanolog::Logger::builder().path("aggregate.nlog").start()?;
            for i in 0..1_000_000u64 {
                nanolog::info!("Hello World # {}", i % 1000);
            }
            drop(logger);
            "aggregate.nlog".to_owned()
        }
    };

    // The aggregation: a few lines over typed records, nothing formatted.
    let log = LogFile::open(&path)?;
    let (mut n, mut sum, mut min, mut max) = (0u64, 0f64, f64::INFINITY, f64::NEG_INFINITY);
    for rec in log.records() {
        let rec = rec?;
        if rec.site().format == "Hello World # {}" {
            if let Some(v) = rec.arg(0).and_then(|v| v.as_f64()) {
                (n, sum, min, max) = (n + 1, sum + v, min.min(v), max.max(v));
            }
        }
    }
    println!(
        "{n} records: min {min} mean {} max {max}",
        sum / n.max(1) as f64
    );
    Ok(())
}
