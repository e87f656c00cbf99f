//! What logging costs a tokio service that already traces with
//! OpenTelemetry (feature `opentelemetry`, README "Trace context"): every subscriber
//! has tracing-opentelemetry's layer (the SDK's batch span processor into
//! an exporter that drops what it is given), and the log layer is added
//! over it. Alternated round by round in one process; each one's cost is
//! what it adds over the registry with the OpenTelemetry layer alone.
//!
//! - otel: the registry and the OpenTelemetry layer (the baseline);
//! - nanolog: and `nanolog::tracing_layer()` (a running logger, DEBUG),
//!   its records carrying the spans' trace ids; its time includes
//!   `Logger::flush`;
//! - appender: and `opentelemetry-appender-tracing`'s bridge into the SDK's
//!   logger with its batch processor (an exporter that counts and drops),
//!   the OpenTelemetry log path; its time includes `force_flush`;
//! - fmt JSON: and tracing-subscriber's JSON layer into a `BufWriter` of a
//!   file, flushed at the end;
//! - no-op layer: and a layer that does nothing (tracing-subscriber's
//!   `Identity`): what any layer costs through the registry (the registry
//!   frees closed spans only under a layer), the floor under every layer's
//!   figure.
//!
//! The workload: REQUESTS requests on a 2-worker runtime, 64 in flight,
//! each a request span, two `db` spans (`.instrument`), a child task and a
//! `spawn_blocking` closure in the request's span, a yield at every step,
//! and 12 events at INFO and DEBUG with typed fields.
//!
//! ```text
//! cargo bench --features opentelemetry --bench otel_cost [-- REQUESTS ROUNDS] [only NAME]
//! ```
//!
//! `only NAME` runs that subscriber's rounds alone (for a profiler).
//!
//! Prints each subscriber's median time and CPU time, what it adds over
//! the baseline, and nanolog's added cost as a share of the appender's and
//! of fmt JSON's (BENCHMARKS.md, "A service that traces with
//! OpenTelemetry").

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::logs::{LogBatch, LogExporter, SdkLoggerProvider};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::{Dispatch, Instrument};
use tracing_subscriber::layer::SubscriberExt;

#[path = "common/service.rs"]
mod service;
use service::{cpu_time, median, Locked};

const IN_FLIGHT: usize = 64;

/// Events the workload made (to check each subscriber got them all).
static EVENTS: AtomicU64 = AtomicU64::new(0);

fn event() {
    EVENTS.fetch_add(1, Ordering::Relaxed);
}

#[tracing::instrument(level = "info", skip_all, fields(method = "GET", request_id = i, status = tracing::field::Empty))]
async fn request(i: u64) {
    tracing::info!(bytes_in = 120 + i % 900, "request received");
    event();
    for q in 0..2u64 {
        async move {
            tracing::debug!(conn = (i + q) % 16, "pool checkout");
            event();
            tokio::task::yield_now().await;
            tracing::debug!(rows = (i * 7 + q) % 50, "query done");
            event();
        }
        .instrument(tracing::debug_span!("db", table = "orders", op = "select"))
        .await;
    }
    let child = tokio::spawn(
        async move {
            tracing::info!(target: "audit", action = "read", "audit begins");
            event();
            tokio::task::yield_now().await;
            tracing::info!(target: "audit", action = "read", "audited");
            event();
        }
        .in_current_span(),
    );
    let span = tracing::Span::current();
    let digest = tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            tracing::debug!(bytes = 4096u64, "hashing body");
            event();
            (0..64u64).fold(i, |a, b| a.rotate_left(5) ^ b)
        })
    })
    .await
    .unwrap_or(0);
    for step in 0..3u64 {
        tracing::debug!(step, digest, "handler step");
        event();
        tokio::task::yield_now().await;
    }
    let _ = child.await;
    tracing::Span::current().record("status", 200u64);
    tracing::info!(elapsed_us = 900 + i % 40_000, "request done");
    event();
}

/// Spans the SDK exports, dropped.
#[derive(Debug)]
struct NoSpans;

impl SpanExporter for NoSpans {
    async fn export(&self, _batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

/// Log records the SDK exports, counted and dropped.
#[derive(Debug)]
struct CountLogs(Arc<AtomicU64>);

impl LogExporter for CountLogs {
    async fn export(&self, batch: LogBatch<'_>) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0
            .fetch_add(batch.iter().count() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// One subscriber's service: its runtime (the subscriber the default of
/// its threads) and what completes its output at the end of a round.
struct Service {
    rt: tokio::runtime::Runtime,
    dispatch: Dispatch,
    finish: Box<dyn Fn()>,
    /// The tracer provider, shut down at the end.
    traces: SdkTracerProvider,
}

impl Service {
    fn new(
        layer: Option<Box<dyn tracing_subscriber::Layer<Reg> + Send + Sync>>,
        finish: Box<dyn Fn()>,
    ) -> Service {
        let traces = SdkTracerProvider::builder()
            .with_batch_exporter(NoSpans)
            .build();
        let otel = tracing_opentelemetry::layer().with_tracer(traces.tracer("service"));
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(otel).with(layer));
        let d = dispatch.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
            .build()
            .expect("a runtime");
        Service {
            rt,
            dispatch,
            finish,
            traces,
        }
    }

    /// The workload then `finish`: wall and CPU seconds.
    fn round(&self, requests: u64) -> (f64, f64) {
        let cpu = cpu_time();
        let start = Instant::now();
        tracing::dispatcher::with_default(&self.dispatch, || {
            self.rt.block_on(async {
                let mut next = 0u64;
                let mut set = tokio::task::JoinSet::new();
                while next < requests || !set.is_empty() {
                    while next < requests && set.len() < IN_FLIGHT {
                        set.spawn(request(next));
                        next += 1;
                    }
                    if let Some(r) = set.join_next().await {
                        r.expect("a request task");
                    }
                }
            })
        });
        (self.finish)();
        (start.elapsed().as_secs_f64(), cpu_time() - cpu)
    }
}

/// The registry with the OpenTelemetry layer, which the log layers go over.
type Reg = tracing_subscriber::layer::Layered<
    tracing_opentelemetry::OpenTelemetryLayer<
        tracing_subscriber::Registry,
        opentelemetry_sdk::trace::SdkTracer,
    >,
    tracing_subscriber::Registry,
>;

const KINDS: [&str; 5] = ["otel", "nanolog", "appender", "fmt JSON", "no-op layer"];

fn main() {
    let mut nums = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<u64>().ok());
    let requests = nums.next().unwrap_or(5_000);
    let rounds = nums.next().unwrap_or(15) as usize;
    let dir = std::env::temp_dir().join(format!("nanolog-otel-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let logger = Arc::new(
        nanolog::Logger::builder()
            .path(dir.join("service.nlog"))
            .filter("debug")
            .start()
            .expect("the logger starts"),
    );
    let exported = Arc::new(AtomicU64::new(0));
    let logs = SdkLoggerProvider::builder()
        .with_batch_exporter(CountLogs(Arc::clone(&exported)))
        .build();
    let fmt_file = dir.join("fmt.json");
    let w = Arc::new(std::sync::Mutex::new(std::io::BufWriter::with_capacity(
        1 << 16,
        std::fs::File::create(&fmt_file).expect("a file"),
    )));
    let services = {
        let l = Arc::clone(&logger);
        let lp = logs.clone();
        let (ww, wf) = (Arc::clone(&w), Arc::clone(&w));
        vec![
            Service::new(None, Box::new(|| {})),
            Service::new(
                Some(Box::new(nanolog::tracing_layer())),
                Box::new(move || l.flush().expect("flush")),
            ),
            Service::new(
                Some(Box::new(
                    opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&logs),
                )),
                Box::new(move || {
                    let _ = lp.force_flush();
                }),
            ),
            Service::new(
                Some(Box::new(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(move || Locked(Arc::clone(&ww))),
                )),
                Box::new(move || {
                    let _ = wf.lock().unwrap_or_else(|e| e.into_inner()).flush();
                }),
            ),
            Service::new(
                Some(Box::new(tracing_subscriber::layer::Identity::new())),
                Box::new(|| {}),
            ),
        ]
    };
    let only = std::env::args()
        .skip_while(|a| a != "only")
        .nth(1)
        .and_then(|n| KINDS.iter().position(|k| k.starts_with(&n)));
    if let Some(k) = only {
        for _ in 0..rounds {
            let (t, c) = services[k].round(requests);
            println!("{}: {t:.3} s, CPU {c:.3} s", KINDS[k]);
        }
        return;
    }
    for s in &services {
        s.round(requests / 10);
    }
    let mut times = vec![Vec::new(); KINDS.len()];
    let mut cpus = vec![Vec::new(); KINDS.len()];
    let (mut nanolog_events, mut appender_events) = (0, 0);
    let logged_before = logger.stats().logged;
    let exported_before = exported.load(Ordering::Relaxed);
    for r in 0..rounds {
        for j in 0..KINDS.len() {
            let k = (r + j) % KINDS.len();
            if k == 3 {
                // fmt's file emptied: every round writes into an empty one.
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&fmt_file)
                    .and_then(|f| f.set_len(0));
            }
            let before = EVENTS.load(Ordering::Relaxed);
            let (t, c) = services[k].round(requests);
            let n = EVENTS.load(Ordering::Relaxed) - before;
            match k {
                1 => nanolog_events += n,
                2 => appender_events += n,
                _ => {}
            }
            times[k].push(t);
            cpus[k].push(c);
        }
    }
    let stats = logger.stats();
    println!(
        "{requests} requests, {rounds} rounds; nanolog wrote {} of {nanolog_events} events ({} dropped); the appender exported {} of {appender_events}",
        stats.logged - logged_before,
        stats.dropped,
        exported.load(Ordering::Relaxed) - exported_before,
    );
    let med: Vec<f64> = times.iter().map(|v| median(&mut v.clone())).collect();
    let cpu: Vec<f64> = cpus.iter().map(|v| median(&mut v.clone())).collect();
    println!("| subscriber (over the registry and the OpenTelemetry layer) | median time | added | median CPU | CPU added |");
    println!("|---|---|---|---|---|");
    for (k, name) in KINDS.iter().enumerate() {
        println!(
            "| {name} | {:.3} s | {:.3} s | {:.3} s | {:.3} s |",
            med[k],
            med[k] - med[0],
            cpu[k],
            cpu[k] - cpu[0]
        );
    }
    let added = |k: usize| med[k] - med[0];
    let cpu_added = |k: usize| cpu[k] - cpu[0];
    println!(
        "nanolog's added time / the appender's: {:.3}; / fmt JSON's: {:.3}",
        added(1) / added(2),
        added(1) / added(3)
    );
    println!(
        "nanolog's added CPU / the appender's: {:.3}; / fmt JSON's: {:.3}",
        cpu_added(1) / cpu_added(2),
        cpu_added(1) / cpu_added(3)
    );
    println!(
        "over the no-op layer: nanolog's added CPU / the appender's: {:.3}; / fmt JSON's: {:.3}",
        (cpu[1] - cpu[4]) / (cpu[2] - cpu[4]),
        (cpu[1] - cpu[4]) / (cpu[3] - cpu[4])
    );
    let mut per_round: Vec<f64> = (0..rounds)
        .map(|r| (times[1][r] - times[0][r]) / (times[2][r] - times[0][r]))
        .collect();
    println!(
        "per round, nanolog added / the appender added: median {:.3}",
        median(&mut per_round)
    );
    for s in services {
        let _ = s.traces.shutdown();
    }
    let _ = logs.shutdown();
    drop(logger);
    let _ = std::fs::remove_dir_all(&dir);
}
