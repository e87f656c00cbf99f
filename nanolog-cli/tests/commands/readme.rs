//! The README's `nanolog` command lines, run as a user types them (through
//! a shell, so its globs and quotes are the shell's) against a log set this
//! test makes: every line exits 0 and prints something (`-f` keeps
//! running; a line that writes a file, or reads a window that ended before
//! these records, prints nothing).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nanolog::{Level, Logger};

use crate::common;
use common::SpawnReaped;

/// `PATH` with the directory of the `nanolog` binary under test first, as
/// a user who installed it has it.
fn path_with_nanolog() -> String {
    let bin_dir = Path::new(common::BIN).parent().unwrap();
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The first `sh` block of the README after `heading`.
fn sh_block_after(heading: &str) -> &'static str {
    let readme = include_str!("../../../README.md");
    let at = readme.find(heading).expect("the README's section");
    let block = &readme[at..];
    let start = block.find("```sh\n").expect("its sh block") + 6;
    let end = start + block[start..].find("```").expect("the block's end");
    &block[start..end]
}

/// The lines of the README's block under "The `nanolog` command".
fn readme_lines() -> Vec<String> {
    sh_block_after("## The `nanolog` command")
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or("").trim().to_owned())
        .filter(|l| l.starts_with("nanolog "))
        .collect()
}

/// `app.nlog` (a rolled set: two threads, every level, `took {} ms`) and
/// `other.nlog`, in `dir`.
fn make_logs(dir: &Path) {
    let _s = common::serial();
    for (name, roll) in [("app.nlog", true), ("other.nlog", false)] {
        let mut b = Logger::builder().path(dir.join(name)).level(Level::Trace);
        if roll {
            b = b.rotate_bytes(16 << 10);
        }
        let logger = b.start().unwrap();
        let worker = std::thread::Builder::new()
            .name("worker".into())
            .spawn(|| {
                for i in 0..5_000u64 {
                    nanolog::info!("took {} ms", i % 97);
                }
            })
            .unwrap();
        for i in 0..5_000u64 {
            nanolog::debug!("step {}", i);
            if i % 500 == 0 {
                nanolog::warn!("timeout after {} tries", i / 500);
                nanolog::error!("connection refused by {}", "db");
            }
        }
        worker.join().unwrap();
        drop(logger);
        // The live file's last records, for the lines that read it alone,
        // from a second run (which keeps the first one's live file beside
        // it): the first run's may have rolled right after its last write,
        // leaving its live file without records (found by CI once the
        // files got smaller and their rolls moved).
        let logger = Logger::builder()
            .path(dir.join(name))
            .level(Level::Trace)
            .start()
            .unwrap();
        nanolog::warn!("timeout after {} tries", 11);
        nanolog::info!("took {} ms", 5);
        // A request of the trace the README's `--trace` line names.
        {
            let _request = nanolog::span!(
                "request",
                trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                span_id = "00f067aa0ba902b7"
            );
            nanolog::info!("took {} ms", 7);
        }
        // And a worker's, for `--thread worker` on the live file alone.
        std::thread::Builder::new()
            .name("worker".into())
            .spawn(|| nanolog::info!("took {} ms", 6))
            .unwrap()
            .join()
            .unwrap();
        drop(logger);
    }
}

#[test]
fn every_readme_command_line_runs() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nanolog-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    make_logs(&dir);
    let path = path_with_nanolog();
    let lines = readme_lines();
    assert!(lines.len() >= 10, "{lines:?}");
    let (out_path, err_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    for line in &lines {
        let follow = line.contains(" -f ");
        // Into files, not pipes: a pipe nobody reads while we wait would
        // stop a command that prints a lot.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(line)
            .current_dir(&dir)
            .env("PATH", &path)
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn_reaped();
        // `-f` follows until interrupted: it must print the log, then keep
        // running; every other line ends by itself.
        let limit = Duration::from_secs(if follow { 2 } else { 60 });
        let deadline = Instant::now() + limit;
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let still_running = child.try_wait().unwrap().is_none();
        if still_running {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        if follow {
            assert!(still_running, "`{line}` ended: {stderr}");
        } else {
            assert!(!still_running, "`{line}` did not end in {limit:?}");
            assert!(status.success(), "`{line}`: {status}\n{stderr}");
        }
        // Lines that write a file print nothing; a window that ends in the
        // past holds none of these fresh records.
        let none_expected = line.contains(" -o ") || line.contains("--until");
        assert!(
            !stdout.trim().is_empty() || none_expected,
            "`{line}` printed nothing; stderr: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before the first roll the shell passes `app.*Z.nlog` as it is: the CLI
/// expands it itself, and skips a pattern that matches nothing with one
/// warning line instead of failing.
#[test]
fn a_pattern_that_matches_nothing_is_skipped_with_a_warning() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nanolog-pattern-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    {
        let _s = common::serial();
        let logger = Logger::builder()
            .path(dir.join("app.nlog"))
            .start()
            .unwrap();
        nanolog::info!("only {}", 1);
        drop(logger);
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg("nanolog decode app.nlog app.*Z.nlog")
        .current_dir(&dir)
        .env("PATH", path_with_nanolog())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "nanolog: warning: app.*Z.nlog: no file matches; skipped"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("only 1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The README's export loop under "Querying logs at scale", run by bash as
/// pasted, over one host whose log rolled and one whose log has not: a
/// Parquet file per host in `exports/` (made by `-o`), every record in
/// it, and not a warning.
#[test]
fn the_readme_export_loop_runs_as_pasted() {
    let script = sh_block_after("## Querying logs at scale");
    assert!(script.contains("for f in logs/*/app.nlog"), "{script}");

    let dir = common::fresh_dir("readme", "export-loop");
    {
        let _s = common::serial();
        for (host, roll) in [("host1", true), ("host2", false)] {
            let mut b = Logger::builder()
                .path(dir.join("logs").join(host).join("app.nlog"))
                .level(Level::Info);
            if roll {
                // 2,000 records compressed: about 5 KB.
                b = b.rotate_bytes(2 << 10);
            }
            let logger = b.start().unwrap();
            for i in 0..2_000u64 {
                nanolog::info!("took {} ms", i);
            }
            drop(logger);
        }
    }
    assert!(
        !nanolog::reader::finished_files(&dir.join("logs/host1/app.nlog"))
            .unwrap()
            .is_empty(),
        "host1's log rolled"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(&dir)
        .env("PATH", path_with_nanolog())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    for host in ["host1", "host2"] {
        let p = dir.join("exports").join(format!("{host}.parquet"));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(bytes.starts_with(b"PAR1"), "{}", p.display());
        assert!(
            stderr.contains(&format!("exported 2000 records to exports/{host}.parquet")),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
