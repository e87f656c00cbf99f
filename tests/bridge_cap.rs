//! A program that makes `log` targets at run time: past the cap of
//! interned bridge sites, records go to their level's overflow site with
//! their message and target, `Stats::overflow` counts them, and memory
//! stays flat with a million distinct targets. Its own test binary: the
//! cap is process-wide.

use nanolog::reader::{Event, Filter, LogFile, Merge};

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn run_time_targets_are_capped_and_memory_stays_flat() {
    let path = std::env::temp_dir().join(format!("nanolog-cap-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    nanolog::capture_log().unwrap();
    const N: u64 = 1_000_000;
    let mut at_200k = 0;
    for i in 0..N {
        let target = format!("tenant::{i}");
        log::info!(target: &target, "request {} served", i);
        if i == 200_000 {
            logger.flush().unwrap();
            at_200k = rss_kib();
        }
    }
    logger.flush().unwrap();
    let grown = rss_kib().saturating_sub(at_200k);
    let stats = logger.stats();
    drop(logger);
    let cap = nanolog_runtime::MAX_BRIDGE_SITES as u64;
    assert_eq!(stats.overflow, N - cap, "{stats:?}");
    assert_eq!(stats.logged, N);
    // 800,000 more distinct targets cost no memory that grows with them
    // (each interned site would be a few hundred bytes: > 150 MB).
    assert!(grown < 16 << 10, "resident memory grew {grown} KiB");

    let files = [LogFile::open(&path).unwrap()];
    assert!(files[0].sites().count() as u64 <= cap + 5);
    let mut seen = 0u64;
    let mut last = String::new();
    for e in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = e {
            seen += 1;
            last = r.message();
        }
    }
    assert_eq!(seen, N);
    assert_eq!(
        last,
        format!("request {} served target=tenant::{}", N - 1, N - 1)
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}
