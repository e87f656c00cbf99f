//! Starting and stopping the logger, and the calling thread's side of logging.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use crate::error::Error;
use crate::level::{self, Level};
use crate::ring::Cursor;
use crate::ring::{self, Producer, Ring};
use crate::site::{ArgKind, Site};
use crate::{clock, flusher};

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

/// Counters of a running logger, from [`Logger::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Records the flusher has taken from the rings and written out.
    pub logged: u64,
    /// Records dropped by `OnFull::Drop` or because they were larger than a
    /// whole ring (`oversize` of them).
    pub dropped: u64,
    /// Of `dropped`, records larger than the ring.
    pub oversize: u64,
    /// Bytes written to log files, headers included.
    pub bytes_written: u64,
    /// Records lost to failed writes (disk full, I/O error).
    pub lost: u64,
    /// Log files opened (more than one after rotation).
    pub files: u64,
    /// Logging threads seen.
    pub threads: u64,
}

/// Configures and starts a [`Logger`].
#[derive(Debug, Clone)]
pub struct Builder {
    pub(crate) path: PathBuf,
    pub(crate) level: Level,
    pub(crate) staging_capacity: usize,
    pub(crate) on_full: OnFull,
    pub(crate) rotate_bytes: Option<u64>,
    pub(crate) wake_delay: Duration,
    pub(crate) clock_interval: Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            path: PathBuf::from("nanolog.nlog"),
            level: Level::Info,
            staging_capacity: 1 << 20,
            on_full: OnFull::Block,
            rotate_bytes: None,
            wake_delay: Duration::from_millis(1),
            clock_interval: Duration::from_secs(1),
        }
    }
}

impl Builder {
    /// The log file (default `nanolog.nlog`). It is created or truncated.
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// The minimum level (default `Info`); [`crate::set_level`] changes it later.
    pub fn level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    /// Bytes of each thread's staging ring (default 1 MiB), rounded up to a
    /// power of two; at least 256. A record larger than the ring is dropped
    /// and counted (see `Stats::oversize`).
    pub fn staging_capacity(mut self, bytes: usize) -> Self {
        self.staging_capacity = bytes;
        self
    }

    /// What a call does when its ring is full (default [`OnFull::Block`]).
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = on_full;
        self
    }

    /// Starts a new file once the current one passes this many bytes:
    /// `app.nlog`, then `app.1.nlog`, `app.2.nlog`, ... Each file is complete
    /// on its own (header, dictionary).
    pub fn rotate_bytes(mut self, bytes: u64) -> Self {
        self.rotate_bytes = Some(bytes);
        self
    }

    /// The longest the idle flusher sleeps before looking at the rings again
    /// (default 1 ms). Shorter costs CPU when idle; longer delays records.
    pub fn wake_delay(mut self, delay: Duration) -> Self {
        self.wake_delay = delay;
        self
    }

    /// How often the flusher records a fresh (tick, wall clock) pair (default 1 s).
    pub fn clock_interval(mut self, interval: Duration) -> Self {
        self.clock_interval = interval;
        self
    }

    /// Opens the file and starts the flusher thread. The first start in a
    /// process also calibrates the clock (about 20 ms).
    ///
    /// Fails if a logger is already running, if the file cannot be created,
    /// or if a setting is out of range.
    pub fn start(self) -> Result<Logger, Error> {
        if self.staging_capacity > 1 << 31 {
            return Err(Error::Config(format!(
                "staging capacity {} is larger than 2 GiB",
                self.staging_capacity
            )));
        }
        if self.wake_delay > Duration::from_secs(10) {
            return Err(Error::Config("wake delay is longer than 10 s".into()));
        }
        let capacity = self.staging_capacity.max(256).next_power_of_two();
        let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        if current.is_some() {
            return Err(Error::AlreadyRunning);
        }
        let writer = crate::writer::Writer::create(&self.path, self.rotate_bytes)?;
        let epoch = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            epoch,
            capacity,
            on_full: self.on_full,
            running: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            new_rings: Mutex::new(Vec::new()),
            has_new_rings: AtomicBool::new(false),
            next_thread: AtomicU32::new(1),
            flusher: std::sync::OnceLock::new(),
            flush_requested: AtomicU64::new(0),
            flush_done: Mutex::new(0),
            flush_cv: Condvar::new(),
            error: Mutex::new(None),
            counters: Counters::default(),
        });
        let config = flusher::Config {
            wake_delay: self.wake_delay,
            clock_interval: self.clock_interval,
        };
        let s2 = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("nanolog-flusher".into())
            .spawn(move || flusher::run(s2, writer, config))
            .map_err(|e| Error::Flusher(e.to_string()))?;
        let _ = shared.flusher.set(handle.thread().clone());
        *current = Some(Arc::clone(&shared));
        // Relaxed: producers compare their ring's epoch with this one; a
        // stale read only sends them to `attach`, which takes the CURRENT lock.
        EPOCH.store(epoch, Ordering::Relaxed);
        drop(current);
        level::activate(self.level);
        Ok(Logger {
            shared,
            handle: Some(handle),
        })
    }
}

/// The running logger. Dropping it flushes everything logged, stops the
/// flusher thread and closes the file.
#[derive(Debug)]
pub struct Logger {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl Logger {
    /// A builder with the defaults of CONTRACT §3.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Returns once every record logged before the call, by any thread, is
    /// written to the OS. Reports a write error that happened since the last
    /// call.
    pub fn flush(&self) -> Result<(), Error> {
        report_own_drops();
        self.shared.flush()
    }

    /// The logger's counters.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        report_own_drops();
        level::deactivate();
        {
            let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
            if current
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &self.shared))
            {
                *current = None;
                EPOCH.store(0, Ordering::Relaxed);
            }
        }
        // Release pairs with the flusher's Acquire load: it drains what was
        // committed before this store, then exits.
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake_flusher();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.shared.running.store(false, Ordering::Release);
    }
}

/// Flushes the running logger, if any (see [`Logger::flush`]).
pub fn flush() -> Result<(), Error> {
    let shared = CURRENT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match shared {
        Some(s) => {
            report_own_drops();
            s.flush()
        }
        None => Ok(()),
    }
}

/// Writes the calling thread's pending drop marker, so a flush covers it.
/// (Other threads report theirs with their next record, or when they exit.)
fn report_own_drops() {
    let _ = PRODUCER.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        let Some(p) = slot.as_mut() else { return };
        if p.pending_drops == 0 || p.epoch != EPOCH.load(Ordering::Relaxed) {
            return;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while !p.try_write_drops() && std::time::Instant::now() < deadline {
            p.shared.wake_flusher();
            std::thread::yield_now();
        }
    });
}

/// Names the calling thread in the log (shown by `nanolog decode` as
/// `[name:id]`). By default a thread is named after `std::thread::current()`.
pub fn set_thread_name(name: &str) {
    THREAD_NAME.with(|n| *n.borrow_mut() = Some(name.to_owned()));
    let _ = PRODUCER.try_with(|p| {
        if let Ok(p) = p.try_borrow() {
            if let Some(p) = p.as_ref() {
                let ring = p.producer.ring();
                *ring.name.lock().unwrap_or_else(PoisonError::into_inner) = name.to_owned();
                ring.name_version.fetch_add(1, Ordering::Release);
            }
        }
    });
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) logged: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) oversize: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) files: AtomicU64,
    pub(crate) threads: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            logged: r(&self.logged),
            dropped: r(&self.dropped),
            oversize: r(&self.oversize),
            bytes_written: r(&self.bytes_written),
            lost: r(&self.lost),
            files: r(&self.files),
            threads: r(&self.threads),
        }
    }
}

/// State shared by the logger handle, the flusher and the logging threads.
#[derive(Debug)]
pub(crate) struct Shared {
    epoch: u64,
    pub(crate) capacity: usize,
    on_full: OnFull,
    /// False once the flusher has exited: blocked producers give up.
    pub(crate) running: AtomicBool,
    /// Set by `Logger::drop`: the flusher drains and exits.
    pub(crate) stop: AtomicBool,
    pub(crate) new_rings: Mutex<Vec<Arc<Ring>>>,
    pub(crate) has_new_rings: AtomicBool,
    next_thread: AtomicU32,
    flusher: std::sync::OnceLock<Thread>,
    pub(crate) flush_requested: AtomicU64,
    pub(crate) flush_done: Mutex<u64>,
    pub(crate) flush_cv: Condvar,
    /// The first write error since the last `flush`.
    pub(crate) error: Mutex<Option<std::io::Error>>,
    pub(crate) counters: Counters,
}

impl Shared {
    pub(crate) fn wake_flusher(&self) {
        if let Some(t) = self.flusher.get() {
            t.unpark();
        }
    }

    fn flush(&self) -> Result<(), Error> {
        // SeqCst: the flusher's Acquire load of this counter, taken before it
        // loads the rings' tails, orders this request after every record
        // committed before the call.
        let ticket = self.flush_requested.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake_flusher();
        let mut done = self
            .flush_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *done < ticket {
            if !self.running.load(Ordering::Acquire) {
                return Err(Error::Flusher("the flusher thread has stopped".into()));
            }
            done = self
                .flush_cv
                .wait_timeout(done, Duration::from_millis(50))
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
}

/// The running logger, for threads attaching their rings.
static CURRENT: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
/// The running logger's epoch (0: none). A thread whose ring belongs to
/// another epoch attaches a new ring before logging.
static EPOCH: AtomicU64 = AtomicU64::new(0);
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static PRODUCER: RefCell<Option<ThreadProducer>> = const { RefCell::new(None) };
    static THREAD_NAME: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A thread's producer: its ring and the logger it belongs to.
struct ThreadProducer {
    epoch: u64,
    shared: Arc<Shared>,
    producer: Producer,
    /// Records dropped since the last drop marker was written.
    pending_drops: u64,
    first_drop: u64,
    last_drop: u64,
}

impl Drop for ThreadProducer {
    fn drop(&mut self) {
        // The thread is exiting (or moving to a new logger): report drops not
        // yet reported, then let the flusher free the ring once it is empty.
        if self.pending_drops > 0 && self.shared.running.load(Ordering::Acquire) {
            let deadline = std::time::Instant::now() + Duration::from_millis(100);
            while !self.try_write_drops() && std::time::Instant::now() < deadline {
                self.shared.wake_flusher();
                std::thread::yield_now();
            }
        }
        self.producer.ring().close();
    }
}

impl ThreadProducer {
    fn attach() -> Option<ThreadProducer> {
        let current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = current.as_ref()?.clone();
        drop(current);
        let thread = shared.next_thread.fetch_add(1, Ordering::Relaxed);
        let name = THREAD_NAME
            .try_with(|n| n.borrow().clone())
            .ok()
            .flatten()
            .or_else(|| std::thread::current().name().map(str::to_owned))
            .unwrap_or_default();
        let ring = Arc::new(Ring::new(shared.capacity, thread, name));
        shared
            .new_rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&ring));
        // Release pairs with the flusher's Acquire: it sees the pushed ring.
        shared.has_new_rings.store(true, Ordering::Release);
        shared.counters.threads.fetch_add(1, Ordering::Relaxed);
        Some(ThreadProducer {
            epoch: shared.epoch,
            shared,
            producer: Producer::new(ring),
            pending_drops: 0,
            first_drop: 0,
            last_drop: 0,
        })
    }

    #[inline(always)]
    fn write(&mut self, id: u32, len: usize, enc: impl for<'a> FnOnce(Cursor<'a>)) {
        if self.pending_drops > 0 && !self.try_write_drops() {
            self.dropped(clock::now(), false);
            return;
        }
        if !self.producer.try_reserve(len) && !self.wait_for_room(len) {
            return;
        }
        // The tick is read after the reservation, so a thread's records are
        // in tick order in its ring.
        self.producer.commit_record(id, clock::now(), enc);
    }

    #[cold]
    #[inline(never)]
    fn wait_for_room(&mut self, len: usize) -> bool {
        if self.on_full_drop() {
            // Wake an idle flusher at the start of a run of drops (and now
            // and then during one), so a burst does not wait out its sleep.
            if self.pending_drops % 1024 == 0 {
                self.shared.wake_flusher();
            }
            self.dropped(clock::now(), false);
            return false;
        }
        let mut spins = 0u32;
        loop {
            if self.producer.try_reserve(len) {
                return true;
            }
            if !self.shared.running.load(Ordering::Acquire)
                || self.shared.stop.load(Ordering::Acquire) && spins > 10_000
            {
                self.dropped(clock::now(), false);
                return false;
            }
            spins += 1;
            if spins % 64 == 1 {
                self.shared.wake_flusher();
            }
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn on_full_drop(&self) -> bool {
        self.shared.on_full == OnFull::Drop
    }

    #[cold]
    fn dropped(&mut self, tick: u64, oversize: bool) {
        if self.pending_drops == 0 {
            self.first_drop = tick;
        }
        self.pending_drops += 1;
        self.last_drop = tick;
        self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
        if oversize {
            self.shared
                .counters
                .oversize
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes the pending drop marker; false if the ring has no room for it.
    #[cold]
    fn try_write_drops(&mut self) -> bool {
        if !self.producer.try_reserve(ring::DROPS_LEN) {
            return false;
        }
        self.producer
            .commit_drops(self.pending_drops, self.first_drop, self.last_drop);
        self.pending_drops = 0;
        true
    }
}

/// Logs one record: the entry point of every macro expansion.
///
/// `args_len` is the bytes the encoders write; `kinds` is called once per
/// site, on its first call; `enc` writes the arguments.
#[inline(always)]
pub fn log<const N: usize>(
    site: &'static Site,
    args_len: usize,
    kinds: impl FnOnce() -> [ArgKind; N],
    enc: impl for<'a> FnOnce(Cursor<'a>),
) {
    let id = site.id(kinds);
    let len = (ring::HEADER + args_len + 7) & !7;
    let _ = PRODUCER.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        match slot.as_mut() {
            Some(p) if p.epoch == EPOCH.load(Ordering::Relaxed) => p.log(id, len, enc),
            _ => log_attaching(&mut slot, id, len, enc),
        }
    });
}

#[cold]
#[inline(never)]
fn log_attaching(
    slot: &mut Option<ThreadProducer>,
    id: u32,
    len: usize,
    enc: impl for<'a> FnOnce(Cursor<'a>),
) {
    *slot = None;
    if let Some(p) = ThreadProducer::attach() {
        slot.insert(p).log(id, len, enc);
    }
}

impl ThreadProducer {
    #[inline(always)]
    fn log(&mut self, id: u32, len: usize, enc: impl for<'a> FnOnce(Cursor<'a>)) {
        if len > self.producer.ring().capacity() {
            self.dropped(clock::now(), true);
            return;
        }
        self.write(id, len, enc);
    }
}
