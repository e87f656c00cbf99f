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
use nanolog_runtime::reader::{next_in_set, Header, LogFile, Refresh};

/// What a follower does with the entries it finds.
pub(crate) trait Sink {
    /// Takes the entries of `log` from byte `from` up to `log.valid_len()`,
    /// saving in `cursor` each position it is done with. `Ok(false)` stops
    /// following (`--limit` reached).
    fn take(&mut self, log: &LogFile, from: usize, cursor: &Cursor) -> anyhow::Result<bool>;

    /// Nothing new for now. `Ok(false)` stops following (`ship --once`).
    fn idle(&mut self) -> anyhow::Result<bool> {
        Ok(true)
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
pub(crate) fn follow(
    base: &Path,
    cursor: &Cursor,
    start: Start,
    sink: &mut impl Sink,
) -> anyhow::Result<()> {
    // The file being read, where it was opened, and how far it is taken.
    let mut cur: Option<(LogFile, PathBuf, usize)> = None;
    // The header of the last file read to its end: the next file is the
    // first of the set that began after it.
    let mut done: Option<Header> = None;
    // Some(t): the next file to read is the first of the set that began
    // after t. With no live file yet, the follower is there before the
    // writer: every file of the set that begins from now on is new (a
    // writer that rolls fast may have rolled several before the next look).
    let mut after_ns: Option<i64> = match start {
        Start::WholeSet => Some(i64::MIN),
        Start::LiveFile if std::fs::metadata(base).is_err() => {
            Some(newest_finished(base).unwrap_or(i64::MIN))
        }
        Start::LiveFile => None,
    };
    // A saved position: go on from it, in its file if the set still has
    // it, else from the first file that began after it.
    if let Some(c) = cursor.load()? {
        match find_in_set(base, c.pid, c.base_unix_ns) {
            Some((l, path)) => {
                let offset = c.offset.min(l.valid_len());
                cur = Some((l, path, offset));
                after_ns = None;
            }
            None => {
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: warning: the cursor's file is no longer in the set of {}; going on from the first file after it",
                    base.display()
                );
                after_ns = Some(c.base_unix_ns);
            }
        }
        if let Some((log, _, offset)) = cur.as_mut() {
            if !sink.take(log, *offset, cursor)? {
                return Ok(());
            }
            *offset = log.valid_len();
        }
    }
    loop {
        let Some((log, path, offset)) = cur.as_mut() else {
            let next = match after_ns {
                Some(ns) => next_in_set(base, ns),
                None => base.to_path_buf(),
            };
            match LogFile::open_live(&next) {
                // The live file is still the one read to its end (the
                // writer has yet to start the next): wait for it.
                Ok(l) if Some(*l.header()) == done => {}
                Ok(l) => {
                    if done.is_some_and(|d| d.pid != l.header().pid) {
                        let _ = writeln!(
                            io::stderr(),
                            "nanolog: warning: {} holds another run from {}; following it",
                            base.display(),
                            next.display()
                        );
                    }
                    if !sink.take(&l, 0, cursor)? {
                        return Ok(());
                    }
                    let offset = l.valid_len();
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
                *offset = log.valid_len();
                log.rotated_to().is_some()
            }
            // A finished file (not the live path) read to its end.
            Refresh::Unchanged => path != base,
            Refresh::Replaced => !reopen(log, path, offset)?,
        };
        if ended {
            done = Some(*log.header());
            after_ns = Some(log.header().base_unix_ns);
            cur = None;
            continue;
        }
        if !sink.idle()? {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// A follower's saved position: the file (by its header's pid and start
/// time) and the offset taken up to. Kept in a file of one line,
/// `nanolog-cursor-v1 PID BASE_UNIX_NS OFFSET`, replaced atomically.
pub(crate) struct Cursor {
    path: Option<PathBuf>,
}

/// A position read from a cursor file.
struct Saved {
    pid: u32,
    base_unix_ns: i64,
    offset: usize,
}

impl Cursor {
    /// A cursor kept at `path`, or none.
    pub(crate) fn new(path: Option<&Path>) -> Cursor {
        Cursor {
            path: path.map(Path::to_path_buf),
        }
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
        let bad = || anyhow::anyhow!("{}: not a nanolog cursor", path.display());
        let mut f = text.split_whitespace();
        if f.next() != Some("nanolog-cursor-v1") {
            return Err(bad());
        }
        let mut num = || f.next().ok_or_else(bad);
        Ok(Some(Saved {
            pid: num()?.parse().map_err(|_| bad())?,
            base_unix_ns: num()?.parse().map_err(|_| bad())?,
            offset: num()?.parse().map_err(|_| bad())?,
        }))
    }

    /// Saves the position (`log` taken up to `offset`), if a cursor is
    /// kept: written beside it and renamed over it, so a reader (or a kill)
    /// sees the old position or the new, never half of one.
    pub(crate) fn save(&self, log: &LogFile, offset: usize) -> anyhow::Result<()> {
        let Some(path) = self.path.as_deref() else {
            return Ok(());
        };
        let h = log.header();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(
            &tmp,
            format!("nanolog-cursor-v1 {} {} {offset}\n", h.pid, h.base_unix_ns),
        )
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot save the cursor {}", path.display()))
    }
}

/// The file of the set at `base` whose header says `pid` and `base_unix_ns`
/// (the live file or a finished one), opened to follow.
fn find_in_set(base: &Path, pid: u32, base_unix_ns: i64) -> Option<(LogFile, PathBuf)> {
    let finished = nanolog_runtime::reader::finished_files(base).unwrap_or_default();
    let candidates = finished
        .into_iter()
        .map(|(p, _)| p)
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

/// When the newest finished file of the set at `base` began.
fn newest_finished(base: &Path) -> Option<i64> {
    let files = nanolog_runtime::reader::finished_files(base).ok()?;
    let (last, _) = files.last()?;
    Some(LogFile::open(last).ok()?.header().base_unix_ns)
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
