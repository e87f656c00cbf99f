//! A `nanolog::span!` and a `tracing` span whose ids could meet, open on
//! one thread at once: exiting one must not close the other.
//!
//! tracing-subscriber's registry numbers spans from 1 (its first slot on
//! its first thread), and reuses ids; nanolog gives every span a key of
//! its own, unique in the process, so the two never meet. This test has
//! its own binary, so nothing else uses the registry first.

mod common;

use tracing_subscriber::layer::SubscriberExt;

/// The id of the registry's first span.
const FIRST_NATIVE_KEY: u64 = 1;

#[test]
fn a_native_and_a_tracing_span_of_one_key_exit_apart() {
    let path = std::env::temp_dir().join(format!("nanolog-span-keys-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let found = std::thread::spawn(|| {
        let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
        tracing::subscriber::with_default(subscriber, || {
            let native = nanolog::span!("native", n = 1u64);
            // The first span made should be the one; a few tries, bounded,
            // in case the registry numbers otherwise.
            let tracing_span = (0..64).find_map(|_| {
                let s = tracing::info_span!("traced");
                (s.id().map(|id| id.into_u64()) == Some(FIRST_NATIVE_KEY)).then_some(s)
            })?;
            let entered = tracing_span.enter();
            nanolog::info!("in both");
            // Out of order: the native span first.
            drop(native);
            nanolog::info!("in traced only");
            drop(entered);
            nanolog::info!("in neither");
            Some(())
        })
    })
    .join()
    .unwrap();
    logger.flush().unwrap();
    drop(logger);
    assert!(
        found.is_some(),
        "no tracing span id met the first native key: the registry's ids changed shape"
    );
    let seen: Vec<(String, String)> = common::messages_and_spans(&path)
        .into_iter()
        .map(|(message, spans, _)| (message, spans))
        .collect();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    assert_eq!(
        seen,
        [
            ("in both".to_owned(), "native:traced".to_owned()),
            // `traced` was made inside `native`: its parent, as tracing's
            // parent is the span current when a span is made.
            ("in traced only".to_owned(), "native:traced".to_owned()),
            ("in neither".to_owned(), String::new()),
        ]
    );
}
