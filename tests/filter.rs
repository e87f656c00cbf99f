//! Per-target directives (`RUST_LOG` syntax), targets, run-time changes of
//! filter, and named fields, as a user sees them in the decoded log.
//!
//! One logger runs per process, so these tests take turns.

mod common;
use common::SpawnReaped;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::{Level, Logger};

use common::{serial, temp};

/// `target message` of every record.
fn records(path: &Path) -> Vec<String> {
    let files = [LogFile::open(path).unwrap()];
    Merge::new(&files, Filter::default())
        .filter_map(|e| match e {
            Event::Record(r) => Some(format!("{} {}", r.site().target, r.message())),
            Event::Gap(..) => None,
        })
        .collect()
}

mod db {
    pub fn log_all(tag: &str) {
        nanolog::debug!("db debug {}", tag);
        nanolog::info!("db info {}", tag);
        pool::log_all(tag);
    }
    pub mod pool {
        pub fn log_all(tag: &str) {
            nanolog::warn!("pool warn {}", tag);
            nanolog::error!("pool error {}", tag);
        }
    }
}

mod quiet {
    pub fn log_all(tag: &str) {
        nanolog::error!("quiet error {}", tag);
    }
}

fn log_everything(tag: &str) {
    nanolog::debug!("top debug {}", tag);
    nanolog::info!("top info {}", tag);
    nanolog::warn!("top warn {}", tag);
    nanolog::info!(target: "audit", "audit info {}", tag);
    nanolog::log!(target: "audit", Level::Debug, "audit debug {}", tag);
    db::log_all(tag);
    quiet::log_all(tag);
}

#[test]
fn directives_pick_the_longest_matching_target_prefix() {
    let _s = serial();
    let path = temp("filter-prefix");
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Info)
        .filter("warn,filter::db=debug,filter::db::pool=error,filter::quiet=off,audit=trace")
        .start()
        .unwrap();
    log_everything("a");
    drop(logger);
    assert_eq!(
        records(&path),
        [
            "filter top warn a",
            "audit audit info a",
            "audit audit debug a",
            "filter::db db debug a",
            "filter::db db info a",
            "filter::db::pool pool error a",
        ]
    );
    common::remove_with_kept(&path);
}

#[test]
fn without_a_bare_level_the_builder_level_is_the_default() {
    let _s = serial();
    let path = temp("filter-default");
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Warn)
        .filter("filter::db::pool=off")
        .start()
        .unwrap();
    log_everything("b");
    drop(logger);
    assert_eq!(
        records(&path),
        ["filter top warn b", "filter::quiet quiet error b"]
    );
    common::remove_with_kept(&path);
}

#[test]
fn invalid_directives_in_code_are_config_errors() {
    let _s = serial();
    for bad in ["filter=loud", "a=b=c", "info/regex"] {
        let err = Logger::builder()
            .path(temp("filter-invalid"))
            .filter(bad)
            .start()
            .unwrap_err();
        assert!(matches!(err, nanolog::Error::Config(_)), "{bad}: {err}");
        assert!(err.to_string().contains("directive"), "{err}");
    }
    assert!(nanolog::set_filter("x=loud").is_err());
}

#[test]
fn set_filter_and_set_level_change_sites_already_called() {
    let _s = serial();
    let path = temp("filter-runtime");
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Info)
        .start()
        .unwrap();
    log_everything("1"); // every site is now registered and decided
    nanolog::set_filter("error,filter::db=debug").unwrap();
    log_everything("2");
    nanolog::set_level(Level::Trace); // the default; filter::db keeps debug
    nanolog::debug!("after set_level {}", 3);
    nanolog::set_filter("off").unwrap();
    log_everything("4");
    drop(logger);
    assert_eq!(
        records(&path),
        [
            "filter top info 1",
            "filter top warn 1",
            "audit audit info 1",
            "filter::db db info 1",
            "filter::db::pool pool warn 1",
            "filter::db::pool pool error 1",
            "filter::quiet quiet error 1",
            "filter::db db debug 2",
            "filter::db db info 2",
            "filter::db::pool pool warn 2",
            "filter::db::pool pool error 2",
            "filter::quiet quiet error 2",
            "filter after set_level 3",
        ]
    );
    common::remove_with_kept(&path);
}

#[test]
fn a_stopped_logger_disables_every_site_and_the_next_one_decides_again() {
    let _s = serial();
    let path = temp("filter-restart");
    let logger = Logger::builder()
        .path(&path)
        .filter("trace")
        .start()
        .unwrap();
    drop(logger);
    let mut evaluated = 0;
    nanolog::error!("no logger {}", {
        evaluated += 1;
        evaluated
    });
    assert_eq!(evaluated, 0, "arguments evaluated with no logger");
    let logger = Logger::builder()
        .path(&path)
        .filter("off,audit=debug")
        .start()
        .unwrap();
    log_everything("c");
    drop(logger);
    assert_eq!(
        records(&path),
        ["audit audit info c", "audit audit debug c"]
    );
    common::remove_with_kept(&path);
}

#[test]
fn named_arguments_and_captures_keep_their_names() {
    let _s = serial();
    let path = temp("filter-names");
    let logger = Logger::builder().path(&path).start().unwrap();
    let pct = 93.25;
    nanolog::info!("queue {name} at {pct:.1}% ({})", 7, name = "orders");
    drop(logger);
    let file = LogFile::open(&path).unwrap();
    let rec = file.records().next().unwrap().unwrap();
    assert_eq!(rec.message(), "queue orders at 93.2% (7)");
    let site = rec.site();
    let names: Vec<_> = (0..3).map(|i| site.name(i)).collect();
    assert_eq!(names, [None, Some("name"), Some("pct")]);
    common::remove_with_kept(&path);
}

/// Run by `rust_log_is_used_and_its_invalid_directives_skipped` in a child
/// process with `RUST_LOG` set.
#[test]
#[ignore = "run in a child process by another test"]
fn child_with_rust_log() {
    let Some(path) = std::env::var_os("NANOLOG_FILTER_CHILD_LOG") else {
        return;
    };
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Error)
        .filter("off")
        .filter_env("RUST_LOG")
        .start()
        .unwrap();
    log_everything("env");
    drop(logger);
}

#[test]
fn rust_log_is_used_and_its_invalid_directives_skipped() {
    let path = temp("filter-env");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_with_rust_log", "--ignored", "--nocapture"])
        .env("NANOLOG_FILTER_CHILD_LOG", &path)
        .env(
            "RUST_LOG",
            "filter::db::pool=loud,filter::quiet=error,audit",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    // A hung child fails the test in two minutes rather than hanging it.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the child logger did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<_> = stderr.lines().filter(|l| l.contains("nanolog:")).collect();
    assert_eq!(
        warnings,
        ["nanolog: RUST_LOG: skipping invalid directive `filter::db::pool=loud`"]
    );
    // RUST_LOG replaces `filter`/`level`: only its targets log.
    assert_eq!(
        records(&path),
        [
            "audit audit info env",
            "audit audit debug env",
            "filter::quiet quiet error env"
        ]
    );
    common::remove_with_kept(&path);
}

/// Run by `rust_log_with_no_valid_directive_keeps_the_builders_filter` in a
/// child process with an unusable `RUST_LOG`.
#[test]
#[ignore = "run in a child process by another test"]
fn child_with_unusable_rust_log() {
    let Some(path) = std::env::var_os("NANOLOG_FILTER_CHILD_LOG2") else {
        return;
    };
    let logger = Logger::builder()
        .path(&path)
        .level(Level::Warn)
        .filter("filter::db=debug")
        .filter_env("RUST_LOG")
        .start()
        .unwrap();
    log_everything("env");
    drop(logger);
}

/// A `RUST_LOG` whose directives are all invalid keeps the builder's filter
/// (not "errors only") and says so in one stderr line.
#[test]
fn rust_log_with_no_valid_directive_keeps_the_builders_filter() {
    let path = temp("filter-env-unusable");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_with_unusable_rust_log",
            "--ignored",
            "--nocapture",
        ])
        .env("NANOLOG_FILTER_CHILD_LOG2", &path)
        .env("RUST_LOG", "app=loud,x/y")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the child logger did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<_> = stderr.lines().filter(|l| l.contains("nanolog:")).collect();
    assert_eq!(
        warnings,
        ["nanolog: RUST_LOG: no valid directive in `app=loud,x/y`; keeping the configured filter"]
    );
    // The builder's filter: warn by default, debug for filter::db.
    assert_eq!(
        records(&path),
        [
            "filter top warn env",
            "filter::db db debug env",
            "filter::db db info env",
            "filter::db::pool pool warn env",
            "filter::db::pool pool error env",
            "filter::quiet quiet error env"
        ]
    );
    common::remove_with_kept(&path);
}
