//! nanolog side by side with the Rust loggers of its field, on the NanoLog
//! paper's Table 3 messages, every logger writing a file with lossless
//! settings (a full queue blocks, nothing is dropped), line counts checked.
//!
//! ```text
//! cargo run --release -- all [SCALE]       # every logger, message and mode; writes results.csv
//! cargo run --release -- chart results.csv ../benches/charts
//! cargo run --release -- table3-chart ../benches/results/table3.txt ../benches/charts
//! cargo run --release -- run LOGGER MESSAGE latency|throughput N PATH
//! cargo run --release -- rtt               # the cores' cache-line round trip now
//! cargo run --release -- alternate SECONDS OUT.csv [NAME=PROGRAM]...   # see alternate.rs
//! cargo run --release -- alternate-report OUT.csv [CHART_DIR]
//! ```
//!
//! Each (logger, message, mode) runs in a process of its own: several of
//! the peers can be set up once per process only (`log`'s global logger,
//! ticklog), and none then carries state into the next measurement.
//!
//! - latency: `N` warm-up calls, then `N` calls each timed with the TSC
//!   (`rdtsc` pairs, the median empty pair subtracted), a 100 ns busy-wait
//!   between calls, nearest-rank percentiles;
//! - throughput: `N` calls from one thread as fast as possible, timed from
//!   the first call until the logger has handed everything to the OS (its
//!   flush returns, or its guard is dropped and its writer thread joined).
//!
//! Afterwards the file must hold exactly the calls made (text lines; for
//! nanolog, records read back), else the run is reported as lossy.

// The timing helpers and the Table 3 calls of `benches/table3.rs`.
#[macro_use]
#[path = "../../benches/common/mod.rs"]
mod common;
mod alternate;
mod chart;
mod peers;

use common::{empty_tsc_pair, nearest_rank, print_rtt, rtt, timed_calls};

use std::io::Write;
use std::process::Command;
use std::time::Instant;

/// The loggers, in the order of the tables.
pub const LOGGERS: [&str; 8] = [
    "nanolog",
    "ticklog",
    "spdlog-rs",
    "ftlog",
    "fast_log",
    "slog-async",
    "tracing-appender",
    "bufwriter",
];

/// The paper's Table 3 messages, in the order of their calls.
pub const MESSAGES: [&str; 6] = common::TABLE3;

/// Sets up ticklog (here, at the crate root: its `configure!` defines the
/// helper macros its logging macros call, and they resolve only here).
pub fn ticklog_start(path: &str) -> ticklog::Guard {
    ticklog::configure! {
        sink: ticklog::FileSink::truncate(path).expect("ticklog file"),
        backpressure: ticklog::Backpressure::Block,
    }
    .expect("ticklog")
}

macro_rules! ticklog_info {
    ($($t:tt)*) => { ticklog::info!($($t)*) };
}

/// The six calls through ticklog's macro.
pub fn ticklog_ops() -> peers::Ops {
    table3_calls!(ticklog_info)
}

/// One measurement's result line.
struct Row {
    logger: String,
    message: String,
    mode: String,
    n: u64,
    p50: f64,
    p99: f64,
    p999: f64,
    mps: f64,
    bytes_per_call: f64,
    lossless: bool,
}

impl Row {
    const HEADER: &'static str =
        "logger,message,mode,calls,p50_ns,p99_ns,p999_ns,m_calls_per_s,bytes_per_call,lossless";

    fn csv(&self) -> String {
        format!(
            "{},{},{},{},{:.1},{:.1},{:.1},{:.3},{:.2},{}",
            self.logger,
            self.message,
            self.mode,
            self.n,
            self.p50,
            self.p99,
            self.p999,
            self.mps,
            self.bytes_per_call,
            self.lossless
        )
    }
}

fn ticks_per_ns() -> f64 {
    nanolog_runtime::clock::ticks_per_second() / 1e9
}

/// `run LOGGER MESSAGE MODE N PATH`: one measurement in this process.
fn run(logger: &str, message: &str, mode: &str, n: u64, path: &str) -> Row {
    let msg_ix = MESSAGES
        .iter()
        .position(|m| *m == message)
        .unwrap_or_else(|| panic!("unknown message {message}"));
    let _ = std::fs::remove_file(path);
    let mut p = peers::start(logger, path);
    let op = p.ops()[msg_ix];
    let per_ns = ticks_per_ns();
    let mut row = Row {
        logger: logger.into(),
        message: message.into(),
        mode: mode.into(),
        n,
        p50: 0.0,
        p99: 0.0,
        p999: 0.0,
        mps: 0.0,
        bytes_per_call: 0.0,
        lossless: false,
    };
    let calls;
    if mode == "latency" {
        let overhead = empty_tsc_pair(100_000);
        op(n);
        let wait = (100.0 * per_ns) as u64;
        let lat = timed_calls(n as usize, wait, overhead, || op(1));
        let ns = |t: u64| t as f64 / per_ns;
        row.p50 = ns(nearest_rank(&lat, 50.0));
        row.p99 = ns(nearest_rank(&lat, 99.0));
        row.p999 = ns(nearest_rank(&lat, 99.9));
        p.finish();
        calls = 2 * n;
    } else {
        let t = Instant::now();
        op(n);
        p.finish();
        row.mps = n as f64 / t.elapsed().as_secs_f64() / 1e6;
        calls = n;
    }
    p.close();
    let written = p.count(path);
    row.lossless = written == calls;
    if !row.lossless {
        eprintln!("{logger} {message} {mode}: {written} of {calls} calls in the file");
    }
    row.bytes_per_call = std::fs::metadata(path).map_or(0, |m| m.len()) as f64 / calls as f64;
    let _ = std::fs::remove_file(path);
    row
}

/// `all [SCALE]`: every logger, message and mode, each in its own process.
fn all(scale: u64) {
    let exe = std::env::current_exe().expect("own path");
    let dir = std::env::temp_dir();
    let mut out = std::fs::File::create("results.csv").expect("results.csv");
    writeln!(out, "{}", Row::HEADER).unwrap();
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(
                |c| c.lines().find(|l| l.starts_with("model name")).map(|l| l
                    .split(':')
                    .nth(1)
                    .unwrap_or("")
                    .trim()
                    .to_owned())
            )
            .unwrap_or_default()
    );
    print_rtt("start");
    println!(
        "{:<17} {:<14} {:>7} {:>7} {:>8} {:>10} {:>8} {:>8}",
        "logger", "message", "p50 ns", "p99 ns", "p99.9 ns", "M calls/s", "B/call", "lossless"
    );
    for message in MESSAGES {
        for logger in LOGGERS {
            let mut cells = Vec::new();
            for (mode, n) in [
                ("latency", 200_000 / scale),
                ("throughput", 2_000_000 / scale),
            ] {
                let path = dir.join(format!("peers-{logger}-{}.log", std::process::id()));
                let o = Command::new(&exe)
                    .args([
                        "run",
                        logger,
                        message,
                        mode,
                        &n.to_string(),
                        path.to_str().unwrap(),
                    ])
                    .output()
                    .expect("run a measurement");
                let line = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if !o.status.success() || line.is_empty() {
                    eprintln!(
                        "{logger} {message} {mode} failed: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                    continue;
                }
                writeln!(out, "{line}").unwrap();
                cells.push(line);
            }
            let f = |s: &str, i: usize| s.split(',').nth(i).unwrap_or("").to_owned();
            if let [lat, thr] = &cells[..] {
                println!(
                    "{:<17} {:<14} {:>7} {:>7} {:>8} {:>10} {:>8} {:>8}",
                    logger,
                    message,
                    f(lat, 4),
                    f(lat, 5),
                    f(lat, 6),
                    f(thr, 7),
                    f(thr, 8),
                    f(lat, 9) == "true" && f(thr, 9) == "true"
                );
            }
        }
    }
    print_rtt("end");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["run", logger, message, mode, n, path] => {
            let row = run(logger, message, mode, n.parse().expect("N"), path);
            println!("{}", row.csv());
        }
        ["rtt"] => println!("cache-line round trip between two threads: {:.0} ns", rtt()),
        ["all"] => all(1),
        ["all", scale] => all(scale.parse().expect("SCALE")),
        ["chart", csv, dir] => chart::write_all(csv, dir),
        ["table3-chart", txt, dir] => chart::write_table3(txt, dir),
        ["alternate", seconds, out, others @ ..] => {
            let others: Vec<String> = others.iter().map(|o| o.to_string()).collect();
            alternate::run(seconds.parse().expect("SECONDS"), out, &others)
        }
        ["alternate-report", csv] => alternate::report(csv, None),
        ["alternate-report", csv, dir] => alternate::report(csv, Some(dir)),
        _ => {
            eprintln!(
                "usage: all [SCALE] | chart CSV DIR | table3-chart TXT DIR | run LOGGER MESSAGE MODE N PATH | rtt\n       \
                 | alternate SECONDS OUT.csv [NAME=PROGRAM]... | alternate-report CSV [DIR]"
            );
            std::process::exit(2);
        }
    }
}
