//! Memory stays bounded whatever a file's blocks state (issue #46): 80
//! BLOCK entries that are valid LZ4, each stating and really inflating to
//! 64 MiB (of zeros, from about 260 KB each: 5 GiB from 21 MB), stand in a
//! real compressed log before its own entries. `nanolog decode` reports
//! them, prints every real record, and its peak resident memory (the
//! kernel's account of that process, `wait4`) stays under 256 MB. The same
//! with 80 deflate blocks of about 65 KB that inflate to 64 MiB of zeros
//! each (issue #70: 1,000 times their size, 5 GiB from 5.2 MB), which the
//! reader gives up at their first bytes.

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
    framed(body)
}

/// A BLOCK entry of codec 3 (compact entries, deflated) stating `raw`
/// bytes of entries and `compact` of compact ones, with `packed` as its
/// deflate stream.
fn deflate_block_entry(raw: usize, compact: usize, packed: &[u8]) -> Vec<u8> {
    let mut body = vec![3u8];
    put_varint(&mut body, raw as u64);
    put_varint(&mut body, compact as u64);
    body.extend_from_slice(packed);
    framed(body)
}

/// `body` as a whole BLOCK entry.
fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut e = vec![tag::BLOCK];
    e.extend_from_slice(&(body.len() as u32).to_le_bytes());
    e.extend_from_slice(&entry_crc(tag::BLOCK, &body).to_le_bytes());
    e.extend_from_slice(&body);
    assert_eq!(e.len(), FRAME_LEN + body.len());
    e
}

#[test]
fn blocks_that_inflate_to_gigabytes_of_junk_cost_a_wave_of_memory() {
    let raw = 64 << 20;
    let packed = lz4_flex::block::compress(&vec![0u8; raw]);
    decode_behind_junk("memory", &block_entry(raw, &packed), 32 << 20);
}

#[test]
fn deflate_blocks_that_would_inflate_a_thousandfold_are_given_up_at_once() {
    let compact = 64 << 20;
    let mut d = flate2::Compress::new(flate2::Compression::best(), false);
    let mut packed = vec![0u8; compact / 512];
    let status = d.compress(
        &vec![0u8; compact],
        &mut packed,
        flate2::FlushCompress::Finish,
    );
    assert!(matches!(status, Ok(flate2::Status::StreamEnd)));
    packed.truncate(d.total_out() as usize);
    assert!(compact / packed.len() >= 1_000, "{} bytes", packed.len());
    decode_behind_junk(
        "bomb",
        &deflate_block_entry(compact, compact, &packed),
        6 << 20,
    );
}

/// A real compressed log of 2,000 records behind 80 copies of the BLOCK
/// entry `junk` (the crafted file under `most` bytes): `decode` prints
/// every real record, reports each junk block, and peaks under 256 MB.
fn decode_behind_junk(name: &str, junk: &[u8], most: usize) {
    let dir = fresh_dir("damage", name);
    let log = dir.join("real.nlog");
    real_log(&log, 2_000);
    let real = std::fs::read(&log).unwrap();
    let mut file = real[..HEADER_LEN].to_vec();
    for _ in 0..80 {
        file.extend_from_slice(junk);
    }
    file.extend_from_slice(&real[HEADER_LEN..]);
    let crafted = dir.join("crafted.nlog");
    std::fs::write(&crafted, &file).unwrap();
    assert!(file.len() < most, "{} bytes", file.len());

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
    eprintln!("decode of the {name} file: peak resident memory {peak_mb:.0} MB");
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

/// 4 MB of 32-byte units, each a BLOCK frame whose stated length runs past
/// the end of the file, whose body is codec 3 with a stored deflate block
/// that runs on into the next unit's (so a walk of it inflates the rest of
/// the file), then a whole entry of a reserved tag: each unit is damage,
/// and the walks of all of them are bounded by the bytes read (they were
/// the rest of the file each: 2 MB took 17 s, 4 MB over a minute).
#[test]
fn a_chain_of_blocks_that_each_run_to_the_end_is_read_in_linear_time() {
    let dir = fresh_dir("damage", "chain");
    let log = dir.join("real.nlog");
    real_log(&log, 2_000);
    let real = std::fs::read(&log).unwrap();
    let mut unit = vec![tag::BLOCK];
    unit.extend_from_slice(&(32u32 << 20).to_le_bytes());
    unit.extend_from_slice(&[0; 4]);
    unit.push(3);
    put_varint(&mut unit, (64 << 20) - 1);
    put_varint(&mut unit, (64 << 20) - 1);
    // A stored deflate block (not the last) of 27 bytes: to the same
    // place in the next unit.
    unit.push(0);
    unit.extend_from_slice(&27u16.to_le_bytes());
    unit.extend_from_slice(&(!27u16).to_le_bytes());
    let reserved = 20u8;
    let body = vec![1u8; 32 - unit.len() - FRAME_LEN];
    unit.push(reserved);
    unit.extend_from_slice(&(body.len() as u32).to_le_bytes());
    unit.extend_from_slice(&entry_crc(reserved, &body).to_le_bytes());
    unit.extend_from_slice(&body);
    assert_eq!(unit.len(), 32);
    let mut file = real[..HEADER_LEN].to_vec();
    for _ in 0..(4 << 20) / 32 {
        file.extend_from_slice(&unit);
    }
    file.extend_from_slice(&real[HEADER_LEN..]);
    let crafted = dir.join("chain.nlog");
    std::fs::write(&crafted, &file).unwrap();
    let (status, out, err) = run_bounded(&["decode", p(&crafted)], 60);
    assert!(status.success(), "{err}");
    assert_eq!(out.lines().count(), 2_000, "every record after the damage");
    // The first regions one by one, the other 130,072 counted in one line.
    let listed = nanolog_runtime::reader::LISTED_DAMAGE;
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("skipped 23 corrupt bytes"))
            .count(),
        listed,
        "{}",
        err.lines().last().unwrap_or_default()
    );
    let units = (4 << 20) / 32;
    assert!(
        err.contains(&format!(
            "skipped {} more corrupt regions, {} bytes in all",
            units - listed,
            (units - listed) * 23
        )),
        "{}",
        err.lines().last().unwrap_or_default()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 40 deflate blocks of 64 MiB of well-formed CLOCK entries each (one
/// pair, over and over: 107 M entries from a 4.7 MB file), before a real
/// log: `decode` and `stats` read every real record and peak under 256 MB
/// (they held every pair: 1.7 GB and 5.2 GB).
#[test]
fn blocks_of_millions_of_clock_pairs_cost_bounded_memory() {
    let dir = fresh_dir("damage", "clocks");
    let log = dir.join("real.nlog");
    real_log(&log, 2_000);
    let real = std::fs::read(&log).unwrap();
    let n = (64 << 20) / 25;
    let mut one = vec![tag::CLOCK, 16];
    one.extend_from_slice(&1_000_000_000_000u64.to_le_bytes());
    one.extend_from_slice(&1_795_000_000_000_000_000i64.to_le_bytes());
    let compact = one.repeat(n);
    let mut d = flate2::Compress::new(flate2::Compression::best(), false);
    let mut packed = vec![0u8; compact.len() / 256];
    let status = d.compress(&compact, &mut packed, flate2::FlushCompress::Finish);
    assert!(matches!(status, Ok(flate2::Status::StreamEnd)));
    packed.truncate(d.total_out() as usize);
    let block = deflate_block_entry(n * 25, compact.len(), &packed);
    let mut file = real[..HEADER_LEN].to_vec();
    for _ in 0..40 {
        file.extend_from_slice(&block);
    }
    file.extend_from_slice(&real[HEADER_LEN..]);
    let crafted = dir.join("clocks.nlog");
    std::fs::write(&crafted, &file).unwrap();
    for cmd in ["decode", "stats"] {
        let out = dir.join(format!("{cmd}.out"));
        let child = Command::new(BIN)
            .args([cmd, p(&crafted)])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn_reaped();
        let (status, peak_mb) = common::wait_peak(&child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{cmd}: status {status}"
        );
        let printed = std::fs::read_to_string(&out).unwrap();
        if cmd == "decode" {
            assert_eq!(printed.lines().count(), 2_000, "every real record");
        } else {
            // One site, every record of it: `2000  100.00% ...`.
            let row = printed.lines().nth(1).unwrap_or_default();
            assert!(
                row.trim_start().starts_with("2000 ") && row.contains("100.00%"),
                "stats counts every record: {printed}"
            );
        }
        eprintln!("{cmd} of the CLOCK blocks: peak resident memory {peak_mb:.0} MB");
        assert!(
            peak_mb <= 256.0,
            "{cmd}: peak resident memory {peak_mb:.0} MB"
        );
        drop(child);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
