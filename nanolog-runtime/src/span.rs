//! Spans as context, with tracing's meaning: every span has a parent (the
//! explicit one, else the span current on the thread where it was made),
//! and a record is in the scope of one span, its leaf, from which the
//! chain to the root is followed.
//!
//! The calling thread keeps which span is current on it (a key) and tells
//! its ring only when a record is made in another span than the ring's
//! last (a *switch*, one `u64`, ahead of the record): a record itself
//! carries nothing, so a record inside spans costs what one outside costs,
//! and spans entered and exited between two records (a task polled with
//! nothing to log) cost the ring nothing.
//! A span's definition (site, fields, parent) is given once:
//!
//! - a `nanolog::span!` writes its fields to its own thread's ring when it
//!   is entered (its parent is the thread's current span then), and its
//!   exit names the span it restores;
//! - a `tracing` span's definition goes into the process's [`table`] when
//!   it is made, with a new version (and its tick) whenever a value is
//!   recorded into it, so that every thread's records see it from then on.
//!
//! The flusher follows each thread's switches, resolves the chain of its
//! leaf at the tick of each record, and writes the SPAN entries a file
//! needs before their first use (see `flusher.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

/// A `tracing` span's definition, as the flusher reads it: its site, its
/// parent's key and its versions (a value recorded makes a new one).
#[derive(Debug, Clone)]
pub(crate) struct Def {
    pub(crate) parent: u64,
    /// Most spans keep one: inline, no allocation.
    pub(crate) versions: smallvec::SmallVec<[Version; 1]>,
}

/// One state of a span's fields, from `tick` on (the first's is 0).
#[derive(Debug, Clone)]
pub(crate) struct Version {
    pub(crate) tick: u64,
    /// The span site of the fields' kinds.
    pub(crate) site: u32,
    /// The fields, then the key, as the ring holds them.
    pub(crate) raw: Arc<[u8]>,
}

/// The most versions a span keeps. The flusher forgets the versions no
/// record can need any more (see `Table::prune`); a span whose values are
/// recorded faster than that keeps its first and latest ones (a record
/// logged before the versions dropped shows the first's values).
pub(crate) const MAX_VERSIONS: usize = 1024;

/// A version is needed while a record of a tick before its successor's may
/// still come: records are drained within a pass, but a producer waiting
/// for room keeps the tick of its call. Versions followed by one this much
/// older than the flusher's pass are forgotten.
pub(crate) const VERSION_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// A hasher for span keys: unique integers handed out in blocks, so one
/// multiplication spreads them (SipHash, the default, cost the flusher and
/// the calling threads a few percent of a service's time).
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map by span key.
pub(crate) type KeyMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// The `tracing` spans alive in the process, by key (`nanolog::span!`'s
/// are defined through their thread's ring instead): one shard of them
/// (see [`table`]).
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) spans: KeyMap<Def>,
    /// Spans closed since the flusher last looked: it forgets them once
    /// every record logged before the close has been written.
    pub(crate) closed: Vec<u64>,
    /// Spans given a new version since the flusher last looked (`None`:
    /// too many to list, look at every span).
    pub(crate) changed: Option<Vec<u64>>,
    /// Spans with more than one version.
    pub(crate) versioned: std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>,
}

/// The longest list of changed spans kept for the flusher, per shard.
const MAX_CHANGED: usize = 1024;

impl Table {
    /// Forgets the versions of spans that no record can need any more:
    /// those followed by a version older than `horizon` (a tick).
    pub(crate) fn prune(&mut self, horizon: u64) {
        let spans = &mut self.spans;
        self.versioned.retain(|k| {
            let Some(d) = spans.get_mut(k) else {
                return false;
            };
            // The newest version begun before the horizon is the oldest a
            // record can still need.
            let j = d
                .versions
                .iter()
                .rposition(|v| v.tick < horizon)
                .unwrap_or(0);
            d.versions.drain(..j);
            d.versions.len() > 1
        });
    }
}

/// Shards of the table, each under its own lock: the threads that make,
/// record into and close spans (every worker of a service, at every
/// request) and the flusher that reads their definitions take the lock of
/// one key's shard, so they seldom meet (one lock for all of them was the
/// most contended lock of a tokio service's logging).
const SHARDS: usize = 64;

static TABLE: [Mutex<Option<Table>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];

/// The shard of span `key`.
#[inline]
fn shard_of(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// Runs `f` on the shard of the table that holds span `key`, under its lock.
pub(crate) fn table<R>(key: u64, f: impl FnOnce(&mut Table) -> R) -> R {
    let mut t = TABLE[shard_of(key)]
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    f(t.get_or_insert_with(|| Table {
        changed: Some(Vec::new()),
        ..Table::default()
    }))
}

/// Runs `f` on every shard of the table, one after another, each under its
/// lock.
pub(crate) fn tables(mut f: impl FnMut(&mut Table)) {
    tables_in(u64::MAX, |_, t| f(t));
}

/// Runs `f` on the shards whose bits are set in `bits`, each under its lock
/// (with its bit).
pub(crate) fn tables_in(mut bits: u64, mut f: impl FnMut(u64, &mut Table)) {
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let mut t = TABLE[i].lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = t.as_mut() {
            f(1 << i, t);
        }
    }
}

/// Shards (one bit each) with spans closed, with new versions listed in
/// `changed`, and with spans of several versions, since the flusher last
/// took them: the flusher locks only those. Set under the shard's lock
/// (Release); taken with Acquire, which pairs with it, before the shard's
/// lock is taken. A bit set again after it was taken only costs the
/// flusher a look at a shard with nothing new.
pub(crate) static CLOSED_IN: AtomicU64 = AtomicU64::new(0);
pub(crate) static CHANGED_IN: AtomicU64 = AtomicU64::new(0);
pub(crate) static VERSIONED_IN: AtomicU64 = AtomicU64::new(0);

/// The bit of span `key`'s shard.
fn shard_bit(key: u64) -> u64 {
    1 << shard_of(key)
}

/// Bumped whenever a span gets a new version (Release, after the shard's
/// lock is released; the flusher's Acquire load then finds it there).
pub(crate) static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A new `tracing` span `key` inside `parent` (0: a root).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn define(key: u64, parent: u64, site: u32, raw: Arc<[u8]>) {
    table(key, |t| {
        t.spans.insert(
            key,
            Def {
                parent,
                versions: smallvec::smallvec![Version { tick: 0, site, raw }],
            },
        )
    });
}

/// Values recorded into span `key`: its fields from now on.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn redefine(key: u64, site: u32, raw: Arc<[u8]>) {
    let tick = crate::clock::now();
    let known = table(key, |t| {
        let Some(d) = t.spans.get_mut(&key) else {
            return false;
        };
        if d.versions.len() >= MAX_VERSIONS {
            d.versions.remove(1);
        }
        d.versions.push(Version { tick, site, raw });
        t.versioned.insert(key);
        match &mut t.changed {
            Some(c) if c.len() < MAX_CHANGED => c.push(key),
            c => *c = None,
        }
        CHANGED_IN.fetch_or(shard_bit(key), Ordering::Release);
        VERSIONED_IN.fetch_or(shard_bit(key), Ordering::Release);
        true
    });
    if known {
        EPOCH.fetch_add(1, Ordering::Release);
    }
}

/// Span `key` was closed: forgotten by the flusher once the records logged
/// before now are written, or at once when no logger runs.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn close(key: u64) {
    let running = crate::channel::running().is_some();
    table(key, |t| {
        if running {
            t.closed.push(key);
            CLOSED_IN.fetch_or(shard_bit(key), Ordering::Release);
        } else {
            t.spans.remove(&key);
        }
    });
}
