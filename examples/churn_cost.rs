//! What a steady load costs after threads came and went:
//! `cargo run --release --example churn_cost -- THREADS`: THREADS short
//! threads log a record each (8 at a time), then the main thread logs 200
//! records a millisecond for 3 s; prints the process's CPU over those 3 s.
//! (A logger numbers every thread that ever logged: its per-write work
//! must not grow with them. BENCHMARKS.md, "Reading".)

fn main() {
    let churn: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let path = std::env::temp_dir().join("nanolog-churn-cost.nlog");
    let _ = std::fs::remove_file(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    for b in 0..churn / 8 {
        let hs: Vec<_> = (0..8)
            .map(|k| std::thread::spawn(move || nanolog::info!("short {}", b * 8 + k)))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    logger.flush().unwrap();
    let t0 = std::time::Instant::now();
    let c0 = cpu();
    // steady: 200 records per ms for 3 s
    while t0.elapsed().as_secs_f64() < 3.0 {
        for i in 0..200u64 {
            nanolog::info!("steady {}", i);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    logger.flush().unwrap();
    println!(
        "churn {churn}: steady CPU {:.3} s over {:.2} s",
        cpu() - c0,
        t0.elapsed().as_secs_f64()
    );
}
/// The process's user and system CPU seconds (Linux's /proc/self/stat).
fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
