//! Bytes a record of a tokio service's events (issue #38): the same events
//! as nanolog's `.nlog`, as tracing-subscriber's JSON (its default JSON
//! layer: current span and span list), that JSON through zstd -3, nanolog's
//! own `decode` text through zstd -3, and the `.nlog` through zstd -3.
//!
//! The workload: REQUESTS `tracing` request spans (method, path, a
//! 16-hex-character request id, a user) on a 4-worker multi-thread runtime,
//! each with child spans for the database (table, operation) and the cache
//! (key), a child task, and 6 to 9 events a request with typed fields and
//! repeated strings: `tracing` events, `log` records (through tracing-log,
//! as `init()` installs it) and `nanolog::info!` records. Every native
//! record has a `tracing` twin with the same text that only the JSON layer
//! takes (a per-layer filter), so both forms hold the same events.
//!
//! With `log-heavy`, a service whose records come mostly through the `log`
//! bridge (issue #47's second workload): the same spans, and per request
//! five `log` records whose text is formatted at the call (the request's
//! route, id, user, table, key and numbers in it), one `tracing` event.
//!
//! ```text
//! cargo bench -p nanolog-cli --bench service_bytes [-- REQUESTS] [log-heavy]
//! ```
//!
//! `NANOLOG_BENCH_KEEP=PATH` keeps a copy of the `.nlog` at `PATH`.
//!
//! Prints a Markdown table (BENCHMARKS.md, "Bytes: the log against the same
//! events' JSON, compressed").

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Instrument;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];
const ROUTES: [&str; 8] = [
    "/api/v1/orders",
    "/api/v1/orders/items",
    "/api/v1/accounts",
    "/api/v1/accounts/limits",
    "/api/v1/quotes",
    "/api/v1/positions",
    "/healthz",
    "/api/v1/fills",
];
const TABLES: [&str; 5] = ["orders", "accounts", "positions", "fills", "quotes"];
const USERS: usize = 40;
/// The target of the native records' `tracing` twins (JSON only).
const TWIN: &str = "twin";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A request id: 16 hex characters, different for every request.
fn request_id(i: u64) -> String {
    format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A value of `i` spread over `0..n` (a hash, not a pattern).
fn spread(i: u64, salt: u64, n: u64) -> u64 {
    let mut x = (i ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x.wrapping_mul(0xbf58_476d_1ce4_e5b9) % n
}

/// Request `i`'s database connection, as a `log` record: its text is
/// formatted on the calling thread, and its numbers make it all but unique.
fn pool_checkout(i: u64) {
    log::debug!(
        "pool checkout conn={} wait_us={}",
        spread(i, 1, 16),
        spread(i, 2, 5000)
    );
}

async fn request(i: u64) {
    let method = METHODS[(i % 7 % 4) as usize];
    let route = ROUTES[(i % 8) as usize];
    let user = format!("user-{:02}", i as usize % USERS);
    let span = tracing::info_span!(
        "request",
        method,
        path = route,
        request_id = %request_id(i),
        user = %user,
    );
    async move {
        tracing::info!(bytes_in = 120 + spread(i, 6, 9000), "request received");
        let table = TABLES[(i % 5) as usize];
        let rows = {
            let db = tracing::debug_span!("db", table, op = "select");
            let _in = db.enter();
            pool_checkout(i);
            let rows = spread(i, 3, 50);
            tracing::debug!(rows, elapsed_us = 180 + spread(i, 4, 9000), "query done");
            rows
        };
        let key = format!("{table}:{}", spread(i, 5, 100_000));
        let hit = {
            let cache = tracing::debug_span!("cache", key = %key);
            let _in = cache.enter();
            let hit = !i.is_multiple_of(3);
            tracing::debug!(hit, "cache lookup");
            hit
        };
        // A child task in the request's span, as handlers fan out.
        let audit = tokio::spawn(
            async move {
                tokio::task::yield_now().await;
                tracing::info!(target: "audit", action = "read", "audited");
            }
            .in_current_span(),
        );
        tokio::task::yield_now().await;
        nanolog::info!("handler {} served {} rows", route, rows);
        tracing::info!(target: TWIN, "handler {} served {} rows", route, rows);
        if !hit {
            log::info!("cache miss for {}", key);
        }
        if i.is_multiple_of(10) {
            tracing::warn!(status = 429u16, retry_after_ms = 250u64, "rate limited");
        }
        let _ = audit.await;
        tracing::info!(
            status = 200u16,
            elapsed_us = 900 + spread(i, 7, 40_000),
            "request done"
        );
    }
    .instrument(span)
    .await
}

/// A request of the `log`-heavy service: its records are `log` records,
/// formatted at the call, but for one `tracing` event.
async fn request_log_heavy(i: u64) {
    let method = METHODS[(i % 7 % 4) as usize];
    let route = ROUTES[(i % 8) as usize];
    let user = format!("user-{:02}", i as usize % USERS);
    let id = request_id(i);
    let span = tracing::info_span!("request", method, path = route);
    async move {
        log::info!(
            "{} {} request {} from {} received {} bytes",
            method,
            route,
            id,
            user,
            120 + spread(i, 6, 9000)
        );
        let table = TABLES[(i % 5) as usize];
        let rows = {
            let db = tracing::debug_span!("db", table);
            let _in = db.enter();
            pool_checkout(i);
            let rows = spread(i, 3, 50);
            log::debug!(
                "select on {} returned {} rows in {} us",
                table,
                rows,
                180 + spread(i, 4, 9000)
            );
            rows
        };
        let key = format!("{table}:{}", spread(i, 5, 100_000));
        let hit = !i.is_multiple_of(3);
        log::debug!("cache {} for {}", if hit { "hit" } else { "miss" }, key);
        tokio::task::yield_now().await;
        tracing::info!(rows, "handler served");
        log::info!(
            "request {} done status={} elapsed_us={}",
            id,
            if i.is_multiple_of(10) { 429 } else { 200 },
            900 + spread(i, 7, 40_000)
        );
    }
    .instrument(span)
    .await
}

fn main() {
    let requests: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let log_heavy = std::env::args().any(|a| a == "log-heavy");
    let dir = std::env::temp_dir().join(format!("nanolog-service-bytes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("service.nlog");
    let logger = nanolog::Logger::builder()
        .path(&path)
        .filter("debug")
        .staging_capacity(4 << 20)
        .start()
        .expect("the logger starts");
    let json = Captured::default();
    let w = json.clone();
    tracing_subscriber::registry()
        .with(
            nanolog::tracing_layer()
                .with_filter(filter_fn(|m| m.target() != TWIN))
                .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(move || w.clone())
                .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
        )
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let all = async {
            let tasks: Vec<_> = (0..requests)
                .map(|i| {
                    if log_heavy {
                        tokio::spawn(request_log_heavy(i))
                    } else {
                        tokio::spawn(request(i))
                    }
                })
                .collect();
            for t in tasks {
                t.await.expect("a request task");
            }
        };
        tokio::time::timeout(Duration::from_secs(300), all)
            .await
            .expect("the workload ends within its deadline");
    });
    rt.shutdown_timeout(Duration::from_secs(10));
    let stats = logger.stats();
    drop(logger);
    assert_eq!(stats.dropped, 0, "records dropped: enlarge the ring");

    let nlog = std::fs::read(&path).expect("the log");
    let json = std::mem::take(&mut *json.0.lock().unwrap_or_else(|e| e.into_inner()));
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_nanolog"))
        .arg("decode")
        .arg(&path)
        .output()
        .expect("nanolog decode runs");
    assert!(text.status.success(), "decode failed");
    let text = text.stdout;
    let records = text.iter().filter(|&&b| b == b'\n').count();
    let json_records = json.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(records, json_records, "the two forms hold the same events");
    let zstd3 = |b: &[u8]| zstd::encode_all(b, 3).expect("zstd").len();
    let json_z = zstd3(&json);
    let rows = [
        ("nanolog's `.nlog`", nlog.len()),
        (
            "tracing-subscriber's JSON (current span, span list)",
            json.len(),
        ),
        ("that JSON through `zstd -3`", json_z),
        ("nanolog's `decode` text through `zstd -3`", zstd3(&text)),
        ("the `.nlog` through `zstd -3`", zstd3(&nlog)),
    ];
    let workload = if log_heavy {
        ", the `log`-heavy service"
    } else {
        ""
    };
    println!("{requests} requests{workload}, {records} records");
    println!();
    println!("| form of the same events | bytes | bytes a record |");
    println!("|---|---|---|");
    for (name, bytes) in rows {
        println!(
            "| {name} | {bytes} | {:.1} |",
            bytes as f64 / records as f64
        );
    }
    println!();
    println!(
        "`.nlog` / zstd -3 JSON: {:.2}x",
        nlog.len() as f64 / json_z as f64
    );
    println!();
    println!("| entries of the `.nlog` | count | bytes | bytes a record |");
    println!("|---|---|---|---|");
    for (tag, (count, bytes)) in entries_by_tag(&nlog) {
        println!(
            "| {tag} | {count} | {bytes} | {:.1} |",
            bytes as f64 / records as f64
        );
    }
    let file = nanolog::reader::LogFile::open(&path).expect("the log opens");
    codec_levers(&nlog, records, file.block_stats());
    // The records' own bytes by call site (header, nibbles, payloads); the
    // rest of the extents is their frames and headers, and context switches.
    // Messages formatted at the call are written at their sites' templates
    // (`log` records: `pool checkout conn={} wait_us={}`); a site's first
    // record, before its template is learnt, is at `{}`.
    let mut by_site = std::collections::BTreeMap::<String, (u64, u64)>::new();
    for r in file.records() {
        let r = r.expect("a whole record");
        let e = by_site.entry(r.site().format.clone()).or_insert((0, 0));
        e.0 += 1;
        e.1 += r.encoded_len() as u64;
    }
    println!();
    println!("| records of the site | count | bytes a record of it |");
    println!("|---|---|---|");
    let mut own = 0;
    for (format, (count, bytes)) in &by_site {
        own += bytes;
        println!(
            "| {format} | {count} | {:.1} |",
            *bytes as f64 / *count as f64
        );
    }
    println!(
        "records' own bytes: {:.1} a record",
        own as f64 / records as f64
    );
    // `NANOLOG_BENCH_KEEP=PATH` keeps a copy of the `.nlog` there, for
    // looking into its bytes with other tools.
    if let Some(keep) = std::env::var_os("NANOLOG_BENCH_KEEP") {
        std::fs::copy(&path, keep).expect("the log copied where NANOLOG_BENCH_KEEP says");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the file's blocks would take through other codecs (issue #47's
/// lever "a stronger block codec or a dictionary shared across a file's
/// blocks"): each block's entries, as inflated, compressed on their own by
/// zstd at levels 1 and 3, and at level 3 with a dictionary trained on the
/// file's first eighth of blocks (the dictionary's bytes counted once).
/// Frames, unblocked entries and the header are as written; `written` says
/// how many of the blocks the flusher deflated.
fn codec_levers(file: &[u8], records: usize, written: nanolog::reader::BlockStats) {
    let mut raws: Vec<Vec<u8>> = Vec::new();
    let mut at = 48.min(file.len());
    let mut blocked = 0usize;
    while at + 9 <= file.len() {
        let tag = file[at];
        let len = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap_or_default()) as usize;
        let body = file.get(at + 9..at + 9 + len).unwrap_or(&[]);
        if let Some(inner) = (tag == 12).then(|| inflated(body)).flatten() {
            blocked += 9 + len;
            raws.push(inner);
        }
        at += 9 + len;
    }
    let rest = file.len() - blocked;
    // A block's frame and codec byte and raw length: about 13 bytes.
    let framed = |n: usize| n + 13;
    let level = |l: i32| -> usize {
        raws.iter()
            .map(|r| framed(zstd::bulk::compress(r, l).expect("zstd").len()))
            .sum()
    };
    let train = &raws[..(raws.len() / 8).max(1)];
    let dict = zstd::dict::from_samples(train, 16 << 10).unwrap_or_default();
    let with_dict = if dict.is_empty() {
        None
    } else {
        let mut c = zstd::bulk::Compressor::with_dictionary(3, &dict).expect("a dictionary");
        Some(
            dict.len()
                + raws
                    .iter()
                    .map(|r| framed(c.compress(r).expect("zstd").len()))
                    .sum::<usize>(),
        )
    };
    println!();
    println!(
        "| the {} blocks' entries through | file bytes | bytes a record |",
        raws.len()
    );
    println!("|---|---|---|");
    let row = |name: &str, blocks: usize| {
        let total = rest + blocks;
        println!(
            "| {name} | {total} | {:.1} |",
            total as f64 / records as f64
        );
    };
    row(
        &format!(
            "as written ({} of deflate, {} of LZ4)",
            written.deflate, written.lz4
        ),
        blocked,
    );
    row("zstd -1, block by block", level(1));
    row("zstd -3, block by block", level(3));
    if let Some(d) = with_dict {
        row(
            &format!(
                "zstd -3 with a {} B dictionary of the first eighth",
                dict.len()
            ),
            d,
        );
    }
}

/// The entries a BLOCK body holds, as the file would hold them, or `None`.
fn inflated(body: &[u8]) -> Option<Vec<u8>> {
    nanolog_runtime::wire::block::entries_of(body).ok()
}

/// Count and bytes (frames included) of each kind of entry (FORMAT.md);
/// the entries inside BLOCK entries counted at their inflated size, and
/// the blocks themselves at theirs.
fn entries_by_tag(file: &[u8]) -> std::collections::BTreeMap<&'static str, (u64, u64)> {
    let mut by = std::collections::BTreeMap::new();
    count_entries(&file[48.min(file.len())..], &mut by, false);
    by
}

fn count_entries(
    entries: &[u8],
    by: &mut std::collections::BTreeMap<&'static str, (u64, u64)>,
    in_block: bool,
) {
    let mut at = 0;
    while at + 9 <= entries.len() {
        let tag = entries[at];
        let len =
            u32::from_le_bytes(entries[at + 1..at + 5].try_into().unwrap_or_default()) as usize;
        let body = entries.get(at + 9..at + 9 + len).unwrap_or(&[]);
        let name = match tag {
            1 => "SITE",
            2 => "THREAD",
            3 => "EXTENT",
            4 => "CLOCK",
            5 => "DROP",
            6 => "ROTATE",
            7 => "END",
            8 => "SPAN",
            9 => "CONTEXT",
            10 => "SET",
            11 => "STRINGS",
            12 => "BLOCK (compressed, as written)",
            _ => "other",
        };
        let name = match (in_block, tag) {
            (true, 3) => "EXTENT (in blocks, inflated)",
            (true, 8) => "SPAN (in blocks, inflated)",
            (true, 11) => "STRINGS (in blocks, inflated)",
            (true, _) => "other (in blocks, inflated)",
            _ => name,
        };
        let e = by.entry(name).or_insert((0, 0));
        e.0 += 1;
        e.1 += 9 + len as u64;
        if let Some(inner) = (tag == 12).then(|| inflated(body)).flatten() {
            count_entries(&inner, by, true);
        }
        at += 9 + len;
    }
}
