//! Writing a log's set of files (see [`crate::set`] for their names):
//! finished names taken without clobbering, retention, and keeping an
//! earlier run's live file.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::set::{finished_files, finished_path_n, finished_path_seq, read_header, read_start};

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

/// The finished name of file `seq` of the set at `base` (see
/// [`finished_path_seq`]), and whether it already is a link to the file
/// `meta` describes (a roll that died between linking and renaming). A
/// name taken by another file (not ours: sequence numbers are not reused)
/// gets the time-named slot instead.
pub(crate) fn finished_slot_seq(
    base: &Path,
    seq: u64,
    start_unix_ns: i64,
    meta: &std::fs::Metadata,
) -> (PathBuf, bool) {
    let t = finished_path_seq(base, seq, start_unix_ns);
    match std::fs::symlink_metadata(&t) {
        Err(_) => (t, false),
        Ok(_) if same_file(meta, &t) => (t, true),
        Ok(_) => finished_slot(base, start_unix_ns, meta),
    }
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
    let (target, kept) = match read_start(path) {
        Some((h, Some(seq))) => finished_slot_seq(path, seq, h.base_unix_ns, &meta),
        _ => finished_slot(path, started(path, &meta), &meta),
    };
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
    use crate::set::{finished_key, finished_path};

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
