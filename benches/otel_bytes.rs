//! What a span's trace ids cost the file (issue #67: at most the ids' 24
//! bytes a span, not a record): the same requests logged twice, with and
//! without tracing-opentelemetry's layer in the registry (feature
//! `opentelemetry`), each into a log of its own, and the bytes compared.
//!
//! The workload: REQUESTS requests on one thread, each a `request` span
//! (method, a request number) with two `db` spans (table, operation) and
//! 11 events of typed fields, flushed every 100 requests (a service's
//! pace: the flusher compresses its batches).
//!
//! ```text
//! cargo bench --features opentelemetry --bench otel_bytes [-- REQUESTS]
//! ```
//!
//! Prints each log's bytes and its SPAN entries' bytes (inside blocks,
//! inflated), and what the ids added a span, compressed and inflated
//! (BENCHMARKS.md, "A service that traces with OpenTelemetry").
//! `NANOLOG_BENCH_KEEP=1` keeps the two logs (their directory is in the
//! system's temporary directory) for `nanolog info`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt;

/// Spans the SDK exports, dropped.
#[derive(Debug)]
struct NoSpans;

impl SpanExporter for NoSpans {
    async fn export(&self, _batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

const SPANS_A_REQUEST: u64 = 3;

fn requests(n: u64, logger: &nanolog::Logger) {
    for i in 0..n {
        let request = tracing::info_span!("request", method = "GET", request = i);
        let _r = request.enter();
        tracing::info!(bytes_in = 120 + i % 900, "request received");
        for q in 0..2u64 {
            let db = tracing::debug_span!("db", table = "orders", op = "select");
            let _d = db.enter();
            tracing::debug!(conn = (i + q) % 16, "pool checkout");
            tracing::debug!(rows = (i * 7 + q) % 50, "query done");
        }
        tracing::info!(target: "audit", action = "read", "audited");
        for step in 0..5u64 {
            tracing::debug!(step, digest = i.rotate_left(7) ^ step, "handler step");
        }
        tracing::info!(elapsed_us = 900 + i % 40_000, "request done");
        if i % 100 == 99 {
            let _ = logger.flush();
        }
    }
}

/// Bytes of a log, and of its SPAN entries (those in blocks inflated).
fn bytes_of(path: &std::path::Path) -> (usize, usize) {
    let file = std::fs::read(path).expect("the log");
    let mut spans = 0;
    let mut each = |entries: &[u8]| {
        let mut at = 0;
        let mut blocks = Vec::new();
        while at + 9 <= entries.len() {
            let len =
                u32::from_le_bytes(entries[at + 1..at + 5].try_into().unwrap_or_default()) as usize;
            let body = entries.get(at + 9..at + 9 + len).unwrap_or(&[]);
            match entries[at] {
                8 => spans += 9 + len,
                12 => blocks.extend(nanolog_runtime::wire::block::entries_of(body).ok()),
                _ => {}
            }
            at += 9 + len;
        }
        blocks
    };
    for inner in each(&file[48.min(file.len())..]) {
        each(&inner);
    }
    (file.len(), spans)
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let dir = std::env::temp_dir().join(format!("nanolog-otel-bytes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the logs");
    let mut sizes = Vec::new();
    for traced in [false, true] {
        let path = dir.join(if traced { "traced.nlog" } else { "plain.nlog" });
        let logger = nanolog::Logger::builder()
            .path(&path)
            .level(nanolog::Level::Debug)
            .start()
            .expect("start the logger");
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(NoSpans)
            .build();
        let layer =
            traced.then(|| tracing_opentelemetry::layer().with_tracer(provider.tracer("b")));
        let subscriber = tracing_subscriber::registry()
            .with(layer)
            .with(nanolog::tracing_layer());
        tracing::subscriber::with_default(subscriber, || requests(n, &logger));
        let _ = provider.shutdown();
        drop(logger);
        sizes.push(bytes_of(&path));
    }
    let spans = (n * SPANS_A_REQUEST) as f64;
    let ((plain, plain_spans), (traced, traced_spans)) = (sizes[0], sizes[1]);
    println!("{n} requests, {} spans", n * SPANS_A_REQUEST);
    println!("| log | bytes | SPAN entries (inflated) |");
    println!("|---|---|---|");
    println!("| without the OpenTelemetry layer | {plain} | {plain_spans} |");
    println!("| with it (every span traced) | {traced} | {traced_spans} |");
    println!(
        "the ids add {:.1} bytes a span to the file, {:.1} to its SPAN entries inflated",
        (traced as f64 - plain as f64) / spans,
        (traced_spans as f64 - plain_spans as f64) / spans
    );
    if std::env::var_os("NANOLOG_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
