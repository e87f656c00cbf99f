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

pub mod clock;
mod encode;
mod error;
mod flusher;
mod hooks;
mod level;
mod logger;
mod producer;
pub mod reader;
mod ring;
mod shared;
mod site;
mod sync;
pub mod wire;
mod writer;

pub use error::Error;
pub use level::{set_level, Level, ParseLevelError};
pub use logger::{flush, sync, Builder, Logger};
pub use producer::set_thread_name;
pub use shared::{OnFull, Stats};
pub use site::{Align, ArgKind, Count, Piece, Spec, Ty};
pub use writer::rotated_path;

/// What macro expansions use. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::encode::{
        encode, encoded_len, fmt_closure, kind_of, Encode, Preformatted, PrepFmt, PrepRaw,
        SlotWriter, Wrap,
    };
    pub use crate::level::enabled_at_runtime;
    pub use crate::producer::log;
    pub use crate::site::Site;
}
