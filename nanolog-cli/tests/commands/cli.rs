//! The `nanolog` binary, run as a user runs it, against logs written by the
//! real logger. Filters are checked against a brute-force reference computed
//! from the unfiltered JSON output.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::common;
use common::SpawnReaped;

use common::{ok, on_main_thread, p, run, stdout, BIN};

struct Fixtures {
    dir: PathBuf,
    /// Two named threads and main, every level, escapes.
    main: PathBuf,
    /// A second process's log, written after `main`.
    second: PathBuf,
    /// Written with `OnFull::Drop` into a tiny ring: has gaps.
    drops: PathBuf,
    drops_dropped: u64,
    /// A rotated set.
    rotated: Vec<PathBuf>,
    /// Flushed every 50 records: many small extents.
    chunks: PathBuf,
    /// Strings that end in digits after prefixes met again and again.
    numbered: PathBuf,
}

const PER_WORKER: u64 = 2_000;

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    // Written on a thread named "main", so the decoded names do not depend
    // on which test thread got here first.
    F.get_or_init(|| on_main_thread(build_fixtures))
}

fn build_fixtures() -> Fixtures {
    let _s = common::serial();
    {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("nanolog-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("main.nlog");
        let logger = nanolog::Logger::builder()
            .path(&main)
            .level(nanolog::Level::Trace)
            .start()
            .unwrap();
        nanolog::info!("start {}", "main");
        let workers: Vec<_> = ["alpha", "beta"]
            .into_iter()
            .enumerate()
            .map(|(w, name)| {
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        for i in 0..PER_WORKER {
                            match i % 5 {
                                0 => nanolog::trace!("tick {} of worker {}", i, w),
                                1 => nanolog::debug!(
                                    "latency {} us at {:.2}",
                                    i % 97,
                                    i as f64 / 3.0
                                ),
                                2 => nanolog::info!("Hello World # {}", i),
                                3 => nanolog::warn!("queue {} deep", i * 3),
                                _ => nanolog::error!("failed op={} code={:#x}", "write", i),
                            }
                        }
                    })
                    .unwrap()
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        nanolog::info!(
            "line one\nline two\r\x1b[31mred\x1b[0m tab\tend \\ {}",
            "multi\nline"
        );
        nanolog::info!("json hostile {:?} {}", "quote\" backslash\\", f64::NAN);
        drop(logger);

        let second = dir.join("second.nlog");
        let logger = nanolog::Logger::builder().path(&second).start().unwrap();
        for i in 0..100u32 {
            nanolog::info!("second process record {}", i);
        }
        drop(logger);

        let drops = dir.join("drops.nlog");
        let logger = nanolog::Logger::builder()
            .path(&drops)
            .staging_capacity(1024)
            .on_full(nanolog::OnFull::Drop)
            .start()
            .unwrap();
        for i in 0..50_000u64 {
            nanolog::info!("burst {} {}", i, "some padding text for a longer record");
        }
        logger.flush().unwrap();
        let drops_dropped = logger.stats().dropped;
        drop(logger);

        let chunks = dir.join("chunks.nlog");
        let logger = nanolog::Logger::builder().path(&chunks).start().unwrap();
        for i in 0..2_000u64 {
            nanolog::info!("chunked record {}", i);
            if i % 50 == 49 {
                logger.flush().unwrap();
            }
        }
        drop(logger);

        let base = dir.join("rot.nlog");
        let logger = nanolog::Logger::builder()
            .path(&base)
            .rotate_bytes(16 << 10)
            .start()
            .unwrap();
        for i in 0..20_000u64 {
            nanolog::info!("rotated record {} {}", i, "padding padding padding");
            if i % 2000 == 0 {
                logger.flush().unwrap();
            }
        }
        logger.flush().unwrap();
        let files = logger.stats().files;
        drop(logger);
        // The finished files in time order, then the live one.
        let mut rotated: Vec<PathBuf> = nanolog::reader::finished_files(&base)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        rotated.push(base.clone());
        assert_eq!(rotated.len() as u64, files);

        let numbered = dir.join("numbered.nlog");
        let logger = nanolog::Logger::builder().path(&numbered).start().unwrap();
        for (i, key) in numbered_keys().iter().enumerate() {
            nanolog::info!("key {} of {}", key.as_str(), i);
        }
        drop(logger);

        Fixtures {
            numbered,
            dir,
            main,
            second,
            drops,
            drops_dropped,
            rotated,
            chunks,
        }
    }
}

/// The keys of the `numbered` fixture: a user with zeros before its number,
/// an order, an address, a number that is all zeros, and a prefix that JSON
/// escapes.
fn numbered_keys() -> Vec<String> {
    (0..75u64)
        .map(|i| match i % 5 {
            0 => format!("user-{:03}", i % 17),
            1 => format!("orders:{}", i * 7919),
            2 => format!("10.0.0.{i}"),
            3 => format!("batch-{}", "0".repeat(1 + (i % 3) as usize)),
            _ => format!("tag \"x\"\\{i}"),
        })
        .collect()
}

/// Strings that end in digits after a prefix the file met before (format
/// version 7 writes them as the prefix's reference and the number) print
/// as they were logged, in text and in JSON.
#[test]
fn numbered_strings_print_as_logged_in_text_and_json() {
    let f = fixtures();
    let keys = numbered_keys();
    let text = ok(&["decode", p(&f.numbered)]);
    let msgs: Vec<&str> = text
        .lines()
        .map(|l| l.split_once("]: ").map_or(l, |(_, m)| m))
        .collect();
    let want: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("key {k} of {i}"))
        .collect();
    assert_eq!(msgs, want);
    let all = json_lines(&["decode", "--format", "json", p(&f.numbered)]);
    assert_eq!(all.len(), keys.len());
    for ((j, k), i) in all.iter().zip(&keys).zip(0u64..) {
        assert_eq!(j["args"], serde_json::json!([k, i]));
    }
    // Most of them were packed (their prefixes met before).
    let log = nanolog::reader::LogFile::open(&f.numbered).unwrap();
    let prefixes: Vec<String> = log
        .records()
        .filter_map(|r| {
            r.unwrap().args().find_map(|v| match v {
                nanolog::reader::Value::Numbered(n) => Some(n.prefix().to_owned()),
                _ => None,
            })
        })
        .collect();
    assert!(
        prefixes.len() >= 50,
        "{} of {} packed",
        prefixes.len(),
        keys.len()
    );
    // The one JSON escapes among them (its text above came out whole).
    assert!(prefixes.iter().filter(|p| *p == "tag \"x\"\\").count() >= 5);
}

fn json_lines(args: &[&str]) -> Vec<Json> {
    ok(args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l:?}: {e}")))
        .collect()
}

fn records(all: &[Json]) -> Vec<&Json> {
    all.iter().filter(|j| j.get("msg").is_some()).collect()
}

#[test]
fn text_lines_have_the_contract_shape() {
    let f = fixtures();
    let out = ok(&["decode", p(&f.main)]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() as u64, 1 + 2 * PER_WORKER + 2);
    let re = regex::Regex::new(
        r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{9}Z \S+:\d+ (TRACE|DEBUG|INFO|WARN|ERROR)\[(\w+:)?\d+\]( \S+)?: .*$",
    )
    .unwrap();
    for l in &lines {
        assert!(re.is_match(l), "line does not match the contract: {l:?}");
    }
    assert!(
        lines[0].ends_with("INFO[main:1]: start main"),
        "{}",
        lines[0]
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("[alpha:") && l.ends_with("Hello World # 2")));
    // Control characters are escaped: one record, one line, no terminal escapes.
    let hostile = lines.iter().find(|l| l.contains("line one")).unwrap();
    assert!(
        hostile.ends_with(r"line one\nline two\r\u{1b}[31mred\u{1b}[0m tab\tend \\ multi\nline"),
        "{hostile}"
    );
    assert!(!out.contains('\x1b'));
}

#[test]
fn json_output_has_the_contract_keys_and_exact_values() {
    let f = fixtures();
    let all = json_lines(&["decode", "--format", "json", p(&f.main)]);
    for j in &all {
        for k in [
            "ts_ns",
            "ts",
            "level",
            "thread",
            "thread_name",
            "file",
            "line",
            "fmt",
            "args",
            "msg",
            "source",
        ] {
            assert!(j.get(k).is_some(), "missing key {k} in {j}");
        }
        assert!(j["ts_ns"].is_i64());
    }
    let hello = all.iter().find(|j| j["msg"] == "Hello World # 7").unwrap();
    assert_eq!(hello["fmt"], "Hello World # {}");
    assert_eq!(hello["args"], serde_json::json!([7]));
    assert_eq!(hello["level"], "INFO");
    let hostile = all
        .iter()
        .find(|j| j["fmt"].as_str().unwrap().starts_with("json hostile"))
        .unwrap();
    assert_eq!(
        hostile["args"],
        serde_json::json!(["quote\" backslash\\", "NaN"])
    );
    assert_eq!(
        hostile["msg"],
        "json hostile \"quote\\\" backslash\\\\\" NaN"
    );
    // Time order.
    let ts: Vec<i64> = all.iter().map(|j| j["ts_ns"].as_i64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn unsorted_keeps_every_record() {
    let f = fixtures();
    let mut sorted = ok(&["decode", p(&f.main)])
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let mut unsorted = ok(&["decode", "--unsorted", p(&f.main)])
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    sorted.sort();
    unsorted.sort();
    assert_eq!(sorted, unsorted);
}

#[test]
fn filters_match_a_brute_force_reference() {
    let f = fixtures();
    let path = p(&f.main);
    let all = json_lines(&["decode", "--format", "json", path]);
    let all = records(&all);
    let msgs = |v: Vec<Json>| {
        v.iter()
            .map(|j| j["msg"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let refm = |pred: &dyn Fn(&Json) -> bool| {
        all.iter()
            .filter(|j| pred(j))
            .map(|j| j["msg"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let rank = |l: &str| {
        ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
            .iter()
            .position(|x| *x == l)
            .unwrap()
    };

    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--level", "warn", path,
    ]));
    assert_eq!(got, refm(&|j| rank(j["level"].as_str().unwrap()) >= 3));
    assert!(!got.is_empty());

    let beta = all.iter().find(|j| j["thread_name"] == "beta").unwrap()["thread"]
        .as_u64()
        .unwrap();
    let got = msgs(json_lines(&[
        "decode",
        "--format",
        "json",
        "--thread",
        &beta.to_string(),
        path,
    ]));
    assert_eq!(got, refm(&|j| j["thread"].as_u64() == Some(beta)));
    // --thread takes a name too.
    let by_name = msgs(json_lines(&[
        "decode", "--format", "json", "--thread", "beta", path,
    ]));
    assert_eq!(by_name, got);

    let got = msgs(json_lines(&[
        "decode",
        "--format",
        "json",
        "--grep",
        r"^queue \d*4 deep$",
        path,
    ]));
    let re = regex::Regex::new(r"^queue \d*4 deep$").unwrap();
    assert_eq!(got, refm(&|j| re.is_match(j["msg"].as_str().unwrap())));
    assert!(!got.is_empty());

    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--limit", "17", path,
    ]));
    assert_eq!(got, refm(&|_| true)[..17].to_vec());

    let (a, b) = (
        all[all.len() / 3]["ts"].as_str().unwrap(),
        all[2 * all.len() / 3]["ts"].as_str().unwrap(),
    );
    let (an, bn) = (
        all[all.len() / 3]["ts_ns"].as_i64().unwrap(),
        all[2 * all.len() / 3]["ts_ns"].as_i64().unwrap(),
    );
    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--since", a, "--until", b, path,
    ]));
    assert_eq!(
        got,
        refm(&|j| (an..=bn).contains(&j["ts_ns"].as_i64().unwrap()))
    );

    // A time ago that starts with '-', as its own argument (README, --help):
    // the fixtures were written moments ago, so all of them are in the
    // last two hours and none in the two hours before that.
    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--since", "-2h", path,
    ]));
    assert_eq!(got, refm(&|_| true));
    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--until", "-2h", path,
    ]));
    assert!(got.is_empty());

    // Combined.
    let got = msgs(json_lines(&[
        "decode", "--format", "json", "--level", "info", "--grep", "7", "--limit", "5", path,
    ]));
    let want: Vec<String> = refm(&|j| {
        rank(j["level"].as_str().unwrap()) >= 2 && j["msg"].as_str().unwrap().contains('7')
    })
    .into_iter()
    .take(5)
    .collect();
    assert_eq!(got, want);
}

#[test]
fn several_files_merge_in_time_order_with_their_source() {
    let f = fixtures();
    let all = json_lines(&["decode", "--format", "json", p(&f.second), p(&f.main)]);
    assert_eq!(all.len() as u64, 100 + 1 + 2 * PER_WORKER + 2);
    let ts: Vec<i64> = all.iter().map(|j| j["ts_ns"].as_i64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "not in time order");
    // `main` was written first, so its records come first despite the argument order.
    assert_eq!(all[0]["source"], p(&f.main));
    assert_eq!(all.last().unwrap()["source"], p(&f.second));

    // A rotated set decodes as one log, in order.
    let mut args = vec!["decode", "--format", "json"];
    let rot: Vec<&str> = f.rotated.iter().map(|x| p(x)).collect();
    assert!(rot.len() > 2);
    args.extend(rot.iter().rev());
    let all = json_lines(&args);
    let seq: Vec<u64> = all.iter().map(|j| j["args"][0].as_u64().unwrap()).collect();
    let first_bad = seq.iter().enumerate().find(|(i, v)| *i as u64 != **v);
    assert_eq!(
        first_bad,
        None,
        "rotated set out of order ({} records)",
        seq.len()
    );
    assert_eq!(seq.len(), 20_000);
}

#[test]
fn dropped_records_show_as_gap_lines() {
    let f = fixtures();
    assert!(f.drops_dropped > 0);
    let out = ok(&["decode", p(&f.drops)]);
    let mut total = 0;
    for l in out.lines().filter(|l| l.contains(" DROPPED[")) {
        let n: u64 = l
            .split("]: ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(l.contains("records dropped between"), "{l}");
        total += n;
    }
    assert_eq!(total, f.drops_dropped);
    let all = json_lines(&["decode", "--format", "json", p(&f.drops)]);
    let gaps: u64 = all
        .iter()
        .filter_map(|j| j.get("dropped"))
        .map(|d| d.as_u64().unwrap())
        .sum();
    assert_eq!(gaps, f.drops_dropped);
}

#[test]
fn stats_counts_and_aggregates_match_direct_computation() {
    let f = fixtures();
    let all = json_lines(&["decode", "--format", "json", p(&f.main)]);
    let rows = json_lines(&["stats", "--format", "json", p(&f.main)]);
    let total: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(total as usize, all.len());
    for r in &rows {
        let of_site: Vec<i64> = all
            .iter()
            .filter(|j| j["fmt"] == r["fmt"] && j["line"] == r["line"])
            .map(|j| j["ts_ns"].as_i64().unwrap())
            .collect();
        assert_eq!(r["count"].as_u64().unwrap() as usize, of_site.len(), "{r}");
        // Its first and last times are those of its first and last records.
        assert_eq!(
            r["first_ts_ns"].as_i64(),
            of_site.iter().min().copied(),
            "{r}"
        );
        assert_eq!(
            r["last_ts_ns"].as_i64(),
            of_site.iter().max().copied(),
            "{r}"
        );
    }
    let counts: Vec<u64> = rows.iter().map(|r| r["count"].as_u64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "sorted by count");
    // Bytes are the records' own bytes: most of the file's entries
    // (uncompressed), never more.
    let bytes: u64 = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    let size = nanolog::reader::LogFile::open(&f.main).unwrap().raw_len() as u64;
    assert!(bytes < size && bytes > size / 2, "{bytes} of {size}");
    let share: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
    assert!((share - bytes as f64 / size as f64).abs() < 1e-9);
    let count_share: f64 = rows
        .iter()
        .map(|r| r["count_share"].as_f64().unwrap())
        .sum();
    assert!((count_share - 1.0).abs() < 1e-9);

    // --site/--arg against the values in the JSON output.
    let mut vals: Vec<f64> = all
        .iter()
        .filter(|j| j["fmt"] == "latency {} us at {:.2}")
        .map(|j| j["args"][1].as_f64().unwrap())
        .collect();
    vals.sort_by(f64::total_cmp);
    let agg = &json_lines(&[
        "stats",
        "--format",
        "json",
        "--site",
        "^latency",
        "--arg",
        "1",
        p(&f.main),
    ])[0];
    assert_eq!(agg["count"].as_u64().unwrap() as usize, vals.len());
    assert_eq!(agg["min"].as_f64().unwrap(), vals[0]);
    assert_eq!(agg["max"].as_f64().unwrap(), *vals.last().unwrap());
    let mean = vals.iter().sum::<f64>() / vals.len() as f64;
    assert!((agg["mean"].as_f64().unwrap() - mean).abs() < 1e-9 * mean.abs().max(1.0));
    let rank = |p: f64| vals[((p / 100.0 * vals.len() as f64).ceil() as usize).max(1) - 1];
    assert_eq!(agg["p50"].as_f64().unwrap(), rank(50.0));
    assert_eq!(agg["p90"].as_f64().unwrap(), rank(90.0));
    assert_eq!(agg["p99"].as_f64().unwrap(), rank(99.0));

    // Grouping by level and thread adds up; a string argument is refused.
    let by_level = json_lines(&["stats", "--format", "json", "--by", "level", p(&f.main)]);
    for r in &by_level {
        let n = all.iter().filter(|j| j["level"] == r["level"]).count();
        assert_eq!(r["count"].as_u64().unwrap() as usize, n);
    }
    let by_thread = json_lines(&["stats", "--format", "json", "--by", "thread", p(&f.main)]);
    assert_eq!(by_thread.len(), 3);
    let series = json_lines(&["stats", "--format", "json", "--every", "1ms", p(&f.main)]);
    assert_eq!(
        series
            .iter()
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>() as usize,
        all.len()
    );
    let o = run(&["stats", "--site", "^failed", "--arg", "0", p(&f.main)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a number"));

    // --fmt selects by the exact format string (no regex escapes).
    let exact = &json_lines(&[
        "stats",
        "--format",
        "json",
        "--fmt",
        "latency {} us at {:.2}",
        "--arg",
        "1",
        p(&f.main),
    ])[0];
    // The same selection: the same figures, to the last bit.
    for k in ["count", "min", "max", "mean", "p50", "p90", "p99"] {
        assert_eq!(exact[k], agg[k], "{k}");
    }
    // A header row over the time series.
    let text = ok(&["stats", "--every", "1s", p(&f.main)]);
    assert!(
        text.lines().next().unwrap().starts_with("interval start"),
        "{text}"
    );
    // One thread's records over the files of a rolled set: one row.
    let mut args = vec!["stats", "--format", "json", "--by", "thread"];
    args.extend(f.rotated.iter().map(|x| p(x)));
    let rows = json_lines(&args);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["count"].as_u64(), Some(20_000));
}

/// The workers of `stats` take a large log's extents as they come free, so
/// which worker adds which values differs from run to run; floating-point
/// sums depend on their order, and the mean once did too (its last digits
/// changed between two runs over the same file).
#[test]
fn stats_of_an_argument_are_the_same_on_every_run() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nanolog-cli-mean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("floats.nlog");
    // The fixtures' loggers first: one logger at a time in a process.
    let _ = fixtures();
    let _s = common::serial();
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    // Many small extents (a flush every 25 records), values whose sum
    // rounds differently in different orders.
    for i in 0..40_000u64 {
        let v = (i as f64).sqrt() * 1.1 + 1e-7 * (i % 13) as f64;
        nanolog::info!("took {} ms", v);
        if i % 25 == 24 {
            logger.flush().unwrap();
        }
    }
    drop(logger);
    let args = ["stats", "--site", "^took", "--arg", "0", p(&path)];
    let first = ok(&args);
    assert!(first.contains("count: 40000"), "{first}");
    for _ in 0..12 {
        assert_eq!(ok(&args), first);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn info_shows_dictionary_threads_and_counts() {
    let f = fixtures();
    let out = ok(&["info", p(&f.main)]);
    for want in [
        // The version this build writes (FORMAT.md).
        "format version:  9",
        "ticks/s",
        "Hello World # {}",
        "alpha",
        "beta",
        "records:         4003",
        "u64",
    ] {
        assert!(out.contains(want), "info lacks {want:?}:\n{out}");
    }
    let j: Json = serde_json::from_str(&ok(&["info", "--format", "json", p(&f.main)])).unwrap();
    assert_eq!(j["records"], 4003);
    assert_eq!(j["threads"].as_array().unwrap().len(), 3);
}

/// `info` says how many of a file's batches went into blocks of each
/// codec (the flusher picks deflate or LZ4 as it has time, so a user asks):
/// in text, a line only a compressed file has; in JSON, always.
#[test]
fn info_counts_the_blocks_of_each_codec() {
    let dir = common::fresh_dir("cli", "info-blocks");
    // The fixtures' loggers first: one logger at a time in a process.
    let _ = fixtures();
    let mut seen = Vec::new();
    for (name, compression) in [
        ("none", nanolog::Compression::None),
        ("fast", nanolog::Compression::Fast),
        ("small", nanolog::Compression::Small),
    ] {
        let path = dir.join(format!("{name}.nlog"));
        let _s = common::serial();
        let logger = nanolog::Logger::builder()
            .path(&path)
            .compression(compression)
            .start()
            .unwrap();
        for i in 0..2_000u64 {
            nanolog::info!("request {} took {} us", i, i * 37 % 1000);
            if i % 100 == 99 {
                logger.flush().unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        drop(logger);
        let text = ok(&["info", p(&path)]);
        let j: Json = serde_json::from_str(&ok(&["info", "--format", "json", p(&path)])).unwrap();
        let (lz4, deflate) = (
            j["blocks"]["lz4"].as_u64().unwrap(),
            j["blocks"]["deflate"].as_u64().unwrap(),
        );
        let line = text.lines().find(|l| l.starts_with("blocks:"));
        match line {
            None => assert_eq!(lz4 + deflate, 0, "{text}"),
            Some(l) => {
                let want = format!(
                    "blocks:          {} ({deflate} deflate, {lz4} LZ4): ",
                    lz4 + deflate
                );
                assert!(l.starts_with(&want), "{l}");
                let raw = j["blocks"]["raw"].as_u64().unwrap();
                assert!(raw > j["blocks"]["bytes"].as_u64().unwrap(), "{j}");
            }
        }
        seen.push((lz4, deflate));
    }
    assert_eq!(seen[0], (0, 0));
    assert!(seen[1].0 >= 10 && seen[1].1 == 0, "{seen:?}");
    assert!(seen[2].1 >= 10, "{seen:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

fn fails_cleanly(path: &Path, what: &str) {
    for cmd in ["decode", "info", "stats"] {
        let o = run(&[cmd, p(path)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd} accepted {what}");
        assert_eq!(o.status.code(), Some(1), "{cmd} on {what}: {err}");
        assert!(
            err.starts_with("nanolog: ") && err.trim_end().lines().count() == 1,
            "{cmd} on {what}: {err:?}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn hostile_files_are_clear_errors_never_panics() {
    let f = fixtures();
    let dir = f.dir.join("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read(&f.main).unwrap();

    let empty = dir.join("empty.nlog");
    write(&empty, b"");
    fails_cleanly(&empty, "an empty file");
    let text = dir.join("text.nlog");
    write(&text, b"2026-11-22 this is a text log\n");
    fails_cleanly(&text, "a text file");
    fails_cleanly(&dir.join("missing.nlog"), "a missing file");
    let mut v99 = good.clone();
    v99[8] = 99;
    let ver = dir.join("v99.nlog");
    write(&ver, &v99);
    fails_cleanly(&ver, "an unknown version");
    let o = run(&["decode", p(&ver)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unsupported nanolog format version 99"));
    let short = dir.join("short.nlog");
    write(&short, &good[..20]);
    fails_cleanly(&short, "a header cut short");

    // A torn tail decodes up to the last whole entry (for a compressed
    // file, block: a batch), with a warning. (The chunks were written a
    // batch at a time.)
    let chunks = std::fs::read(&f.chunks).unwrap();
    let torn = dir.join("torn.nlog");
    write(&torn, &chunks[..chunks.len() * 2 / 3]);
    let o = run(&["decode", p(&torn)]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("torn tail"));
    let n = stdout(&o).lines().count();
    assert!(n > 1000 && n < 2000, "{n}");

    // Damage in the middle: that extent is skipped, the rest decodes.
    let good = std::fs::read(&f.chunks).unwrap();
    let good_out = ok(&["decode", p(&f.chunks)]);
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 16] {
        *b ^= 0x5a;
    }
    let corrupt = dir.join("corrupt.nlog");
    write(&corrupt, &bad);
    let o = run(&["decode", p(&corrupt)]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("corrupt"));
    let out = stdout(&o);
    let n = out.lines().count();
    assert!((1900..2000).contains(&n), "{n}");
    assert_eq!(out.lines().last(), good_out.lines().last());
    let good_lines: std::collections::HashSet<&str> = good_out.lines().collect();
    assert!(
        out.lines().all(|l| good_lines.contains(l)),
        "corruption produced a record that was never logged"
    );

    // Random garbage after a valid header, at many seeds: never a panic.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..40 {
        let mut b = good[..48].to_vec();
        let len = 50 + (i * 37) % 3000;
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b.push(seed as u8);
        }
        // Splice some real entries in, to reach deeper code.
        b.extend_from_slice(&good[48..48 + (i * 101) % 2000]);
        let path = dir.join(format!("fuzz{i}.nlog"));
        write(&path, &b);
        for cmd in ["decode", "info", "stats"] {
            let o = run(&[cmd, p(&path)]);
            assert!(
                !String::from_utf8_lossy(&o.stderr).contains("panicked"),
                "{cmd} fuzz{i}"
            );
        }
    }
}

#[test]
fn closed_pipe_ends_quietly_with_success() {
    let f = fixtures();
    let mut child = Command::new(BIN)
        .args(["decode", p(&f.drops)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_reaped();
    let mut out = child.stdout.take().unwrap();
    let mut buf = [0u8; 100];
    out.read_exact(&mut buf).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn collect(rx: &std::sync::mpsc::Receiver<String>, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut v = Vec::new();
    while v.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => v.push(l),
            Err(_) => panic!("timed out after {} of {n} lines", v.len()),
        }
    }
    v
}

#[test]
fn follow_picks_up_appended_records_and_rotation() {
    let f = fixtures();
    let dir = f.dir.join("follow");
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read(&f.rotated[0]).unwrap();
    let first = nanolog::reader::LogFile::open(&f.rotated[0]).unwrap();
    let total0 = first.records().count();
    // Start with a prefix cut mid-entry, as a live writer leaves it.
    let cut = good.len() / 2;
    let prefix = nanolog::reader::LogFile::from_bytes("prefix", good[..cut].to_vec()).unwrap();
    let n_prefix = prefix.records().count();
    let live = dir.join("rot.nlog");
    write(&live, &good[..cut]);

    let mut child = Command::new(BIN)
        .args(["decode", "-f", p(&live)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped();
    let rx = common::line_reader(&mut child);
    let got = collect(&rx, n_prefix);
    assert!(got[0].ends_with("rotated record 0 padding padding padding"));

    // The writer appends the rest of the file (which ends by rotating), then the next file appears.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&live)
        .unwrap()
        .write_all(&good[cut..])
        .unwrap();
    let got = collect(&rx, total0 - n_prefix);
    assert!(got
        .last()
        .unwrap()
        .contains(&format!("rotated record {} ", total0 - 1)));
    // The next file takes the live file's path, renamed over it at once.
    let next_tmp = dir.join("rot.nlog.next");
    std::fs::copy(&f.rotated[1], &next_tmp).unwrap();
    std::fs::rename(&next_tmp, &live).unwrap();
    let next = nanolog::reader::LogFile::open(&f.rotated[1])
        .unwrap()
        .records()
        .count();
    let got = collect(&rx, next);
    assert!(
        got[0].contains(&format!("rotated record {} ", total0)),
        "{}",
        got[0]
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A new run rewrites the followed file in place (as a logger restarting
/// at the same path does): the follower starts over on it and prints its
/// records, never the old run's formats applied to the new run's bytes.
#[test]
fn follow_starts_over_when_a_new_run_replaces_the_file() {
    let f = fixtures();
    let dir = f.dir.join("follow-replaced");
    std::fs::create_dir_all(&dir).unwrap();
    let live = dir.join("app.nlog");
    std::fs::copy(&f.main, &live).unwrap();
    let first: Vec<String> = stdout(&run(&["decode", p(&f.main)]))
        .lines()
        .map(str::to_owned)
        .collect();
    let second: Vec<String> = stdout(&run(&["decode", p(&f.second)]))
        .lines()
        .map(str::to_owned)
        .collect();
    let mut child = Command::new(BIN)
        .args(["decode", "-f", p(&live)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped();
    let rx = common::line_reader(&mut child);
    assert_eq!(collect(&rx, first.len()), first);
    // The new run truncates the file and writes its own header and records.
    write(&live, &std::fs::read(&f.second).unwrap());
    let got = collect(&rx, second.len());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got, second);
}

#[test]
fn parallel_rendering_matches_the_single_threaded_path() {
    // One CPU makes `decode` render on its main thread alone.
    if Command::new("taskset")
        .arg("-c")
        .arg("0")
        .arg("true")
        .status()
        .is_err()
    {
        eprintln!("skipped: no taskset");
        return;
    }
    let f = fixtures();
    let rot: Vec<&str> = f.rotated.iter().map(|x| p(x)).collect();
    for format in ["text", "json"] {
        let mut args = vec!["decode", "--format", format];
        args.extend(&rot);
        let parallel = ok(&args);
        let serial = Command::new("taskset")
            .arg("-c")
            .arg("0")
            .arg(BIN)
            .args(&args)
            .output()
            .unwrap();
        assert!(serial.status.success());
        assert!(parallel.lines().count() > 3 * 4096, "several batches");
        assert!(
            stdout(&serial) == parallel,
            "{format} output differs between one and several threads"
        );
    }
}

#[test]
fn more_files_than_the_descriptor_limit_decode() {
    // A long-kept rolled set is many files: reading them must not hold a
    // file descriptor each (the maps do not need them).
    let f = fixtures();
    let dir = f.dir.join("many");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(&f.chunks).unwrap();
    let one = ok(&["decode", p(&f.chunks)]).lines().count();
    let n = 300;
    let paths: Vec<String> = (0..n)
        .map(|i| {
            let path = dir.join(format!("part{i:03}.nlog"));
            write(&path, &bytes);
            p(&path).to_owned()
        })
        .collect();
    // 300 files under a limit of 128 descriptors.
    let script = "ulimit -n 128 && exec \"$0\" decode \"$@\" | wc -l";
    let o = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(BIN)
        .args(&paths)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.is_empty(), "{err}");
    let lines: usize = stdout(&o).trim().parse().unwrap();
    assert_eq!(lines, one * n);
}

/// The last `n` lines of `full`.
fn last_lines(full: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = full.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// `decode -n N` prints the last N records of the input after the filters,
/// in time order: the tail of the whole decode filtered the same way, for
/// any N (none, fewer than a file holds, more than the input holds), text
/// or JSON, with `--level`, `--grep`, `--thread` and `--limit`.
#[test]
fn lines_prints_the_tail_of_the_filtered_decode() {
    let f = fixtures();
    let main = p(&f.main);
    let filters: [&[&str]; 5] = [
        &[],
        &["--level", "warn"],
        &["--grep", "7"],
        &["--format", "json", "--thread", "beta"],
        &["--unsorted"],
    ];
    for extra in filters {
        let mut args = vec!["decode", main];
        args.extend_from_slice(extra);
        let full = ok(&args);
        let total = full.lines().count();
        assert!(total > 10, "{extra:?}: {total} records");
        for n in [0, 1, 7, total - 1, total, total + 5] {
            let n_s = n.to_string();
            let mut with_n = args.clone();
            with_n.extend_from_slice(&["-n", &n_s]);
            let got = ok(&with_n);
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                last_lines(&full, n),
                "decode {extra:?} -n {n}"
            );
        }
    }
    // --limit applies to what -n leaves: the first 2 of the last 5.
    let full = ok(&["decode", main]);
    let got = ok(&["decode", main, "-n", "5", "--limit", "2"]);
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        last_lines(&full, 5)[..2].to_vec()
    );
    // -n is the last records, not a follower's saved position.
    let o = run(&["decode", main, "-f", "-n", "3", "--cursor", "c.json"]);
    assert!(!o.status.success());
}

/// A rolled set read a file at a time (a read budget of 0 MB): `-n` reads
/// the last files back until they hold N records, and prints the same lines
/// as the tail of the whole set's decode, across the files' boundaries.
#[test]
fn lines_of_a_set_read_a_window_at_a_time_cross_its_files() {
    let f = fixtures();
    let set: Vec<&str> = f.rotated.iter().map(|x| p(x)).collect();
    let decode = |extra: &[&str]| {
        let mut c = Command::new(BIN);
        c.arg("decode").args(&set).args(extra);
        c.env("NANOLOG_READ_WINDOW_MB", "0");
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let full = decode(&[]);
    let last_file = nanolog::reader::LogFile::open(f.rotated.last().unwrap())
        .unwrap()
        .records()
        .count();
    let total = full.lines().count();
    assert!(
        total > last_file + 10,
        "the set has more than its last file"
    );
    for n in [3, last_file, last_file + 7, total, total + 1] {
        let got = decode(&["-n", &n.to_string()]);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            last_lines(&full, n),
            "-n {n} of a set whose last file holds {last_file}"
        );
    }
    // Filtered, and read at once (the set within the budget) alike: the
    // newest files only are opened when they hold the last N (see
    // `last_files`), and the lines are the same.
    for extra in [&["--grep", "record 1"][..], &["--format", "json"]] {
        let mut c = Command::new(BIN);
        c.arg("decode").args(&set).args(extra);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let full = String::from_utf8(o.stdout).unwrap();
        let total = full.lines().count();
        assert!(total > 3, "{extra:?}: {total}");
        for n in [1, total / 3, total - 1, total + 2] {
            let n_s = n.to_string();
            let mut args = extra.to_vec();
            args.extend_from_slice(&["-n", &n_s]);
            let got = decode(&args);
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                last_lines(&full, n),
                "{extra:?} -n {n}"
            );
        }
    }
}

/// A set rolled every 8 KiB while three threads log at once, at two
/// levels: a file holds records of other threads older than its own start
/// (drained after the roll), so `-n` that opens only the newest files must
/// still print exactly the tail of the whole set's decode, filtered or not,
/// read at once or a file at a time.
#[test]
fn lines_of_a_set_written_by_threads_at_once_are_the_tail_of_its_decode() {
    let dir = common::fresh_dir("cli", "lines-threads");
    let base = dir.join("busy.nlog");
    // The fixtures' loggers first: one logger at a time in a process.
    let _ = fixtures();
    {
        let _s = common::serial();
        let logger = nanolog::Logger::builder()
            .path(&base)
            .rotate_bytes(8 << 10)
            .start()
            .unwrap();
        std::thread::scope(|s| {
            for t in 0..3u64 {
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        if i % 10 == 0 {
                            nanolog::warn!("thread {} slow {}", t, i);
                        } else {
                            nanolog::info!("thread {} step {}", t, i);
                        }
                    }
                });
            }
        });
        drop(logger);
    }
    let mut set: Vec<PathBuf> = nanolog::reader::finished_files(&base)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    set.push(base.clone());
    assert!(set.len() >= 4, "{} files", set.len());
    let decode = |extra: &[&str], window: bool| {
        let mut c = Command::new(BIN);
        c.arg("decode").args(&set).args(extra);
        if window {
            c.env("NANOLOG_READ_WINDOW_MB", "0");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    for extra in [&[][..], &["--level", "warn"], &["--grep", "thread 2"]] {
        let full = decode(extra, false);
        let total = full.lines().count();
        assert!(total > 100, "{extra:?}: {total}");
        for n in [1, 17, total / 4, total - 1, total + 3] {
            let n_s = n.to_string();
            let mut args = extra.to_vec();
            args.extend_from_slice(&["-n", &n_s]);
            for window in [false, true] {
                let got = decode(&args, window);
                assert_eq!(
                    got.lines().collect::<Vec<_>>(),
                    last_lines(&full, n),
                    "{extra:?} -n {n}, a file at a time: {window}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `decode -f -n N`: the last N records of the live file, then every record
/// that follows (the next file of the set, whole).
#[test]
fn follow_with_lines_starts_at_the_last_records() {
    let f = fixtures();
    let dir = f.dir.join("follow-lines");
    std::fs::create_dir_all(&dir).unwrap();
    let live = dir.join("rot.nlog");
    std::fs::copy(&f.rotated[0], &live).unwrap();
    let full = ok(&["decode", p(&live)]);
    let mut child = Command::new(BIN)
        .args(["decode", "-f", "-n", "3", p(&live)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_reaped();
    let rx = common::line_reader(&mut child);
    let got = collect(&rx, 3);
    assert_eq!(got, last_lines(&full, 3));
    // Nothing before them comes after.
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "more than the last 3 lines"
    );
    // The next file takes the live path: it is followed from its start.
    let next_tmp = dir.join("rot.nlog.next");
    std::fs::copy(&f.rotated[1], &next_tmp).unwrap();
    std::fs::rename(&next_tmp, &live).unwrap();
    let next = ok(&["decode", p(&f.rotated[1])]);
    let got = collect(&rx, next.lines().count());
    assert_eq!(got, next.lines().collect::<Vec<_>>());
    let _ = child.kill();
    let _ = child.wait();
}
