//! tracing's own semantics, checked against an oracle nobody here wrote:
//! nanolog's layer and tracing-subscriber's JSON formatter
//! (`fmt::layer().json().with_span_list(true)`) in one registry, under a
//! 4-worker tokio runtime of `#[instrument]`ed requests with child tasks,
//! blocking sections, values recorded later, explicit parents, spans
//! entered twice, root spans inside others, and `log` and native records
//! inside spans. Every event's spans (names and fields, outermost first)
//! and message decode as fmt printed them.
//!
//! One difference is fmt's, not ours: its JSON formatter lists the
//! *current* span's scope even for an event with an explicit parent
//! (`json.rs` asks `lookup_current`), while its text formatter, and
//! `Context::event_scope`, follow the explicit parent. nanolog follows the
//! explicit parent; those events are checked against fmt's text formatter,
//! installed in the same registry.
//!
//! Representation differences, none of which this workload uses: fmt
//! prints a non-finite float field as JSON `null`-less text it cannot
//! parse back (`NaN`), nanolog as the strings `"NaN"`/`"inf"`; fmt prints
//! 128-bit integers as strings, nanolog as exact JSON numbers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Map, Value as Json};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod common;

use common::{succeed, temp, Captured};

/// Every event's join key: a unique `seq` field (tracing events) or a
/// unique message (`log` records).
static SEQ: AtomicU64 = AtomicU64::new(1);

fn seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Native records: each is logged right after a `tracing` event of the
/// same scope on the same thread, and must carry the spans fmt printed for
/// that event. (native seq, its tracing event's seq.)
static PAIRS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// A tracing event, then a native record and a `log` record in the same
/// scope (a `log` record through tracing-log is an event fmt sees too).
fn events_here(what: &'static str) {
    let s = seq();
    tracing::info!(seq = s, kind = what, "event");
    let n = seq();
    nanolog::info!("native {}", n);
    PAIRS.lock().unwrap().push((n, s));
    log::info!("log record {}", seq());
}

#[tracing::instrument(fields(user = %user, status = tracing::field::Empty))]
async fn request(id: u64, user: String) {
    events_here("start");
    // A child task, instrumented with a span made here: its parent is
    // `request`, wherever it runs.
    let child = tokio::spawn(
        async move {
            events_here("child");
            tokio::task::yield_now().await;
            // A grandchild, in the current span.
            let grand = tokio::spawn(
                async {
                    tokio::task::yield_now().await;
                    events_here("grandchild");
                }
                .in_current_span(),
            );
            let _ = grand.await;
            events_here("child after grandchild");
        }
        .instrument(tracing::info_span!("child_task", part = 1u64)),
    );
    // A blocking section in a span of its own, inside `request`.
    let blocking = tracing::info_span!("blocking", rows = 10i64);
    let b = tokio::task::spawn_blocking(move || {
        blocking.in_scope(|| {
            events_here("blocking");
            let db = tracing::info_span!("db", table = "users", ok = true);
            db.in_scope(|| events_here("db"));
        })
    });
    async {
        tokio::task::yield_now().await;
        events_here("cache");
    }
    .instrument(tracing::info_span!("cache", key = "k1", ratio = 0.5))
    .await;
    let _ = child.await;
    let _ = b.await;
    // A value recorded while the span is entered: shown from now on.
    tracing::Span::current().record("status", 200u64);
    events_here("after record");
    // An explicit parent: the event is in `other`'s scope, not the
    // current one; a span made with an explicit parent; a root span
    // entered inside this one.
    let other = tracing::info_span!(parent: None, "detached", n = id);
    let s = seq();
    tracing::info!(parent: &other, seq = s, "explicit");
    EXPLICIT.lock().unwrap().push((s, id));
    let adopted = tracing::info_span!(parent: &other, "adopted");
    adopted.in_scope(|| events_here("adopted"));
    let root = tracing::info_span!(parent: None, "root_inside");
    root.in_scope(|| events_here("root inside"));
    // The same span entered twice: shown once.
    let twice = tracing::info_span!("twice", x = tracing::field::Empty);
    {
        let _a = twice.enter();
        let _b = twice.enter();
        twice.record("x", 7u64);
        events_here("entered twice");
    }
    // A native span inside: native and `log` records carry it; a tracing
    // event is in tracing's scope, without it.
    {
        let _n = nanolog::span!("native_span", id);
        let n = seq();
        nanolog::info!("native {}", n);
        NATIVE_IN_SPAN.lock().unwrap().push((n, id));
    }
    events_here("end");
}

/// Events with an explicit parent: (seq, request id).
static EXPLICIT: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Native records inside a `nanolog::span!` of a request: (seq, request id).
static NATIVE_IN_SPAN: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// fmt's span object (`{"name": .., field: ..}`) as nanolog's JSON has it
/// (`{"name": .., "fields": {..}}`).
fn fmt_span(s: &Json) -> Json {
    let mut fields: Map<String, Json> = s.as_object().unwrap().clone();
    let name = fields.remove("name").unwrap();
    json!({"name": name, "fields": fields})
}

const REQUESTS: u64 = 300;

#[test]
fn every_event_carries_the_spans_fmt_shows() {
    let path = temp("oracle");
    let _ = std::fs::remove_file(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(4 << 20)
        .start()
        .unwrap();
    let captured = Captured::default();
    let w = captured.clone();
    let captured_text = Captured::default();
    let wt = captured_text.clone();
    // The README's set-up: `init()` also installs tracing-log, so `log`
    // records reach both layers as events.
    tracing_subscriber::registry()
        .with(nanolog::tracing_layer())
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_span_list(true)
                .with_current_span(false)
                .with_writer(move || w.clone()),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .without_time()
                .with_ansi(false)
                .with_target(false)
                .with_writer(move || wt.clone()),
        )
        .init();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let all = async {
            let tasks: Vec<_> = (0..REQUESTS)
                .map(|i| tokio::spawn(request(i, format!("user{}", i % 7))))
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .expect("the workload ends within its deadline");
    });
    rt.shutdown_timeout(Duration::from_secs(10));
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert_eq!(stats.dropped, 0);

    // fmt's lines, by join key.
    let text = captured.text();
    let mut fmt: HashMap<String, Json> = HashMap::new();
    for line in text.lines() {
        let v: Json = serde_json::from_str(line).unwrap();
        let f = &v["fields"];
        let key = match f.get("seq") {
            Some(s) => s.to_string(),
            None => f["message"].as_str().unwrap().to_owned(),
        };
        assert!(fmt.insert(key, v).is_none(), "join keys are unique");
    }
    // nanolog's, decoded by the binary.
    let out = succeed(&["decode", "--format", "json", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    let mut ours: HashMap<String, Json> = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Json = serde_json::from_str(line).unwrap();
        let key = match v["fields"].get("seq") {
            Some(s) => s.to_string(),
            None => v["msg"].as_str().unwrap().to_owned(),
        };
        assert!(ours.insert(key, v).is_none(), "join keys are unique");
    }

    // Explicit parents: fmt's text formatter (event_scope) and nanolog
    // agree; fmt's JSON lists the current span instead (see the top).
    let text_lines = captured_text.text();
    let mut explicit = HashMap::new();
    for (s, id) in EXPLICIT.lock().unwrap().iter() {
        explicit.insert(s.to_string(), *id);
    }
    for line in text_lines.lines() {
        let Some((_, s)) = line.rsplit_once(" seq=") else {
            continue;
        };
        if let Some(id) = explicit.remove(s) {
            assert!(
                line.contains(&format!(" detached{{n={id}}}: explicit ")),
                "fmt's text line of an explicit parent: {line}"
            );
            let o = &ours[s];
            assert_eq!(
                o["spans"],
                json!([{"name": "detached", "fields": {"n": id}}]),
                "explicit {s}"
            );
        }
    }
    assert!(
        explicit.is_empty(),
        "fmt's text printed every explicit event"
    );

    // Every other event fmt printed, with fmt's spans and message.
    let mut compared = 0;
    for (key, f) in &fmt {
        if f["fields"]["message"] == "explicit" {
            compared += 1;
            continue;
        }
        let Some(o) = ours.get(key) else {
            panic!("fmt printed {key}, nanolog has no such record: {f}");
        };
        let want: Vec<Json> = f
            .get("spans")
            .and_then(Json::as_array)
            .map(|a| a.iter().map(fmt_span).collect())
            .unwrap_or_default();
        assert_eq!(o["spans"], Json::Array(want), "spans of {key}: fmt {f}");
        assert_eq!(o["msg"], f["fields"]["message"], "message of {key}");
        if let Some(kind) = f["fields"].get("kind") {
            assert_eq!(&o["fields"]["kind"], kind, "fields of {key}");
        }
        compared += 1;
    }
    // Per request: 12 scopes x 2 events (tracing, log), and the explicit one.
    assert_eq!(compared as u64, REQUESTS * 25);

    // Native records: the spans of the tracing event before them.
    for (n, s) in PAIRS.lock().unwrap().iter() {
        let o = &ours[&format!("native {n}")];
        let e = &ours[&s.to_string()];
        assert_eq!(o["spans"], e["spans"], "native {n} beside event {s}");
    }
    // Inside a native span: the request's spans, then the native one.
    for (n, id) in NATIVE_IN_SPAN.lock().unwrap().iter() {
        let spans = ours[&format!("native {n}")]["spans"]
            .as_array()
            .unwrap()
            .clone();
        let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["request", "native_span"], "native {n}");
        assert_eq!(spans[0]["fields"]["id"], json!(id));
        assert_eq!(spans[1]["fields"], json!({"id": id}));
    }
}
