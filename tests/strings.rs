//! Repeated string values (format version 3): a file defines each once and
//! its records refer to it; every file of a rolled set reads on its own,
//! whatever the strings' lengths, and the values read back are the ones
//! logged.

use nanolog::reader::{finished_files, LogFile, Value};

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
        assert_eq!(log.header().version, 3);
        for r in log.records() {
            let r = r.unwrap();
            let args: Vec<Value<'_>> = r.args().collect();
            let Value::Uint(i) = args[0] else {
                panic!("{args:?}")
            };
            let (route, unique, short, long) = values(i as u64);
            let strs: Vec<&str> = args[1..]
                .iter()
                .map(|v| match v {
                    Value::Str(s) => *s,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(strs, [&route, &unique, &short, &long], "record {i}");
            assert!(!seen[i as usize], "record {i} twice");
            seen[i as usize] = true;
        }
    }
    assert!(seen.iter().all(|&s| s), "every record read back");
    // What a user sees of it: the route and the user name cost a reference
    // each, the unique id its 16 bytes, even with a file every ~350 records
    // (each defines its strings again). 46 bytes a record here; with every
    // string inline, 70.
    let per_record = bytes as f64 / N as f64;
    eprintln!("{per_record:.1} bytes a record in {} files", files.len());
    assert!(
        per_record < 56.0,
        "{per_record:.1} bytes a record (inline strings take 70)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
