//! A tokio service traced by the OpenTelemetry SDK through
//! tracing-opentelemetry, logging through nanolog: every record made in a
//! traced span carries that span's trace id and span id (the feature
//! `opentelemetry`). It logs a few requests (one under an incoming
//! `traceparent`), then reads its own log back and prints each record
//! beside the ids, and the spans the SDK exported.
//!
//! ```text
//! cargo run --example otel --features opentelemetry
//! ```

use std::sync::{Arc, Mutex};

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The spans the SDK exports, kept to be printed at the end (a service
/// would send them to its collector).
#[derive(Debug, Clone, Default)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(batch);
        Ok(())
    }
}

/// The parent an incoming `traceparent` header names (W3C:
/// `00-<trace id>-<parent span id>-<flags>`).
fn from_traceparent(header: &str) -> Option<opentelemetry::Context> {
    let mut parts = header.split('-');
    let (_version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    Some(opentelemetry::Context::new().with_remote_span_context(sc))
}

#[tracing::instrument(level = "info", skip_all, fields(user = user))]
async fn handler(user: &'static str) {
    tracing::info!(rows = 3u64, "query done");
    let work = tracing::info_span!("render");
    tokio::task::spawn_blocking(move || {
        work.in_scope(|| tracing::info!(bytes = 512u64, "rendered"))
    })
    .await
    .ok();
}

async fn request(id: u64, traceparent: Option<&'static str>) {
    let span = tracing::info_span!("request", id);
    if let Some(parent) = traceparent.and_then(from_traceparent) {
        // Set after the span is made, before it is entered: nanolog takes
        // the ids when the span is first entered.
        let _ = span.set_parent(parent);
    }
    async {
        tracing::info!(path = "/orders", "request received");
        handler(if id.is_multiple_of(2) { "ann" } else { "bob" }).await;
        tracing::info!(status = 200u64, "request done");
    }
    .instrument(span)
    .await;
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join(format!("nanolog-otel-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder().path(&path).start()?;
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(kept.clone())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("example")))
        .with(nanolog::tracing_layer())
        .init();

    tracing::info!("outside any span: no trace context");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    rt.block_on(async {
        let incoming = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let tasks = [
            tokio::spawn(request(1, incoming)),
            tokio::spawn(request(2, None)),
        ];
        for t in tasks {
            let _ = t.await;
        }
    });
    drop(rt);
    provider.shutdown()?;
    logger.flush()?;
    drop(logger);

    println!("the log, each record with the trace context of its innermost traced span:");
    let files = [nanolog::reader::LogFile::open(&path)?];
    for ev in nanolog::reader::Merge::new(&files, nanolog::reader::Filter::default()) {
        if let nanolog::reader::Event::Record(r) = ev {
            let ids = r.trace_context().map_or_else(
                || "-".to_owned(),
                |c| format!("trace {} span {}", c.trace_hex(), c.span_hex()),
            );
            println!("  {:<36} {ids}", r.message());
        }
    }
    println!("the spans the SDK exported:");
    for s in kept.0.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        println!(
            "  {:<8} trace {} span {}",
            s.name,
            s.span_context.trace_id(),
            s.span_context.span_id()
        );
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}
