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

/// Loom's view of the staging ring's bytes. The bytes themselves are raw
/// memory (a `UnsafeCell` per byte would change the hot path); under loom
/// `word`-byte word (the ring's record alignment: records start on that
/// boundary, so two records never share a word) also has a `loom::cell::UnsafeCell<()>` that the
/// producer marks written when it fills a record and the consumer marks
/// read when it reads one. Loom then checks that every read happens after
/// the write it reads, and every write after the last read of the old bytes:
/// exactly what the Release/Acquire pairs on `tail` and `head` promise, so
/// weakening one of them fails the models. Absent (zero-sized) otherwise.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Shadow {
    cells: Box<[loom::cell::UnsafeCell<()>]>,
    word: usize,
}

#[cfg(loom)]
impl Shadow {
    pub(crate) fn new(bytes: usize, word: usize) -> Shadow {
        Shadow {
            cells: (0..bytes.div_ceil(word))
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
            word,
        }
    }

    /// The producer writes `[off, off + len)`.
    pub(crate) fn write(&self, off: usize, len: usize) {
        for w in off / self.word..(off + len).div_ceil(self.word) {
            self.cells[w].with_mut(|_| {});
        }
    }

    /// The consumer reads `[off, off + len)`.
    pub(crate) fn read(&self, off: usize, len: usize) {
        for w in off / self.word..(off + len).div_ceil(self.word) {
            self.cells[w].with(|_| {});
        }
    }
}

#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct Shadow;

#[cfg(not(loom))]
impl Shadow {
    #[inline(always)]
    pub(crate) fn new(_: usize, _: usize) -> Shadow {
        Shadow
    }
    #[inline(always)]
    pub(crate) fn write(&self, _: usize, _: usize) {}
    #[inline(always)]
    pub(crate) fn read(&self, _: usize, _: usize) {}
}
