//! What logging costs a real HTTP service (issue #68; a workspace of its
//! own, so that axum and tower-http stay out of the library's builds): an axum 0.8 server
//! with tower-http's `TraceLayer` (a span per request, its request and
//! response events), two `#[instrument]`ed async functions under the
//! handler and about five events a request of its own, on a 2-worker tokio
//! runtime, loaded by an HTTP/1.1 client with keep-alive connections in
//! another process (this binary again, `client PORT SECS CONNS`), for the
//! same time under each subscriber, alternated round by round.
//!
//! The subscribers, each the default of the server's threads for its
//! whole life (one server, runtime and port a subscriber, all started
//! first):
//!
//! - none: no subscriber;
//! - registry: `tracing_subscriber::registry()` alone;
//! - nanolog: the registry and `nanolog::tracing_layer()` (a running
//!   logger, DEBUG, as the `TraceLayer`'s events are);
//! - fmt JSON: the registry and tracing-subscriber's JSON layer into a
//!   `BufWriter` of a file (emptied before each round).
//!
//! A round's figure is the server's CPU a request: this process's CPU time
//! over the load (every thread: the server's workers, nanolog's flusher;
//! the client runs in its own process) over the requests the client saw
//! answered. Each subscriber's cost is what it adds over "none".
//!
//! ```text
//! cargo run --release --manifest-path bench-http/Cargo.toml -- [SECS ROUNDS] [conns N] [only NAME]
//! ```
//!
//! `only NAME` runs that subscriber's rounds alone (for a profiler).
//!
//! Defaults: 10 s, 5 rounds, 32 connections. Prints each subscriber's
//! median CPU a request, what it adds, and nanolog's added CPU as a share
//! of fmt JSON's, with the per-round shares (BENCHMARKS.md).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Path as UrlPath;
use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

#[path = "../../benches/common/service.rs"]
mod service;
use service::{cpu_time, median, Locked};

const KINDS: [&str; 4] = ["none", "registry", "nanolog", "fmt JSON"];

#[tracing::instrument(level = "info", skip_all, fields(order = id))]
async fn load_order(id: u64) -> u64 {
    tracing::debug!(table = "orders", shard = id % 8, "query");
    tokio::task::yield_now().await;
    let rows = id % 5 + 1;
    tracing::debug!(rows, "query done");
    rows
}

#[tracing::instrument(level = "info", skip_all, fields(user = id % 1000))]
async fn price(id: u64, rows: u64) -> u64 {
    let total = rows * (100 + id % 900);
    tracing::info!(rows, total, currency = "EUR", "priced");
    total
}

async fn get_order(UrlPath(id): UrlPath<u64>) -> String {
    tracing::info!(id, "order requested");
    let rows = load_order(id).await;
    let total = price(id, rows).await;
    if id % 50 == 0 {
        tracing::warn!(id, total, "large order");
    }
    tracing::debug!(bytes = 24 + rows * 16, "response built");
    format!("{{\"id\":{id},\"rows\":{rows},\"total\":{total}}}")
}

/// A server under `dispatch` on its own 2-worker runtime; its address.
fn serve(dispatch: Option<Dispatch>) -> (tokio::runtime::Runtime, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            if let Some(d) = &dispatch {
                // The thread's default for its whole life.
                std::mem::forget(tracing::dispatcher::set_default(d));
            }
        })
        .build()
        .expect("a runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let app = Router::new()
        .route("/orders/{id}", get(get_order))
        .layer(tower_http::trace::TraceLayer::new_for_http());
    rt.spawn(async move { axum::serve(listener, app).await });
    (rt, addr)
}

/// The client: `conns` keep-alive connections to `port`, each asking for
/// the next order as soon as the last one is answered, for `secs`; prints
/// the requests answered.
fn client(port: u16, secs: f64, conns: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let done = rt.block_on(async move {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..conns {
            tasks.spawn(async move {
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .expect("the server");
                s.set_nodelay(true).expect("nodelay");
                let mut buf = vec![0u8; 4096];
                let mut n = 0u64;
                while Instant::now() < until {
                    let id = (c as u64) * 1_000_003 + n;
                    let req = format!("GET /orders/{id} HTTP/1.1\r\nHost: bench\r\n\r\n");
                    s.write_all(req.as_bytes()).await.expect("a request sent");
                    read_response(&mut s, &mut buf).await;
                    n += 1;
                }
                n
            });
        }
        let mut done = 0;
        while let Some(n) = tasks.join_next().await {
            done += n.expect("a connection");
        }
        done
    });
    println!("{done}");
}

/// Reads one response (headers, then a `content-length` body).
async fn read_response(s: &mut tokio::net::TcpStream, buf: &mut [u8]) {
    let mut have = 0;
    loop {
        let n = s.read(&mut buf[have..]).await.expect("a response");
        assert!(n > 0, "the server closed the connection");
        have += n;
        let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = std::str::from_utf8(&buf[..end]).expect("headers");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .expect("a content-length");
        while have < end + 4 + len {
            let n = s.read(&mut buf[have..]).await.expect("a body");
            assert!(n > 0, "the server closed the connection");
            have += n;
        }
        // One request in flight a connection: nothing follows the body.
        return;
    }
}

/// Each subscriber's dispatch (and what makes its output complete).
fn subscriber(kind: usize, dir: &Path, logger: &Arc<nanolog::Logger>) -> Subscriber {
    match kind {
        0 => Subscriber::of(None),
        1 => Subscriber::of(Some(Dispatch::new(tracing_subscriber::registry()))),
        2 => {
            let logger = Arc::clone(logger);
            Subscriber {
                dispatch: Some(Dispatch::new(
                    tracing_subscriber::registry().with(nanolog::tracing_layer()),
                )),
                finish: Box::new(move || logger.flush().expect("flush")),
                output: None,
            }
        }
        _ => {
            let path = dir.join("fmt.json");
            let file = std::fs::File::create(&path).expect("a file");
            let w = Arc::new(std::sync::Mutex::new(std::io::BufWriter::with_capacity(
                1 << 16,
                file,
            )));
            let ww = Arc::clone(&w);
            let layer = tracing_subscriber::fmt::layer()
                .json()
                .with_writer(move || Locked(Arc::clone(&ww)));
            Subscriber {
                dispatch: Some(Dispatch::new(tracing_subscriber::registry().with(layer))),
                finish: Box::new(move || {
                    let _ = w.lock().unwrap_or_else(|e| e.into_inner()).flush();
                }),
                output: Some(path),
            }
        }
    }
}

struct Subscriber {
    dispatch: Option<Dispatch>,
    finish: Box<dyn Fn()>,
    /// A file emptied before each round (fmt's output).
    output: Option<std::path::PathBuf>,
}

impl Subscriber {
    fn of(dispatch: Option<Dispatch>) -> Subscriber {
        Subscriber {
            dispatch,
            finish: Box::new(|| {}),
            output: None,
        }
    }
}

/// One round against the server at `addr`: the server's CPU seconds a
/// request, and the requests.
fn round(addr: SocketAddr, sub: &Subscriber, secs: f64, conns: usize) -> (f64, u64) {
    if let Some(path) = &sub.output {
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
            let _ = f.set_len(0);
        }
    }
    let cpu = cpu_time();
    let out = Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "client",
            &addr.port().to_string(),
            &secs.to_string(),
            &conns.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("the client runs");
    (sub.finish)();
    let used = cpu_time() - cpu;
    let requests: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the client's count");
    assert!(requests > 0, "no request answered");
    (used / requests as f64, requests)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("client") {
        let num = |i: usize| args.get(i).and_then(|a| a.parse::<f64>().ok());
        let port = num(1).expect("client PORT SECS CONNS") as u16;
        client(
            port,
            num(2).unwrap_or(10.0),
            num(3).unwrap_or(32.0) as usize,
        );
        return;
    }
    let mut nums = args.iter().filter_map(|a| a.parse::<f64>().ok());
    let secs = nums.next().unwrap_or(10.0);
    let rounds = nums.next().unwrap_or(5.0) as usize;
    let conns = args
        .iter()
        .skip_while(|a| *a != "conns")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(32);
    let dir = std::env::temp_dir().join(format!("nanolog-http-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let logger = Arc::new(
        nanolog::Logger::builder()
            .path(dir.join("service.nlog"))
            .filter("debug")
            .start()
            .expect("the logger starts"),
    );
    let subs: Vec<Subscriber> = (0..KINDS.len())
        .map(|k| subscriber(k, &dir, &logger))
        .collect();
    let servers: Vec<_> = subs.iter().map(|s| serve(s.dispatch.clone())).collect();
    // `only NAME`: that subscriber's rounds alone (for a profiler).
    let only = args
        .iter()
        .skip_while(|a| *a != "only")
        .nth(1)
        .and_then(|n| KINDS.iter().position(|k| k.starts_with(n.as_str())));
    if let Some(k) = only {
        for _ in 0..rounds {
            let (cpu, n) = round(servers[k].1, &subs[k], secs, conns);
            println!("{}: {n} requests, {:.2} µs a request", KINDS[k], cpu * 1e6);
        }
        return;
    }
    // A short warm-up of each.
    for (k, s) in subs.iter().enumerate() {
        round(servers[k].1, s, 1.0, conns);
    }
    let mut per = vec![Vec::new(); KINDS.len()];
    let mut reqs = vec![0u64; KINDS.len()];
    for r in 0..rounds {
        for j in 0..KINDS.len() {
            let k = (r + j) % KINDS.len();
            let (cpu, n) = round(servers[k].1, &subs[k], secs, conns);
            per[k].push(cpu);
            reqs[k] += n;
        }
    }
    let logged = logger.stats().logged;
    println!(
        "{rounds} rounds of {secs} s, {conns} connections; requests answered: {}; nanolog logged {logged} records ({} dropped)",
        KINDS
            .iter()
            .zip(&reqs)
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        logger.stats().dropped
    );
    let med: Vec<f64> = per.iter().map(|v| median(&mut v.clone())).collect();
    println!("| subscriber | server CPU a request (median) | added over none |");
    println!("|---|---|---|");
    for (k, name) in KINDS.iter().enumerate() {
        println!(
            "| {name} | {:.1} µs | {:.1} µs |",
            med[k] * 1e6,
            (med[k] - med[0]) * 1e6
        );
    }
    let added = |k: usize| med[k] - med[0];
    println!(
        "nanolog's added CPU a request / fmt JSON's: {:.3} (over the registry: {:.3})",
        added(2) / added(3),
        (med[2] - med[1]) / (med[3] - med[1])
    );
    let rounds_ratio: Vec<String> = (0..rounds)
        .map(|r| format!("{:.3}", (per[2][r] - per[0][r]) / (per[3][r] - per[0][r])))
        .collect();
    println!("per round: {}", rounds_ratio.join(" "));
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
}
