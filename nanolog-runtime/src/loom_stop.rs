//! A loom model of the logger's stop against a producer blocked on a full
//! ring and a flush: the producer, the flusher and the flush protocol
//! together (`RUSTFLAGS="--cfg loom" cargo test --lib loom`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::channel::{OnFull, Shared};
use crate::flusher;
use crate::level::Level;
use crate::producer::ThreadProducer;
use crate::ring;
use crate::site::Site;
use crate::writer::Writer;
use std::sync::atomic::AtomicUsize;

static SITE: Site = Site::new(Level::Info, "model", "model.rs", 1, "model", "m", &[], &[]);
static RUN: AtomicUsize = AtomicUsize::new(0);
/// Records the producer logs into a ring with room for four.
const RECORDS: u64 = 5;

/// The logger-stop handshake, with the real producer, flush protocol,
/// stop and flusher loop: a producer fills its ring (blocking in
/// `OnFull::Block` on the fifth record) and then flushes, while the
/// logger's stop begins. Under every interleaving: nothing hangs (loom
/// reports a deadlock otherwise); every record whose call returned
/// before the stop began is written; a flush that returns `Ok` has
/// written (or counted as dropped) every record logged before it; no record is both written
/// and counted as dropped.
///
/// (A call that overlaps the stop may be lost uncounted: loom finds the
/// interleaving where it commits after the flusher's last pass. That is
/// the documented limit; closing it would put a read-modify-write on
/// every call.)
#[test]
fn loom_stop_races_a_blocked_producer_and_a_flush() {
    let id = SITE.id(|| ([], crate::compact::compactor(&())));
    let _ = crate::clock::ticks_per_second();
    let dir = std::env::temp_dir();
    loom::model(move || {
        let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A directory of its own a run: starting a writer lists its
        // directory (the set's numbers), and thousands of runs' files in
        // one directory would make each run slower than the last.
        let run_dir = dir.join(format!("nanolog-loom-{}-{n}", std::process::id()));
        let _ = std::fs::create_dir_all(&run_dir);
        let path = run_dir.join("model.nlog");
        let writer = Writer::create(&path, Default::default(), |_| {}).unwrap();
        let shared = Arc::new(Shared::new(1, 64, OnFull::Block));
        let returned = Arc::new(crate::sync::AtomicU64::new(0));
        let flusher = {
            let s = Arc::clone(&shared);
            let config = flusher::Config {
                wake_delay: Duration::from_millis(1),
                clock_interval: Duration::from_secs(3600),
                compression: crate::flusher::Compression::Small,
                mirror: None,
            };
            loom::thread::spawn(move || flusher::run(s, writer, config))
        };
        let producer = {
            let (s, returned) = (Arc::clone(&shared), Arc::clone(&returned));
            loom::thread::spawn(move || {
                let Some(mut p) = ThreadProducer::attach(Arc::clone(&s)) else {
                    return (0, None);
                };
                for _ in 0..RECORDS {
                    p.push(id, ring::HEADER, |_| {});
                    returned.fetch_add(1, Ordering::SeqCst);
                }
                let flushed = s.flush(false, None).is_ok();
                let accounted = s.counters.logged.load(Ordering::SeqCst)
                    + s.counters.dropped.load(Ordering::SeqCst);
                (RECORDS, Some((flushed, accounted)))
            })
        };
        let before_stop = returned.load(Ordering::SeqCst);
        shared.begin_stop();
        let (attempted, after_flush) = producer.join().unwrap();
        flusher.join().unwrap();
        let logged = shared.counters.logged.load(Ordering::SeqCst);
        let dropped = shared.counters.dropped.load(Ordering::SeqCst);
        assert!(
            logged + dropped >= before_stop,
            "a record logged before the stop was lost ({logged} written, {dropped} dropped, {before_stop} before)"
        );
        if let Some((true, accounted)) = after_flush {
            assert_eq!(
                accounted, RECORDS,
                "flush returned Ok before its records were written (or counted dropped)"
            );
        }
        assert!(
            logged + dropped <= attempted,
            "a record written and counted dropped"
        );
        assert!(!shared.running.load(Ordering::SeqCst));
        let _ = std::fs::remove_dir_all(&run_dir);
    });
}
