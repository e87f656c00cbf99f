//! The names of a log's set of files on disk: the live file at the
//! configured path, and the finished files beside it, named by their
//! sequence number in the set (which the writer counts up, one a file,
//! across rolls and restarts, whatever the wall clock does) and the UTC
//! time each one started, so that their names sort in the order they were
//! written:
//!
//! ```text
//! app.nlog                                          the live file (always this name)
//! app.0000000041.20261123T150000.000121337Z.nlog    finished: the 41st file of the set
//! app.0000000042.20261123T160000.000098312Z.nlog    finished: the next one
//! ```
//!
//! Each file also says its sequence number in its SET entry (FORMAT.md), so
//! a follower at the end of file 41 opens exactly file 42, finished or
//! live. Files of writers before sequence numbers are named by their start
//! time alone (`app.20261123T150000.000121337Z.nlog`, `...Z.1.nlog` for a
//! second file of the same nanosecond); they sort before every numbered
//! file. Retention deletes only names of exactly these shapes, so another
//! program's files beside the log are never touched.

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

/// The name the finished file number `seq` of the set at `base`, started at
/// `start_unix_ns`, gets: `app.0000000042.20261123T153100.123456789Z.nlog`.
pub fn finished_path_seq(base: &Path, seq: u64, start_unix_ns: i64) -> PathBuf {
    let mut t = String::new();
    crate::text::utc::write_utc(&mut t, start_unix_ns, 'T');
    let stamp: String = t.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let (stem, ext) = stem_ext(base);
    let name = match ext {
        Some(ext) => format!("{stem}.{seq:010}.{stamp}Z.{ext}"),
        None => format!("{stem}.{seq:010}.{stamp}Z"),
    };
    base.with_file_name(name)
}

/// Where a finished file sits in its set, from its name: files of writers
/// before sequence numbers by start time (and suffix), before every
/// numbered file, which sort by number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetKey {
    /// `app.<UTC start>Z[.N].nlog`.
    Time(String, u32),
    /// `app.<seq>.<UTC start>Z.nlog`.
    Seq(u64),
}

impl SetKey {
    /// The file's sequence number, if its name has one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            SetKey::Seq(s) => Some(*s),
            SetKey::Time(..) => None,
        }
    }
}

/// Whether `stamp` is `YYYYMMDDTHHMMSS.nnnnnnnnn`.
fn is_stamp(stamp: &str) -> bool {
    let b = stamp.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 25
        && digits(0..8)
        && b[8] == b'T'
        && digits(9..15)
        && b[15] == b'.'
        && digits(16..25)
}

/// The sort key of a finished file's name of the set at `base`, or `None`
/// if `name` is not one (another program's file, the live file, a name of
/// another set).
pub(crate) fn finished_key(base: &Path, name: &str) -> Option<SetKey> {
    let (stem, ext) = stem_ext(base);
    let rest = name.strip_prefix(&stem)?.strip_prefix('.')?;
    let rest = match &ext {
        Some(ext) => rest.strip_suffix(ext.as_str())?.strip_suffix('.')?,
        None => rest,
    };
    // SEQ.YYYYMMDDTHHMMSS.nnnnnnnnnZ (ten digits or more)
    if let Some((seq, stamp)) = rest.split_once('.') {
        if seq.len() >= 10 && seq.bytes().all(|b| b.is_ascii_digit()) {
            let stamp = stamp.strip_suffix('Z')?;
            return (is_stamp(stamp)).then_some(SetKey::Seq(seq.parse().ok()?));
        }
    }
    // YYYYMMDDTHHMMSS.nnnnnnnnnZ, then optionally .N
    let (stamp, n) = match rest.split_once("Z.") {
        Some((stamp, n)) => (stamp, n.parse::<u32>().ok()?),
        None => (rest.strip_suffix('Z')?, 0),
    };
    is_stamp(stamp).then(|| SetKey::Time(stamp.to_owned(), n))
}

/// The live path of the set a finished file at `path` belongs to, from its
/// name (`app.0000000042.<UTC start>Z.nlog` and `app.<UTC start>Z.nlog`
/// are files of the set at `app.nlog`); `None` for any other name.
pub fn set_base_of(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let ext = Path::new(name).extension().and_then(|e| e.to_str());
    for (i, _) in name.match_indices('.') {
        let stem = &name[..i];
        let candidate = match ext {
            Some(e) => path.with_file_name(format!("{stem}.{e}")),
            None => path.with_file_name(stem),
        };
        if finished_key(&candidate, name).is_some() {
            return Some(candidate);
        }
    }
    None
}

/// The finished files of the set at `base`, oldest first, with their sizes.
/// The live file is not among them.
pub fn finished_files(base: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    Ok(finished_files_keyed(base)?
        .into_iter()
        .map(|(_, p, len)| (p, len))
        .collect())
}

/// [`finished_files`] with each file's place in the set. Only regular
/// files count (a symbolic link, a FIFO or a directory named like one is
/// not the set's).
pub fn finished_files_keyed(base: &Path) -> io::Result<Vec<(SetKey, PathBuf, u64)>> {
    let mut found = Vec::new();
    for (key, path) in finished_names(base)? {
        // Not followed: a link is not one of the writer's files.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_file() {
            found.push((key, path, meta.len()));
        }
    }
    Ok(found)
}

/// The names of the set's finished files, in order, without their sizes:
/// what the directory's entries say alone (a file system that does not say
/// an entry's type costs a `stat` for it). A link or anything else that is
/// not a regular file is left out.
fn finished_names(base: &Path) -> io::Result<Vec<(SetKey, PathBuf)>> {
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
        // The entry's own type (not followed: a link is not one of the
        // writer's files).
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            found.push((key, base.with_file_name(&name)));
        }
    }
    found.sort();
    Ok(found)
}

/// The next sequence number of the set at `base`: one past the highest
/// of its finished files (1 for a set without numbered files).
pub(crate) fn next_seq(base: &Path) -> u64 {
    finished_files_keyed(base)
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, _, _)| k.seq())
        .max()
        .map_or(1, |s| s + 1)
}

/// Records the set at `base` holds in its files up to its highest-numbered
/// finished one, as that file says (its SET entry's count of the records
/// before it, and its END entry's count of its own, or its records counted
/// when it did not end cleanly): where a new run's count goes on from. 0
/// when the file does not say (a set of earlier writers, or none yet).
/// Read with the format's own pieces: the writing side needs no reader.
pub(crate) fn records_through_last(base: &Path) -> u64 {
    let files = finished_files_keyed(base).unwrap_or_default();
    let last = files
        .iter()
        .filter(|(k, _, _)| k.seq().is_some())
        .max_by_key(|(k, _, _)| k.seq());
    last.and_then(|(_, p, _)| std::fs::read(p).ok())
        .and_then(|file| records_through(&file))
        .unwrap_or(0)
}

/// The records a set held up to the end of `file` (a whole log file), if
/// its SET entry counts those before it. Damage ends the walk: the records
/// after it are not counted.
fn records_through(file: &[u8]) -> Option<u64> {
    use wire::frame::Entries;
    use wire::{dict, tag};
    let header = Header::decode(file).ok()?;
    let strings = wire::record::Strings::of_version(header.version);
    let mut kinds: Vec<Option<Vec<wire::format::ArgKind>>> = Vec::new();
    let (mut before, mut end, mut counted) = (None, None, 0u64);
    let mut entry = |t: u8, body: &[u8]| {
        // An END counts the file only as its last entry.
        end = None;
        match t {
            tag::SET => before = dict::get_set(body).and_then(|s| s.before),
            tag::END => end = dict::get_end(body),
            tag::SITE => {
                if let Some(s) = dict::get_site(body).filter(|s| s.id < 1 << 24) {
                    let id = s.id as usize;
                    if kinds.len() <= id {
                        kinds.resize(id + 1, None);
                    }
                    kinds[id] = Some(s.kinds);
                }
            }
            tag::EXTENT => {
                let kinds_of = |site: u64| kinds.get(site as usize)?.as_deref();
                counted += wire::extent::count_records(body, kinds_of, &strings);
            }
            _ => {}
        }
    };
    let mut raw = Vec::new();
    for (_, t, body) in Entries::new(file, wire::HEADER_LEN) {
        if t != tag::BLOCK || header.version < 4 {
            entry(t, body);
            continue;
        }
        // A block's entries; damage in it ends the walk, as in the file.
        raw.clear();
        if wire::block::get_block(body, &mut raw).is_err() {
            break;
        }
        let mut inner = Entries::inflated(&raw, 0);
        inner.by_ref().for_each(|(_, t, body)| entry(t, body));
        if inner.pos < raw.len() {
            break;
        }
    }
    Some(before? + end.unwrap_or(counted))
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

/// Where a follower goes on after file `seq` of the set at `base` (read to
/// its end): the file numbered `seq + 1`, finished or live, found however
/// the writer rolled meanwhile (a roll between the listing and the look at
/// the live file is seen, and the listing made again). `None`: no later
/// file yet. The count is of files numbered between the two that are
/// nowhere (retention deleted them before the follower reached them).
///
/// A live file numbered `seq` or lower whose header is not `done` is a new
/// numbering of the set (every numbered file was removed before a writer
/// started): it is next.
pub fn next_after_seq(base: &Path, seq: u64, done: &Header) -> (Option<PathBuf>, u64) {
    SetListing::new(base).next_after_seq(seq, done)
}

/// The finished files of a set as last listed, kept for a reader that goes
/// through them one after another: the next file is found in the listing
/// it has while the listing holds it, and the directory is listed again
/// only when it does not (a file the writer finished since). A backlog of
/// many files then costs a listing, not a listing a file.
#[derive(Debug, Clone)]
pub struct SetListing {
    base: PathBuf,
    files: Vec<(SetKey, PathBuf)>,
}

impl SetListing {
    /// The set at `base`, not listed yet.
    pub fn new(base: &Path) -> SetListing {
        SetListing {
            base: base.to_path_buf(),
            files: Vec::new(),
        }
    }

    /// Lists the directory again (an unreadable one lists as empty): its
    /// entries alone, no file's metadata.
    pub fn refresh(&mut self) -> &[(SetKey, PathBuf)] {
        self.files = finished_names(&self.base).unwrap_or_default();
        &self.files
    }

    /// The finished files as last listed, oldest first, with their keys;
    /// some may have been deleted since.
    pub fn files(&self) -> &[(SetKey, PathBuf)] {
        &self.files
    }

    /// Where the file at `path` is in the listing, if it is there.
    pub fn position(&self, path: &Path) -> Option<usize> {
        let name = path.file_name()?.to_str()?;
        let key = finished_key(&self.base, name)?;
        self.files.binary_search_by(|(k, _)| k.cmp(&key)).ok()
    }

    /// How many listed files come before the file numbered `seq` (finished
    /// or live), if the listing is known to hold every file numbered below
    /// it: it holds number `seq - 1` (a set gains files only after its
    /// last), or `seq` is 1.
    pub fn before_seq(&self, seq: u64) -> Option<usize> {
        let below = self.files.partition_point(|(k, _)| *k < SetKey::Seq(seq));
        let holds = seq <= 1
            || below
                .checked_sub(1)
                .is_some_and(|i| self.files[i].0 == SetKey::Seq(seq - 1));
        holds.then_some(below)
    }

    /// The finished file numbered `seq` in the listing, if the listing has
    /// it and it is still there.
    pub fn numbered(&self, seq: u64) -> Option<&Path> {
        let i = self
            .files
            .binary_search_by(|(k, _)| k.cmp(&SetKey::Seq(seq)))
            .ok()?;
        let p = &self.files[i].1;
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_file())
            .then_some(p.as_path())
    }

    /// [`next_after_seq`], from this listing while it holds the next file
    /// (listed again when it does not).
    pub fn next_after_seq(&mut self, seq: u64, done: &Header) -> (Option<PathBuf>, u64) {
        if let Some(p) = self.numbered(seq + 1) {
            return (Some(p.to_path_buf()), 0);
        }
        for attempt in 0..3 {
            let later: Vec<(u64, PathBuf)> = self
                .refresh()
                .iter()
                .filter_map(|(k, p)| k.seq().filter(|&q| q > seq).map(|q| (q, p.clone())))
                .collect();
            if let Some((q, p)) = later.first() {
                if *q == seq + 1 {
                    return (Some(p.clone()), 0);
                }
            }
            let base = self.base.as_path();
            let live = read_start(base);
            match live {
                Some((_, Some(ls))) if ls == seq + 1 => return (Some(base.to_path_buf()), 0),
                Some((h, Some(ls))) if ls <= seq && later.is_empty() => {
                    if h != *done && h.base_unix_ns != done.base_unix_ns {
                        return (Some(base.to_path_buf()), 0);
                    }
                    return (None, 0);
                }
                // A writer before sequence numbers at the path: it is next.
                Some((h, None)) if later.is_empty() => {
                    return ((h != *done).then(|| base.to_path_buf()), 0);
                }
                // Later than the next: the next may have rolled away since the
                // listing; look again.
                Some((_, Some(_))) if attempt < 2 => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
                None if later.is_empty() => return (None, 0),
                _ => {}
            }
            // The next is nowhere: the first later file, counting the gap.
            let live_seq = live.and_then(|(_, s)| s).filter(|&ls| ls > seq);
            let first = match (later.first(), live_seq) {
                (Some((q, _)), Some(ls)) if ls < *q => (ls, base.to_path_buf()).into(),
                (Some((q, p)), _) => (*q, p.clone()).into(),
                (None, Some(ls)) => (ls, base.to_path_buf()).into(),
                (None, None) => None,
            };
            return match first {
                Some((q, p)) => (Some(p), q - seq - 1),
                None => (None, 0),
            };
        }
        (None, 0)
    }
}

/// The path a log at `path` is really written at: `path` itself, or, when
/// it is a symbolic link, the file it points to (the set then lives beside
/// that file, and the link keeps naming the live file). A link to a link
/// is followed to its end; a dangling link to where it points.
pub fn resolve_log_path(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(target) => {
                    p = match p.parent() {
                        Some(dir) if target.is_relative() => dir.join(target),
                        _ => target,
                    };
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    p
}

/// The header of the log at `path`, if it has a valid one (a few hundred
/// bytes read; a FIFO or a device is not opened).
pub fn read_header(path: &Path) -> Option<Header> {
    read_start(path).map(|(h, _)| h)
}

/// The header of the log at `path` and its sequence number in its set
/// (from its SET entry, the first after the header; `None` for a file of a
/// writer before sequence numbers). Reads a few hundred bytes; a FIFO or a
/// device is not opened.
pub(crate) fn read_start(path: &Path) -> Option<(Header, Option<u64>)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut head = Vec::with_capacity(512);
    io::Read::read_to_end(&mut io::Read::take(File::open(path).ok()?, 512), &mut head).ok()?;
    let header = Header::decode(&head).ok()?;
    let seq = wire::dict::first_set_entry(head.get(wire::HEADER_LEN..)?).map(|s| s.seq);
    Some((header, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nanolog-set-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn finished(base: &Path, seq: u64) -> PathBuf {
        let p = finished_path_seq(base, seq, 1_795_000_000_000_000_000 + seq as i64);
        std::fs::write(&p, b"").unwrap();
        p
    }

    /// A follower's listing: the next file from the listing it has, the
    /// directory listed again for a file finished since, and a file deleted
    /// since the listing counted as missed.
    #[test]
    fn a_listing_is_made_again_only_when_it_lacks_the_next_file() {
        let d = dir("listing");
        let base = d.join("app.nlog");
        let files: Vec<PathBuf> = (1..=3).map(|s| finished(&base, s)).collect();
        let done = Header {
            version: wire::VERSION,
            ticks_per_second: 1e9,
            base_tick: 0,
            base_unix_ns: 0,
            pid: 1,
        };
        let mut set = SetListing::new(&base);
        assert_eq!(set.next_after_seq(1, &done), (Some(files[1].clone()), 0));
        assert_eq!(set.files().len(), 3);
        // Not in the listing, and no live file: not there yet.
        assert_eq!(set.next_after_seq(3, &done), (None, 0));
        let fourth = finished(&base, 4);
        assert_eq!(set.next_after_seq(3, &done), (Some(fourth), 0));
        // Deleted after it was listed: the next one left, one file missed.
        std::fs::remove_file(&files[1]).unwrap();
        assert_eq!(set.next_after_seq(1, &done), (Some(files[2].clone()), 1));
        // Files numbered below one are all listed once the one before it is.
        assert_eq!(set.before_seq(5), Some(3));
        assert_eq!(set.before_seq(6), None);
        assert_eq!(set.before_seq(1), Some(0));
        assert_eq!(set.position(&files[2]), Some(1));
        assert_eq!(set.position(&base), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A link, a directory or a FIFO named like a finished file is not one.
    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_listed() {
        let d = dir("regular");
        let base = d.join("app.nlog");
        let real = finished(&base, 1);
        std::os::unix::fs::symlink(&real, finished_path_seq(&base, 2, 5)).unwrap();
        std::fs::create_dir(finished_path_seq(&base, 3, 6)).unwrap();
        let mut set = SetListing::new(&base);
        assert_eq!(set.refresh().len(), 1);
        assert_eq!(finished_files_keyed(&base).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
