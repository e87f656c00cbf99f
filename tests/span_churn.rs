//! Spans never outrun the flusher (issue #66): threads that make `tracing`
//! spans flat out, with an event in each request or none, keep the
//! process's memory bounded, the logger's stop prompt and every event
//! written; a thread whose span changes fill their budget while the flusher
//! cannot take them waits (`OnFull::Block`) or drops and counts them
//! (`OnFull::Drop`), and no record is shown in spans it was not made in.
//!
//! A short version of `examples/span_churn.rs` (half a second a case here;
//! `NANOLOG_CHURN_SECS` sets it). Its own binary: it reads the process's
//! peak RSS and sets the global subscriber.

mod common;
#[path = "../examples/span_churn/work.rs"]
mod work;

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nanolog::reader::{Event, Filter, LogFile, Merge};
use tracing_subscriber::layer::SubscriberExt;

/// The peak RSS a churn and its stop may reach (up to eight threads' rings
/// of 1 MiB). Reading the log back maps the file, so the peak is taken
/// before, and started again after.
const PEAK_RSS_LIMIT: u64 = 128 << 20;

/// Asserts the peak RSS since the last check is within the limit, then
/// starts the peak again (the checks after it are of what follows).
fn check_peak_rss(case: &str) {
    let peak = work::peak_rss();
    assert!(
        peak <= PEAK_RSS_LIMIT,
        "{case}: peak RSS {:.1} MB (at most {} MB)",
        peak as f64 / 1e6,
        PEAK_RSS_LIMIT >> 20
    );
}

/// Longer than a stop ever takes (milliseconds), shorter than the flusher's
/// stall limit (10 s, after which a stop gives up on it).
const STOP_LIMIT: Duration = Duration::from_secs(5);

fn run_time() -> Duration {
    let secs = std::env::var("NANOLOG_CHURN_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.5);
    Duration::from_secs_f64(secs)
}

/// Spans the process holds for the flusher, and changes waiting in
/// mailboxes.
fn held() -> (usize, usize) {
    nanolog_runtime::__tracing_spans_held()
}

/// Waits (10 s at most) until the process holds no span, flushing
/// meanwhile; what it holds last.
fn settle() -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = nanolog::flush();
        let h = held();
        if h == (0, 0) || Instant::now() > deadline {
            return h;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Of the log at `path`'s records: (those whose message starts with `msg`
/// shown in `request:db`, those shown with spans lost, all). Streamed: a
/// churn writes millions.
fn count_in_spans(path: &Path, msg: &str) -> (u64, u64, u64) {
    let files = [LogFile::open(path).unwrap()];
    let (mut inside, mut lost, mut all) = (0, 0, 0);
    let mut names = String::new();
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            all += 1;
            if r.spans_lost() {
                lost += 1;
                continue;
            }
            names.clear();
            for s in r.spans() {
                if !names.is_empty() {
                    names.push(':');
                }
                names.push_str(s.name());
            }
            if r.message().starts_with(msg) && names == "request:db" {
                inside += 1;
            }
        }
    }
    (inside, lost, all)
}

/// A thread that makes `requests` requests (an event in each if `events`)
/// and says when it is done; its handle.
fn requests(requests: u64, events: bool) -> (std::thread::JoinHandle<()>, mpsc::Receiver<()>) {
    let (done_tx, done_rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        for i in 0..requests {
            let request = tracing::info_span!("request", id = i, thread = 0u64, method = "GET");
            let _r = request.enter();
            let db = tracing::info_span!("db", table = "users");
            let _d = db.enter();
            if events {
                tracing::info!(rows = i % 7, "query done");
            }
        }
        let _ = done_tx.send(());
    });
    (h, done_rx)
}

#[test]
fn span_churn_stays_bounded_stops_promptly_and_loses_nothing() {
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(nanolog::tracing_layer()),
    )
    .expect("the only subscriber");

    // Flat out: spans only, and an event in each request; 2 and 8 threads
    // on a machine of 2 cores.
    for (threads, events) in [(2, false), (2, true), (8, false), (8, true)] {
        let case = format!("{threads} threads, events: {events}");
        let path = common::temp(&format!("span-churn-{threads}-{events}"));
        let _log = common::TempLog(path.clone());
        let logger = nanolog::Logger::builder().path(&path).start().unwrap();
        let made = work::churn(threads, run_time(), events);
        let t = Instant::now();
        logger.flush().unwrap();
        let stats = logger.stats();
        drop(logger);
        let stop = t.elapsed();
        check_peak_rss(&case);
        assert!(
            stop < STOP_LIMIT,
            "{case}: the flush and stop took {stop:?}"
        );
        assert!(made.requests > 0, "{case}: no request made");
        assert_eq!(stats.logged, made.events, "{case}: events written");
        assert_eq!(
            (stats.dropped, stats.spans_dropped),
            (0, 0),
            "{case}: nothing is dropped under OnFull::Block"
        );
        if events {
            let (inside, lost, all) = count_in_spans(&path, "query done");
            assert_eq!(
                (inside, lost, all),
                (made.events, 0, made.events),
                "{case}: every event in its spans"
            );
        }
        assert_eq!(held(), (0, 0), "{case}: spans held after the stop");
        common::remove_with_kept(&path);
        work::reset_peak_rss();
    }

    // The flusher held: a thread's span changes wait at their budget (a
    // sixteenth of the 1 MiB ring: 64 KiB, at least 9 bytes a change)
    // instead of piling up.
    let bound = (64 << 10) / 9 + 1;
    let path = common::temp("span-churn-held");
    let _log = common::TempLog(path.clone());
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    logger.__hold_flusher(true);
    let (maker, done) = requests(1_000_000, false);
    let mut most = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(10));
        most = most.max(held().1);
    }
    assert!(most > 0, "the thread made no span");
    assert!(
        most <= bound,
        "{most} changes wait for a held flusher (at most {bound})"
    );
    assert!(
        done.try_recv().is_err(),
        "a million spans made while the flusher was held"
    );
    logger.__hold_flusher(false);
    done.recv_timeout(Duration::from_secs(120))
        .expect("the thread goes on once the flusher takes its changes");
    maker.join().unwrap();
    assert_eq!(settle(), (0, 0), "spans held once the thread is done");
    drop(logger);
    check_peak_rss("held, OnFull::Block");
    common::remove_with_kept(&path);

    // The same under OnFull::Drop (a ring of 64 KiB: a budget of 16 KiB):
    // the thread never waits; definitions past the budget are dropped and
    // counted, every event is written or counted, and an event in a span
    // whose definition was dropped shows its spans as lost, never others.
    let path = common::temp("span-churn-drop");
    let _log = common::TempLog(path.clone());
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(64 << 10)
        .on_full(nanolog::OnFull::Drop)
        .start()
        .unwrap();
    logger.__hold_flusher(true);
    let n = 20_000;
    let (maker, done) = requests(n, true);
    done.recv_timeout(Duration::from_secs(120))
        .expect("under OnFull::Drop a thread never waits for the flusher");
    maker.join().unwrap();
    let waiting = held().1;
    assert!(
        waiting <= 2 * ((16 << 10) / 9 + 1),
        "{waiting} changes wait for a held flusher under OnFull::Drop"
    );
    let dropped_spans = logger.stats().spans_dropped;
    assert!(dropped_spans > 0, "no span definition dropped");
    logger.__hold_flusher(false);
    logger.flush().unwrap();
    let stats = logger.stats();
    assert_eq!(settle(), (0, 0), "spans held after the drops");
    drop(logger);
    check_peak_rss("held, OnFull::Drop");
    assert_eq!(
        stats.logged + stats.dropped,
        n,
        "every event written or counted: {stats:?}"
    );
    let (inside, lost, all) = count_in_spans(&path, "query done");
    assert_eq!(all, stats.logged, "the records written are in the file");
    assert_eq!(
        inside + lost,
        all,
        "an event is in its spans or shows them lost"
    );
    assert!(lost > 0, "no event in a span whose definition was dropped");
    common::remove_with_kept(&path);
}
