//! Spans as context (Log4j 2's ThreadContext, tracing's spans): entering a
//! span writes one record of the span's site (its fields, then its key) to
//! the thread's ring, exiting it one record of [`EXIT`] naming the key. The
//! flusher keeps each thread's stack of entered spans and tells the file
//! which context the thread's records are in; a record itself carries
//! nothing more, so a record inside spans costs what one outside costs.

use std::cell::Cell;
use std::marker::PhantomData;

use crate::encode::Encode;
use crate::producer;
use crate::site::Site;
use crate::wire::format::ArgKind;

/// The site of every `nanolog::span!` exit: one `u64` argument, the span's key.
static EXIT: Site = Site::span_exit();

/// The site of every `tracing` span exit: its key is the span's id.
static EXIT_TRACING: Site = Site::span_exit().with_tracing_keys();

thread_local! {
    /// The keys of this thread's `nanolog::span!` guards, counted up.
    static NEXT_KEY: Cell<u64> = const { Cell::new(0) };
}

/// A new key for a span of this thread: counted up from 1, so it takes a
/// byte or three in the file. `tracing` span ids, the other keys on a
/// thread's stack, may have the same values: their sites say which they
/// are (see `Site::tracing_keys`), so the two never match one another.
#[doc(hidden)]
#[inline(always)]
pub fn span_key() -> u64 {
    NEXT_KEY
        .try_with(|k| {
            let v = k.get().wrapping_add(1);
            k.set(v);
            v
        })
        .unwrap_or(0)
}

/// Writes the exit of the span `key` on this thread (`tracing`: a `tracing`
/// span's id).
#[inline]
pub(crate) fn exit(key: u64, tracing: bool) {
    let site = if tracing { &EXIT_TRACING } else { &EXIT };
    let id = site.id_dyn(&[ArgKind::U64]);
    producer::log_id(id, key.ring_len(), |c| {
        key.write(c);
    });
}

/// A span entered on this thread by `nanolog::span!`, until it is dropped.
///
/// Records this thread makes while it lives carry the span (outermost
/// first when spans nest): `decode` prints `request{id=7}: ` before their
/// message, and JSON and export list it under `spans`. The guard belongs to
/// the thread that entered the span (it is neither `Send` nor `Sync`).
#[must_use = "the span is exited when the guard is dropped: bind it, `let _s = span!(..);`"]
#[derive(Debug)]
pub struct SpanGuard {
    key: u64,
    /// Entered on this thread, exited on it.
    _thread: PhantomData<*const ()>,
}

impl SpanGuard {
    #[doc(hidden)]
    #[inline(always)]
    pub fn entered(key: u64) -> SpanGuard {
        SpanGuard {
            key,
            _thread: PhantomData,
        }
    }
}

impl Drop for SpanGuard {
    #[inline]
    fn drop(&mut self) {
        exit(self.key, false);
    }
}
