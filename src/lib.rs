//! nanolog: nanosecond-scale binary logging for Rust.
//!
//! A logging call checks its level, then copies its raw arguments into the
//! calling thread's own ring, stamped with the CPU's time-stamp counter. No
//! formatting, no lock, no allocation, no system call. A flusher thread drains
//! the rings, compacts each record to a few bytes and writes the binary log;
//! the `nanolog` command (or [`reader`]) turns it back into text, filters it
//! and aggregates it offline.
//!
//! ```no_run
//! let logger = nanolog::Logger::builder()
//!     .path("app.nlog")
//!     .level(nanolog::Level::Info)
//!     .start()?;
//! let ms = 12;
//! nanolog::info!("ready after {} ms", ms);
//! nanolog::warn!("queue {name} at {pct:.1}%", name = "orders", pct = 93.25);
//! logger.flush()?;
//! # Ok::<(), nanolog::Error>(())
//! ```
//!
//! # Format strings
//!
//! The macros take Rust's `format!` syntax, checked at compile time, and the
//! decoded message equals `format!` of the same literal and arguments.
//! Integers, floats, `bool`, `char`, `&str` and `String` are recorded in
//! binary. Any other `Display` or `Debug` type is formatted on the calling
//! thread (the slow path: it allocates).
//!
//! # Levels
//!
//! A disabled call costs one relaxed load and a branch and does not evaluate
//! its arguments. The Cargo features `max_level_*` and `release_max_level_*`
//! (as in the `log` crate) remove calls below a level at compile time.
//!
//! # Features
//!
//! - `max_level_off`, `max_level_error`, ..., `max_level_trace`: compile-time cap.
//! - `release_max_level_*`: the same, for builds without `debug_assertions`.
//! - `log`: `capture_log()`, records of the `log` crate into nanolog.
//! - `tracing`: `tracing_layer()`, `tracing` events into nanolog.

#![deny(missing_docs)]

/// Logs at `Level::Trace`. See [`info!`] for what every macro accepts.
///
/// ```
/// let payload = [0u8; 3];
/// nanolog::trace!("frame {} bytes, first {:#04x}", payload.len(), payload[0]);
/// ```
pub use nanolog_macros::trace;

/// Logs at `Level::Debug`. See [`info!`] for what every macro accepts.
///
/// ```
/// let (hits, misses) = (97u64, 3u64);
/// nanolog::debug!("cache {hits} hits, {misses} misses ({:.1}%)", 100.0 * hits as f64 / 100.0);
/// ```
pub use nanolog_macros::debug;

/// Logs at `Level::Info`.
///
/// The format string is Rust's `format!` syntax, checked at compile time:
/// positional and named arguments, inline captures, width, precision,
/// alignment, `{:?}`, `{:x}` and the other traits. Integers, floats,
/// `bool`, `char`, `&str` and `String` are copied raw into the calling
/// thread's ring (formatted later, offline); any other `Display`/`Debug`
/// value is formatted at the call. An optional `target: "name",` comes
/// first (default: the module path). Arguments are not evaluated when the
/// call's level is disabled.
///
/// ```
/// let (user, ms) = ("alice", 12.5f64);
/// nanolog::info!("login {user} took {ms:.1} ms");
/// nanolog::info!(target: "audit", "user {} read {} rows", user, 3);
/// nanolog::info!("queue {name} at {pct:>6.2}%", name = "orders", pct = 93.25);
/// nanolog::info!("peer {:?}", std::net::Ipv4Addr::LOCALHOST); // formatted at the call
/// ```
pub use nanolog_macros::info;

/// Logs at `Level::Warn`. See [`info!`] for what every macro accepts.
///
/// ```
/// let retries = 3;
/// nanolog::warn!(target: "db::pool", "connection lost, retry {retries} of 5");
/// ```
pub use nanolog_macros::warn;

/// Logs at `Level::Error`. See [`info!`] for what every macro accepts.
///
/// ```
/// let err = std::io::Error::other("disk full");
/// nanolog::error!("write failed: {}", err);
/// ```
pub use nanolog_macros::error;

/// Logs at a level known only at run time. See [`info!`] for what every
/// macro accepts.
///
/// ```
/// let level = if cfg!(debug_assertions) { nanolog::Level::Debug } else { nanolog::Level::Info };
/// nanolog::log!(level, "built with {} threads", 4);
/// ```
pub use nanolog_macros::log;

/// Enters a span on this thread until the returned [`SpanGuard`] is
/// dropped: `let _s = nanolog::span!("request", id = 7, user = name);`.
///
/// Every record the thread makes meanwhile (nanolog's macros, `log`,
/// `tracing`) carries the span, outermost first when spans nest: `decode`
/// prints `request{id=7 user="ann"}: ` before the message, JSON and export
/// list it under `spans`. The fields are written once, when the span is
/// entered; the records inside cost what records outside cost. Fields
/// show as `Debug` (strings quoted), or as `Display` with `%`:
/// `span!("db", %table)`. A field without a value captures the variable of
/// that name.
///
/// ```
/// # let _ = std::fs::remove_file("span-doc.nlog");
/// let _logger = nanolog::Logger::builder().path("span-doc.nlog").start().unwrap();
/// let user = "ann";
/// {
///     let _s = nanolog::span!("request", id = 7, user);
///     nanolog::info!("loaded {} rows", 3); // ... request{id=7 user="ann"}: loaded 3 rows
/// }
/// # drop(_logger);
/// # let _ = std::fs::remove_file("span-doc.nlog");
/// ```
pub use nanolog_macros::span;
pub use nanolog_runtime::area_path;
#[cfg(feature = "log")]
pub use nanolog_runtime::capture_log;
pub use nanolog_runtime::SpanGuard;
pub use nanolog_runtime::{
    flush, reader, set_filter, set_level, set_thread_name, sync, Builder, Compression, Error,
    Level, Logger, OnFull, ParseLevelError, Rotation, Stats,
};
/// What a killed process's rings held, written into its log (README, "What
/// survives what"): what the next `start()` on the path does itself, for a
/// process that does not come back (as `nanolog recover PATH`).
#[cfg(unix)]
pub use nanolog_runtime::{recover, RecoverError, Recovery};
#[cfg(feature = "tracing")]
pub use nanolog_runtime::{tracing_layer, NanologFilter, NanologLayer};

/// The README's Rust blocks, compiled and run as doctests: a user who
/// copies one gets what it says. (Its set-up uses both bridges: it runs
/// where they are on, as in `cargo test --workspace`.)
#[cfg(all(doctest, feature = "log", feature = "tracing"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// What macro expansions use. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use nanolog_runtime::__private::*;
    pub use nanolog_runtime::{Align, ArgKind, Count, Level, Piece, Spec, Ty};
    pub use std::borrow::Cow;

    /// The most verbose level compiled in, from the `max_level_*` features.
    pub const STATIC_MAX_LEVEL: u8 = static_max_level();

    const fn static_max_level() -> u8 {
        // 0 = trace ... 4 = error, 5 = off: calls below it are compiled out.
        if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_off"
        )) {
            5
        } else if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_error"
        )) {
            4
        } else if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_warn"
        )) {
            3
        } else if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_info"
        )) {
            2
        } else if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_debug"
        )) {
            1
        } else if cfg!(all(
            not(debug_assertions),
            feature = "release_max_level_trace"
        )) {
            0
        } else if cfg!(feature = "max_level_off") {
            5
        } else if cfg!(feature = "max_level_error") {
            4
        } else if cfg!(feature = "max_level_warn") {
            3
        } else if cfg!(feature = "max_level_info") {
            2
        } else if cfg!(feature = "max_level_debug") {
            1
        } else {
            0
        }
    }

    /// Whether calls at `level` are compiled in (the `max_level_*` cap);
    /// folded away at compile time. The run-time test is the site's own
    /// (`Site::enabled`).
    #[inline(always)]
    // With no cap feature the test is `>= 0`: always true, and meant to fold away.
    #[allow(clippy::absurd_extreme_comparisons)]
    pub const fn compiled_in(level: Level) -> bool {
        level as u8 >= STATIC_MAX_LEVEL
    }
}
