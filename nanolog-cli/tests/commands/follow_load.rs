//! A follower at the live edge of a busy writer, under CPU load (issue
//! #46): `decode -f` of a writer whose four named threads log inside
//! spans, compressed, rolling every 64 KiB, while other threads keep both
//! cores busy, prints every record once, with its thread and its spans,
//! exactly as `decode` of the finished set prints it (times included).
//!
//! One run of 3 s here. The soak the issue asks for (20 runs of 30 s) is
//! the same test with `NANOLOG_SOAK_RUNS=20 NANOLOG_SOAK_SECS=30`.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanolog::reader::finished_files;
use nanolog::Logger;

use crate::common;
use common::{p, SpawnReaped, BIN};

const WORKERS: u64 = 4;
/// Records a request logs inside its span (the third inside `db` too).
const STEPS: u64 = 5;
const USERS: [&str; 7] = ["ann", "bob", "cy", "dee", "eve", "fay", "gus"];

fn env_or(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run by `a_follower_under_cpu_load_prints_every_record_once_with_its_thread_and_spans`
/// in a child process: four named threads log requests for
/// `NANOLOG_SOAK_SECS`, about 36,000 records a second, into a compressed
/// log rolling every 64 KiB; prints how many records it logged.
#[test]
#[ignore = "run in a child process by another test"]
fn child_paced_writer() {
    let Some(path) = std::env::var_os("NANOLOG_SOAK_LOG") else {
        return;
    };
    let secs = env_or("NANOLOG_SOAK_SECS", 3.0);
    let mut builder = Logger::builder().path(&path).compress(true);
    // (Steady: one file, never rolled, so the follower is at the live
    // edge of one file the whole run.)
    if std::env::var_os("NANOLOG_SOAK_STEADY").is_none() {
        builder = builder.rotate_bytes(64 << 10);
    }
    let logger = builder.start().unwrap();
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let workers: Vec<_> = (1..=WORKERS)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let (mut n, mut req) = (0u64, 0u64);
                    while Instant::now() < until {
                        req += 1;
                        let _req = nanolog::span!("req", id = req, worker = w);
                        for step in 0..STEPS {
                            let _db = (step == 2).then(|| nanolog::span!("db", table = "users"));
                            let user = USERS[(req % 7) as usize];
                            nanolog::info!("w {} req {} step {} user {}", w, req, step, user);
                            n += 1;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    n
                })
                .unwrap()
        })
        .collect();
    let total: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    drop(logger);
    println!("logged {total}");
}

/// Two threads that spin until dropped: the CPU load beside the test.
struct Load(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Load {
    fn start(threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..threads)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        }
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        Load(stop, handles)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for h in self.1.drain(..) {
            let _ = h.join();
        }
    }
}

/// What one JSON line of the child's log must say, from its message.
fn check_line(line: &str) -> (u64, u64, u64) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let msg = v["msg"]
        .as_str()
        .unwrap_or_else(|| panic!("no msg: {line}"));
    let words: Vec<&str> = msg.split(' ').collect();
    assert_eq!(words.len(), 8, "{line}");
    let num = |i: usize| -> u64 { words[i].parse().unwrap_or_else(|_| panic!("{line}")) };
    let (w, req, step) = (num(1), num(3), num(5));
    assert_eq!(words[7], USERS[(req % 7) as usize], "{line}");
    assert_eq!(v["thread_name"], format!("worker-{w}"), "{line}");
    let mut spans = vec![serde_json::json!({"name": "req", "fields": {"id": req, "worker": w}})];
    if step == 2 {
        spans.push(serde_json::json!({"name": "db", "fields": {"table": "users"}}));
    }
    assert_eq!(v["spans"], serde_json::Value::Array(spans), "{line}");
    assert!(v.get("spans_lost").is_none(), "{line}");
    (w, req, step)
}

/// One run: the writer in a child process beside the load, `decode -f`
/// started before it; returns the records logged and the files written.
/// `steady`: the writer never rolls.
fn soak_run(d: &Path, secs: f64, steady: bool) -> (u64, usize) {
    let base = d.join("app.nlog");
    let mut follower = Command::new(BIN)
        .args(["decode", "-f", "--format", "json", p(&base)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let rx = common::line_reader(&mut follower);
    let load = Load::start(2);
    let mut child = Command::new(std::env::current_exe().unwrap());
    if steady {
        child.env("NANOLOG_SOAK_STEADY", "1");
    }
    let child = child
        .args([
            "--exact",
            &common::test_name(module_path!(), "child_paced_writer"),
            "--ignored",
            "--nocapture",
        ])
        .env("NANOLOG_SOAK_LOG", &base)
        .env("NANOLOG_SOAK_SECS", secs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped();
    let limit = Duration::from_secs_f64(secs * 3.0 + 60.0);
    let deadline = Instant::now() + limit;
    let mut got: Vec<String> = Vec::new();
    let mut child = child;
    let status = loop {
        while let Ok(l) = rx.try_recv() {
            got.push(l);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = follower.kill();
            panic!("the writer did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(load);
    let mut said = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(status.success(), "writer: {status}");
    let logged: u64 = said
        .lines()
        .find_map(|l| l.strip_prefix("logged "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the writer said: {said}"));
    // The follower catches up, then prints nothing more.
    let deadline = Instant::now() + Duration::from_secs(60);
    while (got.len() as u64) < logged {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => got.push(l),
            Err(_) => break,
        }
    }
    if let Ok(extra) = rx.recv_timeout(Duration::from_millis(2500)) {
        got.push(extra);
    }
    let _ = follower.kill();
    let mut err = String::new();
    let _ = follower.stderr.take().unwrap().read_to_string(&mut err);
    let _ = follower.wait();

    let mut files: Vec<PathBuf> = finished_files(&base)
        .unwrap()
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    files.push(base.clone());
    let mut args = vec!["decode".to_owned(), "--format".into(), "json".into()];
    args.extend(files.iter().map(|f| p(f).to_owned()));
    let fresh = Command::new(BIN).args(&args).output().unwrap();
    assert!(fresh.status.success());
    assert!(
        fresh.stderr.is_empty(),
        "decode of the finished set: {}",
        String::from_utf8_lossy(&fresh.stderr)
    );
    let fresh = String::from_utf8(fresh.stdout).unwrap();

    // Kept beside the log for a failure's post-mortem (the directory goes
    // when the run passes).
    std::fs::write(d.join("followed.jsonl"), got.join("\n")).unwrap();
    std::fs::write(d.join("decoded.jsonl"), &fresh).unwrap();

    // Each record once, with its thread and spans.
    let mut seen = HashSet::new();
    for l in &got {
        let key = check_line(l);
        assert!(seen.insert(key), "printed twice: {l}");
    }
    assert_eq!(
        got.len() as u64,
        logged,
        "follow printed {} of {logged} records; its stderr: {err}",
        got.len()
    );
    assert!(
        !err.contains("warning"),
        "the follower warned of damage that is not there: {err}"
    );
    // As `decode` of the finished set prints them, to the nanosecond (but
    // for the file named: the follower read the live file at its path,
    // before the roll renamed it).
    let unsourced = |l: &str| -> String {
        let at = l.find(",\"source\":").unwrap_or(l.len());
        l[..at].to_owned()
    };
    let mut live: Vec<String> = got.iter().map(|l| unsourced(l)).collect();
    let mut whole: Vec<String> = fresh.lines().map(unsourced).collect();
    assert_eq!(whole.len() as u64, logged);
    live.sort_unstable();
    whole.sort_unstable();
    let differ = live.iter().zip(&whole).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ,
        0,
        "{differ} lines differ from decode's, e.g. {:?}",
        live.iter().zip(&whole).find(|(a, b)| a != b)
    );
    // Not asserted: where the follower's output goes back in time (the
    // records of one take are merged; a later take can hold a thread's
    // records older than another's already printed).
    let ts: Vec<i64> = got
        .iter()
        .map(|l| {
            let at = l.find("\"ts_ns\":").unwrap() + 8;
            let end = at + l[at..].find(',').unwrap();
            l[at..end].parse().unwrap()
        })
        .collect();
    let back: Vec<i64> = ts
        .windows(2)
        .filter(|w| w[1] < w[0])
        .map(|w| w[0] - w[1])
        .collect();
    eprintln!(
        "the output went back in time {} times, by at most {} ns",
        back.len(),
        back.iter().max().unwrap_or(&0)
    );
    (logged, files.len())
}

#[test]
fn a_follower_under_cpu_load_prints_every_record_once_with_its_thread_and_spans() {
    let runs = env_or("NANOLOG_SOAK_RUNS", 1.0) as usize;
    let secs = env_or("NANOLOG_SOAK_SECS", 3.0);
    for run in 0..runs {
        let d = common::fresh_dir("follow_load", &format!("run{run}"));
        let started = Instant::now();
        let (logged, files) = soak_run(&d, secs, false);
        eprintln!(
            "run {run}: {logged} records in {files} files, followed in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert!(files > 2, "the writer rolled only {files} times");
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// A follower of a busy writer that never rolls (issue #84): records are
/// always there past the writer's last clock pair, and each one waits for
/// the pair after it, however long the run, so every line the follower
/// prints has the time `decode` of the finished file gives it. (Until
/// 2026-12-06 the wait ended 2 s after it began whatever pairs came
/// meanwhile, and 19% of a busy writer's followed lines were printed with
/// extrapolated times, off by up to 6 µs, in bursts every 2 s.) Six
/// seconds: three of those bursts.
#[test]
fn a_follower_of_a_busy_writer_that_never_rolls_prints_the_finished_files_times() {
    let d = common::fresh_dir("follow_load", "steady");
    let (logged, files) = soak_run(&d, env_or("NANOLOG_SOAK_SECS", 6.0), true);
    assert_eq!(files, 1, "the writer rolled");
    assert!(logged > 10_000, "only {logged} records");
    let _ = std::fs::remove_dir_all(&d);
}
