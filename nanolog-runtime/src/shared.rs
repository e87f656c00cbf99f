//! State shared by the logger handle, the flusher thread and the logging
//! threads, and the flush protocol between them.
//!
//! The flusher depends on this module only, and the logger on both, so the
//! two do not import each other.

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

/// Counters of a running logger, from [`Logger::stats`](crate::Logger::stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Records the flusher has taken from the rings and written out.
    pub logged: u64,
    /// Records dropped by `OnFull::Drop`, because they were larger than a
    /// whole ring (`oversize` of them), or because they were logged where no
    /// ring could take them (re-entrant calls, a forked child, a stopping
    /// logger).
    pub dropped: u64,
    /// Of `dropped`, records larger than the ring.
    pub oversize: u64,
    /// Bytes written to log files, headers included.
    pub bytes_written: u64,
    /// Records lost to failed writes (disk full, I/O error), or written
    /// into a live file that another program had deleted or cut back (these
    /// were counted in `logged` first). The file reports them too, as a
    /// loss at the start of the next successful write.
    pub lost: u64,
    /// Log files opened (more than one after rotation).
    pub files: u64,
    /// Rolls to a new file, and deletions of old files, that failed (each
    /// is also reported by the next `flush`; logging goes on in the
    /// current file, and a failed roll is tried again a second later).
    pub file_errors: u64,
    /// Logging threads seen.
    pub threads: u64,
    /// Lines the text mirror skipped because its writer was behind or had
    /// failed (the binary log has those records).
    pub mirror_skipped: u64,
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
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Stats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            logged: r(&self.logged),
            dropped: r(&self.dropped),
            oversize: r(&self.oversize),
            bytes_written: r(&self.bytes_written),
            lost: r(&self.lost),
            files: r(&self.files),
            file_errors: r(&self.file_errors),
            threads: r(&self.threads),
            mirror_skipped: r(&self.mirror_skipped),
        }
    }
}

/// A flusher that makes no progress for this long is taken to be stuck (a
/// write blocked on a FIFO nobody reads, a hung network filesystem): waits
/// that have a bound give up then.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(10);

/// State shared by the logger handle, the flusher and the logging threads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) epoch: u64,
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
}

impl Shared {
    pub(crate) fn new(epoch: u64, capacity: usize, on_full: OnFull) -> Shared {
        Shared {
            epoch,
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
