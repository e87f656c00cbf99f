//! What the service benchmarks (`benches/otel_cost.rs`,
//! `nanolog-cli/benches/service_cost.rs`, `bench-otlp/`) measure with: the process's CPU
//! time, the median of rounds, and fmt's shared `BufWriter` of a file.

use std::io::Write;

/// The CPU time the process has used (user and system, all threads).
pub fn cpu_time() -> f64 {
    cpu_time_of(libc::RUSAGE_SELF)
}

/// The CPU time of `who`: this process (`RUSAGE_SELF`), or its children
/// it waited for (`RUSAGE_CHILDREN`), user and system, all threads.
pub fn cpu_time_of(who: libc::c_int) -> f64 {
    // SAFETY: `getrusage` writes the struct it is given, which is a valid,
    // zeroed `rusage` owned by this frame.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// The median of `v` (sorted in place); NaN for no values.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A `BufWriter` of a file shared by the threads, as fmt's `with_writer`
/// takes it (flushed by whoever ends a round).
pub struct Locked(pub std::sync::Arc<std::sync::Mutex<std::io::BufWriter<std::fs::File>>>);

impl Write for Locked {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
