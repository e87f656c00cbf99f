//! The span churn workload (issue #66): threads that make `tracing` spans as
//! fast as they can, a request span with three fields and a child span in
//! it, with an event inside each request or none (span-only
//! instrumentation), for a while; then the logger is stopped. Shared by
//! `examples/span_churn.rs` (the long runs, any subscriber) and
//! `tests/span_churn.rs` (a short version in CI).
// Each includer uses some of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one run made and what it cost.
#[derive(Debug, Default)]
pub struct Churn {
    /// Request spans made (each with a child span).
    pub requests: u64,
    /// Events made (one per request with events, else none).
    pub events: u64,
}

/// `threads` threads make requests (a span with three fields, a child span
/// entered inside it, an event in the child when `events`) until `run` has
/// passed. Returns what they made, summed.
pub fn churn(threads: usize, run: Duration, events: bool) -> Churn {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut made = Churn::default();
                let mut i = 0u64;
                // (The clock is read once every 256 requests.)
                while !i.is_multiple_of(256) || !stop.load(Ordering::Relaxed) {
                    let request =
                        tracing::info_span!("request", id = i, thread = t as u64, method = "GET");
                    let _r = request.enter();
                    let db = tracing::info_span!("db", table = "users");
                    let _d = db.enter();
                    if events {
                        tracing::info!(rows = i % 7, "query done");
                        made.events += 1;
                    }
                    made.requests += 1;
                    i += 1;
                }
                made
            })
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < run {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = Churn::default();
    for w in workers {
        let made = w.join().expect("a churn thread panicked");
        all.requests += made.requests;
        all.events += made.events;
    }
    all
}

/// The process's peak resident set so far (VmHWM), in bytes; 0 where
/// `/proc` does not say.
pub fn peak_rss() -> u64 {
    proc_status_kb("VmHWM:") * 1024
}

/// Starts the peak resident set (VmHWM) again from the resident set now
/// (Linux: `/proc/self/clear_refs`); false where it cannot.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's resident set now (VmRSS), in bytes.
pub fn rss() -> u64 {
    proc_status_kb("VmRSS:") * 1024
}

fn proc_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
