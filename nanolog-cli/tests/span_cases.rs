//! The span cases where nanolog once differed from tracing (issue #45),
//! checked against tracing-subscriber's own text formatter in the same
//! registry (it prints an event's scope as `Context::event_scope` gives
//! it: the explicit parent, else the registry's current span). Each event
//! has a unique `seq` field; nanolog's decoded text line and fmt's line of
//! the same event must be equal from the spans on:
//! `outer{a=1}:inner{b="x"}: message seq=7`.
//!
//! - An event with an explicit parent (or `parent: None`) as its thread's
//!   first record, on several threads, inside a span of the thread or not.
//! - A span entered again while entered (A, then B, then A): B stays
//!   current, and a span made there is B's child; sync, and a future
//!   `.instrument(a.clone())` awaited inside B.
//! - Span fields of every kind (`%display`, `?debug`, strings, numbers,
//!   bools) and a value recorded later into an `Empty` one: the layer keeps
//!   a span's fields encoded only, and decodes them again for a recorded
//!   value. (A field recorded again is not compared: fmt appends the new
//!   value after the old one, `port=5432 .. port="x"`, where nanolog shows
//!   the field's value, as tracing's `Span::record` means it; those events
//!   carry `own=N` and are checked against the lines below.)
//! - A scoped dispatcher (`with_default`, `set_default`) beside the global
//!   one, both with nanolog's layer, spans of both entered on one thread
//!   (their ids collide: each registry numbers from 1): each subscriber's
//!   events show its own spans only.
//!
//! Its own test binary: it sets the process's global default.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod common;
use common::{ok, p, Captured};

static SEQ: AtomicU64 = AtomicU64::new(1);

fn seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// A registry with nanolog's layer and fmt's text layer into `w`.
fn subscriber(w: Captured) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::registry()
        .with(nanolog::tracing_layer())
        .with(
            tracing_subscriber::fmt::layer()
                .without_time()
                .with_ansi(false)
                .with_target(false)
                .with_writer(move || w.clone()),
        )
}

/// Explicit parents as each thread's first record.
fn explicit_first(threads: u64) {
    let p = tracing::info_span!("p", n = 1u64);
    let q = tracing::info_span!(parent: &p, "q", m = 2u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (p, q) = (p.clone(), q.clone());
            std::thread::Builder::new()
                .name(format!("first-{t}"))
                .spawn_scoped(s, move || match t % 4 {
                    0 => {
                        tracing::info!(parent: &p, seq = seq(), "explicit first");
                        tracing::info!(seq = seq(), "contextual after");
                    }
                    1 => {
                        let cur = tracing::info_span!("cur", t);
                        let _in = cur.enter();
                        tracing::info!(parent: &p, seq = seq(), "explicit first in cur");
                        tracing::info!(seq = seq(), "contextual after");
                    }
                    2 => {
                        let cur = tracing::info_span!("cur", t);
                        let _in = cur.enter();
                        tracing::info!(parent: None, seq = seq(), "no parent first in cur");
                        tracing::info!(seq = seq(), "contextual after");
                    }
                    _ => {
                        tracing::info!(parent: &q, seq = seq(), "explicit first, two deep");
                        let cur = tracing::info_span!("cur", t);
                        let _in = cur.enter();
                        tracing::info!(parent: &p, seq = seq(), "explicit again in cur");
                        tracing::info!(seq = seq(), "contextual after");
                    }
                })
                .unwrap();
        }
    });
}

/// A, then B inside it, then A again: B stays current.
fn reentered() {
    let a = tracing::info_span!("a", x = 1u64);
    let b = tracing::info_span!("b", y = 2u64);
    let _a = a.enter();
    let _b = b.enter();
    {
        let _a2 = a.enter();
        tracing::info!(seq = seq(), "a entered again inside b");
        let c = tracing::info_span!("c");
        c.in_scope(|| tracing::info!(seq = seq(), "in a span made there"));
    }
    tracing::info!(seq = seq(), "after the second entry of a");
    drop(_b);
    tracing::info!(seq = seq(), "after b");
}

/// A request's future instrumented with a clone of its span, awaited inside
/// a `db` span of the same request.
async fn instrumented_inside() {
    let req = tracing::info_span!("req", id = 7u64);
    async {
        let db = tracing::info_span!("db", table = "users");
        let _g = db.enter();
        async {
            tracing::info!(seq = seq(), "instrumented with req inside db");
            let made = tracing::info_span!("made");
            made.in_scope(|| tracing::info!(seq = seq(), "in a span made there"));
        }
        .instrument(req.clone())
        .await;
        tracing::info!(seq = seq(), "back in db");
    }
    .instrument(req.clone())
    .await;
}

/// Fields of every kind, and values recorded into them later.
fn fields_and_records() {
    #[derive(Debug)]
    struct Peer {
        #[allow(dead_code)] // read by its Debug only
        port: u16,
    }
    let host = "db-1";
    let s = tracing::info_span!(
        "conn",
        host,
        port = 5432u64,
        ratio = 0.5f64,
        delta = -3i64,
        tls = true,
        peer = ?Peer { port: 9 },
        shown = %format_args!("{}:{}", host, 7),
        rows = tracing::field::Empty,
        "quoted \"name\"" = "a \"b\"",
    );
    s.in_scope(|| tracing::info!(seq = seq(), "made"));
    s.record("rows", 3u64);
    s.in_scope(|| tracing::info!(seq = seq(), "rows recorded"));
    s.record("port", "now a string");
    s.record("tls", false);
    s.in_scope(|| tracing::info!(own = 1u64, "kinds changed"));
    let child = tracing::info_span!(parent: &s, "query", sql = %"select 1");
    child.record("sql", tracing::field::display("select 2"));
    child.in_scope(|| tracing::info!(own = 2u64, "in the child"));
}

/// More spans open at once than the layer's table of open spans holds
/// (4,096 slots; those past a full neighbourhood are kept in the registry's
/// extensions), across threads: each entered from another thread than its
/// maker's, given a value recorded later, made the parent of a span, and
/// closed in another order than it was made in.
fn many_open(n: u64) {
    let spans: Vec<tracing::Span> = (0..n)
        .map(|i| tracing::info_span!("open", i, later = tracing::field::Empty))
        .collect();
    let spans = std::sync::Arc::new(spans);
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let spans = std::sync::Arc::clone(&spans);
            std::thread::spawn(move || {
                for (i, s) in spans.iter().enumerate().skip(w as usize).step_by(2) {
                    if i % 3 == 0 {
                        s.record("later", i as u64 * 10);
                    }
                    s.in_scope(|| tracing::info!(seq = seq(), "in an open span"));
                    if i % 500 == 0 {
                        let child = tracing::info_span!(parent: s, "child", w);
                        child.in_scope(|| tracing::info!(seq = seq(), "in its child"));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // Closed from the last made to the first.
    let mut spans = std::sync::Arc::into_inner(spans).unwrap();
    while spans.pop().is_some() {}
}

/// nanolog's lines of the `own=N` events of [`fields_and_records`].
const OWN: [&str; 2] = [
    r#"conn{host="db-1" port="now a string" ratio=0.5 delta=-3 tls=false peer=Peer { port: 9 } shown=db-1:7 quoted "name"="a \"b\"" rows=3}: kinds changed own=1"#,
    r#"conn{host="db-1" port="now a string" ratio=0.5 delta=-3 tls=false peer=Peer { port: 9 } shown=db-1:7 quoted "name"="a \"b\"" rows=3}:query{sql=select 2}: in the child own=2"#,
];

/// Spans of the global and of a scoped subscriber on one thread.
fn scoped(scoped: &tracing::Dispatch) {
    let g = tracing::info_span!("global_span", g = 1u64);
    let _g = g.enter();
    tracing::info!(seq = seq(), "global before");
    tracing::dispatcher::with_default(scoped, || {
        tracing::info!(seq = seq(), "scoped, no span of its own");
        let s = tracing::info_span!("scoped_span", s = 1u64);
        let _s = s.enter();
        tracing::info!(seq = seq(), "scoped in its span");
    });
    tracing::info!(seq = seq(), "global after with_default");
    // A scoped span still entered after its guard is dropped.
    let guard = tracing::dispatcher::set_default(scoped);
    let s2 = tracing::info_span!("scoped_two", s = 2u64).entered();
    tracing::info!(seq = seq(), "scoped in scoped_two");
    drop(guard);
    tracing::info!(seq = seq(), "global while scoped_two is entered");
    let g2 = tracing::info_span!("global_two", g = 2u64);
    g2.in_scope(|| tracing::info!(seq = seq(), "global in global_two"));
    drop(s2);
    tracing::info!(seq = seq(), "global at the end");
}

/// `seq` -> the line from the spans on, as fmt printed it (`INFO` and the
/// padding before it taken off).
fn fmt_lines(text: &str) -> HashMap<u64, String> {
    text.lines()
        .filter_map(|l| {
            let (_, s) = l.rsplit_once("seq=")?;
            let rest = l.trim_start().split_once(' ')?.1;
            Some((s.trim().parse().ok()?, rest.to_owned()))
        })
        .collect()
}

#[test]
fn span_cases_match_tracing_subscriber() {
    let path = common::fresh_dir("span-cases", "all").join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(1 << 20)
        .start()
        .unwrap();
    let global = Captured::default();
    subscriber(global.clone()).init();
    let scoped_out = Captured::default();
    let scoped_dispatch = tracing::Dispatch::new(subscriber(scoped_out.clone()));

    explicit_first(16);
    fields_and_records();
    many_open(12_000);
    std::thread::Builder::new()
        .name("reentered".into())
        .spawn(reentered)
        .unwrap()
        .join()
        .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(instrumented_inside());
    std::thread::Builder::new()
        .name("scoped".into())
        .spawn(move || scoped(&scoped_dispatch))
        .unwrap()
        .join()
        .unwrap();

    logger.flush().unwrap();
    drop(logger);
    let mut want = fmt_lines(&global.text());
    let scoped_lines = fmt_lines(&scoped_out.text());
    let n_scoped = scoped_lines.len();
    want.extend(scoped_lines);
    assert!(n_scoped >= 3, "the scoped subscriber printed its events");
    let events = SEQ.load(Ordering::Relaxed) - 1;
    assert_eq!(want.len() as u64, events, "fmt printed every event once");

    let text = ok(&["decode", p(&path)]);
    let mut compared = 0;
    let mut differ = Vec::new();
    let mut own = Vec::new();
    for line in text.lines() {
        if line.contains(" own=") {
            own.push(line.split_once("]: ").unwrap().1);
        }
        let Some((_, s)) = line.rsplit_once("seq=") else {
            continue;
        };
        let s: u64 = s.trim().parse().unwrap();
        let ours = line.split_once("]: ").unwrap().1;
        if ours != want[&s] {
            differ.push(format!("nanolog: {ours}\n    fmt: {}", want[&s]));
        }
        compared += 1;
    }
    assert!(
        differ.is_empty(),
        "{} of {events} events differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert_eq!(compared, events, "nanolog wrote every event once");
    assert_eq!(own, OWN, "a field recorded again shows its new value, once");
}
