//! Each logger set up as its users would for a file, lossless: a full queue
//! blocks the caller. Every one writes the time, the level, the call site
//! and the message of each call (nanolog in binary, the others as text).

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

pub type Ops = [crate::common::Op; 6];

pub trait Peer {
    /// The six calls.
    fn ops(&self) -> Ops;
    /// Hands everything logged to the OS (flush, or stop and join): the
    /// end of a timed run.
    fn finish(&mut self);
    /// Stops the logger after the timing, if `finish` left it running.
    fn close(&mut self) {}
    /// Calls found in the file at `path`.
    fn count(&self, path: &str) -> u64 {
        let bytes = std::fs::read(path).unwrap_or_default();
        bytes.iter().filter(|&&b| b == b'\n').count() as u64
    }
}

pub fn start(logger: &str, path: &str) -> Box<dyn Peer> {
    match logger {
        "nanolog" => Box::new(Nanolog::start(path)),
        "ticklog" => Box::new(Ticklog::start(path)),
        "spdlog-rs" => Box::new(Spdlog::start(path)),
        "ftlog" => Box::new(Ftlog::start(path)),
        "fast_log" => Box::new(FastLog::start(path)),
        "slog-async" => Box::new(SlogAsync::start(path)),
        "tracing-appender" => Box::new(TracingAppender::start(path)),
        "bufwriter" => Box::new(BufWriterBaseline::start(path)),
        other => panic!("unknown logger {other}"),
    }
}

/// nanolog: defaults (1 MiB rings, `OnFull::Block`); `NANOLOG_BENCH_RING`
/// sets another ring size in bytes (for `run`).
struct Nanolog(Option<nanolog::Logger>);

impl Nanolog {
    fn start(path: &str) -> Self {
        let mut b = nanolog::Logger::builder().path(path);
        if let Some(bytes) = std::env::var("NANOLOG_BENCH_RING")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            b = b.staging_capacity(bytes);
        }
        Nanolog(Some(b.start().expect("nanolog")))
    }
}

impl Peer for Nanolog {
    fn ops(&self) -> Ops {
        table3_calls!(nanolog::info)
    }
    fn finish(&mut self) {
        // Until `flush()` returns: everything logged is in the file, handed
        // to the OS, as C++ NanoLog's `sync()` (its file opened without
        // O_DSYNC) and the other peers' flush. Stopping the logger also
        // `fdatasync`s the file, waiting for the disk: that is `close`,
        // after the timing.
        if let Some(l) = &self.0 {
            l.flush().expect("flush");
        }
    }
    fn close(&mut self) {
        self.0 = None;
    }
    fn count(&self, path: &str) -> u64 {
        nanolog::reader::LogFile::open(path)
            .map(|f| f.records().filter(Result::is_ok).count() as u64)
            .unwrap_or(0)
    }
}

/// ticklog 0.1.2: `FileSink`, `Backpressure::Block`, default line pattern
/// (time, level, file:line, message). Flushed by dropping its guard. (Set
/// up at the crate root: its `configure!` defines helper macros there.)
struct Ticklog(Option<ticklog::Guard>);

impl Ticklog {
    fn start(path: &str) -> Self {
        Ticklog(Some(crate::ticklog_start(path)))
    }
}

impl Peer for Ticklog {
    fn ops(&self) -> Ops {
        crate::ticklog_ops()
    }
    fn finish(&mut self) {
        self.0 = None;
    }
}

/// spdlog-rs 0.5.3: `AsyncPoolSink` (one worker thread) over a `FileSink`,
/// `OverflowPolicy::Block`, default pattern. Flushed, then the pool is
/// dropped, which joins its worker once the queue is empty.
struct Spdlog;

impl Spdlog {
    fn start(path: &str) -> Self {
        use spdlog::sink::{AsyncPoolSink, FileSink, OverflowPolicy};
        let file = Arc::new(
            FileSink::builder()
                .path(path)
                .truncate(true)
                .build()
                .expect("spdlog file"),
        );
        let pool = Arc::new(
            AsyncPoolSink::builder()
                .sink(file)
                .overflow_policy(OverflowPolicy::Block)
                .build()
                .expect("spdlog pool"),
        );
        let logger = spdlog::Logger::builder()
            .sink(pool)
            .build()
            .expect("spdlog logger");
        spdlog::set_default_logger(Arc::new(logger));
        Spdlog
    }
}

macro_rules! spdlog_info {
    ($($t:tt)*) => { spdlog::info!($($t)*) };
}

impl Peer for Spdlog {
    fn ops(&self) -> Ops {
        table3_calls!(spdlog_info)
    }
    fn finish(&mut self) {
        let quiet = spdlog::Logger::builder().build().expect("spdlog logger");
        let old = spdlog::swap_default_logger(Arc::new(quiet));
        old.flush();
        drop(old);
    }
}

/// ftlog 0.2.18: `FileAppender`, `bounded(100_000, block = true)`, its own
/// format. `log::logger().flush()` waits for the writer thread.
struct Ftlog(Option<ftlog::LoggerGuard>);

impl Ftlog {
    fn start(path: &str) -> Self {
        let guard = ftlog::builder()
            .bounded(100_000, true)
            .root(ftlog::appender::FileAppender::new(path))
            .build()
            .expect("ftlog")
            .init()
            .expect("ftlog init");
        Ftlog(Some(guard))
    }
}

macro_rules! log_info {
    ($($t:tt)*) => { log::info!($($t)*) };
}

impl Peer for Ftlog {
    fn ops(&self) -> Ops {
        table3_calls!(log_info)
    }
    fn finish(&mut self) {
        log::logger().flush();
        self.0 = None;
    }
}

/// fast_log 1.7.10: `Config::file`, a bounded channel of 100,000 (`send`
/// blocks when full). `fast_log::flush()?.wait()` waits for the writer.
struct FastLog;

impl FastLog {
    fn start(path: &str) -> Self {
        fast_log::init(
            fast_log::Config::new()
                .file(path)
                .chan_len(Some(100_000))
                .level(log::LevelFilter::Info),
        )
        .expect("fast_log");
        FastLog
    }
}

impl Peer for FastLog {
    fn ops(&self) -> Ops {
        table3_calls!(log_info)
    }
    fn finish(&mut self) {
        fast_log::flush().expect("fast_log flush").wait();
    }
}

/// slog 2.8 + slog-async 2.8: a plain-text line (time, level, file:line,
/// message) written by an `Async` drain, `OverflowStrategy::Block`, channel
/// of 100,000. Flushed by dropping its guard (joins the drain thread).
struct SlogAsync(Option<slog_async::AsyncGuard>);

static SLOG: OnceLock<slog::Logger> = OnceLock::new();

/// Writes `time level file:line message` lines.
struct LineDrain(Mutex<std::io::BufWriter<std::fs::File>>);

impl slog::Drain for LineDrain {
    type Ok = ();
    type Err = std::io::Error;
    fn log(&self, r: &slog::Record<'_>, _: &slog::OwnedKVList) -> std::io::Result<()> {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(
            w,
            "{ns} {} {}:{} {}",
            r.level().as_short_str(),
            r.file(),
            r.line(),
            r.msg()
        )
    }
}

impl Drop for LineDrain {
    fn drop(&mut self) {
        let _ = self.0.lock().map(|mut w| w.flush());
    }
}

impl SlogAsync {
    fn start(path: &str) -> Self {
        let file = std::fs::File::create(path).expect("slog file");
        let drain = LineDrain(Mutex::new(std::io::BufWriter::new(file)));
        let (drain, guard) = slog_async::Async::new(slog::Drain::ignore_res(drain))
            .chan_size(100_000)
            .overflow_strategy(slog_async::OverflowStrategy::Block)
            .build_with_guard();
        let logger = slog::Logger::root(slog::Drain::fuse(drain), slog::o!());
        let _ = SLOG.set(logger);
        SlogAsync(Some(guard))
    }
}

macro_rules! slog_info {
    ($($t:tt)*) => { slog::info!(SLOG.get().expect("slog logger"), $($t)*) };
}

impl Peer for SlogAsync {
    fn ops(&self) -> Ops {
        table3_calls!(slog_info)
    }
    fn finish(&mut self) {
        self.0 = None;
    }
}

/// tracing 0.1 + tracing-subscriber's `fmt` layer (no ANSI) writing through
/// tracing-appender's `non_blocking` to a file, `lossy(false)` (a full
/// channel blocks). Flushed by dropping its `WorkerGuard` (joins the writer).
struct TracingAppender(Option<tracing_appender::non_blocking::WorkerGuard>);

impl TracingAppender {
    fn start(path: &str) -> Self {
        let file = std::fs::File::create(path).expect("tracing file");
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(false)
            .finish(file);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .with_file(true)
            .with_line_number(true)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("tracing");
        TracingAppender(Some(guard))
    }
}

macro_rules! tracing_info {
    ($($t:tt)*) => { tracing::info!($($t)*) };
}

impl Peer for TracingAppender {
    fn ops(&self) -> Ops {
        table3_calls!(tracing_info)
    }
    fn finish(&mut self) {
        self.0 = None;
    }
}

/// The synchronous baseline: each call formats `time level file:line
/// message` into a `BufWriter<File>` (64 KiB) behind a mutex, on the
/// calling thread.
struct BufWriterBaseline;

static BUF: OnceLock<Mutex<std::io::BufWriter<std::fs::File>>> = OnceLock::new();

impl BufWriterBaseline {
    fn start(path: &str) -> Self {
        let file = std::fs::File::create(path).expect("baseline file");
        let _ = BUF.set(Mutex::new(std::io::BufWriter::with_capacity(1 << 16, file)));
        BufWriterBaseline
    }
}

macro_rules! buf_info {
    ($($t:tt)*) => {{
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut w = BUF.get().expect("baseline").lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(w, "{ns} INFO {}:{} {}", file!(), line!(), format_args!($($t)*));
    }};
}

impl Peer for BufWriterBaseline {
    fn ops(&self) -> Ops {
        table3_calls!(buf_info)
    }
    fn finish(&mut self) {
        if let Some(b) = BUF.get() {
            let _ = b.lock().unwrap_or_else(|e| e.into_inner()).flush();
        }
    }
}
