//! A `nanolog::span!` and a `tracing` span whose keys have the same value,
//! open on one thread at once: exiting one must not close the other.
//!
//! The value meets in real services: tracing-subscriber's registry gives a
//! span an id with its slot's generation in the top bits, so the first slot,
//! reused 8192 times on the first thread, hands out `2^63 + 1`, the key of a
//! thread's first `nanolog::span!`. This test has its own binary (nothing
//! else uses the registry first, so its thread is the registry's first).

use nanolog::reader::{Event, Filter, LogFile, Merge};
use tracing_subscriber::layer::SubscriberExt;

/// The key of a thread's first `nanolog::span!`.
const FIRST_NATIVE_KEY: u64 = (1 << 63) | 1;

#[test]
fn a_native_and_a_tracing_span_of_one_key_exit_apart() {
    let path = std::env::temp_dir().join(format!("nanolog-span-keys-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let found = std::thread::spawn(|| {
        let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
        tracing::subscriber::with_default(subscriber, || {
            let native = nanolog::span!("native", n = 1u64);
            // Bounded: 2^14 generations of one slot hold the value once.
            let tracing_span = (0..40_000).find_map(|_| {
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
    let files = [LogFile::open(&path).unwrap()];
    let mut seen = Vec::new();
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            let spans: Vec<String> = r.spans().iter().map(|s| s.name().to_owned()).collect();
            seen.push((r.message(), spans.join(":")));
        }
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        seen,
        [
            ("in both".to_owned(), "native:traced".to_owned()),
            ("in traced only".to_owned(), "traced".to_owned()),
            ("in neither".to_owned(), String::new()),
        ]
    );
}
