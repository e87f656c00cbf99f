//! The README's service set-up, as a user writes it, with
//! `tracing-subscriber = "0.3"` at its default features: `.init()` also
//! installs tracing-log's `log` logger. `tracing` events and `log` records
//! are each recorded once, a `log` record with its own target, file and
//! line. Its own test binary: `.init()` sets the process's global default.

use nanolog::reader::{Event, Filter, LogFile, Merge};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod dependency {
    pub fn work() -> u32 {
        log::info!(target: "dep::pool", "connection {} checked out", 3);
        log::debug!("debug from the dependency {}", 1);
        line!() - 1
    }
}

/// One tracing callsite, hit under two filters.
fn toggled(i: u64) {
    tracing::info!(i, "toggled");
}

#[test]
fn the_readme_set_up_works_with_default_features() {
    let path = std::env::temp_dir().join(format!("nanolog-readme-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .filter("info,readme_setup::dependency=debug")
        .start()
        .unwrap();
    tracing_subscriber::registry()
        .with(nanolog::tracing_layer())
        .init();
    let log_line = dependency::work();
    tracing::info!(order = 7u64, "order placed");
    nanolog::info!("native {}", 1);
    // tracing's interest cache follows nanolog's filter: a callsite first
    // seen while disabled (cached `never`) records again once the filter
    // lets it through.
    nanolog::set_filter("warn").unwrap();
    toggled(1);
    nanolog::set_filter("info").unwrap();
    toggled(2);
    logger.flush().unwrap();
    drop(logger);

    let files = [LogFile::open(&path).unwrap()];
    let mut got = Vec::new();
    for e in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = e {
            let s = r.site();
            got.push((s.target.clone(), s.file.clone(), s.line, r.message()));
        }
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    let file = "tests/readme_setup.rs".to_string();
    assert_eq!(
        got,
        [
            (
                "dep::pool".to_string(),
                file.clone(),
                log_line - 1,
                "connection 3 checked out".to_string()
            ),
            (
                "readme_setup::dependency".to_string(),
                file.clone(),
                log_line,
                "debug from the dependency 1".to_string()
            ),
            (
                "readme_setup".to_string(),
                file.clone(),
                got.get(2).map_or(0, |g| g.2),
                "order placed order=7".to_string()
            ),
            (
                "readme_setup".to_string(),
                file.clone(),
                got.get(3).map_or(0, |g| g.2),
                "native 1".to_string()
            ),
            (
                "readme_setup".to_string(),
                file,
                got.get(4).map_or(0, |g| g.2),
                "toggled i=2".to_string()
            ),
        ]
    );
}
