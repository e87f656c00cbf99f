//! Starting, stopping, levels, full rings, oversize records, panicking
//! Display impls, thread names and rotation, as a user sees them.
//!
//! One logger runs per process, so these tests take turns.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::{Level, Logger, OnFull};

use common::{serial, temp};

fn messages(path: &PathBuf) -> Vec<String> {
    let files = [LogFile::open(path).unwrap()];
    Merge::new(&files, Filter::default())
        .map(|e| match e {
            Event::Record(r) => r.message(),
            Event::Gap(g, _) => format!("<gap {}>", g.count),
        })
        .collect()
}

#[test]
fn second_logger_is_refused_and_restart_after_drop_works() {
    let _s = serial();
    let path = temp("restart");
    let first = Logger::builder().path(&path).start().unwrap();
    let err = Logger::builder()
        .path(temp("restart-2"))
        .start()
        .unwrap_err();
    assert!(matches!(err, nanolog::Error::AlreadyRunning), "{err}");
    nanolog::info!("first {}", 1);
    drop(first);
    assert_eq!(messages(&path), ["first 1"]);

    let second = Logger::builder().path(&path).start().unwrap();
    nanolog::info!("second {}", 2);
    drop(second);
    assert_eq!(messages(&path), ["second 2"]);
    common::remove_with_kept(&path);
}

#[test]
fn logging_without_a_logger_is_silent_and_does_not_evaluate_arguments() {
    let _s = serial();
    let calls = AtomicU32::new(0);
    let arg = || calls.fetch_add(1, Ordering::Relaxed);
    nanolog::info!("nobody listens {}", arg());
    nanolog::error!("still nobody {}", arg());
    nanolog::flush().unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 0);

    let path = temp("levels");
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Info)
        .start()
        .unwrap();
    nanolog::debug!("hidden {}", arg());
    assert_eq!(
        calls.load(Ordering::Relaxed),
        0,
        "a disabled call evaluated its argument"
    );
    nanolog::info!("shown {}", arg());
    nanolog::set_level(Level::Debug);
    nanolog::debug!("now shown {}", arg());
    nanolog::set_level(Level::Error);
    nanolog::warn!("hidden again {}", arg());
    nanolog::set_level(Level::Info);
    drop(logger);
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    assert_eq!(messages(&path), ["shown 0", "now shown 1"]);
    // After the logger is gone: silent again, arguments not evaluated.
    nanolog::error!("after stop {}", arg());
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    common::remove_with_kept(&path);
}

#[test]
fn drop_mode_counts_what_it_drops_and_the_log_reports_the_gaps() {
    let _s = serial();
    let path = temp("drop");
    let logger = Logger::builder()
        .path(&path)
        .staging_capacity(256)
        .on_full(OnFull::Drop)
        .start()
        .unwrap();
    const N: u64 = 200_000;
    for i in 0..N {
        nanolog::info!("burst {} {}", i, "padding to make the record longer");
    }
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert!(
        stats.dropped > 0,
        "a 256-byte ring should overflow: {stats:?}"
    );
    assert_eq!(stats.logged + stats.dropped, N, "{stats:?}");

    let files = [LogFile::open(&path).unwrap()];
    let (mut records, mut gap_total) = (0u64, 0u64);
    for ev in Merge::new(&files, Filter::default()) {
        match ev {
            Event::Record(_) => records += 1,
            Event::Gap(g, _) => {
                assert!(g.first_unix_ns <= g.last_unix_ns);
                gap_total += g.count;
            }
        }
    }
    assert_eq!(records, stats.logged);
    assert_eq!(
        gap_total, stats.dropped,
        "every dropped record is reported in the log"
    );
    common::remove_with_kept(&path);
}

#[test]
fn record_larger_than_the_ring_is_dropped_counted_and_reported() {
    let _s = serial();
    let path = temp("oversize");
    let logger = Logger::builder()
        .path(&path)
        .staging_capacity(256)
        .on_full(OnFull::Block)
        .start()
        .unwrap();
    let long = "x".repeat(1000);
    nanolog::info!("before");
    nanolog::info!("too long: {}", long);
    nanolog::info!("after {}", 1);
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert_eq!((stats.dropped, stats.oversize, stats.logged), (1, 1, 2));
    assert_eq!(messages(&path), ["before", "<gap 1>", "after 1"]);
    common::remove_with_kept(&path);
}

#[test]
fn panicking_display_is_logged_as_a_marker() {
    struct Bad;
    impl std::fmt::Display for Bad {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("broken Display")
        }
    }
    let _s = serial();
    let path = temp("panic");
    let logger = Logger::builder().path(&path).start().unwrap();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    nanolog::info!("value: {} then {}", Bad, 7);
    std::panic::set_hook(hook);
    nanolog::info!("still logging");
    drop(logger);
    assert_eq!(
        messages(&path),
        ["value: <Display panicked> then 7", "still logging"]
    );
    common::remove_with_kept(&path);
}

#[test]
fn thread_names_reach_the_log() {
    let _s = serial();
    let path = temp("names");
    let logger = Logger::builder().path(&path).start().unwrap();
    std::thread::Builder::new()
        .name("std-named".into())
        .spawn(|| nanolog::info!("from std name"))
        .unwrap()
        .join()
        .unwrap();
    std::thread::spawn(|| {
        nanolog::set_thread_name("custom");
        nanolog::info!("from custom name");
    })
    .join()
    .unwrap();
    std::thread::spawn(|| {
        nanolog::info!("before rename");
        nanolog::set_thread_name("renamed");
        nanolog::info!("after rename");
    })
    .join()
    .unwrap();
    // Another thread's flush covers this thread's records.
    std::thread::spawn(|| nanolog::flush().unwrap())
        .join()
        .unwrap();
    drop(logger);
    let files = [LogFile::open(&path).unwrap()];
    let names: Vec<(String, Option<String>)> = Merge::new(&files, Filter::default())
        .filter_map(|e| match e {
            Event::Record(r) => Some((r.message(), r.thread_name().map(str::to_owned))),
            _ => None,
        })
        .collect();
    assert_eq!(names[0], ("from std name".into(), Some("std-named".into())));
    assert_eq!(names[1], ("from custom name".into(), Some("custom".into())));
    // A rename applies to the thread as a whole in the file's dictionary.
    assert_eq!(names[3], ("after rename".into(), Some("renamed".into())));
    common::remove_with_kept(&path);
}

#[test]
fn rotation_splits_the_log_into_self_contained_files() {
    let _s = serial();
    let base = temp("rotate");
    let logger = Logger::builder()
        .path(&base)
        .rotate_bytes(64 << 10)
        .start()
        .unwrap();
    const N: u64 = 100_000;
    for i in 0..N {
        nanolog::info!(
            "rotating record {} {}",
            i,
            "with some text to fill the files faster"
        );
        if i % 10_000 == 0 {
            logger.flush().unwrap();
        }
    }
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert!(stats.files > 2, "{stats:?}");
    // The finished files in time order, then the live one at the path.
    let mut paths: Vec<PathBuf> = nanolog::reader::finished_files(&base)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    paths.push(base.clone());
    assert_eq!(paths.len() as u64, stats.files);
    let files: Vec<LogFile> = paths.iter().map(|p| LogFile::open(p).unwrap()).collect();
    for (i, f) in files.iter().enumerate() {
        assert!(f.is_complete(), "file {i} not closed");
        assert_eq!(f.rotated_to().is_some(), i + 1 < files.len());
        let has_records = f.records().next().is_some();
        assert!(
            !has_records || f.sites().count() >= 1,
            "file {i} has records but no dictionary"
        );
    }
    let mut expect = 0u64;
    for ev in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = ev {
            assert_eq!(r.arg(0), Some(nanolog::reader::Value::Uint(expect as u128)));
            expect += 1;
        }
    }
    assert_eq!(expect, N);
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn unwritable_path_is_a_clear_error() {
    let _s = serial();
    // A directory that cannot be made: its parent is a file. (A missing
    // directory is made, as the next test checks.)
    let file = temp("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("x.nlog");
    let err = Logger::builder().path(&bad).start().unwrap_err();
    assert!(err.to_string().contains(&*bad.to_string_lossy()), "{err}");
    let _ = std::fs::remove_file(&file);
    // The failed start leaves nothing running.
    let ok = Logger::builder().path(temp("after-error")).start().unwrap();
    drop(ok);
    let _ = std::fs::remove_file(temp("after-error"));
}

/// `.path("logs/app.nlog")` with no `logs/` yet: the directories are made
/// (as tracing-appender and log4rs do), not a NotFound error.
#[test]
fn missing_directories_of_the_path_are_created() {
    let _s = serial();
    let root = std::env::temp_dir().join(format!("nanolog-mkdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let path = root.join("logs").join("deeper").join("app.nlog");
    let logger = Logger::builder().path(&path).start().unwrap();
    nanolog::info!("made {}", 1);
    drop(logger);
    let f = nanolog::reader::LogFile::open(&path).unwrap();
    assert_eq!(f.sites().count(), 1);
    let _ = std::fs::remove_dir_all(&root);
}

/// The files of `dir` whose names start with `prefix` and end in `Z.nlog`
/// (an earlier run's file, kept by a later start), sorted by name.
fn kept(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(prefix) && n.ends_with("Z.nlog")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_new_run_keeps_the_previous_runs_file() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("nanolog-keep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.nlog");
    for run in ["first", "second", "third"] {
        let logger = Logger::builder().path(&path).start().unwrap();
        nanolog::info!("run {}", run);
        drop(logger);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(messages(&path), ["run third"]);
    let earlier = kept(&dir, "app.");
    assert_eq!(earlier.len(), 2, "{earlier:?}");
    // Named by their start times, so the names sort in run order.
    assert_eq!(messages(&earlier[0]), ["run first"]);
    assert_eq!(messages(&earlier[1]), ["run second"]);

    // A file that is not a log is kept too (named by its modification time).
    std::fs::write(&path, b"not a log").unwrap();
    let logger = Logger::builder().path(&path).start().unwrap();
    drop(logger);
    let all = kept(&dir, "app.");
    assert_eq!(all.len(), 3);
    assert!(all
        .iter()
        .any(|p| std::fs::read(p).unwrap() == b"not a log"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The benchmark hook that times the two sides of a ring apart: a held
/// flusher writes nothing, a release writes everything, and stopping the
/// logger while held still loses nothing.
#[test]
fn a_held_flusher_writes_nothing_until_released_or_stopped() {
    let _s = serial();
    let path = temp("held");
    let logger = Logger::builder().path(&path).start().unwrap();
    logger.__hold_flusher(true);
    for i in 0..1000u32 {
        nanolog::info!("held {}", i);
    }
    // Long enough for a running flusher to take them many times over (it
    // sleeps at most its 1 ms wake delay between passes).
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(logger.stats().logged, 0);
    logger.__hold_flusher(false);
    logger.flush().unwrap();
    assert_eq!(logger.stats().logged, 1000);

    logger.__hold_flusher(true);
    nanolog::info!("held at stop {}", 1);
    drop(logger);
    let got = messages(&path);
    assert_eq!(got.len(), 1001);
    assert_eq!(got[999], "held 999");
    assert_eq!(got[1000], "held at stop 1");
    common::remove_with_kept(&path);
}

/// `nanolog::sync()` (README, Guarantees): the free function the facade
/// exports, a flush plus `fdatasync`; nothing to do with no logger running.
#[test]
fn the_free_sync_function_flushes_to_disk() {
    let _s = serial();
    nanolog::sync().unwrap();
    let path = temp("free-sync");
    let logger = Logger::builder().path(&path).start().unwrap();
    nanolog::info!("synced {}", 1);
    nanolog::sync().unwrap();
    let f = nanolog::reader::LogFile::open(&path).unwrap();
    assert_eq!(f.records().count(), 1);
    drop(logger);
    common::remove_with_kept(&path);
}
