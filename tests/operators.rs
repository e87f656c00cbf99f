//! What operators and deploy scripts do to a log: two writers started at
//! one path, the live file truncated (logrotate's `copytruncate`), deleted
//! or renamed while the logger runs, a lock holder that crashed. Nothing is
//! lost without being counted, in `Stats` and in the file.

mod common;
use common::SpawnReaped;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nanolog::reader::{finished_files, Event, Filter, LogFile, Merge, Value};
use nanolog::{Error, Logger};

use common::serial;

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nanolog-ops-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// (writer id, record number) of every record of `paths`, in time order,
/// and the records the files report lost by the writer.
fn records(paths: &[PathBuf]) -> (Vec<(u64, u64)>, u64) {
    let files: Vec<LogFile> = paths.iter().map(|p| LogFile::open(p).unwrap()).collect();
    for f in &files {
        assert!(
            f.warnings().is_empty(),
            "{}: {:?}",
            f.path().display(),
            f.warnings()
        );
    }
    let mut got = Vec::new();
    let mut lost = 0;
    for e in Merge::new(&files, Filter::default()) {
        match e {
            Event::Record(r) => match (r.arg(0), r.arg(1)) {
                (Some(Value::Uint(w)), Some(Value::Uint(i))) => got.push((w as u64, i as u64)),
                other => panic!("unexpected record {other:?}: {}", r.message()),
            },
            Event::Gap(g, _) => {
                assert!(g.is_lost(), "a thread dropped records: {g:?}");
                lost += g.count;
            }
        }
    }
    (got, lost)
}

/// The set at `base` in time order: finished files, then the live one.
fn whole_set(base: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = finished_files(base)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    v.push(base.to_path_buf());
    v
}

/// Waits for `child` for at most `limit`; kills it and fails after that.
fn wait(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a child process did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Records each writer of the simultaneous-start test logs.
const PER_WRITER: u64 = 20_000;

/// Run by `simultaneous_starts_at_one_path_let_one_writer_in` in 20 child
/// processes: start at the agreed moment; exit 3 if refused (printing the
/// error), else log, hold the logger a while, and exit 0.
#[test]
#[ignore = "run in a child process by another test"]
fn child_writer() {
    let (Some(path), Ok(id), Ok(at)) = (
        std::env::var_os("NANOLOG_OPS_LOG"),
        std::env::var("NANOLOG_OPS_ID"),
        std::env::var("NANOLOG_OPS_AT"),
    ) else {
        return;
    };
    let id: u64 = id.parse().unwrap();
    let at: u128 = at.parse().unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    if at > now {
        std::thread::sleep(Duration::from_nanos((at - now) as u64));
    }
    let logger = match Logger::builder().path(&path).start() {
        Ok(l) => l,
        Err(e @ Error::Locked { .. }) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
        Err(e) => panic!("{e}"),
    };
    for i in 0..PER_WRITER {
        nanolog::info!("writer {} record {}", id, i);
    }
    logger.flush().unwrap();
    // Still holding the path while the others try.
    std::thread::sleep(Duration::from_millis(3000));
    drop(logger);
}

#[test]
fn simultaneous_starts_at_one_path_let_one_writer_in() {
    let d = dir("simultaneous");
    let base = d.join("app.nlog");
    // Time for all 20 to be up and waiting, even on a loaded machine.
    let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_millis(1500);
    let mut children: Vec<_> = (0..20)
        .map(|id| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_writer", "--ignored", "--nocapture"])
                .env("NANOLOG_OPS_LOG", &base)
                .env("NANOLOG_OPS_ID", id.to_string())
                .env("NANOLOG_OPS_AT", at.as_nanos().to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn_reaped()
        })
        .collect();
    let mut winners = Vec::new();
    let mut refused = 0;
    for (id, c) in children.iter_mut().enumerate() {
        let status = wait(c, Duration::from_secs(60));
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err);
        match status.code() {
            Some(0) => winners.push(id as u64),
            Some(3) => {
                refused += 1;
                assert!(
                    err.contains(&format!(
                        "log file {} is in use by another logger (process ",
                        base.display()
                    )),
                    "refusal message: {err}"
                );
            }
            _ => panic!("writer {id} failed: {status}: {err}"),
        }
    }
    assert_eq!(
        (winners.len(), refused),
        (1, 19),
        "writers let in: {winners:?}"
    );
    // The refused changed nothing on disk: one file, holding every record
    // of the one writer, no corrupt byte.
    assert_eq!(whole_set(&base).len(), 1, "{:?}", whole_set(&base));
    let (got, lost) = records(&whole_set(&base));
    let want: Vec<(u64, u64)> = (0..PER_WRITER).map(|i| (winners[0], i)).collect();
    assert_eq!(lost, 0);
    assert!(got == want, "{} records of {PER_WRITER}", got.len());
    let _ = std::fs::remove_dir_all(&d);
}

/// Run by `a_crashed_lock_holder_does_not_block_the_next_start`: takes the
/// lock, logs, and aborts.
#[test]
#[ignore = "run in a child process by another test"]
fn child_crashing_writer() {
    let Some(path) = std::env::var_os("NANOLOG_OPS_CRASH_LOG") else {
        return;
    };
    let _logger = Logger::builder()
        .path(&path)
        .flush_on_signals(false)
        .start()
        .unwrap();
    nanolog::info!("writer {} record {}", 9u64, 0u64);
    std::process::abort();
}

#[test]
fn a_crashed_lock_holder_does_not_block_the_next_start() {
    let _s = serial();
    let d = dir("crashed");
    let base = d.join("app.nlog");
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_crashing_writer", "--ignored"])
        .env("NANOLOG_OPS_CRASH_LOG", &base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_reaped();
    let status = wait(&mut c, Duration::from_secs(60));
    assert!(!status.success(), "the child was to crash: {status}");
    assert!(d.join("app.nlog.lock").exists());
    let logger = Logger::builder().path(&base).start().unwrap();
    nanolog::info!("writer {} record {}", 1u64, 0u64);
    drop(logger);
    let (got, _) = records(std::slice::from_ref(&base));
    assert_eq!(got, [(1, 0)]);
    let _ = std::fs::remove_dir_all(&d);
}

/// Logs `writer 0 record i` for `range`, flushing every 100 records and
/// pausing so a run spans `about` of wall time.
fn log_slowly(range: std::ops::Range<u64>, about: Duration) {
    let pause = about / (range.end - range.start).div_ceil(100).max(1) as u32;
    for i in range {
        nanolog::info!("writer {} record {}", 0u64, i);
        if i % 100 == 99 {
            nanolog::flush().unwrap();
            std::thread::sleep(pause);
        }
    }
    nanolog::flush().unwrap();
}

/// What `copytruncate` does after its copy: cuts the file to nothing in place.
fn truncate(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(0)
        .unwrap();
}

/// `copytruncate`: the live file is cut to nothing under the writer. The
/// writer begins it again (header, clock, dictionary), and every record
/// logged after the truncation decodes from the path.
#[test]
fn a_truncated_live_file_begins_again_and_keeps_what_follows() {
    let _s = serial();
    let d = dir("truncate");
    let base = d.join("app.nlog");
    let logger = Logger::builder().path(&base).start().unwrap();
    log_slowly(0..5_000, Duration::from_millis(200));
    // What logrotate does: copy, then truncate in place.
    std::fs::copy(&base, d.join("app.nlog.1")).unwrap();
    truncate(&base);
    log_slowly(5_000..10_000, Duration::from_millis(200));
    let stats = logger.stats();
    drop(logger);
    let (got, lost) = records(std::slice::from_ref(&base));
    assert_eq!(lost, stats.lost);
    assert_eq!(got, (5_000..10_000).map(|i| (0, i)).collect::<Vec<_>>());
    assert!(LogFile::open(&base).unwrap().is_complete());
    let _ = std::fs::remove_dir_all(&d);
}

/// `copytruncate` while spans are open: the records after the truncation
/// still show the spans they are in. The new file holds its own definitions
/// of them (as a roll's does), though they were written to the old one
/// before it was cut, and of the spans made after it at call sites the old
/// file had defined.
#[test]
fn a_truncated_live_file_keeps_the_spans_of_its_records() {
    let _s = serial();
    let d = dir("truncate-spans");
    let base = d.join("app.nlog");
    let logger = Logger::builder().path(&base).start().unwrap();
    let outer = nanolog::span!("request", id = 7u64);
    let inner = nanolog::span!("db", table = "users");
    // Records in a span per 100, from one call site.
    let chunks = |range: std::ops::Range<u64>| {
        for first in range.step_by(100) {
            let _c = nanolog::span!("chunk", first);
            for i in first..first + 100 {
                nanolog::info!("writer {} record {}", 0u64, i);
            }
            nanolog::flush().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    chunks(0..300);
    truncate(&base);
    chunks(300..600);
    drop(inner);
    nanolog::info!("writer {} record {}", 0u64, 600u64);
    drop(outer);
    nanolog::info!("writer {} record {}", 0u64, 601u64);
    drop(logger);
    let f = LogFile::open(&base).unwrap();
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    let mut seen = 0;
    for rec in f.records() {
        let rec = rec.unwrap();
        let Some(Value::Uint(i)) = rec.arg(1) else {
            panic!("unexpected record {}", rec.message())
        };
        let mut spans = String::new();
        for sp in rec.spans() {
            sp.render(&mut spans);
            spans.push(';');
        }
        let want = match i {
            600 => "request{id=7};".to_owned(),
            601 => String::new(),
            _ => format!(
                "request{{id=7}};db{{table=\"users\"}};chunk{{first={}}};",
                i / 100 * 100
            ),
        };
        assert_eq!(spans, want, "record {i}");
        seen += 1;
    }
    assert!(seen >= 300, "{seen} records after the truncation");
    let _ = std::fs::remove_dir_all(&d);
}

/// `rm` of the live file: within about a second the writer starts a fresh
/// file at the path; what it wrote into the deleted file in between is
/// counted lost, in `Stats` and in the new file, and the last record
/// decodes from the path.
#[test]
fn a_deleted_live_file_is_started_again_and_the_loss_counted() {
    let _s = serial();
    let d = dir("delete");
    let base = d.join("app.nlog");
    let logger = Logger::builder().path(&base).start().unwrap();
    log_slowly(0..2_000, Duration::from_millis(100));
    std::fs::remove_file(&base).unwrap();
    let deleted = Instant::now();
    log_slowly(2_000..30_000, Duration::from_millis(2_500));
    let stats = logger.stats();
    drop(logger);
    assert!(
        base.exists(),
        "no file at the path {:?} after the deletion",
        deleted.elapsed()
    );
    let (got, lost) = records(std::slice::from_ref(&base));
    assert_eq!(
        lost, stats.lost,
        "the file and Stats disagree on what was lost"
    );
    assert_eq!(got.last(), Some(&(0, 29_999)));
    // Everything not counted lost is in the new file, once, in order.
    let first = got[0].1;
    assert_eq!(got, (first..30_000).map(|i| (0, i)).collect::<Vec<_>>());
    assert!(
        first >= 2_000,
        "records from before the deletion in the new file"
    );
    // The loss is found before the first write after the deletion; what is
    // counted is the last write before it, which may have gone into the
    // file just before it was deleted (flushed every 100 records here).
    let missing = first - 2_000;
    assert!(
        missing <= stats.lost && stats.lost <= missing + 100,
        "{missing} records missing, {} counted lost",
        stats.lost
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `mv` of the live file: records go on into the renamed file until the
/// writer notices, then into a fresh file at the path; the two hold every
/// record once, and nothing is counted lost.
#[test]
fn a_renamed_live_file_keeps_its_records_and_a_new_one_starts_at_the_path() {
    let _s = serial();
    let d = dir("rename");
    let base = d.join("app.nlog");
    let moved = d.join("moved.nlog");
    let logger = Logger::builder().path(&base).start().unwrap();
    log_slowly(0..2_000, Duration::from_millis(100));
    std::fs::rename(&base, &moved).unwrap();
    log_slowly(2_000..30_000, Duration::from_millis(2_500));
    let stats = logger.stats();
    drop(logger);
    assert!(base.exists(), "no file at the path after the rename");
    assert_eq!(stats.lost, 0);
    let (got, lost) = records(&[moved.clone(), base.clone()]);
    assert_eq!(lost, 0);
    assert_eq!(got, (0..30_000).map(|i| (0, i)).collect::<Vec<_>>());
    // The renamed file ended cleanly when the writer left it.
    assert!(LogFile::open(&moved).unwrap().is_complete());
    let _ = std::fs::remove_dir_all(&d);
}
