//! Running the `nanolog` binary as a user does, for the CLI's test files
//! (each uses some of these).
#![allow(dead_code, unused_imports)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[path = "../../../tests/common/reaped.rs"]
mod reaped;
pub use reaped::{Reaped, SpawnReaped};
#[path = "../../../tests/common/shared.rs"]
mod shared;
pub use shared::{serial, temp};

/// A fresh, empty directory for one test: `nanolog-{kind}-{name}-{pid}`
/// under the target's temporary directory.
pub fn fresh_dir(kind: &str, name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nanolog-{kind}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub const BIN: &str = env!("CARGO_BIN_EXE_nanolog");

/// `nanolog ship ARGS...`, started, its standard error piped.
pub fn ship(args: &[&str]) -> Reaped {
    Command::new(BIN)
        .arg("ship")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped()
}

/// Waits for `child` at most `secs`, then kills it and fails.
pub fn wait(child: &mut Child, secs: u64, what: &str) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish in {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` to end: its wait status (`libc::WIFEXITED` and the
/// like read it) and its peak resident memory in MB, the kernel's account
/// of the process (`wait4`). A child's peak starts from this process's at
/// the exec (std spawns it sharing this process's memory): measure while
/// this process holds little.
pub fn wait_peak(child: &Reaped) -> (i32, f64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child `pid`, writing into the two locals
    // passed by pointer, which live across the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    (status, usage.ru_maxrss as f64 / 1024.0)
}

/// What `child` wrote to its piped standard error.
pub fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut s);
    s
}

/// `nanolog ship ARGS...` run to its end (at most `secs`): its exit status
/// and its standard error.
pub fn shipped(args: &[&str], secs: u64, what: &str) -> (ExitStatus, String) {
    let mut child = ship(args);
    let status = wait(&mut child, secs, what);
    (status, stderr_of(&mut child))
}

/// `nanolog ship ARGS...` run to its end (at most `secs`) with exactly the
/// `OTEL_*` variables `env` gives (this process's removed): its exit
/// status and standard error.
pub fn shipped_with_env<V: AsRef<std::ffi::OsStr>>(
    args: &[&str],
    env: &[(&str, V)],
    secs: u64,
) -> (ExitStatus, String) {
    let mut c = Command::new(BIN);
    c.arg("ship").args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let status = wait(&mut child, secs, "ship");
    (status, stderr_of(&mut child))
}

/// `nanolog ARGS...`, whatever its exit status.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run nanolog")
}

/// `nanolog ARGS...`, which must succeed.
pub fn succeed(args: &[&str]) -> Output {
    let o = run(args);
    assert!(
        o.status.success(),
        "nanolog {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The standard output of `nanolog ARGS...`, which must succeed.
pub fn ok(args: &[&str]) -> String {
    stdout(&succeed(args))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

pub fn p(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Runs `build` on a thread named "main", so the thread names a fixture's
/// log records do not depend on which test thread built it.
pub fn on_main_thread<T: Send + 'static>(build: fn() -> T) -> T {
    std::thread::Builder::new()
        .name("main".into())
        .spawn(build)
        .expect("spawn the fixture thread")
        .join()
        .expect("build the fixtures")
}

/// What a `tracing_subscriber::fmt` layer writes, kept in memory (its
/// `with_writer(move || captured.clone())`).
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What was written, as text.
    pub fn text(&self) -> String {
        let b = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8(b.clone()).expect("utf-8 output")
    }
}

/// A plain log at `path` of 300 requests, each record in its own
/// `nanolog::span!` (`request{id}`, message `served {id}`), flushed every 100,
/// with one bit flipped in its first SPAN entry: the spans of the first
/// write are lost to damage, and its records must say so.
pub fn log_with_a_lost_span_entry(path: &Path) {
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(false)
        .start()
        .unwrap();
    for i in 0..300u64 {
        let _s = nanolog::span!("request", id = i);
        nanolog::info!("served {}", i);
        if i % 100 == 99 {
            logger.flush().unwrap();
        }
    }
    drop(logger);
    let mut bytes = std::fs::read(path).unwrap();
    let mut at = nanolog_runtime::wire::HEADER_LEN;
    loop {
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        if bytes[at] == nanolog_runtime::wire::tag::SPAN {
            bytes[at + nanolog_runtime::wire::FRAME_LEN + len / 2] ^= 0x10;
            break;
        }
        at += nanolog_runtime::wire::FRAME_LEN + len;
    }
    std::fs::write(path, &bytes).unwrap();
}

/// Reads the lines of a child's standard output on a thread of their own,
/// so a test can wait for them with a deadline.
pub fn line_reader(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().expect("a piped standard output");
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The W3C trace id of [`traced_log`]'s requests, and the span ids of its
/// `request` and `call` spans.
pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const REQUEST_SPAN_ID: &str = "00f067aa0ba902b7";
pub const CALL_SPAN_ID: &str = "53995c3f42cd8ad8";

/// Writes `n` requests into a new log at `base`, each a record in a
/// `request` span that carries [`TRACE_ID`] and [`REQUEST_SPAN_ID`] (flags
/// 01), one in a `call` span inside it that carries [`CALL_SPAN_ID`], and
/// one outside both: `in request I`, `in call I`, `outside I`.
pub fn traced_log(base: &Path, n: u32) {
    let logger = nanolog::Logger::builder().path(base).start().unwrap();
    for i in 0..n {
        {
            let _r = nanolog::span!(
                "request",
                trace_id = TRACE_ID,
                span_id = REQUEST_SPAN_ID,
                trace_flags = "01"
            );
            nanolog::info!("in request {}", i);
            let _c = nanolog::span!("call", trace_id = TRACE_ID, span_id = CALL_SPAN_ID);
            nanolog::info!("in call {}", i);
        }
        nanolog::info!("outside {}", i);
    }
    drop(logger);
}

/// The (trace id, span id, flags) a record of [`traced_log`] with message
/// `body` carries (empty ids outside its spans).
pub fn traced_ids(body: &str) -> (&'static str, &'static str, u32) {
    if body.starts_with("in request") {
        (TRACE_ID, REQUEST_SPAN_ID, 1)
    } else if body.starts_with("in call") {
        (TRACE_ID, CALL_SPAN_ID, 0)
    } else {
        ("", "", 0)
    }
}

/// The name libtest knows the test `f` of module `module` by (its
/// `module_path!()` without the crate: `files::child_rolling_writer`), for
/// `--exact` when a test runs one of its binary's tests as a child process.
pub fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, m)) => format!("{m}::{f}"),
        None => f.to_owned(),
    }
}

/// `nanolog::capture_log()` once per process: the `log` crate takes one
/// logger for a process's life, and the tests of a binary share it (the
/// second call's refusal is what `bridges` checks).
pub fn capture_log_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| nanolog::capture_log().expect("install the log bridge"));
}
