//! `nanolog ship` (README "Shipping") against a collector stand-in on 127.0.0.1:
//! an HTTP server that decodes each request body with the official OTLP
//! definitions (the `opentelemetry-proto` crate) and answers as it is told
//! (200, 429, 503, or a dropped connection). What it accepted is compared
//! with `nanolog decode` of the same files.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use serde_json::Value as Json;

mod common;
use common::SpawnReaped;

#[path = "common/collector.rs"]
mod collector;

use collector::{attrs, Answer, Collector, Got};

use common::{p, serial, ship, shipped, stderr_of, succeed, wait, BIN};

fn dir(name: &str) -> PathBuf {
    common::fresh_dir("ship", name)
}

/// A set at `d/app.nlog` rolled every `rotate` bytes, `rec 0` to
/// `rec N-1` in it; its live path.
fn rolled_set(d: &Path, rotate: u64, n: u64) -> PathBuf {
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(rotate)
        .start()
        .unwrap();
    for i in 0..n {
        nanolog::info!("rec {}", i);
    }
    drop(logger);
    base
}

/// The set at `base`: finished files, oldest first, then the live one.
fn whole_set(base: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = nanolog_runtime::finished_files(base)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    if base.exists() {
        v.push(base.to_path_buf());
    }
    v
}

/// `decode --format json` of the whole set at `base`.
fn decoded(base: &Path) -> Vec<Json> {
    let set = whole_set(base);
    let mut args = vec!["decode", "--format", "json"];
    args.extend(set.iter().map(|f| p(f)));
    common::stdout(&succeed(&args))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each record's message and time (`ts_ns`) in `decode --format json` of
/// the whole set at `base` (its messages unique).
fn decoded_times(base: &Path) -> std::collections::HashMap<String, u64> {
    decoded(base)
        .iter()
        .map(|v| {
            (
                v["msg"].as_str().unwrap().to_owned(),
                v["ts_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn int(v: &Option<V>) -> i64 {
    match v {
        Some(V::IntValue(i)) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

fn string(v: &Option<V>) -> &str {
    match v {
        Some(V::StringValue(s)) => s,
        other => panic!("not a string: {other:?}"),
    }
}

/// Every record of a rolled set arrives once, in the mapping of §13: the
/// resource, severity, body, the code and thread attributes, every named
/// field with its type, the spans, and the time to the nanosecond.
#[test]
fn every_record_of_a_rolled_set_arrives_once_typed_and_timed_to_the_nanosecond() {
    let _s = serial();
    let d = dir("set");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(16 << 10)
        .level(nanolog::Level::Trace)
        .start()
        .unwrap();
    std::thread::Builder::new()
        .name("orders".into())
        .spawn(|| {
            for i in 0..20_000u64 {
                if i % 1000 == 0 {
                    let _span = nanolog::span!("batch", n = i / 1000);
                    nanolog::warn!(target: "audit", "batch {n} opened", n = i / 1000);
                }
                nanolog::info!(
                    "order {id} side {side} px {px} ok {ok}",
                    id = i,
                    side = "buy",
                    px = i as f64 / 4.0,
                    ok = i % 2 == 0
                );
            }
        })
        .unwrap()
        .join()
        .unwrap();
    drop(logger);
    let set = whole_set(&base);
    assert!(set.len() > 3, "the writer rolled only {} times", set.len());

    let c = Collector::start();
    let (status, err) = shipped(
        &[
            "--endpoint",
            &c.endpoint(),
            "--service",
            "checkout",
            "--once",
            p(&base),
        ],
        120,
        "ship --once",
    );
    assert!(status.success(), "ship failed: {err}");
    assert!(err.contains("shipped 20020 records"), "{err}");

    let want = decoded(&base);
    let mut got = c.records();
    assert_eq!(got.len(), want.len(), "records received");
    // Batches may come in any order; records are matched by time and body.
    got.sort_by(|a, b| (a.time_ns, &a.body).cmp(&(b.time_ns, &b.body)));
    let mut want: Vec<&Json> = want.iter().collect();
    want.sort_by(|a, b| {
        (a["ts_ns"].as_i64(), a["msg"].as_str()).cmp(&(b["ts_ns"].as_i64(), b["msg"].as_str()))
    });
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            g.time_ns as i64,
            w["ts_ns"].as_i64().unwrap(),
            "{g:?} vs {w}"
        );
        assert_eq!(g.body, w["msg"].as_str().unwrap());
        assert_eq!(g.severity_text, w["level"].as_str().unwrap());
        let sev = match g.severity_text.as_str() {
            "INFO" => 9,
            "WARN" => 13,
            other => panic!("level {other}"),
        };
        assert_eq!(g.severity, sev);
        assert_eq!(string(&g.resource["service.name"]), "checkout");
        assert_eq!(string(&g.resource["host.name"]), host.trim());
        assert_eq!(
            int(&g.resource["process.pid"]),
            i64::from(std::process::id())
        );
        assert_eq!(
            string(&g.attrs["code.filepath"]),
            w["file"].as_str().unwrap()
        );
        assert_eq!(int(&g.attrs["code.lineno"]), w["line"].as_i64().unwrap());
        assert_eq!(int(&g.attrs["thread.id"]), w["thread"].as_i64().unwrap());
        assert_eq!(string(&g.attrs["thread.name"]), "orders");
        assert_eq!(string(&g.attrs["target"]), w["target"].as_str().unwrap());
        if g.severity == 9 {
            let fields = &w["fields"];
            assert_eq!(int(&g.attrs["id"]), fields["id"].as_i64().unwrap());
            assert_eq!(string(&g.attrs["side"]), "buy");
            assert_eq!(
                g.attrs["px"],
                Some(V::DoubleValue(fields["px"].as_f64().unwrap()))
            );
            assert_eq!(
                g.attrs["ok"],
                Some(V::BoolValue(fields["ok"].as_bool().unwrap()))
            );
            assert!(!g.attrs.contains_key("spans"), "{g:?}");
        } else {
            // The warning is made inside `batch{n=..}`.
            let n = int(&g.attrs["n"]);
            let Some(V::ArrayValue(spans)) = &g.attrs["spans"] else {
                panic!("no spans: {g:?}")
            };
            let [span] = spans.values.as_slice() else {
                panic!("{spans:?}")
            };
            let Some(V::KvlistValue(kv)) = &span.value else {
                panic!("{span:?}")
            };
            let span = attrs(&kv.values);
            assert_eq!(string(&span["name"]), "batch");
            let Some(V::KvlistValue(fields)) = &span["fields"] else {
                panic!("{span:?}")
            };
            assert_eq!(int(&attrs(&fields.values)["n"]), n);
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A tiny xorshift: the kill points, reproducible from the seed printed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Records whose spans were lost to damage (a bit flipped in a plain log's
/// first SPAN entry) arrive with `spans_lost = true`, as many as `decode`
/// marks; the others with their span and without the attribute.
#[test]
fn records_whose_spans_were_lost_arrive_marked() {
    let _s = serial();
    let d = dir("spans-lost");
    let base = d.join("app.nlog");
    common::log_with_a_lost_span_entry(&base);
    let marked = decoded(&base)
        .iter()
        .filter(|l| l["spans_lost"] == serde_json::json!(true))
        .count();
    assert!((1..=100).contains(&marked), "{marked} records marked");

    let c = Collector::start();
    let (status, err) = shipped(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        60,
        "ship",
    );
    assert!(status.success(), "ship failed: {err}");
    // (The damage arrives as a record of its own: `nanolog.corrupt_bytes`.)
    let got: Vec<Got> = c
        .records()
        .into_iter()
        .filter(|r| r.body.starts_with("served "))
        .collect();
    assert_eq!(got.len(), 300);
    let lost: Vec<&Got> = got
        .iter()
        .filter(|r| r.attrs.get("spans_lost") == Some(&Some(V::BoolValue(true))))
        .collect();
    assert_eq!(lost.len(), marked);
    for r in &got {
        let has_span =
            matches!(r.attrs.get("spans"), Some(Some(V::ArrayValue(a))) if !a.values.is_empty());
        assert_eq!(has_span, !lost.iter().any(|l| std::ptr::eq(*l, r)), "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `ship` killed with SIGKILL at 20 random points and started again with
/// its cursor: the union of what the collector accepted is every record of
/// the set, and a record arrives twice only in a batch the collector
/// accepted but the killed ship had not seen accepted (one batch per kill
/// at most; the same batch sent again whole).
#[test]
fn ship_killed_at_random_points_resumes_from_its_cursor_and_loses_nothing() {
    let _s = serial();
    let d = dir("kills");
    let base = d.join("app.nlog");
    let cursor = d.join("ship.cursor");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(64 << 10)
        .start()
        .unwrap();
    for i in 0..200_000u64 {
        nanolog::info!("rec {}", i);
    }
    drop(logger);
    let total = 200_000usize;

    let c = Collector::start();
    // A collector that takes its time, so that kills land mid-stream.
    c.state.lock().unwrap().delay = Duration::from_millis(3);
    let endpoint = c.endpoint();
    let args = [
        "--endpoint",
        &endpoint,
        "--cursor",
        p(&cursor),
        "--batch-kib",
        "4",
        "--once",
        p(&base),
    ];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill points seeded with {seed}");
    let mut rng = Rng(seed);
    let mut kills = 0;
    let mut runs = 0;
    while kills < 20 && runs < 200 {
        runs += 1;
        let mut child = ship(&args);
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        let _ = child.wait();
        if c.count() >= total + 20 * 2000 {
            break;
        }
    }
    // The last run goes to the end.
    let mut child = ship(&args);
    let status = wait(&mut child, 120, "the last ship");
    let err = stderr_of(&mut child);
    assert!(status.success(), "{err}");

    let batches = c.state.lock().unwrap().accepted.clone();
    let mut seen = std::collections::HashSet::new();
    let mut repeated_batches = 0;
    let mut duplicates = 0;
    for b in &batches {
        let fresh = b.iter().filter(|g| seen.insert(g.body.clone())).count();
        if fresh < b.len() {
            // A batch sent again is sent whole, not a part of one.
            assert_eq!(fresh, 0, "a batch partly sent before");
            repeated_batches += 1;
            duplicates += b.len();
        }
    }
    eprintln!("{kills} kills in {runs} runs: {repeated_batches} batches ({duplicates} records) sent twice");
    assert!(kills >= 10, "only {kills} kills landed in {runs} runs");
    assert!(
        repeated_batches <= kills,
        "{repeated_batches} batches repeated by {kills} kills"
    );
    let want: std::collections::HashSet<String> = decoded(&base)
        .iter()
        .map(|j| j["msg"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(want.len(), total);
    assert_eq!(seen, want, "the union of what the collector accepted");
    let _ = std::fs::remove_dir_all(&d);
}

/// A collector that is down, then answers 503, 429 and drops a connection
/// loses nothing: ship tries again (with backoff) until it is accepted.
/// A status that is not retryable (400) stops ship with an error naming it.
#[test]
fn a_collector_down_then_refusing_for_a_while_loses_nothing() {
    let _s = serial();
    let d = dir("down");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..5_000u64 {
        nanolog::info!("rec {}", i);
    }
    drop(logger);

    // A port with nothing listening on it yet.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut child = ship(&[
        "--endpoint",
        &endpoint,
        "--max-backoff",
        "300ms",
        "--batch-kib",
        "4",
        "--once",
        p(&base),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(child.try_wait().unwrap().is_none(), "ship gave up");
    let c = Collector::serve(TcpListener::bind(("127.0.0.1", port)).unwrap());
    c.script(&[
        Answer::Status(503),
        Answer::Status(503),
        Answer::Drop,
        Answer::Status(429),
        Answer::Status(502),
    ]);
    let status = wait(&mut child, 60, "ship against a refusing collector");
    let err = stderr_of(&mut child);
    assert!(status.success(), "{err}");
    assert!(err.contains("503"), "{err}");
    assert!(err.contains("429"), "{err}");
    assert!(
        err.contains("Connection refused") || err.contains("onnect"),
        "{err}"
    );
    let got = c.records();
    assert_eq!(got.len(), 5_000, "{err}");
    let mut bodies: Vec<String> = got.into_iter().map(|g| g.body).collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 5_000, "duplicates");
    assert!(c.state.lock().unwrap().requests >= 6);

    // 400: a permanent error, named.
    let c = Collector::start();
    c.script(&[Answer::Status(400)]);
    let (status, err) = shipped(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        60,
        "ship against a 400",
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("refused a batch: 400"), "{err}");
    assert_eq!(c.count(), 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// Run by `ship_follows_a_writer_that_rolls_and_restarts` in a child
/// process: one run of a writer that rolls every 32 KiB.
#[test]
#[ignore = "run in a child process by another test"]
fn child_rolling_writer() {
    let (Some(path), Ok(run)) = (
        std::env::var_os("NANOLOG_SHIP_CHILD_LOG"),
        std::env::var("NANOLOG_SHIP_CHILD_RUN"),
    ) else {
        return;
    };
    let logger = nanolog::Logger::builder()
        .path(&path)
        // 30,000 records compressed (deflate, as the flusher idles between
        // bursts): more than two files a run.
        .rotate_bytes(8 << 10)
        .start()
        .unwrap();
    for i in 0..CHILD_RECORDS {
        nanolog::info!("run {} rec {}", run.as_str(), i);
        if i % 5_000 == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(logger);
}

const CHILD_RECORDS: u64 = 30_000;

/// `ship` following a log whose writer rolls and is restarted (three runs)
/// sends every record of every run once.
#[test]
fn ship_follows_a_writer_that_rolls_and_restarts() {
    let d = dir("follow");
    let base = d.join("app.nlog");
    let cursor = d.join("ship.cursor");
    let c = Collector::start();
    let mut shipper = ship(&[
        "--endpoint",
        &c.endpoint(),
        "--cursor",
        p(&cursor),
        "--stats-every",
        "200ms",
        p(&base),
    ]);
    std::thread::sleep(Duration::from_millis(500));
    for run in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_rolling_writer", "--ignored"])
            .env("NANOLOG_SHIP_CHILD_LOG", &base)
            .env("NANOLOG_SHIP_CHILD_RUN", run.to_string())
            .stdout(Stdio::null())
            .spawn_reaped();
        let status = wait(&mut child, 60, "a writer run");
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    let total = 3 * CHILD_RECORDS as usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.count() < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything more would be a duplicate.
    std::thread::sleep(Duration::from_millis(500));
    let _ = shipper.kill();
    let _ = shipper.wait();
    let err = stderr_of(&mut shipper);
    assert!(
        nanolog_runtime::finished_files(&base).unwrap().len() > 6,
        "the writer did not roll enough"
    );
    let got = c.records();
    let mut per_run = [0usize; 3];
    let mut bodies = std::collections::HashSet::new();
    for g in &got {
        let run: usize = g.body.split(' ').nth(1).unwrap().parse().unwrap();
        per_run[run] += 1;
        assert!(bodies.insert(g.body.clone()), "twice: {}", g.body);
    }
    assert_eq!(got.len(), total, "per run {per_run:?}; stderr: {err}");
    // Its progress lines: what it sent, and how far behind it was.
    assert!(err.contains("records in"), "{err}");
    assert!(err.contains("behind the live file by"), "{err}");
}

/// The README's "Shipping" command lines, run as written (the collector's
/// address swapped for the stand-in's): the `--once` line ships the log and
/// exits 0; the following line ships it too, keeps its cursor and prints
/// its progress.
#[test]
fn the_readme_shipping_lines_run_as_written() {
    let readme = include_str!("../../README.md");
    let at = readme.find("## Shipping").expect("the README's section");
    let block = &readme[at..];
    let start = block.find("```sh\n").expect("its sh block") + 6;
    let end = start + block[start..].find("```").expect("the block's end");
    let lines: Vec<&str> = block[start..end]
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or("").trim())
        .filter(|l| l.starts_with("nanolog ship "))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");

    let _s = serial();
    let d = dir("readme");
    let logger = nanolog::Logger::builder()
        .path(d.join("app.nlog"))
        .start()
        .unwrap();
    for i in 0..1_000u64 {
        nanolog::info!("took {} ms", i);
    }
    drop(logger);
    for line in lines {
        let c = Collector::start();
        let endpoint = c.endpoint();
        let words: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|w| w.replace("http://localhost:4318", &endpoint))
            .collect();
        let mut child = Command::new(BIN)
            .args(&words)
            .current_dir(&d)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn_reaped();
        if line.contains("--once") {
            let status = wait(&mut child, 60, line);
            let err = stderr_of(&mut child);
            assert!(status.success(), "{line}: {err}");
        } else {
            // Every record received, and the position saved (after the
            // collector's answer, which comes after it counted them).
            let cursor = d.join("app.cursor");
            let deadline = Instant::now() + Duration::from_secs(30);
            while (c.count() < 1_000 || !cursor.exists()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let saved = std::fs::read_to_string(&cursor).unwrap();
            assert!(saved.starts_with("nanolog-cursor-v2 "), "{saved}");
        }
        let mut got: Vec<String> = c.records().into_iter().map(|g| g.body).collect();
        got.sort_by_key(|b| b[5..].split(' ').next().unwrap().parse::<u64>().unwrap());
        let want: Vec<String> = (0..1_000).map(|i| format!("took {i} ms")).collect();
        assert_eq!(got, want, "{line}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Several logs shipped side by side, each with its own cursor (in the
/// order of the logs): every record of both once; shipped again with the
/// same cursors, nothing is sent twice. A cursor count that does not match
/// the logs is refused.
#[test]
fn several_logs_each_with_its_cursor() {
    let _s = serial();
    let d = dir("several");
    for name in ["a", "b"] {
        let logger = nanolog::Logger::builder()
            .path(d.join(format!("{name}.nlog")))
            .start()
            .unwrap();
        for i in 0..3_000u64 {
            nanolog::info!(target: "svc", "{} {}", name, i);
        }
        drop(logger);
    }
    let (a, b) = (d.join("a.nlog"), d.join("b.nlog"));
    let (ca, cb) = (d.join("a.cursor"), d.join("b.cursor"));
    let c = Collector::start();
    let endpoint = c.endpoint();
    let args = [
        "--endpoint",
        &endpoint,
        "--once",
        "--cursor",
        p(&ca),
        "--cursor",
        p(&cb),
        p(&a),
        p(&b),
    ];
    for run in 0..2 {
        let mut child = ship(&args);
        let status = wait(&mut child, 60, "ship of two logs");
        let err = stderr_of(&mut child);
        assert!(status.success(), "run {run}: {err}");
    }
    let mut bodies: Vec<String> = c.records().into_iter().map(|g| g.body).collect();
    bodies.sort();
    let mut want: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|n| (0..3_000).map(move |i| format!("{n} {i}")))
        .collect();
    want.sort();
    assert_eq!(bodies, want);
    assert!(ca.exists() && cb.exists());

    let (status, err) = shipped(
        &[
            "--endpoint",
            &endpoint,
            "--once",
            "--cursor",
            p(&ca),
            p(&a),
            p(&b),
        ],
        60,
        "ship with one cursor for two logs",
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("one --cursor per log"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Retention outrunning ship (a slow collector, a writer keeping two files
/// that rolls every 4 KiB): ship goes on with the first file left, says on
/// stderr how many files it lost, and tells the collector in a WARN record
/// with `nanolog.files_missed` and `nanolog.records_missed`; what arrives is
/// each record once, in order, and with what was counted lost makes all.
#[test]
fn retention_outrunning_ship_is_told_to_the_collector() {
    let _s = serial();
    let d = dir("outrun");
    let base = d.join("app.nlog");
    let cursor = d.join("app.cursor");
    let c = Collector::start();
    c.state.lock().unwrap().delay = Duration::from_millis(50);
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(4 << 10)
        .max_files(2)
        .start()
        .unwrap();
    nanolog::info!("rec {}", 0u64);
    logger.flush().unwrap();
    let endpoint = c.endpoint();
    let mut child = ship(&[
        "--endpoint",
        &endpoint,
        "--cursor",
        p(&cursor),
        "--batch-kib",
        "4",
        p(&base),
    ]);
    for i in 1..50_000u64 {
        nanolog::info!("rec {}", i);
        if i % 256 == 0 {
            logger.flush().unwrap();
        }
    }
    drop(logger);
    c.state.lock().unwrap().delay = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(60);
    let has_last = |c: &Collector| c.records().iter().any(|g| g.body == "rec 49999");
    while !has_last(&c) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let err = stderr_of(&mut child);
    let got = c.records();
    let recs: Vec<u64> = got
        .iter()
        .filter_map(|g| g.body.strip_prefix("rec ").and_then(|n| n.parse().ok()))
        .collect();
    assert_eq!(recs.last(), Some(&49_999), "{err}");
    assert!(recs.windows(2).all(|w| w[0] < w[1]), "each once, in order");
    assert!(recs.len() < 50_000, "retention should have outrun ship");
    let missed: i64 = got
        .iter()
        .filter(|g| g.severity_text == "WARN")
        .filter_map(|g| match g.attrs.get("nanolog.files_missed") {
            Some(Some(V::IntValue(n))) => Some(*n),
            _ => None,
        })
        .sum();
    assert!(
        missed > 0,
        "no WARN record with nanolog.files_missed; stderr: {err}"
    );
    assert!(err.contains("deleted"), "{err}");
    // Every record arrived or was counted: the files around the deleted
    // ones say how many records those held.
    let records_missed: i64 = got
        .iter()
        .filter(|g| g.severity_text == "WARN")
        .filter_map(|g| match g.attrs.get("nanolog.records_missed") {
            Some(Some(V::IntValue(n))) => Some(*n),
            _ => None,
        })
        .sum();
    assert_eq!(
        recs.len() as i64 + records_missed,
        50_000,
        "received {} and counted {records_missed} as lost; stderr: {err}",
        recs.len()
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The collector's own reason for refusing a batch (the `google.rpc.Status`
/// message it answers with) is in ship's error; the endpoint's query
/// string is kept after `/v1/logs`; credentials in it are sent as basic
/// authentication and never printed.
#[test]
fn the_collectors_reason_is_shown_and_credentials_are_not() {
    let _s = serial();
    let d = dir("reason");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..100u64 {
        nanolog::info!("rec {}", i);
    }
    drop(logger);
    let c = Collector::start();
    c.script(&[Answer::StatusWith(400, "http: request body too large")]);
    let endpoint = format!("http://ann:s3cret@127.0.0.1:{}/?tenant=blue", c.port);
    let (status, err) = shipped(
        &["--endpoint", &endpoint, "--once", p(&base)],
        60,
        "ship against a refusing collector",
    );
    assert!(!status.success());
    assert!(err.contains("http: request body too large"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    let st = c.state.lock().unwrap();
    assert_eq!(st.targets, ["/v1/logs?tenant=blue"]);
    // base64("ann:s3cret")
    assert_eq!(st.authorization.as_deref(), Some("Basic YW5uOnMzY3JldA=="));
    drop(st);
    let _ = std::fs::remove_dir_all(&d);
}

/// `--once`: a path that does not exist is an error; a collector that is
/// not there ends ship after `--give-up-after` with exit 1; a malformed
/// endpoint is refused at once; the signal-specific endpoint variable is
/// used as it is.
#[test]
fn once_is_bounded_and_endpoints_are_checked_at_start() {
    let _s = serial();
    let d = dir("once");
    let base = d.join("app.nlog");
    let o = Command::new(BIN)
        .args([
            "ship",
            "--endpoint",
            "http://127.0.0.1:9",
            "--once",
            p(&base),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such log"));

    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    nanolog::info!("rec {}", 1u64);
    drop(logger);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Instant::now();
    let (status, err) = shipped(
        &[
            "--endpoint",
            &format!("http://127.0.0.1:{port}"),
            "--once",
            "--give-up-after",
            "1s",
            "--max-backoff",
            "200ms",
            p(&base),
        ],
        30,
        "ship against no collector",
    );
    assert!(!status.success(), "{err}");
    assert!(err.contains("giving up"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20));

    let o = Command::new(BIN)
        .args(["ship", "--endpoint", "http://a b", "--once", p(&base)])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid URL"));

    let c = Collector::start();
    let o = Command::new(BIN)
        .args(["ship", "--once", p(&base)])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env(
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            format!("http://127.0.0.1:{}/custom/logs", c.port),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(c.state.lock().unwrap().targets, ["/custom/logs"]);
    assert_eq!(c.count(), 1);
    let _ = std::fs::remove_dir_all(&d);
}

/// Attribute keys are unique (OTLP requires it): a field named like one of
/// nanolog's own keys keeps its value under `field.NAME`.
#[test]
fn fields_named_like_nanologs_keys_keep_their_values_under_field_keys() {
    let _s = serial();
    let d = dir("keys");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    nanolog::info!(
        "order at {target} by {spans}",
        target = "desk",
        spans = 3u32
    );
    drop(logger);
    let c = Collector::start();
    let endpoint = c.endpoint();
    let mut child = ship(&["--endpoint", &endpoint, "--once", p(&base)]);
    let status = wait(&mut child, 60, "ship --once");
    assert!(status.success(), "{}", stderr_of(&mut child));
    let got = c.records();
    assert_eq!(got.len(), 1);
    let a = &got[0].attrs;
    let s = |k: &str| match a.get(k) {
        Some(Some(V::StringValue(v))) => v.clone(),
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(s("field.target"), "desk");
    assert_eq!(s("target"), module_path!());
    assert!(
        matches!(a.get("field.spans"), Some(Some(V::IntValue(3)))),
        "{a:?}"
    );
    assert!(!a.contains_key("spans"), "{a:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The files of one set given together, as `decode` takes a set
/// (`ship app.nlog app.*Z.nlog`), are one log: one cursor, each record once.
#[test]
fn the_files_of_one_set_given_together_are_one_log() {
    let _s = serial();
    let d = dir("oneset");
    let base = rolled_set(&d, 8 << 10, 20_000);
    let mut files = vec![base.clone()];
    files.extend(whole_set(&base).into_iter().filter(|f| *f != base));
    assert!(files.len() > 3, "{files:?}");
    let c = Collector::start();
    let endpoint = c.endpoint();
    let cursor = d.join("app.cursor");
    let mut args = vec![
        "--endpoint",
        endpoint.as_str(),
        "--once",
        "--cursor",
        p(&cursor),
    ];
    args.extend(files.iter().map(|f| p(f)));
    let mut child = ship(&args);
    let status = wait(&mut child, 60, "ship --once of a set");
    assert!(status.success(), "{}", stderr_of(&mut child));
    let mut bodies: Vec<String> = c.records().into_iter().map(|g| g.body).collect();
    let n = bodies.len();
    bodies.sort();
    bodies.dedup();
    assert_eq!(n, 20_000, "each record once");
    assert_eq!(bodies.len(), 20_000);
    let _ = std::fs::remove_dir_all(&d);
}

/// Several logs: one that cannot go on (here, its cursor is another log's)
/// ends ship with its error, naming the log, and exit 1, while the others
/// would follow forever.
#[test]
fn one_log_that_fails_ends_a_ship_of_several() {
    let _s = serial();
    let d = dir("onefails");
    let (a, b) = (d.join("a.nlog"), d.join("b.nlog"));
    for path in [&a, &b] {
        let logger = nanolog::Logger::builder().path(path).start().unwrap();
        nanolog::info!("rec {}", 1u64);
        drop(logger);
    }
    let (ca, cb) = (d.join("a.cursor"), d.join("b.cursor"));
    std::fs::write(
        &cb,
        format!(
            "nanolog-cursor-v2 1 1 0 1 {}\n",
            d.join("other.nlog").display()
        ),
    )
    .unwrap();
    let c = Collector::start();
    let endpoint = c.endpoint();
    let (status, err) = shipped(
        &[
            "--endpoint",
            &endpoint,
            "--cursor",
            p(&ca),
            "--cursor",
            p(&cb),
            p(&a),
            p(&b),
        ],
        30,
        "ship of two logs, one failing",
    );
    assert!(!status.success(), "{err}");
    assert!(err.contains("shipping") && err.contains("b.nlog"), "{err}");
    assert!(err.contains("is of the log"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A collector with a body limit (400 "request body too large", as the
/// OpenTelemetry Collector answers) and one that closes the connection on
/// large bodies: ship sends in smaller parts, every record arrives once,
/// and a record larger than the limit alone arrives cut, marked with
/// `nanolog.truncated_bytes`. Nothing after it is held up.
#[test]
fn bodies_over_the_collectors_limit_are_split_and_cut_never_stuck() {
    let _s = serial();
    let d = dir("bodies");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .staging_capacity(4 << 20)
        .start()
        .unwrap();
    for i in 0..20_000u64 {
        nanolog::info!("rec {} with some text to make the bodies larger", i);
    }
    let big = "x".repeat(300 << 10);
    nanolog::info!("big {}", big.as_str());
    nanolog::info!("after the big one");
    drop(logger);
    for (limit, close) in [(Some(64 << 10), None), (None, Some(128 << 10))] {
        let c = Collector::start();
        {
            let mut st = c.state.lock().unwrap();
            st.max_body = limit;
            st.close_over = close;
        }
        let endpoint = c.endpoint();
        let (status, err) = shipped(
            &[
                "--endpoint",
                &endpoint,
                "--once",
                "--batch-kib",
                "256",
                "--max-backoff",
                "100ms",
                p(&base),
            ],
            120,
            "ship into a collector with a body limit",
        );
        assert!(status.success(), "{err}");
        let got = c.records();
        let recs: Vec<&str> = got.iter().map(|g| g.body.as_str()).collect();
        assert_eq!(recs.len(), 20_002, "{err}");
        let mut uniq = recs.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 20_002, "each record once");
        assert_eq!(recs.last(), Some(&"after the big one"));
        let cut = got.iter().find(|g| g.body.starts_with("big ")).unwrap();
        assert!(cut.body.len() < 128 << 10, "{}", cut.body.len());
        assert!(
            matches!(cut.attrs.get("nanolog.truncated_bytes"), Some(Some(V::IntValue(n))) if *n > 300 << 10),
            "{:?}",
            cut.attrs.get("nanolog.truncated_bytes")
        );
        // Each way of refusing was met, and answered by smaller requests.
        let why = if limit.is_some() {
            "request body too large"
        } else {
            "closed the connection"
        };
        assert!(err.contains(why) && err.contains("in parts"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// SIGTERM ends a following ship cleanly: exit 0, its summary printed, the
/// cursor at the last batch accepted; started again with it, ship sends
/// the rest, and every record has arrived.
#[cfg(unix)]
#[test]
fn sigterm_saves_the_cursor_and_prints_the_summary() {
    let _s = serial();
    let d = dir("sigterm");
    let base = d.join("app.nlog");
    let cursor = d.join("app.cursor");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..5_000u64 {
        nanolog::info!("rec {}", i);
    }
    logger.flush().unwrap();
    let c = Collector::start();
    let endpoint = c.endpoint();
    let mut child = ship(&["--endpoint", &endpoint, "--cursor", p(&cursor), p(&base)]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.count() < 5_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait(&mut child, 30, "ship after SIGTERM");
    let err = stderr_of(&mut child);
    assert!(status.success(), "{err}");
    assert!(err.contains("shipped 5000 records"), "{err}");
    assert!(std::fs::read_to_string(&cursor)
        .unwrap()
        .starts_with("nanolog-cursor-v2 "));
    for i in 5_000..6_000u64 {
        nanolog::info!("rec {}", i);
    }
    drop(logger);
    let mut again = ship(&[
        "--endpoint",
        &endpoint,
        "--once",
        "--cursor",
        p(&cursor),
        p(&base),
    ]);
    let status = wait(&mut again, 30, "ship --once after SIGTERM");
    assert!(status.success(), "{}", stderr_of(&mut again));
    let mut bodies: Vec<String> = c.records().into_iter().map(|g| g.body).collect();
    assert_eq!(bodies.len(), 6_000);
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 6_000);
    let _ = std::fs::remove_dir_all(&d);
}

/// Damage in a file of the set (a flipped byte): ship says what `decode`
/// says, on stderr, and the collector gets a WARN record counting the
/// bytes skipped; the rest of the set arrives.
#[test]
fn corrupt_bytes_are_warned_and_told_to_the_collector() {
    let _s = serial();
    let d = dir("corrupt");
    // 20,000 records compressed take 30-60 KB: files of 4 KiB, and the
    // damage in the largest (its middle in a block of records, not in a
    // file's last few entries).
    let base = rolled_set(&d, 4 << 10, 20_000);
    let files = whole_set(&base);
    assert!(files.len() > 3, "{} files", files.len());
    let victim = files
        .iter()
        .max_by_key(|f| std::fs::metadata(f).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(victim).unwrap();
    // A byte in the middle of the first run of records (an EXTENT or a
    // BLOCK of them) that reaches the file's middle: not an INDEX entry or
    // a dictionary's, whose loss costs no record.
    let mut at = 48;
    let mid = loop {
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        let records = [
            nanolog_runtime::wire::tag::EXTENT,
            nanolog_runtime::wire::tag::BLOCK,
        ];
        if at + 9 + len > bytes.len() / 2 && records.contains(&bytes[at]) && len > 16 {
            break at + 9 + len / 2;
        }
        at += 9 + len;
        assert!(at + 9 <= bytes.len(), "no run of records past the middle");
    };
    bytes[mid] ^= 0xff;
    std::fs::write(victim, &bytes).unwrap();
    let decode = Command::new(BIN)
        .args(["decode", p(victim)])
        .output()
        .unwrap();
    let decode_err = String::from_utf8_lossy(&decode.stderr).into_owned();
    assert!(decode_err.contains("skipped"), "{decode_err}");

    let c = Collector::start();
    let endpoint = c.endpoint();
    let (status, err) = shipped(
        &["--endpoint", &endpoint, "--once", p(&base)],
        60,
        "ship --once of a damaged set",
    );
    assert!(status.success(), "{err}");
    assert!(
        err.contains("skipped"),
        "ship says nothing of the damage: {err}"
    );
    let got = c.records();
    let corrupt: i64 = got
        .iter()
        .filter_map(|g| match g.attrs.get("nanolog.corrupt_bytes") {
            Some(Some(V::IntValue(n))) => Some(*n),
            _ => None,
        })
        .sum();
    assert!(corrupt > 0, "no WARN record counting the damage");
    // What decode of the set reads, ship sent.
    let mut args = vec!["decode".to_owned()];
    args.extend(files.iter().map(|f| p(f).to_owned()));
    let out = Command::new(BIN).args(&args).output().unwrap();
    let decoded = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(": rec "))
        .count();
    let recs = got.iter().filter(|g| g.body.starts_with("rec ")).count();
    assert!(decoded < 20_000, "the damage should cost records");
    assert_eq!(recs, decoded);
    let _ = std::fs::remove_dir_all(&d);
}

/// At the live edge, ship holds the records after the writer's last clock
/// pair until the next one brackets them: every record it sends while
/// following has the time `decode` of the finished set prints, to the
/// nanosecond (before, records shipped at the live edge were extrapolated
/// and could differ by microseconds).
#[test]
fn times_shipped_at_the_live_edge_equal_decodes_of_the_finished_set() {
    let _s = serial();
    let d = dir("liveedge");
    let base = d.join("app.nlog");
    let c = Collector::start();
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(64 << 10)
        .start()
        .unwrap();
    nanolog::info!("rec {}", 0u64);
    logger.flush().unwrap();
    let endpoint = c.endpoint();
    let mut child = ship(&["--endpoint", &endpoint, p(&base)]);
    // Bursts with pauses: ship catches up with the live file again and again.
    for burst in 0..15u64 {
        for i in 0..400u64 {
            nanolog::info!("rec {}", 1 + burst * 400 + i);
        }
        logger.flush().unwrap();
        std::thread::sleep(Duration::from_millis(150));
    }
    drop(logger);
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.count() < 6_001 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let got = c.records();
    assert_eq!(got.len(), 6_001, "{}", stderr_of(&mut child));
    let decoded = decoded_times(&base);
    let differ = got
        .iter()
        .filter(|g| decoded.get(&g.body) != Some(&g.time_ns))
        .count();
    assert_eq!(differ, 0, "records whose shipped time is not decode's");
    let _ = std::fs::remove_dir_all(&d);
}

/// A ship that begins deep in a set (a cursor many files in) reads each
/// file by the clock pairs around its records only, not the whole set's:
/// its times are still `decode`'s of the whole set, to the nanosecond,
/// with records a ring held across rolls and a wall clock stepped back
/// before the cursor (the pairs before the step, which the shipped files
/// do not hold, are what keeps decode's times from going back).
#[test]
fn a_ship_begun_deep_in_a_set_times_records_as_decode_of_the_whole_set() {
    let _s = serial();
    let d = dir("deep");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(2 << 10)
        .start()
        .unwrap();
    // Four threads at once: a file often begins with records its rings
    // held from before the roll.
    let burst = |from: u64| {
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for i in 0..500u64 {
                        nanolog::info!("rec {}", from + t * 500 + i);
                    }
                });
            }
        });
        std::thread::sleep(Duration::from_millis(20));
    };
    for b in 0..10 {
        burst(b * 2_000);
    }
    // Stepped back further than the run has lasted: decode's times after
    // the step are held at the latest time before it.
    nanolog_runtime::clock::__step_wall_clock(-2_000_000_000);
    for b in 10..20 {
        burst(b * 2_000);
    }
    drop(logger);
    nanolog_runtime::clock::__step_wall_clock(2_000_000_000);

    let files = nanolog_runtime::finished_files(&base).unwrap();
    assert!(files.len() > 20, "{} files", files.len());
    // The cursor: the start of a file after the step.
    let (from, _) = &files[files.len() * 3 / 4];
    let log = nanolog_runtime::reader::LogFile::open(from).unwrap();
    let cursor = cursor_at_start_of(&d, &log);
    // What makes the test: files shipped whose records begin before their
    // own first clock pair (read by pairs of the files before them).
    let shipped_files: Vec<PathBuf> = whole_set(&base)
        .into_iter()
        .skip(files.len() * 3 / 4)
        .collect();
    let early = shipped_files
        .iter()
        .filter(|f| {
            let l = nanolog_runtime::reader::LogFile::open(f).unwrap();
            let own = l.time_map().pairs().first().unwrap().0;
            l.first_tick(0).is_some_and(|t| t < own)
        })
        .count();
    assert!(early > 0, "no shipped file holds records older than itself");

    let c = Collector::start();
    let (status, err) = shipped(
        &[
            "--endpoint",
            &c.endpoint(),
            "--once",
            "--cursor",
            p(&cursor),
            p(&base),
        ],
        120,
        "ship --once",
    );
    assert!(status.success(), "ship failed: {err}");
    let decoded = decoded_times(&base);
    assert_eq!(decoded.len(), 40_000);
    let got = c.records();
    assert!(got.len() > 5_000, "{} records shipped: {err}", got.len());
    let differ: Vec<_> = got
        .iter()
        .filter(|g| decoded.get(&g.body) != Some(&g.time_ns))
        .map(|g| (&g.body, g.time_ns, decoded.get(&g.body)))
        .take(5)
        .collect();
    assert!(differ.is_empty(), "shipped times not decode's: {differ:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A set of thousands of files: `ship --once` sends each record once,
/// from the oldest file and from a cursor 100 files from the end, in a
/// bounded time (each file costs the few around it, not the set).
#[test]
fn a_set_of_thousands_of_files_ships_each_record_once() {
    let _s = serial();
    let d = dir("thousands");
    const N: u64 = 1_600_000;
    // Written as they are (the number of files then does not depend on
    // how much the flusher compressed).
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(1 << 10)
        .compress(false)
        .start()
        .unwrap();
    for i in 0..N {
        nanolog::info!("rec {}", i);
    }
    drop(logger);
    let files = nanolog_runtime::finished_files(&base).unwrap();
    assert!(files.len() > 2_000, "{} files", files.len());
    let numbers = |got: &[collector::Got]| -> Vec<u64> {
        let mut v: Vec<u64> = got
            .iter()
            .map(|g| g.body.strip_prefix("rec ").unwrap().parse().unwrap())
            .collect();
        v.sort_unstable();
        v
    };

    let c = Collector::start();
    let (status, err) = shipped(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        300,
        "ship --once of the whole set",
    );
    assert!(status.success(), "{err}");
    assert_eq!(numbers(&c.records()), (0..N).collect::<Vec<_>>(), "{err}");

    // From the start of the 100th file from the end: what that file and
    // the ones after it hold, once.
    let (from, _) = &files[files.len() - 100];
    let log = nanolog_runtime::reader::LogFile::open(from).unwrap();
    let first = log
        .records()
        .map(|r| r.unwrap().message())
        .map(|m| m.strip_prefix("rec ").unwrap().parse::<u64>().unwrap())
        .min()
        .unwrap();
    let cursor = cursor_at_start_of(&d, &log);
    let c = Collector::start();
    let (status, err) = shipped(
        &[
            "--endpoint",
            &c.endpoint(),
            "--once",
            "--cursor",
            p(&cursor),
            p(&base),
        ],
        120,
        "ship --once of the last 100 files",
    );
    assert!(status.success(), "{err}");
    // One writer thread: its records are in the files in order.
    assert_eq!(
        numbers(&c.records()),
        (first..N).collect::<Vec<_>>(),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A cursor (at `d/cursor`) at the start of `log`, a file of the set at
/// `d/app.nlog`, written as a follower saves one.
fn cursor_at_start_of(d: &Path, log: &nanolog_runtime::reader::LogFile) -> PathBuf {
    let h = log.header();
    let cursor = d.join("cursor");
    let identity = std::fs::canonicalize(d).unwrap().join("app.nlog");
    std::fs::write(
        &cursor,
        format!(
            "nanolog-cursor-v2 {} {} 0 {} {}\n",
            h.pid,
            h.base_unix_ns,
            log.seq().unwrap(),
            identity.display()
        ),
    )
    .unwrap();
    cursor
}

/// README "Trace context": a record made inside a span that carries W3C ids
/// (`trace_id`, `span_id`, `trace_flags` fields) arrives with the
/// LogRecord's `trace_id`, `span_id` and `flags` set to them (the
/// innermost such span's); a record outside has none, also when the
/// collector's buffers held a traced record before.
#[test]
fn records_in_traced_spans_arrive_with_their_trace_and_span_ids() {
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let _s = serial();
    let d = dir("trace-ids");
    let base = d.join("app.nlog");
    common::traced_log(&base, 3);
    let c = Collector::start();
    let (status, err) = shipped(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        60,
        "ship --once",
    );
    assert!(status.success(), "ship failed: {err}");
    let got = c.records();
    assert_eq!(got.len(), 9);
    for g in &got {
        let (trace, span, flags) = common::traced_ids(&g.body);
        assert_eq!(
            (&g.trace_id, &g.span_id, g.flags),
            (&hex(trace), &hex(span), flags),
            "{}",
            g.body
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `nanolog ship` with exactly the exporter variables `env` gives.
fn ship_with_env(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    common::shipped_with_env(args, env, 60)
}

/// The exporter specification's variables, as services set them for every
/// OpenTelemetry exporter (issue #88): headers on every request (the
/// `LOGS_` variable over the general one, a `--header` over both),
/// bodies gzip'd, `OTEL_RESOURCE_ATTRIBUTES` in the resource (its
/// `service.name` when nothing else names the service); header values
/// never printed, not with `--stats-every` either.
#[test]
fn exporter_headers_gzip_and_resource_attributes_reach_the_collector() {
    let _s = serial();
    let d = dir("exporter_env");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..3_000u64 {
        nanolog::info!("request {} served in {} us", i, i % 97);
        if i % 500 == 499 {
            logger.flush().unwrap();
        }
    }
    drop(logger);

    let c = Collector::start();
    let (status, err) = ship_with_env(
        &[
            "--endpoint",
            &c.endpoint(),
            "--header",
            "x-tenant=green-secret",
            "--batch-kib",
            "4",
            "--stats-every",
            "1ms",
            "--once",
            p(&base),
        ],
        &[
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-api-key=k%2Csecret1,x-tenant=blue",
            ),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,service.name=from-attributes",
            ),
        ],
    );
    assert!(status.success(), "{err}");
    for secret in ["secret1", "green-secret", "blue"] {
        assert!(!err.contains(secret), "a header value printed: {err}");
    }
    assert_eq!(c.count(), 3_000);
    let st = c.state.lock().unwrap();
    assert!(st.headers.len() > 1, "{} requests", st.headers.len());
    for h in &st.headers {
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-api-key"), Some("k,secret1"));
        assert_eq!(get("x-tenant"), Some("green-secret"), "the flag wins");
        assert_eq!(get("content-encoding"), Some("gzip"));
    }
    let got = st.accepted[0][0].clone();
    drop(st);
    assert_eq!(string(&got.resource["deployment.environment"]), "prod");
    assert_eq!(string(&got.resource["service.name"]), "from-attributes");

    // The LOGS_ variable over the general one; none compressed.
    let c = Collector::start();
    let (status, err) = ship_with_env(
        &[
            "--endpoint",
            &c.endpoint(),
            "--service",
            "svc",
            "--once",
            p(&base),
        ],
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=general"),
            ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-api-key=for-logs"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "none"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes"),
        ],
    );
    assert!(status.success(), "{err}");
    assert_eq!(c.count(), 3_000);
    let st = c.state.lock().unwrap();
    for h in &st.headers {
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-api-key"), Some("for-logs"));
        assert_eq!(get("content-encoding"), None);
    }
    assert_eq!(
        string(&st.accepted[0][0].resource["service.name"]),
        "svc",
        "--service over OTEL_RESOURCE_ATTRIBUTES"
    );
    drop(st);

    // A compression ship does not offer, or a malformed header variable:
    // refused before anything is sent, the variable named, no value shown.
    let (status, err) = ship_with_env(
        &[
            "--endpoint",
            &c.endpoint(),
            "--compression",
            "zstd",
            "--once",
            p(&base),
        ],
        &[],
    );
    assert!(!status.success());
    assert!(
        err.contains("--compression") && err.contains("gzip, none"),
        "{err}"
    );
    let (status, err) = ship_with_env(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-api-key=ok,tokenwithoutkey-s3cret",
        )],
    );
    assert!(!status.success());
    assert!(err.contains("OTEL_EXPORTER_OTLP_HEADERS: entry 2"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert_eq!(c.count(), 3_000, "nothing more sent");
    let _ = std::fs::remove_dir_all(&d);
}

/// Headers and URL credentials never go in the clear: over http:// to a
/// host that is not this machine, ship refuses before it connects (the
/// host here cannot resolve: a connection would fail another way), naming
/// the header but not its value (issue #88).
#[test]
fn headers_and_credentials_are_not_sent_over_plain_http_to_another_host() {
    let _s = serial();
    let d = dir("clear");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    nanolog::info!("rec {}", 1u64);
    drop(logger);
    let t = Instant::now();
    let (status, err) = ship_with_env(
        &[
            "--endpoint",
            "http://collector.invalid:4318",
            "--once",
            p(&base),
        ],
        &[("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret")],
    );
    assert!(!status.success());
    assert!(
        err.contains("headers (x-api-key)") && err.contains("in the clear"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    let (status, err) = ship_with_env(
        &[
            "--endpoint",
            "http://ann:s3cret@collector.invalid:4318",
            "--once",
            p(&base),
        ],
        &[],
    );
    assert!(!status.success());
    assert!(err.contains("credentials in the URL"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    // Refused at once: no connection tried, no retry waited.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let _ = std::fs::remove_dir_all(&d);
}

/// The README's vendor set-up (issue #88), as written: its `export` lines
/// and its `ship` line, the vendor's https:// endpoint replaced by the
/// stand-in on this machine (the system's roots verify no test
/// certificate; https:// itself is tried against the real Collector in
/// `real_collector.rs`): every record arrives, each request with the
/// headers and gzip'd, the resource with the attributes.
#[test]
fn the_readme_vendor_set_up_runs_as_written() {
    let readme = include_str!("../../README.md");
    let at = readme
        .find("**To a vendor")
        .expect("the README's vendor set-up");
    let block = &readme[at..];
    let start = block.find("```sh\n").expect("its sh block") + 6;
    let end = start + block[start..].find("```").expect("the block's end");
    let c = Collector::start();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut ship_line = None;
    for line in block[start..end].lines() {
        if let Some(kv) = line.strip_prefix("export ") {
            let (k, v) = kv.split_once('=').unwrap();
            let v = v
                .trim_matches('"')
                .replace("$VENDOR_API_KEY", "key-from-the-vault")
                .replace("https://otlp.vendor.example:4318", &c.endpoint());
            env.push((k.to_owned(), v));
        } else if line.starts_with("nanolog ship ") {
            ship_line = Some(line);
        }
    }
    assert_eq!(env.len(), 4, "{env:?}");
    assert!(
        env[0].1 == c.endpoint(),
        "the block's endpoint is the one replaced"
    );
    let ship_line = ship_line.expect("the block's ship line");

    let _s = serial();
    let d = dir("readme_vendor");
    let logger = nanolog::Logger::builder()
        .path(d.join("app.nlog"))
        .start()
        .unwrap();
    for i in 0..1_000u64 {
        nanolog::info!("took {} ms", i);
    }
    drop(logger);
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(ship_line.split_whitespace().skip(1))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.count() < 1_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let err = stderr_of(&mut child);
    assert_eq!(c.count(), 1_000, "{err}");
    assert!(!err.contains("key-from-the-vault"), "{err}");
    let st = c.state.lock().unwrap();
    for h in &st.headers {
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("api-key"), Some("key-from-the-vault"));
        assert_eq!(get("x-tenant"), Some("shop"));
        assert_eq!(get("content-encoding"), Some("gzip"));
    }
    let r = &st.accepted[0][0];
    assert_eq!(string(&r.resource["deployment.environment"]), "prod");
    assert_eq!(string(&r.resource["service.name"]), "checkout");
    drop(st);
    let _ = std::fs::remove_dir_all(&d);
}

/// `OTEL_EXPORTER_OTLP_TIMEOUT` bounds a request (milliseconds, as the
/// specification says): a collector that answers after 1.5 s is waited for
/// without it, and with 200 ms each try times out, so `--once` gives up.
#[test]
fn the_exporter_timeout_bounds_a_request() {
    let _s = serial();
    let d = dir("timeout");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    nanolog::info!("rec {}", 1u64);
    drop(logger);
    let c = Collector::start();
    c.state.lock().unwrap().delay = Duration::from_millis(1500);
    let args = [
        "--endpoint",
        &c.endpoint(),
        "--once",
        "--give-up-after",
        "1s",
        "--max-backoff",
        "100ms",
        p(&base),
    ];
    let (status, err) = ship_with_env(&args, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "200")]);
    assert!(!status.success(), "{err}");
    assert!(err.contains("giving up"), "{err}");
    // (Each try timed out and was made again: the stand-in, slow, saw them.)
    let tries = c.state.lock().unwrap().requests;
    assert!(tries >= 2, "{tries} requests");
    let (status, err) = ship_with_env(&args, &[]);
    assert!(status.success(), "{err}");
    assert!(c.state.lock().unwrap().requests > tries);
    let _ = std::fs::remove_dir_all(&d);
}
