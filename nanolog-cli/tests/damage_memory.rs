//! Memory stays bounded whatever a file's blocks state (issue #46): 80
//! BLOCK entries that are valid LZ4, each stating and really inflating to
//! 64 MiB (of zeros, from about 260 KB each: 5 GiB from 21 MB), stand in a
//! real compressed log before its own entries. `nanolog decode` reports
//! them, prints every real record, and its peak resident memory (the
//! kernel's account of that process, `wait4`) stays under 256 MB.

use std::path::Path;
use std::process::{Command, Stdio};

use nanolog_runtime::wire::{entry_crc, put_varint, tag, FRAME_LEN, HEADER_LEN};

mod common;
use common::{fresh_dir, p, serial, SpawnReaped, BIN};

/// A compressed log of `n` records at `path`.
fn real_log(path: &Path, n: u64) {
    let _s = serial();
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(true)
        .start()
        .unwrap();
    for i in 0..n {
        nanolog::info!("served {} in {} us", "/api/v1/orders", i);
        if i % 200 == 199 {
            logger.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    drop(logger);
}

/// A BLOCK entry (codec 1, LZ4) stating `raw` bytes, with `packed` as its
/// compressed bytes.
fn block_entry(raw: usize, packed: &[u8]) -> Vec<u8> {
    let mut body = vec![1u8];
    put_varint(&mut body, raw as u64);
    body.extend_from_slice(packed);
    let mut e = vec![tag::BLOCK];
    e.extend_from_slice(&(body.len() as u32).to_le_bytes());
    e.extend_from_slice(&entry_crc(tag::BLOCK, &body).to_le_bytes());
    e.extend_from_slice(&body);
    assert_eq!(e.len(), FRAME_LEN + body.len());
    e
}

#[test]
fn blocks_that_inflate_to_gigabytes_of_junk_cost_a_wave_of_memory() {
    let dir = fresh_dir("damage", "memory");
    let log = dir.join("real.nlog");
    real_log(&log, 2_000);
    let real = std::fs::read(&log).unwrap();
    let raw = 64 << 20;
    let packed = lz4_flex::block::compress(&vec![0u8; raw]);
    let junk = block_entry(raw, &packed);
    let mut file = real[..HEADER_LEN].to_vec();
    for _ in 0..80 {
        file.extend_from_slice(&junk);
    }
    file.extend_from_slice(&real[HEADER_LEN..]);
    let crafted = dir.join("crafted.nlog");
    std::fs::write(&crafted, &file).unwrap();
    assert!(file.len() < 32 << 20, "{} bytes", file.len());

    let out = dir.join("out.txt");
    let err = dir.join("err.txt");
    let child = Command::new(BIN)
        .args(["decode", p(&crafted)])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null())
        .spawn_reaped();
    let (status, peak_mb) = common::wait_peak(&child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "decode: status {status}: {}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    let printed = std::fs::read_to_string(&out).unwrap();
    let warnings = std::fs::read_to_string(&err).unwrap();
    assert_eq!(printed.lines().count(), 2_000, "every real record");
    assert_eq!(
        warnings
            .matches("a compressed block that does not inflate to whole entries")
            .count(),
        80,
        "each junk block is reported: {warnings}"
    );
    eprintln!("decode of the crafted file: peak resident memory {peak_mb:.0} MB");
    assert!(peak_mb <= 256.0, "peak resident memory {peak_mb:.0} MB");
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `nanolog ARGS` to its end, at most `secs` (a hang fails the test in
/// bounded time); its exit status, stdout and stderr.
fn run_bounded(args: &[&str], secs: u64) -> (std::process::ExitStatus, String, String) {
    let dir = std::env::temp_dir();
    let tag = format!("{}-{}", std::process::id(), args.len());
    let (out, err) = (
        dir.join(format!("nanolog-bounded-{tag}.out")),
        dir.join(format!("nanolog-bounded-{tag}.err")),
    );
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn_reaped();
    let status = common::wait(&mut child, secs, &format!("nanolog {args:?}"));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let got = (status, read(&out), read(&err));
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&err);
    got
}

/// 20 MB of `0x01` bytes, every offset of which reads as a frame header of
/// tag 1 stating a 16.8 MB body, between a real log's header and its
/// entries: the search for the next whole entry checksums a bounded amount
/// a byte (it was every stated length at every offset: minutes), and
/// every record after the damage is read.
#[test]
fn twenty_megabytes_of_entry_like_bytes_are_searched_in_linear_time() {
    let dir = fresh_dir("damage", "resync");
    let log = dir.join("real.nlog");
    real_log(&log, 2_000);
    let real = std::fs::read(&log).unwrap();
    let mut file = real[..HEADER_LEN].to_vec();
    file.extend(std::iter::repeat_n(0x01u8, 20 << 20));
    file.extend_from_slice(&real[HEADER_LEN..]);
    let crafted = dir.join("ones.nlog");
    std::fs::write(&crafted, &file).unwrap();
    for args in [vec!["info", p(&crafted)], vec!["decode", p(&crafted)]] {
        let (status, out, err) = run_bounded(&args, 120);
        assert!(status.success(), "{args:?}: {err}");
        assert!(
            err.contains("skipped"),
            "{args:?}: the damage is reported: {err}"
        );
        if args[0] == "decode" {
            assert_eq!(out.lines().count(), 2_000, "every record after the damage");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
