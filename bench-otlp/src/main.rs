//! A traced tokio service's logs into a real OpenTelemetry Collector, the
//! two ways a Rust service would take (BENCHMARKS.md, "Export and ship"):
//!
//! - appender: `opentelemetry-appender-tracing`'s bridge into the SDK's
//!   logger provider, its batch processor and the OTLP/HTTP exporter
//!   (protobuf), all at their defaults, in the service;
//! - nanolog: `nanolog::tracing_layer()` into a log file in the service,
//!   then `nanolog ship --once` of that file into the same Collector.
//!
//! Both beside tracing-opentelemetry's layer (the SDK's tracer, its spans
//! dropped), as a service that traces runs; `base` is that registry alone,
//! and each way's cost in the service is what it adds over `base`. Each
//! run is a process of its own (this binary, `child MODE ...`), the three
//! alternated round by round; CPU is user + system time by getrusage, of
//! the whole process (every thread: the flusher, the exporter's), from the
//! first request to the end of the flush (`drop(logger)`, the provider's
//! `shutdown`), and of `nanolog ship` as a whole.
//!
//! The workload: REQUESTS requests on a 2-worker runtime, 64 in flight,
//! each in three nested spans with fields (`request`, `db`, `query`) and
//! six INFO events with fields across them.
//!
//! What arrived is counted in the Collector's file exporter output, by
//! each run's `service.name`.
//!
//! ```text
//! cargo run --release --manifest-path bench-otlp/Cargo.toml -- \
//!     --otelcol target/otelcol/otelcol-nanolog --nanolog target/release/nanolog \
//!     [--requests 10000] [--rounds 3]
//! ```

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tracing::{Dispatch, Instrument};
use tracing_subscriber::layer::SubscriberExt;

// The service benchmarks' own measures: CPU time by getrusage, medians.
#[allow(dead_code)] // (its `Locked` writer is fmt's, not used here)
#[path = "../../benches/common/service.rs"]
mod service;
use service::{cpu_time_of, median};

const IN_FLIGHT: usize = 64;
const EVENTS_PER_REQUEST: u64 = 6;
const MODES: [&str; 3] = ["base", "appender", "nanolog"];

async fn request(i: u64) {
    let req = tracing::info_span!("request", method = "GET", path = "/api/orders", id = i);
    async move {
        tracing::info!(bytes_in = 120 + i % 900, "request received");
        let db = tracing::info_span!("db", table = "orders", op = "select");
        async move {
            tracing::info!(conn = i % 16, "pool checkout");
            tokio::task::yield_now().await;
            let query = tracing::info_span!("query", shard = i % 4);
            async move {
                tracing::info!(rows = i % 50, took_us = i % 900, "rows read");
                tracing::info!(retry = 1u8, "slow shard");
            }
            .instrument(query)
            .await;
        }
        .instrument(db)
        .await;
        tokio::task::yield_now().await;
        tracing::info!(bytes = i * 3, "response written");
        tracing::info!(
            status = 200u16,
            elapsed_us = 900 + i % 40_000,
            "request done"
        );
    }
    .instrument(req)
    .await
}

/// Spans the SDK exports, dropped: the traces are the same in every mode.
#[derive(Debug)]
struct NoSpans;

impl SpanExporter for NoSpans {
    async fn export(&self, _batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

/// One run of the service in `mode`; prints its CPU seconds.
fn child(mode: &str, requests: u64, endpoint: &str, service: &str, log: &Path) {
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(NoSpans)
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(traces.tracer("service"));
    type Layer = Box<
        dyn tracing_subscriber::Layer<
                tracing_subscriber::layer::Layered<
                    tracing_opentelemetry::OpenTelemetryLayer<
                        tracing_subscriber::Registry,
                        opentelemetry_sdk::trace::SdkTracer,
                    >,
                    tracing_subscriber::Registry,
                >,
            > + Send
            + Sync,
    >;
    let (layer, finish): (Option<Layer>, Box<dyn FnOnce()>) = match mode {
        "base" => (None, Box::new(|| {})),
        "appender" => {
            let exporter = opentelemetry_otlp::LogExporter::builder()
                .with_http()
                .with_endpoint(format!("{endpoint}/v1/logs"))
                .build()
                .expect("an OTLP/HTTP log exporter");
            let provider = SdkLoggerProvider::builder()
                .with_resource(
                    Resource::builder()
                        .with_service_name(service.to_owned())
                        .build(),
                )
                .with_batch_exporter(exporter)
                .build();
            let bridge =
                opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&provider);
            (
                Some(Box::new(bridge)),
                Box::new(move || {
                    let _ = provider.shutdown();
                }),
            )
        }
        "nanolog" => {
            let logger = nanolog::Logger::builder()
                .path(log)
                .start()
                .expect("a logger");
            (
                Some(Box::new(nanolog::tracing_layer())),
                Box::new(move || drop(logger)),
            )
        }
        other => panic!("no mode {other}"),
    };
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(otel).with(layer));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .expect("a runtime");
    let cpu = cpu_time_of(libc::RUSAGE_SELF);
    tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            let mut next = 0u64;
            let mut set = tokio::task::JoinSet::new();
            while next < requests || !set.is_empty() {
                while next < requests && set.len() < IN_FLIGHT {
                    set.spawn(request(next));
                    next += 1;
                }
                if let Some(r) = set.join_next().await {
                    r.expect("a request task");
                }
            }
        })
    });
    finish();
    let cpu = cpu_time_of(libc::RUSAGE_SELF) - cpu;
    drop(rt);
    let _ = traces.shutdown();
    println!("cpu {cpu}");
}

/// A Collector: OTLP/HTTP in, the batch processor, the file exporter.
struct Collector {
    child: std::process::Child,
    port: u16,
    out: PathBuf,
}

impl Collector {
    fn start(otelcol: &Path, dir: &Path) -> Collector {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = dir.join("collector-out.json");
        let config = dir.join("collector.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
processors:
  batch:
exporters:
  file:
    path: {}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [file]
",
                out.display()
            ),
        )
        .expect("the collector's config");
        let child = Command::new(otelcol)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("collector.log")).expect("its log"))
            .spawn()
            .expect("the collector starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the collector did not listen in 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Collector { child, port, out }
    }

    /// Stops it (its exporters flush) and counts the records it wrote, and
    /// those with a trace id, by service name.
    fn stop(mut self) -> std::collections::HashMap<String, (u64, u64)> {
        // SAFETY: kill(2) of our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let mut counts = std::collections::HashMap::new();
        let f = std::fs::File::open(&self.out).expect("the collector's output");
        for line in std::io::BufReader::new(f).lines() {
            let line = line.expect("a line");
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            for rl in v["resourceLogs"].as_array().into_iter().flatten() {
                let service = rl["resource"]["attributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| a["key"] == "service.name")
                    .and_then(|a| a["value"]["stringValue"].as_str())
                    .unwrap_or("")
                    .to_owned();
                let c: &mut (u64, u64) = counts.entry(service).or_default();
                for sl in rl["scopeLogs"].as_array().into_iter().flatten() {
                    for r in sl["logRecords"].as_array().into_iter().flatten() {
                        c.0 += 1;
                        if r["traceId"].as_str().is_some_and(|t| !t.is_empty()) {
                            c.1 += 1;
                        }
                    }
                }
            }
        }
        counts
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        let [_, mode, requests, endpoint, service, log] = &args[..] else {
            panic!("child MODE REQUESTS ENDPOINT SERVICE LOG");
        };
        child(
            mode,
            requests.parse().expect("REQUESTS"),
            endpoint,
            service,
            Path::new(log),
        );
        return;
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let otelcol = PathBuf::from(flag("--otelcol").expect("--otelcol PATH (the Collector)"));
    let nanolog = PathBuf::from(flag("--nanolog").expect("--nanolog PATH (the CLI)"));
    let requests: u64 = flag("--requests").map_or(10_000, |s| s.parse().expect("--requests N"));
    let rounds: usize = flag("--rounds").map_or(3, |s| s.parse().expect("--rounds N"));
    let events = requests * EVENTS_PER_REQUEST;

    let dir = std::env::temp_dir().join(format!("nanolog-bench-otlp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a work directory");
    let collector = Collector::start(&otelcol, &dir);
    let endpoint = format!("http://127.0.0.1:{}", collector.port);
    let me = std::env::current_exe().expect("this binary");

    // (mode, round) -> service CPU; nanolog's rounds -> ship's CPU.
    let mut service_cpu: Vec<(usize, usize, f64)> = Vec::new();
    let mut ship_cpu: Vec<(usize, f64)> = Vec::new();
    for round in 0..rounds {
        for (m, mode) in MODES.iter().enumerate() {
            let service = format!("{mode}-{round}");
            let log = dir.join(format!("{service}.nlog"));
            let out = Command::new(&me)
                .args(["child", mode, &requests.to_string(), &endpoint, &service])
                .arg(&log)
                .stderr(Stdio::inherit())
                .output()
                .expect("a run");
            assert!(out.status.success(), "{mode} run {round} failed");
            let text = String::from_utf8_lossy(&out.stdout);
            let cpu: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("cpu "))
                .and_then(|s| s.trim().parse().ok())
                .expect("the run's CPU");
            service_cpu.push((m, round, cpu));
            if *mode == "nanolog" {
                let before = cpu_time_of(libc::RUSAGE_CHILDREN);
                let status = Command::new(&nanolog)
                    .args([
                        "ship",
                        "--once",
                        "--endpoint",
                        &endpoint,
                        "--service",
                        &service,
                    ])
                    .arg(&log)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("nanolog ship");
                assert!(status.success(), "nanolog ship of run {round} failed");
                ship_cpu.push((round, cpu_time_of(libc::RUSAGE_CHILDREN) - before));
            }
            eprint!(".");
        }
    }
    eprintln!();
    // Let the Collector's batch processor pass the last requests on.
    std::thread::sleep(Duration::from_secs(2));
    let counts = collector.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let per_event = |s: f64| s / events as f64 * 1e6;
    let cpu_of = |m: usize, r: usize| {
        service_cpu
            .iter()
            .find(|&&(mm, rr, _)| mm == m && rr == r)
            .map_or(f64::NAN, |x| x.2)
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{requests} requests, {events} events a run, {rounds} rounds alternated (base, appender, nanolog + ship)"
    );
    let _ = writeln!(
        out,
        "round | base CPU s | appender added µs/event | delivered | nanolog added µs/event | ship µs/record | nanolog whole way µs/event | delivered (with trace id)"
    );
    let mut ratios = Vec::new();
    let (mut app, mut nano, mut ship, mut whole) = (vec![], vec![], vec![], vec![]);
    for r in 0..rounds {
        let base = cpu_of(0, r);
        let a = per_event(cpu_of(1, r) - base);
        let n = per_event(cpu_of(2, r) - base);
        let s = ship_cpu.iter().find(|x| x.0 == r).map_or(f64::NAN, |x| x.1);
        let got = |mode: &str| {
            counts
                .get(&format!("{mode}-{r}"))
                .copied()
                .unwrap_or((0, 0))
        };
        let (na, _) = got("appender");
        let (nn, nt) = got("nanolog");
        let s_rec = s / nn.max(1) as f64 * 1e6;
        let w = n + per_event(s);
        let _ = writeln!(
            out,
            "{r} | {base:.3} | {a:.2} | {na} | {n:.2} | {s_rec:.2} | {w:.2} | {nn} ({nt})"
        );
        ratios.push(w / a);
        app.push(a);
        nano.push(n);
        ship.push(s_rec);
        whole.push(w);
    }
    let _ = writeln!(
        out,
        "median | | {:.2} | | {:.2} | {:.2} | {:.2} | whole way / appender {:.2}",
        median(&mut app),
        median(&mut nano),
        median(&mut ship),
        median(&mut whole),
        median(&mut ratios)
    );
}
