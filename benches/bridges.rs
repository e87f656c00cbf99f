//! Criterion: the cost of a `log::info!` through nanolog's `log` bridge
//! against `env_logger` writing the same message to a file, and of a
//! `tracing::info!` with fields through nanolog's layer against
//! `tracing-subscriber`'s fmt layer writing to a file. Same messages, one
//! process, side by side.
//!
//! The baselines write synchronously from the calling thread (as they do in
//! a service); nanolog formats the message on the calling thread (the
//! bridges' slow path) and copies it into the ring.

mod common;

use std::fs::File;
use std::io::BufWriter;
use std::sync::Mutex;
use std::time::Duration;

use common::bursts;
use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::layer::SubscriberExt;

fn log_message(i: u64) {
    log::info!(
        "request {} served in {} us from {}",
        i,
        i % 997,
        "10.0.0.7:9000"
    );
}

fn tracing_event(i: u64) {
    tracing::info!(
        id = i,
        us = i % 997,
        peer = "10.0.0.7:9000",
        "request served"
    );
}

/// A `tracing` event whose message is formatted (the formatting path).
fn tracing_formatted(i: u64) {
    tracing::info!(id = i, peer = "10.0.0.7:9000", "request {} served", i % 997);
}

/// A `tracing` event below the filter (Info): tracing's cached interest.
fn tracing_disabled(i: u64) {
    tracing::debug!(id = i, "not recorded");
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let path = dir.join(format!("nanolog-bench-bridges-{pid}.nlog"));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .start()
        .expect("start");

    // `log` has one global logger: nanolog's bridge first, then env_logger
    // (installed through the same `log::set_boxed_logger` slot is not
    // possible twice), so env_logger is driven through its `Log` impl.
    nanolog::capture_log().expect("capture_log");
    let env_path = dir.join(format!("nanolog-bench-env-logger-{pid}.log"));
    let env = env_logger::Builder::new()
        .filter_level(log::LevelFilter::Info)
        .target(env_logger::Target::Pipe(Box::new(BufWriter::new(
            File::create(&env_path).expect("env_logger file"),
        ))))
        .build();

    let mut g = c.benchmark_group("bridges");
    g.bench_function("log_info_nanolog", |b| {
        b.iter_custom(|iters| bursts(iters, &logger, log_message))
    });
    g.bench_function("log_info_env_logger_file", |b| {
        b.iter(|| {
            let i = std::hint::black_box(7u64);
            log::Log::log(
                &env,
                &log::Record::builder()
                    .level(log::Level::Info)
                    .target(module_path!())
                    .module_path_static(Some(module_path!()))
                    .file_static(Some(file!()))
                    .line(Some(line!()))
                    .args(format_args!(
                        "request {} served in {} us from {}",
                        i,
                        i % 997,
                        "10.0.0.7:9000"
                    ))
                    .build(),
            )
        })
    });

    let nl = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(nl, || {
        g.bench_function("tracing_info_nanolog", |b| {
            b.iter_custom(|iters| bursts(iters, &logger, tracing_event))
        });
        g.bench_function("tracing_formatted_nanolog", |b| {
            b.iter_custom(|iters| bursts(iters, &logger, tracing_formatted))
        });
        g.bench_function("tracing_debug_disabled_nanolog", |b| {
            b.iter(|| tracing_disabled(std::hint::black_box(7)))
        });
    });
    let fmt_path = dir.join(format!("nanolog-bench-tracing-fmt-{pid}.log"));
    let file = Mutex::new(BufWriter::new(File::create(&fmt_path).expect("fmt file")));
    let fmt = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(file)
            .with_ansi(false),
    );
    tracing::subscriber::with_default(fmt, || {
        g.bench_function("tracing_info_fmt_file", |b| {
            b.iter(|| tracing_event(std::hint::black_box(7)))
        });
    });
    g.finish();
    drop(logger);
    for p in [&path, &env_path, &fmt_path] {
        let _ = std::fs::remove_file(p);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
