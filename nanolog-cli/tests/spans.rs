//! Spans as context: `nanolog::span!` and `tracing` spans nested three deep
//! on several threads (one `tracing` span made on one thread and entered on
//! another), across rolled files, decoded by the binary; every record's
//! spans are checked in JSON, and the text form against tracing's.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value as Json};
use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{serial, succeed, temp};

/// Removes the log at `path` and the finished files of its set.
fn remove_with_kept(path: &Path) {
    let _ = std::fs::remove_file(path);
    for (f, _) in nanolog::reader::finished_files(path).unwrap_or_default() {
        let _ = std::fs::remove_file(f);
    }
}

/// The files of the set at `path`, oldest first.
fn set(path: &Path) -> Vec<String> {
    nanolog::reader::finished_files(path)
        .unwrap()
        .into_iter()
        .map(|(f, _)| f.display().to_string())
        .chain([path.display().to_string()])
        .collect()
}

/// `nanolog decode --format json` of the set at `path`, one value per line.
fn decode_json(path: &Path) -> Vec<Json> {
    let files = set(path);
    let mut args = vec!["decode", "--format", "json"];
    args.extend(files.iter().map(String::as_str));
    let out = succeed(&args);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What a record logged as `msg` must carry: its spans, outermost first.
type Expected = HashMap<String, Json>;

fn span(name: &str, fields: Json) -> Json {
    json!({"name": name, "fields": fields})
}

/// A worker: native spans three deep, records at every depth, and many
/// records in the innermost span so the set rolls while spans are open.
fn native_worker(w: u64, expected: &mut Expected) {
    let user = format!("user{w}");
    let _request = nanolog::span!("request", id = w, user = user.as_str());
    let outer = span("request", json!({"id": w, "user": user}));
    nanolog::info!("w{} at one", w);
    expected.insert(format!("w{w} at one"), json!([outer]));
    {
        let _db = nanolog::span!("db", table = "users");
        let db = span("db", json!({"table": "users"}));
        {
            let _q = nanolog::span!("query", n = 3i32, fast = true);
            let q = span("query", json!({"n": 3, "fast": true}));
            for i in 0..2000 {
                nanolog::info!(
                    "w{} row {} of a long query with padding to fill files",
                    w,
                    i
                );
            }
            for i in 0..2000 {
                expected.insert(
                    format!("w{w} row {i} of a long query with padding to fill files"),
                    json!([outer, db, q]),
                );
            }
        }
        log::info!("w{} at two", w);
        expected.insert(format!("w{w} at two"), json!([outer, db]));
    }
    // Exited out of order: the innermost still open outlives its parent,
    // which stays its parent (as a `tracing` span's does).
    let a = nanolog::span!("a", k = 1u8);
    let b = nanolog::span!("b", k = 2u8);
    drop(a);
    nanolog::info!("w{} in b alone", w);
    expected.insert(
        format!("w{w} in b alone"),
        json!([
            outer,
            span("a", json!({"k": 1})),
            span("b", json!({"k": 2}))
        ]),
    );
    drop(b);
    drop(_request);
    nanolog::info!("w{} outside", w);
    expected.insert(format!("w{w} outside"), json!([]));
}

#[test]
fn records_carry_their_spans_across_threads_and_rolls() {
    let _g = serial();
    let path = temp("spans");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .rotate_bytes(8 << 10)
        .start()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::set_global_default(subscriber).unwrap();
    nanolog::capture_log().unwrap();

    let mut expected = Expected::new();
    let workers: Vec<_> = (1..=3)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("native{w}"))
                .spawn(move || {
                    let mut e = Expected::new();
                    native_worker(w, &mut e);
                    e
                })
                .unwrap()
        })
        .collect();

    // A tracing span made here and entered on another thread, with a
    // tracing span and a native span inside it.
    let job = tracing::info_span!("job", id = 42u64, name = "nightly", ratio = 0.5);
    let job_json = span("job", json!({"id": 42, "name": "nightly", "ratio": 0.5}));
    let mover = std::thread::Builder::new()
        .name("mover".into())
        .spawn(move || {
            let mut e = Expected::new();
            let _j = job.enter();
            tracing::info!(rows = 5u64, "working");
            e.insert("working".into(), json!([job_json]));
            let step = tracing::info_span!("step", n = 2i64);
            let step_json = span("step", json!({"n": 2}));
            step.in_scope(|| {
                let _leaf = nanolog::span!("leaf", tag = %"x");
                nanolog::info!("deep in three");
                e.insert(
                    "deep in three".into(),
                    json!([job_json, step_json, span("leaf", json!({"tag": "x"}))]),
                );
                // A `tracing` event inside a native span entered inside
                // tracing's current span: in it too.
                tracing::warn!("tracing deep");
                e.insert(
                    "tracing deep".into(),
                    json!([job_json, step_json, span("leaf", json!({"tag": "x"}))]),
                );
            });
            // A message that looks constant on its first event and then
            // varies: every event keeps its own text.
            for who in ["ann", "bob", "cy"] {
                let who = who.to_string();
                tracing::info!(n = 1u64, "hi {}", who);
                e.insert(format!("hi {who}"), json!([job_json]));
            }
            tracing::info!("back in job");
            e.insert("back in job".into(), json!([job_json]));
            e
        })
        .unwrap();
    expected.extend(mover.join().unwrap());
    for w in workers {
        expected.extend(w.join().unwrap());
    }
    nanolog::info!("main outside");
    expected.insert("main outside".into(), json!([]));
    logger.flush().unwrap();
    drop(logger);

    assert!(
        !nanolog::reader::finished_files(&path).unwrap().is_empty(),
        "the set should have rolled while spans were open"
    );
    let lines = decode_json(&path);
    let mut seen = 0;
    for l in &lines {
        let msg = l["msg"].as_str().unwrap();
        let Some(want) = expected.get(msg) else {
            continue;
        };
        assert_eq!(&l["spans"], want, "spans of {msg:?}");
        seen += 1;
    }
    assert_eq!(seen, expected.len(), "every expected record decoded once");

    // Text: the spans between the prefix and the message, as tracing's fmt.
    let files = set(&path);
    let mut args = vec!["decode"];
    args.extend(files.iter().map(String::as_str));
    let text = String::from_utf8(succeed(&args).stdout).unwrap();
    assert!(
        text.lines().any(|l| l.ends_with(
            ": job{id=42 name=\"nightly\" ratio=0.5}:step{n=2}:leaf{tag=x}: deep in three"
        )),
        "{text}"
    );
    assert!(text.lines().any(|l| l.ends_with("]: main outside")));
    remove_with_kept(&path);
}

/// Spans entered again and again (an executor polling two instrumented
/// futures; a request coming back from its child span): every record
/// carries its spans, a field recorded later shows from the next entry on,
/// and the file takes a few bytes a record, not a span entry and a new
/// extent per switch (62 bytes a record before format version 2).
#[test]
fn spans_entered_again_cost_a_few_bytes_a_record() {
    const POLLS: u64 = 20_000;
    let _g = serial();
    let path = temp("reenter");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        let a = tracing::info_span!("task", id = 1u64);
        let b = tracing::info_span!("task", id = 2u64, state = tracing::field::Empty);
        for i in 0..POLLS {
            if i == POLLS / 2 {
                b.record("state", "busy");
            }
            let _e = if i.is_multiple_of(2) {
                a.enter()
            } else {
                b.enter()
            };
            nanolog::info!("poll {}", i);
        }
        let request = tracing::info_span!("request", n = 7u64);
        let _r = request.enter();
        for i in 0..100 {
            {
                let _db = tracing::info_span!("db").entered();
                nanolog::info!("query {}", i);
            }
            nanolog::info!("back {}", i);
        }
    });
    logger.flush().unwrap();
    drop(logger);

    let size = std::fs::metadata(&path).unwrap().len();
    let request = span("request", json!({"n": 7}));
    let mut seen = 0;
    for l in decode_json(&path) {
        let msg = l["msg"].as_str().unwrap();
        let (what, i) = msg.split_once(' ').unwrap();
        let i: u64 = i.parse().unwrap();
        let want = match what {
            "poll" if i.is_multiple_of(2) => json!([span("task", json!({"id": 1}))]),
            "poll" if i < POLLS / 2 => json!([span("task", json!({"id": 2}))]),
            "poll" => json!([span("task", json!({"id": 2, "state": "busy"}))]),
            "query" => json!([request, span("db", json!({}))]),
            "back" => json!([request]),
            other => panic!("unexpected record {other:?}"),
        };
        assert_eq!(l["spans"], want, "spans of {msg:?}");
        seen += 1;
    }
    assert_eq!(seen, POLLS + 200);
    // A poll's record is about 9 bytes with its switch; the 100 child
    // spans take a SPAN entry and an extent each.
    assert!(
        size < POLLS * 16 + 100 * 128 + 8192,
        "{size} bytes for {POLLS} records in re-entered spans"
    );
    remove_with_kept(&path);
}

/// A span field whose `Debug` panics: the span shows `<Debug panicked>` for
/// it and its other fields as they are, and a value recorded into it later
/// keeps them (the layer decodes a span's fields from their encoding).
#[test]
fn a_span_field_whose_debug_panics_shows_so() {
    struct Bad;
    impl std::fmt::Debug for Bad {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("a Debug that panics")
        }
    }
    let _g = serial();
    let path = temp("debug-panics");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        let s = tracing::info_span!("req", id = 4u64, bad = ?Bad, rows = tracing::field::Empty);
        s.in_scope(|| nanolog::info!("inside"));
        s.record("rows", 2u64);
        s.in_scope(|| nanolog::info!("recorded"));
    });
    logger.flush().unwrap();
    drop(logger);
    let lines = decode_json(&path);
    let spans: Vec<&Json> = lines.iter().map(|l| &l["spans"]).collect();
    let first = json!({"id": 4, "bad": "<Debug panicked>"});
    let then = json!({"id": 4, "bad": "<Debug panicked>", "rows": 2});
    assert_eq!(
        spans,
        [&json!([span("req", first)]), &json!([span("req", then)])]
    );
    remove_with_kept(&path);
}

/// A SPAN entry lost to damage (a bit flipped in a plain log's first one):
/// every record is still read, and those whose spans it defined say so:
/// `"spans_lost": true` in JSON (their `spans` empty, not another span's),
/// `<spans lost>` where the spans stand in text, and `info` counts them.
/// Records of spans defined by later writes are as they were.
#[test]
fn records_whose_spans_were_lost_say_so() {
    let _g = serial();
    let path = temp("spans-lost");
    remove_with_kept(&path);
    common::log_with_a_lost_span_entry(&path);

    let lines = decode_json(&path);
    assert_eq!(lines.len(), 300, "every record is read");
    let mut lost = 0;
    for l in &lines {
        let i: u64 = l["msg"].as_str().unwrap()["served ".len()..]
            .parse()
            .unwrap();
        if l["spans_lost"] == json!(true) {
            lost += 1;
            assert_eq!(l["spans"], json!([]), "record {i}");
        } else {
            assert!(l.get("spans_lost").is_none(), "record {i}: {l}");
            assert_eq!(
                l["spans"],
                json!([span("request", json!({"id": i}))]),
                "record {i}"
            );
        }
    }
    // The first write's records (the first 100 at most) lost their span.
    assert!((1..=100).contains(&lost), "{lost} records marked");
    let text = String::from_utf8(succeed(&["decode", path.to_str().unwrap()]).stdout).unwrap();
    let marked = text
        .lines()
        .filter(|l| l.contains("<spans lost>: served "))
        .count();
    assert_eq!(marked, lost, "{text}");
    let info = String::from_utf8(succeed(&["info", path.to_str().unwrap()]).stdout).unwrap();
    assert!(
        info.contains(&format!("spans lost:      {lost} records")),
        "{info}"
    );
    remove_with_kept(&path);
}

/// A new span per request, two records in each: every record carries its
/// request, and a span costs its SPAN entry and a context switch in the
/// thread's extent, not also a CONTEXT entry and a new extent (about 65
/// bytes a span before, about 40 now).
#[test]
fn a_span_per_request_costs_its_entry_and_a_switch() {
    const REQUESTS: u64 = 5_000;
    let _g = serial();
    let path = temp("per-request");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    for i in 0..REQUESTS {
        let _s = nanolog::span!("request", id = i, user = "ann");
        nanolog::info!("got {}", i);
        nanolog::info!("done {}", i);
    }
    logger.flush().unwrap();
    drop(logger);

    let size = std::fs::metadata(&path).unwrap().len();
    let mut seen = 0;
    for l in decode_json(&path) {
        let i = l["args"][0].as_u64().unwrap();
        assert_eq!(
            l["spans"],
            json!([span("request", json!({"id": i, "user": "ann"}))]),
            "spans of {}",
            l["msg"]
        );
        seen += 1;
    }
    assert_eq!(seen, 2 * REQUESTS);
    // Two records of ~6 bytes, a SPAN entry of ~30 and a switch of 3.
    assert!(
        size < REQUESTS * 56 + 8192,
        "{size} bytes for {REQUESTS} requests of two records"
    );
    remove_with_kept(&path);
}

/// Random walks of span entries, exits (in any order), re-entries of
/// `tracing` spans, fields recorded later and records, across rolled
/// files: every record decodes with the spans a model of tracing's
/// semantics gives: the thread's stack as the registry keeps it (an exit
/// takes out the innermost entry of its span; a span entered while it is
/// in the stack is a duplicate entry, which leaves the current span as it
/// was), the current span its innermost entry that is not a duplicate,
/// and a record's spans the chain of parents from the current one (a
/// span's parent: the span current when it was made), each with its
/// values at the time of the record. (The writer switches contexts inside
/// extents, moves open extents after new spans' entries, and takes a
/// re-entered span's entry again; this checks all of it against the model.)
#[test]
fn random_span_walks_decode_as_the_model_says() {
    /// A span of the model: its name, its fields (a pooled span's from
    /// `states` at the time of a record), and its parent.
    struct Made {
        name: &'static str,
        fields: Json,
        pooled: Option<usize>,
        parent: Option<usize>,
    }
    /// Held only to be dropped, when the walk exits the span.
    #[allow(dead_code)]
    enum Guard<'a> {
        Native(nanolog::SpanGuard),
        Tracing(tracing::span::Entered<'a>),
    }
    let _g = serial();
    let path = temp("walks");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .rotate_bytes(16 << 10)
        .start()
        .unwrap();
    let mut expected = Expected::new();
    // The records whose chain is deeper than the writer follows.
    let mut cut = std::collections::HashSet::new();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let pool: Vec<tracing::Span> = (0..4u64)
            .map(|id| tracing::info_span!("pooled", id, state = tracing::field::Empty))
            .collect();
        let mut made: Vec<Made> = (0..pool.len())
            .map(|i| Made {
                name: "pooled",
                fields: json!({"id": i}),
                pooled: Some(i),
                parent: None,
            })
            .collect();
        let mut states: Vec<Option<u64>> = vec![None; pool.len()];
        // The thread's stack: (guard, span in `made`, pooled index,
        // a duplicate entry).
        let mut stack: Vec<(u64, usize, Option<usize>, bool)> = Vec::new();
        let current = |stack: &[(u64, usize, Option<usize>, bool)]| {
            stack.iter().rev().find(|e| !e.3).map(|e| e.1)
        };
        let mut guards: Vec<(u64, Option<usize>, Guard<'_>)> = Vec::new();
        let mut serial_no = 0u64;
        for k in 0..6_000u64 {
            match next(10) {
                // Enter a new native span, inside the current one.
                0 | 1 => {
                    serial_no += 1;
                    let g = nanolog::span!("native", n = k);
                    made.push(Made {
                        name: "native",
                        fields: json!({"n": k}),
                        pooled: None,
                        parent: current(&stack),
                    });
                    stack.push((serial_no, made.len() - 1, None, false));
                    guards.push((serial_no, None, Guard::Native(g)));
                }
                // Enter a pooled tracing span (again).
                2 | 3 => {
                    let i = next(pool.len() as u64) as usize;
                    serial_no += 1;
                    let duplicate = stack.iter().any(|e| e.2 == Some(i));
                    stack.push((serial_no, i, Some(i), duplicate));
                    guards.push((serial_no, Some(i), Guard::Tracing(pool[i].enter())));
                }
                // Exit any entered span (out of order too). A tracing exit
                // takes out the innermost entry of its span (as the
                // registry's stack does), whichever guard made it.
                4 | 5 if !guards.is_empty() => {
                    let j = next(guards.len() as u64) as usize;
                    let (id, t, g) = guards.remove(j);
                    let at = match t {
                        None => stack.iter().rposition(|e| e.0 == id),
                        Some(_) => stack.iter().rposition(|e| e.2 == t),
                    };
                    stack.remove(at.unwrap());
                    drop(g);
                }
                // A field recorded later: shown from now on.
                6 => {
                    let i = next(pool.len() as u64) as usize;
                    states[i] = Some(k);
                    pool[i].record("state", k);
                }
                _ => {
                    nanolog::info!("walk {}", k);
                    let mut spans = Vec::new();
                    let mut at = current(&stack);
                    while let Some(m) = at {
                        let s = &made[m];
                        let mut fields = s.fields.clone();
                        if let Some(st) = s.pooled.and_then(|i| states[i]) {
                            fields["state"] = json!(st);
                        }
                        spans.push(span(s.name, fields));
                        at = s.parent;
                    }
                    // A chain deeper than the writer follows (256 spans)
                    // is cut at its root end, and says so.
                    if spans.len() > 256 {
                        cut.insert(format!("walk {k}"));
                    }
                    spans.truncate(256);
                    spans.reverse();
                    expected.insert(format!("walk {k}"), Json::Array(spans));
                }
            }
        }
        while let Some((_, _, g)) = guards.pop() {
            drop(g);
        }
    });
    logger.flush().unwrap();
    drop(logger);
    assert!(
        !nanolog::reader::finished_files(&path).unwrap().is_empty(),
        "the set should have rolled"
    );
    let mut seen = 0;
    for l in decode_json(&path) {
        let msg = l["msg"].as_str().unwrap();
        let want = expected
            .get(msg)
            .unwrap_or_else(|| panic!("unexpected {msg:?}"));
        assert_eq!(&l["spans"], want, "spans of {msg:?}");
        let lost = l.get("spans_lost") == Some(&json!(true));
        assert_eq!(lost, cut.contains(msg), "spans_lost of {msg:?}");
        seen += 1;
    }
    assert_eq!(seen, expected.len());
    assert!(!cut.is_empty(), "some chains are deeper than 256 spans");
    remove_with_kept(&path);
}

/// `OnFull::Drop` with a ring far too small, inside spans entered and
/// exited around every record: `Stats::dropped` and the file's gaps count
/// the logging calls only (span entries and switches lost are counted in
/// `context_lost`), and no record is ever shown in a span it was not in,
/// or with a stale span; a record whose span's entry was lost shows the
/// spans around it that the file has.
#[test]
fn drops_inside_spans_count_calls_and_never_show_wrong_spans() {
    let _g = serial();
    let path = temp("span-drops");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(4096)
        .on_full(nanolog::OnFull::Drop)
        .start()
        .unwrap();
    const N: u64 = 100_000;
    let mut calls = 0u64;
    for i in 0..N {
        let _a = nanolog::span!("outer", i);
        nanolog::info!("outer {}", i);
        {
            let _b = nanolog::span!("inner", j = i);
            nanolog::info!("inner {}", i);
        }
        nanolog::info!("again {}", i);
        calls += 3;
    }
    nanolog::info!("outside");
    calls += 1;
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert!(
        stats.dropped > 0,
        "the ring should have overflowed: {stats:?}"
    );
    assert_eq!(stats.logged + stats.dropped, calls, "{stats:?}");

    let (mut records, mut gaps, mut whole) = (0u64, 0u64, 0u64);
    for l in decode_json(&path) {
        if let Some(d) = l.get("dropped").and_then(Json::as_u64) {
            gaps += d;
            continue;
        }
        records += 1;
        let msg = l["msg"].as_str().unwrap();
        let (what, i) = msg.split_once(' ').unwrap_or((msg, ""));
        let outer = span("outer", json!({"i": i.parse::<u64>().unwrap_or(0)}));
        let inner = span("inner", json!({"j": i.parse::<u64>().unwrap_or(0)}));
        let truth = match what {
            "outer" | "again" => vec![outer],
            "inner" => vec![outer, inner],
            _ => vec![],
        };
        // The spans shown are the true ones, or those of them whose
        // entries the file has, in order: never another span.
        let shown = l["spans"].as_array().unwrap();
        let mut t = truth.iter();
        for s in shown {
            assert!(
                t.any(|x| x == s),
                "{msg:?} shows {shown:?}, it is in {truth:?}"
            );
        }
        whole += u64::from(shown.len() == truth.len());
    }
    assert_eq!(records, stats.logged);
    assert_eq!(gaps, stats.dropped, "the file's gaps count calls");
    // Most records have their spans whole: a span entry is lost only in a
    // run of drops.
    assert!(
        whole * 2 > records,
        "{whole} of {records} records with all their spans ({stats:?})"
    );
    remove_with_kept(&path);
}

/// A span entered before the logger started, and still entered across a
/// restart: every record made in it, in either run, carries it.
#[test]
fn spans_entered_before_a_start_or_restart_stay_on_later_records() {
    let _g = serial();
    let path = temp("restart-spans");
    remove_with_kept(&path);
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        let long = tracing::info_span!("long", id = 1u64);
        let _e = long.enter();
        let logger = nanolog::Logger::builder().path(&path).start().unwrap();
        tracing::info!("first run");
        drop(logger);
        let logger = nanolog::Logger::builder().path(&path).start().unwrap();
        tracing::info!("second run");
        nanolog::info!("native second run");
        drop(logger);
    });
    let lines = decode_json(&path);
    let got: Vec<(&str, &Json)> = lines
        .iter()
        .map(|l| (l["msg"].as_str().unwrap(), &l["spans"]))
        .collect();
    let long = json!([span("long", json!({"id": 1}))]);
    assert_eq!(
        got,
        [
            ("first run", &long),
            ("second run", &long),
            ("native second run", &long)
        ]
    );
    remove_with_kept(&path);
}

/// A record that cannot use its thread's ring (logged by a thread-local
/// destructor that runs after the ring's own) goes through the shared
/// fallback ring, and still carries its thread's spans.
#[test]
fn records_through_the_fallback_ring_carry_their_spans() {
    struct Late;
    impl Drop for Late {
        fn drop(&mut self) {
            nanolog::info!("from a late destructor");
        }
    }
    thread_local! {
        static LATE: Late = const { Late };
    }
    let _g = serial();
    let path = temp("fallback-spans");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    // Two threads in turn, in other spans: the fallback ring they share
    // must not carry the first one's context into the second's record.
    for (name, n) in [("outer", 1u8), ("other", 2u8)] {
        std::thread::spawn(move || {
            // Registered before the ring's: destroyed after it.
            LATE.with(|_| {});
            let s = if n == 1 {
                nanolog::span!("outer", n)
            } else {
                nanolog::span!("other", n)
            };
            nanolog::info!("in the thread {}", n);
            // Still entered when the thread ends.
            std::mem::forget(s);
            let _ = name;
        })
        .join()
        .unwrap();
    }
    nanolog::info!("outside");
    logger.flush().unwrap();
    drop(logger);
    let lines = decode_json(&path);
    let get = |m: &str| {
        lines
            .iter()
            .find(|l| l["msg"] == m)
            .unwrap_or_else(|| panic!("no {m:?} in {lines:?}"))
    };
    let outer = json!([span("outer", json!({"n": 1}))]);
    let other = json!([span("other", json!({"n": 2}))]);
    let late: Vec<&Json> = lines
        .iter()
        .filter(|l| l["msg"] == "from a late destructor")
        .collect();
    assert_eq!(late.len(), 2, "{lines:?}");
    let inside = get("in the thread 1");
    // It did go through the fallback ring: a thread of its own in the file.
    assert_ne!(late[0]["thread"], inside["thread"]);
    assert_eq!(late[0]["spans"], outer);
    assert_eq!(late[1]["spans"], other);
    assert_eq!(inside["spans"], outer);
    assert_eq!(get("in the thread 2")["spans"], other);
    assert_eq!(get("outside")["spans"], json!([]));
    remove_with_kept(&path);
}

/// README "Trace context" without the OpenTelemetry SDK: a service that propagates
/// context itself records `trace_id` and `span_id` (and `trace_flags`) as
/// span fields; every record inside such a span carries the ids of the
/// innermost one (JSON `trace_id`, `span_id`), records outside have none,
/// text lines are unchanged, `--trace` picks one trace's records, and
/// `export` has the same ids in its JSON lines and Parquet columns (read
/// back by DuckDB where it is installed).
#[test]
fn records_in_spans_with_w3c_ids_carry_them_and_decode_trace_picks_them() {
    const T1: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const S1: &str = "00f067aa0ba902b7";
    const S1B: &str = "53995c3f42cd8ad8";
    const T2: &str = "0af7651916cd43dd8448eb211c80319c";
    const S2: &str = "b7ad6b7169203331";
    let _g = serial();
    let path = temp("trace-ids");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        nanolog::info!("before any trace");
        // A request of trace 1, its ids as an incoming traceparent gives
        // them (upper case, as some propagators write them).
        let r1 = tracing::info_span!(
            "request",
            trace_id = T1.to_uppercase().as_str(),
            span_id = S1,
            trace_flags = "01"
        );
        {
            let _e = r1.enter();
            tracing::info!("t1 in request");
            // A child without ids of its own: the request's.
            let _db = tracing::info_span!("db", table = "users").entered();
            tracing::info!("t1 in db");
            // A child with a span id of its own: the innermost wins.
            let _c = tracing::info_span!("call", trace_id = T1, span_id = S1B).entered();
            nanolog::info!("t1 in call");
        }
        // Another trace on another thread, unsampled.
        std::thread::spawn(|| {
            let d = tracing::Dispatch::new(
                tracing_subscriber::registry().with(nanolog::tracing_layer()),
            );
            tracing::dispatcher::with_default(&d, || {
                let _r =
                    tracing::info_span!("request", trace_id = T2, span_id = S2, trace_flags = 0u8)
                        .entered();
                tracing::info!("t2 in request");
            });
        })
        .join()
        .unwrap();
        // Not ids: one alone, a short one.
        let _bad = tracing::info_span!("half", trace_id = T1, span_id = "12ab").entered();
        tracing::info!("in a span with bad ids");
    });
    logger.flush().unwrap();
    drop(logger);

    let ids = |l: &Json| {
        (
            l.get("trace_id").and_then(Json::as_str).map(str::to_owned),
            l.get("span_id").and_then(Json::as_str).map(str::to_owned),
        )
    };
    let mut seen = HashMap::new();
    for l in decode_json(&path) {
        seen.insert(l["msg"].as_str().unwrap().to_owned(), ids(&l));
    }
    let some = |t: &str, s: &str| (Some(t.to_owned()), Some(s.to_owned()));
    assert_eq!(seen["before any trace"], (None, None));
    assert_eq!(seen["t1 in request"], some(T1, S1));
    assert_eq!(seen["t1 in db"], some(T1, S1));
    assert_eq!(seen["t1 in call"], some(T1, S1B));
    assert_eq!(seen["t2 in request"], some(T2, S2));
    assert_eq!(seen["in a span with bad ids"], (None, None));

    // Text lines are as they were: the ids are the span's fields.
    let files = set(&path);
    let text = common::ok(&["decode", &files[0]]);
    assert!(text.contains(&format!("request{{trace_id=\"{}\"", T1.to_uppercase())));
    assert!(!text.contains("\"trace_id\":"));

    // --trace: one trace's records, in any case, with other filters.
    let msgs = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["decode", "--format", "json"];
        args.extend_from_slice(extra);
        args.push(&files[0]);
        common::ok(&args)
            .lines()
            .map(|l| {
                serde_json::from_str::<Json>(l).unwrap()["msg"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(
        msgs(&["--trace", T1]),
        ["t1 in request", "t1 in db", "t1 in call"]
    );
    assert_eq!(msgs(&["--trace", &T2.to_uppercase()]), ["t2 in request"]);
    assert_eq!(msgs(&["--trace", T1, "--grep", "db"]), ["t1 in db"]);
    assert_eq!(msgs(&["--trace", T1, "-n", "1"]), ["t1 in call"]);
    assert_eq!(
        msgs(&["--trace", T1, "--limit", "2"]),
        ["t1 in request", "t1 in db"]
    );
    let bad = common::run(&["decode", "--trace", "xyz", &files[0]]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--trace"));

    // export: JSON lines with the same keys; Parquet columns.
    let dir = common::fresh_dir("trace-ids", "export");
    let jsonl = dir.join("out.jsonl");
    common::ok(&[
        "export",
        "--format",
        "jsonl",
        "--output",
        jsonl.to_str().unwrap(),
        "--trace",
        T1,
        &files[0],
    ]);
    let lines: Vec<Json> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines.iter().all(|l| l["trace_id"] == T1));
    #[cfg(feature = "parquet")]
    {
        let pq = dir.join("out.parquet");
        common::ok(&[
            "export",
            "--format",
            "parquet",
            "--output",
            pq.to_str().unwrap(),
            &files[0],
        ]);
        let has_duckdb = std::process::Command::new("python3")
            .args(["-c", "import duckdb"])
            .output()
            .is_ok_and(|o| o.status.success());
        if has_duckdb {
            let script = format!(
                "import duckdb\n\
                 rows = duckdb.sql(\"SELECT msg, trace_id, span_id FROM '{}' ORDER BY ts\").fetchall()\n\
                 for r in rows: print('|'.join('' if v is None else v for v in r))",
                pq.display()
            );
            let o = std::process::Command::new("python3")
                .args(["-c", &script])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let got = String::from_utf8(o.stdout).unwrap();
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                [
                    "before any trace||".to_owned(),
                    format!("t1 in request|{T1}|{S1}"),
                    format!("t1 in db|{T1}|{S1}"),
                    format!("t1 in call|{T1}|{S1B}"),
                    format!("t2 in request|{T2}|{S2}"),
                    "in a span with bad ids||".to_owned(),
                ]
            );
        } else if std::env::var_os("NANOLOG_REQUIRE_DUCKDB").is_some() {
            panic!("NANOLOG_REQUIRE_DUCKDB is set and python3 cannot import duckdb");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    remove_with_kept(&path);
}

/// `decode --trace` of finished files reads only the writes whose INDEX
/// entries name a context of that trace (the contexts looked up in each
/// file's SPAN entries first), and prints what the whole decode prints of
/// it: requests of their own traces, a write each, across a rolled set,
/// with children spans without ids or with ids that are not ids (their
/// request's trace) and records outside any trace between them.
#[test]
fn one_traces_records_are_read_from_its_writes_only() {
    let _g = serial();
    let path = temp("trace-index");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .rotate_bytes(64 << 10)
        .start()
        .unwrap();
    let traces: Vec<String> = (1..=40u128)
        .map(|i| {
            format!(
                "{:032x}",
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
            )
        })
        .collect();
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        for (i, t) in traces.iter().enumerate() {
            let span_id = format!("{:016x}", i + 1);
            let request = tracing::info_span!(
                "request",
                trace_id = t.as_str(),
                span_id = span_id.as_str(),
                n = i
            );
            {
                let _e = request.enter();
                for k in 0..100 {
                    tracing::info!(k, "in request");
                    let _db = tracing::info_span!("db", k).entered();
                    tracing::info!("in db");
                }
                // Ids that are not ids: the request's trace holds its record
                // (and the writer names this span for it), in a write of its
                // own.
                logger.flush().unwrap();
                let _half =
                    tracing::info_span!("half", trace_id = "zz", span_id = "12ab").entered();
                tracing::info!("in half");
            }
            for k in 0..300 {
                tracing::info!(k, "between requests");
            }
            logger.flush().unwrap();
        }
    });
    drop(logger);
    let files = set(&path);
    assert!(files.len() >= 2, "{files:?}");
    let with = |extra: &[&str]| {
        let mut args = vec!["decode", "--format", "json"];
        args.extend_from_slice(extra);
        args.extend(files.iter().map(String::as_str));
        String::from_utf8(succeed(&args).stdout).unwrap()
    };
    let all = with(&[]);
    for t in [&traces[0], &traces[17], &traces[39]] {
        let key = format!("\"trace_id\":\"{t}\"");
        let want: Vec<&str> = all.lines().filter(|l| l.contains(&key)).collect();
        assert_eq!(want.len(), 201, "{t}");
        let got = with(&["--trace", t]);
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "--trace {t}");
    }
    // What the reader leaves out: the writes of the other requests.
    let mut read = 0;
    let mut whole = 0;
    for f in &files {
        let head =
            nanolog::reader::LogFile::open_for(f, &nanolog::reader::Want::nothing()).unwrap();
        let mut want = nanolog::reader::Want::default();
        let trace = nanolog::reader::TraceContext::parse_trace_id(&traces[17]).unwrap();
        want.contexts = Some(head.contexts_in_trace(trace));
        read += nanolog::reader::LogFile::open_for(f, &want)
            .unwrap()
            .extent_count();
        whole += nanolog::reader::LogFile::open(f).unwrap().extent_count();
    }
    assert!(read * 5 < whole, "{read} of {whole} extents read");
    remove_with_kept(&path);
}
