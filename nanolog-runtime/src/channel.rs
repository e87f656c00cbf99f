//! The channel between the logging threads and the flusher, which the
//! logger opens and closes: the rings handed over, the flush and stop
//! handshakes, the counters, and which channel is current (the generation a
//! logging call compares its ring's with, and whether the process exits).
//!
//! The logging threads and the flusher reach each other only through this
//! module; the logger (which starts and stops both) uses it too, and
//! neither reaches the logger.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::ring::Ring;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Condvar, Mutex};

/// What a logging call does when its thread's ring is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFull {
    /// Wait for the flusher to make room: nothing is lost (the default).
    #[default]
    Block,
    /// Drop the record and count it; the count reaches the log, so `nanolog
    /// decode` reports the gap.
    Drop,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) logged: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) oversize: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) files: AtomicU64,
    pub(crate) file_errors: AtomicU64,
    pub(crate) threads: AtomicU64,
    pub(crate) mirror_skipped: AtomicU64,
    pub(crate) context_lost: AtomicU64,
}

/// An id of the calling thread (`pthread_self`; 0 where there is none),
/// async-signal-safe: a signal handler on the flusher thread must not wait
/// for itself.
pub(crate) fn thread_id() -> u64 {
    #[cfg(unix)]
    // SAFETY: pthread_self has no preconditions and is async-signal-safe.
    let id = unsafe { libc::pthread_self() as u64 };
    #[cfg(not(unix))]
    let id = 0;
    id
}

thread_local! {
    static IS_FLUSHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as a flusher (see [`is_flusher_thread`]).
pub(crate) fn mark_flusher_thread() {
    IS_FLUSHER.with(|f| f.set(true));
}

/// Whether the calling thread is a flusher (which must not wait for
/// itself): here, where the logging threads and the flusher meet, so that
/// a thread's side (a hook, a span's mailbox) asks without reaching the
/// flusher's code.
pub(crate) fn is_flusher_thread() -> bool {
    IS_FLUSHER.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// Records of bridge calls past the cap of interned sites, logged at the
/// overflow sites (`Stats::overflow`; process-wide, as the cap is).
pub(crate) static BRIDGE_OVERFLOW: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// A flusher that makes no progress for this long is taken to be stuck (a
/// write blocked on a FIFO nobody reads, a hung network filesystem): waits
/// that have a bound give up then.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(10);

/// State shared by the logger handle, the flusher and the logging threads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) generation: u64,
    /// The process that started the logger: a forked child has no flusher.
    pub(crate) pid: u32,
    pub(crate) capacity: usize,
    pub(crate) on_full: OnFull,
    /// False once the flusher has exited: blocked producers give up.
    pub(crate) running: AtomicBool,
    /// Set by `Logger::drop` (under the CURRENT lock): no new ring attaches,
    /// and the flusher drains and exits.
    pub(crate) stop: AtomicBool,
    /// Rings attached since the flusher last took them.
    pub(crate) new_rings: Mutex<Vec<Arc<Ring>>>,
    pub(crate) next_thread: AtomicU32,
    pub(crate) flusher: OnceLock<Thread>,
    /// `pthread_self()` of the flusher (0 before it runs), so a signal or
    /// panic on the flusher thread does not wait for itself.
    pub(crate) flusher_id: AtomicU64,
    pub(crate) flush_requested: AtomicU64,
    /// Of `flush_requested`, the highest ticket that asked for `fdatasync`.
    pub(crate) sync_requested: AtomicU64,
    /// The highest ticket completed (mirrors `flush_done`, for waits that
    /// may not take a lock: the signal handler).
    pub(crate) flushed: AtomicU64,
    pub(crate) flush_done: Mutex<Done>,
    pub(crate) flush_cv: Condvar,
    /// Bumped by the flusher on every pass of its loop: a stalled value
    /// means a stuck flusher.
    pub(crate) heartbeat: AtomicU64,
    /// Set by `Logger::__hold_flusher`: the flusher takes no records (a
    /// benchmark hook, to time the two sides of a ring one at a time).
    pub(crate) held: AtomicBool,
    /// The first write error since the last `flush`.
    pub(crate) error: Mutex<Option<std::io::Error>>,
    pub(crate) counters: Counters,
    /// The crash-safe area the rings live in (`crate::crash`), if the
    /// logger has one.
    #[cfg(all(unix, not(loom)))]
    pub(crate) area: OnceLock<Arc<crate::crash::Area>>,
}

impl Shared {
    /// The logger stopped cleanly, or its process exits with every record
    /// written: its crash-safe area goes (`crate::crash`).
    #[cfg(all(unix, not(loom)))]
    pub(crate) fn close_area(&self) {
        if let Some(a) = self.area.get() {
            crate::site::detach_dictionary();
            a.remove();
        }
    }

    pub(crate) fn new(generation: u64, capacity: usize, on_full: OnFull) -> Shared {
        Shared {
            generation,
            pid: std::process::id(),
            capacity,
            on_full,
            running: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            new_rings: Mutex::new(Vec::new()),
            next_thread: AtomicU32::new(1),
            flusher: OnceLock::new(),
            flusher_id: AtomicU64::new(0),
            flush_requested: AtomicU64::new(0),
            sync_requested: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            flush_done: Mutex::new(Done::default()),
            flush_cv: Condvar::new(),
            heartbeat: AtomicU64::new(0),
            held: AtomicBool::new(false),
            error: Mutex::new(None),
            counters: Counters::default(),
            #[cfg(all(unix, not(loom)))]
            area: OnceLock::new(),
        }
    }

    pub(crate) fn wake_flusher(&self) {
        // OnceLock::get is one atomic load and `unpark` one atomic swap plus
        // a futex wake: no lock and no allocation, so the signal handler
        // may call this too.
        if let Some(t) = self.flusher.get() {
            t.unpark();
        }
    }

    /// Whether this process is the one that started the logger (not a
    /// forked child, which has no flusher thread).
    pub(crate) fn in_owner_process(&self) -> bool {
        self.pid == std::process::id()
    }

    pub(crate) fn count_dropped(&self) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Asks for a flush (and an `fdatasync` if `sync`); returns the ticket.
    pub(crate) fn request_flush(&self, sync: bool) -> u64 {
        // SeqCst: the flusher's Acquire loads of `flush_requested` and then
        // `sync_requested`, taken before it loads the rings' tails, order
        // this request after every record committed before the call.
        let ticket = self.flush_requested.fetch_add(1, Ordering::SeqCst) + 1;
        if sync {
            // A flusher that reads this value drains (and syncs) after
            // reading it, so every record committed before the call is in
            // the synced data.
            self.sync_requested.fetch_max(ticket, Ordering::SeqCst);
        }
        self.wake_flusher();
        ticket
    }

    /// Returns once every record logged before the call is written (and on
    /// stable storage, if `sync`), reporting a write error since the last
    /// flush. With `bounded`, gives up when the flusher makes no progress
    /// for [`STALL_LIMIT`] or `bounded` has passed.
    pub(crate) fn flush(&self, sync: bool, bounded: Option<Duration>) -> Result<(), Error> {
        if !self.in_owner_process() {
            return Err(Error::Flusher(
                "this is a forked child; the logger's flusher runs in the parent".into(),
            ));
        }
        let ticket = self.request_flush(sync);
        let start = Instant::now();
        let mut beat = (self.heartbeat.load(Ordering::Relaxed), Instant::now());
        let mut done = self
            .flush_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while if sync { done.synced } else { done.flushed } < ticket {
            if !self.running.load(Ordering::Acquire) {
                return Err(Error::Flusher("the flusher thread has stopped".into()));
            }
            if let Some(limit) = bounded {
                let now = self.heartbeat.load(Ordering::Relaxed);
                if now != beat.0 {
                    beat = (now, Instant::now());
                }
                if start.elapsed() > limit || beat.1.elapsed() > STALL_LIMIT {
                    return Err(Error::Flusher(
                        "the flusher thread made no progress in time".into(),
                    ));
                }
            }
            done = self
                .flush_cv
                .wait_timeout(done, Duration::from_millis(10))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(done);
        match self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(Error::Write(e)),
            None => Ok(()),
        }
    }

    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_vendor = "apple",
        target_os = "freebsd"
    ))]
    /// Waits, without a lock, until flush `ticket` is complete, the flusher
    /// has stopped, or `limit` has passed. For the signal handler.
    pub(crate) fn wait_flushed_lock_free(&self, ticket: u64, limit: Duration) {
        let start = crate::clock::now();
        let limit_ticks = (limit.as_secs_f64() * crate::clock::ticks_per_second()) as u64;
        // Acquire pairs with the flusher's Release store after its write.
        while self.flushed.load(Ordering::Acquire) < ticket
            && self.running.load(Ordering::Acquire)
            && crate::clock::now().wrapping_sub(start) < limit_ticks
        {
            crate::sync::spin_loop();
            crate::sync::yield_now();
        }
    }

    /// Begins the stop: from now on no ring attaches, and the flusher drains
    /// what is there and exits. Under the `new_rings` lock, which
    /// `ThreadProducer::attach` holds while it checks `stop` and publishes a
    /// ring: a ring is either refused or adopted before the flusher's last
    /// pass.
    pub(crate) fn begin_stop(&self) {
        let _rings = self
            .new_rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Release pairs with the flusher's Acquire load: it drains what was
        // committed before this store, then exits.
        self.stop.store(true, Ordering::Release);
    }

    /// Waits until the flusher has exited, as long as it makes progress:
    /// gives up after [`STALL_LIMIT`] without a heartbeat. True if it exited.
    pub(crate) fn wait_stopped(&self) -> bool {
        let mut beat = (self.heartbeat.load(Ordering::Relaxed), Instant::now());
        let mut guard = self
            .flush_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if !self.running.load(Ordering::Acquire) {
                return true;
            }
            let now = self.heartbeat.load(Ordering::Relaxed);
            if now != beat.0 {
                beat = (now, Instant::now());
            } else if beat.1.elapsed() > STALL_LIMIT {
                return false;
            }
            guard = self
                .flush_cv
                .wait_timeout(guard, Duration::from_millis(10))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Records that flushes up to `flushed` are written and those up to
    /// `synced` are on stable storage, and wakes their waiters.
    pub(crate) fn complete_flush(&self, flushed: u64, synced: u64) {
        let mut done = self
            .flush_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if done.flushed < flushed || done.synced < synced {
            done.flushed = done.flushed.max(flushed);
            done.synced = done.synced.max(synced);
            // Release pairs with the Acquire in `wait_flushed_lock_free`.
            self.flushed.store(done.flushed, Ordering::Release);
            self.flush_cv.notify_all();
        }
    }
}

/// Flush tickets completed, under `Shared::flush_done`.
#[derive(Debug, Default)]
pub(crate) struct Done {
    /// Every ticket up to this one is written to the OS.
    pub(crate) flushed: u64,
    /// Every sync ticket up to this one is on stable storage.
    pub(crate) synced: u64,
}

/// The running logger, for threads attaching their rings; `Some` and
/// stopping while its `Logger` is being dropped.
pub(crate) static CURRENT: std::sync::Mutex<Option<Arc<Shared>>> = std::sync::Mutex::new(None);
/// Notified when a stopping logger leaves CURRENT.
pub(crate) static SLOT_FREED: std::sync::Condvar = std::sync::Condvar::new();
/// The running logger's generation (0: none; [`EXIT_GENERATION`] once the process
/// exits). A call whose ring belongs to another generation takes the slow path.
pub(crate) static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub(crate) static NEXT_GENERATION: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(1);
/// An generation no logger has: every call takes the slow path.
pub(crate) const EXIT_GENERATION: u64 = u64::MAX;
/// Set by the exit hook: from then on each call flushes its own record.
pub(crate) static EXITING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The longest a hook (exit, panic, and a call made after the exit hook)
/// waits for the flusher.
pub(crate) const HOOK_FLUSH_LIMIT: Duration = Duration::from_secs(5);

pub(crate) fn lock_current() -> std::sync::MutexGuard<'static, Option<Arc<Shared>>> {
    CURRENT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running logger, unless none runs or it is stopping.
pub(crate) fn running() -> Option<Arc<Shared>> {
    if FORKED.load(Ordering::Relaxed) {
        // The lock may have been held by another thread at the fork: it
        // would never be released in this process.
        return running_from_hook();
    }
    lock_current()
        .as_ref()
        .filter(|s| !s.stop.load(Ordering::Acquire))
        .cloned()
}

/// Like [`running`], but never waits long for the lock: for hooks that may
/// run while this thread (panicking, or exiting) holds it.
pub(crate) fn running_from_hook() -> Option<Arc<Shared>> {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        match CURRENT.try_lock() {
            Ok(g) => {
                return g
                    .as_ref()
                    .filter(|s| !s.stop.load(Ordering::Acquire))
                    .cloned()
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                return p
                    .into_inner()
                    .as_ref()
                    .filter(|s| !s.stop.load(Ordering::Acquire))
                    .cloned()
            }
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// Set in a forked child of a process that started a logger.
pub(crate) static FORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
