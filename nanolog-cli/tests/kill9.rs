//! Nothing lost at `kill -9`, tried as an operator would: a child whose
//! threads log `ks <run> <thread> <seq> <tag>` and note, after each call
//! returns, how many calls returned (in a file mapped shared, which the
//! kill does not take), is killed by SIGKILL at seeded moments; its set is
//! recovered by the next start on the same path or by `nanolog recover`,
//! and decoded. Every record whose call had returned must be there exactly
//! once, in its thread's order, with its own arguments, and nothing that
//! was not logged.
//!
//! `harness = false`: the same binary is parent and child (the child is
//! chosen by `NANOLOG_KILL_CHILD`), as in the facade's `exit_paths`.

#[cfg(unix)]
#[path = "../../tests/common/reaped.rs"]
mod reaped;

#[cfg(not(unix))]
fn main() {}

#[cfg(unix)]
fn main() {
    if let Ok(mode) = std::env::var("NANOLOG_KILL_CHILD") {
        unix::child(&mode);
        return;
    }
    unix::parent();
}

#[cfg(unix)]
mod unix {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use super::reaped::SpawnReaped;

    /// Slots for the returned-call counts: one cache line per thread.
    const SLOTS: usize = 16;

    fn env(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent"))
    }

    /// The counts file, mapped shared: slot `t` holds how many of thread
    /// `t`'s calls have returned.
    fn counts(path: &Path, create: bool) -> memmap2::MmapMut {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .open(path)
            .expect("counts file");
        if create {
            f.set_len((SLOTS * 64) as u64)
                .expect("size the counts file");
        }
        // SAFETY: the file is this test's own; the child writes it and the
        // parent reads it only after the child is dead.
        unsafe { memmap2::MmapMut::map_mut(&f) }.expect("map the counts file")
    }

    fn slot(map: &memmap2::MmapMut, t: usize) -> &AtomicU64 {
        assert!(t < SLOTS);
        // SAFETY: 64-byte slots inside the mapping, which outlives the
        // reference; each is only accessed atomically.
        unsafe { AtomicU64::from_ptr(map.as_ptr().add(t * 64) as *mut u64) }
    }

    // ------------------------------------------------------------ the child

    /// The record's tag for `seq`: its own arguments, checked when read.
    const TAGS: [&str; 3] = ["alpha", "beta", "gamma"];

    /// Thread 0 of run `run` logs seqs 0 to 999, then stops (the clean ends).
    fn log_thousand(run: u64) {
        for seq in 0..1000u64 {
            nanolog::info!("ks {} {} {} {}", run, 0, seq, TAGS[(seq % 3) as usize]);
        }
    }

    pub fn child(mode: &str) {
        let path = PathBuf::from(env("NANOLOG_KILL_PATH"));
        let run: u64 = env("NANOLOG_KILL_RUN").parse().expect("run");
        let mut b = nanolog::Logger::builder().path(&path);
        match mode {
            "restart" => {
                // Recovers at start, then stops cleanly.
                drop(b.start().expect("start"));
                return;
            }
            "roll" => b = b.rotate_bytes(256 << 10),
            m if m.starts_with("rollstep") || m == "midcommit" => {
                // The flusher stops for good at a step of its first roll,
                // or in its first commit to the area (see
                // `__stop_flusher_at`), where the parent kills it.
                b = b.rotate_bytes(256 << 10);
                let point = m
                    .strip_prefix("rollstep")
                    .map_or(5, |s| s.parse().expect("a step"));
                nanolog_runtime::__stop_flusher_at(
                    point,
                    PathBuf::from(env("NANOLOG_KILL_MARKER")),
                );
            }
            "off" | "no-room" => {
                // Ordinary rings: turned off, or where the rings' file
                // cannot be made (a directory stands at its path).
                if mode == "off" {
                    b = b.crash_safe(false);
                }
                let logger = b.start().expect("start");
                assert!(!nanolog_runtime::area_path(&path).is_file());
                log_thousand(run);
                drop(logger);
                return;
            }
            "clean" | "leaked" => {
                // Ends by itself: its rings' file goes with a clean end.
                let logger = b.start().expect("start");
                assert!(nanolog_runtime::area_path(&path).exists());
                log_thousand(run);
                if mode == "leaked" {
                    std::mem::forget(logger);
                }
                return;
            }
            "drop" => b = b.on_full(nanolog::OnFull::Drop).staging_capacity(64 << 10),
            _ => {}
        }
        let _logger = b.start().expect("start");
        let map = counts(Path::new(&env("NANOLOG_KILL_COUNTS")), false);
        let map = &map;
        let (threads, pace) = match mode {
            "paced" => (2, Some(Duration::from_micros(200))),
            _ => (4, None),
        };
        if mode == "spans" {
            use tracing_subscriber::layer::SubscriberExt;
            let sub = tracing_subscriber::registry().with(nanolog::tracing_layer());
            tracing::subscriber::set_global_default(sub).expect("subscriber");
        }
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for seq in 0u64.. {
                        let tag = TAGS[(seq % 3) as usize];
                        if mode == "spans" {
                            let span = tracing::info_span!("req", id = seq / 100);
                            let _e = span.enter();
                            tracing::info!("ks {} {} {} {}", run, t, seq, tag);
                        } else {
                            nanolog::info!("ks {} {} {} {}", run, t, seq, tag);
                        }
                        slot(map, t).store(seq + 1, Ordering::Release);
                        if let Some(p) = pace {
                            std::thread::sleep(p);
                        }
                    }
                });
            }
        });
    }

    // ----------------------------------------------------------- the parent

    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn cli() -> &'static str {
        env!("CARGO_BIN_EXE_nanolog")
    }

    /// A small, seeded generator (xorshift): the kill moments of a run are
    /// the same every time, and printed.
    struct Seeds(u64);

    impl Seeds {
        fn next(&mut self, lo: u64, hi: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            lo + self.0 % (hi - lo)
        }
    }

    /// Runs the child in `mode` on `log` and kills it after `after` (a
    /// `rollstep` or `midcommit` child: `after` its flusher stopped); returns
    /// how many calls of each thread had returned.
    fn run_and_kill(mode: &str, log: &Path, run: u64, after: Duration) -> Vec<u64> {
        let counts_path = log.with_file_name(format!("counts-{run}"));
        let marker = log.with_file_name(format!("stopped-{run}"));
        let map = counts(&counts_path, true);
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .env("NANOLOG_KILL_CHILD", mode)
            .env("NANOLOG_KILL_PATH", log)
            .env("NANOLOG_KILL_RUN", run.to_string())
            .env("NANOLOG_KILL_COUNTS", &counts_path)
            .env("NANOLOG_KILL_MARKER", &marker)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn_reaped();
        if mode.starts_with("rollstep") || mode == "midcommit" {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !marker.exists() {
                assert!(
                    child.try_wait().expect("wait").is_none(),
                    "{mode}: the child ended before its flusher stopped"
                );
                assert!(Instant::now() < deadline, "{mode}: no stop in 60 s");
                std::thread::sleep(Duration::from_millis(2));
            }
            std::fs::remove_file(&marker).expect("the marker");
        }
        std::thread::sleep(after);
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("reap");
        assert!(
            !status.success(),
            "{mode}: the child was killed: {status:?}"
        );
        (0..SLOTS)
            .map(|t| slot(&map, t).load(Ordering::Acquire))
            .collect()
    }

    /// A restart on the same path (the child's start recovers; it logs
    /// nothing), killed after `kill_after` if given.
    fn restart(log: &Path, kill_after: Option<Duration>) {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .env("NANOLOG_KILL_CHILD", "restart")
            .env("NANOLOG_KILL_PATH", log)
            .env("NANOLOG_KILL_RUN", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn_reaped();
        match kill_after {
            Some(d) => {
                std::thread::sleep(d);
                let _ = child.kill();
                let _ = child.wait();
            }
            None => {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    if let Some(s) = child.try_wait().expect("wait") {
                        assert!(s.success(), "the restart failed: {s:?}");
                        break;
                    }
                    assert!(Instant::now() < deadline, "the restart hung");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    fn recover_cli(log: &Path) -> String {
        let out = Command::new(cli())
            .arg("recover")
            .arg(log)
            .output()
            .expect("nanolog recover");
        assert!(
            out.status.success(),
            "nanolog recover: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The set's files (the live one, finished ones), companions and the
    /// counts files aside: as `decode DIR/*` would be given them.
    fn set_files(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                !p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("counts-")
            })
            .collect();
        v.sort();
        v
    }

    /// What a reading of the set holds (by the reader in this process: a
    /// flat-out run logs millions of records, too many to check through
    /// JSON in the time a test has; the CLI's view is checked apart).
    #[derive(Default)]
    struct Decoded {
        /// Per (run, thread): the last seq read, and how many were read.
        last: BTreeMap<(u64, u64), (u64, u64)>,
        /// Per (run, thread): seqs skipped over (drops).
        missing: BTreeMap<(u64, u64), u64>,
        /// Per logger thread id: the (run, thread) its records say.
        thread_of: BTreeMap<u32, (u64, u64)>,
        /// Dropped records per logger thread id.
        gaps: BTreeMap<u32, u64>,
        recovered: u64,
        records: u64,
        /// A thread with recovered records: its newest are recovered ones.
        recovered_thread: Option<u32>,
    }

    /// Reads the set in time order, checking each record as it comes: its
    /// own arguments, its thread's order (a seq once, after the one
    /// before), its spans or none.
    fn decode(dir: &Path, drops: bool, what: &str) -> Decoded {
        use nanolog_runtime::reader::{Event, Filter, LogFile, Merge};
        use std::os::unix::fs::MetadataExt;
        let mut seen = std::collections::BTreeSet::new();
        let files: Vec<LogFile> = set_files(dir)
            .iter()
            // As the CLI takes a directory's files: its lock, a roll's next
            // file (a kill mid-roll leaves it) and the rings' file aside,
            // and a file with two names (a kill mid-roll, between linking
            // the live file to its finished name and renaming the next file
            // over the path, leaves one) read once.
            .filter(|p| {
                let n = p.to_string_lossy();
                !n.contains(".rings") && !n.ends_with(".lock") && !n.ends_with(".next")
            })
            .filter(|p| {
                let m = std::fs::metadata(p).expect("a file of the set");
                seen.insert((m.dev(), m.ino()))
            })
            .map(|p| LogFile::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .collect();
        let mut d = Decoded::default();
        let mut span = String::new();
        for ev in Merge::new(&files, Filter::default()) {
            let r = match ev {
                Event::Record(r) => r,
                Event::Gap(g, _) => {
                    *d.gaps.entry(g.thread).or_default() += g.count;
                    continue;
                }
            };
            let msg = r.message();
            let w: Vec<&str> = msg.split(' ').collect();
            assert!(
                w.len() == 5 && w[0] == "ks",
                "{what}: a record that was not logged: {msg:?}"
            );
            let (run, t, seq): (u64, u64, u64) = (
                w[1].parse().unwrap(),
                w[2].parse().unwrap(),
                w[3].parse().unwrap(),
            );
            assert_eq!(
                w[4],
                TAGS[(seq % 3) as usize],
                "{what}: its own arguments: {msg:?}"
            );
            d.records += 1;
            if r.recovered() {
                d.recovered += 1;
                d.recovered_thread = Some(r.thread());
            }
            // Its spans, or none and lost: never another's.
            if let Some(s) = r.spans().last() {
                span.clear();
                s.render(&mut span);
                assert_eq!(span, format!("req{{id={}}}", seq / 100), "{what}: {msg}");
            } else if what.starts_with("spans") {
                assert!(
                    r.spans_lost(),
                    "{what}: a record of a span shown in none: {msg}"
                );
            }
            d.thread_of.insert(r.thread(), (run, t));
            let e = d.last.entry((run, t)).or_insert((u64::MAX, 0));
            let expect = e.0.wrapping_add(1);
            if seq != expect {
                assert!(
                    drops && (seq > expect || e.0 == u64::MAX),
                    "{what}: run {run} thread {t}: seq {seq} where {expect} was due"
                );
                *d.missing.entry((run, t)).or_default() += seq - expect.min(seq);
            }
            *e = (seq, e.1 + 1);
        }
        d
    }

    /// Every returned call of `run` (`returned[t]` per thread) is in `d`
    /// exactly once, in order; at most the one call in flight past them;
    /// with `drops`, the missing ones are exactly what the gaps count.
    fn check(d: &Decoded, run: u64, returned: &[u64], drops: bool, what: &str) {
        for (t, &n) in returned.iter().enumerate() {
            let t = t as u64;
            let (last, read) = d.last.get(&(run, t)).copied().unwrap_or((u64::MAX, 0));
            let last = if read == 0 { None } else { Some(last) };
            // At most the one call in flight past the returned ones.
            assert!(
                last.is_none_or(|l| l <= n),
                "{what}: run {run} thread {t}: seq {last:?} was never called ({n} returned)"
            );
            let through = last.map_or(0, |l| l + 1);
            let missing =
                n.saturating_sub(through) + d.missing.get(&(run, t)).copied().unwrap_or(0);
            if drops {
                let counted: u64 = d
                    .thread_of
                    .iter()
                    .filter(|(_, &(r, tt))| r == run && tt == t)
                    .map(|(id, _)| d.gaps.get(id).copied().unwrap_or(0))
                    .sum();
                assert!(
                    missing <= counted,
                    "{what}: run {run} thread {t}: {missing} missing, {counted} counted as dropped"
                );
            } else {
                assert_eq!(
                    missing, 0,
                    "{what}: run {run} thread {t}: {missing} of {n} returned calls lost"
                );
            }
        }
    }

    /// The CLI's view of the newest records (of `thread`, one with
    /// recovered records: a thread's recovered records are its newest;
    /// another thread's newest may have been written before the kill):
    /// how many JSON says were recovered.
    fn cli_says_recovered(dir: &Path, thread: Option<u32>) -> usize {
        let mut cmd = Command::new(cli());
        cmd.args(["decode", "--format", "json", "-n", "20"]);
        if let Some(t) = thread {
            cmd.args(["--thread", &t.to_string()]);
        }
        let out = cmd.args(set_files(dir)).output().expect("nanolog decode");
        assert!(
            out.status.success(),
            "decode: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                v.get("recovered") == Some(&serde_json::Value::Bool(true))
            })
            .count()
    }

    fn fresh_dir(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("nanolog-kill9-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        Dir(dir)
    }

    /// One kill of `mode`, recovered by a restart or by `nanolog recover`;
    /// the set decodes before the recovery too.
    fn once(mode: &str, seeds: &mut Seeds, by_cli: bool, tally: &mut Tally) {
        let dir = fresh_dir(mode);
        let log = dir.0.join("app.nlog");
        let after = Duration::from_millis(seeds.next(100, 400));
        let returned = run_and_kill(mode, &log, 1, after);
        assert!(
            nanolog_runtime::area_path(&log).exists(),
            "{mode}: the rings' file is beside the log"
        );
        // The killed set decodes as it is (what its file holds), by the
        // CLI too, given the directory's every file (the rings' file and
        // the lock among them are skipped).
        let before = decode(&dir.0, true, mode);
        assert_eq!(
            cli_says_recovered(&dir.0, None),
            0,
            "{mode}: nothing recovered yet"
        );
        if by_cli {
            let said = recover_cli(&log);
            assert!(
                said.contains("records of process") || said.contains("holds no record"),
                "{said}"
            );
        } else {
            restart(&log, None);
        }
        assert!(
            !nanolog_runtime::area_path(&log).exists(),
            "{mode}: the rings' file is removed once recovered"
        );
        let d = decode(&dir.0, mode == "drop", mode);
        check(&d, 1, &returned, mode == "drop", mode);
        if d.recovered > 0 {
            assert!(
                cli_says_recovered(&dir.0, d.recovered_thread) > 0,
                "{mode}: decode says which were recovered"
            );
        }
        let total: u64 = returned.iter().sum();
        let kept = before.records;
        println!(
            "{mode:6} kill at {:>3} ms, {}: {total} calls returned, {kept} in the file at the kill, {} recovered",
            after.as_millis(),
            if by_cli { "nanolog recover" } else { "restart" },
            d.recovered
        );
        if mode.starts_with("rollstep") {
            // The service comes back on the path after a kill mid-roll and
            // goes on: both runs whole, once each.
            let status = Command::new(std::env::current_exe().expect("test binary"))
                .env("NANOLOG_KILL_CHILD", "clean")
                .env("NANOLOG_KILL_PATH", &log)
                .env("NANOLOG_KILL_RUN", "2")
                .status()
                .expect("run the child");
            assert!(status.success(), "{mode}, run 2: {status:?}");
            let d2 = decode(&dir.0, false, mode);
            check(&d2, 1, &returned, false, mode);
            check(&d2, 2, &[1000], false, mode);
        }
        tally.recovered += d.recovered;
        tally.kills += 1;
    }

    #[derive(Default)]
    struct Tally {
        kills: u64,
        recovered: u64,
    }

    pub fn parent() {
        let seed: u64 = std::env::var("NANOLOG_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        println!("kill9: seed {seed}");
        let mut seeds = Seeds(seed);
        let mut tally = Tally::default();
        for (mode, kills) in [
            ("flat", 4),
            ("paced", 3),
            ("roll", 3),
            ("drop", 2),
            ("spans", 2),
        ] {
            for k in 0..kills {
                once(mode, &mut seeds, k % 2 == 1, &mut tally);
            }
        }
        // A kill aimed at each step of a roll (the flusher stopped there
        // while the threads go on, their rings filling).
        for step in 1..=4 {
            once(
                &format!("rollstep{step}"),
                &mut seeds,
                step % 2 == 0,
                &mut tally,
            );
        }
        // And in a commit to the area: what it staged counted once, from
        // the area and not again from the ring.
        for by_cli in [false, true] {
            once("midcommit", &mut seeds, by_cli, &mut tally);
        }
        assert!(tally.recovered > 0, "no kill found records to recover");
        clean_ends();
        refused_area(&mut seeds);
        twice_in_a_row(&mut seeds);
        killed_in_recovery(&mut seeds);
        println!(
            "kill9: {} kills, {} records recovered: ok",
            tally.kills, tally.recovered
        );
    }

    /// A rings' file of another layout (its version word changed): refused
    /// with a clear message, kept aside, the log as it was; `decode DIR/*`
    /// steps over the kept file.
    fn refused_area(seeds: &mut Seeds) {
        use std::os::unix::fs::FileExt;
        let dir = fresh_dir("refused");
        let log = dir.0.join("app.nlog");
        run_and_kill("flat", &log, 1, Duration::from_millis(seeds.next(100, 300)));
        let area = nanolog_runtime::area_path(&log);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&area)
            .expect("the rings' file");
        f.write_all_at(&99u32.to_le_bytes(), 8)
            .expect("its version word");
        drop(f);
        let before = decode(&dir.0, true, "refused");
        let out = Command::new(cli())
            .arg("recover")
            .arg(&log)
            .output()
            .expect("nanolog recover");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "refused: {said}");
        assert!(
            said.contains("layout 99") && said.contains("kept as"),
            "a clear message: {said}"
        );
        assert!(!area.exists(), "kept aside: {said}");
        let kept = std::fs::read_dir(&dir.0)
            .expect("dir")
            .filter(|e| {
                e.as_ref().is_ok_and(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("app.nlog.rings.kept-")
                })
            })
            .count();
        assert_eq!(kept, 1, "the refused file is kept");
        let after = decode(&dir.0, true, "refused");
        assert_eq!(after.records, before.records, "the log is as it was");
        assert_eq!(cli_says_recovered(&dir.0, None), 0);
        println!(
            "refused a rings' file of layout 99: kept aside, {} records as before",
            after.records
        );
    }

    /// A logger dropped, and one leaked when `main` returns: every record
    /// written, and no rings' file left behind.
    fn clean_ends() {
        for mode in ["clean", "leaked"] {
            let dir = fresh_dir(mode);
            let log = dir.0.join("app.nlog");
            let status = Command::new(std::env::current_exe().expect("test binary"))
                .env("NANOLOG_KILL_CHILD", mode)
                .env("NANOLOG_KILL_PATH", &log)
                .env("NANOLOG_KILL_RUN", "1")
                .status()
                .expect("run the child");
            assert!(status.success(), "{mode}: {status:?}");
            assert!(
                !nanolog_runtime::area_path(&log).exists(),
                "{mode}: the rings' file is removed when the process ends cleanly"
            );
            let d = decode(&dir.0, false, mode);
            check(&d, 1, &[1000], false, mode);
            assert_eq!(d.recovered, 0, "{mode}");
        }
        for mode in ["off", "no-room"] {
            let dir = fresh_dir(mode);
            let log = dir.0.join("app.nlog");
            if mode == "no-room" {
                std::fs::create_dir(nanolog_runtime::area_path(&log)).expect("a directory");
            }
            let out = Command::new(std::env::current_exe().expect("test binary"))
                .env("NANOLOG_KILL_CHILD", mode)
                .env("NANOLOG_KILL_PATH", &log)
                .env("NANOLOG_KILL_RUN", "1")
                .output()
                .expect("run the child");
            assert!(out.status.success(), "{mode}: {out:?}");
            let said = String::from_utf8_lossy(&out.stderr);
            let lines = said
                .lines()
                .filter(|l| l.contains("ordinary rings"))
                .count();
            assert_eq!(
                lines,
                usize::from(mode == "no-room"),
                "{mode}: said once, or not at all: {said}"
            );
            if mode == "no-room" {
                std::fs::remove_dir(nanolog_runtime::area_path(&log)).expect("the directory");
            }
            let d = decode(&dir.0, false, mode);
            check(&d, 1, &[1000], false, mode);
        }
    }

    /// Run 1 killed; run 2 starts on the path (recovering run 1) and is
    /// killed too; `nanolog recover` then: both runs whole, once each.
    fn twice_in_a_row(seeds: &mut Seeds) {
        let dir = fresh_dir("twice");
        let log = dir.0.join("app.nlog");
        let r1 = run_and_kill("flat", &log, 1, Duration::from_millis(seeds.next(100, 600)));
        let r2 = run_and_kill("flat", &log, 2, Duration::from_millis(seeds.next(100, 600)));
        recover_cli(&log);
        let d = decode(&dir.0, false, "twice");
        check(&d, 1, &r1, false, "twice, run 1");
        check(&d, 2, &r2, false, "twice, run 2");
        println!(
            "twice  two kills in a row: {} recovered in all",
            d.recovered
        );
    }

    /// A restart killed while it recovers (at seeded moments of its first
    /// tens of milliseconds), then recovered again: still exactly once.
    fn killed_in_recovery(seeds: &mut Seeds) {
        for _ in 0..3 {
            let dir = fresh_dir("midrecovery");
            let log = dir.0.join("app.nlog");
            let r1 = run_and_kill("flat", &log, 1, Duration::from_millis(seeds.next(200, 700)));
            let at = Duration::from_millis(seeds.next(1, 40));
            restart(&log, Some(at));
            restart(&log, None);
            let d = decode(&dir.0, false, "midrecovery");
            check(&d, 1, &r1, false, "killed in recovery");
            println!(
                "midrec restart killed at {:>2} ms, then again: {} recovered",
                at.as_millis(),
                d.recovered
            );
        }
    }
}
