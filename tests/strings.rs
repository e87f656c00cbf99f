//! Repeated string values (format version 3): a file defines each once and
//! its records refer to it; every file of a rolled set reads on its own,
//! whatever the strings' lengths, and the values read back are the ones
//! logged.

mod common;

use common::serial;
use nanolog::reader::{finished_files, LogFile, Record, SpanRef, Value};

const ROUTES: [&str; 6] = [
    "/api/v1/orders",
    "/api/v1/orders/items",
    "/api/v1/accounts",
    "/api/v1/fills",
    "/healthz",
    "/api/v1/positions/by-desk",
];

/// The values record `i` logs: a repeated route, a value seen once, a
/// short one (always inline), and a long one (past the table's limit, so
/// inline too) every 100th record.
fn values(i: u64) -> (String, String, String, String) {
    let route = ROUTES[(i % ROUTES.len() as u64) as usize].to_owned();
    let unique = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let short = ["ab", "c", "", "xyz"][(i % 4) as usize].to_owned();
    let long = if i.is_multiple_of(100) {
        "L".repeat(1500)
    } else {
        "user-ann".to_owned()
    };
    (route, unique, short, long)
}

#[test]
fn every_file_of_a_rolled_set_reads_its_strings_back() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("nanolog-strings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&path)
        .rotate_bytes(16 << 10)
        .staging_capacity(1 << 20)
        .start()
        .unwrap();
    const N: u64 = 30_000;
    for i in 0..N {
        let (route, unique, short, long) = values(i);
        nanolog::info!(
            "req {} route={} id={} s={} user={}",
            i,
            route.as_str(),
            unique,
            short,
            long
        );
        if i % 1000 == 999 {
            // Several writes a file, so definitions and references span
            // writes as well as files.
            logger.flush().unwrap();
        }
    }
    assert_eq!(logger.stats().dropped, 0);
    drop(logger);

    let mut files: Vec<_> = finished_files(&path)
        .unwrap()
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    files.push(path.clone());
    assert!(files.len() > 10, "the set rolled: {} files", files.len());
    let mut seen = vec![false; N as usize];
    let mut bytes = 0u64;
    for f in &files {
        bytes += std::fs::metadata(f).unwrap().len();
        // Each file alone: its dictionary is its own.
        let log = LogFile::open(f).unwrap();
        assert!(log.warnings().is_empty(), "{f:?}: {:?}", log.warnings());
        assert_eq!(log.header().version, nanolog_runtime::wire::VERSION);
        for r in log.records() {
            let r = r.unwrap();
            let args: Vec<Value<'_>> = r.args().collect();
            let Value::Uint(i) = args[0] else {
                panic!("{args:?}")
            };
            let (route, unique, short, long) = values(i as u64);
            // The unique id is hex digits: packed (format version 5),
            // read back as the digits.
            let strs: Vec<String> = args[1..]
                .iter()
                .map(|v| match v {
                    Value::Str(s) => s.to_string(),
                    Value::Hex(h) => h.to_string(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert!(matches!(args[2], Value::Hex(_)), "{args:?}");
            assert_eq!(strs, [route, unique, short, long], "record {i}");
            assert!(!seen[i as usize], "record {i} twice");
            seen[i as usize] = true;
        }
    }
    assert!(seen.iter().all(|&s| s), "every record read back");
    // What a user sees of it: the route and the user name cost a reference
    // each, the unique id 8 bytes (its 16 digits packed), even with a file
    // every ~350 records (each defines its strings again). 38 bytes a
    // record here; with every string inline and unpacked, 70.
    let per_record = bytes as f64 / N as f64;
    eprintln!("{per_record:.1} bytes a record in {} files", files.len());
    assert!(
        per_record < 44.0,
        "{per_record:.1} bytes a record (46 with the id unpacked, 70 with every string inline)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file whose STRINGS and SPAN entries (written as they are), or whose
/// compressed BLOCK entries, are damaged yet checksummed again (a faulty
/// writer, a crafted file): reading it gives values or errors, never a
/// panic (a debug build also panics on arithmetic overflow).
#[test]
fn damaged_definitions_with_good_checksums_never_panic() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("nanolog-strings-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, compress, tags) in [
        ("plain.nlog", false, [8u8, 11]),
        ("blocks.nlog", true, [12, 12]),
    ] {
        let path = dir.join(name);
        let logger = nanolog::Logger::builder()
            .path(&path)
            .compress(compress)
            .start()
            .unwrap();
        for i in 0..2_000u64 {
            let route = ROUTES[(i % ROUTES.len() as u64) as usize];
            let _s = nanolog::span!("request", route = route, n = i % 7);
            nanolog::info!("req {} route={}", i, route);
            if i % 100 == 99 {
                // Batches the flusher has caught up with, which it
                // compresses: a flusher that other work on the machine
                // keeps behind (a fuzzer beside the tests, once) writes
                // its batches as they are, and the file had no block.
                logger.flush().unwrap();
            }
        }
        drop(logger);
        damage_and_read(&std::fs::read(&path).unwrap(), tags);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads 2,000 copies of the log `good`, each with a few bytes of one of
/// its entries tagged `tags` changed and its checksum made good again.
fn damage_and_read(good: &[u8], tags: [u8; 2]) {
    let mut bodies = Vec::new();
    let mut at = 48;
    while at + 9 <= good.len() {
        let len = u32::from_le_bytes(good[at + 1..at + 5].try_into().unwrap()) as usize;
        if tags.contains(&good[at]) {
            bodies.push((at, len));
        }
        at += 9 + len;
    }
    assert!(!bodies.is_empty(), "the file has entries tagged {tags:?}");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..2_000 {
        let mut bad = good.to_vec();
        let (start, len) = bodies[rand() as usize % bodies.len()];
        for _ in 0..1 + rand() % 4 {
            let i = start + 9 + rand() as usize % len.max(1);
            bad[i] = rand() as u8;
        }
        // Checksummed again, so the reader parses the damaged body.
        let crc = nanolog_runtime::wire::entry_crc(bad[start], &bad[start + 9..start + 9 + len]);
        bad[start + 5..start + 9].copy_from_slice(&crc.to_le_bytes());
        let Ok(log) = LogFile::from_bytes("bad.nlog", bad) else {
            continue;
        };
        for r in log.records() {
            let Ok(r) = r else { continue };
            let mut text = String::new();
            r.render(&mut text);
            for s in r.spans() {
                let _ = s.fields();
                s.render(&mut text);
            }
            let _ = r.args().count();
        }
    }
}

/// `tests/fixtures/version{version}.nlog`, opened: of that version, with no
/// warning.
fn fixture(version: u16) -> LogFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/version{version}.nlog"));
    let log = LogFile::open(&path).unwrap();
    assert_eq!(log.header().version, version);
    assert!(log.warnings().is_empty(), "{:?}", log.warnings());
    log
}

/// A file of format version 4 (`tests/fixtures/version4.nlog`, written by
/// this crate at fc29547: 306 records in 7 compressed blocks, its routes
/// defined at their second sighting, its hex ids as text) reads as its
/// writer wrote it. The program that wrote it:
///
/// ```text
/// let routes = ["/api/v1/orders", "/api/v1/accounts", "/healthz"];
/// for i in 0..300u64 {
///     let id = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
///     let route = routes[(i % 3) as usize];
///     nanolog::info!("req {} route={} id={} ok={} ratio={:.2}",
///         i, route, id.as_str(), i % 2 == 0, i as f64 / 7.0);
///     if i % 50 == 0 {
///         nanolog::warn!("slow {} id={}", route, id.as_str());
///         logger.flush().unwrap();
///     }
/// }
/// ```
#[test]
fn a_version_4_file_reads_as_its_writer_wrote_it() {
    let log = fixture(4);
    let routes = ["/api/v1/orders", "/api/v1/accounts", "/healthz"];
    let mut want = Vec::new();
    for i in 0..300u64 {
        let id = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let route = routes[(i % 3) as usize];
        want.push(format!(
            "req {} route={} id={} ok={} ratio={:.2}",
            i,
            route,
            id,
            i % 2 == 0,
            i as f64 / 7.0
        ));
        if i % 50 == 0 {
            want.push(format!("slow {route} id={id}"));
        }
    }
    let mut got = Vec::new();
    for r in log.records() {
        let r = r.unwrap();
        // Version 4 has no packed hex: every string is text.
        assert!(r.args().all(|v| !matches!(v, Value::Hex(_))));
        got.push(r.message());
    }
    assert_eq!(got, want);
}

/// A file of format version 5 (`tests/fixtures/version5.nlog`, written by
/// this crate at c225ce0: 400 records in 5 compressed blocks, in nested
/// spans, hex ids packed) reads as its writer wrote it, its spans' ticks
/// exact (version 6 states them in units of about a microsecond). The
/// program that wrote it:
///
/// ```text
/// let routes = ["/api/v1/orders", "/api/v1/accounts", "/healthz"];
/// for i in 0..200u64 {
///     let route = routes[(i % 3) as usize];
///     let _r = nanolog::span!("request", id = i, route = route);
///     let id = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
///     {
///         let _q = nanolog::span!("query", table = "orders");
///         nanolog::info!("req {} id={} ok={}", i, id.as_str(), i % 2 == 0);
///     }
///     nanolog::info!("done {}", i);
///     if i % 40 == 39 {
///         logger.flush().unwrap();
///         std::thread::sleep(std::time::Duration::from_millis(2));
///     }
/// }
/// ```
#[test]
fn a_version_5_file_reads_as_its_writer_wrote_it() {
    let log = fixture(5);
    let routes = ["/api/v1/orders", "/api/v1/accounts", "/healthz"];
    let mut want = Vec::new();
    for i in 0..200u64 {
        let id = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let route = routes[(i % 3) as usize];
        let request = format!("request{{id={i} route={route:?}}}");
        want.push(format!(
            "req {i} id={id} ok={} [{request} query{{table=\"orders\"}}]",
            i % 2 == 0
        ));
        want.push(format!("done {i} [{request}]"));
    }
    let mut span_ticks = std::collections::HashSet::new();
    let got = lines_of(&log, |r, s| {
        // Entered before the record, after the file began.
        assert!(s.tick() <= r.tick() && s.tick() > log.header().base_tick);
        span_ticks.insert(s.tick());
    });
    assert_eq!(got, want);
    // Version 5 states them to the tick (a `nanolog::span!` is stated from
    // its first record: a request and its query share that record's tick),
    // not in units of 2^11 ticks.
    assert_eq!(span_ticks.len(), 200);
    assert!(span_ticks.iter().filter(|&&t| t % 2048 == 0).count() < 10);
}

/// A logger writing a new file of this process in the temporary directory
/// (`nanolog-NAME-PID.nlog`), its blocks compressed or not.
fn fresh_log(name: &str, compress: bool) -> (std::path::PathBuf, nanolog::Logger) {
    let path = std::env::temp_dir().join(format!("nanolog-{name}-{}.nlog", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .compress(compress)
        .start()
        .unwrap();
    (path, logger)
}

/// A file written now (format version 6 on) states its spans' ticks in units
/// of about a microsecond: each span reads as the start of its unit, at
/// most one unit before its first record.
#[test]
fn spans_of_a_version_6_file_are_stated_to_their_unit() {
    let _s = serial();
    let (path, logger) = fresh_log("span-units", true);
    for i in 0..500u64 {
        let _r = nanolog::span!("request", id = i);
        nanolog::info!("req {}", i);
    }
    drop(logger);
    let log = LogFile::open(&path).unwrap();
    assert_eq!(log.header().version, 9);
    let unit =
        1u64 << nanolog_runtime::wire::dict::span_tick_shift(7, log.header().ticks_per_second);
    assert!(
        unit > 1,
        "a clock of {} ticks/s",
        log.header().ticks_per_second
    );
    let mut n = 0;
    for r in log.records() {
        let r = r.unwrap();
        let span = &r.spans()[0];
        assert_eq!(span.tick() % unit, 0, "{}", span.tick());
        assert!(span.tick() <= r.tick() && r.tick() - span.tick() < unit);
        n += 1;
    }
    assert_eq!(n, 500);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}

/// The records of the workload that wrote `tests/fixtures/version6.nlog`
/// (see [`a_version_6_file_reads_as_its_writer_wrote_it`]), each as its
/// message and its spans, as `decode` shows them.
fn version6_workload_lines() -> Vec<String> {
    let mut want = Vec::new();
    for i in 0..200u64 {
        let user = format!("user-{:02}", i % 12);
        let key = format!("orders:{}", i * 7919 % 100_000);
        let request = format!("request{{id={i} user={user:?}}}");
        want.push(format!("req {i} key={key} [{request}]"));
        want.push(format!(
            "rows {} [{request} query{{table=\"orders\"}}]",
            i % 50
        ));
        want.push(format!("done {i} user={user} [{request}]"));
    }
    want
}

/// Each record of `log` as its message and its spans (`each_span` is
/// shown each record's spans first).
fn lines_of(log: &LogFile, mut each_span: impl FnMut(&Record<'_>, &SpanRef<'_>)) -> Vec<String> {
    log.records()
        .map(|r| {
            let r = r.unwrap();
            let spans: Vec<String> = r
                .spans()
                .iter()
                .map(|s| {
                    each_span(&r, s);
                    let mut t = String::new();
                    s.render(&mut t);
                    t
                })
                .collect();
            format!("{} [{}]", r.message(), spans.join(" "))
        })
        .collect()
}

/// A file of format version 6 (`tests/fixtures/version6.nlog`, written by
/// this crate at e12749e: 600 records in compressed blocks, in nested
/// spans, its keys and users strings that end in digits, written as text;
/// its span contexts and context switches as version 6 numbers them) reads
/// as its writer wrote it. The program that wrote it:
///
/// ```text
/// for i in 0..200u64 {
///     let user = format!("user-{:02}", i % 12);
///     let key = format!("orders:{}", i * 7919 % 100_000);
///     let _r = nanolog::span!("request", id = i, user = user.as_str());
///     nanolog::info!("req {} key={}", i, key.as_str());
///     {
///         let _q = nanolog::span!("query", table = "orders");
///         nanolog::info!("rows {}", i % 50);
///     }
///     nanolog::info!("done {} user={}", i, user.as_str());
///     if i % 40 == 39 {
///         logger.flush().unwrap();
///         std::thread::sleep(std::time::Duration::from_millis(2));
///     }
/// }
/// ```
#[test]
fn a_version_6_file_reads_as_its_writer_wrote_it() {
    let log = fixture(6);
    assert_eq!(lines_of(&log, |_, _| {}), version6_workload_lines());
    // Version 6 packs no numbered strings.
    for r in log.records() {
        assert!(r.unwrap().args().all(|v| !matches!(v, Value::Numbered(_))));
    }
}

/// A file of format version 7 (`tests/fixtures/version7.nlog`, written by
/// this crate at 4ee3648 by the program of
/// [`a_version_6_file_reads_as_its_writer_wrote_it`]: its blocks all LZ4,
/// its keys and users packed as numbered strings) reads as its writer
/// wrote it.
#[test]
fn a_version_7_file_reads_as_its_writer_wrote_it() {
    let log = fixture(7);
    assert_eq!(lines_of(&log, |_, _| {}), version6_workload_lines());
    let packed = keys_packed(&log);
    assert!(packed >= 190, "{packed} keys packed");
}

/// A file of format version 8 (`tests/fixtures/version8.nlog`, written by
/// this crate at b09bb57 by the program of
/// [`a_version_6_file_reads_as_its_writer_wrote_it`] with
/// `Compression::Small`: its 5 blocks deflated by `miniz_oxide`, the codec
/// 3 compressor before zlib-rs) reads as its writer wrote it.
#[test]
fn a_version_8_file_deflated_by_the_earlier_compressor_reads_as_written() {
    let log = fixture(8);
    assert_eq!(log.block_stats().deflate, 5, "{:?}", log.block_stats());
    assert_eq!(lines_of(&log, |_, _| {}), version6_workload_lines());
}

/// The same workload written now (format version 7 on): strings that end
/// in digits after a prefix seen before are packed as the prefix's id and
/// the number, spans numbered one after another carry no context of their
/// own, switches state their context relatively; every record reads as
/// logged, in its spans.
#[test]
fn a_file_written_now_packs_numbered_strings_and_reads_as_logged() {
    let _s = serial();
    let (path, logger) = fresh_log("numbered", false);
    for i in 0..200u64 {
        let user = format!("user-{:02}", i % 12);
        let key = format!("orders:{}", i * 7919 % 100_000);
        let _r = nanolog::span!("request", id = i, user = user.as_str());
        nanolog::info!("req {} key={}", i, key.as_str());
        {
            let _q = nanolog::span!("query", table = "orders");
            nanolog::info!("rows {}", i % 50);
        }
        nanolog::info!("done {} user={}", i, user.as_str());
    }
    drop(logger);
    let log = LogFile::open(&path).unwrap();
    assert_eq!(log.header().version, 9);
    assert!(log.warnings().is_empty(), "{:?}", log.warnings());
    assert_eq!(lines_of(&log, |_, _| {}), version6_workload_lines());
    // Every key past the first sightings of its prefix is packed.
    let packed = keys_packed(&log);
    assert!(packed >= 190, "{packed} keys packed");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}

/// The records of `log` (the version fixtures' workload) whose key
/// (`orders:` and a number) is packed as a numbered string.
fn keys_packed(log: &LogFile) -> usize {
    log.records()
        .filter(|r| {
            r.as_ref()
                .unwrap()
                .args()
                .any(|v| matches!(v, Value::Numbered(n) if n.prefix() == "orders:"))
        })
        .count()
}

/// A context switch of a version 7 file whose difference takes the context
/// out of range (a crafted file: the largest difference there is) is damage to
/// its extent, reported when read, never a panic (a debug build panics on
/// arithmetic overflow); the other extents read.
#[test]
fn a_switch_out_of_range_is_reported_not_a_panic() {
    let _s = serial();
    let (path, logger) = fresh_log("switch-range", false);
    for i in 0..50u64 {
        let _r = nanolog::span!("request", id = i);
        nanolog::info!("req {}", i);
        logger.flush().unwrap();
    }
    drop(logger);
    let good = std::fs::read(&path).unwrap();
    let total = LogFile::open(&path).unwrap().records().count();
    assert_eq!(total, 50);
    // The first extent that opens with a switch: its thread (a varint),
    // its base tick, then site 0 and the switch's varint.
    let mut at = 48;
    let (start, len) = loop {
        assert!(at + 9 <= good.len(), "no extent opens with a switch");
        let len = u32::from_le_bytes(good[at + 1..at + 5].try_into().unwrap()) as usize;
        let body = &good[at + 9..at + 9 + len];
        if good[at] == nanolog_runtime::wire::tag::EXTENT && body.get(1 + 8) == Some(&0) {
            break (at, len);
        }
        at += 9 + len;
    };
    let body = &good[start + 9..start + 9 + len];
    let mut varint_end = 1 + 8 + 1;
    while body[varint_end] & 0x80 != 0 {
        varint_end += 1;
    }
    // A second switch after it, by the largest positive difference
    // (zigzag 2^64 - 2: 2^63 - 1), from the context the first one named.
    let mut crafted = body[..varint_end + 1].to_vec();
    crafted.extend_from_slice(&[0x00, 0xfe]);
    crafted.extend_from_slice(&[0xff; 8]);
    crafted.push(0x01);
    crafted.extend_from_slice(&body[varint_end + 1..]);
    let mut bad = good[..start].to_vec();
    bad.push(good[start]);
    bad.extend_from_slice(&(crafted.len() as u32).to_le_bytes());
    let crc = nanolog_runtime::wire::entry_crc(good[start], &crafted);
    bad.extend_from_slice(&crc.to_le_bytes());
    bad.extend_from_slice(&crafted);
    bad.extend_from_slice(&good[start + 9 + len..]);
    let log = LogFile::from_bytes("crafted.nlog", bad).unwrap();
    let (mut read, mut damaged) = (0, 0);
    for r in log.records() {
        match r {
            Ok(r) => {
                read += 1;
                let _ = r.message();
            }
            Err(e) => {
                damaged += 1;
                assert!(e.to_string().contains("context switch"), "{e}");
            }
        }
    }
    assert_eq!(damaged, 1);
    assert!(read >= total - 2, "{read} of {total} read");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}
