//! Messages formatted at the call (`log` records, `tracing` events whose
//! text varies) are written as their call site's template and its gaps:
//! the text reads back exactly as Rust formatted it, JSON shows the
//! template and the gaps' values, and `stats --arg` aggregates a gap.

use std::fmt;
use std::path::Path;

use serde_json::{json, Value as Json};
use tracing_subscriber::layer::SubscriberExt;

use crate::common;

use common::ok;

// Its fields are read by its `Debug`, which the dead-code lint ignores.
#[derive(Debug)]
#[allow(dead_code)]
struct Point {
    x: i32,
    y: i32,
}

/// A `Display` that panics on every fifth value.
struct Fragile(u32);

impl fmt::Display for Fragile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(5) {
            panic!("fragile {}", self.0);
        }
        write!(f, "f{}", self.0)
    }
}

/// The values of the calls' `i`th round: the user is the same for the
/// first rounds, then varies (learnt as literal text first, a gap after).
fn values(i: u32) -> (String, u32, i64, Point) {
    let user = if i < 6 {
        "ann".to_owned()
    } else {
        format!("user-{}", i % 7)
    };
    let p = Point {
        x: i as i32,
        y: -(i as i32),
    };
    (user, (i * 7919) % 5000, i as i64 - 100, p)
}

#[test]
fn bridge_messages_read_back_exactly_and_their_templates_are_queryable() {
    let _s = common::serial();
    let path = common::temp("templates.nlog");
    let logger = nanolog::Logger::builder()
        .path(&path)
        .filter("trace")
        .start()
        .unwrap();
    common::capture_log_once();
    const N: u32 = 300;
    let mut want = Vec::new();
    for i in 0..N {
        let (user, wait, delta, p) = values(i);
        let ratio = i as f64 / 7.0;
        log::info!("checkout conn={} wait={wait}us user={user}", i % 16);
        log::info!("moved by {delta} to {p:?}");
        log::info!("[{:>6}] {{{}}} {:08.3}", i, "braces", ratio);
        log::info!("same text every time");
        log::info!("{}{}", i % 3, user);
        // A trace id: its gap's hex digits are packed in the file.
        let trace = format!("{:016x}", u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        log::info!("trace {trace} done");
        // The oracle: what Rust's formatting makes of the same calls.
        want.push(format!(
            "checkout conn={} wait={wait}us user={user}",
            i % 16
        ));
        want.push(format!("moved by {delta} to {p:?}"));
        want.push(format!("[{:>6}] {{{}}} {:08.3}", i, "braces", ratio));
        want.push("same text every time".to_owned());
        want.push(format!("{}{}", i % 3, user));
        want.push(format!("trace {trace} done"));
    }
    // A Display that panics: its record says so, and the call goes on.
    for i in 1..=10u32 {
        log::warn!("fragile {} done", Fragile(i));
        want.push(if i.is_multiple_of(5) {
            "<Display panicked>".to_owned()
        } else {
            format!("fragile f{i} done")
        });
    }
    // A message longer than 4 KiB is written as its text, however often.
    for i in 0..3 {
        let big = "x".repeat(5000 + i);
        log::info!("big {big}");
        want.push(format!("big {big}"));
    }
    // A `tracing` event whose message varies takes the same path.
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..50u64 {
            let route = ["/a", "/b/c"][i as usize % 2];
            tracing::info!(status = 200u16, "served {} rows of {route}", i * 3);
            want.push(format!("served {} rows of {route} status=200", i * 3));
        }
    });
    drop(logger);

    let text = ok(&["decode", common::p(&path)]);
    let got: Vec<&str> = text
        .lines()
        .map(|l| l.split_once("]: ").expect("a record line").1)
        .collect();
    assert_eq!(got, want);

    let json: Vec<Json> = ok(&["decode", "--format", "json", common::p(&path)])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json.len(), want.len());
    for (j, w) in json.iter().zip(&want) {
        if !w.ends_with("status=200") {
            assert_eq!(j["msg"], json!(w));
        }
    }
    // The calls' last records: each at its template, the gaps typed.
    let last = |k: usize| &json[(N as usize - 1) * 6 + k];
    assert_eq!(last(0)["fmt"], json!("checkout conn={} wait={}us user={}"));
    assert_eq!(
        last(0)["args"],
        json!([
            (N - 1) % 16,
            ((N - 1) * 7919) % 5000,
            format!("user-{}", (N - 1) % 7)
        ])
    );
    assert_eq!(
        last(1)["fmt"],
        json!("moved by {} to Point {{ x: {}, y: {} }}")
    );
    assert_eq!(
        last(1)["args"],
        json!([N as i64 - 101, N - 1, -(N as i64 - 1)])
    );
    assert_eq!(last(3)["fmt"], json!("same text every time"));
    assert_eq!(last(3)["args"], json!([]));
    assert_eq!(last(5)["fmt"], json!("trace {} done"));
    let trace = format!(
        "{:016x}",
        u64::from(N - 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    );
    assert_eq!(last(5)["args"], json!([trace]));
    let big = &json[N as usize * 6 + 10..N as usize * 6 + 13];
    assert!(big.iter().all(|j| j["fmt"] == json!("{}")), "{big:?}");
    let served = json.last().unwrap();
    assert_eq!(served["fmt"], json!("served {} rows of {} status={status}"));
    assert_eq!(served["args"], json!([147, "/b/c", 200]));
    assert_eq!(served["msg"], json!("served 147 rows of /b/c"));

    // `stats` over a gap of the checkout template: every record past the
    // first few is at it, and its wait values are aggregated.
    let stats: Json = serde_json::from_str(&ok(&[
        "stats",
        "--format",
        "json",
        "--site",
        r"^checkout conn=\{\} wait=\{\}us user=\{\}$",
        "--arg",
        "1",
        common::p(&path),
    ]))
    .unwrap();
    let count = stats_count(&stats);
    assert!(
        (N as u64 - 10..=N as u64).contains(&count),
        "{count} of {N} checkouts at the final template: {stats}"
    );
    let _ = std::fs::remove_file(Path::new(&path));
}

/// The count of records a `stats --arg` answer aggregated.
fn stats_count(stats: &Json) -> u64 {
    let rows = stats
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![stats.clone()]);
    rows.iter().filter_map(|r| r["count"].as_u64()).sum()
}
