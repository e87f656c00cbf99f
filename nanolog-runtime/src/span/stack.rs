//! The calling thread's side of spans: its stack of entered spans (as
//! tracing's registry keeps it, one for every dispatcher, each entry
//! tagged with its owner), the key current on it, and the records that
//! tell its ring of a `nanolog::span!` or of a record made elsewhere than
//! the thread's current span.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::encode::Encode;
use crate::producer::{self, current, switch_id};
use crate::site::Site;
use crate::wire::format::ArgKind;

/// The site of every `nanolog::span!` exit: the span's key, then the key of
/// the span current again (its guard's predecessor).
static EXIT: Site = Site::span_exit();

thread_local! {
    /// The spans entered on this thread and not exited, innermost last, as
    /// tracing's registry keeps its stack (one stack for every dispatcher,
    /// each entry tagged with its owner). A span entered twice is in it
    /// twice, the second entry a duplicate that does not change the current
    /// span; an exit takes out the innermost entry of its span, wherever it
    /// is.
    static STACK: std::cell::RefCell<Vec<Entry>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// This thread's block of span keys: (next, end).
    static KEYS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The owner of the span current on this thread ([`NATIVE`] when
    /// none): while it is the layer asking, or a `nanolog::span!`, that
    /// layer's current span is the thread's, read without the stack.
    static CURRENT_OWNER: Cell<u64> = const { Cell::new(NATIVE) };
}

/// One span entered on this thread.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Whose span: [`NATIVE`] for a `nanolog::span!`, else the nanolog
    /// layer (one per subscriber: see `tracing_enter`) that saw it entered.
    owner: u64,
    /// The `tracing` span id in its owner's registry (ids of two registries
    /// may be equal); [`LOST`] for a `nanolog::span!` whose entry the log
    /// does not have.
    id: u64,
    key: u64,
    /// Entered again while already in the stack (tracing's duplicate
    /// entry): current only as its first entry is.
    duplicate: bool,
}

impl Entry {
    /// Whether records made while it is innermost are in it.
    fn shown(&self) -> bool {
        self.id != LOST && !self.duplicate
    }
}

/// The owner of a `nanolog::span!` in the thread's stack.
pub(crate) const NATIVE: u64 = 0;
/// A `nanolog::span!` whose entry the log does not have (its ring was full,
/// or no logger ran): not current, records inside it are in its parent's
/// scope. (tracing's span ids are `NonZeroU64`s from its slab, far below.)
const LOST: u64 = u64::MAX;

/// Span keys are unique in the process (never reused, unlike `tracing`'s
/// span ids): each thread takes a block of this many at a time.
const KEY_BLOCK: u64 = 1024;
/// The start of the next block of keys (0 is no span).
static NEXT_KEYS: AtomicU64 = AtomicU64::new(1);

/// A new span key, unique in the process.
#[doc(hidden)]
#[inline]
pub fn span_key() -> u64 {
    // Relaxed: the counter only hands out disjoint ranges; nothing else is
    // published through it.
    KEYS.try_with(|k| {
        let (next, end) = k.get();
        if next < end {
            k.set((next + 1, end));
            next
        } else {
            let start = NEXT_KEYS.fetch_add(KEY_BLOCK, Ordering::Relaxed);
            k.set((start + 1, start + KEY_BLOCK));
            start
        }
    })
    .unwrap_or_else(|_| NEXT_KEYS.fetch_add(1, Ordering::Relaxed))
}

/// The key of the span current on this thread for the `tracing` layer
/// `owner`: the innermost span of its subscriber or a `nanolog::span!`,
/// never one of another subscriber (a scoped dispatcher's spans are not
/// the global one's). Equal to [`current`] but where two subscribers' spans
/// are entered on one thread.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
#[inline]
pub(crate) fn current_for(owner: u64) -> u64 {
    let top = CURRENT_OWNER.try_with(Cell::get).unwrap_or(NATIVE);
    if top == owner || top == NATIVE {
        // The innermost shown entry is this owner's or a native one: the
        // one the search below would find first.
        return current();
    }
    current_for_scan(owner)
}

#[cold]
#[inline(never)]
fn current_for_scan(owner: u64) -> u64 {
    STACK
        .try_with(|s| {
            let Ok(s) = s.try_borrow() else {
                return current();
            };
            s.iter()
                .rev()
                .find(|e| e.shown() && (e.owner == owner || e.owner == NATIVE))
                .map_or(0, |e| e.key)
        })
        .unwrap_or(0)
}

/// Changes this thread's stack of spans with `f`, then makes its top
/// current; returns (whether the current span changed, the current key).
fn with_stack(f: impl FnOnce(&mut Vec<Entry>)) -> (bool, u64) {
    STACK
        .try_with(|s| {
            let Ok(mut s) = s.try_borrow_mut() else {
                return (false, current());
            };
            f(&mut s);
            let (top, owner) = s
                .iter()
                .rev()
                .find(|e| e.shown())
                .map_or((0, NATIVE), |e| (e.key, e.owner));
            let _ = CURRENT_OWNER.try_with(|o| o.set(owner));
            let old = producer::replace_current(top);
            (old != top, top)
        })
        .unwrap_or((false, 0))
}

/// Writes a switch to `key` for the record about to be made, whose scope is
/// not the thread's (an event with an explicit parent, or of another
/// subscriber): a thread without a ring yet takes one first, so the switch
/// precedes its first record too. The thread's own context is stated again
/// before its next record ([`producer::context_changed`]).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
#[inline]
pub(crate) fn switch_for_record(key: u64) {
    producer::log_context(switch_id(), key.ring_len(), true, key, |c| {
        key.write(c);
    });
}

/// The registered id of the `nanolog::span!` exit site.
pub(crate) fn exit_id() -> u32 {
    EXIT.id_dyn(&[ArgKind::U64, ArgKind::U64])
}

/// A `tracing` span (`id` in the registry of the layer `owner`, our
/// `key`) entered on this thread: on top of its stack, current here unless
/// it is in the stack already (as tracing's registry has it, entering an
/// entered span again leaves the current span as it was).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn tracing_enter(owner: u64, id: u64, key: u64) {
    let (changed, _) = with_stack(|s| {
        let duplicate = s.iter().any(|e| e.owner == owner && e.id == id);
        s.push(Entry {
            owner,
            id,
            key,
            duplicate,
        });
    });
    if changed {
        producer::context_changed();
    }
}

/// A `tracing` span exited on this thread: as its registry does, the
/// innermost entry of `id` (of the layer `owner`) leaves the stack (none:
/// it was entered on another thread, and nothing changes here); the span
/// current is the stack's top after it.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn tracing_exit(owner: u64, id: u64) {
    let (changed, _) = with_stack(|s| {
        if let Some(i) = s.iter().rposition(|e| e.owner == owner && e.id == id) {
            s.remove(i);
        }
    });
    if changed {
        producer::context_changed();
    }
}

/// A `nanolog::span!` entered on this thread until it is dropped.
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
    /// The span `key` (its record just written, its parent the span
    /// current until now) becomes current on this thread.
    #[doc(hidden)]
    #[inline(always)]
    pub fn entered(key: u64) -> SpanGuard {
        let lost = producer::take_entry_lost();
        with_stack(|s| {
            s.push(Entry {
                owner: NATIVE,
                id: if lost { LOST } else { NATIVE },
                key,
                duplicate: false,
            })
        });
        SpanGuard {
            key,
            _thread: PhantomData,
        }
    }
}

impl Drop for SpanGuard {
    /// Out of the thread's stack (wherever it is in it: guards may be
    /// dropped in any order); the stack's top is current after it.
    #[inline]
    fn drop(&mut self) {
        let key = self.key;
        let (_, top) = with_stack(|s| {
            if let Some(i) = s.iter().rposition(|e| e.key == key && e.owner == NATIVE) {
                s.remove(i);
            }
        });
        let len = key.ring_len() + top.ring_len();
        if !producer::log_context(exit_id(), len, false, top, |c| {
            top.write(key.write(c));
        }) {
            producer::context_changed();
        }
    }
}
