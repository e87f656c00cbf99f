//! A log's set of files on disk: the live file at the configured path, and
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

use crate::error::Error;
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
fn finished_path_n(base: &Path, start_unix_ns: i64, n: u32) -> PathBuf {
    let mut t = String::new();
    crate::reader::time::write_utc(&mut t, start_unix_ns, 'T');
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

/// The finished name for the file `meta` describes, of the set at `base`,
/// started at `start_unix_ns`: the first of `...Z.nlog`, `...Z.1.nlog`, ...
/// that is free, or that already is a link to that very file (a roll that
/// died between linking and renaming leaves one). The flag says which.
pub(crate) fn finished_slot(
    base: &Path,
    start_unix_ns: i64,
    meta: &std::fs::Metadata,
) -> (PathBuf, bool) {
    for n in 0..1000 {
        let t = finished_path_n(base, start_unix_ns, n);
        match std::fs::symlink_metadata(&t) {
            Err(_) => return (t, false),
            Ok(_) if same_file(meta, &t) => return (t, true),
            Ok(_) => {}
        }
    }
    (finished_path_n(base, start_unix_ns, u32::MAX), false)
}

/// The sort key of a finished file's name of the set at `base`, or `None`
/// if `name` is not one (another program's file, the live file, a name of
/// another set).
fn finished_key(base: &Path, name: &str) -> Option<(String, u32)> {
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

/// How many finished files, and how many bytes of them, to keep.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Retention {
    pub(crate) max_files: Option<usize>,
    pub(crate) max_total_bytes: Option<u64>,
}

impl Retention {
    fn is_set(&self) -> bool {
        self.max_files.is_some() || self.max_total_bytes.is_some()
    }

    /// Deletes the oldest finished files of the set at `base` until at most
    /// `max_files` of them, and `max_total_bytes` of their bytes, are left.
    /// Returns the first error met; it goes on past a file it cannot delete.
    pub(crate) fn apply(&self, base: &Path) -> io::Result<()> {
        if !self.is_set() {
            return Ok(());
        }
        let files = finished_files(base)?;
        let mut count = files.len();
        let mut total: u64 = files.iter().map(|(_, len)| len).sum();
        let mut first_err = None;
        for (path, len) in files {
            let too_many = self.max_files.is_some_and(|m| count > m);
            let too_big = self.max_total_bytes.is_some_and(|m| total > m);
            if !too_many && !too_big {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_err.get_or_insert_with(|| {
                        io::Error::new(
                            e.kind(),
                            format!("cannot delete old log {}: {e}", path.display()),
                        )
                    });
                    // Still counted: the next file is older than what is left.
                }
            }
            count -= 1;
            total -= len;
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The header of the log at `path`, if it has a valid one.
fn read_header(path: &Path) -> Option<Header> {
    let mut head = [0u8; wire::HEADER_LEN];
    File::open(path)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut head))
        .ok()?;
    Header::decode(&head).ok()
}

/// When the file at `path` started: its header's time, or its modification
/// time if it has no readable header.
fn started(path: &Path, meta: &std::fs::Metadata) -> i64 {
    read_header(path).map_or_else(
        || {
            meta.modified()
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i64)
        },
        |h| h.base_unix_ns,
    )
}

/// Whether `other` is the file `meta` describes (another link to it).
#[cfg(unix)]
fn same_file(meta: &std::fs::Metadata, other: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(other).is_ok_and(|o| o.dev() == meta.dev() && o.ino() == meta.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &Path) -> bool {
    false
}

/// Moves an earlier run's non-empty file at `path` aside as a finished file
/// of the set (see [`finished_path`]), so a new run never destroys it.
pub(crate) fn keep_previous(path: &Path) -> Result<(), Error> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let (target, kept) = finished_slot(path, started(path, &meta), &meta);
    let done = if kept {
        // Under both names after a roll that died between link and rename:
        // it is kept already, and a second finished name would decode its
        // records twice.
        std::fs::remove_file(path)
    } else {
        std::fs::rename(path, &target)
    };
    done.map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source: io::Error::new(
            source.kind(),
            format!(
                "cannot keep the previous log as {}: {source}",
                target.display()
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_names_parse_back_and_sort_in_time_order() {
        let base = Path::new("/logs/app.nlog");
        let a = finished_path(base, 1_763_911_860_123_456_789);
        assert_eq!(
            a.file_name().unwrap(),
            "app.20251123T153100.123456789Z.nlog"
        );
        let key = |p: &Path| finished_key(base, p.file_name().unwrap().to_str().unwrap());
        let b = finished_path_n(base, 1_763_911_860_123_456_789, 1);
        let c = finished_path(base, 1_763_911_861_000_000_000);
        assert!(key(&a).unwrap() < key(&b).unwrap());
        assert!(key(&b).unwrap() < key(&c).unwrap());
    }

    #[test]
    fn a_file_left_under_two_names_by_a_dead_roll_is_kept_once() {
        let dir = std::env::temp_dir().join(format!("nanolog-fileset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("app.nlog");
        std::fs::write(&base, b"not a log, but ours").unwrap();
        let meta = std::fs::metadata(&base).unwrap();
        let finished = finished_path(&base, started(&base, &meta));
        std::fs::hard_link(&base, &finished).unwrap();
        keep_previous(&base).unwrap();
        assert!(!base.exists());
        let names: Vec<_> = finished_files(&base).unwrap();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(names[0].0, finished);
        // A different file whose start time gives the same name gets a suffix.
        std::fs::write(&base, b"not a log, but ours").unwrap();
        let t = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_nanos(started(
                &finished,
                &std::fs::metadata(&finished).unwrap(),
            ) as u64);
        std::fs::File::options()
            .write(true)
            .open(&base)
            .unwrap()
            .set_modified(t)
            .unwrap();
        keep_previous(&base).unwrap();
        assert_eq!(finished_files(&base).unwrap().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_of_other_files_are_not_in_the_set() {
        let base = Path::new("app.nlog");
        for name in [
            "app.nlog",
            "app.1.nlog",
            "app.backup.nlog",
            "app.20251123T152100.123456789Z.log",
            "other.20251123T152100.123456789Z.nlog",
            "app.20251123T152100.12345678Z.nlog",
            "app.20251123T152100.123456789Z.x.nlog",
            "app.nlog.next",
        ] {
            assert_eq!(finished_key(base, name), None, "{name}");
        }
        let no_ext = Path::new("log");
        assert!(finished_key(no_ext, "log.20251123T152100.123456789Z").is_some());
        assert!(finished_key(no_ext, "log.20251123T152100.123456789Z.2").is_some());
    }
}
