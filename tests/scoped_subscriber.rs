//! A service whose subscriber is scoped (`with_default`, or set on its
//! runtime's threads) rather than global, and whose logger starts on a
//! thread without it: its callsites stay on, for nanolog and for the other
//! layers. (tracing asks a lone dispatcher's interest through the calling
//! thread's default; asked so, a logger's start turned every callsite
//! already seen off, for every layer of the subscriber.) Its own binary:
//! no other dispatcher is alive beside the test's.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Counts the events the subscriber hands its layers.
struct Count(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> Layer<S> for Count {
    fn on_event(&self, _event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn event(n: u64) {
    tracing::info!(n, "the same callsite");
}

#[test]
fn a_logger_started_outside_a_scoped_subscriber_turns_none_of_its_callsites_off() {
    let path = common::temp("scoped-subscriber");
    let _log = common::TempLog(path.clone());
    let counted = Arc::new(AtomicUsize::new(0));
    let dispatch: tracing::Dispatch = tracing_subscriber::registry()
        .with(Count(counted.clone()))
        .with(nanolog::tracing_layer())
        .into();
    // Seen once before the logger runs (nanolog is off, the other layer on).
    tracing::dispatcher::with_default(&dispatch, || event(1));
    assert_eq!(counted.load(Ordering::Relaxed), 1);
    // Started here, where the default is no subscriber.
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    tracing::dispatcher::with_default(&dispatch, || event(2));
    logger.flush().unwrap();
    drop(logger);
    tracing::dispatcher::with_default(&dispatch, || event(3));
    assert_eq!(
        counted.load(Ordering::Relaxed),
        3,
        "the other layer lost events after the logger started or stopped"
    );
    let seen: Vec<String> = common::messages_and_spans(&path)
        .into_iter()
        .map(|(m, _, _)| m)
        .collect();
    assert_eq!(seen, ["the same callsite n=2"]);
}
