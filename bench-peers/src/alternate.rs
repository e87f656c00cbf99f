//! nanolog alternated run by run with other programs on the Table 3
//! messages, and the report of such a session split by core placement.
//!
//! ```text
//! alternate SECONDS OUT.csv [NAME=PROGRAM]...
//! alternate-report OUT.csv [CHART_DIR]
//! ```
//!
//! The host of the CI machine moves its two vCPUs between cores about 100 ns
//! apart (a cache-line round trip) and about 500 ns apart, for minutes at a
//! time, and a logger's rate depends on it: figures taken minutes apart are
//! not comparable. So a session alternates the loggers run by run, for
//! SECONDS, measuring the round trip before each run, and the report
//! compares them per round and per placement.
//!
//! A `PROGRAM` is run as `PROGRAM MESSAGE N PATH`: it makes N calls of the
//! Table 3 message from one thread into a log at PATH, and prints its rate
//! (M msg/s) as the last comma-separated field of its output. That is how
//! C++ NanoLog is measured here: a small driver built outside the
//! repository (nothing of C++ NanoLog is in it). nanolog runs through this
//! program's own `run nanolog MESSAGE throughput N PATH`, in a process of
//! its own like every run.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use plotters::style::RGBColor;

use crate::chart::{grouped_bars, Series};
use crate::common::{median, rtt};
use crate::MESSAGES;

/// A round trip at or above this (ns) counts as the "far" placement.
const FAR_NS: f64 = 200.0;

/// Calls a run: the issue's protocol uses 100 M / 20 M; these are a fifth
/// and a quarter of that, so that a session holds more rounds.
fn calls(message: &str) -> u64 {
    if message == "staticString" {
        20_000_000
    } else {
        5_000_000
    }
}

/// One run: M msg/s and bytes per call, or why it failed.
fn one(name: &str, program: Option<&str>, message: &str, path: &str) -> Result<(f64, f64), String> {
    let n = calls(message);
    let _ = std::fs::remove_file(path);
    let out = match program {
        None => Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .args([
                "run",
                "nanolog",
                message,
                "throughput",
                &n.to_string(),
                path,
            ])
            .output(),
        Some(p) => Command::new(p)
            .args([message, &n.to_string(), path])
            .output(),
    }
    .map_err(|e| format!("{name}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("").trim();
    if !out.status.success() {
        return Err(format!(
            "{name} {message}: {}; {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let fields: Vec<&str> = line.split(',').collect();
    let (mps, bytes) = match program {
        // logger,message,mode,n,p50,p99,p99.9,M/s,B/call,lossless
        None if fields.len() == 10 => {
            if fields[9] != "true" {
                return Err(format!("nanolog {message}: the log lost records"));
            }
            (fields[7].parse().ok(), fields[8].parse().ok())
        }
        None => (None, None),
        Some(_) => {
            let size = std::fs::metadata(path).map_or(0, |m| m.len());
            (
                fields.last().and_then(|f| f.trim().parse().ok()),
                Some(size as f64 / n as f64),
            )
        }
    };
    let _ = std::fs::remove_file(path);
    match (mps, bytes) {
        (Some(m), Some(b)) => Ok((m, b)),
        _ => Err(format!("{name} {message}: no rate in its output {line:?}")),
    }
}

/// `alternate SECONDS OUT.csv [NAME=PROGRAM]...`: rounds of every message,
/// each message run by nanolog and then by each program, until SECONDS
/// have passed. Rows `logger,message,mps,bytes_per_call,rtt_ns,round`,
/// written as they come.
pub fn run(seconds: u64, out_path: &str, others: &[String]) {
    let others: Vec<(&str, &str)> = others
        .iter()
        .map(|o| o.split_once('=').expect("NAME=PROGRAM"))
        .collect();
    let mut loggers: Vec<(&str, Option<&str>)> = vec![("nanolog", None)];
    loggers.extend(others.iter().map(|&(n, p)| (n, Some(p))));
    let mut out = std::fs::File::create(out_path).expect("the output file");
    writeln!(out, "logger,message,mps,bytes_per_call,rtt_ns,round").unwrap();
    let path = std::env::temp_dir().join(format!("alternate-{}.log", std::process::id()));
    let path = path.to_str().expect("a UTF-8 temporary path");
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut round = 0;
    while Instant::now() < end {
        round += 1;
        for message in MESSAGES {
            for &(name, program) in &loggers {
                let rtt = rtt();
                match one(name, program, message, path) {
                    Ok((mps, bytes)) => {
                        writeln!(out, "{name},{message},{mps:.3},{bytes:.2},{rtt:.0},{round}")
                            .unwrap();
                        out.flush().unwrap();
                    }
                    Err(e) => eprintln!("round {round}: {e}"),
                }
            }
        }
        println!("round {round} done");
    }
}

/// One row of a session.
struct Run {
    logger: String,
    message: String,
    mps: f64,
    bytes: f64,
    far: bool,
    round: u64,
}

/// The medians and per-round ratios of one placement.
struct Cell {
    /// Median M msg/s and bytes per call, by logger.
    rate: BTreeMap<String, (f64, f64)>,
    /// nanolog / other: median of the per-round ratios, rounds nanolog
    /// ahead, rounds compared.
    ratio: BTreeMap<String, (f64, usize, usize)>,
}

fn cell(runs: &[Run], message: &str, far: bool) -> Cell {
    let here: Vec<&Run> = runs
        .iter()
        .filter(|r| r.message == message && r.far == far)
        .collect();
    let mut rate = BTreeMap::new();
    let mut names: Vec<&str> = here.iter().map(|r| r.logger.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in &names {
        let of = |f: fn(&Run) -> f64| {
            median(
                here.iter()
                    .filter(|r| r.logger == *name)
                    .map(|r| f(r))
                    .collect(),
            )
        };
        if let (Some(m), Some(b)) = (of(|r| r.mps), of(|r| r.bytes)) {
            rate.insert(name.to_string(), (m, b));
        }
    }
    let mut ratio = BTreeMap::new();
    for name in names.iter().filter(|n| **n != "nanolog") {
        // A round counts where both ran in this placement.
        let ratios: Vec<f64> = here
            .iter()
            .filter(|r| r.logger == "nanolog")
            .filter_map(|ours| {
                let theirs = here
                    .iter()
                    .find(|r| r.logger == *name && r.round == ours.round)?;
                Some(ours.mps / theirs.mps)
            })
            .collect();
        let ahead = ratios.iter().filter(|&&x| x > 1.0).count();
        let n = ratios.len();
        if let Some(m) = median(ratios) {
            ratio.insert(name.to_string(), (m, ahead, n));
        }
    }
    Cell { rate, ratio }
}

/// `alternate-report OUT.csv [CHART_DIR]`: per message and placement, the
/// median rates, the median per-round ratio of nanolog to each other
/// logger and the rounds nanolog was ahead (a markdown table); with a
/// directory, the chart `side-by-side.svg` of the medians.
pub fn report(csv: &str, dir: Option<&str>) {
    let text = std::fs::read_to_string(csv).expect("read the session");
    let runs: Vec<Run> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let [logger, message, mps, bytes, rtt, round] = f[..] else {
                return None;
            };
            Some(Run {
                logger: logger.to_owned(),
                message: message.to_owned(),
                mps: mps.parse().ok()?,
                bytes: bytes.parse().ok()?,
                far: rtt.parse::<f64>().ok()? >= FAR_NS,
                round: round.parse().ok()?,
            })
        })
        .collect();
    let mut others: Vec<&str> = runs
        .iter()
        .map(|r| r.logger.as_str())
        .filter(|l| *l != "nanolog")
        .collect();
    others.sort_unstable();
    others.dedup();
    // Each message and placement's cell, computed once for table and chart.
    let cells: BTreeMap<(&str, bool), Cell> = MESSAGES
        .iter()
        .flat_map(|m| [false, true].map(|far| ((*m, far), cell(&runs, m, far))))
        .collect();
    let rounds = runs.iter().map(|r| r.round).max().unwrap_or(0);
    let far_runs = runs.iter().filter(|r| r.far).count();
    println!(
        "{rounds} rounds, {} runs: {} with the cores near (round trip < {FAR_NS} ns), {far_runs} far\n",
        runs.len(),
        runs.len() - far_runs
    );
    for other in &others {
        println!(
            "| message | cores | nanolog M/s | {other} M/s | nanolog / {other} (rounds ahead) | B/call nanolog ({other}) |"
        );
        println!("|---|---|---|---|---|---|");
        for message in MESSAGES {
            for (far, label) in [(false, "near"), (true, "far")] {
                let c = &cells[&(message, far)];
                let (Some(ours), Some(theirs)) = (c.rate.get("nanolog"), c.rate.get(*other)) else {
                    continue;
                };
                let ratio = c
                    .ratio
                    .get(*other)
                    .map_or("-".to_owned(), |(m, a, n)| format!("{m:.2} ({a} of {n})"));
                println!(
                    "| {message} | {label} | {:.1} | {:.1} | {ratio} | {:.2} ({:.2}) |",
                    ours.0, theirs.0, ours.1, theirs.1
                );
            }
        }
        println!();
    }
    let Some(dir) = dir else { return };
    std::fs::create_dir_all(dir).expect("chart directory");
    let path = format!("{dir}/side-by-side.svg");
    let mut series: Vec<Series<'_>> = Vec::new();
    let shades = [
        (false, RGBColor(150, 150, 150), RGBColor(240, 120, 110)),
        (true, RGBColor(80, 80, 80), RGBColor(190, 30, 30)),
    ];
    let cells = &cells;
    for (far, theirs, ours) in shades {
        let placement = if far { "far" } else { "near" };
        for other in &others {
            let other = other.to_string();
            series.push((
                format!("{other}, cores {placement}"),
                theirs,
                Box::new(move |m| cells.get(&(m, far))?.rate.get(&other).map(|r| r.0)),
            ));
        }
        series.push((
            format!("nanolog, cores {placement}"),
            ours,
            Box::new(move |m| cells.get(&(m, far))?.rate.get("nanolog").map(|r| r.0)),
        ));
    }
    grouped_bars(
        &path,
        "Alternated run by run, medians by core placement (M msg/s, higher is better)",
        &series,
        None,
    )
    .expect("draw chart");
    eprintln!("wrote {path}");
}
