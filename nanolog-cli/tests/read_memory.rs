//! Reading a large log holds a bounded share of it (issue #70: peak
//! resident memory of `decode`, `stats`, `info` and `export` at most 256
//! MB whatever a file holds). The reader maps a file and walks it twice
//! (its index, then its records); until 2026-12-01 every page it touched
//! stayed mapped, so a process's resident memory grew to every byte of
//! every file it read (a gigabyte set decoded at 1,058 MB, all of it the
//! maps' pages). The pages behind the reader now go back as it passes
//! them: a 160 MB file decodes in tens of MB, where before it took more
//! than the file.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{fresh_dir, p, serial, SpawnReaped, BIN};

/// Records of about 4 KB each (a large string argument), plain, so that the
/// file is large while the test writes it in a moment.
fn large_plain_log(path: &std::path::Path, records: u32) {
    let _s = serial();
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(false)
        .start()
        .unwrap();
    let body: String = (0..4000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    for i in 0..records {
        nanolog::info!("record {} carries {}", i, body.as_str());
        if i % 64 == 63 {
            logger.flush().unwrap();
        }
    }
    drop(logger);
}

/// Runs `nanolog ARGS`, counting the lines it prints, killed after `secs`
/// (a hang fails in bounded time); its lines and peak resident memory, MB.
fn lines_and_peak(args: &[&str], secs: u64) -> (usize, f64) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn_reaped();
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            for _ in 0..secs * 10 {
                if done.load(Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // SAFETY: a plain system call on `pid`, our child, which is not
            // reaped yet: the main thread reaps it only after it set `done`,
            // which this thread checked last.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            true
        })
    };
    let mut lines = 0usize;
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
    // (Its output ended: the watchdog stands down before the child is
    // reaped, so it never signals a pid that may be another's.)
    done.store(true, Ordering::Relaxed);
    let (status, peak) = common::wait_peak(&child);
    assert!(
        !watchdog.join().unwrap(),
        "nanolog {args:?}: killed after {secs} s"
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "nanolog {args:?}: status {status}"
    );
    (lines, peak)
}

#[test]
fn a_large_file_is_read_without_holding_its_pages() {
    let dir = fresh_dir("memory", "large");
    let log = dir.join("large.nlog");
    let records = 40_000;
    large_plain_log(&log, records);
    let size = std::fs::metadata(&log).unwrap().len() as f64 / 1e6;
    assert!(size > 150.0, "the log is {size:.0} MB");

    let (lines, peak) = lines_and_peak(&["decode", p(&log)], 300);
    assert_eq!(lines, records as usize, "every record decoded");
    eprintln!("decode of a {size:.0} MB file: peak resident memory {peak:.0} MB");
    // (Before: more than the file, its pages all mapped.)
    assert!(
        peak < size / 2.0,
        "decode: peak {peak:.0} MB of a {size:.0} MB file"
    );

    // `stats` by thread and time reads every record's head.
    let (_, peak) = lines_and_peak(&["stats", "--by", "thread", "--every", "1ms", p(&log)], 300);
    eprintln!("stats --every of it: peak resident memory {peak:.0} MB");
    assert!(
        peak < size / 2.0,
        "stats: peak {peak:.0} MB of a {size:.0} MB file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rolled set of about 430 MB written by two threads at once, so that
/// each file holds records of the others' time (a thread's ring drained
/// after a roll) and a sorted read merges them all together: small records
/// (a few bytes each, plain), one in 1,000 an error, so that a narrow read
/// finds one a few pages apart, as in a service's log.
fn large_rolled_set(base: &std::path::Path, per_thread: u64) {
    let _s = serial();
    let logger = nanolog::Logger::builder()
        .path(base)
        .compress(false)
        .rotate_bytes(64 << 20)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                for i in 0..per_thread {
                    if i % 1000 == 999 {
                        nanolog::error!("thread {} request {} failed", t, i);
                    } else {
                        nanolog::info!("thread {} request {} served in {} us", t, i, i % 97);
                    }
                }
            });
        }
    });
    drop(logger);
}

/// `--level error` and `--grep` of a ~430 MB set keep memory flat (issue
/// #84): the files are released as the merge passes them. Until
/// 2026-12-06 a narrow read pre-scanned each file a wave of 64 MiB at a
/// time and kept every page it or the renderers touched mapped to the end
/// of the merge of the set's files (peak resident memory ~ the set's
/// size: 464 MB of a 445 MB set, 991 MB of a gigabyte one). The set's
/// records are small and its errors a few pages apart: with records of
/// 4 KB, 8c89141 stayed under the bound too (76 MB), and the test could
/// not fail.
#[test]
fn level_and_grep_of_a_large_rolled_set_hold_a_bounded_share_of_it() {
    let dir = fresh_dir("memory", "rolled");
    let base = dir.join("app.nlog");
    large_rolled_set(&base, 24_000_000);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "nlog"))
        .map(|f| f.to_str().unwrap().to_owned())
        .collect();
    let size: f64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len() as f64)
        .sum::<f64>()
        / 1e6;
    assert!(files.len() >= 6, "{} files", files.len());
    assert!(size > 400.0, "the set is {size:.0} MB");
    // (8c89141: 464 and 465 MB of a 503 MB set of these. Not asserted:
    // `--thread 1 --level error`, 141 MB on that set, 218 MB on 8c89141,
    // 33 MB on one core: issue #84's note.)
    for args in [
        vec!["decode", "--level", "error"],
        vec!["decode", "--grep", "failed"],
    ] {
        let mut a: Vec<&str> = args.clone();
        a.extend(files.iter().map(String::as_str));
        let (lines, peak) = lines_and_peak(&a, 300);
        eprintln!(
            "{args:?} of a {size:.0} MB set: {lines} lines, peak resident memory {peak:.0} MB"
        );
        assert!(lines > 0, "{args:?} printed nothing");
        assert!(
            peak < 128.0,
            "{args:?}: peak {peak:.0} MB of a {size:.0} MB set"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A crafted file of ~1.5 million tiny INDEX entries (each announcing a
/// run of one empty entry of a reserved tag), ~50 MB: a reader keeps a
/// bounded number of index rows whatever a file claims, and refuses the
/// rest of such an index with one warning (issue #84: `-n 20`, `info` and
/// `--level error` of it took 355 MB until 2026-12-06).
#[test]
fn a_file_of_millions_of_tiny_index_entries_is_read_in_bounded_memory() {
    use nanolog_runtime::wire::{self, dict, header::Header, index, tag};
    let dir = fresh_dir("memory", "rows");
    let log = dir.join("rows.nlog");
    let entry = |out: &mut Vec<u8>, t: u8, body: &[u8]| {
        out.push(t);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&wire::entry_crc(t, body).to_le_bytes());
        out.extend_from_slice(body);
    };
    let base_tick = 1_000_000u64;
    let mut f = Header {
        version: wire::VERSION,
        ticks_per_second: 1e9,
        base_tick,
        base_unix_ns: 1_795_000_000_000_000_000,
        pid: u32::MAX - 7,
    }
    .encode()
    .to_vec();
    let mut b = Vec::new();
    dict::put_thread(&mut b, 1, "main");
    entry(&mut f, tag::THREAD, &b);
    let row = index::Row {
        offset: 0,
        len: 9,
        records: 1,
        first_tick: base_tick,
        last_tick: base_tick,
        levels: 1 << 2,
        threads: index::thread_bit(1),
        sites: index::Ids::ANY,
        contexts: index::Ids::ANY,
    };
    b.clear();
    index::put_index(&mut b, &row);
    let mut pair = Vec::new();
    entry(&mut pair, tag::INDEX, &b);
    entry(&mut pair, 31, &[]);
    // Written as it is made: the file is never in this process's memory,
    // whose peak a child's measured peak starts from (see `wait_peak`).
    let n = 50_000_000 / pair.len();
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
        out.write_all(&f).unwrap();
        for _ in 0..n {
            out.write_all(&pair).unwrap();
        }
        out.flush().unwrap();
    }
    let size = std::fs::metadata(&log).unwrap().len() as f64 / 1e6;
    for args in [
        vec!["decode", "-n", "20"],
        vec!["info"],
        vec!["decode", "--level", "error"],
    ] {
        let mut a = args.clone();
        a.push(p(&log));
        let (_, peak) = lines_and_peak(&a, 300);
        eprintln!(
            "{args:?} of {n} INDEX entries ({size:.0} MB): peak resident memory {peak:.0} MB"
        );
        assert!(
            peak < 128.0,
            "{args:?}: peak {peak:.0} MB of a {size:.0} MB file"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
