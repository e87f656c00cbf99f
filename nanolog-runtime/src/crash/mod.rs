//! Nothing lost at `kill -9`: a logger that writes a file keeps its
//! threads' rings in pages of a file mapped shared beside the log
//! (`app.nlog.rings`, the "area"), which the kernel keeps when the process
//! dies however it dies (`SIGKILL`, the OOM killer). The flusher hands a
//! ring's room back (an eighth of it at a time, as with ordinary rings)
//! once what it compacted from it is committed to the area's OUT region,
//! which empties when the write that carries it returns
//! (`flusher::stage`): the area holds every record the log lacks, and says
//! where the log's bytes end. The next `start()` on the path, or
//! `nanolog recover`, appends those records to the log, exactly once
//! (`crate::recovery`).
//!
//! What a recovery needs besides the rings goes into the area as it comes
//! into being, off the logging call's path: each call site's SITE entry as
//! it registers (`crate::site`), each ring's thread and name as it
//! attaches, the clock's pairs as the flusher takes them. Span
//! definitions do not: recovered records inside spans say `<spans lost>`.
//!
//! Unix only (memory-mapped files and `posix_fallocate`); elsewhere, and
//! under loom, loggers keep ordinary rings.

#[cfg(all(unix, not(loom)))]
pub(crate) mod layout;

#[cfg(all(unix, not(loom)))]
mod area;

#[cfg(all(unix, not(loom)))]
pub(crate) use area::{Area, Slot};

use std::path::{Path, PathBuf};

/// The area beside the log at `log`: `app.nlog.rings`.
pub fn area_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".rings");
    log.with_file_name(name)
}

/// Where an area that is not read is moved (`app.nlog.rings.kept-<seconds>`):
/// out of the next start's way, never overwritten, never decoded.
#[cfg(all(unix, not(loom)))]
pub(crate) fn kept_path(area: &Path) -> PathBuf {
    let mut name = area.as_os_str().to_owned();
    name.push(format!(".kept-{}", crate::clock::unix_ns() / 1_000_000_000));
    PathBuf::from(name)
}
