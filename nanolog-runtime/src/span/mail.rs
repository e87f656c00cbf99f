//! The threads' changes to `tracing` spans while a logger runs: each
//! thread posts them (a span made, a value recorded, a span closed) to a
//! mailbox of its own, which the flusher empties into its book of spans
//! (`book.rs`) before it looks a span up there. Without a logger the
//! changes go to the process's table (`table.rs`) at once.
//!
//! The table's shard locks were the largest part of what a span cost a
//! tokio service's workers (measured 2026-11-28 at 4ee3648; BENCHMARKS.md,
//! "A thread's span changes in a mailbox of its own"): every span made or
//! closed took a lock whose line
//! another core had written last (a worker, or the flusher looking spans
//! up), so each was a cache miss and an atomic write on a shared line; and
//! the flusher then copied each definition from the table into its book.
//! A mailbox's lock is its own thread's; the flusher takes it once a pass
//! (or when it misses a span) if something was posted, not once a span,
//! and a span lives in one map, the book's.
//!
//! Why the flusher finds every span a record needs: a span's definition is
//! posted before the layer returns the span's id, so before any thread can
//! enter it; a record in the span is written to its ring after that, and
//! the flusher read the record (an Acquire of that ring) before it empties
//! the mailboxes on a miss, so the post is visible to it then.
//!
//! Ordering across mailboxes: the flusher empties them one after another,
//! so in one emptying a close (or a new value) may come from a mailbox
//! taken after the span's own definition was posted to a mailbox taken
//! before it. Such a change is applied at the next emptying, after the
//! definitions that one brings (`Book::deliver`).
//!
//! When a logger stops, its flusher hands the spans still open back to the
//! table, with every shard locked, and changes go there at once from then
//! on (see [`go_direct_with`]): a span made while it ran and closed after
//! it leaves the table, and the next logger finds the spans still open.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::table::{self, Op, SpanBytes, EPOCH};
use crate::channel::{OnFull, Shared};

/// A thread's mailbox (on lines of its own: its thread writes it at every
/// span, the flusher once a pass).
///
/// The changes are kept as bytes (see [`put_letter`]), not as `Op`s: what
/// crosses from the worker's core to the flusher's is what the change
/// holds, about 40 bytes for a span's definition and 9 for a close, not
/// an `Op` of 104 bytes each (two cache lines the worker writes and the
/// flusher reads, then the worker writes again: the largest item of the
/// layer's own on the workers in a slow phase; BENCHMARKS.md, "A thread's
/// span changes in a mailbox of its own", 8b08861).
#[repr(align(128))]
struct Mailbox {
    ops: Letters,
    /// It holds changes: set with the first one posted since the flusher
    /// last emptied it, cleared as it does, both under the lock, so that
    /// the flusher locks only the mailboxes with something in them (a
    /// tokio service has a thread for each of its blocking tasks).
    posted: AtomicBool,
}

/// Whether changes go to mailboxes (a logger runs). Read under a mailbox's
/// lock, stored (by `go_live` and `go_direct_with`) with every shard of the
/// table locked: SeqCst, so a thread that reads `false` and then takes a
/// shard's lock finds there everything the mailboxes and the flusher held
/// (see [`go_direct_with`]).
///
/// On a line of its own: every span's change reads it, and in a benchmark
/// the linker put it beside a counter bumped at every event (its load
/// stood out in `perf annotate`; the padding alone was not timed).
static LIVE: Live = Live(AtomicBool::new(false));

#[repr(align(128))]
struct Live(AtomicBool);

/// The bytes a thread's mailbox holds at most (a letter larger than that
/// alone is taken when the mailbox is empty): set by [`go_live`] from the
/// logger's ring size.
static BUDGET: AtomicUsize = AtomicUsize::new(BUDGET_MIN);
/// The logger's `OnFull::Drop`: a definition or value that finds its
/// mailbox full is dropped and counted instead of waiting.
static DROP_WHEN_FULL: AtomicBool = AtomicBool::new(false);
/// The running logger, for a thread whose mailbox is full: to wake its
/// flusher and to count drops (taken only then).
static LOGGER: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// Changes dropped under `OnFull::Drop` since the running logger started
/// (`Stats::spans_dropped`; one logger runs at a time).
static SPANS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Changes to `tracing` spans dropped since the running logger started.
pub(crate) fn spans_dropped() -> u64 {
    SPANS_DROPPED.load(Ordering::Relaxed)
}

/// A mailbox's budget: a sixteenth of the thread's ring, within these
/// bounds. A definition of three fields is about 60 bytes, so the default
/// ring's 64 KiB hold about a thousand spans: a worker that makes a span
/// every 200 ns fills it in 200 us, about the flusher's nap between passes
/// when it has work.
const BUDGET_MIN: usize = 16 << 10;
const BUDGET_MAX: usize = 256 << 10;

/// Wakes the flusher of the logger that went live last; whether that
/// flusher still runs (false: none went live, or it ended or stalled and
/// was left behind, and the mailboxes go to the table soon or already).
fn wake_flusher() -> bool {
    LOGGER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_deref()
        .is_some_and(|s| {
            s.wake_flusher();
            s.running.load(Ordering::Acquire)
        })
}

impl std::ops::Deref for Live {
    type Target = AtomicBool;
    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

impl Mailbox {
    const fn new() -> Mailbox {
        Mailbox {
            ops: Letters::new(),
            posted: AtomicBool::new(false),
        }
    }

    /// Posts `change` unless changes go direct (see `LIVE`); returns
    /// what became of it.
    ///
    /// A mailbox holds at most its budget (see [`BUDGET`]), as a ring
    /// does: past it, the thread waits for the flusher to take what it
    /// holds, or under `OnFull::Drop` a definition or a new value is
    /// dropped and counted (`Stats::spans_dropped`; the records made in
    /// the span show their context as lost). A close is never dropped: the
    /// flusher would keep its span for ever; what closes can add is bounded
    /// by the spans the flusher holds.
    fn post(&self, change: &Change<'_>) -> Posted {
        let need = change.letter_len();
        // Relaxed: set before `LIVE` (SeqCst) by `go_live`.
        let budget = BUDGET.load(Ordering::Relaxed);
        {
            let mut ops = self.ops.lock();
            // SeqCst: see `LIVE`.
            if !LIVE.load(Ordering::SeqCst) {
                return Posted::Direct;
            }
            // (One letter always fits an empty mailbox, whatever its size.)
            if ops.is_empty() || ops.len() + need <= budget {
                self.put(&mut ops, change);
                return Posted::Kept;
            }
        }
        self.post_full(change, need, budget)
    }

    /// [`Mailbox::post`] of a change that found the mailbox full.
    #[cold]
    #[inline(never)]
    fn post_full(&self, change: &Change<'_>, need: usize, budget: usize) -> Posted {
        let drop_when_full = DROP_WHEN_FULL.load(Ordering::Relaxed);
        let closing = matches!(change, Change::Close { .. });
        // The flusher never waits for itself (a span made by its mirror's
        // writer): it takes the mailboxes, so it admits past the budget.
        let over = closing && drop_when_full || crate::channel::is_flusher_thread();
        if !over && drop_when_full {
            // Relaxed: a count for `Stats`, as the rings' drops are.
            let n = SPANS_DROPPED.fetch_add(1, Ordering::Relaxed);
            // A burst of drops wakes an idle flusher now and then (the
            // logger's lock only then: every thread drops at once).
            if n.is_multiple_of(1024) {
                wake_flusher();
            }
            return Posted::Dropped;
        }
        let mut spins = 0u32;
        loop {
            {
                let mut ops = self.ops.lock();
                // SeqCst: see `LIVE`.
                if !LIVE.load(Ordering::SeqCst) {
                    return Posted::Direct;
                }
                if over || ops.is_empty() || ops.len() + need <= budget {
                    self.put(&mut ops, change);
                    return Posted::Kept;
                }
            }
            // Waiting for the flusher to take the mailbox: as a producer
            // waits for room in its ring (it takes every mailbox once a
            // pass; see `Book::take_mail`). A stopping logger's flusher
            // takes them too, and the stop ends with changes going direct.
            if spins.is_multiple_of(64) && !wake_flusher() {
                // No flusher to wait for (it stalled and was left behind):
                // the change is kept past the budget rather than lost, and
                // goes to the table with the mailbox.
                let mut ops = self.ops.lock();
                if !LIVE.load(Ordering::SeqCst) {
                    return Posted::Direct;
                }
                self.put(&mut ops, change);
                return Posted::Kept;
            }
            spins = spins.wrapping_add(1);
            if spins < 100 {
                crate::sync::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    /// Appends `change` to the mailbox's bytes `ops` (its lock held).
    #[inline]
    fn put(&self, ops: &mut Vec<u8>, change: &Change<'_>) {
        put_letter(ops, change);
        // Release: a flusher that sees it (Acquire) and then takes
        // the lock finds the change; one that read the ring of a
        // record made after this post sees it by then.
        if !self.posted.load(Ordering::Relaxed) {
            self.posted.store(true, Ordering::Release);
        }
    }

    /// Its changes, appended to `out`. Under its lock only to swap its
    /// bytes with `spare` (empty; it holds them after, emptied again): the
    /// lock is held for a few instructions, not while the changes are read
    /// (a thread posting meanwhile would wait for the flusher).
    fn take(&self, out: &mut Vec<Op>, spare: &mut Vec<u8>) {
        {
            let mut ops = self.ops.lock();
            self.posted.store(false, Ordering::Relaxed);
            std::mem::swap(&mut *ops, spare);
        }
        read_letters(spare, out);
        spare.clear();
    }
}

/// A mailbox's bytes under a lock of their own: a flag taken with one
/// compare-and-swap and given back with a plain store (std's `Mutex` gives
/// its lock back with a swap, to see whether a thread sleeps on it). The
/// thread posts at every span made and closed; the flusher takes the lock
/// once a pass, for a swap of two `Vec`s, so a post waits for it seldom and
/// briefly. The swap that gave the lock back was most of a post's samples
/// in the tokio service bench (x86's locked instructions wait for the
/// stores before them: the letter just written, on lines the flusher read
/// last).
struct Letters {
    held: AtomicBool,
    bytes: std::cell::UnsafeCell<Vec<u8>>,
}

// SAFETY: `bytes` is only reached through a `LettersGuard`, which exists
// while `held` is true and only one at a time (see `Letters::lock`): the
// bytes are shared as a `Mutex<Vec<u8>>` would share them.
unsafe impl Sync for Letters {}

impl Letters {
    const fn new() -> Letters {
        Letters {
            held: AtomicBool::new(false),
            bytes: std::cell::UnsafeCell::new(Vec::new()),
        }
    }

    /// Takes the lock: spins while the other side holds it (a few
    /// instructions), then yields (it may have lost its core). Never taken
    /// in a forked child, where the flusher that may hold it is not: posts
    /// go to the table there (`forked`).
    #[inline]
    fn lock(&self) -> LettersGuard<'_> {
        let backoff = crossbeam_utils::Backoff::new();
        // Acquire: pairs with the Release of the last guard's drop, so its
        // changes to the bytes are seen.
        while self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff.snooze();
        }
        LettersGuard(self)
    }
}

/// The bytes of a [`Letters`] whose lock is held.
struct LettersGuard<'a>(&'a Letters);

impl std::ops::Deref for LettersGuard<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        // SAFETY: this guard holds the lock, so no other reference to the
        // bytes exists (see the impl of `Sync`).
        unsafe { &*self.0.bytes.get() }
    }
}

impl std::ops::DerefMut for LettersGuard<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow.
        unsafe { &mut *self.0.bytes.get() }
    }
}

impl Drop for LettersGuard<'_> {
    fn drop(&mut self) {
        // Release: the next holder sees the bytes as this one left them.
        self.0.held.store(false, Ordering::Release);
    }
}

/// What became of a change posted to a mailbox.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Posted {
    /// In the mailbox, for the flusher.
    Kept,
    /// Dropped and counted (`OnFull::Drop`, the mailbox full).
    Dropped,
    /// No logger runs: it goes to the table.
    Direct,
}

/// A change as its thread posts it, its fields borrowed.
pub(crate) enum Change<'a> {
    Define {
        key: u64,
        parent: u64,
        site: u32,
        raw: &'a [u8],
    },
    Version {
        key: u64,
        tick: u64,
        site: u32,
        raw: &'a [u8],
    },
    Close {
        key: u64,
    },
}

impl Change<'_> {
    /// The bytes [`put_letter`] writes for it.
    fn letter_len(&self) -> usize {
        match *self {
            Change::Define { raw, .. } | Change::Version { raw, .. } => 25 + raw.len(),
            Change::Close { .. } => 9,
        }
    }

    /// The change as the table takes it.
    fn to_op(&self) -> Op {
        match *self {
            Change::Define {
                key,
                parent,
                site,
                raw,
            } => Op::Define {
                key,
                parent,
                site,
                raw: SpanBytes::from_slice(raw),
            },
            Change::Version {
                key,
                tick,
                site,
                raw,
            } => Op::Version {
                key,
                tick,
                site,
                raw: SpanBytes::from_slice(raw),
            },
            Change::Close { key } => Op::Close { key },
        }
    }
}

/// Appends `change` to a mailbox's bytes, one change after another
/// (native byte order: a process reads what it wrote): a kind byte, then a
/// close's key; a definition's key, parent, site and its fields' length
/// and bytes; a version's key, tick, site, length and bytes (laid out as a
/// definition's, the tick where the parent is).
fn put_letter(b: &mut Vec<u8>, change: &Change<'_>) {
    let (kind, key, second, site, raw) = match *change {
        Change::Define {
            key,
            parent,
            site,
            raw,
        } => (DEFINE, key, parent, site, raw),
        Change::Version {
            key,
            tick,
            site,
            raw,
        } => (VERSION, key, tick, site, raw),
        Change::Close { key } => {
            b.push(CLOSE);
            b.extend_from_slice(&key.to_ne_bytes());
            return;
        }
    };
    b.reserve(25 + raw.len());
    b.push(kind);
    b.extend_from_slice(&key.to_ne_bytes());
    b.extend_from_slice(&second.to_ne_bytes());
    b.extend_from_slice(&site.to_ne_bytes());
    b.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
    b.extend_from_slice(raw);
}

const DEFINE: u8 = 0;
const VERSION: u8 = 1;
const CLOSE: u8 = 2;

/// The changes written by [`put_letter`] in `bytes`, as `Op`s appended
/// to `out`.
fn read_letters(bytes: &[u8], out: &mut Vec<Op>) {
    let mut r = bytes;
    while let Some((&kind, rest)) = r.split_first() {
        r = rest;
        let key = u64::from_ne_bytes(next_bytes(&mut r));
        match kind {
            DEFINE | VERSION => {
                let second = u64::from_ne_bytes(next_bytes(&mut r));
                let site = u32::from_ne_bytes(next_bytes(&mut r));
                let len = (u32::from_ne_bytes(next_bytes(&mut r)) as usize).min(r.len());
                let raw = SpanBytes::from_slice(&r[..len]);
                r = &r[len..];
                out.push(if kind == DEFINE {
                    Op::Define {
                        key,
                        parent: second,
                        site,
                        raw,
                    }
                } else {
                    Op::Version {
                        key,
                        tick: second,
                        site,
                        raw,
                    }
                });
            }
            _ => out.push(Op::Close { key }),
        }
    }
}

/// The next `N` bytes of `r` (zeros past its end: `put_letter` writes
/// whole changes, so never).
fn next_bytes<const N: usize>(r: &mut &[u8]) -> [u8; N] {
    match r.split_first_chunk::<N>() {
        Some((v, rest)) => {
            *r = rest;
            *v
        }
        None => {
            *r = &[];
            [0; N]
        }
    }
}

/// Every thread's mailbox: the flusher empties each, and forgets those of
/// threads that ended once they are empty.
static BOXES: Mutex<Vec<Arc<Mailbox>>> = Mutex::new(Vec::new());

/// The mailbox of changes made where a thread's own is gone: a span closed
/// by another thread-local's destructor as its thread ends. (Going to the
/// table, the close of a span the table never had was lost, and the span
/// kept in the flusher's book.)
static ORPHANS: Mailbox = Mailbox::new();

thread_local! {
    static MINE: Arc<Mailbox> = {
        let b = Arc::new(Mailbox::new());
        BOXES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&b));
        b
    };
}

/// Posts `change` to this thread's mailbox while a logger runs (to the
/// orphans' on a thread whose locals are gone); otherwise applies it to
/// the table at once. False if it was dropped (see [`Mailbox::post`]).
fn post(change: Change<'_>) -> bool {
    // Relaxed is enough to skip the mailbox: a stale `true` is settled
    // under its lock below, a stale `false` applies the change to the
    // table, which `go_live` leaves as valid as the mailboxes.
    let posted = if LIVE.load(Ordering::Relaxed) {
        MINE.try_with(|b| b.post(&change))
            .unwrap_or_else(|_| ORPHANS.post(&change))
    } else {
        Posted::Direct
    };
    if posted == Posted::Direct {
        let _ = table::apply(change.to_op(), live());
    }
    posted != Posted::Dropped
}

/// Whether a logger runs (changes go to mailboxes).
pub(crate) fn live() -> bool {
    LIVE.load(Ordering::Relaxed)
}

/// The changes posted to every mailbox since the flusher last took them,
/// appended to `out` in each mailbox's order (the flusher's side: it
/// applies them to the spans it knows, see `Book::deliver`).
pub(crate) fn take(out: &mut Vec<Op>, spare: &mut Vec<u8>) {
    let mut all = BOXES.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|b| {
        let ended = Arc::strong_count(b) == 1;
        // Acquire: pairs with the Release of the post that set it.
        if b.posted.load(Ordering::Acquire) || ended {
            b.take(out, spare);
        }
        // Only the list holds it: its thread ended, and it is empty now.
        !ended
    });
    drop(all);
    if ORPHANS.posted.load(Ordering::Acquire) {
        ORPHANS.take(out, spare);
    }
}

/// A logger starts: changes go to mailboxes from now on (the table holds
/// every change made before), each of at most a sixteenth of
/// `ring_capacity` (see [`BUDGET`]), full ones waiting or dropping as
/// `shared`'s `OnFull` says.
pub(crate) fn go_live(shared: &Arc<Shared>, ring_capacity: usize) {
    BUDGET.store(
        (ring_capacity / 16).clamp(BUDGET_MIN, BUDGET_MAX),
        Ordering::Relaxed,
    );
    DROP_WHEN_FULL.store(shared.on_full == OnFull::Drop, Ordering::Relaxed);
    SPANS_DROPPED.store(0, Ordering::Relaxed);
    *LOGGER.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(shared));
    table::with_all_locked(|| {
        LIVE.store(true, Ordering::SeqCst);
        Vec::new()
    });
}

/// Changes go to the table at once from now on. Every shard of the table
/// is locked meanwhile; `hand_back` is given what the mailboxes still
/// hold and returns the changes that put the flusher's spans into the
/// table (with those it did not take), applied before the locks go. A
/// thread that finds changes direct (`post` hands its change back) and
/// then takes a shard's lock does so after this: it cannot close a span
/// whose definition is still in a mailbox, or only in the flusher's book.
pub(crate) fn go_direct_with(hand_back: impl FnOnce(Vec<Op>) -> Vec<Op>) {
    *LOGGER.lock().unwrap_or_else(PoisonError::into_inner) = None;
    table::with_all_locked(|| {
        LIVE.store(false, Ordering::SeqCst);
        let (mut ops, mut spare) = (Vec::new(), Vec::new());
        for b in BOXES.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            b.take(&mut ops, &mut spare);
        }
        ORPHANS.take(&mut ops, &mut spare);
        hand_back(ops)
    });
}

/// [`go_direct_with`], the mailboxes' changes to the table as they are: a
/// logger stopped without its flusher's hand-back (it stalled), or
/// already after it (then nothing is left to move).
pub(crate) fn go_direct() {
    if LIVE.load(Ordering::SeqCst) {
        go_direct_with(|ops| ops);
    }
}

/// A new `tracing` span `key` inside `parent` (0: a root), its fields
/// `raw`. False if the definition was dropped (`OnFull::Drop`, its
/// thread's span changes over their budget): its new values and its close
/// need not be posted, and the records made in it show their context as
/// lost.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
#[must_use]
pub(crate) fn define(key: u64, parent: u64, site: u32, raw: &[u8]) -> bool {
    post(Change::Define {
        key,
        parent,
        site,
        raw,
    })
}

/// Values recorded into span `key`: its fields from now on. False if the
/// version was dropped (`OnFull::Drop`, as [`define`]).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn redefine(key: u64, site: u32, raw: &[u8]) -> bool {
    let tick = crate::clock::now();
    let posted = post(Change::Version {
        key,
        tick,
        site,
        raw,
    });
    // Release, after the version is in a mailbox or the table: the
    // flusher's Acquire load that sees the new epoch finds it there.
    EPOCH.fetch_add(1, Ordering::Release);
    posted
}

/// Span `key` was closed: forgotten by the flusher once the records logged
/// before now are written, or at once when no logger runs.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn close(key: u64) {
    let _ = post(Change::Close { key });
}

/// In a forked child: the child has no flusher, so changes go to the table
/// at once (one store: async-signal-safe). Where `fork` is caught.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
pub(crate) fn forked() {
    LIVE.store(false, Ordering::Relaxed);
}

/// The spans the flusher's book held at the end of its last pass (for the
/// tests' count of memory held for spans, `held`).
#[cfg(feature = "test-hooks")]
pub(crate) static SPANS_KNOWN: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Tests only: `tracing` span definitions the process holds (the table's
/// and the flusher's book's, as of its last pass) and changes waiting in
/// mailboxes.
#[cfg(feature = "test-hooks")]
pub(crate) fn held() -> (usize, usize) {
    let mut spans = SPANS_KNOWN.load(Ordering::Relaxed);
    table::tables(|t| spans += t.spans.len());
    // (Counted by reading them: nothing keeps a count for the tests alone.)
    let count = |b: &Mailbox| {
        let mut ops = Vec::new();
        read_letters(&b.ops.lock(), &mut ops);
        ops.len()
    };
    let waiting = BOXES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|b| count(b))
        .sum::<usize>()
        + count(&ORPHANS);
    (spans, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a thread posts is what the flusher reads back, in order: every
    /// kind, fields empty, short and past the inline 64 bytes.
    #[test]
    fn changes_read_back_as_they_were_posted() {
        let long: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let mut letters = Vec::new();
        put_letter(
            &mut letters,
            &Change::Define {
                key: 7,
                parent: 0,
                site: 3,
                raw: &[],
            },
        );
        put_letter(&mut letters, &Change::Close { key: u64::MAX });
        put_letter(
            &mut letters,
            &Change::Version {
                key: 7,
                tick: 1 << 40,
                site: 4,
                raw: &long,
            },
        );
        put_letter(
            &mut letters,
            &Change::Define {
                key: 8,
                parent: 7,
                site: u32::MAX,
                raw: b"ab",
            },
        );
        let mut out = Vec::new();
        read_letters(&letters, &mut out);
        assert_eq!(out.len(), 4);
        assert!(
            matches!(&out[0], Op::Define { key: 7, parent: 0, site: 3, raw } if raw.is_empty())
        );
        assert!(matches!(&out[1], Op::Close { key: u64::MAX }));
        assert!(
            matches!(&out[2], Op::Version { key: 7, tick, site: 4, raw } if *tick == 1 << 40 && raw[..] == long[..])
        );
        assert!(
            matches!(&out[3], Op::Define { key: 8, parent: 7, site: u32::MAX, raw } if &raw[..] == b"ab")
        );
    }
}
