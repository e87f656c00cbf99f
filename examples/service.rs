//! nanolog in an existing service: the program's own `nanolog::info!` calls
//! next to a dependency-style module that logs through `log` and another
//! that logs through `tracing`, per-target directives from `RUST_LOG`, and
//! warnings mirrored to stderr, a `tracing` span around each request. It
//! then decodes its own file.
//!
//! ```text
//! cargo run --example service --features log,tracing [-- path/to/service.nlog]
//! RUST_LOG=debug,service::db=trace cargo run --example service --features log,tracing
//! ```

use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::{Level, Logger};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Stands for a dependency that logs through the `log` crate (hyper, sqlx...).
mod db {
    pub fn query(id: u32) -> u32 {
        log::debug!("prepared statement {}", id);
        log::info!(target: "db::pool", "connection {} checked out", id % 4);
        if id.is_multiple_of(5) {
            log::warn!("slow query {} took {} ms", id, 40 + id);
        }
        id * 2
    }
}

/// Stands for a dependency that logs through `tracing` (tokio, tonic...).
mod rpc {
    pub fn call(method: &str, id: u32) {
        tracing::info!(method, id, bytes = 512u64 + u64::from(id), "request served");
        if id == 7 {
            tracing::error!(method, code = 14i64, "peer reset");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "service.nlog".into());
    let logger = Logger::builder()
        .path(&path)
        .filter("info,service::db=debug")
        .filter_env("RUST_LOG")
        .mirror(std::io::stderr(), Level::Warn)
        .start()?;
    // tracing events, and (through tracing-log, which `.init()` installs
    // with tracing-subscriber's default features) every `log` record.
    tracing_subscriber::registry()
        .with(nanolog::tracing_layer())
        .init();

    nanolog::info!("service up on port {}", 8080);
    for id in 0..10 {
        // Every record made while it is entered (nanolog's, log's,
        // tracing's) carries the span and its `id`.
        let _request = tracing::info_span!("request", id).entered();
        let rows = db::query(id);
        rpc::call("get_user", id);
        nanolog::info!(target: "audit", "user {id} read {rows} rows");
    }
    logger.flush()?;
    println!("logged: {:?}", logger.stats());
    drop(logger);

    let files = [LogFile::open(&path)?];
    for event in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = event {
            let s = r.site();
            let mut spans = String::new();
            for sp in r.spans() {
                sp.render(&mut spans);
                spans.push_str(": ");
            }
            println!(
                "{:5} {:<22} {spans}{}",
                s.level.as_str(),
                s.target,
                r.message()
            );
        }
    }
    Ok(())
}
