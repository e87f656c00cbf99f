//! The live log file: header on creation, appends, recovery from failed
//! writes, and rolling to the next file (by size or UTC time boundary).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
#[cfg(feature = "test-hooks")]
use std::sync::PoisonError;

use crate::clock;
use crate::error::Error;
use crate::fileset;
use crate::wire::frame::put_entry;
use crate::wire::totals::{put_totals, Totals};
use crate::wire::{self, dict, tag};

mod fs;
mod lock;
mod new_file;
mod rotation;

pub(crate) use fs::file_identity;
use fs::{has_name, names, next_path, no_hard_links, positioned_write, reopen};
pub(crate) use lock::lock;
pub use new_file::host_name;
pub(crate) use new_file::open;
use new_file::{new_header, start_bytes};
pub(crate) use rotation::Policy;
pub use rotation::Rotation;

/// After a failed roll, wait this long before trying again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

pub(crate) struct Writer {
    /// The live file's path: the file being written is always here.
    path: PathBuf,
    file: File,
    /// Bytes known to be in the file.
    len: u64,
    /// The live file's start, from its header, and its sequence number in
    /// the set (its SET entry): its name once finished.
    start_unix_ns: i64,
    seq: u64,
    /// This machine's name, in every file's SET entry.
    host: String,
    /// Records written to the live file (a time boundary does not roll an
    /// file without records).
    records: u64,
    /// Records written to the set's files numbered below the live one (its
    /// SET entry says so), this run's and, as the last finished file said,
    /// earlier runs'.
    before: u64,
    policy: Policy,
    /// The next time boundary (wall clock, ns), and roughly the tick it falls on.
    boundary: Option<(i64, u64)>,
    /// No roll before this tick (after a failed one).
    retry_tick: u64,
    copy: Option<File>,
    /// The lock file, held (locked) while this writer lives (none for a
    /// writer that discards).
    _lock: Option<File>,
    /// Records written into the live file after it lost its last name
    /// (seen by an `fstat` after the write).
    unchecked_records: u64,
    /// Records of the last write, and the tick it was made at.
    last_write: (u64, u64),
    /// The tick of the last look at the path.
    checked_tick: u64,
    /// What the live file's writes hold, for its TOTALS entry.
    totals: Totals,
    /// The live file's length at its last checkpoint (or its start): see
    /// [`CHECKPOINT_BYTES`].
    checkpointed: u64,
    /// An END was put into the bytes being written ([`Writer::put_end`]):
    /// no checkpoint after them, the END stays last.
    end_put: std::cell::Cell<bool>,
    /// The live file's number: one more each time another file is live
    /// (a roll, a fresh file at the path), so that what was said of an
    /// earlier one is not done to it (see [`Writer::fill`]).
    generation: u64,
    /// `file`'s device and inode ([`file_identity`]), taken as it is opened.
    identity: (u64, u64),
    /// Checkpoints written, in every file.
    checkpoints: u64,
    /// A handle on the live file of the generation it is paired with, for
    /// [`Writer::fill`]: opened without `O_APPEND` (a positioned write
    /// through an appending handle appends, on Linux).
    filler: Option<(u64, File)>,
    /// It writes to a file that can be filled in (not the null device).
    fills: bool,
}

/// A live file gets a checkpoint, a TOTALS entry of what it holds so far,
/// after the write that takes it this far past the last (FORMAT.md,
/// "TOTALS"): `info` of a file still being written, or of a killed
/// writer's, reads what follows its last checkpoint, not the whole file.
/// A few hundred bytes each 4 MiB (16 MiB before 2026-12-02: `info` of a
/// flat-out writer's live file read up to 2 M records, 0.12 s).
const CHECKPOINT_BYTES: u64 = 4 << 20;

/// [`CHECKPOINT_BYTES`], or what a test set (0: not set).
/// (Relaxed: a setting of its own, read at each write.)
static CHECKPOINT_SET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tests only: a checkpoint every `bytes` (0: every 4 MiB) in the files
/// written from now on in this process.
#[doc(hidden)]
pub fn __set_checkpoint_bytes(bytes: u64) {
    CHECKPOINT_SET.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// Tests only: the point at which the flusher stops for good, and the
/// file it makes when it does (see [`stop_point`]).
#[cfg(feature = "test-hooks")]
static FLUSHER_STOP: std::sync::Mutex<Option<(u8, PathBuf)>> = std::sync::Mutex::new(None);

/// Tests only: the flusher stops for good at `point`, after making the file
/// `marker`, for a test to kill the process there: at a step of the next
/// roll (1: the next file made; 2: the live file linked to its finished
/// name; 3: the next file renamed over the path, the old file not yet
/// ended; 4: the old file ended, the new one not yet taken up), or (5) in
/// a crash-safe logger's next commit to its area, committed and its ring's
/// room not yet handed back (see `flusher::stage`).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn __stop_flusher_at(point: u8, marker: PathBuf) {
    *FLUSHER_STOP.lock().unwrap_or_else(PoisonError::into_inner) = Some((point, marker));
}

/// The flusher is at `point` (see [`__stop_flusher_at`]); nothing outside
/// tests.
#[inline]
pub(crate) fn stop_point(point: u8) {
    #[cfg(feature = "test-hooks")]
    {
        let stop = FLUSHER_STOP
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((at, marker)) = stop.filter(|(at, _)| *at == point) {
            let _ = std::fs::write(&marker, [at]);
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
    let _ = point;
}

fn checkpoint_bytes() -> u64 {
    match CHECKPOINT_SET.load(std::sync::atomic::Ordering::Relaxed) {
        0 => CHECKPOINT_BYTES,
        n => n,
    }
}

/// What became of the live file and its path, from [`Writer::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileState {
    /// The path names the live file, as long as it was written.
    Ours,
    /// The live file is shorter than what was written to it (`truncate`,
    /// logrotate's `copytruncate`): its header is gone.
    Truncated,
    /// The live file is longer than what was written to it: another
    /// program wrote into it (`cp` of a larger file over it keeps its inode
    /// and replaces its bytes). What it held is not ours any more.
    Overwritten,
    /// The path names another file, or none, and the live file still has a
    /// name (it was renamed): what it holds is kept there.
    Moved,
    /// The live file has no name left (`rm`): what is written to it is lost.
    Deleted,
}

/// What a restart of the live file lost: records, and the ticks they span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lost {
    pub(crate) records: u64,
    pub(crate) first_tick: u64,
    pub(crate) last_tick: u64,
}

/// The tick at which the wall clock reads `at`, estimated from a (tick,
/// wall-clock ns) pair taken now; `at` is not before `now_ns`.
fn tick_at(at: i64, now_ns: i64, now_tick: u64) -> u64 {
    let ticks = (at - now_ns) as f64 * clock::ticks_per_second() / 1e9;
    now_tick.saturating_add(ticks as u64)
}

impl Writer {
    /// Creates the directory if it is missing, takes the path's lock, keeps
    /// an earlier run's file at `path` as a finished file, applies retention,
    /// and creates the live file.
    ///
    /// A symbolic link at `path` is followed: the set is written beside the
    /// file it points to (renaming the link would make a finished "file"
    /// of the set that points outside it).
    /// `before_keep` runs with the lock held and the earlier run's file
    /// still at `path`: the logger recovers a killed writer's rings into
    /// it there (`crate::recovery`).
    pub(crate) fn create(
        path: &Path,
        policy: Policy,
        before_keep: impl FnOnce(&Path),
    ) -> Result<Writer, Error> {
        let path = &crate::set::resolve_log_path(path);
        let open_err = |source| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(open_err)?;
        }
        // Before anything at the path is touched: a second writer changes
        // nothing on disk.
        let lock = lock(path)?;
        before_keep(path);
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
        // The set goes on from its highest number, whatever the clock says.
        let seq = crate::set::next_seq(path);
        let before = crate::set::records_through_last(path);
        let host = host_name();
        let (file, header, start_len) = open(path, seq, &host, before).map_err(open_err)?;
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
            len: start_len,
            start_unix_ns: header.base_unix_ns,
            seq,
            host,
            records: 0,
            before,
            policy,
            boundary: None,
            retry_tick: 0,
            copy,
            _lock: Some(lock),
            unchecked_records: 0,
            totals: Totals::new(),
            checkpointed: 0,
            end_put: std::cell::Cell::new(false),
            last_write: (0, 0),
            checked_tick: clock::now(),
            generation: 0,
            identity: (0, 0),
            checkpoints: 0,
            filler: None,
            fills: true,
        };
        w.identity = file_identity(&w.file);
        w.plan_boundary();
        Ok(w)
    }

    /// A writer that keeps nothing (`Builder::console`: the text mirror is
    /// the output): the null device, no lock, no set.
    pub(crate) fn discard() -> Result<Writer, Error> {
        let null = if cfg!(windows) { "NUL" } else { "/dev/null" };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(null)
            .map_err(|source| Error::Open {
                path: PathBuf::from(null),
                source,
            })?;
        Ok(Writer {
            path: PathBuf::from(null),
            file,
            len: wire::HEADER_LEN as u64,
            start_unix_ns: clock::unix_ns(),
            seq: 0,
            host: String::new(),
            records: 0,
            before: 0,
            policy: Policy::default(),
            boundary: None,
            retry_tick: 0,
            copy: None,
            _lock: None,
            unchecked_records: 0,
            totals: Totals::new(),
            checkpointed: 0,
            end_put: std::cell::Cell::new(false),
            last_write: (0, 0),
            checked_tick: clock::now(),
            generation: 0,
            identity: (0, 0),
            checkpoints: 0,
            filler: None,
            fills: false,
        })
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
    /// `totals` counts what `head` and `buf` hold, for the file's TOTALS.
    pub(crate) fn write(
        &mut self,
        head: &[u8],
        buf: &[u8],
        records: u64,
        totals: &Totals,
    ) -> io::Result<()> {
        self.write_parts(head, buf)?;
        self.records += records;
        self.totals.add(totals);
        self.last_write = (records, clock::now());
        if !self.end_put.take() && self.len.saturating_sub(self.checkpointed) >= checkpoint_bytes()
        {
            self.checkpoint();
        }
        // Written into a file with no name left: lost, unless it comes back
        // (found by the next `check`, which starts a fresh file).
        if self.file.metadata().is_ok_and(|m| !has_name(&m)) {
            self.unchecked_records += records;
        }
        if let Some(c) = &mut self.copy {
            // Test-only copy: a failure shows up as a mismatch in the test.
            let _ = c.write_all(head).and_then(|()| c.write_all(buf));
        }
        Ok(())
    }

    /// Appends a checkpoint (see [`CHECKPOINT_BYTES`]): on its own, after a
    /// write, so it is a top-level entry a reader finds by the writes'
    /// INDEX entries. A failure leaves the file as it was, to be tried
    /// again after the next write.
    fn checkpoint(&mut self) {
        let mut out = Vec::new();
        put_entry(&mut out, tag::TOTALS, |b| put_totals(b, &self.totals));
        if self.write_live(&out).is_ok() {
            self.checkpointed = self.len;
            self.checkpoints += 1;
            if let Some(c) = &mut self.copy {
                let _ = c.write_all(&out);
            }
        }
    }

    /// Writes `head` then `buf` (the batch's dictionary entries, then its
    /// records), both or neither: a failure cuts the file back to where it
    /// ended before.
    fn write_parts(&mut self, head: &[u8], buf: &[u8]) -> io::Result<()> {
        if head.is_empty() {
            return self.write_live(buf);
        }
        let len = self.len;
        // One system call for both (`writev`), where the file takes them
        // whole, as it does but for a signal or a full disk: a crash-safe
        // logger writes every eighth of a ring (see `flusher::hold`).
        let done = match self
            .file
            .write_vectored(&[io::IoSlice::new(head), io::IoSlice::new(buf)])
        {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => {
                let _ = self.file.set_len(len);
                let _ = self.file.seek(SeekFrom::Start(len));
                return Err(e);
            }
        };
        self.len += done as u64;
        // What the call did not take, part by part.
        let result = if done < head.len() {
            self.write_live(&head[done..])
                .and_then(|()| self.write_live(buf))
        } else {
            self.write_live(&buf[done - head.len()..])
        };
        if let Err(e) = result {
            self.len = len;
            let _ = self.file.set_len(len);
            let _ = self.file.seek(SeekFrom::Start(len));
            return Err(e);
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

    /// The log's path (the live file's).
    #[cfg(all(unix, not(loom)))]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The live file's device and inode, by which a crash-safe area names
    /// the file its write under way goes to (zeros where there are none).
    pub(crate) fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// The live file's length as written, and its generation (see
    /// [`Writer::fill`]).
    pub(crate) fn at(&self) -> (u64, u64) {
        (self.len, self.generation)
    }

    /// Checkpoints written so far (in every file).
    pub(crate) fn checkpoints(&self) -> u64 {
        self.checkpoints
    }

    /// Whether [`Writer::fill`] can write: a file (not the null device) on
    /// a system where a handle without `O_APPEND` can be had on the same
    /// file (Linux: `/proc/self/fd`).
    pub(crate) fn fills(&self) -> bool {
        cfg!(target_os = "linux") && self.fills
    }

    /// Writes `bytes` over the bytes at `at` of the live file, if it is
    /// still the file of generation `generation` and holds them (nobody
    /// cut it back): a RUN entry filled in once its run ends (FORMAT.md,
    /// "RUN"), its placeholder of the same length written with the run's
    /// first write. Nothing else of the file changes, and its length does
    /// not. A failure leaves the placeholder (a run read whole).
    pub(crate) fn fill(&mut self, generation: u64, at: u64, bytes: &[u8]) -> io::Result<()> {
        let end = at.saturating_add(bytes.len() as u64);
        if !self.fills() || generation != self.generation || end > self.len {
            return Ok(());
        }
        // (Cut back by someone since the last write's look: a positioned
        // write past its end would leave a hole of zeros.)
        if self.file.metadata()?.len() < end {
            return Ok(());
        }
        if !matches!(&self.filler, Some((g, _)) if *g == generation) {
            match reopen(&self.file) {
                Ok(f) => self.filler = Some((generation, f)),
                Err(e) => {
                    // (No `/proc`: no placeholders from now on either.)
                    self.fills = false;
                    return Err(e);
                }
            }
        }
        match &self.filler {
            Some((_, f)) => positioned_write(f, bytes, at),
            None => Ok(()),
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
    pub(crate) fn should_roll(&mut self) -> bool {
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
    /// retention failed (the roll itself is done then).
    pub(crate) fn roll(&mut self) -> Result<(u64, io::Result<()>), io::Error> {
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
        // The old file's last clock pair is read before the new file's
        // header pair: every record of the old file then lies between two
        // pairs of its own, and no pair of the new file falls among them,
        // so the file maps its ticks alone exactly as its set does.
        let end_pair = clock::pair();
        let name = self.path.file_name().unwrap_or_default().to_os_string();
        let next = next_path(&self.path);
        let ctx = |what: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot roll the log ({what}): {e}"))
        };
        let (finished, kept) = fileset::finished_slot_seq(
            &self.path,
            self.seq,
            self.start_unix_ns,
            &self.file.metadata()?,
        );
        let (file, header, start_len) =
            open(&next, self.seq + 1, &self.host, self.before + self.records)
                .map_err(|e| ctx(&format!("create {}", next.display()), e))?;
        stop_point(1);
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
        stop_point(2);
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
        stop_point(3);
        // The old file ends by naming where the log goes on: the same path.
        let mut out = Vec::new();
        put_entry(&mut out, tag::ROTATE, |b| {
            wire::put_str(b, &name.to_string_lossy())
        });
        let end = self.close_entries_with(&mut out, end_pair, 0, None);
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
        stop_point(4);
        self.identity = file_identity(&file);
        self.file = file;
        self.generation += 1;
        self.len = start_len;
        self.start_unix_ns = header.base_unix_ns;
        self.seq += 1;
        self.before += self.records;
        self.records = 0;
        self.totals.clear();
        self.checkpointed = self.len;
        Ok(self.len)
    }

    /// What became of the live file, before a write: cut back, or left
    /// without a name (one `fstat`); and, when `look_at_path`, whether the
    /// path still names it (a `stat`, once per clock interval: a renamed
    /// file keeps what is written to it, so it can wait).
    pub(crate) fn check(&mut self, look_at_path: bool) -> FileState {
        let Ok(meta) = self.file.metadata() else {
            return FileState::Ours;
        };
        // A FIFO or a device has no length to check, nor a name to lose.
        if !meta.is_file() {
            return FileState::Ours;
        }
        if meta.len() < self.len {
            return FileState::Truncated;
        }
        if meta.len() > self.len {
            return FileState::Overwritten;
        }
        if !has_name(&meta) {
            return FileState::Deleted;
        }
        self.checked_tick = clock::now();
        if look_at_path && !names(&self.path, &meta) {
            return FileState::Moved;
        }
        FileState::Ours
    }

    /// Starts a fresh live file at the path after [`check`](Self::check)
    /// found `state`, as a roll does (header; the caller writes the clock
    /// and dictionary again), and returns what was lost:
    /// - truncated: the file is cut to nothing and begins again; only a write
    ///   that raced the truncation (it landed where the header was) is lost;
    /// - moved: the old file ends (clock pair, END) where it now is; nothing
    ///   is lost; a file someone put at the path is kept as a finished file;
    /// - deleted: the records of writes that went into the file after it had
    ///   lost its name are lost (normally none: `check` comes before each
    ///   write; a write racing the deletion may be counted although the
    ///   file took it just before).
    ///
    /// Returns the new header's length too.
    pub(crate) fn restart(&mut self, state: FileState) -> io::Result<(u64, Lost)> {
        let now = clock::now();
        let mut lost = Lost {
            records: 0,
            first_tick: now,
            last_tick: now,
        };
        match state {
            FileState::Ours => return Ok((0, lost)),
            FileState::Truncated | FileState::Overwritten => {
                let size = self.file.metadata().map_or(0, |m| m.len());
                if state == FileState::Overwritten {
                    // Every record written to it is gone under the other
                    // program's bytes.
                    lost.records = self.records;
                    lost.first_tick = self.checked_tick.min(self.last_write.1);
                } else if size > 0 {
                    lost.records = self.last_write.0;
                    lost.first_tick = self.last_write.1;
                }
                self.file.set_len(0)?;
                // (Another file, to what was said of this one's bytes.)
                self.generation += 1;
                // A new file of the set, in the old one's place.
                let header = new_header();
                self.before += self.records;
                let start = start_bytes(&header, self.seq + 1, &self.host, self.before);
                self.file.write_all(&start)?;
                self.seq += 1;
                self.len = start.len() as u64;
                self.start_unix_ns = header.base_unix_ns;
                self.records = 0;
                self.totals.clear();
                self.checkpointed = self.len;
                self.unchecked_records = 0;
                self.checked_tick = now;
                return Ok((self.len, lost));
            }
            FileState::Moved => {
                let mut out = Vec::new();
                self.close_entries(&mut out, 0);
                let _ = self.write_live(&out);
            }
            FileState::Deleted => {
                lost.records = self.unchecked_records;
                lost.first_tick = self.checked_tick;
            }
        }
        fileset::keep_previous(&self.path).map_err(|e| io::Error::other(e.to_string()))?;
        // After this writer's files and whatever was put at the path.
        let seq = crate::set::next_seq(&self.path).max(self.seq + 1);
        self.before += self.records;
        let (file, header, start_len) = open(&self.path, seq, &self.host, self.before)?;
        stop_point(4);
        self.identity = file_identity(&file);
        self.file = file;
        self.generation += 1;
        self.seq = seq;
        self.len = start_len;
        self.start_unix_ns = header.base_unix_ns;
        self.records = 0;
        self.totals.clear();
        self.checkpointed = self.len;
        self.unchecked_records = 0;
        self.checked_tick = now;
        self.plan_boundary();
        Ok((self.len, lost))
    }

    /// Appends a final clock pair and the END entry (which counts the
    /// file's records, `pending` of them in the buffer it ends); returns
    /// the pair.
    pub(crate) fn close_entries(&self, out: &mut Vec<u8>, pending: u64) -> (u64, i64) {
        self.close_entries_with(out, clock::pair(), pending, None)
    }

    /// Appends the clock pair `(tick, ns)` and the END entry; returns the pair.
    fn close_entries_with(
        &self,
        out: &mut Vec<u8>,
        (tick, ns): (u64, i64),
        pending: u64,
        pending_totals: Option<&Totals>,
    ) -> (u64, i64) {
        dict::put_clock_entry(out, tick, ns);
        self.put_end(out, pending, pending_totals);
        (tick, ns)
    }

    /// Appends the TOTALS and END entries of the file once `pending` more
    /// records, counted in `pending_totals`, are written.
    pub(crate) fn put_end(&self, out: &mut Vec<u8>, pending: u64, pending_totals: Option<&Totals>) {
        self.end_put.set(true);
        let records = self.records + pending;
        match pending_totals {
            Some(p) => {
                let mut all = self.totals.clone();
                all.add(p);
                put_entry(out, tag::TOTALS, |b| put_totals(b, &all));
            }
            None => put_entry(out, tag::TOTALS, |b| put_totals(b, &self.totals)),
        }
        put_entry(out, tag::END, |b| dict::put_end(b, records));
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
