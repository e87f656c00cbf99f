//! Every way a process ends, each in a child process: the child logs, then
//! leaves by one path; the parent checks the exit status that path implies
//! and that every record logged before the end decodes.
//!
//! `harness = false`: the child must own `main` (to return from it, panic
//! out of it, or die by a signal). The same binary is parent and child; the
//! child is chosen by the `NANOLOG_EXIT_CHILD` variable.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::Logger;

#[path = "common/reaped.rs"]
mod reaped;
use reaped::{Reaped, SpawnReaped};

/// Records the main thread logs just before it leaves.
const N: u32 = 200_000;

fn main() {
    if let Ok(mode) = std::env::var("NANOLOG_EXIT_CHILD") {
        let path = PathBuf::from(std::env::var("NANOLOG_EXIT_PATH").expect("path"));
        child(&mode, &path);
        return;
    }
    parent();
}

// ---------------------------------------------------------------- the child

fn start(path: &Path, signals: bool) -> Logger {
    Logger::builder()
        .path(path)
        .flush_on_signals(signals)
        .start()
        .expect("start")
}

/// A second thread that logs `B i` without end, so every exit happens while
/// another thread is logging.
fn background_logger() {
    std::thread::spawn(|| {
        let mut i = 0u64;
        loop {
            nanolog::info!("B {}", i);
            i += 1;
        }
    });
}

/// Like [`background_logger`], with records big enough to keep the
/// flusher busy, so an exit finds a backlog in the rings.
fn heavy_background_logger() {
    std::thread::spawn(|| {
        let pad = "x".repeat(400);
        let mut i = 0u64;
        loop {
            nanolog::info!("B {} {}", pad.as_str(), i);
            i += 1;
        }
    });
}

fn log_main_records() {
    for i in 0..N {
        nanolog::info!("A {}", i);
    }
}

static STATIC_LOGGER: OnceLock<Logger> = OnceLock::new();

fn child(mode: &str, path: &Path) {
    match mode {
        "return-leaked" => {
            let logger = start(path, false);
            background_logger();
            log_main_records();
            std::mem::forget(logger);
        }
        "return-static" => {
            let _ = STATIC_LOGGER.set(start(path, false));
            background_logger();
            log_main_records();
        }
        "process-exit" => {
            let _logger = start(path, false);
            background_logger();
            log_main_records();
            std::process::exit(3);
        }
        "panic-unwind" => {
            let _logger = start(path, false);
            background_logger();
            log_main_records();
            panic!("leaving main by panic");
        }
        "panic-thread-abort-hook" => {
            // What `panic = "abort"` does after the hooks run: abort. (The
            // real profile is exercised by tests/fixtures/abort_on_panic.)
            let logger = start(path, false);
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                previous(info);
                std::process::abort();
            }));
            // nanolog's hook, installed by `start`, is the `previous` above.
            std::mem::forget(logger);
            heavy_background_logger();
            log_main_records();
            panic!("panics, then aborts");
        }
        "sigterm" | "sigsegv" | "sigabrt" | "sigint" => {
            let logger = start(path, true);
            background_logger();
            log_main_records();
            std::mem::forget(logger);
            match mode {
                "sigterm" => raise(libc::SIGTERM),
                "sigint" => raise(libc::SIGINT),
                "sigabrt" => std::process::abort(),
                _ => {
                    // A real fault, not a raised signal.
                    let p = std::hint::black_box(std::ptr::null_mut::<u32>());
                    // SAFETY: not sound, on purpose: this write faults, which
                    // is the event under test.
                    unsafe { p.write_volatile(1) };
                }
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "sigabrt-on-flusher" => {
            // A fatal signal on the flusher thread itself: the handler cannot
            // wait for it, and must not hang; the process dies of the signal.
            // (SIGABRT: std's SIGSEGV handler, which ours chains to, ignores
            // a SIGSEGV that no fault raised.)
            let logger = start(path, true);
            log_main_records();
            logger.flush().expect("flush");
            std::mem::forget(logger);
            let tid = flusher_tid().expect("the flusher thread is listed in /proc");
            // SAFETY: sends a signal to a thread of this process.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGABRT) };
            std::thread::sleep(Duration::from_secs(30));
        }
        "sigterm-chained" => {
            // A handler installed before nanolog's is called after the flush.
            extern "C" fn earlier(_: libc::c_int) {
                // SAFETY: _exit is async-signal-safe.
                unsafe { libc::_exit(42) };
            }
            let handler: extern "C" fn(libc::c_int) = earlier;
            // SAFETY: installs a valid `void (*)(int)` handler.
            unsafe { libc::signal(libc::SIGTERM, handler as libc::sighandler_t) };
            let logger = start(path, true);
            background_logger();
            log_main_records();
            std::mem::forget(logger);
            raise(libc::SIGTERM);
            std::thread::sleep(Duration::from_secs(30));
        }
        "kill9-after-sync" => {
            let logger = start(path, false);
            background_logger();
            log_main_records();
            logger.sync().expect("sync");
            println!("synced");
            for i in 0.. {
                nanolog::info!("C {}", i);
            }
        }
        "late-loggers" => {
            // An exit hook registered before the logger starts runs after
            // nanolog's; one registered after runs before it. Both log.
            extern "C" fn hook_before_start() {
                for i in 0..100 {
                    nanolog::info!("X {}", i);
                }
            }
            extern "C" fn hook_after_start() {
                for i in 0..100 {
                    nanolog::info!("Y {}", i);
                }
                assert!(nanolog::flush().is_ok());
            }
            // SAFETY: registers `extern "C" fn()` callbacks that live forever.
            unsafe { libc::atexit(hook_before_start) };
            let logger = start(path, false);
            // SAFETY: as above.
            unsafe { libc::atexit(hook_after_start) };
            // A thread-local created before the thread's first log, whose
            // destructor logs after the thread's ring is gone.
            struct LogsOnDrop;
            impl Drop for LogsOnDrop {
                fn drop(&mut self) {
                    for i in 0..200 {
                        nanolog::info!("T {}", i);
                    }
                }
            }
            thread_local!(static GUARD: LogsOnDrop = const { LogsOnDrop });
            std::thread::spawn(|| {
                GUARD.with(|_| {});
                for i in 0..N {
                    nanolog::info!("A {}", i);
                }
            })
            .join()
            .unwrap();
            // A Display impl that itself logs.
            struct Chatty;
            impl std::fmt::Display for Chatty {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    nanolog::info!("D inner {}", 1);
                    f.write_str("chatty")
                }
            }
            nanolog::info!("D outer {}", Chatty);
            std::mem::forget(logger);
        }
        "fork" => {
            let logger = start(path, false);
            log_main_records();
            // SAFETY: the child only logs, flushes and exits; it does not
            // touch locks other threads of this process could hold.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                for i in 0..1000 {
                    nanolog::info!("F {}", i);
                }
                let err = nanolog::flush().is_err();
                drop(logger);
                std::process::exit(if err { 7 } else { 8 });
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert!(libc::WIFEXITED(status), "forked child died: {status}");
            assert_eq!(libc::WEXITSTATUS(status), 7, "flush in the child must fail");
            nanolog::info!("after fork {}", 1);
            drop(logger);
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// The kernel thread id of the thread named `nanolog-flusher` (its name is
/// cut to 15 bytes in /proc).
fn flusher_tid() -> Option<i64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?;
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if comm.trim_end().starts_with("nanolog-flush") {
            return task.file_name().to_str()?.parse().ok();
        }
    }
    None
}

fn raise(sig: libc::c_int) {
    // SAFETY: raise has no preconditions.
    unsafe { libc::raise(sig) };
}

// --------------------------------------------------------------- the parent

struct Expect {
    mode: &'static str,
    /// The exit code, or the signal that ends the child.
    status: Status,
    /// `A 0..N` must all be there.
    all_a: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Status {
    Code(i32),
    Signal(i32),
}

fn status_of(s: ExitStatus) -> Status {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => Status::Code(c),
        (None, Some(sig)) => Status::Signal(sig),
        _ => Status::Code(-1),
    }
}

/// The messages of a log, by their first word: `"A" -> {0, 1, ...}`.
fn decode(path: &Path) -> Result<std::collections::BTreeMap<String, BTreeSet<u64>>, String> {
    let file = LogFile::open(path).map_err(|e| e.to_string())?;
    let files = [file];
    let mut out: std::collections::BTreeMap<String, BTreeSet<u64>> = Default::default();
    for e in Merge::new(&files, Filter::default()) {
        if let Event::Record(r) = e {
            let msg = r.message();
            let (word, rest) = msg.split_once(' ').unwrap_or((&msg, ""));
            let n = rest
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.entry(word.to_owned()).or_default().insert(n);
        }
    }
    Ok(out)
}

/// Whether `set` is exactly `0..len` for some `len` (a prefix, no holes).
fn is_prefix(set: &BTreeSet<u64>) -> bool {
    set.iter().enumerate().all(|(i, &v)| v == i as u64)
}

fn run_child(mode: &str, path: &Path) -> Reaped {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    Command::new(std::env::current_exe().unwrap())
        .env("NANOLOG_EXIT_CHILD", mode)
        .env("NANOLOG_EXIT_PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped()
}

fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check(e: &Expect, dir: &Path) -> Result<String, String> {
    let path = dir.join(format!("{}.nlog", e.mode));
    let mut child = run_child(e.mode, &path);
    let status = wait_bounded(&mut child, Duration::from_secs(60))
        .ok_or("child did not end within 60 s (hung)")?;
    let got = status_of(status);
    if got != e.status {
        return Err(format!("exit {got:?}, expected {:?}", e.status));
    }
    let msgs = decode(&path)?;
    let a = msgs.get("A").cloned().unwrap_or_default();
    if e.all_a && a.len() != N as usize {
        return Err(format!("{} of {N} records before the exit decode", a.len()));
    }
    let b = msgs.get("B").cloned().unwrap_or_default();
    if !is_prefix(&b) {
        return Err("the other thread's records have a hole".into());
    }
    Ok(format!("{} + {} records", a.len(), b.len()))
}

fn check_kill9(dir: &Path) -> Result<String, String> {
    use std::io::BufRead;
    let path = dir.join("kill9.nlog");
    let mut child = run_child("kill9-after-sync", &path);
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let read = out.read_line(&mut line);
    if read.is_err() || line.trim() != "synced" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("child said {line:?} ({read:?})"));
    }
    std::thread::sleep(Duration::from_millis(50));
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let msgs = decode(&path)?;
    let a = msgs.get("A").map_or(0, BTreeSet::len);
    if a != N as usize {
        return Err(format!("{a} of {N} records synced before kill -9 decode"));
    }
    for (k, v) in &msgs {
        if !["A", "B", "C"].contains(&k.as_str()) || !is_prefix(v) && k != "A" {
            return Err(format!("unexpected or holed records {k}"));
        }
    }
    Ok(format!(
        "{a} synced + {} later records",
        msgs.get("C").map_or(0, BTreeSet::len)
    ))
}

fn check_late(dir: &Path) -> Result<String, String> {
    let path = dir.join("late.nlog");
    let mut child = run_child("late-loggers", &path);
    let status = wait_bounded(&mut child, Duration::from_secs(60)).ok_or("hung")?;
    if status_of(status) != Status::Code(0) {
        return Err(format!("exit {:?}", status_of(status)));
    }
    let msgs = decode(&path)?;
    let count = |k: &str| msgs.get(k).map_or(0, BTreeSet::len);
    let want = [
        ("A", N as usize),
        ("T", 200),
        ("X", 100),
        ("Y", 100),
        ("D", 2),
    ];
    for (k, n) in want {
        if count(k) != n {
            return Err(format!("{} of {n} `{k}` records", count(k)));
        }
    }
    // "D inner 1" and "D outer chatty" parse to the same key; both must be there.
    let file = [LogFile::open(&path).map_err(|e| e.to_string())?];
    let ds: Vec<String> = Merge::new(&file, Filter::default())
        .filter_map(|e| match e {
            Event::Record(r) if r.message().starts_with('D') => Some(r.message()),
            _ => None,
        })
        .collect();
    if !(ds.contains(&"D inner 1".to_owned()) && ds.contains(&"D outer chatty".to_owned())) {
        return Err(format!("re-entrant records: {ds:?}"));
    }
    Ok("thread-local destructor 200, exit hooks 100 + 100, re-entrant 2".into())
}

fn check_fork(dir: &Path) -> Result<String, String> {
    let path = dir.join("fork.nlog");
    let mut child = run_child("fork", &path);
    let status = wait_bounded(&mut child, Duration::from_secs(60)).ok_or("hung")?;
    if status_of(status) != Status::Code(0) {
        return Err(format!("exit {:?}", status_of(status)));
    }
    let msgs = decode(&path)?;
    if msgs.contains_key("F") {
        return Err("the forked child wrote into the parent's file".into());
    }
    if msgs.get("A").map_or(0, BTreeSet::len) != N as usize || !msgs.contains_key("after") {
        return Err("parent records missing".into());
    }
    Ok("child's calls dropped, parent's file intact".into())
}

/// The real `panic = "abort"` profile: a fixture crate built with it.
fn check_abort_build(dir: &Path) -> Result<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("tests/fixtures/abort_on_panic/Cargo.toml");
    let target = root.join("target/fixtures");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .args(["build", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !built.success() {
        return Err("the fixture did not build".into());
    }
    let path = dir.join("abort-build.nlog");
    let mut child = Command::new(target.join("debug/abort-on-panic"))
        .arg(&path)
        .arg(N.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_reaped();
    let status = wait_bounded(&mut child, Duration::from_secs(60)).ok_or("hung")?;
    if status_of(status) != Status::Signal(libc::SIGABRT) {
        return Err(format!("exit {:?}, expected SIGABRT", status_of(status)));
    }
    let msgs = decode(&path)?;
    let a = msgs.get("A").map_or(0, BTreeSet::len);
    if a != N as usize {
        return Err(format!("{a} of {N} records before the panic decode"));
    }
    if !msgs.get("B").is_none_or(is_prefix) {
        return Err("the other thread's records have a hole".into());
    }
    Ok(format!("{a} records, aborted"))
}

fn parent() {
    let dir = std::env::temp_dir().join(format!("nanolog-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let code = |c| Status::Code(c);
    let sig = |s| Status::Signal(s);
    let cases = [
        Expect {
            mode: "return-leaked",
            status: code(0),
            all_a: true,
        },
        Expect {
            mode: "return-static",
            status: code(0),
            all_a: true,
        },
        Expect {
            mode: "process-exit",
            status: code(3),
            all_a: true,
        },
        Expect {
            mode: "panic-unwind",
            status: code(101),
            all_a: true,
        },
        Expect {
            mode: "panic-thread-abort-hook",
            status: sig(libc::SIGABRT),
            all_a: true,
        },
        Expect {
            mode: "sigterm",
            status: sig(libc::SIGTERM),
            all_a: true,
        },
        Expect {
            mode: "sigint",
            status: sig(libc::SIGINT),
            all_a: true,
        },
        Expect {
            mode: "sigsegv",
            status: sig(libc::SIGSEGV),
            all_a: true,
        },
        Expect {
            mode: "sigabrt",
            status: sig(libc::SIGABRT),
            all_a: true,
        },
        Expect {
            mode: "sigterm-chained",
            status: code(42),
            all_a: true,
        },
        Expect {
            mode: "sigabrt-on-flusher",
            status: sig(libc::SIGABRT),
            all_a: true,
        },
    ];
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let wanted = |m: &str| filter.as_deref().is_none_or(|f| m.contains(f));
    let runs: u32 = std::env::var("NANOLOG_EXIT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let failed = AtomicBool::new(false);
    let (mut passed, mut failures) = (0u32, 0u32);
    let mut report = |name: &str, r: Result<String, String>| match r {
        Ok(m) => {
            passed += 1;
            println!("exit path {name} ... ok ({m})");
        }
        Err(m) => {
            failures += 1;
            failed.store(true, Ordering::Relaxed);
            println!("exit path {name} ... FAILED: {m}");
        }
    };
    for _ in 0..runs {
        for e in cases.iter().filter(|e| wanted(e.mode)) {
            report(e.mode, check(e, &dir));
        }
        if wanted("kill9-after-sync") {
            report("kill9-after-sync", check_kill9(&dir));
        }
        if wanted("late-loggers") {
            report("late-loggers", check_late(&dir));
        }
        if wanted("fork") {
            report("fork", check_fork(&dir));
        }
        if wanted("panic-abort-build") {
            report("panic-abort-build", check_abort_build(&dir));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    println!("exit_paths: {passed} passed, {failures} failed");
    if failed.load(Ordering::Relaxed) {
        std::process::exit(1);
    }
}
