//! The threads' changes to the table of `tracing` spans while a logger
//! runs: each thread posts them (a span made, a value recorded, a span
//! closed) to a mailbox of its own, which the flusher empties into the
//! table before it looks a span up there.
//!
//! The table's shard locks were the most of what a span cost a tokio
//! service's workers: every span made or closed took a lock whose line
//! another core had written last (a worker, or the flusher looking spans
//! up), so each was a cache miss and an atomic write on a shared line. A
//! mailbox's lock is its own thread's; the flusher takes it once a pass
//! (or when it misses a span), not once a span, and the table is then
//! touched by the flusher alone.
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
//! definitions that one brings (see [`Mail`]).
//!
//! Without a logger, or while one stops, the changes go to the table at
//! once, as they always did (see [`go_direct`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::table::{self, Op, EPOCH};

/// A thread's mailbox (on lines of its own: its thread writes it at every
/// span, the flusher once a pass).
#[repr(align(128))]
#[derive(Default)]
struct Mailbox {
    ops: Mutex<Vec<Op>>,
    /// It holds changes: set with the first one posted since the flusher
    /// last emptied it, cleared as it does, both under the lock, so that
    /// the flusher locks only the mailboxes with something in them (a
    /// tokio service has a thread for each of its blocking tasks).
    posted: AtomicBool,
}

/// Whether changes go to mailboxes (a logger runs). Read under a mailbox's
/// lock, stored (by `go_live` and `go_direct`) with every shard of the
/// table locked: SeqCst, so a thread that reads `false` and then takes a
/// shard's lock finds there everything the mailboxes held (see
/// [`go_direct`]).
///
/// On a line of its own: every span's change reads it, and a counter the
/// linker put beside it (a benchmark's, bumped at every event) made that
/// load a miss.
static LIVE: Live = Live(AtomicBool::new(false));

#[repr(align(128))]
struct Live(AtomicBool);

impl std::ops::Deref for Live {
    type Target = AtomicBool;
    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

/// Every thread's mailbox: the flusher empties each, and forgets those of
/// threads that ended once they are empty.
static BOXES: Mutex<Vec<Arc<Mailbox>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<Mailbox> = {
        let b = Arc::new(Mailbox::default());
        BOXES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&b));
        b
    };
}

/// Posts `op` to this thread's mailbox while a logger runs; otherwise (or
/// on a thread whose locals are gone) hands it back, to be applied to the
/// table at once.
pub(crate) fn post(op: Op) -> Result<(), Op> {
    // Relaxed is enough to skip the mailbox: a stale `true` is settled
    // under its lock below, a stale `false` applies `op` to the table,
    // which `go_live` leaves as valid as the mailboxes.
    if !LIVE.load(Ordering::Relaxed) {
        return Err(op);
    }
    let mut op = Some(op);
    let _ = MINE.try_with(|b| {
        let mut ops = b.ops.lock().unwrap_or_else(PoisonError::into_inner);
        // SeqCst: see `LIVE`.
        if LIVE.load(Ordering::SeqCst) {
            ops.extend(op.take());
            // Release: a flusher that sees it (Acquire) and then takes
            // the lock finds the change; one that read the ring of a
            // record made after this post sees it by then.
            if !b.posted.load(Ordering::Relaxed) {
                b.posted.store(true, Ordering::Release);
            }
        }
    });
    op.map_or(Ok(()), Err)
}

/// Whether a logger runs (changes go to mailboxes).
pub(crate) fn live() -> bool {
    LIVE.load(Ordering::Relaxed)
}

/// The flusher's side: emptying the mailboxes into the table, and the
/// changes held for the next emptying (see the module's documentation).
#[derive(Default)]
pub(crate) struct Mail {
    taken: Vec<Op>,
    later: Vec<Op>,
}

impl Mail {
    /// Empties every mailbox into the table: definitions first, then the
    /// changes held from the last emptying, then this one's (a new value
    /// or a close of a span the table does not know yet is held for the
    /// next: its definition may be in a mailbox emptied before it was
    /// posted).
    pub(crate) fn deliver(&mut self) {
        {
            let mut all = BOXES.lock().unwrap_or_else(PoisonError::into_inner);
            let taken = &mut self.taken;
            all.retain(|b| {
                let ended = Arc::strong_count(b) == 1;
                if b.posted.load(Ordering::Acquire) || ended {
                    let mut ops = b.ops.lock().unwrap_or_else(PoisonError::into_inner);
                    b.posted.store(false, Ordering::Relaxed);
                    taken.append(&mut ops);
                }
                // Only the list holds it: its thread ended, and it is
                // empty now.
                !ended
            });
        }
        if self.taken.is_empty() && self.later.is_empty() {
            return;
        }
        let mut rest = Vec::new();
        for op in self.taken.drain(..) {
            match op {
                Op::Define { .. } => {
                    let _ = table::apply(op, true);
                }
                op => rest.push(op),
            }
        }
        let mut versioned = false;
        for op in std::mem::take(&mut self.later) {
            versioned |= matches!(op, Op::Version { .. });
            // Held once already: a span never defined (past the sites'
            // cap) is dropped.
            let _ = table::apply(op, true);
        }
        if versioned {
            // The epoch its poster moved went by before the table had the
            // new value: moved again, so contexts resolved since see it.
            EPOCH.fetch_add(1, Ordering::Release);
        }
        for op in rest {
            if let Err(op) = table::apply(op, true) {
                self.later.push(op);
            }
        }
    }

    /// The flusher ends: what the mailboxes still hold, and the changes
    /// held for a next emptying, go to the table now.
    pub(crate) fn finish(&mut self) {
        self.deliver();
        let live = live();
        for op in std::mem::take(&mut self.later) {
            let _ = table::apply(op, live);
        }
    }
}

/// A logger starts: changes go to mailboxes from now on (the table holds
/// every change made before).
pub(crate) fn go_live() {
    table::with_all_locked(|| {
        LIVE.store(true, Ordering::SeqCst);
        Vec::new()
    });
}

/// A logger stops: changes go to the table at once from now on, and what
/// the mailboxes hold goes there first, every shard of the table locked
/// meanwhile. A thread that finds changes direct (`post` hands its change
/// back) and then takes a shard's lock does so after this: it cannot close
/// a span whose definition is still in another thread's mailbox.
pub(crate) fn go_direct() {
    table::with_all_locked(|| {
        LIVE.store(false, Ordering::SeqCst);
        let all = BOXES.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ops = Vec::new();
        for b in all.iter() {
            ops.append(&mut b.ops.lock().unwrap_or_else(PoisonError::into_inner));
        }
        ops
    });
}

/// A new `tracing` span `key` inside `parent` (0: a root).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn define(key: u64, parent: u64, site: u32, raw: Arc<[u8]>) {
    direct(post(Op::Define {
        key,
        parent,
        site,
        raw,
    }));
}

/// Values recorded into span `key`: its fields from now on.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn redefine(key: u64, site: u32, raw: Arc<[u8]>) {
    let tick = crate::clock::now();
    direct(post(Op::Version {
        key,
        tick,
        site,
        raw,
    }));
    // Release, after the version is in a mailbox or the table: the
    // flusher's Acquire load that sees the new epoch finds it there.
    EPOCH.fetch_add(1, Ordering::Release);
}

/// Span `key` was closed: forgotten by the flusher once the records logged
/// before now are written, or at once when no logger runs.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn close(key: u64) {
    direct(post(Op::Close { key }));
}

/// A change no mailbox took (no logger runs, or one stops): to the table
/// now.
fn direct(posted: Result<(), Op>) {
    if let Err(op) = posted {
        let live = live();
        let _ = table::apply(op, live);
    }
}

/// In a forked child: the child has no flusher, so changes go to the table
/// at once (one store: async-signal-safe).
pub(crate) fn forked() {
    LIVE.store(false, Ordering::Relaxed);
}

/// Tests only: `tracing` span definitions the process holds (the table's)
/// and changes waiting in mailboxes.
#[cfg(feature = "test-hooks")]
pub(crate) fn held() -> (usize, usize) {
    let mut spans = 0;
    table::tables(|t| spans += t.spans.len());
    let waiting = BOXES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|b| b.ops.lock().unwrap_or_else(PoisonError::into_inner).len())
        .sum();
    (spans, waiting)
}
