//! `tracing` spans cost memory while they live, and none once they are
//! closed and the records in them written: with the logger running (each
//! thread posts its spans to a mailbox the flusher empties), across its
//! stop (the mailboxes go to the table, and spans closed afterwards leave
//! it at once), and for spans made before it started. Its own binary: the
//! counts are the process's.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;

/// Spans the process holds, waiting for the flusher or not.
fn held() -> usize {
    let (spans, waiting) = nanolog_runtime::__tracing_spans_held();
    spans + waiting
}

/// Waits (a few seconds at most) until the process holds at most `most`
/// spans, flushing meanwhile; the count held last.
fn settle(most: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = nanolog::flush();
        let n = held();
        if n <= most || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Spans made on one thread and entered, logged in and closed on another
/// (as a tokio task's span when the task moves), and spans made, logged in
/// and closed where they were made, with values recorded into some.
fn workload(threads: usize, spans: usize) {
    let (tx, rx) = mpsc::sync_channel::<tracing::Span>(64);
    let makers: Vec<_> = (0..threads)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..spans {
                    let s = tracing::info_span!("req", t, i, status = tracing::field::Empty);
                    if i % 2 == 0 {
                        tx.send(s).expect("the closer runs");
                    } else {
                        let _in = s.enter();
                        if i % 3 == 0 {
                            s.record("status", 200u64);
                        }
                        tracing::info!(i, "here");
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let closer = std::thread::spawn(move || {
        for s in rx {
            let _in = s.enter();
            tracing::info!("moved");
        }
    });
    for m in makers {
        m.join().expect("maker");
    }
    closer.join().expect("closer");
}

#[test]
fn closed_spans_leave_memory_while_running_across_a_stop_and_from_before_a_start() {
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let path = common::temp("span-memory");
    let _log = common::TempLog(path.clone());

    // Made before the logger starts, closed while it runs.
    let early: Vec<tracing::Span> = (0..100u64)
        .map(|i| tracing::info_span!("early", i))
        .collect();
    assert!(held() >= 100, "the early spans are defined");
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    for s in &early {
        let _in = s.enter();
        tracing::info!("in an early span");
    }
    drop(early);

    // Running: 4 threads x 20,000 spans, half of them closed elsewhere.
    workload(4, 20_000);
    // A span closed as its thread ends, by a thread-local's destructor
    // that runs after nanolog's own thread-locals are gone.
    std::thread::spawn(|| {
        thread_local! {
            static HOLD: std::cell::RefCell<Option<tracing::Span>> =
                const { std::cell::RefCell::new(None) };
        }
        HOLD.with(|h| {
            let s = tracing::info_span!("held");
            s.in_scope(|| tracing::info!("in a held span"));
            *h.borrow_mut() = Some(s);
        });
    })
    .join()
    .expect("the holding thread");
    let left = settle(0);
    assert_eq!(left, 0, "closed spans still held while the logger runs");

    // Made while it runs, closed after it stopped: into the table at the
    // stop, out of it at their close.
    let open: Vec<tracing::Span> = (0..1000u64)
        .map(|i| tracing::info_span!("open", i))
        .collect();
    for s in open.iter().step_by(10) {
        let _in = s.enter();
        tracing::info!("in an open span");
    }
    drop(logger);
    assert_eq!(
        held(),
        1000,
        "the open spans are all in the table after the stop"
    );
    drop(open);
    assert_eq!(held(), 0, "spans closed after the stop still held");

    // Without a logger, spans come and go at once.
    workload(2, 5_000);
    assert_eq!(held(), 0, "spans closed without a logger still held");

    // Loggers started and stopped while threads make, move and close
    // spans: whatever a stop races (a span made in one thread's mailbox
    // and closed from another's, or directly), nothing is left once the
    // threads are done.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    workload(2, 200);
                }
            })
        })
        .collect();
    for cycle in 0..8 {
        let p = common::temp(&format!("span-memory-cycle-{cycle}"));
        let logger = nanolog::Logger::builder().path(&p).start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(logger);
        common::remove_with_kept(&p);
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in busy {
        b.join().expect("busy thread");
    }
    assert_eq!(
        held(),
        0,
        "spans left behind by loggers started and stopped beside them"
    );

    // Every record of the running phase is in its span.
    let records = common::messages_and_spans(&path);
    // (By the message's first word: the fields follow it.)
    let count = |msg: &str, span: &str| {
        records
            .iter()
            .filter(|(m, s, lost)| m.split(' ').next() == Some(msg) && s == span && !lost)
            .count()
    };
    assert_eq!(count("in", "early"), 100);
    assert_eq!(count("here", "req"), 40_000);
    assert_eq!(count("moved", "req"), 40_000);
    assert_eq!(count("in", "open"), 100);
    assert_eq!(count("in", "held"), 1);
}
