//! Criterion: the `nanolog` command end to end on a log of 1,000,000
//! records from 4 threads (the mixed workload of `examples/gen_log.rs`),
//! side by side in one run:
//! - `ship --once` into a collector stand-in on 127.0.0.1 that answers 200
//!   and discards the bodies (what `ship` costs: reading, mapping to OTLP,
//!   protobuf encoding, HTTP), and the same with the bodies gzip'd;
//! - `export --format parquet` (zstd) and `decode --format json` to
//!   /dev/null, the other two ways records leave nanolog's format.
//!
//! Throughput is records per second of the whole process.

use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "../../examples/common/workload.rs"]
mod workload;

#[path = "../tests/common/collector.rs"]
mod collector;

const RECORDS: u64 = 1_000_000;
const BIN: &str = env!("CARGO_BIN_EXE_nanolog");

fn run(args: &[&str]) {
    let o = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run nanolog");
    assert!(
        o.status.success(),
        "nanolog {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("nanolog-bench-ship-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("app.nlog");
    workload::write_log(&log, 4, RECORDS);
    let log = log.to_str().expect("utf-8 path");
    let out = dir.join("out.parquet");
    let out = out.to_str().expect("utf-8 path");
    let sink = collector::Collector::start();
    sink.state.lock().expect("collector state").discard = true;
    let endpoint = sink.endpoint();

    let mut g = c.benchmark_group("cli");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(RECORDS));
    g.bench_function("ship_otlp_http", |b| {
        b.iter(|| run(&["ship", "--once", "--endpoint", &endpoint, log]))
    });
    g.bench_function("ship_otlp_http_gzip", |b| {
        b.iter(|| {
            run(&[
                "ship",
                "--once",
                "--compression",
                "gzip",
                "--endpoint",
                &endpoint,
                log,
            ])
        })
    });
    g.bench_function("export_parquet_zstd", |b| {
        b.iter(|| run(&["export", "--format", "parquet", "-o", out, log]))
    });
    g.bench_function("decode_json", |b| {
        b.iter(|| run(&["decode", "--format", "json", log]))
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
