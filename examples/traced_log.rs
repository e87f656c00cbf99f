//! Writes the log of a traced service, for `nanolog ship`'s benchmark
//! (BENCHMARKS.md, "Export and ship"): two threads serve requests, each
//! in three nested `tracing` spans with fields (`request`, `db`, `query`),
//! with five events with fields at info and warn (and one at debug,
//! filtered out) per request.
//!
//! ```text
//! cargo run --release --example traced_log --features tracing -- PATH RECORDS
//! ```

use tracing_subscriber::layer::SubscriberExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "traced.nlog".into());
    let records: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(500_000);
    let logger = nanolog::Logger::builder().path(&path).start()?;
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(nanolog::tracing_layer()),
    )?;
    // Five records a request, from two threads.
    let requests = records / 10;
    std::thread::scope(|s| {
        for worker in 0..2u64 {
            s.spawn(move || {
                for r in 0..requests {
                    let req = tracing::info_span!(
                        "request",
                        method = "GET",
                        path = "/api/orders",
                        id = r,
                        worker
                    );
                    let _req = req.enter();
                    tracing::info!(status = 200u16, "accepted");
                    let db = tracing::info_span!("db", table = "orders", op = "select");
                    let _db = db.enter();
                    tracing::debug!(rows = r % 17, "query planned");
                    let query = tracing::info_span!("query", shard = r % 4);
                    let _query = query.enter();
                    tracing::info!(rows = r % 17, took_us = r % 900, "rows read");
                    tracing::warn!(retry = 1u8, "slow shard");
                    drop(_query);
                    drop(_db);
                    tracing::info!(bytes = r * 3, "response written");
                    tracing::info!(total_us = r % 1200, "done");
                    // A pause now and then, as a service has: the flusher
                    // keeps up and nothing is dropped.
                    if r % 1000 == 999 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
            });
        }
    });
    let dropped = logger.stats().dropped;
    drop(logger);
    println!(
        "{path}: {} requests, {dropped} records dropped",
        requests * 2
    );
    Ok(())
}
