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
