//! The runtime of nanolog: per-thread staging rings, the TSC clock, the
//! flusher thread and file writer, and the reader of the binary log.
//!
//! Applications use it through the `nanolog` facade crate, which adds the
//! logging macros. Tools that read logs can depend on this crate alone and use
//! [`reader`].
//!
//! The file format is specified in FORMAT.md at the repository root and in
//! the [`wire`] module.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(any(feature = "log", feature = "tracing"))]
mod bridge;
mod channel;
pub mod clock;
#[doc(hidden)]
pub mod compact;
mod crash;
mod encode;
mod error;
mod fileset;
mod filter;
mod flusher;
mod hooks;
mod intern;
mod level;
mod logger;
#[cfg(all(test, loom))]
mod loom_stop;
mod mirror;
mod pressure;
mod producer;
pub mod reader;
#[cfg(all(unix, not(loom)))]
mod recovery;
mod ring;
mod set;
mod shared;
// Signals, exit and fork hooks, and the reader's SIGBUS guard: on the Unix
// systems whose errno slot `signals::errno` knows.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
mod signals;
mod site;
mod span;
mod sync;
#[doc(hidden)]
pub mod text;
pub mod wire;
mod writer;

#[cfg(feature = "log")]
pub use bridge::log::capture_log;
#[cfg(feature = "tracing")]
pub use bridge::tracing::{tracing_layer, NanologFilter, NanologLayer};
#[cfg(any(feature = "log", feature = "tracing"))]
pub use bridge::MAX_SITES as MAX_BRIDGE_SITES;
pub use channel::OnFull;
pub use crash::area_path;
pub use error::Error;
pub use filter::{set_filter, set_level};
pub use flusher::Compression;
pub use level::{Level, ParseLevelError};
pub use logger::{flush, sync, Builder, Logger};
pub use producer::set_thread_name;
#[cfg(all(unix, not(loom)))]
pub use recovery::{recover, RecoverError, Recovery};
pub use set::{finished_files, finished_path};
pub use shared::Stats;
pub use span::SpanGuard;
pub use wire::format::{Align, ArgKind, Count, Piece, Spec, Ty};
pub use writer::{host_name, Rotation};

/// Tests only: the `tracing` span definitions the process holds for the
/// flusher, and the changes to them waiting in threads' mailboxes.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn __tracing_spans_held() -> (usize, usize) {
    span::mail::held()
}

#[doc(hidden)]
pub use writer::__set_checkpoint_bytes;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use writer::__stop_flusher_at;

/// What macro expansions use. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::compact::{compactor, type_of};
    pub use crate::encode::{
        encode, encoded_len, fmt_closure, kind_of, Encode, Preformatted, PrepFmt, PrepRaw,
        SlotWriter, Wrap,
    };
    pub use crate::producer::{log, log_span};
    pub use crate::site::Site;
    pub use crate::span::{span_key, SpanGuard};
}
