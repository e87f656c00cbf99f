//! `Builder::console(level)`: no file; the lines `nanolog decode` would
//! print go to stderr.

use std::process::Command;
use std::time::{Duration, Instant};

#[path = "common/reaped.rs"]
mod reaped;
use reaped::SpawnReaped;

/// Run by `console_logs_to_stderr_and_writes_no_file` in a child process.
#[test]
#[ignore = "run in a child process by another test"]
fn child_console() {
    if std::env::var_os("NANOLOG_CONSOLE_CHILD").is_none() {
        return;
    }
    let logger = nanolog::Logger::builder()
        .console(nanolog::Level::Debug)
        .start()
        .unwrap();
    nanolog::trace!("not shown {}", 0);
    nanolog::debug!("debug {}", 1);
    nanolog::warn!(target: "audit", "warned {:?}", "x");
    logger.flush().unwrap();
    drop(logger);
}

#[test]
fn console_logs_to_stderr_and_writes_no_file() {
    let dir = std::env::temp_dir().join(format!("nanolog-console-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_console", "--ignored", "--nocapture"])
        .env("NANOLOG_CONSOLE_CHILD", "1")
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn_reaped();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the child did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("console.rs:"))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].ends_with("]: debug 1"), "{}", lines[0]);
    assert!(lines[0].contains("Z tests/console.rs:"), "{}", lines[0]);
    assert!(lines[1].ends_with("] audit: warned \"x\""), "{}", lines[1]);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "files written: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
