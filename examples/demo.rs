//! The main example: two threads log a few hundred thousand records of several
//! kinds, then the program reads its own log back with the reader and prints
//! the last lines and the number of records per call site.
//!
//! ```text
//! cargo run --release --example demo [-- path/to/demo.nlog]
//! nanolog decode demo.nlog | tail      # the same log, with the CLI
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use nanolog::reader::rfc3339;
use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::{debug, error, info, warn, Level, Logger};

// The fields are read through `Debug`, on the slow path.
#[derive(Debug)]
#[allow(dead_code)]
struct Order {
    id: u64,
    side: &'static str,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo.nlog".into());
    let logger = Logger::builder().path(&path).level(Level::Info).start()?;
    info!("demo starting, writing to {}", path);

    let started = Instant::now();
    let workers: Vec<_> = ["ingest", "match"]
        .into_iter()
        .enumerate()
        .map(|(w, name)| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for i in 0..150_000u64 {
                        match i % 6 {
                            0 => info!("Starting backup replica garbage collector thread"),
                            1 => info!("request {} took {} us", i, (i * 37) % 1000),
                            2 => info!(
                                "price {:.4} qty {:>6} side {:?}",
                                100.0 + (i % 50) as f64 / 8.0,
                                i % 977,
                                'B'
                            ),
                            3 => warn!(
                                "queue {name} at {pct:.1}% (worker {w})",
                                name = "orders",
                                pct = (i % 100) as f32
                            ),
                            4 => debug!("debug detail {} (filtered out at Info)", i),
                            _ if i % 5000 == 5 => error!(
                                "order rejected: {:?}",
                                Order {
                                    id: i,
                                    side: "sell"
                                }
                            ),
                            _ => info!(
                                "flag={} code={:#x} peer={}",
                                i % 2 == 0,
                                i as u32,
                                "10.0.0.7:9000"
                            ),
                        }
                    }
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked");
    }
    let elapsed = started.elapsed();
    logger.flush()?;
    let stats = logger.stats();
    drop(logger);
    println!(
        "logged {} records from 2 threads in {:.1} ms; {} bytes on disk ({:.2} bytes/record), {} dropped",
        stats.logged,
        elapsed.as_secs_f64() * 1e3,
        stats.bytes_written,
        stats.bytes_written as f64 / stats.logged.max(1) as f64,
        stats.dropped
    );

    // Read it back: typed records, formatted only when printed.
    let files = [LogFile::open(&path)?];
    let mut per_site: BTreeMap<u32, u64> = BTreeMap::new();
    let mut last: Vec<String> = Vec::new();
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            *per_site.entry(r.site().id).or_default() += 1;
            if last.len() == 5 {
                last.remove(0);
            }
            let name = r.thread_name().unwrap_or("?");
            last.push(format!(
                "{} {}[{}:{}]: {}",
                rfc3339(r.unix_ns()),
                r.level(),
                name,
                r.thread(),
                r.message()
            ));
        }
    }
    println!("\nlast records:");
    for l in &last {
        println!("  {l}");
    }
    println!("\nrecords per call site:");
    for (id, n) in &per_site {
        let s = files[0].site(*id).expect("site in dictionary");
        println!(
            "  {n:>8}  {}:{:<4} {:<5} {:?}",
            s.file, s.line, s.level, s.format
        );
    }
    Ok(())
}
