//! `decode --since/--until`, `--level` and `-n` of a rolled set read only
//! what the files' INDEX entries say may hold the answer (issue #70), and
//! print exactly the lines the whole set's decode prints for them: windows
//! at random over a set of several files written by two runs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;
use common::{fresh_dir, ok, p, serial};

/// Two runs of a logger into `base`, rolling every 256 KiB, each logging
/// for `secs` from two threads in batches: several files, restarts among
/// them, most writes indexed.
fn write_set(base: &Path, secs: f64) {
    for run in 0..2 {
        let logger = nanolog::Logger::builder()
            .path(base)
            .rotate_bytes(256 << 10)
            .start()
            .unwrap();
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let worker = std::thread::Builder::new()
            .name("worker".into())
            .spawn(move || {
                let mut i = 0u64;
                while Instant::now() < until {
                    for _ in 0..200 {
                        i += 1;
                        nanolog::info!("run {} worker request {} served", run, i);
                    }
                    std::thread::sleep(Duration::from_millis(4));
                }
            })
            .unwrap();
        let mut i = 0u64;
        while Instant::now() < until {
            for _ in 0..200 {
                i += 1;
                if i.is_multiple_of(50) {
                    nanolog::warn!("run {} main request {} slow", run, i);
                } else {
                    nanolog::info!("run {} main request {} served", run, i);
                }
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        worker.join().unwrap();
        drop(logger);
    }
}

/// The `.nlog` files in `dir` (a set's), as arguments.
fn set_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "nlog"))
        .map(|f| f.to_str().unwrap().to_owned())
        .collect()
}

/// `nanolog ARGS FILES...`, which must succeed: its output.
fn on_set(args: &[&str], files: &[String]) -> String {
    let mut a: Vec<&str> = args.to_vec();
    a.extend(files.iter().map(String::as_str));
    ok(&a)
}

/// A text line's time (`2026-11-29 09:05:02.000464413Z ...`) as RFC 3339,
/// which sorts as the time does.
fn time_of(line: &str) -> String {
    line[..30].replacen(' ', "T", 1)
}

#[test]
fn windows_levels_and_last_lines_of_a_set_print_what_the_whole_decode_prints() {
    let _s = serial();
    let dir = fresh_dir("index", "set");
    let base = dir.join("app.nlog");
    write_set(&base, 1.5);
    let files = set_files(&dir);
    assert!(files.len() >= 4, "{files:?}");
    // The writes are indexed (an INDEX entry, tag 13, ahead of their records).
    let indexed: usize = files
        .iter()
        .map(|f| {
            let b = std::fs::read(f).unwrap();
            let (mut at, mut n) = (48, 0);
            while at + 9 <= b.len() {
                n += usize::from(b[at] == 13);
                at += 9 + u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap()) as usize;
            }
            n
        })
        .sum();
    assert!(indexed > 50, "{indexed} INDEX entries");
    let with = |args: &[&str]| on_set(args, &files);
    let all: Vec<String> = with(&["decode"]).lines().map(str::to_owned).collect();
    assert!(all.len() > 100_000, "{} lines", all.len());
    let first = time_of(&all[0]);
    let last = time_of(&all[all.len() - 1]);
    // Windows between lines picked at random (a small generator).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut pick = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for k in 0..8 {
        let a = pick(all.len());
        let b = (a + [30, 3_000, 30_000][k % 3]).min(all.len() - 1);
        let (since, until) = (time_of(&all[a]), time_of(&all[b]));
        let level = k % 2 == 1;
        let mut args = vec!["decode", "--since", &since, "--until", &until];
        if level {
            args.extend(["--level", "warn"]);
        }
        let got = with(&args);
        let want: Vec<&str> = all
            .iter()
            .filter(|l| {
                let t = time_of(l);
                t >= since && t <= until && (!level || l.contains(" WARN["))
            })
            .map(String::as_str)
            .collect();
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "{args:?}");
        // `export` of the same window: a row for each of those lines, in
        // the same order.
        if k < 3 {
            let out = dir.join(format!("window-{k}.jsonl"));
            let mut e = vec!["export", "--format", "jsonl", "-o", p(&out)];
            e.extend(&args[1..]);
            with(&e);
            let rows = std::fs::read_to_string(&out).unwrap();
            let msgs: Vec<String> = rows
                .lines()
                .map(|l| {
                    let j: serde_json::Value = serde_json::from_str(l).unwrap();
                    j["msg"].as_str().unwrap().to_owned()
                })
                .collect();
            assert_eq!(msgs.len(), want.len(), "{e:?}");
            for (m, line) in msgs.iter().zip(&want) {
                assert!(line.ends_with(m.as_str()), "{line} / {m}");
            }
        }
    }
    // Open at one end.
    let mid = time_of(&all[all.len() / 2]);
    let got = with(&["decode", "--since", &mid]);
    let want: Vec<&str> = all
        .iter()
        .filter(|l| time_of(l) >= mid)
        .map(String::as_str)
        .collect();
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    let got = with(&["decode", "--until", &first]);
    assert_eq!(got.lines().next(), Some(all[0].as_str()));
    let got = with(&["decode", "--since", &last]);
    assert_eq!(got.lines().last(), Some(all[all.len() - 1].as_str()));
    // The last lines.
    for n in ["1", "20", "5000"] {
        let got = with(&["decode", "-n", n]);
        let n: usize = n.parse().unwrap();
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            all[all.len() - n..]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            "-n {n}"
        );
    }
    let one = &files[0];
    let whole: Vec<String> = ok(&["decode", one]).lines().map(str::to_owned).collect();
    let got = ok(&["decode", "-n", "20", one]);
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        whole[whole.len() - 20..]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    // ... without reading its older writes: a byte of the first indexed
    // write's records damaged is found by the whole decode, not by `-n 20`
    // (from e014745 to the commit after d179320 `-n` alone read a file
    // whole, and printed the same lines).
    let mut b = std::fs::read(one).unwrap();
    let (mut at, mut run) = (48, None);
    while at + 9 <= b.len() {
        let next = at + 9 + u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap()) as usize;
        if b[at] == 13 {
            run = Some(next);
            break;
        }
        at = next;
    }
    let run = run.expect("an indexed write");
    b[run + 9 + 8] ^= 0x55;
    let damaged = dir.join("damaged.nlog");
    std::fs::write(&damaged, &b).unwrap();
    let read_whole = common::run(&["decode", p(&damaged)]);
    assert!(
        String::from_utf8_lossy(&read_whole.stderr).contains("corrupt"),
        "{}",
        String::from_utf8_lossy(&read_whole.stderr)
    );
    let last = common::succeed(&["decode", "-n", "20", p(&damaged)]);
    assert_eq!(common::stdout(&last), got);
    assert!(
        last.stderr.is_empty(),
        "-n 20 read the damaged write: {}",
        String::from_utf8_lossy(&last.stderr)
    );
    std::fs::remove_file(&damaged).unwrap();
    // `--thread ID` (the runs naming none of it left out) prints the whole
    // decode's lines of that id (`LEVEL[name:id]`), in every run of the
    // set (an id is a thread's within its run: the two runs' workers may
    // have different ones).
    for id in 1..=2 {
        let by_id = with(&["decode", "--thread", &id.to_string()]);
        let tag = (format!(":{id}]: "), format!("[{id}]: "));
        let want: Vec<&str> = all
            .iter()
            .filter(|l| l.contains(&tag.0) || l.contains(&tag.1))
            .map(String::as_str)
            .collect();
        assert!(want.len() > 10_000, "thread {id}: {} lines", want.len());
        assert_eq!(by_id.lines().collect::<Vec<_>>(), want, "--thread {id}");
    }
    // `--thread NAME`: looked up in each file (the runs of none of its ids
    // there left out), alone and with a window.
    let worker: Vec<&str> = all
        .iter()
        .filter(|l| l.contains("[worker:"))
        .map(String::as_str)
        .collect();
    assert!(
        worker.len() > 10_000,
        "{} lines of the worker",
        worker.len()
    );
    let by_name = with(&["decode", "--thread", "worker"]);
    assert_eq!(
        by_name.lines().collect::<Vec<_>>(),
        worker,
        "--thread worker"
    );
    let late: Vec<&str> = worker
        .iter()
        .copied()
        .filter(|l| time_of(l) >= mid)
        .collect();
    let by_name = with(&["decode", "--thread", "worker", "--since", &mid]);
    assert_eq!(
        by_name.lines().collect::<Vec<_>>(),
        late,
        "--thread worker --since"
    );
    info_of_finished_files_is_what_their_records_count(&dir, &files);
    stats_of_finished_files_is_what_their_records_count(&dir, &files);
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// `stats` of finished files, answered from their TOTALS entries (the
/// records, bytes and time range of each site and thread, as their writer
/// counted them) without their records, prints what it prints reading
/// them all: each file and the whole set, against copies whose TOTALS
/// entries were made a reserved tag (read whole), for each grouping, a
/// site selection (by thread too: each thread's records of each site) and
/// JSON.
fn stats_of_finished_files_is_what_their_records_count(dir: &Path, files: &[String]) {
    let copies = dir.join("copies");
    std::fs::create_dir_all(&copies).unwrap();
    let mut copied = Vec::new();
    let mut answered = 0;
    for f in files {
        let mut b = std::fs::read(f).unwrap();
        totals_reserved(&mut b);
        let copy = copies.join(Path::new(f).file_name().unwrap());
        std::fs::write(&copy, &b).unwrap();
        copied.push(p(&copy).to_owned());
        let head =
            nanolog::reader::LogFile::open_for(Path::new(f), &nanolog::reader::Want::nothing())
                .unwrap();
        answered += usize::from(
            head.totals()
                .is_some_and(|t| t.detailed && t.pairs.is_some()),
        );
    }
    assert!(answered >= 3, "{answered} files answered by their totals");
    let questions: [&[&str]; 9] = [
        &["stats"],
        &["stats", "--by", "thread"],
        &["stats", "--by", "level"],
        &["stats", "--site", "slow"],
        &["stats", "--by", "level", "--site", "served"],
        &["stats", "--format", "json"],
        &["stats", "--by", "thread", "--format", "json"],
        &["stats", "--by", "thread", "--site", "slow|served"],
        &[
            "stats", "--by", "thread", "--site", "served", "--format", "json",
        ],
    ];
    let same = |quick: String, whole: String, what: &str| {
        assert!(quick.lines().count() >= 2, "{what}: {quick}");
        assert_eq!(quick, whole.replace(p(&copies), p(dir)), "{what}");
    };
    for q in questions {
        same(
            on_set(q, files),
            on_set(q, &copied),
            &format!("{q:?} of the set"),
        );
        for (f, c) in files.iter().zip(&copied).take(3) {
            let mut a = q.to_vec();
            let mut b = q.to_vec();
            a.push(f);
            b.push(c);
            same(ok(&a), ok(&b), &format!("{q:?} {f}"));
        }
    }
    // A file whose pairs of thread and site do not add up to its sites'
    // counts (one pair's records made one more, the entry's checksum made
    // again) keeps the rest of its TOTALS and is read for the pairs'
    // question: the answer the whole read gives, not the pairs'.
    let odd = copies.join("odd.nlog");
    let mut b = std::fs::read(&files[0]).unwrap();
    assert!(pairs_made_odd(&mut b), "{} has pairs", files[0]);
    std::fs::write(&odd, &b).unwrap();
    let head = nanolog::reader::LogFile::open_for(&odd, &nanolog::reader::Want::nothing()).unwrap();
    let t = head.totals().expect("its TOTALS taken");
    assert!(t.detailed && t.pairs.is_none());
    let q = ["stats", "--by", "thread", "--site", "served"];
    let whole = ok(&[&q[..], &[copied[0].as_str()]].concat());
    let read = ok(&[&q[..], &[p(&odd)]].concat());
    assert!(whole.lines().count() >= 2, "{whole}");
    assert_eq!(
        read.replace(p(&odd), "FILE"),
        whole.replace(&copied[0], "FILE")
    );
}

/// Makes the pairs of the last TOTALS entry of `file` not add up (its
/// first pair's records one more), the entry's checksum made again;
/// whether it had pairs.
fn pairs_made_odd(file: &mut Vec<u8>) -> bool {
    let mut at = 48;
    let mut last = None;
    while at + 9 <= file.len() {
        let len = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap()) as usize;
        if at + 9 + len > file.len() {
            break;
        }
        if file[at] == 14 {
            last = Some((at, len));
        }
        at += 9 + len;
    }
    let Some((at, len)) = last else {
        return false;
    };
    let body = &file[at + 9..at + 9 + len];
    let mut t = nanolog_runtime::wire::totals::get_totals(body).unwrap();
    let Some(pairs) = t.pairs.as_mut() else {
        return false;
    };
    let Some(first) = pairs.values_mut().next() else {
        return false;
    };
    first.records += 1;
    let mut new = Vec::new();
    nanolog_runtime::wire::totals::put_totals(&mut new, &t);
    let crc = nanolog_runtime::wire::entry_crc(14, &new);
    let mut frame = vec![14];
    frame.extend_from_slice(&(new.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc.to_le_bytes());
    frame.extend_from_slice(&new);
    file.splice(at..at + 9 + len, frame);
    true
}

/// Makes every whole TOTALS entry (tag 14) of `file` one of a tag reserved
/// for later revisions (15, its checksum made again): a reader skips them
/// and reads the file whole. Returns how many it changed.
fn totals_reserved(file: &mut [u8]) -> usize {
    made_reserved(file, 14)
}

/// Makes every whole entry of tag `tag` of `file` one of a tag reserved for
/// later revisions (15, its checksum made again). Returns how many.
fn made_reserved(file: &mut [u8], tag: u8) -> usize {
    entries_edited(file, |t, _| (t == tag).then_some(15))
}

/// Calls `edit` with the tag and body of each whole top-level entry of
/// `file`: where it returns a tag, the entry takes it, its body as `edit`
/// left it, and its checksum is made again (so it reads as intact).
/// Returns how many it changed.
fn entries_edited(file: &mut [u8], mut edit: impl FnMut(u8, &mut [u8]) -> Option<u8>) -> usize {
    let mut changed = 0;
    let mut at = 48;
    while at + 9 <= file.len() {
        let len = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap()) as usize;
        if at + 9 + len > file.len() {
            break;
        }
        let body = at + 9..at + 9 + len;
        if let Some(t) = edit(file[at], &mut file[body.clone()]) {
            file[at] = t;
            let crc = nanolog_runtime::wire::entry_crc(t, &file[body]);
            file[at + 5..at + 9].copy_from_slice(&crc.to_le_bytes());
            changed += 1;
        }
        at += 9 + len;
    }
    changed
}

/// `info` of a finished file, answered from its TOTALS entry without its
/// records, prints what it prints reading them all: each file of the set
/// against a copy whose TOTALS entry was made one of a tag reserved for
/// later revisions (skipped: the copy is read whole). Those rolled away
/// end with theirs outside blocks.
fn info_of_finished_files_is_what_their_records_count(dir: &Path, files: &[String]) {
    let copy = dir.join("copy.nlog");
    let mut compared = 0;
    for f in files {
        let mut b = std::fs::read(f).unwrap();
        if totals_reserved(&mut b) == 0 {
            continue;
        }
        std::fs::write(&copy, &b).unwrap();
        for format in ["text", "json"] {
            let quick = ok(&["info", "--format", format, f]);
            let whole = ok(&["info", "--format", format, p(&copy)]);
            if format == "text" {
                let records = quick.lines().find_map(|l| l.strip_prefix("records:"));
                assert!(records.is_some_and(|n| n.trim() != "0"), "{quick}");
            }
            assert_eq!(
                quick.replace(f.as_str(), "FILE"),
                whole.replace(p(&copy), "FILE"),
                "{f}"
            );
        }
        compared += 1;
    }
    assert!(compared >= 3, "{compared} files compared");
}

/// `info` and `stats` of a killed writer's file (no END, so no TOTALS of
/// the whole file) read from its last checkpoint on (a TOTALS entry its
/// writer puts after a write every 16 MiB; every 32 KiB here) and print
/// what they print reading every record: cuts of a file at random, each
/// against the same cut with its checkpoints made a reserved tag (read
/// whole).
#[test]
fn info_of_a_killed_writers_file_from_its_last_checkpoint_is_what_its_records_count() {
    let _s = serial();
    let dir = fresh_dir("index", "checkpoints");
    let base = dir.join("app.nlog");
    nanolog_runtime::__set_checkpoint_bytes(32 << 10);
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    let until = Instant::now() + Duration::from_millis(800);
    let mut i = 0u64;
    while Instant::now() < until {
        for _ in 0..200 {
            i += 1;
            if i.is_multiple_of(50) {
                nanolog::warn!("request {} slow", i);
            } else {
                nanolog::info!("request {} served in {} us", i, i % 977);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(logger);
    nanolog_runtime::__set_checkpoint_bytes(0);
    let bytes = std::fs::read(&base).unwrap();
    let (cut, whole) = (dir.join("cut.nlog"), dir.join("whole.nlog"));
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..6 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = bytes.len() / 2 + (state % (bytes.len() as u64 / 2)) as usize;
        let b = &bytes[..len];
        std::fs::write(&cut, b).unwrap();
        let mut w = b.to_vec();
        let checkpoints = totals_reserved(&mut w);
        assert!(
            checkpoints > 3,
            "{checkpoints} checkpoints before byte {len}"
        );
        std::fs::write(&whole, &w).unwrap();
        for format in ["text", "json"] {
            let quick = ok(&["info", "--format", format, p(&cut)]);
            let read = ok(&["info", "--format", format, p(&whole)]);
            assert_eq!(
                quick.replace(p(&cut), "FILE"),
                read.replace(p(&whole), "FILE"),
                "cut at {len}"
            );
        }
        // `stats` too: the checkpoint's counts of each site and thread,
        // and the records after it read.
        let questions: [&[&str]; 5] = [
            &["stats"],
            &["stats", "--by", "thread", "--format", "json"],
            &["stats", "--by", "level"],
            &["stats", "--site", "slow"],
            &["stats", "--by", "thread", "--site", "slow"],
        ];
        for q in questions {
            let quick = ok(&[q, &[p(&cut)]].concat());
            let read = ok(&[q, &[p(&whole)]].concat());
            assert!(quick.contains("count"), "{q:?}: {quick}");
            assert_eq!(
                quick.replace(p(&cut), "FILE"),
                read.replace(p(&whole), "FILE"),
                "{q:?} of the cut at {len}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// `--grep` over messages with and without arguments (those without are
/// decided once per call site, their records stepped over unread when it
/// does not match) prints the lines of the whole decode whose message
/// matches.
#[test]
fn grep_over_static_and_formatted_messages_prints_the_whole_decodes_matching_lines() {
    let _s = serial();
    let dir = fresh_dir("index", "grep");
    let base = dir.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..3000u64 {
        match i % 3 {
            0 => nanolog::info!("static alpha"),
            1 => nanolog::warn!("static beta"),
            _ => nanolog::info!("value {} alpha", i),
        }
    }
    drop(logger);
    let all = ok(&["decode", p(&base)]);
    for re in ["alpha", "beta", "^static", "value 1", "zzz", "a$"] {
        let r = regex::Regex::new(re).unwrap();
        let want: Vec<&str> = all
            .lines()
            .filter(|l| r.is_match(l.split_once("]: ").unwrap().1))
            .collect();
        let got = ok(&["decode", "--grep", re, p(&base)]);
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "--grep {re}");
        let warn = ok(&["decode", "--grep", re, "--level", "warn", p(&base)]);
        let want_warn: Vec<&str> = want
            .iter()
            .copied()
            .filter(|l| l.contains(" WARN"))
            .collect();
        assert_eq!(
            warn.lines().collect::<Vec<_>>(),
            want_warn,
            "--grep {re} --level warn"
        );
    }
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// `--grep` of a finished file leaves out the writes whose INDEX entries
/// name none of the call sites that may match (a site without arguments is
/// decided by its own text), and prints what a reading of every write
/// prints (a copy whose INDEX entries were made a reserved tag); a write it
/// leaves out is not read at all: a byte flipped inside one of its records
/// makes the whole decode warn, and `--grep` of the rare message not.
#[test]
fn grep_of_a_rare_message_reads_its_writes_and_prints_what_the_whole_file_does() {
    let _s = serial();
    let dir = fresh_dir("index", "grep_sites");
    let base = dir.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .compress(false)
        .start()
        .unwrap();
    for batch in 0..120u64 {
        for i in 0..300u64 {
            nanolog::info!("request {} served in {} us", i, (i * batch) % 977);
            if i % 100 == 0 {
                nanolog::info!("pool has room");
            }
        }
        if batch % 15 == 7 {
            nanolog::warn!("disk full, retrying");
            nanolog::error!("disk full: {} bytes lost", batch);
        }
        logger.flush().unwrap();
    }
    drop(logger);
    let mut b = std::fs::read(&base).unwrap();
    let whole = dir.join("whole.nlog");
    assert!(made_reserved(&mut b, 13) > 50, "the writes are indexed");
    std::fs::write(&whole, &b).unwrap();
    let all = ok(&["decode", p(&whole)]);
    for re in [
        "disk full",
        "^disk full, retrying$",
        "room",
        "served",
        "zzz",
    ] {
        let r = regex::Regex::new(re).unwrap();
        let want: Vec<&str> = all
            .lines()
            .filter(|l| r.is_match(l.split_once("]: ").unwrap().1))
            .collect();
        assert_eq!(
            ok(&["decode", "--grep", re, p(&base)])
                .lines()
                .collect::<Vec<_>>(),
            want,
            "--grep {re}"
        );
        let json = |f: &Path| ok(&["decode", "--grep", re, "--format", "json", p(f)]);
        assert_eq!(
            json(&base),
            json(&whole).replace(p(&whole), p(&base)),
            "{re}"
        );
    }
    assert_eq!(
        ok(&["decode", "--grep", "disk full", p(&base)])
            .lines()
            .count(),
        16
    );
    // A byte flipped in the body of an EXTENT in the first writes (no
    // "disk full" before the eighth batch of 120).
    let mut b = std::fs::read(&base).unwrap();
    let (lo, hi) = (b.len() * 2 / 100, b.len() * 5 / 100);
    let mut at = 48;
    let mut flipped = false;
    while at + 9 <= b.len() {
        let len = u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap()) as usize;
        if b[at] == 3 && at >= lo && at < hi && len > 64 {
            b[at + 9 + len / 2] ^= 0x5a;
            flipped = true;
            break;
        }
        at += 9 + len;
    }
    assert!(flipped, "an extent in the file's first writes");
    let damaged = dir.join("damaged.nlog");
    std::fs::write(&damaged, &b).unwrap();
    let out = |args: &[&str]| {
        let o = common::run(args);
        assert!(o.status.success(), "{args:?}");
        (
            String::from_utf8(o.stdout).unwrap(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    let (_, warned) = out(&["decode", p(&damaged)]);
    assert!(warned.contains("warning"), "the whole decode: {warned}");
    let (lines, quiet) = out(&["decode", "--grep", "disk full", p(&damaged)]);
    assert_eq!(quiet, "", "the writes of other sites are not read");
    assert_eq!(
        lines,
        ok(&["decode", "--grep", "disk full", p(&base)]).replace(p(&base), p(&damaged))
    );
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// `--thread NAME` over a set of two runs in which that thread had a
/// different id (ids are a run's own: numbered as threads first log):
/// every record of the thread by that name, and no other thread's, though
/// the other run's thread of the same id is another.
#[test]
fn thread_by_name_over_runs_that_numbered_it_apart_prints_that_thread_alone() {
    let _s = serial();
    let dir = fresh_dir("index", "thread-names");
    let base = dir.join("app.nlog");
    for run in 0..2u64 {
        let logger = nanolog::Logger::builder().path(&base).start().unwrap();
        // Run 0: main logs first (id 1), the worker second; run 1: the
        // worker first (id 1), main after it.
        if run == 0 {
            for i in 0..50u64 {
                nanolog::info!("run {} main {}", run, i);
            }
        }
        std::thread::Builder::new()
            .name("worker".into())
            .spawn(move || {
                for i in 0..50u64 {
                    nanolog::info!("run {} worker {}", run, i);
                }
            })
            .unwrap()
            .join()
            .unwrap();
        if run == 1 {
            for i in 0..50u64 {
                nanolog::info!("run {} main {}", run, i);
            }
        }
        drop(logger);
    }
    let files = set_files(&dir);
    let args = |extra: &[&str]| {
        let mut a = vec!["decode", "--format", "json"];
        a.extend_from_slice(extra);
        a.extend(files.iter().map(String::as_str));
        ok(&a)
    };
    let all = args(&[]);
    let ids: std::collections::BTreeSet<(u64, u64)> = all
        .lines()
        .filter(|l| l.contains("\"worker\""))
        .map(|l| {
            let run = l.contains("run 1") as u64;
            let id = l.split("\"thread\":").nth(1).unwrap();
            (run, id.split(',').next().unwrap().parse().unwrap())
        })
        .collect();
    assert_eq!(ids.len(), 2, "the worker's id in each run: {ids:?}");
    assert_ne!(ids.first().unwrap().1, ids.last().unwrap().1, "{ids:?}");
    let want: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("\"thread_name\":\"worker\""))
        .collect();
    assert_eq!(want.len(), 100);
    let got = args(&["--thread", "worker"]);
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// Puts the wall clock back as it was, even if the test fails.
struct Stepped(i64);

impl Drop for Stepped {
    fn drop(&mut self) {
        nanolog_runtime::clock::__step_wall_clock(-self.0);
    }
}

/// A wall clock stepped back an hour while a set rolls: the writer's clock
/// pairs do not go back (the records after the step print at the last time
/// before it until the clock catches up, the later files' headers too).
/// Windows over those held times, and after, leave out no record the whole
/// decode prints in them; `-n` prints its last lines.
#[test]
fn windows_over_a_wall_clock_stepped_back_print_what_the_whole_decode_prints() {
    let _s = serial();
    let dir = fresh_dir("index", "stepped");
    let base = dir.join("app.nlog");
    // (Plain: each write's 200 records take the 512 bytes that get them an
    // INDEX entry.)
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(32 << 10)
        .compress(false)
        .start()
        .unwrap();
    let batches = |from: u64, n: u64| {
        for b in from..from + n {
            for i in 0..200 {
                nanolog::info!("batch {} record {}", b, i);
            }
            logger.flush().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    batches(0, 150);
    let _back = {
        nanolog_runtime::clock::__step_wall_clock(-3_600_000_000_000);
        Stepped(-3_600_000_000_000)
    };
    batches(150, 150);
    drop(logger);
    let files = set_files(&dir);
    assert!(files.len() >= 4, "{files:?}");
    let with = |args: &[&str]| on_set(args, &files);
    let all: Vec<String> = with(&["decode"]).lines().map(str::to_owned).collect();
    assert_eq!(all.len(), 300 * 200);
    // Windows from the last lines before the step into the held times
    // after it, and later ones.
    let at = |batch: u64| {
        all.iter()
            .position(|l| l.contains(&format!("batch {batch} record 0")))
            .unwrap()
    };
    for (a, b) in [
        (at(140), at(160)),
        (at(149), at(151)),
        (at(155), at(170)),
        (at(200), at(260)),
    ] {
        let (since, until) = (time_of(&all[a]), time_of(&all[b]));
        for args in [
            vec!["decode", "--since", &since, "--until", &until],
            vec!["decode", "--since", &since],
        ] {
            let got = with(&args);
            let want: Vec<&str> = all
                .iter()
                .filter(|l| {
                    let t = time_of(l);
                    t >= since && (args.len() == 3 || t <= until)
                })
                .map(String::as_str)
                .collect();
            assert_eq!(got.lines().collect::<Vec<_>>(), want, "{args:?}");
        }
    }
    // `-n`: the whole decode's last lines, though every record after the
    // step has one held time (the runs left out are told by tick).
    for n in [20usize, 5_000, 40_000] {
        let got = with(&["decode", "-n", &n.to_string()]);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            all[all.len() - n..],
            "-n {n}"
        );
    }
    // `info` from the files' ends places their first and last records as
    // the whole reading does, across the step.
    info_of_finished_files_is_what_their_records_count(&dir, &files);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `decode -f -n 20` of a large live file: its last 20 records, read from
/// the last writes its index says hold them (the rest of the file is not
/// read), then what the writer adds.
#[test]
fn follow_with_lines_of_a_large_live_file_reads_its_last_writes_then_follows() {
    use common::SpawnReaped;
    use std::process::{Command, Stdio};

    let _s = serial();
    let dir = fresh_dir("index", "follow");
    let live = dir.join("live.nlog");
    let logger = nanolog::Logger::builder().path(&live).start().unwrap();
    for i in 0..300_000u64 {
        nanolog::info!("bulk {} of the backlog", i);
        if i % 2_000 == 1_999 {
            logger.flush().unwrap();
        }
    }
    logger.flush().unwrap();
    // A clock pair after the last record: the live edge is past it.
    std::thread::sleep(Duration::from_millis(1_500));
    logger.flush().unwrap();
    // The backlog's reading leaves out all but its last writes.
    let mut last = nanolog_runtime::reader::Want::default();
    last.last = Some(20);
    let part = nanolog_runtime::reader::LogFile::open_live_for(&live, &last).unwrap();
    let whole = nanolog_runtime::reader::LogFile::open_live(&live).unwrap();
    assert!(
        part.extent_count() * 10 < whole.extent_count(),
        "{} of {} extents read",
        part.extent_count(),
        whole.extent_count()
    );
    let full: Vec<String> = ok(&["decode", p(&live)])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(full.len(), 300_000);
    let mut child = Command::new(common::BIN)
        .args(["decode", "-f", "-n", "20", p(&live)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped();
    let rx = common::line_reader(&mut child);
    let take = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < n {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => got.push(l),
                Err(_) => break,
            }
        }
        got
    };
    assert_eq!(take(20), full[full.len() - 20..]);
    for i in 0..5u64 {
        nanolog::info!("after {} the backlog", i);
    }
    logger.flush().unwrap();
    let after = take(5);
    assert_eq!(after.len(), 5, "{after:?}");
    for (i, l) in after.iter().enumerate() {
        assert!(l.ends_with(&format!(" after {i} the backlog")), "{l}");
    }
    drop(logger);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// `stats --site` of a finished file leaves out the writes whose INDEX
/// entries name none of the sites it selects, and prints what a reading of
/// every write prints (a copy whose INDEX entries were made a reserved tag):
/// a site logged in a few of the writes only, aggregated, by thread, as a
/// series, and a site in every write.
#[test]
fn stats_of_a_rare_site_reads_its_writes_and_prints_what_the_whole_file_does() {
    let _s = serial();
    let dir = fresh_dir("index", "sites");
    let base = dir.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for batch in 0..120u64 {
        for i in 0..300u64 {
            nanolog::info!("request {} served in {} us", i, (i * batch) % 977);
        }
        if batch % 15 == 7 {
            for i in 0..5u64 {
                nanolog::warn!("gc took {} ms", batch * 10 + i);
            }
        }
        logger.flush().unwrap();
    }
    drop(logger);
    let mut b = std::fs::read(&base).unwrap();
    let whole = dir.join("whole.nlog");
    assert!(made_reserved(&mut b, 13) > 50, "the writes are indexed");
    std::fs::write(&whole, &b).unwrap();
    // The library's reading of the rare site's writes: a few of them.
    let head =
        nanolog::reader::LogFile::open_for(&base, &nanolog::reader::Want::nothing()).unwrap();
    let gc = head
        .sites()
        .find(|s| s.format.starts_with("gc took"))
        .unwrap()
        .id;
    let mut want = nanolog::reader::Want::default();
    want.sites = Some(vec![gc]);
    let part = nanolog::reader::LogFile::open_for(&base, &want).unwrap();
    let all = nanolog::reader::LogFile::open(&base).unwrap();
    assert!(
        part.extent_count() * 4 < all.extent_count(),
        "{} of {} extents read",
        part.extent_count(),
        all.extent_count()
    );
    let gc_ticks = |f: &nanolog::reader::LogFile| {
        f.records()
            .map(Result::unwrap)
            .filter(|r| r.site().id == gc)
            .map(|r| (r.tick(), r.message()))
            .collect::<Vec<_>>()
    };
    assert_eq!(gc_ticks(&part).len(), 40);
    assert_eq!(gc_ticks(&part), gc_ticks(&all));
    let questions: [&[&str]; 5] = [
        &["stats", "--site", "^gc", "--arg", "0"],
        &[
            "stats",
            "--fmt",
            "gc took {} ms",
            "--arg",
            "0",
            "--format",
            "json",
        ],
        &["stats", "--site", "^gc", "--by", "thread"],
        &["stats", "--site", "^gc", "--every", "10ms"],
        &["stats", "--site", "served", "--arg", "1"],
    ];
    for q in questions {
        let quick = ok(&[q, &[p(&base)]].concat());
        let read = ok(&[q, &[p(&whole)]].concat());
        assert!(!quick.trim().is_empty(), "{q:?}");
        assert_eq!(
            quick.replace(p(&base), "FILE"),
            read.replace(p(&whole), "FILE"),
            "{q:?}"
        );
    }
    let _ = std::fs::remove_dir_all(p(&dir));
}

/// A varint (LEB128, as the format's) at `b[*at..]`: its value and length.
fn varint_at(b: &[u8], at: usize) -> (u64, usize) {
    let (mut v, mut n) = (0u64, 0usize);
    loop {
        let byte = b[at + n];
        v |= u64::from(byte & 0x7f) << (7 * n);
        n += 1;
        if byte & 0x80 == 0 {
            return (v, n);
        }
    }
}

/// Applies `edit` to the body of every whole INDEX entry (tag 13) of
/// `file` that counts records, its checksum made again (so it reads as
/// intact); returns how many it changed.
fn index_edited(file: &mut [u8], edit: impl Fn(&mut [u8])) -> usize {
    entries_edited(file, |t, b| {
        let counts = t == 13 && varint_at(b, varint_at(b, 0).1).0 > 0;
        counts.then(|| {
            edit(b);
            13
        })
    })
}

/// An INDEX entry whose checksum holds but whose claims cannot be true
/// (issue #84) is refused with one warning, and the answers it would have
/// changed are the whole decode's: records without a level (`-n 20`
/// printed nothing and `--level error` missed every error, until
/// 2026-12-06), ticks wholly after the file's clock, and more records than
/// the bytes of its write can hold (`-n` printed too few lines).
#[test]
fn impossible_index_entries_are_refused_and_answers_stay_the_whole_decodes() {
    let dir = fresh_dir("index", "impossible");
    let log = dir.join("app.nlog");
    {
        let _s = serial();
        let logger = nanolog::Logger::builder().path(&log).start().unwrap();
        for w in 0..40u64 {
            for i in 0..500u64 {
                match i % 100 {
                    7 => nanolog::error!("write {} record {} failed", w, i),
                    50 => nanolog::warn!("write {} record {} slow", w, i),
                    _ => nanolog::info!("write {} record {} served", w, i),
                }
            }
            // One write a batch: each with its INDEX entry.
            logger.flush().unwrap();
        }
    }
    let original = std::fs::read(&log).unwrap();
    let whole = ok(&["decode", p(&log)]);
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 20_000);
    let tail = |n: usize| lines[lines.len() - n..].join("\n") + "\n";
    let errors: String = lines
        .iter()
        .filter(|l| l.contains(" ERROR"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(errors.lines().count(), 200);
    // The untouched file, for contrast: the index is used and trusted.
    assert_eq!(ok(&["decode", "-n", "20", p(&log)]), tail(20));
    let quiet = common::run(&["decode", "--level", "error", p(&log)]);
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );

    type Edit<'e> = &'e dyn Fn(&mut [u8]);
    let cases: [(&str, Edit); 3] = [
        ("no level", &|b: &mut [u8]| {
            // len, records, first tick, ticks' span, then the levels byte.
            let mut at = 0;
            for _ in 0..4 {
                at += varint_at(b, at).1;
            }
            b[at] = 0;
        }),
        ("ticks after the clock", &|b: &mut [u8]| {
            // The first tick's varint at its largest for its length (a
            // year or more of ticks after the file's last clock pair).
            let mut at = 0;
            for _ in 0..2 {
                at += varint_at(b, at).1;
            }
            let n = varint_at(b, at).1;
            for k in 0..n {
                b[at + k] = if k + 1 < n { 0xff } else { 0x7f };
            }
        }),
        ("records past the bytes", &|b: &mut [u8]| {
            // The records' varint at its largest for its length.
            let at = varint_at(b, 0).1;
            let n = varint_at(b, at).1;
            for k in 0..n {
                b[at + k] = if k + 1 < n { 0xff } else { 0x7f };
            }
        }),
    ];
    for (what, edit) in cases {
        let mut bytes = original.clone();
        let changed = index_edited(&mut bytes, edit);
        assert!(changed >= 20, "{what}: {changed} INDEX entries changed");
        let bad = dir.join("bad.nlog");
        std::fs::write(&bad, &bytes).unwrap();
        for (args, want) in [
            (vec!["decode", "-n", "20"], tail(20)),
            (vec!["decode", "-n", "5000"], tail(5000)),
            (vec!["decode", "--level", "error"], errors.clone()),
        ] {
            let mut a = args.clone();
            a.push(p(&bad));
            let out = common::run(&a);
            assert!(out.status.success(), "{what}: {args:?}");
            assert!(
                common::stdout(&out) == want,
                "{what}: nanolog {args:?} printed {} lines, the whole decode's answer is {}",
                common::stdout(&out).lines().count(),
                want.lines().count()
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                err.matches("index entry").count(),
                1,
                "{what}: {args:?}: one warning expected: {err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
