//! Starting and stopping the logger: the builder, the handle, and the
//! process-wide state that says which logger runs.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::channel::{
    lock_current, running, OnFull, Shared, EXITING, GENERATION, NEXT_GENERATION, SLOT_FREED,
};
use crate::error::Error;
use crate::filter::{self, Directives};
use crate::flusher::{self, Compression};
use crate::hooks;
use crate::level::Level;
use crate::mirror::{self, Mirror};
use crate::producer::report_own_drops;
use crate::shared::{self, Stats};

/// Configures and starts a [`Logger`].
#[derive(Debug, Clone)]
pub struct Builder {
    pub(crate) path: PathBuf,
    pub(crate) level: Level,
    filter: Option<String>,
    filter_env: Option<String>,
    pub(crate) staging_capacity: usize,
    pub(crate) on_full: OnFull,
    files: crate::writer::Policy,
    pub(crate) wake_delay: Duration,
    pub(crate) clock_interval: Duration,
    pub(crate) flush_on_signals: bool,
    compression: Compression,
    mirror: Option<mirror::Config>,
    /// `console`: no file, the mirror is the output.
    console: bool,
    crash_safe: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            path: PathBuf::from("nanolog.nlog"),
            level: Level::Info,
            filter: None,
            filter_env: None,
            mirror: None,
            staging_capacity: 1 << 20,
            on_full: OnFull::Block,
            files: crate::writer::Policy::default(),
            wake_delay: Duration::from_millis(1),
            clock_interval: Duration::from_secs(1),
            flush_on_signals: false,
            compression: Compression::Small,
            console: false,
            crash_safe: true,
        }
    }
}

impl Builder {
    /// The log file (default `nanolog.nlog`): the file being written is
    /// always at this path. Finished files (an earlier run's, found here at
    /// start; a rolled one, see [`Builder::rotate_bytes`] and
    /// [`Builder::rotate_every`]) are renamed beside it to
    /// `stem.<number>.<UTC start time>Z.ext` (the file's number in the set,
    /// counted up by the writer whatever the wall clock says, and the time
    /// its header records), so `nanolog decode app.nlog app.*Z.nlog` reads
    /// the whole set in time order. A run never destroys an earlier one.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-path-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("logs/app.nlog")) // logs/ is made if missing
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// The minimum level (default `Info`); [`crate::set_level`] changes it later.
    /// It is the default of [`Builder::filter`]'s directives.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-level-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .level(nanolog::Level::Debug)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    /// Per-target levels, in the syntax of `RUST_LOG`: comma-separated
    /// `target=level` (a target is a module path prefix, or the target a
    /// call or bridge gives), or a bare level for the default, which
    /// otherwise is [`Builder::level`]'s. The longest matching prefix wins;
    /// `off` disables. Example: `"info,my_crate::net=debug,hyper=off"`.
    ///
    /// An invalid directive makes [`Builder::start`] fail with
    /// [`Error::Config`]. [`crate::set_filter`] changes them later.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-filter-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .filter("info,my_crate::db=debug,hyper=off")
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn filter(mut self, directives: &str) -> Self {
        self.filter = Some(directives.to_owned());
        self
    }

    /// Takes the directives from the environment variable `var` (usually
    /// `RUST_LOG`) if it is set and not empty, instead of those of
    /// [`Builder::filter`] and [`Builder::level`]. An invalid directive there
    /// is reported in one line on stderr and skipped; the rest apply.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-filter_env-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .filter("info")
    ///     .filter_env("RUST_LOG") // replaces "info" when RUST_LOG is set
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn filter_env(mut self, var: &str) -> Self {
        self.filter_env = Some(var.to_owned());
        self
    }

    /// No file: the lines `nanolog decode` would print go to stderr, for
    /// records at `level` and above (tests, development). The same macros,
    /// filter and calling-thread cost; `level` is also the filter's default
    /// level. The lines are the text mirror's (see [`Builder::mirror`]):
    /// written by a thread of their own, so a stderr that cannot keep up
    /// skips lines (counted in [`Stats::mirror_skipped`]) rather than
    /// stalling the program. `path`, rolling and retention do not apply.
    ///
    /// ```
    /// // (Through the facade: `nanolog::Logger::builder()`, then
    /// // `nanolog::debug!(...)` calls print on stderr.)
    /// let logger = nanolog_runtime::Logger::builder()
    ///     .console(nanolog_runtime::Level::Debug)
    ///     .start()?;
    /// logger.flush()?;
    /// # Ok::<(), nanolog_runtime::Error>(())
    /// ```
    pub fn console(mut self, level: Level) -> Self {
        self.console = true;
        self.level = level;
        self.mirror(std::io::stderr(), level)
    }

    /// Also writes every record at or above `level` to `writer` as a text
    /// line, the same line `nanolog decode` prints for it (for example
    /// `.mirror(std::io::stderr(), Level::Warn)`, for `kubectl logs` and
    /// journald).
    ///
    /// The lines are rendered on the flusher thread and written by a thread
    /// of their own: the calling threads' cost does not change, and a slow
    /// or broken writer (a closed pipe) never stalls logging. Lines it cannot
    /// keep up with are skipped and counted in [`Stats::mirror_skipped`];
    /// the binary log has every record either way. Across threads, lines
    /// come in the flusher's order (each thread's in its own order), and a
    /// line's time is mapped from the clock calibration known when it was
    /// rendered (within microseconds of `decode`'s).
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-mirror-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .mirror(std::io::stderr(), nanolog::Level::Warn)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn mirror(mut self, writer: impl std::io::Write + Send + 'static, level: Level) -> Self {
        self.mirror = Some(mirror::Config {
            writer: Arc::new(Mutex::new(writer)),
            level,
        });
        self
    }

    /// The directives this builder starts with.
    fn compile_filter(&self) -> Result<Directives, Error> {
        let env = self.filter_env.as_deref().and_then(|var| {
            let v = std::env::var(var).ok().filter(|v| !v.trim().is_empty())?;
            Some((var, v))
        });
        if let Some((var, value)) = env {
            let (directives, warning) = filter::lossy_directives(var, &value);
            if directives.is_empty() {
                // Nothing usable: the builder's filter, not errors only.
                let _ = writeln_stderr(&format!(
                    "nanolog: {var}: no valid directive in `{}`; keeping the configured filter",
                    value.trim()
                ));
            } else {
                if let Some(w) = warning {
                    let _ = writeln_stderr(&w);
                }
                return Directives::new(filter::Config {
                    directives,
                    ..filter::Config::default()
                });
            }
        }
        Directives::new(filter::Config {
            default: Some(self.level),
            directives: self.filter.clone().unwrap_or_default(),
            level: None,
        })
    }

    /// Bytes of each thread's staging ring (default 1 MiB), rounded up to a
    /// power of two; at least 256. A record larger than the ring is dropped
    /// and counted (see `Stats::oversize`).
    ///
    /// A thread's changes to `tracing` spans (spans made, values recorded,
    /// spans closed) wait for the flusher in a budget of their own: a
    /// sixteenth of the ring, between 16 and 256 KiB (64 KiB by default).
    /// Like the ring, a full budget makes the thread wait, or drop under
    /// [`OnFull::Drop`].
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-staging_capacity-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .staging_capacity(4 << 20) // 4 MiB a thread: bursts, or records up to 4 MiB
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn staging_capacity(mut self, bytes: usize) -> Self {
        self.staging_capacity = bytes;
        self
    }

    /// What a call does when its ring is full (default [`OnFull::Block`]),
    /// and a change to a `tracing` span when its thread's span budget is
    /// (see [`Builder::staging_capacity`]): under `Drop` a span's definition
    /// or a value recorded into it is dropped and counted in
    /// `Stats::spans_dropped`, and the records made in that span show their
    /// spans as lost; a span's close is never dropped (it goes past the
    /// budget: there is one for each span the flusher keeps).
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-on_full-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .on_full(nanolog::OnFull::Drop) // never wait; count and report drops
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = on_full;
        self
    }

    /// Rolls to a new file once the live one passes this many bytes. The
    /// file being written is always at [`Builder::path`]; a finished file
    /// is renamed beside it to `stem.<UTC start time>Z.ext`, so the names
    /// sort in time order (see [`Builder::path`]). Each file is complete on
    /// its own (header, clock calibration, dictionary).
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-rotate_bytes-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .rotate_bytes(256 << 20)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn rotate_bytes(mut self, bytes: u64) -> Self {
        self.files.rotate_bytes = Some(bytes);
        self
    }

    /// Rolls to a new file at every UTC minute, hour or day boundary, even
    /// when no record arrives near it (a live file with no record yet is
    /// kept into the next period rather than finished empty). Combines
    /// with [`Builder::rotate_bytes`]: whichever comes first.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-rotate_every-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .rotate_every(nanolog::Rotation::Hourly)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn rotate_every(mut self, every: crate::writer::Rotation) -> Self {
        self.files.rotate_every = Some(every);
        self
    }

    /// Keeps at most `n` finished files of this path's set (the live file
    /// is not counted), deleting the oldest first, at start and after each
    /// roll. Only names of the set's own shape are ever deleted.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-max_files-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .rotate_bytes(64 << 20)
    ///     .max_files(48)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn max_files(mut self, n: usize) -> Self {
        self.files.retention.max_files = Some(n);
        self
    }

    /// Keeps at most `bytes` bytes of finished files of this path's set,
    /// deleting the oldest first (as [`Builder::max_files`]).
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-max_total_bytes-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .rotate_bytes(64 << 20)
    ///     .max_total_bytes(20 << 30)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn max_total_bytes(mut self, bytes: u64) -> Self {
        self.files.retention.max_total_bytes = Some(bytes);
        self
    }

    /// Tests only: shifts the wall clock that time boundaries are decided
    /// by, so a test reaches a minute boundary in seconds.
    #[doc(hidden)]
    #[cfg(feature = "test-hooks")]
    pub fn __rotation_clock_offset(mut self, offset: Duration, ahead: bool) -> Self {
        let ns = offset.as_nanos().min(i64::MAX as u128) as i64;
        self.files.clock_offset_ns = if ahead { ns } else { -ns };
        self
    }

    /// Tests only: also writes one unrotated log of the same run at `path`
    /// (the decode of the rolled set must equal its decode).
    #[doc(hidden)]
    #[cfg(feature = "test-hooks")]
    pub fn __unrotated_copy(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.unrotated_copy = Some(path.into());
        self
    }

    /// The longest the idle flusher sleeps before looking at the rings again
    /// (default 1 ms). Shorter costs CPU when idle; longer delays records.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-wake_delay-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .wake_delay(std::time::Duration::from_millis(5))
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn wake_delay(mut self, delay: Duration) -> Self {
        self.wake_delay = delay;
        self
    }

    /// Whether the flusher compresses what it writes (default `true`):
    /// `true` is [`Compression::Small`], `false` [`Compression::None`].
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-compress-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .compress(false)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn compress(mut self, on: bool) -> Self {
        self.compression = if on {
            Compression::Small
        } else {
            Compression::None
        };
        self
    }

    /// How the flusher compresses what it writes (default
    /// [`Compression::Small`]): a batch goes into the file as one
    /// compressed block when that makes it smaller (FORMAT.md, BLOCK). The
    /// work is the flusher's alone, and only while it works less than half
    /// its time (its compressing counted): busier, it writes batches as
    /// they are, so compression never slows a call or makes one wait for
    /// ring space.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-compression-{}", std::process::id()));
    /// // A log read more than it is kept: blocks that inflate fastest.
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .compression(nanolog::Compression::Fast)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// How often the flusher records a fresh (tick, wall clock) pair (default 1 s).
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-clock_interval-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .clock_interval(std::time::Duration::from_millis(250))
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn clock_interval(mut self, interval: Duration) -> Self {
        self.clock_interval = interval;
        self
    }

    /// Also write out every record logged before a fatal signal (default
    /// `false`): on SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM,
    /// SIGINT, SIGHUP and SIGQUIT the handler wakes the flusher and waits
    /// for it (at most 1 s), then calls the handler installed before
    /// nanolog's, or restores the default action and raises the signal
    /// again, so the process ends as the signal would have ended it. The
    /// handler allocates nothing and takes no lock. On Linux, macOS,
    /// Android and FreeBSD; elsewhere (Windows) accepted and without
    /// effect, so one builder serves every platform.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-flush_on_signals-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .flush_on_signals(true)
    ///     .start()?;
    /// drop(logger);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn flush_on_signals(mut self, on: bool) -> Self {
        self.flush_on_signals = on;
        self
    }

    /// Keep the threads' rings in a file mapped shared beside the log
    /// (`app.nlog.rings`; default `true` on Unix), so that a process
    /// killed by `SIGKILL` or the OOM killer loses no record whose logging
    /// call had returned: the next `start()` on the same path appends
    /// them to the log before its own first record (or `nanolog recover
    /// app.nlog`, for a process that does not come back). The file is
    /// about the rings' size (one [`staging_capacity`](Self::staging_capacity)
    /// per thread logging at once) and is removed when the logger stops.
    /// Where it cannot be made (a read-only directory, a full disk), the
    /// logger keeps ordinary rings and says so once on stderr.
    ///
    /// `false`: ordinary rings (a kill loses what they hold), and no
    /// recovery at start.
    ///
    /// ```
    /// # use nanolog_runtime as nanolog;
    /// # let dir = std::env::temp_dir().join(format!("nanolog-doc-crash_safe-{}", std::process::id()));
    /// let logger = nanolog::Logger::builder()
    ///     .path(dir.join("app.nlog"))
    ///     .start()?;
    /// assert!(dir.join("app.nlog.rings").exists() || !cfg!(unix));
    /// drop(logger); // stopped cleanly: every record written, the rings' file removed
    /// assert!(!dir.join("app.nlog.rings").exists());
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), nanolog::Error>(())
    /// ```
    pub fn crash_safe(mut self, on: bool) -> Self {
        self.crash_safe = on;
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
        let filter = self.compile_filter()?;
        let capacity = self.staging_capacity.max(256).next_power_of_two();
        let mut current = lock_current();
        // A logger being dropped still owns the file until its flusher has
        // exited: wait for it rather than write the file from two flushers.
        while let Some(c) = current.as_ref() {
            if !c.stop.load(Ordering::Acquire) {
                return Err(Error::AlreadyRunning);
            }
            current = SLOT_FREED
                .wait_timeout(current, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let writer = if self.console {
            crate::writer::Writer::discard()?
        } else {
            // The killed writer's records go into its own file, before it
            // is kept as a finished one.
            let crash_safe = self.crash_safe;
            crate::writer::Writer::create(&self.path, self.files.clone(), |path| {
                #[cfg(all(unix, not(loom)))]
                if crash_safe {
                    crate::recovery::recover_at_start(path);
                }
                let _ = (path, crash_safe);
            })?
        };
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared::new(generation, capacity, self.on_full));
        #[cfg(all(unix, not(loom)))]
        if self.crash_safe && !self.console {
            open_area(&shared, writer.path(), capacity);
        }
        let mirror = match self.mirror.clone() {
            Some(m) => Some(
                Mirror::start(m, Arc::clone(&shared), crate::clock::ticks_per_second()).map_err(
                    |source| Error::Spawn {
                        thread: "text mirror",
                        source,
                    },
                )?,
            ),
            None => None,
        };
        let config = flusher::Config {
            wake_delay: self.wake_delay,
            clock_interval: self.clock_interval,
            compression: self.compression,
            mirror,
        };
        let s2 = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("nanolog-flusher".into())
            .spawn(move || flusher::run(s2, writer, config))
            .map_err(|source| Error::Spawn {
                thread: "flusher",
                source,
            })?;
        let _ = shared.flusher.set(handle.thread().clone());
        hooks::install_process_hooks();
        if self.flush_on_signals {
            hooks::install_signal_handlers(&shared).map_err(Error::Signals)?;
        }
        *current = Some(Arc::clone(&shared));
        EXITING.store(false, Ordering::Relaxed);
        // Relaxed: producers compare their ring's generation with this one; a
        // stale read only sends them to the slow path, which takes the lock.
        GENERATION.store(generation, Ordering::Relaxed);
        // `tracing` spans' changes to their threads' mailboxes, for the
        // flusher (see `span::mail`).
        crate::span::mail::go_live(&shared, capacity);
        drop(current);
        filter::activate(filter);
        Ok(Logger {
            shared,
            handle: Some(handle),
        })
    }
}

/// The running logger. Dropping it flushes everything logged, stops the
/// flusher thread and closes the file.
#[derive(Debug)]
#[must_use = "dropping the Logger stops logging at once: keep it alive (`let logger = ...start()?;`) for as long as the program logs"]
pub struct Logger {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl Logger {
    /// A builder with the defaults: `nanolog.nlog`, `Info`, 1 MiB rings,
    /// `OnFull::Block`, no rolling.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Returns once every record logged before the call, by any thread, is
    /// written to the OS. Reports a write error that happened since the last
    /// call.
    pub fn flush(&self) -> Result<(), Error> {
        report_own_drops();
        self.shared.flush(false, None)
    }

    /// Does what [`flush`](Self::flush) does, and returns only once the data
    /// is on stable storage (`fdatasync`): the way to make one record
    /// durable, such as an audit record, while all others stay asynchronous.
    pub fn sync(&self) -> Result<(), Error> {
        report_own_drops();
        self.shared.flush(true, None)
    }

    /// The logger's counters.
    pub fn stats(&self) -> Stats {
        shared::snapshot(&self.shared.counters)
    }

    /// Benchmarks only: while held, the flusher takes no records, so a
    /// benchmark can time its own calls with no flusher reading the ring,
    /// then time the flusher draining what they wrote. A flush waits for the
    /// release (`hold(false)`); stopping the logger ends the hold.
    #[doc(hidden)]
    #[cfg(feature = "test-hooks")]
    pub fn __hold_flusher(&self, hold: bool) {
        // Release/Acquire with the flusher's load: records logged before a
        // release are seen by the pass that sees it.
        self.shared.held.store(hold, Ordering::Release);
        if !hold {
            self.shared.wake_flusher();
        }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        if !self.shared.in_owner_process() {
            // A forked child's copy: the flusher and the file are the parent's.
            return;
        }
        report_own_drops();
        {
            // Under the CURRENT lock: no `start` or `flush` sees a logger
            // that is neither running nor stopping.
            let current = lock_current();
            if current
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &self.shared))
            {
                filter::deactivate();
                GENERATION.store(0, Ordering::Relaxed);
            }
            self.shared.begin_stop();
        }
        hooks::forget_signal_target(&self.shared);
        self.shared.wake_flusher();
        // Bounded: a flusher stuck in a write (a FIFO nobody reads, a hung
        // network filesystem) is left behind after STALL_LIMIT without
        // progress, rather than hanging the program.
        let exited = self.shared.wait_stopped();
        if let Some(h) = self.handle.take() {
            if exited {
                let _ = h.join();
            }
        }
        // Every record written: the rings' file is not needed. (A stuck
        // flusher's is kept, for the next start to recover.)
        #[cfg(all(unix, not(loom)))]
        if exited {
            self.shared.close_area();
        }
        if !exited {
            let _ = writeln_stderr(
                "nanolog: the flusher thread made no progress for 10 s; \
                 stopping without it (records it still holds are lost)",
            );
            self.shared.running.store(false, Ordering::Release);
        }
        // `tracing` spans' changes to the table directly from now on: the
        // flusher handed its spans back as it ended; one that stalled (or
        // died) did not, and what the mailboxes hold goes there now.
        crate::span::mail::go_direct();
        let mut current = lock_current();
        if current
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &self.shared))
        {
            *current = None;
        }
        drop(current);
        SLOT_FREED.notify_all();
    }
}

/// Gives a starting logger its crash-safe area (`crate::crash`), or says
/// once on stderr why it keeps ordinary rings.
#[cfg(all(unix, not(loom)))]
fn open_area(shared: &Shared, log: &std::path::Path, capacity: usize) {
    let made = crate::crash::Area::create(log, capacity).and_then(|a| {
        if crate::site::attach_dictionary(&a) {
            Ok(a)
        } else {
            a.remove();
            Err(std::io::Error::other("no room for the call sites' entries"))
        }
    });
    match made {
        Ok(a) => {
            let _ = shared.area.set(a);
        }
        Err(e) => {
            let _ = writeln_stderr(&format!(
                "nanolog: cannot keep the rings in {} ({e}): logging with ordinary rings, which a kill -9 loses",
                crate::crash::area_path(log).display()
            ));
        }
    }
}

fn writeln_stderr(msg: &str) -> std::io::Result<()> {
    use std::io::Write;
    writeln!(std::io::stderr(), "{msg}")
}

/// Flushes the running logger, if any (see [`Logger::flush`]).
pub fn flush() -> Result<(), Error> {
    match running() {
        Some(s) => {
            report_own_drops();
            s.flush(false, None)
        }
        None => Ok(()),
    }
}

/// Syncs the running logger, if any (see [`Logger::sync`]).
pub fn sync() -> Result<(), Error> {
    match running() {
        Some(s) => {
            report_own_drops();
            s.flush(true, None)
        }
        None => Ok(()),
    }
}
