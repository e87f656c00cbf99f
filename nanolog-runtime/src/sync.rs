//! The std/loom seam: atomics, locks and the waits of the staging ring and
//! of the logger's stop and flush handshakes, so a `RUSTFLAGS="--cfg loom"`
//! build can swap in loom's model-checked types.
//!
//! The waits matter as much as the types: under loom every thread runs on
//! one OS thread, so a spin or a park must be a loom yield, or the model
//! would hang instead of exploring the other threads.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex};

/// A busy-wait hint.
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Lets other threads run.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Sleeps until unparked or `d` has passed (a yield under loom).
#[inline]
pub(crate) fn park_timeout(d: std::time::Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    std::thread::park_timeout(d);
}
