//! `nanolog export` (README "Querying logs at scale"), run as a user runs it: the Parquet file
//! is read back with the `parquet` crate and compared, row by row and
//! column by column, with `nanolog decode --format json` of the same files.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt32Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value as Json;

use crate::common;

use common::{on_main_thread, p, run, succeed};

struct Fixtures {
    dir: PathBuf,
    /// Several threads (one unnamed), targets, named fields, escapes,
    /// non-finite floats, every level.
    main: PathBuf,
    /// Written with `OnFull::Drop` into a tiny ring: has gaps.
    drops: PathBuf,
    /// Written 100 records at a time, with pauses: many batches (compressed
    /// blocks, the flusher having time).
    batches: PathBuf,
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| on_main_thread(build))
}

fn build() -> Fixtures {
    let _s = common::serial();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nanolog-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let main = dir.join("main.nlog");
    let logger = nanolog::Logger::builder()
        .path(&main)
        .level(nanolog::Level::Trace)
        .start()
        .unwrap();
    let workers: Vec<_> = (0..3u32)
        .map(|w| {
            let mut b = std::thread::Builder::new();
            if w > 0 {
                b = b.name(format!("worker-{w}"));
            }
            b.spawn(move || {
                if w == 0 {
                    // A thread with no name: `thread_name` is null.
                    nanolog::set_thread_name("");
                }
                for i in 0..3_000u32 {
                    match i % 6 {
                        0 => nanolog::info!("request {} took {} us", i, i * 3),
                        1 => nanolog::debug!(target: "net::peer", "peer {addr} rtt {rtt:.2}", addr = "10.0.0.1", rtt = f64::from(i) / 7.0),
                        2 => nanolog::warn!("odd \"quote\" and \\ and\ttab {}", i),
                        3 => nanolog::trace!("ratio {} {}", f64::NAN, f64::INFINITY),
                        4 => nanolog::error!("failed {code:?} after {i}", code = "E42"),
                        _ => nanolog::info!("wide {} {} {}", u128::MAX, i64::MIN, 'x'),
                    }
                }
            })
            .unwrap()
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    drop(logger);

    let drops = dir.join("drops.nlog");
    let logger = nanolog::Logger::builder()
        .path(&drops)
        .staging_capacity(4096)
        .on_full(nanolog::OnFull::Drop)
        .start()
        .unwrap();
    for i in 0..200_000u64 {
        nanolog::info!("burst {} {}", i, "padding padding padding");
    }
    logger.flush().unwrap();
    let dropped = logger.stats().dropped;
    drop(logger);
    assert!(dropped > 0, "the drops fixture dropped nothing");
    let batches = dir.join("batches.nlog");
    let logger = nanolog::Logger::builder().path(&batches).start().unwrap();
    for i in 0..3_000u64 {
        nanolog::info!(target: "orders", "order {id} filled at {px}", id = i, px = i as f64 / 8.0);
        if i % 100 == 99 {
            logger.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    drop(logger);
    Fixtures {
        dir,
        main,
        drops,
        batches,
    }
}

/// `nanolog export --format parquet --output OUT EXTRA... INPUT`, which must succeed.
fn export_parquet(out: &Path, extra: &[&str], input: &Path) -> Output {
    let mut args = vec!["export", "--format", "parquet", "--output", p(out)];
    args.extend_from_slice(extra);
    args.push(p(input));
    succeed(&args)
}

/// The records (not gap lines) of `decode --format json`.
fn decoded(args: &[&str]) -> Vec<Json> {
    let mut a = vec!["decode", "--format", "json"];
    a.extend_from_slice(args);
    String::from_utf8(succeed(&a).stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|v| v.get("dropped").is_none())
        .collect()
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    reader.map(|b| b.unwrap()).collect()
}

/// Each Parquet row as the JSON object of the columns that `decode` has too.
fn rows(batches: &[RecordBatch]) -> Vec<Json> {
    let mut out = Vec::new();
    for b in batches {
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, COLUMNS);
        let s = |i: usize| b.column(i).as_string::<i32>();
        let ts = b.column(0).as_primitive::<TimestampNanosecondType>();
        let thread = b.column(2).as_primitive::<UInt32Type>();
        let line = b.column(6).as_primitive::<UInt32Type>();
        for r in 0..b.num_rows() {
            let name = s(3);
            out.push(serde_json::json!({
                "ts_ns": ts.value(r),
                "level": s(1).value(r),
                "thread": thread.value(r),
                "thread_name": if name.is_null(r) { Json::Null } else { name.value(r).into() },
                "target": s(4).value(r),
                "file": s(5).value(r),
                "line": line.value(r),
                "fmt": s(7).value(r),
                "msg": s(8).value(r),
                // Strings holding JSON: parsed, to compare as values.
                "args": serde_json::from_str::<Json>(s(9).value(r)).unwrap(),
                "fields": serde_json::from_str::<Json>(s(10).value(r)).unwrap(),
                "spans": serde_json::from_str::<Json>(s(11).value(r)).unwrap(),
                // Null where `decode` has no key (a record outside traced spans).
                "trace_id": if s(12).is_null(r) { Json::Null } else { s(12).value(r).into() },
                "span_id": if s(13).is_null(r) { Json::Null } else { s(13).value(r).into() },
            }));
        }
    }
    out
}

/// The columns of README "Querying logs at scale" and "Trace context", in order.
const COLUMNS: [&str; 14] = [
    "ts",
    "level",
    "thread",
    "thread_name",
    "target",
    "file",
    "line",
    "fmt",
    "msg",
    "args",
    "fields",
    "spans",
    "trace_id",
    "span_id",
];

/// The keys of a decoded JSON record that the Parquet columns carry (`ts`
/// compared as `ts_ns`, the integer nanoseconds).
fn project(v: &Json) -> Json {
    Json::Object(
        COLUMNS
            .iter()
            .map(|c| if *c == "ts" { "ts_ns" } else { c })
            .map(|k| (k.to_string(), v[k].clone()))
            .collect(),
    )
}

#[test]
fn parquet_rows_equal_decode_json_column_by_column() {
    let f = fixtures();
    let out = f.dir.join("main.parquet");
    let o = export_parquet(&out, &[], &f.main);
    let batches = read_parquet(&out);
    assert_eq!(
        *batches[0].schema().field(0).data_type(),
        arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, Some("UTC".into()))
    );
    let got = rows(&batches);
    let want = decoded(&[p(&f.main)]);
    assert_eq!(got.len(), 9_000);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(*g, project(w), "row {i}");
    }
    assert!(got.iter().any(|r| r["thread_name"].is_null()));
    assert!(got.iter().any(|r| r["fields"]["addr"] == "10.0.0.1"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exported 9000 records"));
}

#[test]
fn gaps_are_not_rows_and_their_total_is_on_stderr() {
    let f = fixtures();
    let out = f.dir.join("drops.parquet");
    let o = export_parquet(&out, &[], &f.drops);
    let gaps: u64 = String::from_utf8(succeed(&["decode", "--format", "json", p(&f.drops)]).stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).unwrap()["dropped"].as_u64())
        .sum();
    assert!(gaps > 0);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{gaps} records were dropped")),
        "{err}"
    );
    let got = rows(&read_parquet(&out));
    assert_eq!(got.len(), decoded(&[p(&f.drops)]).len());
    assert_eq!(got.len() as u64 + gaps, 200_000);
}

#[test]
fn export_applies_the_filters_of_decode() {
    let f = fixtures();
    let filters: &[&[&str]] = &[
        &["--level", "warn"],
        &["--grep", "took \\d+2 us"],
        &["--thread", "2", "--limit", "100"],
        &["--level", "debug", "--grep", "peer", "--limit", "7"],
    ];
    for (k, extra) in filters.iter().enumerate() {
        let out = f.dir.join(format!("filtered-{k}.parquet"));
        export_parquet(&out, extra, &f.main);
        let mut dargs: Vec<&str> = extra.to_vec();
        dargs.push(p(&f.main));
        let want: Vec<Json> = decoded(&dargs).iter().map(project).collect();
        let got = rows(&read_parquet(&out));
        assert!(!want.is_empty(), "{extra:?} selects nothing");
        assert_eq!(got, want, "{extra:?}");
    }
}

#[test]
fn small_row_groups_and_every_codec_give_the_same_rows() {
    let f = fixtures();
    let want = rows(&read_parquet(&{
        let out = f.dir.join("default.parquet");
        export_parquet(&out, &[], &f.main);
        out
    }));
    for codec in ["snappy", "none", "zstd"] {
        let out = f.dir.join(format!("rg-{codec}.parquet"));
        export_parquet(
            &out,
            &["--compression", codec, "--row-group", "1000"],
            &f.main,
        );
        let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(&out).unwrap())
            .unwrap()
            .metadata()
            .clone();
        assert_eq!(meta.num_row_groups(), 9, "{codec}");
        assert_eq!(rows(&read_parquet(&out)), want, "{codec}");
    }
}

#[test]
fn jsonl_is_decode_json_byte_for_byte() {
    let f = fixtures();
    let out = f.dir.join("main.jsonl");
    succeed(&[
        "export",
        "--format",
        "jsonl",
        "--output",
        p(&out),
        "--level",
        "info",
        p(&f.main),
        p(&f.drops),
    ]);
    let want = succeed(&[
        "decode",
        "--format",
        "json",
        "--level",
        "info",
        p(&f.main),
        p(&f.drops),
    ])
    .stdout;
    assert!(std::fs::read(&out).unwrap() == want);
}

#[test]
fn hostile_and_truncated_inputs_get_the_same_clean_error_as_decode() {
    let f = fixtures();
    let bad = f.dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let good = std::fs::read(&f.main).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.nlog", Vec::new()),
        ("text.nlog", b"just some text, not a log\n".to_vec()),
        ("header-only.nlog", good[..20].to_vec()),
        ("version.nlog", {
            let mut v = good.clone();
            v[8] = 0xEE;
            v
        }),
    ];
    for (name, bytes) in cases {
        let path = bad.join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = bad.join(format!("{name}.parquet"));
        let e = run(&["export", "--format", "parquet", "-o", p(&out), p(&path)]);
        let d = run(&["decode", p(&path)]);
        assert!(!e.status.success(), "{name}: export succeeded");
        assert_eq!(e.status.code(), d.status.code(), "{name}");
        let (es, ds) = (
            String::from_utf8_lossy(&e.stderr),
            String::from_utf8_lossy(&d.stderr),
        );
        assert_eq!(es, ds, "{name}");
        assert_eq!(es.lines().count(), 1, "{name}: {es}");
        assert!(!es.contains("panicked"), "{name}: {es}");
    }
    // A torn tail: everything up to the last whole entry (a batch, in a
    // compressed file), with a warning.
    let batches = std::fs::read(&f.batches).unwrap();
    let torn = bad.join("torn.nlog");
    std::fs::write(&torn, &batches[..batches.len() * 2 / 3 + 3]).unwrap();
    let out = bad.join("torn.parquet");
    let e = export_parquet(&out, &[], &torn);
    assert!(String::from_utf8_lossy(&e.stderr).contains("warning"));
    let want: Vec<Json> = decoded(&[p(&torn)]).iter().map(project).collect();
    assert!(want.len() > 1000);
    assert_eq!(rows(&read_parquet(&out)), want);
}

/// The Parquet files under `dir`, sorted.
fn part_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `export --partition-by hour` (README "Querying logs at scale"): Hive-style directories
/// named by each row's UTC date and hour, every row once, rows equal to
/// decode's in order; a second export into the same directory adds files
/// beside the first (part-00001), never replaces them.
#[test]
fn partitioned_export_writes_hive_directories_by_utc_hour() {
    let f = fixtures();
    let dir = f.dir.join("partitioned");
    let _ = std::fs::remove_dir_all(&dir);
    for _ in 0..2 {
        let o = succeed(&[
            "export",
            "--format",
            "parquet",
            "--partition-by",
            "hour",
            "--output",
            p(&dir),
            p(&f.main),
        ]);
        // "in 1 partition", "in 2 partitions": the count said, in words.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(" in 1 partition\n") || err.contains(" partitions\n"),
            "{o:?}"
        );
    }
    let files = part_files(&dir);
    let firsts: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.ends_with("part-00000.parquet"))
        .collect();
    assert!(!firsts.is_empty());
    let mut got = Vec::new();
    let mut homes = Vec::new();
    for file in &firsts {
        let rel = file
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let rows = rows(&read_parquet(file));
        homes.extend(std::iter::repeat_n(rel, rows.len()));
        got.extend(rows);
    }
    let decoded = decoded(&[p(&f.main)]);
    let want: Vec<Json> = decoded.iter().map(project).collect();
    assert_eq!(got, want);
    for (home, d) in homes.iter().zip(&decoded) {
        // date=YYYY-MM-DD/hour=HH of the row's own UTC time.
        let ts = d["ts"].as_str().unwrap();
        let expect = format!("date={}/hour={}/part-00000.parquet", &ts[..10], &ts[11..13]);
        assert_eq!(*home, expect);
    }
    // The second export: the same partitions, a second part each.
    assert_eq!(files.len(), 2 * firsts.len(), "{files:?}");

    let o = run(&[
        "export",
        "--format",
        "jsonl",
        "--partition-by",
        "day",
        "-o",
        p(&dir),
        p(&f.main),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("use --format parquet"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A copy of the log at `src` whose wall clock is `hours` earlier (the
/// header's base time and every CLOCK pair; entries re-checksummed) and
/// whose writer's pid is `pid`: the same records, hours and days back.
fn shifted_copy(src: &Path, dst: &Path, hours: i64, pid: u32) {
    use nanolog_runtime::wire::header::Header;
    let b = std::fs::read(src).unwrap();
    let shift = hours * 3_600_000_000_000;
    let mut h = Header::decode(&b[..48]).unwrap();
    h.base_unix_ns -= shift;
    h.pid = pid;
    let mut out = h.encode().to_vec();
    copy_shifted(&b[48..], shift, &mut out);
    std::fs::write(dst, out).unwrap();
}

/// Appends the entries `entries` to `out` with their CLOCK pairs `shift` ns
/// earlier; a compressed block's entries are written out of it.
fn copy_shifted(entries: &[u8], shift: i64, out: &mut Vec<u8>) {
    use nanolog_runtime::wire::{self, dict};
    let mut at = 0;
    while at + 9 <= entries.len() {
        let tag = entries[at];
        let len = u32::from_le_bytes(entries[at + 1..at + 5].try_into().unwrap()) as usize;
        let mut body = entries[at + 9..at + 9 + len].to_vec();
        at += 9 + len;
        if tag == wire::tag::BLOCK {
            let inner = wire::block::entries_of(&body).unwrap();
            copy_shifted(&inner, shift, out);
            continue;
        }
        if tag == wire::tag::CLOCK {
            let (tick, ns) = dict::get_clock(&body).unwrap();
            body.clear();
            dict::put_clock(&mut body, tick, ns - shift);
        }
        out.push(tag);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&wire::entry_crc(tag, &body).to_le_bytes());
        out.extend_from_slice(&body);
    }
}

/// `export --partition-by hour` read by DuckDB (README "Querying logs at scale") with
/// `hive_partitioning=true`, as one table: the rows of each partition
/// (date and hour from the directory names) number what `stats --every 1h`
/// counts in that hour, over three logs an hour and a day apart.
///
/// Needs Python's `duckdb` package (`pip install duckdb`; `.ci/run`
/// installs it and sets NANOLOG_REQUIRE_DUCKDB=1, which makes its absence
/// a failure). Without it, and without that variable, the test says so and
/// passes.
#[test]
fn duckdb_reads_a_partitioned_export_as_one_table_counting_what_stats_counts() {
    let has_duckdb = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_duckdb {
        assert!(
            std::env::var_os("NANOLOG_REQUIRE_DUCKDB").is_none(),
            "NANOLOG_REQUIRE_DUCKDB is set and python3 cannot import duckdb (pip install duckdb)"
        );
        eprintln!("skipped: python3 cannot import duckdb (pip install duckdb)");
        return;
    }
    let f = fixtures();
    let hour_ago = f.dir.join("hour-ago.nlog");
    let day_ago = f.dir.join("day-ago.nlog");
    shifted_copy(&f.main, &hour_ago, 1, 1_000_001);
    shifted_copy(&f.main, &day_ago, 25, 1_000_002);
    let logs = [p(&f.main), p(&hour_ago), p(&day_ago)];
    let dir = f.dir.join("duckdb-parts");
    let _ = std::fs::remove_dir_all(&dir);
    let mut args = vec![
        "export",
        "--format",
        "parquet",
        "--partition-by",
        "hour",
        "-o",
        p(&dir),
    ];
    args.extend(logs);
    succeed(&args);

    let query = format!(
        "import duckdb, json\n\
         rows = duckdb.sql(\"SELECT date, hour, count(*), count(DISTINCT fmt) \
         FROM read_parquet('{}/**/*.parquet', hive_partitioning=true) \
         GROUP BY ALL ORDER BY ALL\").fetchall()\n\
         print(json.dumps([[str(d), int(h), n, k] for d, h, n, k in rows]))",
        dir.display()
    );
    let o = std::process::Command::new("python3")
        .args(["-c", &query])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<(String, u64, u64, u64)> =
        serde_json::from_slice::<Vec<(String, u64, u64, u64)>>(&o.stdout).unwrap();

    let mut args = vec![
        "stats", "--by", "level", "--every", "1h", "--format", "json",
    ];
    args.extend(logs);
    let mut want = std::collections::BTreeMap::<(String, u64), u64>::new();
    for line in String::from_utf8(succeed(&args).stdout).unwrap().lines() {
        let v: Json = serde_json::from_str(line).unwrap();
        let ts = v["ts"].as_str().unwrap();
        let key = (ts[..10].to_string(), ts[11..13].parse().unwrap());
        *want.entry(key).or_default() += v["count"].as_u64().unwrap();
    }
    assert!(want.len() >= 3, "{want:?}");
    let got_counts: std::collections::BTreeMap<(String, u64), u64> = got
        .iter()
        .map(|(d, h, n, _)| ((d.clone(), *h), *n))
        .collect();
    assert_eq!(got_counts, want, "rows per partition vs stats per hour");
    // The rows are the records, columns and all: the fixture's six call
    // sites in each log's hour (one partial hour if it ran across one).
    assert!(got.iter().filter(|r| r.3 == 6).count() >= 3, "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
