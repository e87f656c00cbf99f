//! Criterion: the cost of one logging call on the calling thread, with room
//! in the ring (the common case the paper's Table 2 measures), and of a call
//! below the minimum level.
//!
//! Calls are timed in bursts that fit the ring; the ring is flushed between
//! bursts, outside the timing, so the flusher's speed does not leak in
//! (`throughput` measures that).

mod common;

use std::time::Duration;

use common::bursts;
use criterion::{criterion_group, criterion_main, Criterion};

/// Twenty directives: this bench's module stays at `info`.
const TWENTY: &str = "info,hyper=off,h2=warn,tokio=warn,tower=info,sqlx=warn,rustls=off,\
    mio=off,reqwest=info,want=off,tonic=debug,axum=info,my_app::db=debug,my_app::net=trace,\
    my_app::cache=warn,audit=info,metrics=off,serde=off,tracing=warn,log_call::quiet=off";

fn calls(c: &mut Criterion, logger: &nanolog::Logger, group: &str) {
    let mut g = c.benchmark_group(group);
    g.bench_function("static_message", |b| {
        b.iter_custom(|iters| {
            bursts(iters, logger, |_| {
                nanolog::info!("Starting backup replica garbage collector thread")
            })
        })
    });
    g.bench_function("one_integer", |b| {
        b.iter_custom(|iters| {
            bursts(iters, logger, |i| {
                nanolog::info!(
                    "Backup storage speeds (min/avg): {} MB/s",
                    std::hint::black_box(i)
                )
            })
        })
    });
    g.bench_function("string_and_float", |b| {
        b.iter_custom(|iters| {
            bursts(iters, logger, |i| {
                nanolog::info!(
                    "peer {} rtt {:.3} ms",
                    std::hint::black_box("10.0.0.7:9000"),
                    i as f64 * 0.001
                )
            })
        })
    });
    g.bench_function("disabled_level", |b| {
        b.iter(|| nanolog::debug!("not logged {}", std::hint::black_box(1)))
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("nanolog-bench-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .start()
        .expect("start");
    // The same call sites, first with the default level alone, then with
    // twenty per-target directives (each site decided again by set_filter).
    calls(c, &logger, "log_call");
    nanolog::set_filter(TWENTY).expect("directives");
    calls(c, &logger, "log_call_20_directives");
    drop(logger);
    let _ = std::fs::remove_file(&path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
