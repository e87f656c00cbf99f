//! Reading nanolog files: the header, the dictionary, and the records, typed
//! and unformatted. Formatting a record is a separate call ([`Record::render`]).
//!
//! ```no_run
//! use nanolog_runtime::reader::{LogFile, Value};
//!
//! let log = LogFile::open("app.nlog")?;
//! for rec in log.records() {
//!     let rec = rec?;
//!     if let Some(Value::Uint(n)) = rec.arg(0) {
//!         println!("{} {} {}", rec.unix_ns(), rec.site().format, n);
//!     }
//! }
//! # Ok::<(), nanolog_runtime::reader::ReadError>(())
//! ```
//!
//! [`Merge`] interleaves the threads of one or more files into time order.

mod error;
mod extent;
mod file;
mod inflate;
mod map;
mod merge;
mod record;
mod spans;
mod time;
mod trace;
mod warning;

pub use crate::set::{
    finished_files, finished_files_keyed, finished_path, finished_path_seq, next_after_seq,
    next_in_set, read_header, resolve_log_path, set_base_of, SetKey, SetListing,
};
pub use crate::text::utc::rfc3339;
pub use crate::wire::dict::SiteEntry;
pub use crate::wire::format::{Align, ArgKind, Count, Piece, Role, Spec, Ty};
pub use crate::wire::header::{Header, HeaderError};
pub use crate::wire::record::{HexStr, NumberedStr, PreformattedStrs, Value};
pub use crate::wire::totals::Totals;
pub use error::ReadError;
pub use extent::ExtentRecords;
pub use file::{
    __set_read_resident, BlockStats, Gap, LogFile, Refresh, SpanRef, ThreadInfo, Want, Wave,
};
pub use merge::{Batch, Batches, Event, Filter, Merge};
pub use record::{Head, Record};
pub use time::{ClockGroups, TimeMap};
pub use trace::TraceContext;
pub use warning::{Warning, LISTED_DAMAGE};
