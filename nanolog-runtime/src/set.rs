//! The names of a log's set of files on disk: the live file at the configured path, and
//! the finished files beside it, named by the UTC time each one started so
//! that their names sort in time order:
//!
//! ```text
//! app.nlog                                  the live file (always this name)
//! app.20261123T150000.000121337Z.nlog       finished: started 15:00:00.000121337 UTC
//! app.20261123T160000.000098312Z.nlog       finished: the next one
//! ```
//!
//! Two files that started in the same nanosecond get `...Z.1.nlog`,
//! `...Z.2.nlog`. Retention deletes only names of exactly this shape, so
//! another program's files beside the log are never touched.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::wire::{self, header::Header};

/// The name a finished file of the set at `base` gets:
/// `app.20261123T153100.123456789Z.nlog` for a file whose header says it
/// started at 2026-11-23 15:31:00.123456789 UTC.
pub fn finished_path(base: &Path, start_unix_ns: i64) -> PathBuf {
    finished_path_n(base, start_unix_ns, 0)
}

/// The stem and extension the set's names are built from.
fn stem_ext(base: &Path) -> (String, Option<String>) {
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = base.extension().map(|e| e.to_string_lossy().into_owned());
    (stem, ext)
}

/// [`finished_path`] with a suffix `n` (`...Z.n.nlog`) when `n > 0`.
pub(crate) fn finished_path_n(base: &Path, start_unix_ns: i64, n: u32) -> PathBuf {
    let mut t = String::new();
    crate::text::utc::write_utc(&mut t, start_unix_ns, 'T');
    let stamp: String = t.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let (stem, ext) = stem_ext(base);
    let suffix = if n > 0 {
        format!(".{n}")
    } else {
        String::new()
    };
    let name = match ext {
        Some(ext) => format!("{stem}.{stamp}Z{suffix}.{ext}"),
        None => format!("{stem}.{stamp}Z{suffix}"),
    };
    base.with_file_name(name)
}

/// The sort key of a finished file's name of the set at `base`, or `None`
/// if `name` is not one (another program's file, the live file, a name of
/// another set).
pub(crate) fn finished_key(base: &Path, name: &str) -> Option<(String, u32)> {
    let (stem, ext) = stem_ext(base);
    let rest = name.strip_prefix(&stem)?.strip_prefix('.')?;
    let rest = match &ext {
        Some(ext) => rest.strip_suffix(ext.as_str())?.strip_suffix('.')?,
        None => rest,
    };
    // YYYYMMDDTHHMMSS.nnnnnnnnnZ, then optionally .N
    let (stamp, n) = match rest.split_once("Z.") {
        Some((stamp, n)) => (stamp, n.parse::<u32>().ok()?),
        None => (rest.strip_suffix('Z')?, 0),
    };
    let b = stamp.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let ok = b.len() == 25
        && digits(0..8)
        && b[8] == b'T'
        && digits(9..15)
        && b[15] == b'.'
        && digits(16..25);
    ok.then(|| (stamp.to_owned(), n))
}

/// The finished files of the set at `base`, oldest first, with their sizes.
/// The live file is not among them.
pub fn finished_files(base: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    let dir = match base.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(|n| finished_key(base, n)) else {
            continue;
        };
        let meta = entry.metadata()?;
        if meta.is_file() {
            found.push((key, base.with_file_name(&name), meta.len()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p, len)| (p, len)).collect())
}

/// The file of the set at `base` that follows one that began at
/// `after_unix_ns` and was read to its end (it rolled over, or its run
/// ended): the first finished file that began later, whichever process
/// wrote it, else the live file at `base`. A reader following the log may be several rolls, or
/// a restart and several rolls, behind the writer; finished names sort in
/// time order.
pub fn next_in_set(base: &Path, after_unix_ns: i64) -> PathBuf {
    finished_files(base)
        .unwrap_or_default()
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| read_header(p).is_some_and(|h| h.base_unix_ns > after_unix_ns))
        .unwrap_or_else(|| base.to_path_buf())
}

/// The header of the log at `path`, if it has a valid one.
pub(crate) fn read_header(path: &Path) -> Option<Header> {
    let mut head = [0u8; wire::HEADER_LEN];
    File::open(path)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut head))
        .ok()?;
    Header::decode(&head).ok()
}
