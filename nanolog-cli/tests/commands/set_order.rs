//! A log set that orders itself (issue #36): files numbered by the writer,
//! followers that open exactly the next file, whatever the wall clock or
//! retention do, and readers that skip what is not a log.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nanolog::reader::{finished_files_keyed, Event, Filter, LogFile, Merge, Refresh, SetKey};

use crate::common;
use common::SpawnReaped;

use common::{p, run, serial, BIN};

/// The records of `l`.
fn count(l: &LogFile) -> usize {
    Merge::new(std::slice::from_ref(l), Filter::default())
        .filter(|e| matches!(e, Event::Record(_)))
        .count()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nanolog-set-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `decode -f` of `base`, its lines read on a thread of their own, and
/// its standard error kept.
struct Follower {
    child: common::Reaped,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Follower {
    fn start(base: &Path, stderr: &Path) -> Follower {
        let mut child = Command::new(BIN)
            .args(["decode", "-f", p(base)])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn_reaped();
        let lines = common::line_reader(&mut child);
        Follower { child, lines }
    }

    /// The numbers of `rec N` lines printed until `rec last` (or 60 s).
    fn until(&self, last: u64) -> Vec<u64> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.last() != Some(&last) && Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                if let Some(n) = l.rsplit_once("rec ").and_then(|(_, n)| n.parse().ok()) {
                    got.push(n);
                }
            }
        }
        got
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Both cores kept busy while it lives (an operator's machine is not idle).
struct Load(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Load {
    fn start() -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        Load(stop, threads)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// A `decode -f --cursor` of `base`, once it has saved its cursor (or 30 s).
fn follow_with_cursor(base: &Path, cursor: &Path) -> common::Reaped {
    let child = Command::new(BIN)
        .args(["decode", "-f", "--cursor", p(cursor), p(base)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_reaped();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cursor.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Logs `rec N` for each N of `range`, flushing now and then.
fn log(range: std::ops::Range<u64>) {
    for i in range {
        nanolog::info!("rec {}", i);
        if i % 256 == 0 {
            nanolog::flush().unwrap();
        }
    }
    nanolog::flush().unwrap();
}

/// A writer rolling every 4 KiB, about 2,600 files, while `decode -f`
/// follows, both cores loaded beside them: every record printed once, in
/// order. (Before the files were
/// numbered, a follower at the end of a file listed the finished files,
/// found none newer and opened the live path: a roll in between skipped a
/// whole file.)
#[test]
fn a_follower_reads_every_file_of_a_fast_rolling_set_once() {
    let _s = serial();
    let d = dir("fast");
    let base = d.join("app.nlog");
    // (3 KiB files: over 2,000 of them, with the batches compressed.)
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(3 << 10)
        .start()
        .unwrap();
    log(0..1);
    let f = Follower::start(&base, &d.join("stderr"));
    // The follower prints the live file from its start.
    assert_eq!(f.until(0), [0]);
    const N: u64 = 2_000_000;
    let load = Load::start();
    log(1..N);
    let got = f.until(N - 1);
    drop(load);
    drop(logger);
    let files = finished_files_keyed(&base).unwrap();
    assert!(files.len() > 2_000, "{} files", files.len());
    // Numbered 1, 2, 3, ... in the order written.
    let seqs: Vec<u64> = files.iter().filter_map(|(k, _, _)| k.seq()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let want: Vec<u64> = (1..N).collect();
    assert_eq!(got.len(), want.len(), "records printed (of {})", want.len());
    assert!(got == want, "every record once, in order");
    let _ = std::fs::remove_dir_all(&d);
}

/// The wall clock stepped back an hour mid-run (an NTP step, `date -s`):
/// the files go on being numbered in the order written, a follower prints
/// every record once, and retention keeps the newest files, by number.
#[test]
fn a_wall_clock_stepped_back_changes_neither_order_nor_retention() {
    let _s = serial();
    let d = dir("clock");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(8 << 10)
        .start()
        .unwrap();
    log(0..1);
    let f = Follower::start(&base, &d.join("stderr"));
    assert_eq!(f.until(0), [0]);
    log(1..20_000);
    nanolog_runtime::clock::__step_wall_clock(-3_600_000_000_000);
    log(20_000..40_000);
    let got = f.until(39_999);
    assert_eq!(got, (1..40_000).collect::<Vec<_>>(), "every record once");
    drop(logger);
    // Read a window at a time (the files grouped by the times of their
    // records, which the step sent an hour back), the set reads as it does
    // all at once.
    let pattern = d.join("app*.nlog");
    let (all, _) = with_budget(&["decode", p(&pattern)], None);
    let (windowed, _) = with_budget(&["decode", p(&pattern)], Some("0"));
    assert_eq!(all.lines().count(), 40_000);
    assert!(all == windowed, "the windowed read differs");

    // A second run, still an hour back, with retention: the newest files
    // stay, whatever their start times say.
    let before = finished_files_keyed(&base).unwrap();
    let newest = before.last().unwrap().0.clone();
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(8 << 10)
        .max_files(3)
        .start()
        .unwrap();
    log(40_000..50_000);
    drop(logger);
    nanolog_runtime::clock::__step_wall_clock(3_600_000_000_000);
    let kept = finished_files_keyed(&base).unwrap();
    assert_eq!(kept.len(), 3);
    assert!(kept.iter().all(|(k, _, _)| *k > newest), "{kept:?}");
    // Numbered one after another up to the live file, which holds the last
    // record.
    let live = LogFile::open(&base).unwrap();
    let seqs: Vec<u64> = kept.iter().filter_map(|(k, _, _)| k.seq()).collect();
    let n = live.seq().unwrap();
    assert_eq!(seqs, [n - 3, n - 2, n - 1]);
    // The set decodes to the last record (in the live file, or in the
    // newest finished one if the last write rolled).
    let mut args = vec!["decode".to_owned()];
    args.extend(kept.iter().map(|(_, f, _)| p(f).to_owned()));
    args.push(p(&base).to_owned());
    let text = String::from_utf8(Command::new(BIN).args(&args).output().unwrap().stdout).unwrap();
    assert!(text.trim_end().ends_with("rec 49999"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Retention deleting files before a (stopped) follower reaches them: the
/// follower goes on with the first file left and says how many files, and
/// how many records, it lost: with what it printed, every record.
#[cfg(unix)]
#[test]
fn retention_outrunning_a_follower_is_reported() {
    let _s = serial();
    let d = dir("outrun");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(4 << 10)
        .max_files(2)
        .start()
        .unwrap();
    log(0..1);
    let err = d.join("stderr");
    let f = Follower::start(&base, &err);
    assert_eq!(f.until(0), [0]);
    let pid = f.child.id() as i32;
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    log(1..20_000);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let got = f.until(19_999);
    drop(logger);
    assert_eq!(got.last(), Some(&19_999));
    // What was printed is in order, each record once; what is missing was
    // in files deleted before the follower got to them, and it says so.
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, no repeats");
    assert!(
        got.len() < 19_999,
        "retention should have outrun the follower"
    );
    drop(f);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(
        stderr.contains("were deleted before they were read"),
        "stderr: {stderr}"
    );
    // Every record was printed or counted: the files around the deleted
    // ones say how many records those held.
    let counted: usize = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("their ").nth(1)?;
            rest.strip_suffix(" records are not taken")?
                .parse::<usize>()
                .ok()
        })
        .sum();
    // (Record 0 was printed before the follower was stopped.)
    assert_eq!(
        1 + got.len() + counted,
        20_000,
        "printed {}, counted {counted}; stderr: {stderr}",
        got.len()
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A finished file deleted while a follower reads it is read to its end
/// through the descriptor the follower holds.
#[test]
fn a_file_deleted_under_a_reader_is_read_to_its_end() {
    let _s = serial();
    let d = dir("deleted");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    log(0..5_000);
    drop(logger);
    let whole = std::fs::read(&base).unwrap();
    let all = count(&LogFile::open(&base).unwrap());
    // A reader of the first half; the rest arrives, and the file is gone.
    let copy = d.join("copy.nlog");
    std::fs::write(&copy, &whole[..whole.len() / 2]).unwrap();
    let mut l = LogFile::open_live(&copy).unwrap();
    let half = count(&l);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&copy)
        .unwrap()
        .write_all(&whole[whole.len() / 2..])
        .unwrap();
    std::fs::remove_file(&copy).unwrap();
    assert_eq!(l.refresh().unwrap(), Refresh::Grew);
    assert!(half < all);
    assert_eq!(count(&l), all);
    assert_eq!(l.refresh().unwrap(), Refresh::Unchanged);
    let _ = std::fs::remove_dir_all(&d);
}

/// Files that are not logs among the inputs (`nanolog decode logs/*`): a
/// warning each, the rest read; a FIFO is not opened (it would wait for a
/// writer); the writer's lock file is skipped without a word. One input
/// that is not a log is still an error.
#[cfg(unix)]
#[test]
fn files_that_are_not_logs_among_the_inputs_are_skipped_with_a_warning() {
    let _s = serial();
    let d = dir("mixed");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    log(0..100);
    logger.flush().unwrap();
    std::fs::write(d.join("random.nlog"), [0x5a; 300]).unwrap();
    std::fs::write(d.join("empty.nlog"), b"").unwrap();
    std::fs::create_dir(d.join("a-directory")).unwrap();
    let whole = std::fs::read(&base).unwrap();
    std::fs::write(d.join("cut.nlog"), &whole[..20]).unwrap();
    let fifo = d.join("app.20261125T000000.000000000Z.nlog");
    let c = std::ffi::CString::new(p(&fifo)).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert!(d.join("app.nlog.lock").exists());
    let pattern = format!("{}/*", d.display());
    for cmd in [
        vec!["decode", pattern.as_str()],
        vec!["stats", pattern.as_str()],
        vec![
            "export",
            "--format",
            "jsonl",
            "-o",
            "/dev/null",
            pattern.as_str(),
        ],
    ] {
        let mut child = Command::new(BIN)
            .args(&cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn_reaped();
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{cmd:?} hangs");
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{cmd:?}: {stderr}");
        for name in [
            "random.nlog",
            "empty.nlog",
            "a-directory",
            "cut.nlog",
            "Z.nlog",
        ] {
            assert!(
                stderr
                    .lines()
                    .any(|l| l.contains(name) && l.contains("skipped")),
                "{cmd:?} says nothing of {name}: {stderr}"
            );
        }
        assert!(!stderr.contains("lock"), "{cmd:?}: {stderr}");
        if cmd[0] == "decode" {
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(out.lines().filter(|l| l.contains(" rec ")).count(), 100);
        }
    }
    // One input that is not a log: an error, as before.
    let o = run(&["decode", p(&d.join("random.nlog"))]);
    assert!(!o.status.success());
    drop(logger);
    let _ = std::fs::remove_dir_all(&d);
}

/// A cursor is saved for one log, durably, and refused for another log or
/// when it is ahead of the log it names.
#[test]
fn cursors_of_another_log_or_ahead_of_it_are_refused() {
    let _s = serial();
    let d = dir("cursors");
    let a = d.join("a.nlog");
    let b = d.join("b.nlog");
    for path in [&a, &b] {
        let logger = nanolog::Logger::builder().path(path).start().unwrap();
        log(0..10);
        drop(logger);
    }
    let cursor = d.join("a.cursor");
    // decode -f has no --once: run it until the cursor is saved.
    let mut child = follow_with_cursor(&a, &cursor);
    let _ = child.kill();
    let _ = child.wait();
    let saved = std::fs::read_to_string(&cursor).unwrap();
    assert!(saved.starts_with("nanolog-cursor-v2 "), "{saved}");
    // Another log's cursor.
    let o = run(&["decode", "-f", "--cursor", p(&cursor), p(&b)]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is of the log") && e.contains("a.nlog"), "{e}");
    // A cursor ahead of its log (a file numbered past the log's newest).
    let mut f: Vec<String> = saved.trim_end().splitn(6, ' ').map(str::to_owned).collect();
    f[1] = "1".into();
    f[2] = "1".into();
    f[4] = "999".into();
    std::fs::write(&cursor, f.join(" ") + "\n").unwrap();
    let o = run(&["decode", "-f", "--cursor", p(&cursor), p(&a)]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("ahead of the log"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Finished names: numbered ones sort after the time-named files of
/// writers before numbers, and by number.
#[test]
fn numbered_names_sort_after_time_named_ones_and_by_number() {
    let t = SetKey::Time("20261123T150000.000000000".into(), 0);
    assert!(t < SetKey::Seq(1));
    assert!(SetKey::Seq(9) < SetKey::Seq(10));
    let base = Path::new("/logs/app.nlog");
    let a = nanolog::reader::finished_path_seq(base, 42, 1_795_000_000_000_000_000);
    assert_eq!(
        a.file_name().unwrap().to_str().unwrap(),
        "app.0000000042.20261118T110640.000000000Z.nlog"
    );
}

/// Another program's (larger) log copied over the live file (`cp` keeps
/// the inode and replaces the bytes): the writer notices before its next
/// write, starts the file afresh and counts what it had written as lost;
/// the file never holds the other program's records after ours.
#[test]
fn a_larger_file_copied_over_the_live_log_is_noticed() {
    let _s = serial();
    let d = dir("cp");
    let other = d.join("other.nlog");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&other).start().unwrap();
    for i in 0..50_000u64 {
        nanolog::warn!("other {}", i);
    }
    drop(logger);
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    log(0..100);
    std::fs::copy(&other, &base).unwrap();
    log(100..200);
    let stats = logger.stats();
    drop(logger);
    assert_eq!(stats.lost, 100, "{stats:?}");
    let text = String::from_utf8(run(&["decode", p(&base)]).stdout).unwrap();
    assert!(!text.contains("other"), "{text}");
    let recs: Vec<u64> = text
        .lines()
        .filter_map(|l| l.rsplit_once("rec ").and_then(|(_, n)| n.parse().ok()))
        .collect();
    assert_eq!(recs, (100..200).collect::<Vec<_>>());
    assert!(text.contains("DROPPED") || text.contains("lost"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A log path that is a symbolic link: the set is written beside the file
/// it points to (a restart's kept file and every rolled file are regular
/// files there, which retention can delete), and the link goes on naming
/// the live file, for readers and followers of the link.
#[cfg(unix)]
#[test]
fn a_log_path_that_is_a_link_keeps_the_set_beside_its_target() {
    let _s = serial();
    let d = dir("link");
    std::fs::create_dir_all(d.join("data")).unwrap();
    let target = d.join("data/app.nlog");
    let link = d.join("app.nlog");
    std::os::unix::fs::symlink("data/app.nlog", &link).unwrap();
    for run in 0..2u64 {
        let logger = nanolog::Logger::builder()
            .path(&link)
            .rotate_bytes(8 << 10)
            .max_files(4)
            .start()
            .unwrap();
        log(run * 10_000..(run + 1) * 10_000);
        drop(logger);
    }
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let kept = finished_files_keyed(&target).unwrap();
    assert_eq!(kept.len(), 4, "{kept:?}");
    for (_, f, _) in &kept {
        assert!(std::fs::symlink_metadata(f).unwrap().is_file(), "{f:?}");
    }
    // Nothing of the set beside the link.
    let beside: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("Z.nlog"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
    // The link names the live file (it reads as the target), and the set
    // through it decodes to the last record (in the live file, or in the
    // newest finished one if the last write rolled).
    assert_eq!(
        LogFile::open(&link).unwrap().header(),
        LogFile::open(&target).unwrap().header()
    );
    let mut args = vec!["decode".to_owned()];
    args.extend(kept.iter().map(|(_, f, _)| p(f).to_owned()));
    args.push(p(&link).to_owned());
    let text = String::from_utf8(Command::new(BIN).args(&args).output().unwrap().stdout).unwrap();
    assert!(text.trim_end().ends_with("rec 19999"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Two followers on one cursor: the second is refused while the first
/// holds it (both would send everything), and may take it once the first
/// has gone.
#[test]
fn a_cursor_held_by_a_follower_is_refused_to_another() {
    let _s = serial();
    let d = dir("held");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    log(0..10);
    drop(logger);
    let cursor = d.join("app.cursor");
    let mut first = follow_with_cursor(&base, &cursor);
    let o = run(&["decode", "-f", "--cursor", p(&cursor), p(&base)]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("in use by another follower"), "{e}");
    assert!(e.contains(&first.id().to_string()), "names the holder: {e}");
    let _ = first.kill();
    let _ = first.wait();
    // Free again: a follower takes it (and is stopped here by a kill).
    let mut second = Command::new(BIN)
        .args(["decode", "-f", "--cursor", p(&cursor), p(&base)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        second.try_wait().unwrap().is_none(),
        "the freed cursor is refused"
    );
    let _ = second.kill();
    let _ = second.wait();
    let _ = std::fs::remove_dir_all(&d);
}

/// Each file says how many records the set held before it (its SET entry)
/// and how many it holds (its END entry), across rolls and across runs,
/// one that ended cleanly and one whose file lost its end (a crash): the
/// counts a follower uses to tell how many records deleted files held.
#[test]
fn files_count_the_records_before_them_across_runs() {
    let _s = serial();
    let d = dir("counts");
    let base = d.join("app.nlog");
    let start = || {
        nanolog::Logger::builder()
            .path(&base)
            .rotate_bytes(4 << 10)
            .start()
            .unwrap()
    };
    let logger = start();
    log(0..3_000);
    drop(logger);
    // The second run's live file loses its last entries (the clock pair
    // and END), as if the process had died after its last write.
    let logger = start();
    log(3_000..5_000);
    // Written before the stop, so the stop's last write holds only the
    // clock pair and END (too small to be compressed: whole entries here).
    logger.flush().unwrap();
    drop(logger);
    let bytes = std::fs::read(&base).unwrap();
    let mut at = 48;
    let mut last_clock = None;
    while at + 9 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        if bytes[at] == 4 {
            last_clock = Some(at);
        }
        // (No block after the last clock pair: the cut loses no record.)
        if bytes[at] == 12 {
            last_clock = None;
        }
        at += 9 + len;
    }
    let cut = last_clock.expect("a clock pair after the last compressed block");
    std::fs::write(&base, &bytes[..cut]).unwrap();
    let logger = start();
    log(5_000..6_000);
    drop(logger);

    let mut files: Vec<(u64, PathBuf)> = finished_files_keyed(&base)
        .unwrap()
        .into_iter()
        .map(|(k, f, _)| (k.seq().unwrap(), f))
        .collect();
    let live = LogFile::open(&base).unwrap();
    files.push((live.seq().unwrap(), base.clone()));
    files.sort();
    assert!(files.len() >= 6, "{} files", files.len());
    let mut held = 0u64;
    for (seq, f) in &files {
        let l = LogFile::open(f).unwrap();
        assert_eq!(l.records_before(), Some(held), "file {seq}");
        let n = count(&l) as u64;
        // The file cut short says nothing of its records; the others do.
        if l.is_complete() {
            assert_eq!(l.records_total(), Some(n), "file {seq}");
        } else {
            assert_eq!(l.records_total(), None, "file {seq}");
        }
        held += n;
    }
    assert_eq!(held, 6_000);
    let _ = std::fs::remove_dir_all(&d);
}

/// `nanolog ARGS` with the read budget at `budget_mb` (`None`: the
/// default): its standard output and error.
fn with_budget(args: &[&str], budget_mb: Option<&str>) -> (String, String) {
    let mut c = Command::new(BIN);
    c.args(args).env_remove("NANOLOG_READ_WINDOW_MB");
    if let Some(mb) = budget_mb {
        c.env("NANOLOG_READ_WINDOW_MB", mb);
    }
    let o = c.output().expect("run nanolog");
    assert!(
        o.status.success(),
        "nanolog {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// A set whose entries pass the read budget (`NANOLOG_READ_WINDOW_MB`; 0
/// here) is read a window at a time, each group of files whose records
/// interleave merged alone: the output is the one of a read of every file
/// at once, byte for byte, sorted or not, as text or JSON, with a thread
/// chosen by name and a limit, the live file cut inside its END; `stats`
/// (read a file at a time) by site,
/// thread and level, in intervals, and an argument's distribution; and
/// `export`'s files. The set: four named threads and a writer
/// rolling every 16 KiB (records drained after a roll fall in the next
/// file, so neighbouring files interleave), a pattern naming its files.
#[test]
fn a_set_past_the_read_budget_reads_a_window_at_a_time_to_the_same_output() {
    let _s = serial();
    let d = dir("windows");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(16 << 10)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    for i in 0..20_000u64 {
                        nanolog::info!("worker {} rec {} of {}", t, i, "the set");
                        if i % 5_000 == 0 {
                            nanolog::warn!("worker {} at {}", t, i);
                        }
                    }
                })
                .unwrap();
        }
    });
    drop(logger);
    // The live file without its END (its writer killed, or still writing):
    // kept from the first look, as a roll may take it away from its path.
    let live = std::fs::OpenOptions::new().write(true).open(&base).unwrap();
    let len = live.metadata().unwrap().len();
    live.set_len(len - 3).unwrap();
    drop(live);
    let files = finished_files_keyed(&base).unwrap();
    // (How many depends on how many batches the flusher compressed.)
    assert!(files.len() >= 8, "{} files", files.len());
    let pattern = d.join("app*.nlog");
    let pattern = p(&pattern);
    let reads: [&[&str]; 10] = [
        &["decode", pattern],
        &["decode", "--format", "json", pattern],
        &["decode", "--unsorted", pattern],
        &["decode", "--thread", "worker-2", "--level", "warn", pattern],
        &["decode", "--limit", "30000", pattern],
        &["stats", pattern],
        &["stats", "--by", "thread", "--format", "json", pattern],
        &["stats", "--by", "level", "--every", "1ms", pattern],
        &[
            "stats",
            "--fmt",
            "worker {} rec {} of {}",
            "--arg",
            "1",
            pattern,
        ],
        &[
            "stats",
            "--site",
            "rec",
            "--arg",
            "1",
            "--histogram",
            "--format",
            "json",
            pattern,
        ],
    ];
    // Budgets: 0 (each group of interleaving files alone), and nine
    // tenths of the set (windows of a quarter of that: groups read
    // together).
    let on_disk: u64 = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let most = format!("{:.6}", on_disk as f64 * 0.9 / f64::from(1 << 20));
    for args in reads {
        let (all, all_err) = with_budget(args, None);
        assert!(!all.is_empty(), "{args:?} printed nothing");
        for budget in ["0", most.as_str()] {
            let (windowed, windowed_err) = with_budget(args, Some(budget));
            assert!(
                all == windowed,
                "{args:?}, budget {budget}: the windowed read differs"
            );
            assert_eq!(all_err, windowed_err, "{args:?}, budget {budget}: warnings");
        }
    }
    let (all, _) = with_budget(&["decode", pattern], None);
    assert_eq!(all.lines().count(), 80_000 + 16);
    // `export` reads the same way: the same JSON lines, the same Parquet.
    for ext in ["jsonl", "parquet"] {
        let (a, w) = (
            d.join(format!("all.{ext}")),
            d.join(format!("windowed.{ext}")),
        );
        with_budget(&["export", "-o", p(&a), pattern], None);
        with_budget(&["export", "-o", p(&w), pattern], Some("0"));
        let (a, w) = (std::fs::read(&a).unwrap(), std::fs::read(&w).unwrap());
        assert!(a.len() > 1000, "{ext}: {} bytes", a.len());
        assert!(a == w, "export {ext}: the windowed read differs");
    }
    let _ = std::fs::remove_dir_all(&d);
}
