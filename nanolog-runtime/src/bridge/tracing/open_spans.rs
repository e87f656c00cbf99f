//! The `tracing` spans the layer holds open: each one's key and the layer's
//! data for it, found by its id from any thread, in a fixed table of the
//! process's own.
//!
//! The registry's extensions held them before. Each span then cost a boxed
//! value: an allocation where it was made, a map insertion under the span's
//! lock, and a free, mostly on another thread (tokio closes a span where
//! its task last ran), at its close. In the tokio service bench, a build
//! that left the extension out (and lost recorded values: a bound, not a
//! design) added 18% less user time than one with it; with this table the
//! layer adds 9-20% less than before (fast and slow phases; BENCHMARKS.md,
//! "Open spans in a table of the layer's own"). A slot costs a few stores on lines of the table's own, and
//! nothing to allocate.
//!
//! A span goes into one of [`PROBE`] slots its id hashes to. When all of
//! them hold open spans, the caller keeps it elsewhere (the registry's
//! extensions): the table is a fast home for most spans, not a limit on
//! how many may be open.
//!
//! Why a lookup finds a span that is in the table: a span's slot changes
//! only when it goes in (before its id is handed out, so before anyone can
//! look for it) and when it comes out (at its close, after which nobody
//! holds it), and no other change locks it meanwhile: a span looking for
//! room takes only a slot whose count says it is empty. Readers take a
//! slot's identity under that count (a seqlock): a slot being filled or
//! emptied is another span's, never the one looked for.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

/// A slot's count: a span goes in or comes out (see `Slot::seq`).
const CHANGING: u64 = 1;
/// A slot's count: it holds a span.
const HELD: u64 = 2;
/// A slot's count: one change more.
const CHANGE: u64 = 4;

/// The slots a span may go to: its id's and the next ones.
pub(crate) const PROBE: usize = 4;

/// Open spans of every layer: `N` slots (a power of two).
pub(crate) struct OpenSpans<T, const N: usize> {
    slots: [Slot<T>; N],
}

/// One span: its layer, id and key, and the layer's data for it. A slot is
/// empty while its id is 0 (tracing's ids are never 0), and its data is
/// initialized exactly while it is not (all of it zeros when empty: the
/// table is in `.bss`, not 768 KiB of every binary's `.data`).
#[repr(align(64))]
struct Slot<T> {
    /// A seqlock's count, with the slot's state in its low bits:
    /// [`CHANGING`] while a span goes in or comes out, [`HELD`] while one
    /// is in. A span is taken in only by a compare-and-swap that finds the
    /// slot neither, so a slot holding a span is never locked by another
    /// span looking for room. (As first built, a probe that saw a slot
    /// empty and locked it after another span had filled it made that
    /// span's slot look changing for a moment: a lookup of the span could
    /// miss, and its close wait. One run of the test of threads making and
    /// closing spans failed at a close, in about 500; not reproduced since.)
    seq: AtomicU64,
    owner: AtomicU64,
    id: AtomicU64,
    key: AtomicU64,
    /// Held while the data is changed in place (values recorded into the
    /// span, from any thread holding it).
    busy: AtomicBool,
    data: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: `data` is only touched by the thread that holds the slot: with
// its count marked changing (a span going in or coming out, see `OpenSpans::insert`
// and `remove`) or with `busy` held (`OpenSpans::with`), never both at
// once for one span (it is in the table from before anyone can reach it
// until its close, and nobody holds a closed span). So it is shared
// between threads as a `Mutex<Option<T>>` would be, which needs `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T> Slot<T> {
    const fn empty() -> Slot<T> {
        Slot {
            seq: AtomicU64::new(0),
            owner: AtomicU64::new(0),
            id: AtomicU64::new(0),
            key: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            data: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Whether it holds span `id` of `owner` (its key then), read as a
    /// whole: a slot being filled or emptied holds no span that is looked
    /// for (see the module's note).
    #[inline]
    fn holds(&self, owner: u64, id: u64) -> Option<u64> {
        // Acquire: pairs with the Release store that ended the last change,
        // so the fields read below are at least that change's.
        let before = self.seq.load(Ordering::Acquire);
        let (o, i, key) = (
            self.owner.load(Ordering::Relaxed),
            self.id.load(Ordering::Relaxed),
            self.key.load(Ordering::Relaxed),
        );
        // Acquire fence: the loads above happen before the count's second
        // read, so a change that overlapped them moved it.
        fence(Ordering::Acquire);
        let after = self.seq.load(Ordering::Relaxed);
        // (An id of 0 is an empty slot's, never a span's.)
        (before & CHANGING == 0 && before == after && i == id && id != 0 && o == owner)
            .then_some(key)
    }

    /// Takes the slot for a change, if it holds a span (`held`) or is
    /// empty (not `held`) and nobody else is changing it: its count, now
    /// marked [`CHANGING`].
    #[inline]
    fn lock(&self, held: bool) -> Option<u64> {
        let seq = self.seq.load(Ordering::Relaxed);
        if seq & CHANGING != 0 || (seq & HELD != 0) != held {
            return None;
        }
        // Acquire: this change comes after the last one (and its data).
        self.seq
            .compare_exchange(seq, seq | CHANGING, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // Release fence: a reader that sees any store of this change also
        // sees the count marked changing, so it cannot take a half-changed slot as whole.
        fence(Ordering::Release);
        Some(seq)
    }

    /// Ends the change begun when the count was `seq`, the slot now
    /// holding a span or not.
    #[inline]
    fn unlock(&self, seq: u64, held: bool) {
        let state = if held { HELD } else { 0 };
        // Release: whoever sees the new count sees every store of the change.
        self.seq.store(
            ((seq & !(CHANGING | HELD)) + CHANGE) | state,
            Ordering::Release,
        );
    }
}

impl<T, const N: usize> OpenSpans<T, N> {
    pub(crate) const fn new() -> Self {
        assert!(N.is_power_of_two() && N >= PROBE);
        OpenSpans {
            slots: [const { Slot::empty() }; N],
        }
    }

    /// The slots span `id` may be in.
    #[inline]
    fn window(&self, id: u64) -> impl Iterator<Item = &Slot<T>> {
        let first = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize;
        (0..PROBE).map(move |i| &self.slots[(first + i) & (N - 1)])
    }

    /// Span `id` of layer `owner`, made just now (its id not handed out
    /// yet), with its key and data; the data back if its slots are full.
    pub(crate) fn insert(&self, owner: u64, id: u64, key: u64, data: T) -> Result<(), T> {
        for slot in self.window(id) {
            // (Held or being changed: another span's.)
            let Some(seq) = slot.lock(false) else {
                continue;
            };
            // SAFETY: the slot is empty and this thread is changing it, so
            // no other thread touches its data (see the impl of `Sync`);
            // its data is uninitialized, so nothing is overwritten unread.
            unsafe { (*slot.data.get()).write(data) };
            slot.owner.store(owner, Ordering::Relaxed);
            slot.key.store(key, Ordering::Relaxed);
            slot.id.store(id, Ordering::Relaxed);
            slot.unlock(seq, true);
            return Ok(());
        }
        Err(data)
    }

    /// The key of span `id` of layer `owner`, if it is in the table; the
    /// caller holds the span open.
    #[inline]
    pub(crate) fn key(&self, owner: u64, id: u64) -> Option<u64> {
        self.window(id).find_map(|s| s.holds(owner, id))
    }

    /// `f` on the data of span `id` of layer `owner`, if it is in the
    /// table; the caller holds the span open.
    pub(crate) fn with<R>(&self, owner: u64, id: u64, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let slot = self.window(id).find(|s| s.holds(owner, id).is_some())?;
        let mut waited = Wait::default();
        // Acquire: pairs with the Release that ended the last holder's
        // change, which this one comes after.
        while slot
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if !waited.more() {
                return None;
            }
        }
        // The data is given back even if `f` panics (a panicking `Debug`
        // of a recorded value is caught below it, so not expected).
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                // Release: the next holder sees this one's change.
                self.0.store(false, Ordering::Release);
            }
        }
        let _held = Release(&slot.busy);
        // SAFETY: `busy` is held and the span is open (the caller holds
        // it), so it neither goes in nor comes out meanwhile: no other
        // thread touches its data (see the impl of `Sync`), which is
        // initialized (the slot holds the span: its id is not 0).
        let data = unsafe { (*slot.data.get()).assume_init_mut() };
        Some(f(data))
    }

    /// Span `id` of layer `owner` closes: its key and data, if it was in
    /// the table, which no longer holds it.
    pub(crate) fn remove(&self, owner: u64, id: u64) -> Option<(u64, T)> {
        let slot = self.window(id).find(|s| s.holds(owner, id).is_some())?;
        let mut waited = Wait::default();
        // (Nobody else changes a slot that holds an open span: taken at
        // once. The wait is for what cannot happen, bounded.)
        let seq = loop {
            if let Some(seq) = slot.lock(true) {
                break seq;
            }
            if !waited.more() {
                return None;
            }
        };
        if slot.id.load(Ordering::Relaxed) != id || slot.owner.load(Ordering::Relaxed) != owner {
            // (Never: only its close takes an open span out.)
            slot.unlock(seq, true);
            return None;
        }
        // Acquire: pairs with the Release that ended the last value's
        // merge (`with`, on another thread), so the data taken is the one
        // it left. (Never held here: nobody records into a closing span;
        // a flag left held in a forked child is not waited on forever.)
        while slot.busy.load(Ordering::Acquire) {
            if !waited.more() {
                break;
            }
        }
        let key = slot.key.load(Ordering::Relaxed);
        // SAFETY: this thread is changing the slot and its span is closing
        // (nobody holds it to record into it), so no other thread touches
        // its data; it is initialized (the slot was held) and is read once:
        // the slot is left empty below, its data uninitialized again.
        let data = unsafe { (*slot.data.get()).assume_init_read() };
        slot.id.store(0, Ordering::Relaxed);
        slot.unlock(seq, false);
        Some((key, data))
    }
}

impl<T, const N: usize> Drop for OpenSpans<T, N> {
    /// (A table that is not the process's static: the spans still in it.)
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if *slot.id.get_mut() != 0 {
                // SAFETY: `&mut self`: no other thread holds the table; a
                // slot whose id is not 0 holds initialized data.
                unsafe { slot.data.get_mut().assume_init_drop() };
            }
        }
    }
}

/// A wait for a slot another thread holds for a few instructions: spins,
/// then yields (the holder may have lost its core; crossbeam's `Backoff`,
/// as the mailboxes' lock waits); given up after 100 ms, for a holder that
/// will never let go (a thread that is not there in a forked child): the
/// span's data is then not found, as if it were not in the table.
#[derive(Default)]
struct Wait {
    backoff: crossbeam_utils::Backoff,
    since: Option<std::time::Instant>,
}

impl Wait {
    /// Waits a little; false once it is time to give up.
    fn more(&mut self) -> bool {
        if self.backoff.is_completed() {
            let since = *self.since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= std::time::Duration::from_millis(100) {
                return false;
            }
        }
        self.backoff.snooze();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_found_by_its_layer_and_id_until_it_closes() {
        let t: Box<OpenSpans<String, 16>> = Box::new(OpenSpans::new());
        assert_eq!(t.key(1, 7), None);
        t.insert(1, 7, 700, "seven".into()).unwrap();
        // Another layer's span with the same id (a scoped subscriber's).
        t.insert(2, 7, 701, "other".into()).unwrap();
        assert_eq!(t.key(1, 7), Some(700));
        assert_eq!(t.key(2, 7), Some(701));
        assert_eq!(t.key(1, 8), None);
        t.with(1, 7, |d| d.push('!'));
        assert_eq!(t.remove(1, 7), Some((700, "seven!".to_string())));
        assert_eq!(t.key(1, 7), None);
        assert_eq!(t.with(1, 7, |_| ()), None);
        assert_eq!(t.remove(1, 7), None);
        assert_eq!(t.key(2, 7), Some(701));
    }

    #[test]
    fn a_span_whose_slots_are_full_is_handed_back() {
        let t: Box<OpenSpans<u32, 4>> = Box::new(OpenSpans::new());
        for id in 1..=4 {
            t.insert(1, id, id * 10, id as u32).unwrap();
        }
        assert_eq!(t.insert(1, 5, 50, 5), Err(5));
        assert_eq!(t.remove(1, 3), Some((30, 3)));
        t.insert(1, 5, 50, 5).unwrap();
        for id in [1, 2, 4, 5] {
            assert_eq!(t.key(1, id), Some(id * 10));
        }
    }

    #[test]
    fn a_slot_being_changed_is_skipped_not_read_half_written() {
        let t: Box<OpenSpans<u32, 4>> = Box::new(OpenSpans::new());
        t.insert(1, 9, 90, 0).unwrap();
        let slot = t.window(9).find(|s| s.holds(1, 9).is_some()).unwrap();
        let seq = slot.lock(true).unwrap();
        assert_eq!(t.key(1, 9), None, "a slot being changed is no span");
        slot.unlock(seq, true);
        assert_eq!(t.key(1, 9), Some(90));
    }

    #[test]
    fn a_slot_held_forever_is_given_up_not_waited_on() {
        let t: Box<OpenSpans<u32, 4>> = Box::new(OpenSpans::new());
        t.insert(1, 9, 90, 5).unwrap();
        let slot = t.window(9).find(|s| s.holds(1, 9).is_some()).unwrap();
        // A holder that never lets go (as in a forked child).
        slot.busy.store(true, Ordering::Relaxed);
        assert_eq!(t.with(1, 9, |d| *d), None);
        // Its close still takes it out (after the wait is given up).
        assert_eq!(t.remove(1, 9), Some((90, 5)));
        slot.busy.store(false, Ordering::Relaxed);
        t.insert(1, 9, 91, 6).unwrap();
        assert_eq!(t.with(1, 9, |d| *d), Some(6));
        // (`remove` finds the slot by a whole read, so a slot stuck changing
        // holds no span it looks for.)
        assert_eq!(t.remove(1, 9), Some((91, 6)));
    }

    #[test]
    fn threads_making_and_closing_spans_find_their_own() {
        let t: &'static OpenSpans<u64, 64> = Box::leak(Box::new(OpenSpans::new()));
        let threads: Vec<_> = (0..4u64)
            .map(|n| {
                std::thread::spawn(move || {
                    let mut kept = 0;
                    for i in 0..20_000u64 {
                        let id = n << 32 | (i + 1);
                        if t.insert(7, id, id ^ 0x55, id).is_ok() {
                            kept += 1;
                            assert_eq!(t.key(7, id), Some(id ^ 0x55));
                            assert_eq!(t.with(7, id, |d| *d), Some(id));
                            assert_eq!(t.remove(7, id), Some((id ^ 0x55, id)));
                        }
                        assert_eq!(t.key(7, id), None);
                    }
                    kept
                })
            })
            .collect();
        for th in threads {
            assert!(th.join().unwrap() > 0);
        }
    }
}
