//! What a new user meets first, run as they run it: `--help`, `export -o`
//! into a folder that does not exist, `decode -f` of a log not started yet,
//! a `--thread` that names nobody, `ship` with nothing listening, and the
//! words of the summaries.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::{fresh_dir, p, run, serial, succeed, SpawnReaped, BIN};

/// A log of `n` records `took {} ms` (0..n) at `dir/app.nlog`.
fn small_log(dir: &Path, n: u64) -> PathBuf {
    let path = dir.join("app.nlog");
    let _s = serial();
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    for i in 0..n {
        nanolog::info!("took {} ms", i);
    }
    drop(logger);
    path
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_names_every_command() {
    let out = succeed(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let about = text.lines().next().unwrap_or("");
    for cmd in ["decode", "stats", "info", "export", "ship"] {
        assert!(about.contains(cmd), "the first line {about:?} names {cmd}");
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(cmd)),
            "{cmd} listed in:\n{text}"
        );
    }
}

#[test]
fn export_makes_missing_folders_and_takes_the_format_from_the_extension() {
    let dir = fresh_dir("new-user", "export");
    let log = small_log(&dir, 1);
    let parquet = dir.join("exports/host1/app.parquet");
    let o = succeed(&["export", "-o", p(&parquet), p(&log)]);
    let bytes = std::fs::read(&parquet).unwrap();
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    // One record is one record.
    assert!(
        stderr(&o).contains("exported 1 record to"),
        "{}",
        stderr(&o)
    );

    let jsonl = dir.join("more/app.jsonl");
    succeed(&["export", "-o", p(&jsonl), p(&log)]);
    let lines = std::fs::read_to_string(&jsonl).unwrap();
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["msg"], "took 0 ms");

    // An extension that names no format: a clear error, no file.
    let txt = dir.join("app.txt");
    let o = run(&["export", "-o", p(&txt), p(&log)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--format"), "{}", stderr(&o));
    assert!(!txt.exists());
}

#[test]
fn a_thread_filter_that_names_nobody_says_so() {
    let dir = fresh_dir("new-user", "thread");
    let log = small_log(&dir, 3);
    let o = succeed(&["decode", "--thread", "wroker", p(&log)]);
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(
        err.contains("--thread wroker: no thread of the input has that name"),
        "{err}"
    );
    // A name that is there: no word.
    let named = run(&["decode", p(&log)]);
    let line = String::from_utf8_lossy(&named.stdout).into_owned();
    let name = line
        .split_once("INFO[")
        .and_then(|(_, r)| r.split_once(']'))
        .and_then(|(t, _)| t.rsplit_once(':'))
        .map(|(n, _)| n.to_owned())
        .unwrap();
    let o = succeed(&["decode", "--thread", &name, p(&log)]);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3);
}

#[test]
fn stats_rounds_the_mean() {
    let dir = fresh_dir("new-user", "mean");
    // 1, 2 and 4: the mean is 2.333...
    let path = dir.join("three.nlog");
    {
        let _s = serial();
        let logger = nanolog::Logger::builder().path(&path).start().unwrap();
        for v in [1u64, 2, 4] {
            nanolog::info!("took {} ms", v);
        }
        drop(logger);
    }
    let o = succeed(&["stats", "--fmt", "took {} ms", "--arg", "0", p(&path)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.lines().any(|l| l == "mean   2.33333"), "{text}");
    // JSON keeps the whole value.
    let o = succeed(&[
        "stats",
        "--fmt",
        "took {} ms",
        "--arg",
        "0",
        "--format",
        "json",
        p(&path),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mean"].as_f64().unwrap(), 7.0 / 3.0);
}

/// Reads `child`'s standard error until it holds `want` (at most 10 s).
fn stderr_until(child: &mut std::process::Child, want: &str) -> String {
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut got = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.contains(want) && Instant::now() < deadline {
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(100)) {
            got.push_str(&String::from_utf8_lossy(&b));
        }
    }
    got
}

#[test]
fn following_a_log_that_does_not_exist_yet_says_it_waits_then_prints_it() {
    let dir = fresh_dir("new-user", "follow");
    let log = dir.join("later/app.nlog");
    let mut child = Command::new(BIN)
        .args(["decode", "-f", p(&log)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let err = stderr_until(&mut child, "waiting");
    assert!(
        err.contains("does not exist yet: waiting for it to be created"),
        "{err:?}"
    );
    assert!(child.try_wait().unwrap().is_none(), "it keeps waiting");
    // The program starts: its records are printed.
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let _ = small_log(log.parent().unwrap(), 2);
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.lines().count() >= 2 {
                let _ = tx.send(s.clone());
            }
        }
    });
    let text = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the records of the log once it exists");
    assert!(
        text.contains("took 0 ms") && text.contains("took 1 ms"),
        "{text}"
    );
}

#[test]
fn ship_with_nothing_listening_says_so_at_once_and_gives_up_when_told() {
    let dir = fresh_dir("new-user", "ship");
    let log = small_log(&dir, 1);
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(["ship", "--once", "--give-up-after", "2s", "--endpoint"])
        .arg(&endpoint)
        .arg(p(&log))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let status = common::wait(&mut child, 30, "ship with nothing listening");
    let err = common::stderr_of(&mut child);
    assert!(!status.success());
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains(&format!("nothing is listening at {endpoint}"))
            && first.contains("giving up after 2 s"),
        "the first line says what is wrong: {err}"
    );
    assert!(err.contains("giving up"), "{err}");
    // The limit is the limit: no backoff past it.
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}
