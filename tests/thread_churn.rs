//! 100,000 short-lived threads of 10 records each: every record arrives, and
//! the rings of exited threads are freed (memory stays bounded).

use std::collections::HashSet;

use nanolog::reader::{Event, Filter, LogFile, Merge, Value};

const THREADS: u64 = if cfg!(miri) { 100 } else { 100_000 };
const PER_THREAD: u64 = 10;
const CONCURRENT: u64 = 8;

fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn hundred_thousand_short_threads_lose_nothing_and_free_their_rings() {
    let path = std::env::temp_dir().join(format!("nanolog-churn-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(64 << 10)
        .start()
        .unwrap();
    let mut rss_mid = None;
    for batch in 0..THREADS / CONCURRENT {
        let handles: Vec<_> = (0..CONCURRENT)
            .map(|k| {
                let id = batch * CONCURRENT + k;
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        nanolog::info!("short thread {} record {}", id, i);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        if batch == THREADS / CONCURRENT / 10 {
            rss_mid = rss_kib();
        }
    }
    logger.flush().unwrap();
    let rss_end = rss_kib();
    let stats = logger.stats();
    drop(logger);
    assert_eq!(stats.threads, THREADS);
    assert_eq!(stats.logged, THREADS * PER_THREAD);
    // Without freeing, 90,000 more rings of 64 KiB (a page touched in each)
    // would add at least 350 MiB between the two readings.
    if let (Some(mid), Some(end)) = (rss_mid, rss_end) {
        assert!(
            end < mid + 100 * 1024,
            "RSS grew from {mid} KiB to {end} KiB"
        );
    }

    let files = [LogFile::open(&path).unwrap()];
    let mut seen = HashSet::with_capacity((THREADS * PER_THREAD) as usize);
    for ev in Merge::new(&files, Filter::default()) {
        let Event::Record(r) = ev else {
            panic!("unexpected gap")
        };
        let (Some(Value::Uint(t)), Some(Value::Uint(i))) = (r.arg(0), r.arg(1)) else {
            panic!("unexpected arguments")
        };
        assert!(
            seen.insert((t as u64, i as u64)),
            "duplicate record {t}/{i}"
        );
    }
    assert_eq!(seen.len() as u64, THREADS * PER_THREAD);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}
