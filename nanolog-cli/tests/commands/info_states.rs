//! `nanolog info` tells a file that ended cleanly (a dropped logger, an
//! `exit`, a return from `main` with the logger leaked), one cut off (its
//! writer killed) and a live one apart; `decode` says when a file ends
//! without its END and no writer holds it (killed, or cut on an entry's
//! boundary), and is silent on a live one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use common::SpawnReaped;

/// Run by `info_tells_ended_cut_off_and_live_apart` in a child process:
/// logs, then ends as `NANOLOG_INFO_END` says.
#[test]
#[ignore = "run in a child process by another test"]
fn child_that_ends() {
    let (Some(path), Ok(how)) = (
        std::env::var_os("NANOLOG_INFO_LOG"),
        std::env::var("NANOLOG_INFO_END"),
    ) else {
        return;
    };
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    for i in 0..1000u64 {
        nanolog::info!("record {}", i);
    }
    match how.as_str() {
        "exit" => std::process::exit(0),
        "leak" => std::mem::forget(logger),
        "kill" => {
            logger.flush().unwrap();
            // SAFETY: raising SIGKILL on ourselves: no handler runs.
            unsafe { libc_kill() };
        }
        _ => drop(logger),
    }
}

/// SIGKILL to this process.
unsafe fn libc_kill() {
    extern "C" {
        fn getpid() -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: both calls have no preconditions; 9 is SIGKILL.
    unsafe { kill(getpid(), 9) };
}

fn run_child(path: &Path, how: &str) {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_name(module_path!(), "child_that_ends"),
            "--ignored",
        ])
        .env("NANOLOG_INFO_LOG", path)
        .env("NANOLOG_INFO_END", how)
        .spawn_reaped();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "child {how} did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn state(path: &Path) -> String {
    let out = common::ok(&["info", common::p(path)]);
    out.lines()
        .find_map(|l| l.strip_prefix("state:"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[test]
fn info_tells_ended_cut_off_and_live_apart() {
    let _s = common::serial();
    let dir: PathBuf =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nanolog-info-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for how in ["drop", "exit", "leak", "kill"] {
        let path = dir.join(format!("{how}.nlog"));
        run_child(&path, how);
        let want = if how == "kill" {
            "cut off (its writer was killed or crashed: the records up to the last whole entry)"
        } else {
            "ended cleanly"
        };
        assert_eq!(state(&path), want, "{how}");
        let o = common::succeed(&["decode", common::p(&path)]);
        assert_eq!(common::stdout(&o).lines().count(), 1000, "{how}");
        let err = String::from_utf8_lossy(&o.stderr);
        let said = err.matches("no END entry after byte").count();
        assert_eq!(said, usize::from(how == "kill"), "{how}: {err}");
    }
    let live = dir.join("live.nlog");
    let logger = nanolog::Logger::builder().path(&live).start().unwrap();
    nanolog::info!("record {}", 1u64);
    logger.flush().unwrap();
    assert_eq!(state(&live), "live (a writer is appending)");
    let o = common::succeed(&["decode", common::p(&live)]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(logger);
    assert_eq!(state(&live), "ended cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The offsets where the entries of the file at `path` end (after its
/// 48-byte header; each entry a 9-byte frame and its body).
fn entry_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut pos = 48;
    while pos + 9 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 1..pos + 5].try_into().unwrap()) as usize;
        pos += 9 + len;
        ends.push(pos);
    }
    ends
}

/// A finished file cut exactly where an entry ends reads like one whose
/// writer was killed: `decode` prints what is there and says, once, where
/// the file ends without its END. Cut inside an entry, it says the torn
/// tail instead (one warning either way); while its writer holds it, the
/// half-written entry is the write in progress, and nothing is said.
#[test]
fn decode_says_a_file_cut_on_an_entry_boundary() {
    let _s = common::serial();
    let dir = common::fresh_dir("info", "cut");
    let whole = dir.join("whole.nlog");
    {
        let _l = nanolog::Logger::builder()
            .path(&whole)
            .compress(false)
            .start()
            .unwrap();
        for i in 0..1000u64 {
            nanolog::info!("record {}", i);
            if i % 100 == 99 {
                nanolog::flush().unwrap();
            }
        }
    }
    let bytes = std::fs::read(&whole).unwrap();
    let ends = entry_ends(&bytes);
    assert_eq!(*ends.last().unwrap(), bytes.len());
    // The same cut in a log whose writer holds it (its lock names this
    // process, which wrote it): a write in progress, said nothing of.
    let live = dir.join("live.nlog");
    let mid = ends[ends.len() / 2] + 5;
    std::fs::write(&live, &bytes[..mid]).unwrap();
    std::fs::write(dir.join("live.nlog.lock"), std::process::id().to_string()).unwrap();
    let o = common::succeed(&["decode", common::p(&live)]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let before = common::stdout(&common::succeed(&["decode", common::p(&whole)]))
        .lines()
        .count();
    let printed = common::stdout(&o).lines().count();
    assert!(printed > 0 && printed < before, "{printed}");
    let cut = dir.join("cut.nlog");
    for at in [ends[ends.len() / 2], ends[ends.len() / 2] + 5] {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let o = common::succeed(&["decode", common::p(&cut)]);
        let printed = common::stdout(&o).lines().count();
        assert!(printed > 0 && printed < 1000, "cut at {at}: {printed}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "cut at {at}: {err}");
        let on_boundary = ends.contains(&at);
        assert_eq!(
            err.contains(&format!("no END entry after byte {at} ")),
            on_boundary,
            "cut at {at}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A writer killed and not yet reaped by its parent (a zombie: its pid
/// still listed, its lock file still naming it) has written its last
/// byte: `info` says its file is cut off, and `decode` says where it ends
/// without its END (issue #84: until 2026-12-06 a zombie's pid was taken
/// for a live writer, `info` said live and the warning was held back).
#[test]
fn a_killed_writer_not_yet_reaped_reads_as_cut_off() {
    let _s = common::serial();
    let dir = common::fresh_dir("info", "zombie");
    let path = dir.join("zombie.nlog");
    let c = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_name(module_path!(), "child_that_ends"),
            "--ignored",
        ])
        .env("NANOLOG_INFO_LOG", &path)
        .env("NANOLOG_INFO_END", "kill")
        .spawn_reaped();
    // Not waited for: it stays a zombie until this test reaps it.
    let stat = format!("/proc/{}/stat", c.id());
    let zombie = || {
        std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !zombie() {
        assert!(Instant::now() < deadline, "the child did not die");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        state(&path),
        "cut off (its writer was killed or crashed: the records up to the last whole entry)"
    );
    let o = common::succeed(&["decode", common::p(&path)]);
    assert_eq!(common::stdout(&o).lines().count(), 1000);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("no END entry after byte").count(), 1, "{err}");
    assert!(zombie(), "reaped before the checks ended");
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
