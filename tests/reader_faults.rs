//! A reader survives the file changing under it: cut back while mapped
//! (no SIGBUS, nothing decoded from the lost bytes), or replaced by another
//! run at the same path (never read with the old run's dictionary).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use nanolog::reader::{Event, Filter, LogFile, Merge, Refresh};
use nanolog::Logger;

use common::{serial, temp};

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
    let _s = serial();
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
    let _s = serial();
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

/// A compressed file past the reader's resident budget keeps only its
/// blocks' dictionary entries after indexing: its other blocks are
/// inflated again when read. Overwritten in place between the two (another
/// program rewriting it), a block that no longer inflates is reported as
/// damage, once per extent it held, by every way of reading (the iterator,
/// batches, a scan of extents), and the records outside it are read.
#[test]
fn a_block_that_no_longer_inflates_when_read_again_is_reported() {
    let _s = serial();
    let path = temp("lazy-rewritten");
    let logger = Logger::builder()
        .path(&path)
        .compress(true)
        .start()
        .unwrap();
    for i in 0..20_000u32 {
        nanolog::info!(
            "compressed record {} of {}",
            i,
            "a block of words that repeat"
        );
        if i % 500 == 499 {
            // Paced: a flusher with time to spare compresses its batches.
            logger.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    drop(logger);
    nanolog::reader::__set_read_resident(0);
    let log = LogFile::open(&path).unwrap();
    nanolog::reader::__set_read_resident(32 << 20);
    assert!(
        log.raw_len() > log.valid_len() + (32 << 10),
        "too few blocks compressed: {} bytes, {} inflated",
        log.valid_len(),
        log.raw_len()
    );
    // The second half of the file's bytes, zeroed in place (the map sees
    // the file's new bytes).
    let len = log.valid_len();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&vec![0u8; len - len / 2], (len / 2) as u64)
            .unwrap();
    }
    let gone = |e: &String| e.contains("no longer inflates");
    // A flusher kept busy (a loaded machine) writes some batches as they
    // are: zeroed, those extents are damage of their own kind.
    let damage = |e: &String| e.contains("malformed extent");
    let (mut records, mut errors) = (0, Vec::new());
    for r in log.records() {
        match r {
            Ok(_) => records += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(records > 0 && records < 20_000, "{records} records read");
    assert!(
        errors.iter().any(gone) && errors.iter().all(damage),
        "{errors:?}"
    );

    let files = [log];
    let mut batches = Merge::new(&files, Filter::default()).batches();
    let mut batch = nanolog::reader::Batch::with_capacity(256);
    let mut merged = 0;
    loop {
        batch.clear();
        let more = batches.fill(&mut batch, 256);
        merged += batch
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Record(_)))
            .count();
        if !more {
            break;
        }
    }
    let merge_errors: Vec<String> = batches
        .take_errors()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(merged, records, "the same records read by batches");
    assert_eq!(merge_errors.len(), errors.len(), "{merge_errors:?}");

    let (mut scanned, mut scan_errors) = (0, 0);
    files[0].scan_extents(0..files[0].extent_count(), |r| match r {
        Ok(_) => scanned += 1,
        Err(e) => {
            assert!(damage(&e.to_string()), "{e}");
            scan_errors += 1;
        }
    });
    assert_eq!((scanned, scan_errors), (records, errors.len()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}
