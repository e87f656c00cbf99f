//! Records joined to their traces through the real OpenTelemetry SDK
//! (feature `opentelemetry`, README "Trace context"): a tokio service with
//! tracing-opentelemetry's layer and nanolog's in one registry. The oracle
//! is the SDK itself: the spans it exported, and, for the spans it did not
//! sample (so never exported), the context tracing-opentelemetry gives
//! inside them (`OpenTelemetrySpanExt::context`).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nanolog::reader::{Event, Filter, LogFile, Merge, Record, TraceContext, Value};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// The SDK's exported spans, kept.
#[derive(Debug, Clone, Default)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// What a record made inside a span should carry, as the OpenTelemetry
/// layer says from inside that span: (stage, request) -> context.
type Seen = Arc<Mutex<HashMap<(String, u64), SpanContext>>>;

/// Notes the current span's OpenTelemetry context under (stage, req), and
/// logs a record there that says which it is.
fn note(seen: &Seen, stage: &'static str, req: u64) {
    let cx = tracing::Span::current().context();
    let sc = cx.span().span_context().clone();
    seen.lock().unwrap().insert((stage.to_owned(), req), sc);
    tracing::info!(stage, req, "in {stage}");
}

/// A remote parent, as a `traceparent` header would give it: request
/// `req`'s own trace id; sampled or not as `sampled` says.
fn remote_parent(req: u64, sampled: bool) -> opentelemetry::Context {
    let trace = TraceId::from_bytes(
        [[0x5a; 8], (req + 1).to_be_bytes()]
            .concat()
            .try_into()
            .unwrap(),
    );
    let span = SpanId::from_bytes((req + 0x77).to_be_bytes());
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let sc = SpanContext::new(trace, span, flags, true, TraceState::default());
    opentelemetry::Context::new().with_remote_span_context(sc)
}

/// One request: a root span (for some requests under a remote parent set
/// after it was made and before it was entered, as a service does with an
/// incoming `traceparent`), an instrumented handler, a spawned task, a
/// closure on the blocking pool, a span inside the request's given a
/// remote parent of another trace (a batch job's, say: its records are of
/// that trace, not the request's), and an event in each.
async fn request(req: u64, seen: Seen) {
    let root = tracing::info_span!("request", req, status = tracing::field::Empty);
    match req % 4 {
        1 => {
            let _ = root.set_parent(remote_parent(req, true));
        }
        2 => {
            let _ = root.set_parent(remote_parent(req, false));
        }
        _ => {}
    }
    let s = seen.clone();
    async move {
        note(&s, "request", req);
        let h = s.clone();
        async move {
            note(&h, "handler", req);
            tokio::task::yield_now().await;
            note(&h, "handler", req);
        }
        .instrument(tracing::info_span!("handler", req))
        .await;
        let t = s.clone();
        tokio::spawn(
            async move {
                tokio::task::yield_now().await;
                note(&t, "task", req);
            }
            .instrument(tracing::info_span!("task", req)),
        )
        .await
        .unwrap();
        let b = s.clone();
        let blocking = tracing::info_span!("blocking", req);
        tokio::task::spawn_blocking(move || blocking.in_scope(|| note(&b, "blocking", req)))
            .await
            .unwrap();
        // Inside the request's span, in another trace (sampled).
        let linked = tracing::info_span!("linked", req);
        let _ = linked.set_parent(remote_parent(req + 10_000, true));
        linked.in_scope(|| note(&s, "linked", req));
        // A value recorded into the span after its context was taken.
        tracing::Span::current().record("status", 200u64);
        note(&s, "request", req);
    }
    .instrument(root)
    .await;
}

/// A field of a record by name.
fn field<'a>(r: &Record<'a>, name: &str) -> Option<Value<'a>> {
    let i = r.site().names.iter().position(|n| n == name)?;
    r.arg(i)
}

fn context_of(sc: &SpanContext) -> TraceContext {
    TraceContext {
        trace_id: sc.trace_id().to_bytes(),
        span_id: sc.span_id().to_bytes(),
        flags: Some(sc.trace_flags().to_u8()),
    }
}

/// Runs the service with the two layers in `order` and checks every record.
fn service(name: &str, otel_first: bool) {
    const REQUESTS: u64 = 200;
    let _serial = common::serial();
    let path = common::temp(name);
    let _log = common::TempLog(path.clone());
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(kept.clone())
        .build();
    let tracer = provider.tracer("nanolog-test");
    let dispatch: tracing::Dispatch = if otel_first {
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(tracer))
            .with(nanolog::tracing_layer())
            .into()
    } else {
        tracing_subscriber::registry()
            .with(nanolog::tracing_layer())
            .with(tracing_opentelemetry::layer().with_tracer(tracer))
            .into()
    };
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let seen = Seen::default();
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            // Every worker and blocking thread in the service's registry
            // (for the thread's life).
            std::mem::forget(tracing::dispatcher::set_default(&d));
        })
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::info!(stage = "outside", req = 0u64, "before any span");
        let tasks: Vec<_> = (1..=REQUESTS)
            .map(|req| rt.spawn(request(req, seen.clone())))
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        tracing::info!(stage = "outside", req = 0u64, "after every span");
    });
    drop(rt);
    provider.shutdown().unwrap();
    logger.flush().unwrap();
    drop(logger);

    // The SDK's exported spans by (name, req).
    let mut exported: HashMap<(String, u64), SpanContext> = HashMap::new();
    for s in kept.0.lock().unwrap().iter() {
        let req = s
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "req")
            .and_then(|kv| match &kv.value {
                opentelemetry::Value::I64(n) => u64::try_from(*n).ok(),
                // (tracing-opentelemetry records a `u64` by its `Debug`.)
                v => v.as_str().parse().ok(),
            })
            .unwrap();
        exported.insert((s.name.to_string(), req), s.span_context.clone());
    }
    // Requests 2, 6, ... are under an unsampled parent: none of their
    // spans is exported but the linked one (its own parent is sampled);
    // all others' five are.
    assert_eq!(
        exported.len() as u64,
        5 * (REQUESTS - REQUESTS / 4) + REQUESTS / 4
    );
    let seen = seen.lock().unwrap();

    let files = [LogFile::open(&path).unwrap()];
    let (mut checked, mut outside, mut unsampled) = (0, 0, 0);
    for ev in Merge::new(&files, Filter::default()) {
        let Event::Record(r) = ev else { continue };
        let Some(Value::Str(stage)) = field(&r, "stage") else {
            panic!("a record without its stage: {}", r.message());
        };
        let Some(Value::Uint(req)) = field(&r, "req") else {
            panic!("a record without its request: {}", r.message());
        };
        let req = req as u64;
        let got = r.trace_context();
        if stage == "outside" {
            assert_eq!(got, None, "a record outside spans has no trace context");
            outside += 1;
            continue;
        }
        let key = (stage.to_owned(), req);
        let inside = seen.get(&key).expect("noted in its span");
        assert_eq!(got, Some(context_of(inside)), "{stage} of request {req}");
        match exported.get(&key) {
            Some(sc) => assert_eq!(got, Some(context_of(sc)), "{stage} of request {req}"),
            None => {
                assert_eq!(req % 4, 2, "{stage} of request {req} was not exported");
                assert_eq!(got.and_then(|c| c.flags), Some(0), "unsampled: flag 0");
                unsampled += 1;
            }
        }
        if stage == "linked" {
            let parent = remote_parent(req + 10_000, true);
            let want = parent.span().span_context().trace_id().to_bytes();
            assert_eq!(got.map(|c| c.trace_id), Some(want), "linked of {req}");
        } else if matches!(req % 4, 1 | 2) {
            // Under the remote parent set after the span was made.
            let parent = remote_parent(req, req % 4 == 1);
            let want = parent.span().span_context().trace_id().to_bytes();
            assert_eq!(got.map(|c| c.trace_id), Some(want), "{stage} of {req}");
        }
        // The trace context is not a field: the spans print as they would
        // without it (the request span with its status once recorded).
        for s in r.spans() {
            let names: Vec<&str> = s.fields().iter().map(|(n, _)| *n).collect();
            assert!(names == ["req"] || names == ["req", "status"], "{names:?}");
            let mut text = String::new();
            s.render(&mut text);
            let status = if names.len() == 2 { " status=200" } else { "" };
            assert_eq!(text, format!("{}{{req={req}{status}}}", s.name()));
        }
        checked += 1;
    }
    assert_eq!(outside, 2);
    // Seven records a request (two in the handler, two in the request).
    assert_eq!(checked, 7 * REQUESTS);
    // A trace's contexts in the file (what `decode --trace` reads by): a
    // request's trace names its four spans with ids (the request's, and the
    // handler's, the task's and the closure's inside it, whose trace ids
    // the file leaves out), not the linked span of another trace inside it;
    // the records read by them are the trace's records.
    let contexts = |stage: &str, req: u64| {
        files[0].contexts_in_trace(seen[&(stage.to_owned(), req)].trace_id().to_bytes())
    };
    for (req, linked) in [(1, 5), (3, 7)] {
        let own = contexts("request", req);
        assert!(own.len() >= 4, "request {req}'s trace: {own:?}");
        let other = contexts("linked", linked);
        assert!(!other.is_empty(), "linked {linked}'s trace");
        assert!(other
            .iter()
            .all(|c| !contexts("request", linked).contains(c)));
    }
    for (stage, req) in [("request", 1), ("request", 3), ("linked", 5)] {
        let trace = seen[&(stage.to_owned(), req)].trace_id().to_bytes();
        let mut want = nanolog::reader::Want::default();
        want.contexts = Some(contexts(stage, req));
        let part = [LogFile::open_for(&path, &want).unwrap()];
        let of_trace = |files: &[LogFile]| {
            let mut stages = Vec::new();
            for ev in Merge::new(files, Filter::default()) {
                let Event::Record(r) = ev else { continue };
                if r.trace_context().is_some_and(|t| t.trace_id == trace) {
                    stages.push(r.message());
                }
            }
            stages
        };
        let all = of_trace(&files);
        assert_eq!(all.len(), if stage == "linked" { 1 } else { 6 }, "{all:?}");
        assert_eq!(of_trace(&part), all);
    }
    assert_eq!(unsampled, 6 * (REQUESTS / 4));
}

#[test]
fn records_carry_the_ids_the_sdk_exported_otel_layer_first() {
    service("otel-first", true);
}

#[test]
fn records_carry_the_ids_the_sdk_exported_nanolog_layer_first() {
    service("otel-second", false);
}

/// The same service twice in one process: the second's callsites were
/// seen by the first's subscriber, and its logger starts on a thread whose
/// default is no subscriber (tracing asks that one when a single
/// dispatcher is alive: every span would have been off for the
/// OpenTelemetry layer too).
#[test]
fn a_second_scoped_service_keeps_its_spans() {
    service("otel-again-1", true);
    service("otel-again-2", true);
}

/// A span of one subscriber entered on a thread whose default is another
/// subscriber (whose span of the same id is another span): its records
/// carry its own ids, asked of the subscriber nanolog's layer is in.
#[test]
fn a_span_entered_under_another_default_keeps_its_own_ids() {
    let _serial = common::serial();
    let path = common::temp("otel-two-subscribers");
    let _log = common::TempLog(path.clone());
    let subscriber = |kept: &Kept| {
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(kept.clone())
            .build();
        let tracer = provider.tracer("nanolog-test");
        let dispatch: tracing::Dispatch = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(tracer))
            .with(nanolog::tracing_layer())
            .into();
        (provider, dispatch)
    };
    let (kept_a, kept_b) = (Kept::default(), Kept::default());
    let (provider_a, a) = subscriber(&kept_a);
    let (provider_b, b) = subscriber(&kept_b);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let b_span =
        tracing::dispatcher::with_default(&b, || tracing::info_span!("b_span", req = 2u64));
    let a_span =
        tracing::dispatcher::with_default(&a, || tracing::info_span!("a_span", req = 1u64));
    assert_eq!(
        a_span.id(),
        b_span.id(),
        "the two registries' first spans share an id"
    );
    tracing::dispatcher::with_default(&b, || {
        let _in_b = b_span.enter();
        // Entered where B is the default: A's span, by A's layers.
        let _in_a = a_span.enter();
        tracing::dispatcher::with_default(&a, || {
            tracing::info!(stage = "a_span", req = 1u64, "in a");
        });
    });
    drop((a_span, b_span));
    provider_a.shutdown().unwrap();
    provider_b.shutdown().unwrap();
    logger.flush().unwrap();
    drop(logger);
    let exported = kept_a.0.lock().unwrap();
    let a_ctx = exported
        .iter()
        .find(|s| s.name == "a_span")
        .map(|s| context_of(&s.span_context))
        .expect("A exported its span");
    let files = [LogFile::open(&path).unwrap()];
    let got: Vec<_> = Merge::new(&files, Filter::default())
        .filter_map(|ev| match ev {
            Event::Record(r) => Some(r.trace_context()),
            _ => None,
        })
        .collect();
    assert_eq!(got, [Some(a_ctx)]);
}
