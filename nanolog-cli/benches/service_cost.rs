//! What logging costs a whole tokio service (issue #45): the same workload
//! under five subscribers, alternated round by round in one process, and
//! each one's cost added over the bare registry.
//!
//! The workload: REQUESTS `#[instrument]`ed requests on a 4-worker
//! multi-thread runtime, 64 in flight, each with a database span per
//! query, a cache span, a child task (`in_current_span`), `spawn_blocking`
//! work in the request's span (`in_scope`), a value recorded into the
//! request span later, a yield at every step (so instrumented futures are
//! entered and exited at every poll), and 26 `tracing` events at INFO and
//! DEBUG with typed fields.
//!
//! The subscribers, each set as the default of the runtime's threads (and
//! the blocking pool's) for its round:
//!
//! - none: no subscriber;
//! - registry: `tracing_subscriber::registry()` alone;
//! - nanolog: the registry and `nanolog::tracing_layer()` (a running
//!   logger, DEBUG); its time includes `Logger::flush`;
//! - fmt JSON: the registry and tracing-subscriber's JSON layer (current
//!   span and span list) into a `BufWriter` of a file, flushed at the end;
//! - fmt JSON non-blocking: the same into `tracing_appender::non_blocking`
//!   of a file, its worker's guard dropped (flushed) at the end;
//! - registry + no-op layer: a second baseline. The bare registry never
//!   frees a closed span: its `try_close` only counts references down, and
//!   the slot is cleared by the close guard that `Layered`, any layer over
//!   it, takes (tracing-subscriber 0.3.23, `registry/sharded.rs`). So
//!   "added over the registry" also counts the registry's own close path,
//!   which any layer turns on. Only with the argument `noop`; the ratio
//!   over this baseline is then printed after the headline one, which stays
//!   the issue's: over the bare registry.
//!
//! `workload span-heavy` serves issue #68's span-heavy requests instead
//! (`heavy_request`: about ten spans and 25 events a request), `workload
//! both` each round both, in the same rotation, a report for each.
//!
//! fmt's files are emptied before each of their rounds (see
//! `Service::round`), so a run of many rounds measures what its first
//! rounds do.
//!
//! ```text
//! cargo bench -p nanolog-cli --bench service_cost [-- REQUESTS ROUNDS] [compression none|fast|small] [noop] [workload today|span-heavy|both]
//! ```
//!
//! Prints each subscriber's median time, its added cost over the registry,
//! and nanolog's added cost as a share of fmt JSON's, over the bare
//! registry and over the registry with a no-op layer (BENCHMARKS.md).
//!
//! 30 rounds by default (REQUESTS 5,000; about 45 s): on the CI machine
//! the build of 3226a47 (2026-11-28) in 7-round runs gave 0.104-0.182 within minutes;
//! 30-round runs gave 0.126, and an earlier build of the same runtime
//! 0.124-0.161 in three, within the hour (the machine's phase still moves
//! them).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tracing::{Dispatch, Instrument};
use tracing_subscriber::layer::SubscriberExt;

#[path = "../../benches/common/service.rs"]
mod service;
use service::{cpu_time, median, Locked};

const IN_FLIGHT: usize = 64;
const TABLES: [&str; 5] = ["orders", "accounts", "positions", "fills", "quotes"];
const ROUTES: [&str; 4] = [
    "/api/v1/orders",
    "/api/v1/accounts",
    "/api/v1/quotes",
    "/healthz",
];

/// Events the workload makes (counted, to check nanolog wrote them all):
/// each thread counts its own, on a line of its own, and the counts are
/// summed when read. One counter that every worker bumped was a line passed
/// between the cores at every event, which cost a subscriber the more the
/// faster it let events come: in a slow phase on 2026-11-28 (3d11470),
/// `Instrumented::poll` (where it is inlined) was 194 samples dearer in
/// nanolog's rounds than in the registry's, of the ~2,800 nanolog added,
/// and `perf annotate` put most of its samples on that `lock xadd`.
static COUNTS: std::sync::Mutex<Vec<std::sync::Arc<Count>>> = std::sync::Mutex::new(Vec::new());

#[repr(align(128))]
struct Count(AtomicU64);

thread_local! {
    static MY_COUNT: std::sync::Arc<Count> = {
        let c = std::sync::Arc::new(Count(AtomicU64::new(0)));
        COUNTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(std::sync::Arc::clone(&c));
        c
    };
}

fn event() {
    // Only this thread writes its count: a load and a store, no atomic
    // read-modify-write.
    MY_COUNT.with(|c| {
        c.0.store(c.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed)
    });
}

/// The events counted so far by every thread (a round's are all counted
/// once it has ended: its tasks and blocking calls were joined).
fn events() -> u64 {
    COUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|c| c.0.load(Ordering::Relaxed))
        .sum()
}

#[tracing::instrument(
    level = "info",
    skip_all,
    fields(method = "GET", path = ROUTES[(i % 4) as usize], request_id = i, status = tracing::field::Empty)
)]
async fn request(i: u64) {
    tracing::info!(bytes_in = 120 + i % 900, "request received");
    event();
    for q in 0..4u64 {
        query(i, q).await;
    }
    let key = i % 1000;
    {
        let cache = tracing::debug_span!("cache", key);
        let _in = cache.enter();
        tracing::debug!(hit = !i.is_multiple_of(3), "cache lookup");
        event();
    }
    // Fan out: a child task in the request's span.
    let child = tokio::spawn(
        async move {
            tracing::info!(target: "audit", action = "read", "audit begins");
            event();
            tokio::task::yield_now().await;
            tracing::info!(target: "audit", action = "read", "audited");
            event();
        }
        .in_current_span(),
    );
    // Blocking work in the request's span.
    let span = tracing::Span::current();
    let digest = tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            tracing::debug!(bytes = 4096u64, "hashing body");
            event();
            let d = (0..64u64).fold(i, |a, b| a.rotate_left(5) ^ b);
            tracing::debug!(digest = d, "hashed");
            event();
            d
        })
    })
    .await
    .unwrap_or(0);
    for step in 0..6u64 {
        tracing::debug!(step, digest, "handler step");
        event();
        tokio::task::yield_now().await;
    }
    if i.is_multiple_of(10) {
        tracing::warn!(status = 429u64, retry_after_ms = 250u64, "rate limited");
        event();
    }
    let _ = child.await;
    tracing::Span::current().record("status", 200u64);
    tracing::info!(elapsed_us = 900 + i % 40_000, "request done");
    event();
}

async fn query(i: u64, q: u64) {
    let table = TABLES[((i + q) % 5) as usize];
    async move {
        tracing::debug!(conn = (i + q) % 16, "pool checkout");
        event();
        tokio::task::yield_now().await;
        tracing::debug!(
            rows = (i * 7 + q) % 50,
            elapsed_us = 180 + i % 9000,
            "query done"
        );
        event();
    }
    .instrument(tracing::debug_span!("db", table, op = "select"))
    .await
}

/// Issue #68's span-heavy request, as a team writing such a service would:
/// about ten spans a request (`#[instrument]` four levels deep, a child task,
/// two `spawn_blocking` calls each `in_scope`, a synchronous `in_scope`, a
/// span with an explicit parent, a task of its own whose span follows from
/// the request's), three values recorded into the request span later, and
/// 25 events of 3 to 8 fields. (The task of its own is joined before the
/// request ends, so a round's events are all in before it is timed.)
#[tracing::instrument(
    level = "info",
    skip_all,
    fields(method = "POST", path = ROUTES[(i % 4) as usize], request_id = i,
           status = tracing::field::Empty, user = tracing::field::Empty,
           bytes_out = tracing::field::Empty)
)]
async fn heavy_request(i: u64) {
    tracing::info!(
        bytes_in = 120 + i % 900,
        tls = true,
        peer = "10.0.3.7",
        "request received"
    );
    event();
    tracing::Span::current().record("user", i % 977);
    let total = handler(i).await;
    // A task of its own, following from the request.
    let from = tracing::Span::current();
    let detached = tokio::spawn(
        async move {
            tracing::info!(
                kind = "metrics",
                shard = i % 8,
                queued = i % 64,
                "flush queued"
            );
            event();
            tokio::task::yield_now().await;
            tracing::debug!(kind = "metrics", shard = i % 8, sent = true, "flushed");
            event();
        }
        .instrument({
            let s = tracing::info_span!(parent: None, "background", job = "metrics");
            s.follows_from(from.id());
            s
        }),
    );
    let parent = tracing::Span::current();
    {
        // A span with an explicit parent, entered synchronously.
        let audit = tracing::info_span!(parent: &parent, "audit", action = "write");
        audit.in_scope(|| {
            tracing::info!(target: "audit", action = "write", rows = total % 50, ok = true, "audited");
            event();
        });
    }
    tracing::Span::current().record("bytes_out", 512 + total % 4096);
    let _ = detached.await;
    tracing::Span::current().record("status", 200u64);
    tracing::info!(
        elapsed_us = 900 + i % 40_000,
        status = 200u64,
        bytes_out = 512 + total % 4096,
        "request done"
    );
    event();
}

#[tracing::instrument(level = "info", skip_all, fields(route = ROUTES[(i % 4) as usize]))]
async fn handler(i: u64) -> u64 {
    tracing::debug!(stage = "validate", fields = 6u64, ok = true, "validated");
    event();
    let mut total = 0;
    for q in 0..2u64 {
        total += service_call(i, q).await;
    }
    // Two blocking calls, each in the handler's span.
    for step in ["compress", "sign"] {
        let span = tracing::Span::current();
        total += tokio::task::spawn_blocking(move || {
            span.in_scope(|| {
                tracing::debug!(step, bytes = 4096u64, level = 3u64, "blocking work");
                event();
                let d = (0..64u64).fold(i, |a, b| a.rotate_left(5) ^ b);
                tracing::debug!(step, digest = d, elapsed_us = 40 + d % 90, "blocking done");
                event();
                d % 1000
            })
        })
        .await
        .unwrap_or(0);
    }
    // A child task in the handler's span.
    let child = tokio::spawn(
        async move {
            tracing::info!(target: "audit", action = "read", user = i % 977, "audit begins");
            event();
            tokio::task::yield_now().await;
            tracing::info!(target: "audit", action = "read", user = i % 977, ok = true, "audited read");
            event();
        }
        .in_current_span(),
    );
    for step in 0..3u64 {
        tracing::debug!(step, total, pending = 3 - step, "handler step");
        event();
        tokio::task::yield_now().await;
    }
    let _ = child.await;
    if i.is_multiple_of(10) {
        tracing::warn!(
            status = 429u64,
            retry_after_ms = 250u64,
            user = i % 977,
            "rate limited"
        );
        event();
    }
    total
}

#[tracing::instrument(level = "debug", skip_all, fields(call = q))]
async fn service_call(i: u64, q: u64) -> u64 {
    tracing::debug!(call = q, attempt = 1u64, timeout_ms = 250u64, "calling");
    event();
    let rows = repo(i, q).await;
    tracing::debug!(call = q, rows, cached = rows % 3 == 0, "called");
    event();
    rows
}

#[tracing::instrument(level = "debug", skip_all, fields(table = TABLES[((i + q) % 5) as usize]))]
async fn repo(i: u64, q: u64) -> u64 {
    tracing::debug!(
        conn = (i + q) % 16,
        pool_size = 16u64,
        wait_us = i % 50,
        "pool checkout"
    );
    event();
    tokio::task::yield_now().await;
    let rows = (i * 7 + q) % 50;
    tracing::debug!(
        rows,
        elapsed_us = 180 + i % 9000,
        op = "select",
        index = "pk",
        plan = "seek",
        "query done"
    );
    event();
    rows
}

/// Which requests a round serves (`workload today|span-heavy|both`).
#[derive(Clone, Copy, PartialEq)]
enum Workload {
    /// `request`: the service of issue #45.
    Today,
    /// `heavy_request`: issue #68's span-heavy service.
    SpanHeavy,
}

/// One subscriber's service: a 4-worker runtime whose threads (and the
/// blocking pool's) have the subscriber as their default for their whole
/// life, kept for every round as a service keeps its threads, and what
/// makes its output complete at the end of a round.
struct Service {
    rt: tokio::runtime::Runtime,
    dispatch: Option<Dispatch>,
    /// Called with the round's events: returns once they are all written.
    finish: Box<dyn Fn(u64)>,
    /// A file to empty before each round (fmt's output: see `round`).
    output: Option<std::path::PathBuf>,
}

impl Service {
    fn new(dispatch: Option<Dispatch>, finish: Box<dyn Fn(u64)>) -> Service {
        let d = dispatch.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .on_thread_start(move || {
                if let Some(d) = &d {
                    // The thread's default for its whole life.
                    std::mem::forget(tracing::dispatcher::set_default(d));
                }
            })
            .build()
            .expect("a runtime");
        Service {
            rt,
            dispatch,
            finish,
            output: None,
        }
    }

    /// Empties `path` before each round.
    fn emptying(mut self, path: std::path::PathBuf) -> Service {
        self.output = Some(path);
        self
    }

    /// The workload, then `finish`: the time from the first request to the
    /// last one's end, its output written.
    fn round(&self, requests: u64, workload: Workload) -> Round {
        let work = || {
            self.rt.block_on(async {
                let mut next = 0u64;
                let mut set = tokio::task::JoinSet::new();
                while next < requests || !set.is_empty() {
                    while next < requests && set.len() < IN_FLIGHT {
                        match workload {
                            Workload::Today => set.spawn(request(next)),
                            Workload::SpanHeavy => set.spawn(heavy_request(next)),
                        };
                        next += 1;
                    }
                    if let Some(r) = set.join_next().await {
                        r.expect("a request task");
                    }
                }
            })
        };
        // fmt's JSON, about 40 MB a round of 5,000 requests, is cut back
        // to nothing (through a handle of its own: the writer's goes on
        // at its offset, into a sparse file): past a gigabyte or so of
        // dirty pages the kernel's writeback slowed fmt's later rounds by a
        // third (60-round runs, 2026-11-28, 2ab00e8), a cost of the run's length,
        // not of the subscriber. Every round then writes into an empty
        // file, as the first rounds do.
        if let Some(path) = &self.output {
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
                let _ = f.set_len(0);
            }
        }
        let before = events();
        let cpu = cpu_time();
        let start = Instant::now();
        match &self.dispatch {
            Some(d) => tracing::dispatcher::with_default(d, work),
            None => work(),
        }
        let worked = start.elapsed();
        (self.finish)(events() - before);
        let total = start.elapsed();
        Round {
            total: total.as_secs_f64(),
            finish: (total - worked).as_secs_f64(),
            cpu: cpu_time() - cpu,
        }
    }
}

/// One round's figures, in seconds: the time, the part of it spent making
/// the output complete after the last request, and the CPU time the whole
/// process used (every thread: workers, the blocking pool, a flusher or a
/// writer thread).
#[derive(Clone, Copy)]
struct Round {
    total: f64,
    finish: f64,
    cpu: f64,
}

const KINDS: [&str; 6] = [
    "none",
    "registry",
    "nanolog",
    "fmt JSON (BufWriter)",
    "fmt JSON (non_blocking)",
    "registry + no-op layer",
];

/// The no-op layer's kind: the second baseline (see `service`).
const NOOP: usize = 5;

/// The service of subscriber `kind`.
fn service(kind: usize, dir: &Path, logger: &std::sync::Arc<nanolog::Logger>) -> Service {
    match kind {
        0 => Service::new(None, Box::new(|_| {})),
        1 => Service::new(
            Some(Dispatch::new(tracing_subscriber::registry())),
            Box::new(|_| {}),
        ),
        2 => {
            let logger = std::sync::Arc::clone(logger);
            Service::new(
                Some(Dispatch::new(
                    tracing_subscriber::registry().with(nanolog::tracing_layer()),
                )),
                Box::new(move |_| logger.flush().expect("flush")),
            )
        }
        3 => {
            let path = dir.join("fmt.json");
            let file = std::fs::File::create(&path).expect("a file");
            let w = std::sync::Arc::new(std::sync::Mutex::new(std::io::BufWriter::with_capacity(
                1 << 16,
                file,
            )));
            let ww = std::sync::Arc::clone(&w);
            let layer = tracing_subscriber::fmt::layer()
                .json()
                .with_writer(move || Locked(std::sync::Arc::clone(&ww)));
            Service::new(
                Some(Dispatch::new(tracing_subscriber::registry().with(layer))),
                Box::new(move |_| {
                    let _ = w.lock().unwrap_or_else(|e| e.into_inner()).flush();
                }),
            )
            .emptying(path)
        }
        // The registry with a layer that does nothing: the second baseline
        // (see the module's list). Alone, the registry held 55 MB after 15
        // rounds (`only registry`, max RSS); with this layer, 6 MB.
        NOOP => Service::new(
            Some(Dispatch::new(
                tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new()),
            )),
            Box::new(|_| {}),
        ),
        _ => {
            let path = dir.join("fmt-nb.json");
            let file = std::fs::File::create(&path).expect("a file");
            let lines = std::sync::Arc::new(AtomicU64::new(0));
            let (nb, guard) = tracing_appender::non_blocking(Lines {
                file,
                lines: std::sync::Arc::clone(&lines),
            });
            let layer = tracing_subscriber::fmt::layer().json().with_writer(nb);
            // The lines every round of this kind wrote: one an event.
            let want = AtomicU64::new(0);
            Service::new(
                Some(Dispatch::new(tracing_subscriber::registry().with(layer))),
                Box::new(move |events| {
                    let _worker = &guard;
                    let want = want.fetch_add(events, Ordering::Relaxed) + events;
                    while lines.load(Ordering::Acquire) < want {
                        std::thread::yield_now();
                    }
                }),
            )
            .emptying(path)
        }
    }
}

/// A file that counts the lines written to it (the non-blocking writer's
/// worker writes whole lines).
struct Lines {
    file: std::fs::File,
    lines: std::sync::Arc<AtomicU64>,
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        let nl = buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        self.lines.fetch_add(nl, Ordering::Release);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The table and the ratios of one workload's rounds (per subscriber).
fn report(rounds_of: &[Vec<Round>], kinds: usize, rounds: usize) {
    let times: Vec<Vec<f64>> = rounds_of
        .iter()
        .map(|v| v.iter().map(|r| r.total).collect())
        .collect();
    let of = |f: fn(&Round) -> f64| -> Vec<f64> {
        rounds_of
            .iter()
            .map(|v| median(&mut v.iter().map(f).collect::<Vec<_>>()))
            .collect()
    };
    let (med, finish, cpu) = (of(|r| r.total), of(|r| r.finish), of(|r| r.cpu));
    let registry = med[1];
    println!(
        "| subscriber | median time | added over the registry | of it, finishing | CPU time | CPU added | all rounds (s) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (k, name) in KINDS.iter().enumerate().take(kinds) {
        let (added, cpu_added) = if k >= 2 {
            (
                format!("{:.3} s", med[k] - registry),
                format!("{:.3} s", cpu[k] - cpu[1]),
            )
        } else {
            (String::new(), String::new())
        };
        let all: Vec<String> = times[k].iter().map(|t| format!("{t:.3}")).collect();
        println!(
            "| {name} | {:.3} s | {added} | {:.3} s | {:.3} s | {cpu_added} | {} |",
            med[k],
            finish[k],
            cpu[k],
            all.join(" ")
        );
    }
    let nano = med[2] - registry;
    println!(
        "nanolog's added cost / fmt JSON (BufWriter)'s: {:.3}; / fmt JSON (non_blocking)'s: {:.3}",
        nano / (med[3] - registry),
        nano / (med[4] - registry)
    );
    println!(
        "in CPU time: {:.3}; / non_blocking's: {:.3}",
        (cpu[2] - cpu[1]) / (cpu[3] - cpu[1]),
        (cpu[2] - cpu[1]) / (cpu[4] - cpu[1])
    );
    if kinds > NOOP {
        let noop = med[NOOP];
        println!(
            "over the registry with a no-op layer (closed spans freed, as under any layer): nanolog's added / fmt JSON (BufWriter)'s: {:.3}; in CPU time: {:.3}",
            (med[2] - noop) / (med[3] - noop),
            (cpu[2] - cpu[NOOP]) / (cpu[3] - cpu[NOOP])
        );
    }
    // Per round, side by side: the ratio of the added costs in each round.
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|r| {
            let reg = times[1][r];
            (times[2][r] - reg) / (times[3][r] - reg)
        })
        .collect();
    let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    println!(
        "per round (nanolog added / fmt JSON BufWriter added): {}; their median {:.3}",
        shown.join(" "),
        median(&mut ratios)
    );
}

fn main() {
    // `only NAME`: that subscriber's rounds alone (for a profiler; `only
    // noop` for the no-op layer's).
    let only = std::env::args()
        .skip_while(|a| a != "only")
        .nth(1)
        .and_then(|n| {
            if n == "noop" {
                return Some(NOOP);
            }
            KINDS.iter().position(|k| k.starts_with(&n))
        });
    let mut nums = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<u64>().ok());
    let requests = nums.next().unwrap_or(5_000);
    let rounds = nums.next().unwrap_or(30) as usize;
    let dir = std::env::temp_dir().join(format!("nanolog-service-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    // `compression none|fast|small`: the logger's (default: the builder's,
    // `small`), to see what compressing costs the service.
    let compression = match std::env::args()
        .skip_while(|a| a != "compression")
        .nth(1)
        .as_deref()
    {
        Some("none") => nanolog::Compression::None,
        Some("fast") => nanolog::Compression::Fast,
        _ => nanolog::Compression::Small,
    };
    // `workload today|span-heavy|both` (default: today's): with `both`,
    // each round serves both, each in the same rotation of subscribers, and
    // a report is printed for each.
    let workloads: Vec<Workload> = match std::env::args()
        .skip_while(|a| a != "workload")
        .nth(1)
        .as_deref()
    {
        Some("span-heavy") => vec![Workload::SpanHeavy],
        Some("both") => vec![Workload::Today, Workload::SpanHeavy],
        _ => vec![Workload::Today],
    };
    let logger = std::sync::Arc::new(
        nanolog::Logger::builder()
            .path(dir.join("service.nlog"))
            .filter("debug")
            .compression(compression)
            .start()
            .expect("the logger starts"),
    );

    if let Some(k) = only {
        let svc = service(k, &dir, &logger);
        for _ in 0..rounds {
            let t = svc.round(requests, workloads[0]);
            println!(
                "{}: {:.3} s (finishing {:.3} s), CPU {:.3} s",
                KINDS[k], t.total, t.finish, t.cpu
            );
        }
        drop(logger);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    // `noop`: the no-op layer's rounds too (not by default: a sixth
    // service in the rotation read the headline higher, 0.077-0.131 against
    // the five's 0.073-0.111 in 4 pairs in turn; the headline is the one
    // every earlier measurement reported).
    let kinds = if std::env::args().any(|a| a == "noop") {
        KINDS.len()
    } else {
        NOOP
    };
    // A warm-up of each, then the rounds, each in a rotated order.
    let services: Vec<Service> = (0..kinds).map(|k| service(k, &dir, &logger)).collect();
    for s in &services {
        for &w in &workloads {
            s.round(requests / 10, w);
        }
    }
    let logged_before = logger.stats().logged;
    let mut nanolog_events = 0;
    // Per workload, per subscriber, its rounds.
    let mut rounds_of: Vec<Vec<Vec<Round>>> = vec![vec![Vec::new(); kinds]; workloads.len()];
    let mut events_of = vec![0u64; workloads.len()];
    for r in 0..rounds {
        for (wi, &w) in workloads.iter().enumerate() {
            for j in 0..kinds {
                let k = (r + j) % kinds;
                let before = events();
                let t = services[k].round(requests, w);
                let made = events() - before;
                if k == 2 {
                    nanolog_events += made;
                }
                events_of[wi] += made;
                rounds_of[wi][k].push(t);
            }
        }
    }
    let stats = logger.stats();
    drop(services);
    drop(logger);
    let logged = stats.logged - logged_before;
    println!(
        "{requests} requests, {rounds} rounds; nanolog: {logged} logged of {nanolog_events} events, {} dropped",
        stats.dropped
    );
    for (wi, &w) in workloads.iter().enumerate() {
        let per_round = events_of[wi] / (rounds as u64 * kinds as u64).max(1);
        let name = match w {
            Workload::Today => "today's service",
            Workload::SpanHeavy => "the span-heavy service",
        };
        println!();
        println!("{name}: ~{per_round} events a round");
        report(&rounds_of[wi], kinds, rounds);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
