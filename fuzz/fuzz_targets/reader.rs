//! Any bytes given to the reader as a log: it indexes, merges, renders and
//! aggregates them, reporting damage as errors and warnings, never
//! panicking and never looping. (Run with `NANOLOG_READ_RESIDENT_MB=0` too:
//! every block is then inflated again as it is read, through batches and
//! `scan_extents`.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use nanolog_runtime::reader::{Batch, Event, Filter, LogFile, Merge};

fuzz_target!(|data: &[u8]| {
    let Ok(file) = LogFile::from_bytes("fuzz.nlog", data.to_vec()) else {
        return;
    };
    let _ = file.warnings();
    let _ = file.gaps();
    let _ = file.threads().count();
    let files = [file];
    let mut out = String::new();
    for sorted in [true, false] {
        let mut merge = if sorted {
            Merge::new(&files, Filter::default())
        } else {
            Merge::unsorted(&files, Filter::default())
        };
        for e in merge.by_ref() {
            if let Event::Record(r) = e {
                out.clear();
                r.render(&mut out);
                let _ = r.unix_ns();
                let _ = r.args().count();
            }
        }
        let _ = merge.take_errors();
    }
    for r in files[0].records().flatten() {
        let _ = r.arg(0);
    }
    let mut batches = Merge::new(&files, Filter::default()).batches();
    let mut batch = Batch::with_capacity(64);
    loop {
        batch.clear();
        let more = batches.fill(&mut batch, 64);
        for e in batch.events() {
            if let Event::Record(r) = e {
                out.clear();
                r.render(&mut out);
            }
        }
        if !more {
            break;
        }
    }
    let _ = batches.take_errors();
    files[0].scan_extents(0..usize::MAX, |r| {
        if let Ok(r) = r {
            let _ = r.arg(0);
        }
    });
});
