//! Writes a benchmark log: `cargo run --release --example gen_log -- PATH THREADS TOTAL`
//! (`NANOLOG_GEN_PACE_US=N`: paced, see below, `NANOLOG_GEN_BATCH=N`
//! records between pauses, 1,000 unless said; `NANOLOG_GEN_COMPRESS=0`: no
//! compressed batches, to compare the same log's two forms;
//! `NANOLOG_GEN_ROTATE_MB=N`: a set of files of about N MB each;
//! `NANOLOG_GEN_ERROR_EVERY=N`: every Nth record of a thread is an error,
//! in place of the mix's, as a service's rare errors among its traffic;
//! `NANOLOG_GEN_TRACE_EVERY=N`: every N records of a thread in a span of
//! a trace of their own).
//! Each thread logs TOTAL/THREADS records of the mix in `common/workload.rs`.

#[path = "common/workload.rs"]
mod workload;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "bench.nlog".into());
    let threads: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4);
    let total: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000_000);
    let compress = std::env::var("NANOLOG_GEN_COMPRESS").map_or(true, |v| v != "0");
    let mut builder = nanolog::Logger::builder().path(&path).compress(compress);
    if let Some(mb) = std::env::var("NANOLOG_GEN_ROTATE_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        builder = builder.rotate_bytes(mb << 20);
    }
    let logger = builder.start()?;
    let error_every = std::env::var("NANOLOG_GEN_ERROR_EVERY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0);
    // NANOLOG_GEN_PACE_US=N: each thread pauses N µs after every 1,000
    // records (NANOLOG_GEN_BATCH), so the flusher keeps up and compresses
    // its batches (a service's pace); without it the threads log flat out.
    let batch: u64 = std::env::var("NANOLOG_GEN_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1000);
    match std::env::var("NANOLOG_GEN_PACE_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(us) => std::thread::scope(|s| {
            for t in 0..threads {
                spawn(s, t, move || {
                    let n = total / threads;
                    for from in (0..n).step_by(batch as usize) {
                        log_range(t, from..(from + batch).min(n), error_every);
                        std::thread::sleep(std::time::Duration::from_micros(us));
                    }
                });
            }
        }),
        None => std::thread::scope(|s| {
            for t in 0..threads {
                spawn(s, t, move || log_range(t, 0..total / threads, error_every));
            }
        }),
    }
    logger.flush()?;
    let s = logger.stats();
    println!(
        "{}: {} records from {threads} threads, {} bytes",
        path, s.logged, s.bytes_written
    );
    Ok(())
}

/// Records `range` of thread `worker`'s sequence: the mix, or with every
/// `error_every`th record an error in its place; with
/// `NANOLOG_GEN_TRACE_EVERY=N`, each run of N records in a span of a trace
/// of its own (`trace_id`, `span_id` fields: W3C ids, `trace_of`).
fn log_range(worker: u64, range: std::ops::Range<u64>, error_every: Option<u64>) {
    if let Some(n) = trace_every() {
        let mut i = range.start;
        while i < range.end {
            let to = ((i / n + 1) * n).min(range.end);
            let (trace, span) = trace_of(worker, i / n);
            let _s = nanolog::span!(
                "request",
                trace_id = trace.as_str(),
                span_id = span.as_str()
            );
            log_plain(worker, i..to, error_every);
            i = to;
        }
        return;
    }
    log_plain(worker, range, error_every);
}

/// `NANOLOG_GEN_TRACE_EVERY`, once.
fn trace_every() -> Option<u64> {
    static N: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("NANOLOG_GEN_TRACE_EVERY")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
    })
}

/// The W3C ids (hex) of thread `worker`'s `k`-th traced run: `nanolog
/// decode --trace` of `trace_of(w, k).0` picks it.
fn trace_of(worker: u64, k: u64) -> (String, String) {
    let x = ((u128::from(worker) << 64) | (u128::from(k) + 1))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    (format!("{x:032x}"), format!("{:016x}", x as u64 | 1))
}

/// [`log_range`] without traces.
fn log_plain(worker: u64, range: std::ops::Range<u64>, error_every: Option<u64>) {
    let Some(every) = error_every else {
        return workload::log_mixed_range(worker, range);
    };
    for i in range {
        if i % every == every - 1 {
            nanolog::error!("request {} from worker {} failed: {}", i, worker, "timeout");
        } else {
            workload::log_mixed_range(worker, i..i + 1);
        }
    }
}

/// Starts logging thread `t`, named `gen-T` (as a service names its
/// workers: `decode --thread gen-2` picks one).
fn spawn<'s>(s: &'s std::thread::Scope<'s, '_>, t: u64, f: impl FnOnce() + Send + 's) {
    std::thread::Builder::new()
        .name(format!("gen-{t}"))
        .spawn_scoped(s, f)
        .expect("a thread");
}
