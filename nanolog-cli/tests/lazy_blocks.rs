//! A compressed log whose blocks inflate to more than the reader's resident
//! budget (`NANOLOG_READ_RESIDENT_MB`) is read with its blocks inflated as
//! the reading reaches them and let go after: `decode`, `stats`, `export`
//! and `info` print what a reader holding every block prints, byte for
//! byte, and their peak resident memory (the kernel's account of the
//! process, `wait4`) stays well under what holding the blocks takes.

use std::path::Path;
use std::process::{Command, Stdio};

use nanolog_runtime::reader::LogFile;

mod common;
use common::{fresh_dir, p, SpawnReaped, BIN};

/// A compressed log at `path`: four named threads in nested spans, each
/// record with a long text that differs record to record (so the blocks
/// hold tens of MB), a repeated route (interned), and numbers.
fn write_log(path: &Path) {
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(true)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    let pad = "lorem ipsum dolor sit amet ".repeat(10);
                    for i in 0..25_000u64 {
                        let _req = nanolog::span!("request", id = i, worker = t);
                        // (The number first: a text ending in digits after a prefix seen
                        // before is written as the prefix's id and the number, a few bytes.)
                        let text = format!("{i:08} {pad}");
                        nanolog::info!("served {} in {} us: {}", "/api/v1/orders", i % 977, text);
                        if i % 4_000 == 0 {
                            nanolog::warn!("worker {} at {}", t, i);
                        }
                        if i % 25 == 24 {
                            // Paced, so the flusher has time to compress.
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                    }
                })
                .unwrap();
        }
    });
    drop(logger);
}

/// Runs `nanolog ARGS` with the resident budget at `mb` MiB, its standard
/// output to `out`: its standard error and peak resident memory in MB.
fn run_to(args: &[&str], mb: &str, out: std::fs::File, dir: &Path) -> (String, f64) {
    let err = dir.join("err");
    let child = Command::new(BIN)
        .args(args)
        .env("NANOLOG_READ_RESIDENT_MB", mb)
        .stdout(out)
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null())
        .spawn_reaped();
    let (status, peak_mb) = common::wait_peak(&child);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "nanolog {args:?}: status {status}: {stderr}"
    );
    (stderr, peak_mb)
}

/// [`run_to`] with its standard output read: that, and its standard error.
fn run(args: &[&str], mb: &str, dir: &Path) -> (Vec<u8>, String) {
    let out = dir.join("out");
    let (stderr, _) = run_to(args, mb, std::fs::File::create(&out).unwrap(), dir);
    (std::fs::read(&out).unwrap(), stderr)
}

/// The peak resident memory of `nanolog ARGS` (its output discarded) with
/// the resident budget at `mb` MiB, in MB (see `common::wait_peak`: taken
/// while this process holds little).
fn peak(args: &[&str], mb: &str, dir: &Path) -> f64 {
    let null = std::fs::File::create("/dev/null").unwrap();
    run_to(args, mb, null, dir).1
}

/// Writes the log in a process of its own (this test binary, running
/// `write_in_a_process_of_its_own`): a child's peak resident memory starts
/// from its parent's at the exec, and a process that logged holds its
/// rings.
fn write_log_apart(path: &Path) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_name(module_path!(), "write_in_a_process_of_its_own"),
            "--ignored",
        ])
        .env("NANOLOG_LAZY_BLOCKS_LOG", path)
        .stdin(Stdio::null())
        .spawn_reaped();
    let status = common::wait(&mut child, 300, "the log's writer");
    assert!(status.success(), "writing the log: {status}");
}

/// Not a test of its own: what `write_log_apart` runs.
#[test]
#[ignore = "the writer of `write_log_apart`, run by it"]
fn write_in_a_process_of_its_own() {
    if let Some(path) = std::env::var_os("NANOLOG_LAZY_BLOCKS_LOG") {
        write_log(Path::new(&path));
    }
}

#[test]
fn a_file_past_the_resident_budget_reads_its_blocks_as_it_reaches_them() {
    let dir = fresh_dir("lazy", "blocks");
    let log = dir.join("app.nlog");
    write_log_apart(&log);
    let log_path = log.clone();
    let log = p(&log_path);
    // Memory first (see `peak`).
    // (A filter that keeps few records: a batch fills across many blocks,
    // and holds only those it has records of. A `--grep`, which the
    // file's index cannot answer: `--level warn` leaves out the blocks
    // with no warning unread, holding none.)
    let measured: [Vec<&str>; 3] = [
        vec!["decode", log],
        vec!["decode", "--grep", "at 4000", log],
        vec!["stats", log],
    ];
    let peaks: Vec<(&[&str], f64, f64)> = measured
        .iter()
        .map(|args| {
            let held = peak(args, "1024", &dir);
            (&args[..], held, peak(args, "0", &dir))
        })
        .collect();
    let f = LogFile::open(&log_path).unwrap();
    let (on_disk, raw) = (f.valid_len(), f.raw_len());
    let records = f.records().count();
    drop(f);
    assert_eq!(records, 4 * (25_000 + 7));
    // (How much the flusher compressed depends on the machine's load.)
    let blocks_mb = (raw - on_disk) as f64 / f64::from(1 << 20);
    assert!(
        blocks_mb > 16.0,
        "{on_disk} bytes on disk, {raw} inflated: too few blocks compressed"
    );
    for &(args, held, lazy) in &peaks {
        eprintln!("{args:?}: peak RSS {held:.0} MB holding the blocks, {lazy:.0} MB without");
    }
    // `decode` holds the blocks the budget lets it hold, and none past it.
    let decode_held = peaks[0].1;
    for &(args, held, lazy) in &peaks[..2] {
        assert!(
            lazy + blocks_mb / 2.0 < held,
            "{args:?}: {lazy:.0} MB without the blocks held, {held:.0} MB with ({blocks_mb:.0} MB of blocks)"
        );
    }
    // `stats` reads each block as the file is indexed and holds none,
    // whatever the budget lets it hold.
    let (args, held, lazy) = peaks[2];
    for peak in [held, lazy] {
        assert!(
            peak + blocks_mb / 2.0 < decode_held,
            "{args:?}: {peak:.0} MB, where decode holding the blocks takes {decode_held:.0} MB ({blocks_mb:.0} MB of blocks)"
        );
    }

    let jsonl = dir.join("x.jsonl");
    let reads: [&[&str]; 9] = [
        &["decode", log],
        &["decode", "--format", "json", log],
        &["decode", "--unsorted", log],
        &["decode", "--thread", "worker-2", "--level", "warn", log],
        &["stats", log],
        &["stats", "--by", "thread", "--format", "json", log],
        // (By time: read after the file is indexed, its clock whole.)
        &["stats", "--every", "100ms", "--by", "level", log],
        &[
            "stats",
            "--site",
            "served",
            "--arg",
            "1",
            "--histogram",
            log,
        ],
        &["info", log],
    ];
    for args in reads {
        // Every block held (the budget past the file), none held, and a
        // budget that ends inside the file.
        let (all, all_err) = run(args, "1024", &dir);
        assert!(all.len() > 100, "{args:?} printed nothing");
        for mb in ["0", "3.5"] {
            let (lazy, lazy_err) = run(args, mb, &dir);
            assert!(all == lazy, "{args:?}, budget {mb} MiB: the output differs");
            assert_eq!(all_err, lazy_err, "{args:?}, budget {mb} MiB: warnings");
        }
    }
    let export = ["export", "-o", p(&jsonl), log];
    run(&export, "1024", &dir);
    let all = std::fs::read(&jsonl).unwrap();
    run(&export, "0", &dir);
    assert!(all == std::fs::read(&jsonl).unwrap(), "export: differs");
    let _ = std::fs::remove_dir_all(&dir);
}
