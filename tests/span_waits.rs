//! A record whose chain holds a span the flusher has not read yet (a
//! `nanolog::span!` entered on another thread, whose ring is drained after
//! this one's) waits a pass for it; a `tracing` span of that chain closed
//! meanwhile must still be known when the record is taken again.
//!
//! The flusher is held while both threads log, so that its first pass
//! meets, in this order: the ring of the thread that logs inside the
//! `tracing` span (attached first), which must wait for the native span's
//! entry; the close of the `tracing` span; and the ring that holds that
//! entry. (Its own binary: it holds the flusher and sets the subscriber.)
//!
//! And a `tracing` span made inside a `nanolog::span!` whose entry was
//! dropped is shown in the scope the file holds, on every thread.

mod common;

use tracing_subscriber::layer::SubscriberExt;

/// One logger at a time in this binary.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_record_that_waits_for_a_span_keeps_the_spans_closed_meanwhile() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("nanolog-span-waits-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(nanolog::tracing_layer()));
    logger.__hold_flusher(true);
    let (span_tx, span_rx) = std::sync::mpsc::channel::<tracing::Span>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let d = dispatch.clone();
    let user = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            // This thread's ring first.
            nanolog::info!("warm-up");
            ready_tx.send(()).unwrap();
            let t = span_rx.recv().unwrap();
            {
                let _in = t.enter();
                tracing::info!("inside t");
            }
            // The last handle: the span closes here, before the flusher
            // has read anything.
            drop(t);
        })
    });
    ready_rx.recv().unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        let _outer = nanolog::span!("outer", n = 1u64);
        span_tx.send(tracing::info_span!("t", k = 2u64)).unwrap();
    });
    user.join().unwrap();
    logger.__hold_flusher(false);
    logger.flush().unwrap();
    drop(logger);

    let seen = common::messages_and_spans(&path);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    assert_eq!(
        seen,
        [
            ("warm-up".to_owned(), String::new(), false),
            ("inside t".to_owned(), "outer:t".to_owned(), false),
        ]
    );
}

/// A `nanolog::span!` entered on a thread whose ring is full (`OnFull::Drop`,
/// the flusher held): its entry is dropped and counted
/// (`Stats::context_lost`), and the span is not current (records inside it
/// are in its parent's scope). A `tracing` span made inside it and entered
/// on another thread is a root there too: that thread's record shows it,
/// never a scope the file does not hold, and the flusher does not wait for
/// the dropped span.
#[test]
fn a_span_made_inside_a_dropped_native_span_is_a_root_on_every_thread() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("nanolog-span-lost-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(4096)
        .on_full(nanolog::OnFull::Drop)
        .start()
        .unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(nanolog::tracing_layer()));
    logger.__hold_flusher(true);
    let (span_tx, span_rx) = std::sync::mpsc::channel::<tracing::Span>();
    let d = dispatch.clone();
    let user = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            let t = span_rx.recv().unwrap();
            let _in = t.enter();
            tracing::info!("inside t");
        })
    });
    tracing::dispatcher::with_default(&dispatch, || {
        // This thread's ring filled, and its later records dropped.
        for i in 0..2_000u64 {
            nanolog::info!("filler {}", i);
        }
        let _outer = nanolog::span!("outer", n = 1u64);
        span_tx.send(tracing::info_span!("t", k = 2u64)).unwrap();
    });
    user.join().unwrap();
    logger.__hold_flusher(false);
    logger.flush().unwrap();
    assert!(logger.stats().dropped > 0, "the filler overflowed the ring");
    // (Its entry, and the switch back at its exit.)
    assert!(logger.stats().context_lost >= 1, "the native span's entry");
    drop(logger);

    let seen = common::messages_and_spans(&path);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    let inside: Vec<_> = seen.iter().filter(|s| s.0 == "inside t").collect();
    assert_eq!(inside, [&("inside t".to_owned(), "t".to_owned(), false)]);
}
