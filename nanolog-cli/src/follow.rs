//! Following a log and its set as it grows, rolls and restarts: the loop
//! `decode -f` and `ship` share, and the cursor file that lets a follower
//! resume where it was.
//!
//! The follower finds the entries; a [`Sink`] takes them (prints or ships
//! them) and saves the position it has finished with in the [`Cursor`].

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use nanolog_runtime::reader::{next_in_set, Header, LogFile, Refresh, SetListing, Want, Warning};

/// What a follower does with the entries it finds.
pub(crate) trait Sink {
    /// Takes the entries of `log` from byte `from` up to `log.valid_len()`,
    /// saving in `cursor` each position it is done with. `Ok(false)` stops
    /// following (`--limit` reached).
    fn take(&mut self, log: &LogFile, from: usize, cursor: &Cursor) -> anyhow::Result<bool>;

    /// How far the last [`Sink::take`] of `log` took it (all of it, unless
    /// the sink holds records back at the live edge).
    fn taken_to(&self, log: &LogFile) -> usize {
        log.valid_len()
    }

    /// Nothing new for now. `Ok(false)` stops following (`ship --once`).
    fn idle(&mut self) -> anyhow::Result<bool> {
        Ok(true)
    }

    /// A file being followed has damage (`decode` of it says the same):
    /// said on stderr.
    fn warned(&mut self, w: &Warning) -> anyhow::Result<()> {
        let _ = writeln!(io::stderr(), "nanolog: warning: {w}");
        Ok(())
    }

    /// `files` files of the set were deleted (by the writer's retention)
    /// before the follower reached them: their records (`records`, when
    /// the files around them say how many) are lost to it.
    fn missed(&mut self, files: u64, records: Option<u64>, set: &Path) -> anyhow::Result<()> {
        let held = records.map_or_else(
            || "their records are not taken".to_owned(),
            |n| format!("their {n} records are not taken"),
        );
        let _ = writeln!(
            io::stderr(),
            "nanolog: warning: {files} file(s) of {} were deleted before they were read: {held}",
            set.display()
        );
        Ok(())
    }
}

/// Where the follower goes on from, after a file read to its end.
#[derive(Debug, Clone, Copy)]
enum After {
    /// The first file of the set that began after this time (files of
    /// writers before sequence numbers).
    Time(i64),
    /// The file numbered after this one (whose header is given), with the
    /// records the set held up to its end, if it says.
    Seq(u64, Header, Option<u64>),
}

impl After {
    /// After `log`, read to its end.
    fn of(log: &LogFile) -> After {
        match log.seq() {
            Some(s) => After::Seq(
                s,
                *log.header(),
                log.records_before()
                    .zip(log.records_total())
                    .map(|(b, n)| b + n),
            ),
            None => After::Time(log.header().base_unix_ns),
        }
    }
}

/// Where a follower begins when it has no saved position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// At the live file (`decode -f`, as `tail -f`).
    LiveFile,
    /// At the oldest file of the set (`ship`: history is shipped too).
    #[cfg_attr(not(feature = "ship"), allow(dead_code))]
    WholeSet,
}

/// How often a follower looks for growth.
const POLL: Duration = Duration::from_millis(100);

/// Follows the set at `base`: what is there, then what is written, going on
/// across rolls and restarts. When the followed file ends (it rolled, or a
/// new run took the path), it goes on with the files of the set that began
/// after it, oldest first, then the live one: a follower several rolls or
/// a restart behind the writer takes every entry once.
///
/// `first`: what the follower wants of the first file it opens, as it is
/// then (`decode -f -n N`, no saved position: the last N); the writes its
/// index says hold none of it are not read.
pub(crate) fn follow(
    base: &Path,
    cursor: &Cursor,
    start: Start,
    mut first: Option<Want>,
    sink: &mut impl Sink,
) -> anyhow::Result<()> {
    // A link at the path: the set is beside the file it points to.
    let base = &nanolog_runtime::reader::resolve_log_path(base);
    // One follower a cursor: held until this returns (or the process ends).
    let _held = cursor.lock()?;
    // The file being read, where it was opened, and how far it is taken.
    let mut cur: Option<(LogFile, PathBuf, usize)> = None;
    // The warnings of the current file told to the sink so far.
    let mut warned = 0usize;
    // The header of the last file read to its end.
    let mut done: Option<Header> = None;
    // Some: the next file to read is the one after this. With no live file
    // yet, the follower is there before the writer: every file of the set
    // that begins from now on is new (a writer that rolls fast may have
    // rolled several before the next look).
    let mut after: Option<After> = match start {
        Start::WholeSet => Some(After::Time(i64::MIN)),
        Start::LiveFile if std::fs::metadata(base).is_err() => {
            Some(newest_finished(base).unwrap_or(After::Time(i64::MIN)))
        }
        Start::LiveFile => None,
    };
    // The whole set from its oldest file, with no saved position: files
    // numbered below the oldest one left were deleted before the follower
    // began, and their records are counted as missed too.
    let mut from_oldest = matches!(start, Start::WholeSet);
    // A saved position: go on from it, in its file if the set still has
    // it, else from the first file that began after it.
    if let Some(c) = cursor.load()? {
        from_oldest = false;
        let cpath = cursor.path.as_deref().unwrap_or(Path::new("")).display();
        if let Some(log) = c.log.as_deref().filter(|l| *l != cursor.log) {
            anyhow::bail!(
                "the cursor {cpath} is of the log {}, not of {}: give each log its own cursor",
                log.display(),
                cursor.log.display()
            );
        }
        match find_in_set(base, c.pid, c.base_unix_ns, c.seq) {
            Some((l, path)) => {
                if c.offset > l.valid_len() {
                    anyhow::bail!(
                        "the cursor {cpath} is ahead of the log: it says byte {} of {}, which ends at {}",
                        c.offset,
                        path.display(),
                        l.valid_len()
                    );
                }
                let offset = c.offset.min(l.valid_len());
                cur = Some((l, path, offset));
                after = None;
            }
            None => {
                // Ahead of every file of the set: another log's cursor, or
                // one from the future; not applied.
                let (newest_seq, newest_ns) = newest_in_set(base);
                let ahead = match (c.seq, newest_seq) {
                    (Some(s), Some(n)) => s > n,
                    _ => newest_ns.is_some_and(|n| c.base_unix_ns > n),
                };
                if ahead {
                    anyhow::bail!(
                        "the cursor {cpath} is ahead of the log {}: it names a file the log does not have yet (number {}, begun at {} ns); is it another log's?",
                        base.display(),
                        c.seq.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                        c.base_unix_ns
                    );
                }
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: warning: the cursor's file is no longer in the set of {} (deleted before it was read to its end); going on from the first file after it",
                    base.display()
                );
                after = Some(match c.seq {
                    Some(s) => After::Seq(
                        s,
                        Header {
                            version: 0,
                            ticks_per_second: 1.0,
                            base_tick: 0,
                            base_unix_ns: c.base_unix_ns,
                            pid: c.pid,
                        },
                        None,
                    ),
                    None => After::Time(c.base_unix_ns),
                });
            }
        }
        if let Some((log, _, offset)) = cur.as_mut() {
            report(log, &mut warned, false, sink)?;
            if !sink.take(log, *offset, cursor)? {
                return Ok(());
            }
            *offset = sink.taken_to(log);
        }
    }
    // Files found deleted before the next one is opened, and the records
    // the set held up to the end of the one before them: the next file's
    // SET entry says how many it held before it, so the difference is what
    // the deleted files held.
    let mut pending_missed: Option<(u64, Option<u64>)> = None;
    // The set's files as last listed: a backlog of many files is listed
    // again only when the next file is not in it.
    let mut listing = SetListing::new(base);
    // Said once: a follower started before its log exists waits for it.
    let mut said_waiting = false;
    loop {
        let Some((log, path, offset)) = cur.as_mut() else {
            let next = match after {
                Some(After::Time(ns)) => Some(next_in_set(base, ns)),
                Some(After::Seq(seq, h, total)) => {
                    let (next, missed) = listing.next_after_seq(seq, &h);
                    pending_missed = (missed > 0).then_some((missed, total));
                    next
                }
                None => Some(base.to_path_buf()),
            };
            if !said_waiting && done.is_none() && std::fs::symlink_metadata(base).is_err() {
                said_waiting = true;
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: {} does not exist yet: waiting for it to be created (Ctrl-C to stop)",
                    base.display()
                );
            }
            let Some(next) = next else {
                // The next file is not there yet.
                if !sink.idle()? {
                    return Ok(());
                }
                std::thread::sleep(POLL);
                continue;
            };
            let opened = match first.take() {
                Some(w) => LogFile::open_live_for(&next, &w),
                None => LogFile::open_live(&next),
            };
            match opened {
                // The live file is still the one read to its end (the
                // writer has yet to start the next): wait for it.
                Ok(l) if Some(*l.header()) == done => {}
                Ok(l) => {
                    if std::mem::take(&mut from_oldest) {
                        if let (Some(seq), Some(before)) = (l.seq(), l.records_before()) {
                            if seq > 1 && before > 0 {
                                sink.missed(seq - 1, Some(before), base)?;
                            }
                        }
                    }
                    if let Some((files, total)) = pending_missed.take() {
                        let records = total
                            .zip(l.records_before())
                            .and_then(|(t, b)| b.checked_sub(t));
                        sink.missed(files, records, base)?;
                    }
                    if let Some(d) = done.filter(|d| d.pid != l.header().pid) {
                        let h = l.header();
                        let _ = writeln!(
                            io::stderr(),
                            "nanolog: {}: the program was started again (the run of pid {} begun {} is followed by the run of pid {} begun {}, in {}); going on with the new run",
                            base.display(),
                            d.pid,
                            nanolog_runtime::text::utc::rfc3339(d.base_unix_ns),
                            h.pid,
                            nanolog_runtime::text::utc::rfc3339(h.base_unix_ns),
                            next.display()
                        );
                    }
                    warned = 0;
                    report(&l, &mut warned, false, sink)?;
                    if !sink.take(&l, 0, cursor)? {
                        return Ok(());
                    }
                    let offset = sink.taken_to(&l);
                    cur = Some((l, next, offset));
                    continue;
                }
                // Not there yet, or its header is not written yet.
                Err(_) if std::fs::metadata(&next).map_or(true, |m| m.len() < 64) => {}
                Err(e) => return Err(e.into()),
            }
            if !sink.idle()? {
                if let Ok(m) = std::fs::metadata(&next) {
                    let _ = writeln!(
                        io::stderr(),
                        "nanolog: warning: {} is not a nanolog log yet ({} bytes, no header): nothing taken from it",
                        next.display(),
                        m.len()
                    );
                }
                return Ok(());
            }
            std::thread::sleep(POLL);
            continue;
        };
        let ended = match log.refresh()? {
            Refresh::Grew => {
                report(log, &mut warned, false, sink)?;
                if !sink.take(log, *offset, cursor)? {
                    return Ok(());
                }
                if log.shrank() {
                    // Truncated while we read it: what was taken is good
                    // (records in lost bytes are errors, never taken);
                    // reopen and go on from there.
                    let _ = writeln!(
                        io::stderr(),
                        "nanolog: warning: {} shrank while being read",
                        path.display()
                    );
                    std::thread::sleep(POLL);
                    reopen(log, path, offset)?;
                    continue;
                }
                *offset = sink.taken_to(log);
                log.rotated_to().is_some()
            }
            Refresh::Unchanged => {
                // Records the sink held back at the live edge: offered
                // again (it lets them go after a while without growth).
                if *offset < log.valid_len() {
                    if !sink.take(log, *offset, cursor)? {
                        return Ok(());
                    }
                    *offset = sink.taken_to(log);
                }
                // A finished file (not the live path) read to its end.
                path != base
            }
            Refresh::Replaced => !reopen(log, path, offset)?,
        };
        if ended {
            // Done with it: read as a finished file, a length damaged in
            // it (which a live reader waits behind) is skipped as damage
            // and the entries after it taken.
            if log.settle() {
                report(log, &mut warned, false, sink)?;
                if !sink.take(log, *offset, cursor)? {
                    return Ok(());
                }
            }
            // A file that ended cut off (its writer killed mid-write) says so.
            report(log, &mut warned, true, sink)?;
            done = Some(*log.header());
            after = Some(After::of(log));
            cur = None;
            continue;
        }
        if !sink.idle()? {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// A follower's saved position: the log it is of, the file (by its
/// header's pid and start time, and its number in the set) and the offset
/// taken up to. Kept in a file of one line,
/// `nanolog-cursor-v2 PID BASE_UNIX_NS OFFSET SEQ LOG` (`SEQ` is `-` for a
/// file without a number; `LOG` the log's path, made absolute), replaced
/// atomically and durably (written beside it, synced, renamed over it, the
/// directory synced). Version 1 cursors (`nanolog-cursor-v1 PID
/// BASE_UNIX_NS OFFSET`) are read too.
pub(crate) struct Cursor {
    path: Option<PathBuf>,
    /// The log's live path, as the cursor names it.
    log: PathBuf,
}

/// A position read from a cursor file.
struct Saved {
    pid: u32,
    base_unix_ns: i64,
    offset: usize,
    seq: Option<u64>,
    /// The log it was saved for (version 2).
    log: Option<PathBuf>,
}

/// The log at `base` as a cursor names it: absolute, its directory's links
/// resolved (the file itself may not exist yet).
fn log_identity(base: &Path) -> PathBuf {
    let base = nanolog_runtime::reader::resolve_log_path(base);
    let abs = std::path::absolute(&base).unwrap_or_else(|_| base.clone());
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(abs),
        _ => abs,
    }
}

impl Cursor {
    /// A cursor of the log at `log`, kept at `path`, or none.
    pub(crate) fn new(path: Option<&Path>, log: &Path) -> Cursor {
        Cursor {
            path: path.map(Path::to_path_buf),
            log: log_identity(log),
        }
    }

    /// Takes the cursor for this follower: an exclusive lock on
    /// `CURSOR.lock` (released by the kernel however the process ends),
    /// holding the holder's pid. A cursor another follower holds is
    /// refused: two followers on one cursor would both send everything.
    fn lock(&self) -> anyhow::Result<Option<std::fs::File>> {
        let Some(path) = self.path.as_deref() else {
            return Ok(None);
        };
        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        let lock = PathBuf::from(name);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .with_context(|| format!("cannot open {}", lock.display()))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = io::Read::read_to_string(&mut f, &mut pid);
                anyhow::bail!(
                    "the cursor {} is in use by another follower (pid {}): one follower a cursor",
                    path.display(),
                    pid.trim()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock.display()))
            }
        }
        let _ = f.set_len(0);
        let _ = io::Seek::seek(&mut f, io::SeekFrom::Start(0));
        let _ = f.write_all(format!("{}\n", std::process::id()).as_bytes());
        Ok(Some(f))
    }

    /// The position saved, if any.
    fn load(&self) -> anyhow::Result<Option<Saved>> {
        let Some(path) = self.path.as_deref() else {
            return Ok(None);
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let bad = || {
            anyhow::anyhow!(
                "{}: not a nanolog cursor (remove it to start again from the log's first file)",
                path.display()
            )
        };
        let line = text.lines().next().unwrap_or("");
        let mut f = line.splitn(6, ' ');
        let v2 = match f.next() {
            Some("nanolog-cursor-v1") => false,
            Some("nanolog-cursor-v2") => true,
            _ => return Err(bad()),
        };
        let mut num = || f.next().ok_or_else(bad);
        let pid = num()?.parse().map_err(|_| bad())?;
        let base_unix_ns = num()?.parse().map_err(|_| bad())?;
        let offset = num()?.parse().map_err(|_| bad())?;
        let (seq, log) = if v2 {
            let seq = match num()? {
                "-" => None,
                n => Some(n.parse().map_err(|_| bad())?),
            };
            (seq, Some(PathBuf::from(num()?)))
        } else {
            (None, None)
        };
        Ok(Some(Saved {
            pid,
            base_unix_ns,
            offset,
            seq,
            log,
        }))
    }

    /// Saves the position (`log` taken up to `offset`), if a cursor is
    /// kept: written beside it, synced and renamed over it, so a reader (or
    /// a kill, or a power cut) sees the old position or the new, never half
    /// of one or none.
    pub(crate) fn save(&self, log: &LogFile, offset: usize) -> anyhow::Result<()> {
        let Some(path) = self.path.as_deref() else {
            return Ok(());
        };
        let h = log.header();
        let seq = log.seq().map_or_else(|| "-".to_owned(), |s| s.to_string());
        let line = format!(
            "nanolog-cursor-v2 {} {} {offset} {seq} {}\n",
            h.pid,
            h.base_unix_ns,
            self.log.display()
        );
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(line.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            // The rename itself, on disk.
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Ok(d) = std::fs::File::open(dir.unwrap_or(Path::new("."))) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().with_context(|| format!("cannot save the cursor {}", path.display()))
    }
}

/// The file of the set at `base` whose header says `pid` and `base_unix_ns`
/// (the live file or a finished one), opened to follow.
fn find_in_set(
    base: &Path,
    pid: u32,
    base_unix_ns: i64,
    seq: Option<u64>,
) -> Option<(LogFile, PathBuf)> {
    let mut set = SetListing::new(base);
    set.refresh();
    // The file its number names first: a set of thousands of files is
    // not opened file by file to find one.
    let numbered = seq.and_then(|s| set.numbered(s)).map(Path::to_path_buf);
    let candidates = numbered
        .into_iter()
        .chain(set.files().iter().map(|(_, p)| p.clone()))
        .chain([base.to_path_buf()]);
    for p in candidates {
        if let Ok(l) = LogFile::open_live(&p) {
            let h = l.header();
            if h.pid == pid && h.base_unix_ns == base_unix_ns {
                return Some((l, p));
            }
        }
    }
    None
}

/// Tells `sink` the warnings of `log` it has not been told (`told` of them
/// so far): damage skipped, a file cut back. A torn tail is the live edge
/// of a file being written, said only of a file that has `ended`.
fn report(
    log: &LogFile,
    told: &mut usize,
    ended: bool,
    sink: &mut impl Sink,
) -> anyhow::Result<()> {
    let lasting: Vec<&Warning> = log
        .warnings()
        .iter()
        .filter(|w| !matches!(w, Warning::TornTail { .. }))
        .collect();
    for w in lasting.iter().skip(*told) {
        sink.warned(w)?;
    }
    *told = lasting.len();
    if ended {
        for w in log.warnings() {
            if matches!(w, Warning::TornTail { .. }) {
                sink.warned(w)?;
            }
        }
    }
    Ok(())
}

/// The highest file number of the set at `base` (finished or live), and
/// the latest start time of its files.
fn newest_in_set(base: &Path) -> (Option<u64>, Option<i64>) {
    let mut seq = None;
    let mut ns = None;
    let files = nanolog_runtime::reader::finished_files_keyed(base).unwrap_or_default();
    let paths = files
        .iter()
        .map(|(_, p, _)| p.clone())
        .chain([base.to_path_buf()]);
    for p in paths {
        if let Ok(l) = LogFile::open(&p) {
            seq = seq.max(l.seq());
            ns = ns.max(Some(l.header().base_unix_ns));
        }
    }
    (seq, ns)
}

/// After the newest finished file of the set at `base`.
fn newest_finished(base: &Path) -> Option<After> {
    let files = nanolog_runtime::reader::finished_files(base).ok()?;
    let (last, _) = files.last()?;
    Some(After::of(&LogFile::open(last).ok()?))
}

/// The file at `path` was replaced or cut back: if it is the same file cut
/// back, reopen it and go on from what was taken (true); if another file
/// took the path, leave `log` as it is (false: it has ended).
fn reopen(log: &mut LogFile, path: &Path, offset: &mut usize) -> anyhow::Result<bool> {
    match LogFile::open_live(path) {
        Ok(l) if l.header() == log.header() => {
            *offset = (*offset).min(l.valid_len());
            *log = l;
            Ok(true)
        }
        Ok(_) => Ok(false),
        // Gone, or not yet written again: the file read so far has ended.
        Err(_) => Ok(false),
    }
}
