//! The text mirror (`Builder::mirror`): the lines `nanolog decode` prints,
//! for the records at or above its level, in order; a broken or stuck
//! writer neither blocks logging nor costs a binary record.
//!
//! One logger runs per process, so these tests take turns.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nanolog::{Level, Logger, OnFull};

use crate::common;

use common::{serial, BIN};

/// A log path of this file's own (`common::temp` named `mirror-{name}`).
fn temp(name: &str) -> PathBuf {
    common::temp(&format!("mirror-{name}"))
}

fn count_records(path: &Path) -> usize {
    let out = Command::new(BIN).arg("decode").arg(path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out.stdout.iter().filter(|&&b| b == b'\n').count()
}

/// A writer into memory the test can read.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `(time in ns since the day began, rest of the line)`.
fn split_time(line: &str) -> (u64, &str) {
    let (date, rest) = line.split_at(29); // "2026-11-22 11:02:03.123456789"
    let hms = &date[11..];
    let h: u64 = hms[0..2].parse().unwrap();
    let m: u64 = hms[3..5].parse().unwrap();
    let s: u64 = hms[6..8].parse().unwrap();
    let ns: u64 = hms[9..].parse().unwrap();
    (((h * 60 + m) * 60 + s) * 1_000_000_000 + ns, rest)
}

#[test]
fn the_mirror_gets_the_decoded_lines_at_or_above_its_level_in_order() {
    let _s = serial();
    let path = temp("lines");
    let buf = Buffer::default();
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Debug)
        .mirror(buf.clone(), Level::Warn)
        .start()
        .unwrap();
    nanolog::set_thread_name("worker");
    for i in 0..2_000u32 {
        match i % 4 {
            0 => nanolog::debug!("debug {}", i),
            1 => nanolog::info!("info {i} {:>6.2}", f64::from(i) / 3.0),
            2 => nanolog::warn!("warn {} line\nbreak \u{1b}[31m {:?}", i, "q\"s"),
            _ => nanolog::error!(target: "audit", "error {:#x} {}", i, true),
        }
        if i % 500 == 0 {
            logger.flush().unwrap();
        }
    }
    drop(logger);
    let mirrored = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let out = Command::new(BIN)
        .args(["decode", "--level", "warn"])
        .arg(&path)
        .output()
        .unwrap();
    let decoded = String::from_utf8(out.stdout).unwrap();
    let (m, d): (Vec<_>, Vec<_>) = (mirrored.lines().collect(), decoded.lines().collect());
    assert_eq!(m.len(), 1_000);
    assert_eq!(m.len(), d.len());
    for (a, b) in m.iter().zip(&d) {
        let ((ta, ra), (tb, rb)) = (split_time(a), split_time(b));
        assert_eq!(ra, rb);
        // The mirror maps ticks from the last clock pair; decode interpolates.
        assert!(ta.abs_diff(tb) < 1_000_000, "{a}\n{b}");
    }
    assert!(
        m[0].ends_with(r#"WARN[worker:1]: warn 2 line\nbreak \u{1b}[31m "q\\"s""#),
        "{}",
        m[0]
    );
    let _ = std::fs::remove_file(&path);
}

/// A writer whose every write fails, as a closed pipe's does.
struct ClosedPipe;

impl Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::ErrorKind::BrokenPipe.into())
    }
}

/// A writer stuck in its first write until released.
struct Stuck(Arc<Mutex<()>>);

impl Write for Stuck {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        drop(self.0.lock().unwrap());
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const N: u64 = 200_000;

/// Logs N warnings (flushing every 1000, so there are many batches) on a
/// thread; fails rather than hangs if logging stalls.
fn log_n(logger: &Logger) {
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..N {
                nanolog::warn!("record {}", i);
                if i % 1_000 == 999 {
                    logger.flush().unwrap();
                }
            }
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(120)).is_ok(),
            "logging stalled behind the mirror"
        );
    });
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_closed_pipe_mirror_skips_and_counts_and_loses_no_binary_record() {
    let _s = serial();
    let path = temp("closed");
    let logger = Logger::builder()
        .path(&path)
        .on_full(OnFull::Block)
        .mirror(ClosedPipe, Level::Info)
        .start()
        .unwrap();
    log_n(&logger);
    logger.flush().unwrap();
    wait_for("every line counted as skipped", || {
        logger.stats().mirror_skipped == N
    });
    assert_eq!(logger.stats().logged, N);
    drop(logger);
    assert_eq!(count_records(&path), N as usize);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_stuck_mirror_falls_behind_without_stalling_logging() {
    let _s = serial();
    let path = temp("stuck");
    let gate = Arc::new(Mutex::new(()));
    let held = gate.lock().unwrap();
    let logger = Logger::builder()
        .path(&path)
        .mirror(Stuck(Arc::clone(&gate)), Level::Warn)
        .start()
        .unwrap();
    log_n(&logger);
    logger.flush().unwrap();
    let skipped = logger.stats().mirror_skipped;
    assert!(skipped > 0 && skipped < N, "skipped {skipped}");
    drop(held);
    drop(logger);
    assert_eq!(count_records(&path), N as usize);
    let _ = std::fs::remove_file(&path);
}

/// The mirror's lines show the spans a record was made in, as `decode`
/// prints them (README "Trace context"): `request{id=7}:db{table="users"}: `.
#[test]
fn mirrored_lines_carry_their_spans_as_decode_prints_them() {
    let _s = serial();
    let path = temp("spans");
    let buf = Buffer::default();
    let logger = Logger::builder()
        .path(&path)
        .mirror(buf.clone(), Level::Info)
        .start()
        .unwrap();
    nanolog::info!("before {}", 1);
    {
        let _a = nanolog::span!("request", id = 7u64);
        nanolog::info!("in one {}", 2);
        let _b = nanolog::span!("db", table = "users");
        nanolog::warn!("in two {}", 3);
    }
    nanolog::info!("after {}", 4);
    drop(logger);
    let mirrored = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    let decoded = String::from_utf8(out.stdout).unwrap();
    let (m, d): (Vec<_>, Vec<_>) = (mirrored.lines().collect(), decoded.lines().collect());
    assert_eq!(m.len(), 4, "{mirrored}");
    for (a, b) in m.iter().zip(&d) {
        assert_eq!(split_time(a).1, split_time(b).1);
    }
    assert!(m[0].ends_with("]: before 1"), "{}", m[0]);
    assert!(m[1].ends_with("]: request{id=7}: in one 2"), "{}", m[1]);
    assert!(
        m[2].ends_with(r#"]: request{id=7}:db{table="users"}: in two 3"#),
        "{}",
        m[2]
    );
    assert!(m[3].ends_with("]: after 4"), "{}", m[3]);
    let _ = std::fs::remove_file(&path);
}
