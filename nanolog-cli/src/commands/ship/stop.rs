//! SIGTERM and SIGINT end `ship` cleanly: the handler only sets a flag;
//! the followers see it between batches (and the client between tries),
//! stop with the cursor at the last batch the collector accepted, and the
//! summary is printed.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// A signal asked ship to stop.
#[derive(Debug)]
pub(crate) struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped by a signal")
    }
}

impl std::error::Error for Stopped {}

/// Whether a signal asked ship to stop.
pub(crate) fn requested() -> bool {
    // Relaxed: a flag polled between batches; nothing else is published
    // through it.
    STOP.load(Ordering::Relaxed)
}

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler of SIGTERM and SIGINT.
pub(crate) fn install() {
    #[cfg(unix)]
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction is a valid value of the C struct; the
        // handler is an `extern "C"` function that only stores to an
        // atomic (async-signal-safe); `sigemptyset` and `sigaction` get
        // pointers to that local struct, valid for the calls.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
