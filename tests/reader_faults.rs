//! A reader survives the file changing under it: cut back while mapped
//! (no SIGBUS, nothing decoded from the lost bytes), or replaced by another
//! run at the same path (never read with the old run's dictionary).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use nanolog::reader::{Event, Filter, LogFile, Merge, Refresh};
use nanolog::Logger;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nanolog-{name}-{}.nlog", std::process::id()))
}

/// One logger per process: the tests of this file take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Writes `n` records, none in compressed blocks: a block is inflated when
/// the file is opened, so a cut under the map cannot take its records, and
/// whether the flusher compresses a batch depends on how busy it is (a
/// loaded machine made some blocks, whose records past the cut were then
/// read: not the contiguous prefix the cut test expects).
fn write_log(path: &PathBuf, what: &str, n: u32) {
    let logger = Logger::builder()
        .path(path)
        .compress(false)
        .start()
        .unwrap();
    for i in 0..n {
        nanolog::info!("{} record {} of {}", what, i, n);
    }
    drop(logger);
}

#[test]
fn a_file_cut_back_while_mapped_is_reported_not_fatal() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp("shrink");
    write_log(&path, "FIRST", 300_000);
    let before = std::fs::metadata(&path).unwrap().len();
    assert!(
        before > 1 << 20,
        "the log spans many pages ({before} bytes)"
    );
    let files = [LogFile::open(&path).unwrap()];
    assert!(!files[0].shrank());
    // Another program cuts the file back to a few pages, under our map.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(16 << 10)
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut errors = 0;
    let mut merge = Merge::new(&files, Filter::default());
    for e in merge.by_ref() {
        if let Event::Record(r) = e {
            let m = r.message();
            // Only whole, true records: nothing decoded from zeroed bytes.
            let i: u32 = m
                .strip_prefix("FIRST record ")
                .and_then(|t| t.strip_suffix(" of 300000"))
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("a record not logged: {m:?}"));
            assert!(seen.insert(i), "record {i} twice");
        }
    }
    errors += merge.take_errors().len();
    assert!(files[0].shrank(), "the shrink is reported");
    assert!(errors > 0, "the lost records are reported as errors");
    assert!(seen.len() < 300_000);
    // The records before the cut are there, in order.
    assert!(seen.iter().copied().eq(0..seen.len() as u32));
    common::remove_with_kept(&path);
}

#[test]
fn refresh_reports_a_new_run_at_the_same_path() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp("replaced");
    write_log(&path, "FIRST", 1000);
    let mut log = LogFile::open(&path).unwrap();
    assert_eq!(log.refresh().unwrap(), Refresh::Unchanged);
    write_log(&path, "SECOND RUN", 100_000);
    assert_eq!(log.refresh().unwrap(), Refresh::Replaced);
    // The old view is unchanged; the path opened again reads the new run.
    let again = LogFile::open(&path).unwrap();
    let first = again.records().next().unwrap().unwrap().message();
    assert_eq!(first, "SECOND RUN record 0 of 100000");
    common::remove_with_kept(&path);
}
