//! nanolog's filter is its layer's own (a per-layer filter): another layer
//! of the same subscriber receives every event it enables, whether no
//! logger has started, the logger has stopped, or nanolog's directives are
//! stricter than that layer's.

use tracing_subscriber::layer::SubscriberExt;

use crate::common;

use common::{ok, p, temp, Captured};

#[test]
fn other_layers_receive_what_they_enable_whatever_nanolog_filters() {
    let _s = common::serial();
    let path = temp("layers");
    let _ = std::fs::remove_file(&path);
    let fmt = Captured::default();
    let w = fmt.clone();
    let subscriber = tracing_subscriber::registry()
        .with(nanolog::tracing_layer())
        .with(
            tracing_subscriber::fmt::layer()
                .without_time()
                .with_ansi(false)
                .with_writer(move || w.clone())
                .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
        );
    use tracing_subscriber::Layer as _;
    tracing::subscriber::with_default(subscriber, || {
        // No logger yet: nanolog records nothing, fmt everything it wants.
        tracing::info!(n = 1u64, "before start");
        tracing::debug!("debug before start");

        let logger = nanolog::Logger::builder()
            .path(&path)
            .filter("info")
            .start()
            .unwrap();
        // nanolog at info, fmt at debug: each takes what its filter says.
        tracing::info!(n = 2u64, "while running");
        tracing::debug!("debug while running");
        tracing::trace!("trace while running");
        // A stricter nanolog at run time: fmt still gets info.
        nanolog::set_filter("warn").unwrap();
        tracing::info!("info under warn");
        tracing::warn!("warn under warn");
        nanolog::set_filter("info").unwrap();
        logger.flush().unwrap();
        drop(logger);

        // Stopped: fmt again gets everything it enables.
        tracing::info!("after stop");
        tracing::debug!("debug after stop");
    });

    let text = fmt.text();
    for want in [
        "before start n=1",
        "debug before start",
        "while running n=2",
        "debug while running",
        "info under warn",
        "warn under warn",
        "after stop",
        "debug after stop",
    ] {
        assert!(text.contains(want), "fmt lacks {want:?}:\n{text}");
    }
    assert!(!text.contains("trace while running"), "{text}");

    let decoded = ok(&["decode", p(&path)]);
    let _ = std::fs::remove_file(&path);
    let msgs: Vec<&str> = decoded
        .lines()
        .map(|l| l.rsplit_once(": ").unwrap().1)
        .collect();
    assert_eq!(msgs, ["while running n=2", "warn under warn"], "{decoded}");
}
