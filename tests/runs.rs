//! Runs of one call site's records (the flusher compacts a run in one
//! call of the site's own function) decode to exactly what was logged.
//! Its own test binary: a process runs one logger at a time.

#[macro_use]
mod common;

use nanolog::reader::{Event, Filter, LogFile, Merge};

/// The flusher compacts a run of one call site's records in one call: runs
/// of every length (one record, a few, more than an extent or a release
/// window holds, more than the ring holds), switching between sites with
/// and without arguments, with string lengths that move records across
/// cache lines and the ring's end, all decode to exactly what was logged,
/// in order.
#[test]
fn runs_of_one_site_decode_in_order_across_their_boundaries() {
    let path = std::env::temp_dir().join(format!("nanolog-runs-{}.nlog", std::process::id()));
    let _t = common::TempLog(path.clone());
    // A small ring, so long runs wrap it and wait for the flusher.
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(64 << 10)
        .start()
        .unwrap();
    let mut e: Vec<String> = Vec::new();
    let words = ["", "a", "seven c", "a longer string of some thirty b"];
    let runs = [1u64, 1, 2, 3, 1, 50, 1, 4096, 2, 70_000, 1, 3, 20_000, 1];
    for (i, run) in runs.into_iter().enumerate() {
        for k in 0..run {
            let w = words[i % 4];
            match i % 5 {
                0 | 1 => case!(e, "a {} {} {}", k, w, i as i32 - 1000),
                2 => case!(e, "static message"),
                3 => case!(e, "b {:.2} {}", i as f64 / 3.0, k as u8),
                _ => case!(e, "c {} {} {} {}", w, w.len(), -(k as i64), i),
            }
        }
    }
    logger.flush().unwrap();
    drop(logger);

    let files = [LogFile::open(&path).unwrap()];
    assert!(files[0].warnings().is_empty(), "{:?}", files[0].warnings());
    let mut last_tick = 0;
    let mut got = Vec::with_capacity(e.len());
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            assert!(
                r.tick() >= last_tick,
                "ticks go backwards at record {}",
                got.len()
            );
            last_tick = r.tick();
            got.push(r.message());
        }
    }
    assert_eq!(got.len(), e.len(), "record count");
    for (n, (g, w)) in got.iter().zip(&e).enumerate() {
        assert_eq!(g, w, "record {n}");
    }
}
