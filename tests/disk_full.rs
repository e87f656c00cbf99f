//! A full disk: writes fail, the logger says so, counts what it lost, keeps
//! running, and the file holds everything written before, decodable.
//!
//! The "disk" is a file-size limit (`ulimit -f`, with SIGXFSZ ignored so a
//! write past it fails with EFBIG instead of killing the process). The test
//! runs itself again as a child process under that limit.

use std::process::Command;

use nanolog::reader::{Event, Filter, LogFile, Merge};

const CHILD_ENV: &str = "NANOLOG_DISK_FULL_CHILD";
const LIMIT_KIB: u64 = 64;

#[test]
fn full_disk_is_reported_counted_and_leaves_a_decodable_file() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return child();
    }
    if Command::new("bash").arg("-c").arg("true").status().is_err() {
        eprintln!("skipped: no bash to set a file-size limit");
        return;
    }
    let path = std::env::temp_dir().join(format!("nanolog-full-{}.nlog", std::process::id()));
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "trap '' XFSZ; ulimit -f {LIMIT_KIB}; exec \"$0\" --exact full_disk_is_reported_counted_and_leaves_a_decodable_file --nocapture"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .arg(&exe)
        .env(CHILD_ENV, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child: write error reported"), "{stdout}");

    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size <= LIMIT_KIB * 1024, "{size}");
    let files = [LogFile::open(&path).unwrap()];
    assert!(
        files[0].warnings().is_empty(),
        "the file was cut back to whole entries: {:?}",
        files[0].warnings()
    );
    // Records of failed batches are lost (and counted); the rest are all
    // there, once each and in order.
    let counts = |key: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("child: counts"))
            .expect("counts line");
        let field = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .expect(key);
        field.parse().unwrap()
    };
    let (logged, lost, total) = (counts("logged="), counts("lost="), counts("total="));
    assert!(lost > 0);
    assert_eq!(
        logged + lost,
        total,
        "every record was either written or counted as lost"
    );
    let mut last = None;
    let mut in_file = 0u64;
    for ev in Merge::new(&files, Filter::default()) {
        let Event::Record(r) = ev else { continue };
        in_file += 1;
        if r.site().format.ends_with("after the error") {
            continue;
        }
        let Some(nanolog::reader::Value::Uint(v)) = r.arg(0) else {
            panic!("bad argument")
        };
        assert!(last.is_none_or(|l| v > l), "{v} after {last:?}");
        last = Some(v);
    }
    assert_eq!(in_file, logged);
    assert!(in_file > 1000, "only {in_file} records survived");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}

fn child() {
    let path = std::env::var_os(CHILD_ENV).unwrap();
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let mut failed = false;
    let mut total = 0u64;
    for i in 0..200_000u64 {
        nanolog::info!("record {} with some text to fill the disk quickly", i);
        total += 1;
        if i % 5_000 == 4_999 {
            match logger.flush() {
                Ok(()) => {}
                Err(nanolog::Error::Write(e)) => {
                    println!("child: write error reported: {e}");
                    failed = true;
                    break;
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
    }
    assert!(failed, "no write error at a {LIMIT_KIB} KiB limit");
    // Logging goes on after the error without blocking or panicking.
    nanolog::info!("record {} after the error", 0u64);
    let _ = logger.flush();
    let stats = logger.stats();
    println!(
        "child: counts logged={} lost={} total={}",
        stats.logged,
        stats.lost,
        total + 1
    );
    drop(logger);
}

const CLEARS_ENV: &str = "NANOLOG_DISK_CLEARS_CHILD";

/// Space is freed after a write error: logging resumes into the same file,
/// the loss is reported by one flush, and the next flush is clean.
#[test]
fn a_write_error_that_clears_resumes_and_is_reported_once() {
    if std::env::var_os(CLEARS_ENV).is_some() {
        return child_clears();
    }
    if Command::new("bash").arg("-c").arg("true").status().is_err() {
        eprintln!("skipped: no bash to set a file-size limit");
        return;
    }
    let path = std::env::temp_dir().join(format!("nanolog-clears-{}.nlog", std::process::id()));
    let exe = std::env::current_exe().unwrap();
    // A soft limit only, so the child can lift it: the disk gets space back.
    let script = format!(
        "trap '' XFSZ; ulimit -S -f {LIMIT_KIB}; exec \"$0\" --exact a_write_error_that_clears_resumes_and_is_reported_once --nocapture"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .arg(&exe)
        .env(CLEARS_ENV, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child: resumed, flush ok"), "{stdout}");
    let files = [LogFile::open(&path).unwrap()];
    assert!(files[0].warnings().is_empty(), "{:?}", files[0].warnings());
    let resumed: Vec<(u128, String)> = Merge::new(&files, Filter::default())
        .filter_map(|ev| match ev {
            Event::Record(r) if r.site().format.starts_with("resumed") => {
                match (r.arg(0), r.arg(1)) {
                    (
                        Some(nanolog::reader::Value::Uint(v)),
                        Some(nanolog::reader::Value::Str(s)),
                    ) => Some((v, s.to_owned())),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect();
    // The failed write held the definition of its block's string (format
    // version 3 defines a repeated string once, then refers to it): the
    // records after it refer to that string, and read it back.
    let block = stdout
        .lines()
        .find_map(|l| l.strip_prefix("child: failed in "))
        .expect("the failed block");
    let want: Vec<(u128, String)> = (0..10_000u64)
        .map(|i| (u128::from(i), block.to_owned()))
        .collect();
    assert_eq!(resumed, want);
    // The file itself says what was lost, before what was written after.
    let lost: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("child: lost="))
        .expect("lost line")
        .parse()
        .unwrap();
    assert!(lost > 0);
    let mut in_file = 0;
    let mut seen_resumed = false;
    for ev in Merge::new(&files, Filter::default()) {
        match ev {
            Event::Gap(g, _) => {
                assert!(g.is_lost(), "{g:?}");
                assert!(!seen_resumed, "the loss is reported after later records");
                in_file += g.count;
            }
            Event::Record(r) => seen_resumed |= r.site().format.starts_with("resumed"),
        }
    }
    assert_eq!(in_file, lost, "records the file reports lost");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}

fn child_clears() {
    let path = std::env::var_os(CLEARS_ENV).unwrap();
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let mut errors = 0;
    let mut block = String::new();
    for i in 0..200_000u64 {
        // A string new to each flush's batch, repeated in it.
        block = format!("block {:06}", i / 5_000);
        nanolog::info!("record {} {} with some text to fill the disk", i, block);
        if i % 5_000 == 4_999 && logger.flush().is_err() {
            errors += 1;
            break;
        }
    }
    println!("child: failed in {block}");
    assert_eq!(errors, 1, "no write error at a {LIMIT_KIB} KiB limit");
    // Space is freed.
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit; raising the soft limit up to the hard one.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &unlimited) };
    assert_eq!(rc, 0);
    for i in 0..10_000u64 {
        nanolog::info!("resumed {} {}", i, block);
    }
    // The failure was reported once, by the flush above; this one is clean.
    match logger.flush() {
        Ok(()) => println!("child: resumed, flush ok"),
        Err(e) => println!("child: flush after the space came back failed: {e}"),
    }
    println!("child: lost={}", logger.stats().lost);
    drop(logger);
}
