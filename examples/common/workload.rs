//! The benchmark workload shared by `examples/gen_log.rs` and
//! `benches/reader.rs`: half the paper's Figure 7 message, a quarter a static
//! message, a quarter a warning with two integers and a `{:.3}` float.

/// Logs `records` records of the mix from the calling thread, `worker` being
/// its number.
pub fn log_mixed(worker: u64, records: u64) {
    log_mixed_range(worker, 0..records);
}

/// Records `range` of [`log_mixed`]'s sequence.
pub fn log_mixed_range(worker: u64, range: std::ops::Range<u64>) {
    for i in range {
        match i % 4 {
            0 | 1 => nanolog::info!("Hello World # {}", i),
            2 => nanolog::info!("Starting backup replica garbage collector thread"),
            _ => nanolog::warn!(
                "request {} from worker {} took {:.3} ms",
                i,
                worker,
                (i % 1000) as f64 / 7.0
            ),
        }
    }
}

/// Logs `records` records of the mix from `threads` threads at once (each
/// its share), returning when all have logged.
#[allow(dead_code)] // Not every program that includes this file uses it.
pub fn log_mixed_threads(threads: u64, records: u64) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || log_mixed(t, records / threads));
        }
    });
}

/// Writes a log of `records` records of the mix from `threads` threads at
/// `path` (the benches' input).
#[allow(dead_code)] // Not every program that includes this file uses it.
pub fn write_log(path: &std::path::Path, threads: u64, records: u64) {
    let logger = nanolog::Logger::builder()
        .path(path)
        .start()
        .expect("start the logger");
    log_mixed_threads(threads, records);
    drop(logger);
}
