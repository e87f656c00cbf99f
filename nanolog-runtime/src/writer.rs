//! The live log file: header on creation, appends, recovery from failed
//! writes, and rolling to the next file (by size or UTC time boundary).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::clock;
use crate::error::Error;
use crate::fileset::{self, Retention};
use crate::wire::frame::put_entry;
use crate::wire::header::Header;
use crate::wire::{self, dict, tag};

/// Time-based rolling: a new file at each UTC boundary of this length
/// ([`Builder::rotate_every`](crate::Builder::rotate_every)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rotation {
    /// At the start of every minute (UTC).
    Minutely,
    /// At the start of every hour (UTC).
    Hourly,
    /// At midnight UTC.
    Daily,
}

impl Rotation {
    fn period_ns(self) -> i64 {
        const MIN: i64 = 60_000_000_000;
        match self {
            Rotation::Minutely => MIN,
            Rotation::Hourly => 60 * MIN,
            Rotation::Daily => 24 * 60 * MIN,
        }
    }

    /// The first boundary after `unix_ns`.
    fn next_after(self, unix_ns: i64) -> i64 {
        let p = self.period_ns();
        (unix_ns.div_euclid(p) + 1) * p
    }
}

/// When and how the file set rolls, and what it keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) rotate_bytes: Option<u64>,
    pub(crate) rotate_every: Option<Rotation>,
    pub(crate) retention: Retention,
    /// Added to the wall clock when deciding time boundaries (tests only:
    /// puts a boundary seconds away instead of up to a minute).
    pub(crate) clock_offset_ns: i64,
    /// Also write one unrotated log of the same run here (tests only: the
    /// decode of the rotated set must equal the decode of this file).
    pub(crate) unrotated_copy: Option<PathBuf>,
}

/// After a failed rotation, wait this long before trying again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

pub(crate) struct Writer {
    /// The live file's path: the file being written is always here.
    path: PathBuf,
    file: File,
    /// Bytes known to be in the file.
    len: u64,
    /// The live file's start, from its header: its name once finished.
    start_unix_ns: i64,
    /// Records written to the live file (a time boundary does not roll an
    /// file without records).
    records: u64,
    policy: Policy,
    /// The next time boundary (wall clock, ns), and roughly the tick it falls on.
    boundary: Option<(i64, u64)>,
    /// No rotation before this tick (after a failed one).
    retry_tick: u64,
    copy: Option<File>,
}

/// Creates `path` and writes a fresh header; returns the file and the header.
fn open(path: &Path) -> io::Result<(File, Header)> {
    let mut file = File::create(path)?;
    let (tick, unix_ns) = clock::pair();
    let header = Header {
        version: wire::VERSION,
        ticks_per_second: clock::ticks_per_second(),
        base_tick: tick,
        base_unix_ns: unix_ns,
        pid: std::process::id(),
    };
    file.write_all(&header.encode())?;
    Ok((file, header))
}

/// The tick at which the wall clock reads `at`, estimated from a (tick,
/// wall-clock ns) pair taken now; `at` is not before `now_ns`.
fn tick_at(at: i64, now_ns: i64, now_tick: u64) -> u64 {
    let ticks = (at - now_ns) as f64 * clock::ticks_per_second() / 1e9;
    now_tick.saturating_add(ticks as u64)
}

/// Where the next file is created before it is renamed over `path`.
fn next_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".next");
    path.with_file_name(name)
}

/// Whether `link` failed because the filesystem has no hard links (so a
/// plain rename is the way to move the file).
fn no_hard_links(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
    )
}

impl Writer {
    /// Keeps an earlier run's file at `path` as a finished file, applies
    /// retention, and creates the live file.
    pub(crate) fn create(path: &Path, policy: Policy) -> Result<Writer, Error> {
        let open_err = |source| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        fileset::keep_previous(path)?;
        // A roll that died between creating the next file and renaming it
        // over the path leaves `app.nlog.next` holding a header and nothing
        // else: it is ours and empty.
        let next = next_path(path);
        if std::fs::metadata(&next).is_ok_and(|m| m.is_file() && m.len() <= wire::HEADER_LEN as u64)
        {
            let _ = std::fs::remove_file(&next);
        }
        // The kept file counts against retention; a failure to delete is
        // not a reason to refuse to log.
        let _ = policy.retention.apply(path);
        let (file, header) = open(path).map_err(open_err)?;
        let copy = match &policy.unrotated_copy {
            Some(p) => {
                let mut f = File::create(p).map_err(open_err)?;
                f.write_all(&header.encode()).map_err(open_err)?;
                Some(f)
            }
            None => None,
        };
        let mut w = Writer {
            path: path.to_path_buf(),
            file,
            len: wire::HEADER_LEN as u64,
            start_unix_ns: header.base_unix_ns,
            records: 0,
            policy,
            boundary: None,
            retry_tick: 0,
            copy,
        };
        w.plan_boundary();
        Ok(w)
    }

    /// Sets the next time boundary after now.
    fn plan_boundary(&mut self) {
        self.boundary = self.policy.rotate_every.map(|r| {
            let (tick, ns) = clock::pair();
            let now = ns + self.policy.clock_offset_ns;
            let at = r.next_after(now);
            (at, tick_at(at, now, tick))
        });
    }

    /// Appends `buf`, holding `records` records. On failure the file is cut
    /// back to its last good length, so it stays decodable, and the error
    /// is returned.
    pub(crate) fn write(&mut self, buf: &[u8], records: u64) -> io::Result<()> {
        self.write_live(buf)?;
        self.records += records;
        if let Some(c) = &mut self.copy {
            // Test-only copy: a failure shows up as a mismatch in the test.
            let _ = c.write_all(buf);
        }
        Ok(())
    }

    fn write_live(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.file.write_all(buf) {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                let _ = self.file.seek(SeekFrom::Start(self.len));
                Err(e)
            }
        }
    }

    /// Bytes the live file takes before it is due to roll by size.
    pub(crate) fn room(&self) -> usize {
        self.policy.rotate_bytes.map_or(usize::MAX, |max| {
            usize::try_from(max.saturating_sub(self.len)).unwrap_or(usize::MAX)
        })
    }

    /// Whether the live file is due to roll: past its size, or past a time
    /// boundary with records in it. Cheap enough for every pass of the
    /// flusher (one `rdtsc` when a time policy is set).
    pub(crate) fn should_rotate(&mut self) -> bool {
        let by_size = self.policy.rotate_bytes.is_some_and(|max| self.len >= max);
        let by_time = match self.boundary {
            Some((at, tick)) => {
                let now_tick = clock::now();
                now_tick >= tick && {
                    // The tick is an estimate: the wall clock decides.
                    let now = clock::unix_ns() + self.policy.clock_offset_ns;
                    if now < at {
                        self.boundary = Some((at, tick_at(at, now, now_tick)));
                        false
                    } else if self.records == 0 {
                        // Nothing to finish: the live file goes on into the
                        // next period.
                        self.plan_boundary();
                        false
                    } else {
                        true
                    }
                }
            }
            None => false,
        };
        (by_size || by_time) && clock::now() >= self.retry_tick
    }

    /// Finishes the live file and starts a new one at the same path:
    ///
    /// 1. the next file is created beside it (`app.nlog.next`) with its header;
    /// 2. the live file gets its finished name as a second (hard) link;
    /// 3. the next file is renamed over the path, atomically: the path never
    ///    lacks a file, and a reader of the path sees the old file or the new;
    /// 4. the old file, still open, ends with ROTATE, a CLOCK pair and END;
    /// 5. retention deletes the oldest finished files.
    ///
    /// A failure in steps 1-3 undoes what was done and leaves the live file
    /// in use (tried again a second later); it is returned, for the next
    /// `flush` to report. Returns the new file's header length, and whether
    /// retention failed (the rotation itself is done then).
    pub(crate) fn rotate(&mut self) -> Result<(u64, io::Result<()>), io::Error> {
        match self.switch() {
            Ok(header_len) => {
                self.plan_boundary();
                Ok((header_len, self.policy.retention.apply(&self.path)))
            }
            Err(e) => {
                let wait = RETRY_AFTER.as_secs_f64() * clock::ticks_per_second();
                self.retry_tick = clock::now().saturating_add(wait as u64);
                Err(e)
            }
        }
    }

    fn switch(&mut self) -> io::Result<u64> {
        let name = self.path.file_name().unwrap_or_default().to_os_string();
        let next = next_path(&self.path);
        let ctx = |what: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot roll the log ({what}): {e}"))
        };
        let (finished, kept) =
            fileset::finished_slot(&self.path, self.start_unix_ns, &self.file.metadata()?);
        let (file, header) =
            open(&next).map_err(|e| ctx(&format!("create {}", next.display()), e))?;
        // `kept`: an earlier attempt left the link behind (its undo failed).
        let linked = if kept {
            Ok(true)
        } else {
            match std::fs::hard_link(&self.path, &finished) {
                Ok(()) => Ok(true),
                Err(e) if no_hard_links(&e) => std::fs::rename(&self.path, &finished)
                    .map(|()| false)
                    .map_err(|e| ctx(&format!("rename to {}", finished.display()), e)),
                Err(e) => Err(ctx(&format!("link {}", finished.display()), e)),
            }
        };
        let linked = linked.inspect_err(|_| {
            let _ = std::fs::remove_file(&next);
        })?;
        if let Err(e) = std::fs::rename(&next, &self.path) {
            // Back to where we were: the live file at the path, no new file.
            if linked {
                let _ = std::fs::remove_file(&finished);
            } else {
                let _ = std::fs::rename(&finished, &self.path);
            }
            let _ = std::fs::remove_file(&next);
            return Err(ctx(&format!("rename over {}", self.path.display()), e));
        }
        // The old file ends by naming where the log goes on: the same path.
        let mut out = Vec::new();
        put_entry(&mut out, tag::ROTATE, |b| {
            wire::put_str(b, &name.to_string_lossy())
        });
        let end = self.close_entries(&mut out);
        // If the old file cannot take its last entries it still ends at a
        // whole entry (see `write`); the log goes on in the new file.
        let _ = self.write_live(&out);
        if let Some(c) = &mut self.copy {
            // The unrotated copy keeps every clock pair the set has (the old
            // file's last, the new header's), so both read the same times.
            let mut pairs = Vec::new();
            dict::put_clock_entry(&mut pairs, end.0, end.1);
            dict::put_clock_entry(&mut pairs, header.base_tick, header.base_unix_ns);
            let _ = c.write_all(&pairs);
        }
        self.file = file;
        self.len = wire::HEADER_LEN as u64;
        self.start_unix_ns = header.base_unix_ns;
        self.records = 0;
        Ok(self.len)
    }

    /// Appends a final clock pair and the END entry; returns the pair.
    pub(crate) fn close_entries(&self, out: &mut Vec<u8>) -> (u64, i64) {
        let (tick, ns) = clock::pair();
        dict::put_clock_entry(out, tick, ns);
        put_entry(out, tag::END, |_| {});
        (tick, ns)
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        // Under loom the file is scenery: the models check the handshakes,
        // and an fdatasync per explored interleaving would only cost minutes.
        if cfg!(loom) {
            return Ok(());
        }
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::Rotation;

    /// 2026-11-23 15:31:00.123456789 UTC.
    const T: i64 = 1_795_447_860_123_456_789;

    #[test]
    fn boundaries_are_the_next_utc_minute_hour_and_midnight() {
        let s = 1_000_000_000i64;
        assert_eq!(Rotation::Minutely.next_after(T), 1_795_447_920 * s);
        assert_eq!(Rotation::Hourly.next_after(T), 1_795_449_600 * s);
        // Midnight of 2026-11-24.
        assert_eq!(Rotation::Daily.next_after(T), 1_795_478_400 * s);
        // On a boundary: the next one, not the same.
        let m = 1_795_447_920 * s;
        assert_eq!(Rotation::Minutely.next_after(m), m + 60 * s);
        // Before 1970 too (div_euclid).
        assert_eq!(Rotation::Minutely.next_after(-1), 0);
    }
}
