//! Any bytes given to the reader as a log: it indexes, merges, renders and
//! aggregates them, reporting damage as errors and warnings, never
//! panicking and never looping.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nanolog_runtime::reader::{Event, Filter, LogFile, Merge};

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
});
