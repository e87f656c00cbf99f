//! Records from the `log` and `tracing` bridges and named arguments, written
//! by the real logger and decoded by the binary, in text and JSON.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value as Json};
use tracing_subscriber::layer::SubscriberExt;

use crate::common;

use common::BIN;

fn decode(path: &PathBuf, json: bool) -> Vec<String> {
    let mut cmd = Command::new(BIN);
    cmd.arg("decode").arg(path);
    if json {
        cmd.args(["--format", "json"]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

mod dependency {
    /// A dependency-style module that logs through `log`.
    pub fn work(n: u32) {
        log::info!("fetched {} rows", n);
        log::debug!(target: "dependency::wire", "frame {:?}", [1, 2]);
        log::trace!("too verbose {}", n);
        log::warn!(target: "noisy", "dropped by the filter");
        log::error!("static message");
    }
}

/// One program logging through all three APIs; returns its file.
fn write_log() -> PathBuf {
    // (Its lock file, and the log if a check fails first, go at exit.)
    let path = common::temp("bridges");
    let logger = nanolog::Logger::builder()
        .path(&path)
        .filter(&format!(
            "debug,noisy=off,{}::dependency=debug",
            module_path!()
        ))
        .start()
        .unwrap();
    common::capture_log_once();
    assert!(
        nanolog::capture_log().is_err(),
        "a second capture_log must fail"
    );
    assert_eq!(log::max_level(), log::LevelFilter::Debug);

    let name = "orders";
    let pct = 93.25;
    nanolog::warn!("queue {name} at {pct:.1}% after {} tries", 3);
    dependency::work(42);

    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!(
            user = "alice",
            attempts = 3u64,
            ok = true,
            ratio = 0.5,
            "login {}",
            7
        );
        tracing::warn!(target: "audit", code = -2i64, "denied");
        tracing::trace!("filtered out");
        tracing::info!(only = "fields");
    });

    // The log crate's key-values become typed fields.
    log::info!(order = 7, side = "buy", ok = true, ratio = 0.5; "placed {}", 3);

    nanolog::set_filter("warn").unwrap();
    assert_eq!(log::max_level(), log::LevelFilter::Warn);
    log::info!("after set_filter: filtered out");
    drop(logger);
    assert_eq!(log::max_level(), log::LevelFilter::Off);
    path
}

#[test]
fn bridge_records_decode_with_their_site_target_and_fields() {
    let _s = common::serial();
    let path = write_log();
    let me = file!();
    let text: Vec<String> = decode(&path, false)
        .into_iter()
        // "date time file:line LEVEL[thread] [target]: message" -> "file LEVEL: message"
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let (_, _, at, rest) = (
                parts.next(),
                parts.next(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            let file = at.rsplit_once(':').unwrap().0;
            let (level, msg) = rest.split_once(": ").unwrap();
            format!("{file} {} {msg}", level.split('[').next().unwrap())
        })
        .collect();
    assert_eq!(
        text,
        [
            format!("{me} WARN queue orders at 93.2% after 3 tries"),
            format!("{me} INFO fetched 42 rows"),
            format!("{me} DEBUG frame [1, 2]"),
            format!("{me} ERROR static message"),
            format!("{me} INFO login 7 user=alice attempts=3 ok=true ratio=0.5"),
            format!("{me} WARN denied code=-2"),
            format!("{me} INFO only=fields"),
            format!("{me} INFO placed 3 order=7 side=buy ok=true ratio=0.5"),
        ]
    );

    let json: Vec<Json> = decode(&path, true)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pick = |j: &Json| {
        json!({
            "target": j["target"], "module": j["module"], "fields": j["fields"],
            "args": j["args"], "msg": j["msg"],
        })
    };
    let got: Vec<Json> = json.iter().map(pick).collect();
    let module = module_path!();
    let dep = &format!("{module}::dependency");
    assert_eq!(
        got,
        [
            json!({"target": module, "module": module,
                   "fields": {"name": "orders", "pct": 93.25},
                   "args": [3, "orders", 93.25], "msg": "queue orders at 93.2% after 3 tries"}),
            json!({"target": dep, "module": dep, "fields": {},
                   "args": ["fetched 42 rows"], "msg": "fetched 42 rows"}),
            json!({"target": "dependency::wire", "module": dep, "fields": {},
                   "args": ["frame [1, 2]"], "msg": "frame [1, 2]"}),
            json!({"target": dep, "module": dep, "fields": {},
                   "args": ["static message"], "msg": "static message"}),
            json!({"target": module, "module": module,
                   "fields": {"user": "alice", "attempts": 3, "ok": true, "ratio": 0.5},
                   // `"login {}", 7` is the constant "login 7" (rustc
                   // folds a literal argument into the format string):
                   // the typed path, the message is the site's text.
                   "args": ["alice", 3, true, 0.5],
                   "msg": "login 7"}),
            json!({"target": "audit", "module": module, "fields": {"code": -2},
                   "args": [-2], "msg": "denied"}),
            json!({"target": module, "module": module, "fields": {"only": "fields"},
                   "args": ["fields"], "msg": ""}),
            json!({"target": module, "module": module,
                   "fields": {"order": 7, "side": "buy", "ok": true, "ratio": 0.5},
                   "args": ["placed 3", 7, "buy", true, 0.5],
                   "msg": "placed 3"}),
        ]
    );
    // Every record has the file and line of its own call, not the bridge's:
    // `dependency::work`'s first two calls stand on consecutive lines.
    assert!(json.iter().all(|j| j["file"] == me), "{json:?}");
    let line = |i: usize| json[i]["line"].as_u64().unwrap();
    assert_eq!(line(2), line(1) + 1);
    assert_ne!(
        line(1),
        line(4),
        "log and tracing calls have their own lines"
    );
    assert_eq!(json[1]["level"], "INFO");
    assert_eq!(json[2]["level"], "DEBUG");

    // `info --format json` lists each site's target and argument names; an
    // event whose message is constant (the typed path) has it as its text.
    let out = Command::new(BIN)
        .args(["info", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let info: Json = serde_json::from_slice(&out.stdout).unwrap();
    let denied = info["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["fmt"] == "denied code={code}")
        .expect("the tracing site");
    assert_eq!(denied["target"], "audit");
    assert_eq!(denied["names"], json!(["code"]));
    let _ = std::fs::remove_file(&path);
}

/// A typed `tracing` event whose values outgrow the thread's inline staging
/// (1 KiB) is visited again into the heap and written whole: strings of every size
/// around the boundary, with a field after them.
#[test]
fn typed_events_larger_than_the_inline_staging_are_written_whole() {
    let _s = common::serial();
    let path = common::temp("bridges-big");
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let sizes = [0usize, 1, 1000, 1011, 1012, 1013, 1024, 5000, 100_000];
    let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        for (i, &n) in sizes.iter().enumerate() {
            let text = "x".repeat(n);
            tracing::info!(text = text.as_str(), n = i as u64, "big");
        }
    });
    drop(logger);
    let json: Vec<Json> = decode(&path, true)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json.len(), sizes.len());
    for (i, (j, &n)) in json.iter().zip(&sizes).enumerate() {
        assert_eq!(
            j["fields"]["text"].as_str().map(str::len),
            Some(n),
            "size {n}"
        );
        assert_eq!(j["fields"]["n"], json!(i));
        // The typed path: the message is the site's, not formatted text.
        assert_eq!(j["fmt"], json!("big text={text} n={n}"), "size {n}");
    }
    let _ = std::fs::remove_file(&path);
}
