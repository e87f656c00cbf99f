//! The calling thread's side of logging: its ring, and the fallback ring for
//! calls that cannot use their own.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use crate::channel::{self, GENERATION};
use crate::channel::{OnFull, Shared};
use crate::clock;
use crate::compact::CompactFn;
use crate::encode::Encode;
use crate::ring::{self, Producer, Ring, SlotWriter};
use crate::site::Site;
use crate::wire::format::ArgKind;

thread_local! {
    static PRODUCER: RefCell<Option<ThreadProducer>> = const { RefCell::new(None) };
    static THREAD_NAME: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The key of the span current on this thread (0: none), as the
    /// thread's stack of spans (`span.rs`) last set it: what a ring new to
    /// the thread, or a lost switch, restates. One word without a
    /// destructor, so reading it is one thread-local access.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// The entry of the `nanolog::span!` being entered was lost.
    static ENTRY_LOST: Cell<bool> = const { Cell::new(false) };
}

/// The site of every switch of a thread's span context: one `u64`
/// argument, the key of the span now current on the thread (0: none).
static SWITCH: Site = Site::span_exit();

/// The registered id of the switch site.
#[inline]
pub(crate) fn switch_id() -> u32 {
    SWITCH.id_dyn(&[ArgKind::U64])
}

/// The key of the span current on this thread (0: none).
#[inline(always)]
pub(crate) fn current() -> u64 {
    CURRENT.try_with(Cell::get).unwrap_or(0)
}

/// Makes `key` the span current on this thread; returns the one before.
#[inline]
pub(crate) fn replace_current(key: u64) -> u64 {
    CURRENT.try_with(|c| c.replace(key)).unwrap_or(key)
}

/// Whether the entry just written for a `nanolog::span!` was lost (and
/// clears it); no thread-local left counts as lost.
#[inline]
pub(crate) fn take_entry_lost() -> bool {
    ENTRY_LOST.try_with(|l| l.replace(false)).unwrap_or(true)
}

/// The ring of calls that cannot use their thread's own: a call from a
/// thread-local destructor that runs after the ring's own destructor, from
/// an exit hook after `main` returned, or from a `Display` impl called by a
/// logging call of the same thread. Shared by those threads under a lock;
/// a call that finds the lock taken (re-entered from inside it) is counted
/// as dropped instead of waiting.
static FALLBACK: Mutex<Option<ThreadProducer>> = Mutex::new(None);

/// How long a producer blocked on a full ring keeps trying once a stop has
/// begun (the flusher's last passes may still free room). Small under loom,
/// where each try is a scheduling point.
const STOP_SPINS: u32 = if cfg!(loom) { 4 } else { 10_000 };

/// Logs one record: the entry point of every macro expansion.
///
/// `args_len` is the bytes the encoders write; `kinds` is called once per
/// site, on its first call, for the argument kinds and the site's own
/// compaction function; `enc` writes the arguments.
#[inline(always)]
pub fn log<const N: usize>(
    site: &'static Site,
    args_len: usize,
    kinds: impl FnOnce() -> ([ArgKind; N], CompactFn),
    enc: impl for<'a> FnOnce(SlotWriter<'a>),
) {
    log_id(site.id(kinds), args_len, enc);
}

/// Logs one record of the registered site `id` (see [`log`]).
#[inline(always)]
pub(crate) fn log_id(id: u32, args_len: usize, enc: impl for<'a> FnOnce(SlotWriter<'a>)) {
    let len = slot_len(args_len);
    let mut enc = Some(enc);
    let used_own = PRODUCER.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return false;
        };
        let Some(enc) = enc.take() else { return true };
        match slot.as_mut() {
            Some(p) if p.generation == GENERATION.load(Ordering::Relaxed) => p.push(id, len, enc),
            _ => log_slow(&mut slot, id, len, enc),
        }
        true
    });
    if used_own != Ok(true) {
        if let Some(enc) = enc.take() {
            log_fallback(id, len, enc);
        }
    }
}

/// Writes the entry of the `nanolog::span!` `key` (its fields and key): as
/// [`log`], but bookkeeping, not a logging call. An entry the ring cannot
/// take (or made with no logger running) is counted in
/// `Stats::context_lost`, and the span is marked lost in the thread's
/// stack: records inside it are shown in its parent's scope, never in a
/// scope the file does not hold.
#[inline(always)]
pub fn log_span<const N: usize>(
    key: u64,
    site: &'static Site,
    args_len: usize,
    kinds: impl FnOnce() -> ([ArgKind; N], CompactFn),
    enc: impl for<'a> FnOnce(SlotWriter<'a>),
) {
    // The flusher takes the span entered as the thread's context.
    if !log_bookkeeping(site.id(kinds), args_len, enc, true, key) {
        let _ = ENTRY_LOST.try_with(|l| l.set(true));
    }
}

/// Writes one bookkeeping record of the registered site `id` (a switch of
/// the thread's span context, or a `nanolog::span!`'s exit) after which
/// the flusher holds `states` as the thread's context: see
/// [`log_bookkeeping`]. Unless `attach`, a thread without a ring of the
/// running logger writes none: the ring its next record attaches restates
/// its context (see `ThreadProducer::attach`). Whether it was written.
#[inline]
pub(crate) fn log_context(
    id: u32,
    args_len: usize,
    attach: bool,
    states: u64,
    enc: impl for<'a> FnOnce(SlotWriter<'a>),
) -> bool {
    log_bookkeeping(id, args_len, enc, attach, states)
}

/// The span current on this thread changed (a span entered or exited):
/// its ring states it before the thread's next record, if it differs then
/// from what the ring last stated. Entering and exiting spans between two
/// records (a task polled and put back, a span with no record inside)
/// writes nothing.
#[inline]
pub(crate) fn context_changed() {
    let _ = PRODUCER.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some(p) = slot.as_mut() {
                p.ask_restate();
            }
        }
    });
}

/// Writes a bookkeeping record (a span's entry, a switch): as [`log_id`],
/// except that when the ring cannot take it, it is counted apart from
/// logging calls (`Stats::context_lost`) and the thread's next record
/// restates its context first, so no record is left in the wrong spans.
/// `attach`: give the thread a ring of the running logger if it has none.
/// `states`: the thread's context, as the flusher holds it after the
/// record. Whether the record was written. (A thread re-entered, or past
/// its ring's destructor, writes none: its records through the fallback
/// ring restate their context each.)
#[inline]
fn log_bookkeeping(
    id: u32,
    args_len: usize,
    enc: impl for<'a> FnOnce(SlotWriter<'a>),
    attach: bool,
    states: u64,
) -> bool {
    let len = slot_len(args_len);
    PRODUCER
        .try_with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return false;
            };
            let current = GENERATION.load(Ordering::Relaxed);
            if attach && slot.as_ref().is_none_or(|p| p.generation != current) {
                attach_running(&mut slot);
            }
            let Some(p) = slot.as_mut().filter(|p| p.generation == current) else {
                return false;
            };
            let lost = p.context_lost;
            p.bookkeeping = true;
            p.push(id, len, enc);
            p.bookkeeping = false;
            let written = p.context_lost == lost;
            if written {
                p.stated = states;
            }
            written
        })
        .unwrap_or(false)
}

/// Gives the calling thread a ring of the running logger, if one runs.
#[cold]
#[inline(never)]
fn attach_running(slot: &mut Option<ThreadProducer>) {
    *slot = None;
    if let Some(shared) = channel::running().filter(|s| s.in_owner_process()) {
        *slot = ThreadProducer::attach(shared);
    }
}

/// Bytes a record with `args_len` bytes of arguments takes in a ring.
#[inline(always)]
fn slot_len(args_len: usize) -> usize {
    (ring::HEADER + args_len + ring::ALIGN - 1) & !(ring::ALIGN - 1)
}

/// A call whose ring belongs to another logger (or none yet), or any call
/// while the process exits: attach a ring to the running logger, if any.
#[cold]
#[inline(never)]
fn log_slow(
    slot: &mut Option<ThreadProducer>,
    id: u32,
    len: usize,
    enc: impl for<'a> FnOnce(SlotWriter<'a>),
) {
    let Some(shared) = channel::running() else {
        *slot = None;
        return;
    };
    if !shared.in_owner_process() {
        // A forked child: its copy of the logger has no flusher.
        shared.count_dropped();
        return;
    }
    if slot
        .as_ref()
        .is_none_or(|p| p.generation != shared.generation)
    {
        *slot = None;
        *slot = ThreadProducer::attach(shared);
    }
    let Some(p) = slot.as_mut() else { return };
    p.push(id, len, enc);
    if channel::exiting() {
        p.flush_after_exit();
    }
}

#[cold]
#[inline(never)]
fn log_fallback(id: u32, len: usize, enc: impl for<'a> FnOnce(SlotWriter<'a>)) {
    let Some(shared) = channel::running() else {
        return;
    };
    if !shared.in_owner_process() {
        shared.count_dropped();
        return;
    }
    let mut slot = match FALLBACK.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            // Either another thread holds it (wait for it, briefly), or this
            // thread does, re-entered from inside the locked call: taking it
            // again would deadlock, so give up after a bound.
            let deadline = Instant::now() + Duration::from_millis(100);
            loop {
                match FALLBACK.try_lock() {
                    Ok(g) => break g,
                    Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        std::thread::yield_now()
                    }
                    Err(TryLockError::WouldBlock) => {
                        shared.count_dropped();
                        return;
                    }
                }
            }
        }
    };
    if slot
        .as_ref()
        .is_none_or(|p| p.generation != shared.generation)
    {
        *slot = None;
        *slot = ThreadProducer::attach(shared);
    }
    let Some(p) = slot.as_mut() else { return };
    // Threads take turns in this ring: each record is preceded by its
    // thread's context (the switch is bookkeeping, as any other).
    p.ask_restate();
    p.push(id, len, enc);
    if channel::exiting() {
        p.flush_after_exit();
    }
}

/// Writes the calling thread's pending drop marker, so a flush covers it.
/// (Other threads report theirs with their next record, or when they exit.)
pub(crate) fn report_own_drops() {
    let _ = PRODUCER.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        let Some(p) = slot.as_mut() else { return };
        if p.pending_drops == 0 || p.generation != GENERATION.load(Ordering::Relaxed) {
            return;
        }
        p.write_drops_within(Duration::from_secs(1));
    });
}

/// Names the calling thread in the log (shown by `nanolog decode` as
/// `[name:id]`). By default a thread is named after `std::thread::current()`.
pub fn set_thread_name(name: &str) {
    let _ = THREAD_NAME.try_with(|n| *n.borrow_mut() = Some(name.to_owned()));
    let _ = PRODUCER.try_with(|p| {
        if let Ok(p) = p.try_borrow() {
            if let Some(p) = p.as_ref() {
                let ring = p.producer.ring();
                *ring.name.lock().unwrap_or_else(PoisonError::into_inner) = name.to_owned();
                #[cfg(all(unix, not(loom)))]
                if let Some(slot) = ring.slot() {
                    slot.set_name(name);
                }
                ring.name_version.fetch_add(1, Ordering::Release);
            }
        }
    });
}

/// A ring for thread `thread`: in a slot of the logger's crash-safe area
/// when it has one with room, else on the heap.
fn new_ring(shared: &Shared, thread: u32, name: String) -> Ring {
    #[cfg(all(unix, not(loom)))]
    if let Some(slot) = shared.area.get().and_then(|a| a.slot(thread, &name)) {
        return Ring::mapped(slot, thread, name);
    }
    Ring::new(shared.capacity, thread, name)
}

/// What is left to write before a record once [`ThreadProducer::write_pending`]
/// ran.
enum Ahead {
    /// The call is dropped (and counted): what had to precede it did not fit.
    Dropped,
    /// Nothing: the record follows.
    Clear,
    /// The thread's context, which the record carries (the key of its span).
    Carry(u64),
}

/// A thread's producer: its ring and the logger it belongs to.
pub(crate) struct ThreadProducer {
    generation: u64,
    shared: Arc<Shared>,
    producer: Producer,
    /// Records dropped since the last drop marker was written.
    pending_drops: u64,
    first_drop: u64,
    last_drop: u64,
    /// The thread's span context must be written before its next record
    /// unless the ring states it already (it changed, a switch was lost,
    /// or the ring is new).
    restate: bool,
    /// The span context the flusher holds for this ring, as its records
    /// so far state it (0: none, as a new ring begins).
    stated: u64,
    /// `pending_drops > 0 || restate`: the one test the fast path makes.
    pending: bool,
    /// The record being pushed is bookkeeping (a context switch), not a
    /// logging call.
    bookkeeping: bool,
    /// Bookkeeping records this ring could not take.
    context_lost: u64,
}

impl Drop for ThreadProducer {
    fn drop(&mut self) {
        // The thread is exiting (or moving to a new logger): report drops not
        // yet reported, then let the flusher free the ring once it is empty.
        if self.pending_drops > 0 && self.shared.running.load(Ordering::Acquire) {
            self.write_drops_within(Duration::from_millis(100));
        }
        self.producer.ring().close();
    }
}

impl ThreadProducer {
    /// A new ring for the calling thread, handed to `shared`'s flusher;
    /// `None` if that logger is stopping.
    pub(crate) fn attach(shared: Arc<Shared>) -> Option<ThreadProducer> {
        let name = THREAD_NAME
            .try_with(|n| n.borrow().clone())
            .ok()
            .flatten()
            .or_else(|| std::thread::current().name().map(str::to_owned))
            .unwrap_or_default();
        let mut rings = shared
            .new_rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // `Shared::begin_stop` sets `stop` under this lock too: either the
        // stop comes first and no ring is pushed, or the ring is pushed before
        // the stop, and the flusher, which reads `stop` before it takes the
        // new rings under this lock, adopts and drains it.
        if shared.stop.load(Ordering::Acquire) {
            return None;
        }
        let thread = shared.next_thread.fetch_add(1, Ordering::Relaxed);
        let ring = Arc::new(new_ring(&shared, thread, name));
        rings.push(Arc::clone(&ring));
        drop(rings);
        shared.counters.threads.fetch_add(1, Ordering::Relaxed);
        // A thread inside spans (entered before this logger started, or
        // before its last ring was closed) says so before its first record.
        let restate = current() != 0;
        Some(ThreadProducer {
            generation: shared.generation,
            shared,
            producer: Producer::new(ring),
            pending_drops: 0,
            first_drop: 0,
            last_drop: 0,
            restate,
            stated: 0,
            pending: restate,
            bookkeeping: false,
            context_lost: 0,
        })
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, id: u32, len: usize, enc: impl for<'a> FnOnce(SlotWriter<'a>)) {
        // The tick first: `rdtsc` takes tens of cycles, and nothing below
        // waits for it until the header is written, so the CPU overlaps it
        // with the reservation. A thread's calls run one after another, so
        // its records still reach its ring in tick order (a call that waits
        // for room keeps the time it was made).
        let tick = clock::now();
        if len > self.producer.max_record() {
            self.dropped(tick, true);
            return;
        }
        if self.pending {
            return self.push_pending(id, tick, len, enc);
        }
        self.commit(id, tick, len, enc);
    }

    /// Writes a record now, or after waiting for room (or not, as
    /// configured); whether it was written.
    #[inline(always)]
    fn commit(
        &mut self,
        id: u32,
        tick: u64,
        len: usize,
        enc: impl for<'a> FnOnce(SlotWriter<'a>),
    ) -> bool {
        match self.producer.try_reserve(len) {
            Some(r) => {
                r.commit_record(id, tick, enc);
                true
            }
            None => self.push_after_wait(id, tick, len, enc),
        }
    }

    /// [`push`](Self::push) with something to write first: the drop marker,
    /// and the thread's context, which a logging call's record carries
    /// itself ([`ring::WITH_CONTEXT`]): in a tokio service nearly every
    /// event follows a poll of another request's task, and a switch record
    /// of its own cost the ring a header and the flusher a record.
    #[cold]
    #[inline(never)]
    fn push_pending(
        &mut self,
        id: u32,
        tick: u64,
        len: usize,
        enc: impl for<'a> FnOnce(SlotWriter<'a>),
    ) {
        let carry = !self.bookkeeping && len + 8 <= self.producer.max_record();
        match self.write_pending(tick, carry) {
            Ahead::Dropped => {}
            Ahead::Clear => {
                self.commit(id, tick, len, enc);
            }
            Ahead::Carry(key) => {
                // (A call given up for room is counted dropped, and the
                // context is stated again before the next record.)
                if self.commit(
                    id | ring::WITH_CONTEXT,
                    tick,
                    len + 8,
                    |c| enc(key.write(c)),
                ) {
                    self.restate = false;
                    self.stated = key;
                }
                self.pending = self.pending_drops > 0 || self.restate;
            }
        }
    }

    /// The ring was full: wait for room (or drop, as configured), then
    /// write; whether it was written.
    #[cold]
    #[inline(never)]
    fn push_after_wait(
        &mut self,
        id: u32,
        tick: u64,
        len: usize,
        enc: impl for<'a> FnOnce(SlotWriter<'a>),
    ) -> bool {
        if self.wait_for_room(len) {
            if let Some(r) = self.producer.try_reserve(len) {
                r.commit_record(id, tick, enc);
                return true;
            }
        }
        false
    }

    /// After the exit hook has run, nothing will flush again: each call
    /// flushes its own record (bounded, as the hooks are).
    #[cold]
    fn flush_after_exit(&mut self) {
        if self.pending_drops > 0 {
            self.write_drops_within(Duration::from_millis(100));
        }
        let _ = self.shared.flush(false, Some(channel::HOOK_FLUSH_LIMIT));
    }

    /// Whether the ring has room for `len` bytes now, after waiting for it
    /// or not as the logger's `OnFull` says.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&mut self, len: usize) -> bool {
        if self.shared.on_full == OnFull::Drop {
            // Wake an idle flusher at the start of a run of drops (and now
            // and then during one), so a burst does not wait out its sleep.
            if self.pending_drops.is_multiple_of(1024) {
                self.shared.wake_flusher();
            }
            self.dropped(clock::now(), false);
            return false;
        }
        let mut spins = 0u32;
        loop {
            if self.producer.has_room(len) {
                return true;
            }
            // Give up when the flusher has gone, or the logger is stopping
            // and has had time to drain (its drop waits for a stuck flusher
            // only so long; see `Logger::drop`).
            if !self.shared.running.load(Ordering::Acquire)
                || self.shared.stop.load(Ordering::Acquire) && spins > STOP_SPINS
            {
                self.dropped(clock::now(), false);
                return false;
            }
            spins += 1;
            if spins % 64 == 1 {
                self.shared.wake_flusher();
            }
            if spins < 100 {
                crate::sync::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    /// The thread's context is stated before its next record, unless the
    /// ring states it already.
    fn ask_restate(&mut self) {
        self.restate = true;
        self.pending = true;
    }

    /// Writes what must precede the next record: the drop marker, then the
    /// thread's context, as a switch record, or (`carry`) left for the
    /// record to carry. `Dropped` if the call made at `tick` is dropped (and
    /// counted) because they did not fit.
    #[cold]
    #[inline(never)]
    fn write_pending(&mut self, tick: u64, carry: bool) -> Ahead {
        if self.pending_drops > 0 && !self.try_write_drops() && !self.drops_after_wait(tick) {
            return Ahead::Dropped;
        }
        if self.restate && current() == self.stated {
            self.restate = false;
        }
        if self.restate && carry {
            return Ahead::Carry(current());
        }
        if self.restate {
            let key = current();
            let id = switch_id();
            let len = slot_len(key.ring_len());
            // Waiting (or not) as for the record being pushed; giving up
            // counts that record (a call, or bookkeeping), not the switch.
            let room = self.producer.has_room(len) || self.wait_for_room(len);
            if !room {
                return Ahead::Dropped;
            }
            if let Some(r) = self.producer.try_reserve(len) {
                r.commit_record(id, tick, |c| {
                    key.write(c);
                });
                self.restate = false;
                self.stated = key;
            }
        }
        self.pending = self.pending_drops > 0 || self.restate;
        Ahead::Clear
    }

    #[cold]
    fn dropped(&mut self, tick: u64, oversize: bool) {
        if self.bookkeeping {
            // A lost switch: counted apart, and restated before the next
            // record.
            self.ask_restate();
            self.context_lost += 1;
            self.shared
                .counters
                .context_lost
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.pending = true;
        if self.pending_drops == 0 {
            self.first_drop = tick;
        }
        self.pending_drops += 1;
        self.last_drop = tick;
        self.shared.count_dropped();
        self.note_drops();
        if oversize {
            self.shared
                .counters
                .oversize
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The drops not yet in the ring, where a recovery finds them (a
    /// crash-safe ring's slot; the drop path only).
    #[inline]
    fn note_drops(&self) {
        #[cfg(all(unix, not(loom)))]
        if let Some(slot) = self.producer.ring().slot() {
            slot.set_drops(self.pending_drops, self.first_drop, self.last_drop);
        }
    }

    /// Writes the pending drop marker; false if the ring has no room for it.
    #[cold]
    fn try_write_drops(&mut self) -> bool {
        let Some(r) = self.producer.try_reserve(ring::DROPS_LEN) else {
            return false;
        };
        r.commit_drops(self.pending_drops, self.first_drop, self.last_drop);
        self.pending_drops = 0;
        self.note_drops();
        self.pending = self.restate;
        true
    }

    /// The pending drop marker found the ring full: with `OnFull::Block`,
    /// wait for room and write it (an oversize record must not cost the
    /// record after it); with `OnFull::Drop`, drop the call made at `tick`
    /// too. False if that call is dropped (and counted).
    #[cold]
    #[inline(never)]
    fn drops_after_wait(&mut self, tick: u64) -> bool {
        if self.shared.on_full == OnFull::Drop {
            self.dropped(tick, false);
            return false;
        }
        // Giving up (the flusher gone, or a stop) counts this call dropped.
        self.wait_for_room(ring::DROPS_LEN) && self.try_write_drops()
    }

    /// Writes the pending drop marker, waiting for room up to `limit`.
    #[cold]
    fn write_drops_within(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.try_write_drops() && Instant::now() < deadline {
            self.shared.wake_flusher();
            crate::sync::yield_now();
        }
    }
}
