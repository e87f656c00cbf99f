//! Criterion and a side-by-side table: the paths a `tracing` service takes.
//!
//! - a typed `tracing` event through nanolog's layer against
//!   `tracing-subscriber`'s fmt layer into `tracing-appender`'s non-blocking
//!   writer (lossless), per call and in events/s from one thread until the
//!   last event is written;
//! - a span entered and exited (`nanolog::span!`, a `tracing` span);
//! - an event inside three spans against one outside;
//! - a disabled event.
//!
//! Latencies are the median of single calls timed with the TSC, an empty
//! TSC pair subtracted (as `benches/table3.rs`); all in one run.

mod common;

use std::time::{Duration, Instant};

use common::{bursts, empty_tsc_pair, nearest_rank, timed_calls, BURST};
use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::layer::SubscriberExt;

#[inline(never)]
fn typed_event(i: u64) {
    tracing::info!(order = i, side = "buy", "order placed");
}

#[inline(never)]
fn native_record(i: u64) {
    nanolog::info!("order placed order={} side={}", i, "buy");
}

/// Events/s of `n` calls from this thread, `finish` (the last event
/// written) included.
fn rate(n: u64, call: impl Fn(u64), finish: impl FnOnce()) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        call(i);
    }
    finish();
    n as f64 / t.elapsed().as_secs_f64()
}

/// Runs of [`rate`] each side takes; the median is reported (one run
/// swings by a fifth on this shared machine, either side).
const RATE_RUNS: usize = 5;

/// Events per run of [`rate`]: far more than a ring holds, so the flusher's
/// or the writer thread's pace is in the figure.
const RATE_EVENTS: u64 = 2_000_000;

/// Median ns of one call of `op`, the empty TSC pair subtracted.
fn p50_ns(op: impl FnMut()) -> f64 {
    let overhead = empty_tsc_pair(10_000);
    let ticks_per_ns = nanolog_runtime::clock::ticks_per_second() / 1e9;
    // Wait 2 us of ticks after each call: the flusher keeps up.
    let lat = timed_calls(BURST as usize, (2000.0 * ticks_per_ns) as u64, overhead, op);
    nearest_rank(&lat, 50.0) as f64 / ticks_per_ns
}

/// Rates in M/s, for the table.
fn millions(rates: &[f64]) -> String {
    let v: Vec<String> = rates.iter().map(|r| format!("{:.2}", r / 1e6)).collect();
    v.join(" ")
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let path = dir.join(format!("nanolog-bench-spans-{pid}.nlog"));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .start()
        .expect("start");
    let flush = || logger.flush().expect("flush");

    let nl = tracing_subscriber::registry().with(nanolog::tracing_layer());
    let mut table = Vec::new();
    let mut g = c.benchmark_group("spans");
    tracing::subscriber::with_default(nl, || {
        typed_event(0);
        flush();
        table.push(("typed tracing event, nanolog", p50_ns(|| typed_event(7))));
        table.push(("nanolog::info!, same fields", p50_ns(|| native_record(7))));
        table.push((
            "tracing debug! below the filter",
            p50_ns(|| tracing::debug!(id = 7, "not recorded")),
        ));
        table.push((
            "span! entered and exited",
            p50_ns(|| drop(nanolog::span!("request", id = 7u64))),
        ));
        let ts = tracing::info_span!("request", id = 7u64);
        table.push((
            "tracing span entered and exited",
            p50_ns(|| drop(ts.enter())),
        ));
        table.push(("nanolog::info! outside spans", p50_ns(|| native_record(7))));
        {
            let _a = nanolog::span!("request", id = 7u64);
            let _b = nanolog::span!("db", table = "users");
            let _c = nanolog::span!("query", n = 3u32);
            table.push((
                "nanolog::info! inside three spans",
                p50_ns(|| native_record(7)),
            ));
            table.push((
                "typed tracing event inside three",
                p50_ns(|| typed_event(7)),
            ));
        }
        table.push(("typed tracing event outside", p50_ns(|| typed_event(7))));
        let nl_rates: Vec<f64> = (0..RATE_RUNS)
            .map(|_| rate(RATE_EVENTS, typed_event, flush))
            .collect();
        let nl_rate = common::median(nl_rates.clone()).unwrap_or(0.0);
        eprintln!(
            "\nspans: one run, this machine (p50 of single calls, empty TSC pair subtracted)"
        );
        for (what, ns) in &table {
            eprintln!("  {what:<36} {ns:>8.1} ns");
        }
        eprintln!(
            "  typed event, nanolog: {:.2} M events/s until flushed (median of {RATE_RUNS}: {})",
            nl_rate / 1e6,
            millions(&nl_rates)
        );
        table.push(("rate", nl_rate));

        g.bench_function("tracing_typed_nanolog", |b| {
            b.iter_custom(|iters| bursts(iters, &logger, typed_event))
        });
        g.bench_function("span_enter_exit_nanolog", |b| {
            b.iter_custom(|iters| {
                bursts(iters, &logger, |i| drop(nanolog::span!("request", id = i)))
            })
        });
        g.bench_function("tracing_span_enter_exit_nanolog", |b| {
            b.iter_custom(|iters| bursts(iters, &logger, |_| drop(ts.enter())))
        });
    });

    // tracing-subscriber's fmt into tracing-appender's non-blocking writer,
    // lossless (a full channel blocks the caller, as nanolog's Block does).
    let fmt_path = dir.join(format!("nanolog-bench-spans-fmt-{pid}.log"));
    let make = || {
        let file = std::fs::File::create(&fmt_path).expect("fmt file");
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(false)
            .finish(file);
        let sub = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false),
        );
        (sub, guard)
    };
    let (sub, guard) = make();
    tracing::subscriber::with_default(sub, || {
        let p50 = p50_ns(|| typed_event(7));
        eprintln!("  typed event, fmt + non_blocking p50: {p50:.1} ns");
    });
    drop(guard);
    let fmt_rates: Vec<f64> = (0..RATE_RUNS)
        .map(|_| {
            let (sub, guard) = make();
            tracing::subscriber::with_default(sub, || {
                rate(RATE_EVENTS, typed_event, || drop(guard))
            })
        })
        .collect();
    let fmt_rate = common::median(fmt_rates.clone()).unwrap_or(f64::NAN);
    let nl_rate = table.last().map_or(0.0, |t| t.1);
    eprintln!(
        "  typed event, fmt + non_blocking: {:.2} M events/s until written (median of {RATE_RUNS}: {}); \
         nanolog {:.1}x\n",
        fmt_rate / 1e6,
        millions(&fmt_rates),
        nl_rate / fmt_rate
    );
    let (sub, guard) = make();
    tracing::subscriber::with_default(sub, || {
        g.bench_function("tracing_typed_fmt_non_blocking", |b| {
            b.iter(|| typed_event(std::hint::black_box(7)))
        });
    });
    drop(guard);
    g.finish();
    drop(logger);
    common::remove_set(&path);
    let _ = std::fs::remove_file(&fmt_path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
