//! Any bytes as a log that a follower sees written in two steps: the first
//! two bytes of the input choose where the writer's first write ends; the
//! rest is the file. A live reader opens the first part, is refreshed once
//! the rest is there, and settles. Never a panic or a hang; and for a file
//! a fresh reader finds whole (no warning), the live reader takes the same
//! records with no warning: a write seen half done is waited for, never
//! taken for damage.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nanolog_runtime::reader::{Event, Filter, LogFile, Merge};

/// Every record of `file` in file order, rendered with its thread and
/// spans.
fn lines(file: LogFile) -> Vec<String> {
    let files = [file];
    let mut out = Vec::new();
    let mut merge = Merge::unsorted(&files, Filter::default());
    for e in merge.by_ref() {
        if let Event::Record(r) = e {
            let mut s = format!("{} {} ", r.tick(), r.thread());
            r.for_each_span(|sp| {
                s.push_str(sp.name());
                s.push('/');
            });
            r.render(&mut s);
            out.push(s);
        }
    }
    let _ = merge.take_errors();
    out
}

fuzz_target!(|data: &[u8]| {
    let [a, b, file @ ..] = data else {
        return;
    };
    let cut = usize::from(u16::from_le_bytes([*a, *b])).min(file.len());
    let path = std::env::temp_dir().join(format!("nanolog-fuzz-live-{}.nlog", std::process::id()));
    if std::fs::write(&path, &file[..cut]).is_err() {
        return;
    }
    let live = LogFile::open_live(&path);
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &file[cut..]));
    let Ok(mut live) = live else {
        let _ = std::fs::remove_file(&path);
        return;
    };
    if appended.is_err() {
        let _ = std::fs::remove_file(&path);
        return;
    }
    let _ = live.refresh();
    live.settle();
    let _ = std::fs::remove_file(&path);
    let Ok(fresh) = LogFile::from_bytes("fuzz.nlog", file.to_vec()) else {
        return;
    };
    if !fresh.warnings().is_empty() {
        let _ = lines(live);
        return;
    }
    assert!(
        live.warnings().is_empty(),
        "cut at {cut}: the live reader warned: {:?}",
        live.warnings()
    );
    assert_eq!(lines(live), lines(fresh), "cut at {cut}");
});
