//! The crash-safe area as a running logger keeps it: a file beside the log
//! (`app.nlog.rings`), mapped shared, which holds the threads' rings and
//! what a recovery needs to read them without the process that wrote them
//! (the call sites' entries, the threads' names, the clock, and where the
//! flusher's write under way goes). The kernel keeps a shared mapping's
//! pages when the process dies, however it dies.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use memmap2::{MmapMut, MmapOptions};

use super::layout::*;

/// A mapping of a range of the area file, with its base address kept apart
/// so that threads share it without a `&mut` to the map.
#[derive(Debug)]
struct Mapped {
    base: NonNull<u8>,
    len: usize,
    _map: MmapMut,
}

// SAFETY: the mapping is plain shared memory that lives as long as `_map`;
// every access through `base` is an atomic word (positions, states, the
// clock, the write under way) or bytes that one thread writes before it
// publishes them with an atomic store (names, dictionary entries).
unsafe impl Send for Mapped {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `len` bytes of `file` from `offset` (a multiple of [`PAGE`]).
    fn new(file: &File, offset: u64, len: usize) -> io::Result<Mapped> {
        // SAFETY: the area file is this logger's own: created under the
        // log's lock, which no other writer (nor `nanolog recover`) takes
        // while this process holds it; the only other program that may read
        // it is a recovery after this process died.
        let mut map = unsafe { MmapOptions::new().offset(offset).len(len).map_mut(file)? };
        let base = NonNull::new(map.as_mut_ptr()).ok_or_else(|| io::Error::other("empty map"))?;
        Ok(Mapped {
            base,
            len,
            _map: map,
        })
    }

    /// The 64-bit word at `at`.
    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= self.len);
        // SAFETY: `at` is 8-aligned (the map is page-aligned) and inside the
        // mapping (checked), which lives as long as `self`; the word is
        // only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(at).cast()) }
    }

    /// The 32-bit word at `at`.
    fn word32(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= self.len);
        // SAFETY: as for `word`, 4-aligned.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast()) }
    }

    /// Copies `bytes` to `at`, to be published by an atomic store after.
    fn put(&self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.len);
        // SAFETY: inside the mapping (checked); the range is written only by
        // the thread that owns it now (a slot's name by its thread, the
        // dictionary under the area's lock, the header by its creator, OUT
        // by the flusher) and read by no one in this process.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.as_ptr().add(at), bytes.len())
        };
    }
}

/// What the area's lock guards: where the next region goes, the slots
/// given back, the dictionary region being filled.
#[derive(Debug)]
struct Inner {
    end: u64,
    /// Slots given back, still mapped: a thread that takes one writes
    /// pages already in memory (a pool of threads that come and go maps
    /// and faults nothing after its first round).
    free: Vec<(u64, Mapped)>,
    dict: Option<(Mapped, usize)>,
}

/// A running logger's area.
#[derive(Debug)]
pub(crate) struct Area {
    file: File,
    path: PathBuf,
    header: Mapped,
    /// The OUT region (see `layout`): written by the flusher alone.
    out: Mapped,
    capacity: usize,
    inner: Mutex<Inner>,
}

/// A dictionary region's size: a few thousand call sites' entries.
const DICT_REGION: usize = 1 << 20;

/// The OUT region's size after its header page: what the flusher writes at
/// most at once (1 MiB of records and an extent, see `flusher::output`),
/// with its dictionary entries. A commit that would not fit has its
/// records written to the log first instead.
const OUT_REGION: usize = 2 << 20;

impl Area {
    /// Creates the area of the log at `log` (an earlier one was recovered
    /// first): its header, and a first dictionary region, which every site
    /// registered so far goes into (see `crate::site`).
    pub(crate) fn create(log: &Path, capacity: usize) -> io::Result<Arc<Area>> {
        let path = super::area_path(log);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            // Not ours (a directory, a link): left alone.
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "something that is not a rings' file is at its path",
            ));
        }
        if path.exists() {
            // One the recovery at start could not read: kept, not overwritten.
            std::fs::rename(&path, super::kept_path(&path))?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        reserve(&file, 0, PAGE as u64)?;
        let header = Mapped::new(&file, 0, PAGE)?;
        header.put(H_VERSION, &VERSION.to_le_bytes());
        header.put(H_PID, &std::process::id().to_le_bytes());
        header.put(H_CAPACITY, &(capacity as u64).to_le_bytes());
        header.put(
            H_HZ,
            &crate::clock::ticks_per_second().to_bits().to_le_bytes(),
        );
        header.put(H_BOOT, &boot_id());
        let name = log.as_os_str().as_encoded_bytes();
        let name = &name[..name.len().min(PAGE - H_LOG_PATH - 4)];
        header.put(H_LOG_PATH, &(name.len() as u32).to_le_bytes());
        header.put(H_LOG_PATH + 4, name);
        let out_len = PAGE + OUT_REGION;
        reserve(&file, PAGE as u64, out_len as u64)?;
        let out = Mapped::new(&file, PAGE as u64, out_len)?;
        out.word(R_LEN).store(out_len as u64, Ordering::Relaxed);
        out.word32(R_KIND).store(KIND_OUT, Ordering::Release);
        let area = Arc::new(Area {
            file,
            path,
            header,
            out,
            capacity,
            inner: Mutex::new(Inner {
                end: (PAGE + out_len) as u64,
                free: Vec::new(),
                dict: None,
            }),
        });
        let (tick, ns) = crate::clock::pair();
        area.clock(tick, ns);
        // Last: an area without its magic is one a process did not finish
        // making (a recovery removes it).
        area.header.put(0, &MAGIC);
        Ok(area)
    }

    /// Records a clock pair (the flusher's, as it writes one to the log):
    /// a recovery maps the rings' ticks with the last.
    pub(crate) fn clock(&self, tick: u64, ns: i64) {
        let seq = self.header.word(H_CLOCK_SEQ).load(Ordering::Relaxed) + 1;
        let at = H_PAIRS + 16 * (seq % 2) as usize;
        self.header.word(at).store(tick, Ordering::Relaxed);
        self.header.word(at + 8).store(ns as u64, Ordering::Relaxed);
        // Release: a reader that sees the count sees the pair (the only
        // reader is a recovery after the process died, for which program
        // order is enough; the order is stated for the rule's sake).
        self.header.word(H_CLOCK_SEQ).store(seq, Ordering::Release);
    }

    /// Stages `parts` (log entries: what the flusher compacted from `slot`'s
    /// ring up to `head`, where its thread is in span context `ctx`, with
    /// the dictionary entries they need that the log lacks) at OUT's end,
    /// and commits them: OUT's length and the ring's head move together.
    /// The commit record goes first, so a recovery that finds it under way
    /// completes it (every store after it is idempotent); the caller then
    /// hands the ring's room back and calls [`committed`](Self::committed).
    /// False if OUT has no room for them (nothing is changed).
    pub(crate) fn stage(
        &self,
        parts: [&[u8]; 3],
        slot: Option<&Slot>,
        head: u64,
        ctx: u64,
    ) -> bool {
        let used = self.out.word(D_USED).load(Ordering::Relaxed) as usize;
        let to = used + parts.iter().map(|p| p.len()).sum::<usize>();
        if PAGE + to > self.out.len {
            return false;
        }
        let mut at = PAGE + used;
        for p in parts {
            self.out.put(at, p);
            at += p.len();
        }
        let h = &self.header;
        h.word(H_COMMIT_SLOT)
            .store(slot.map_or(u64::MAX, |s| s.offset), Ordering::Relaxed);
        h.word(H_COMMIT_HEAD).store(head, Ordering::Relaxed);
        h.word(H_COMMIT_CTX).store(ctx, Ordering::Relaxed);
        h.word(H_COMMIT_OUT).store(to as u64, Ordering::Relaxed);
        // Release: the chunk's bytes and the record's words before the flag
        // that says to read them (a recovery runs after this process died,
        // for which program order is enough; the order is stated for the
        // rule's sake).
        h.word(H_COMMIT).store(1, Ordering::Release);
        self.out.word(D_USED).store(to as u64, Ordering::Release);
        if let Some(s) = slot {
            s.set_head_ctx(ctx);
        }
        true
    }

    /// The commit's ring head is stored (its room handed back): done.
    pub(crate) fn committed(&self) {
        self.header.word(H_COMMIT).store(0, Ordering::Release);
    }

    /// The write that carries OUT's entries returned (or failed, its
    /// records counted lost): OUT is empty.
    pub(crate) fn out_written(&self) {
        self.out.word(D_USED).store(0, Ordering::Release);
    }

    /// The flusher is about to write `len` bytes at `at` of the file
    /// `(dev, ino)`, which carry every record OUT holds: until
    /// [`end_write`](Self::end_write), a recovery that finds the write
    /// whole in the file leaves OUT's entries out, and one that does not
    /// cuts the file back to where the write began and appends them.
    pub(crate) fn begin_write(&self, (dev, ino): (u64, u64), at: u64, len: u64) {
        let h = &self.header;
        h.word(H_WRITE_DEV).store(dev, Ordering::Relaxed);
        h.word(H_WRITE_INO).store(ino, Ordering::Relaxed);
        h.word(H_WRITE_AT).store(at, Ordering::Relaxed);
        h.word(H_WRITE_LEN).store(len, Ordering::Relaxed);
        h.word(H_WRITE).store(1, Ordering::Release);
    }

    /// The write is done (OUT emptied first).
    pub(crate) fn end_write(&self) {
        self.header.word(H_WRITE).store(0, Ordering::Release);
    }

    /// A slot for a ring of the logger's capacity: one given back, or a
    /// new region at the end of the file; `None` if the file cannot grow
    /// (the disk is full: the caller makes an ordinary ring).
    pub(crate) fn slot(self: &Arc<Area>, thread: u32, name: &str) -> Option<Slot> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let len = PAGE + self.capacity;
        let (offset, map, fresh) = match inner.free.pop() {
            Some((o, m)) => (o, m, false),
            None => {
                let o = inner.end;
                reserve(&self.file, o, len as u64).ok()?;
                let map = Mapped::new(&self.file, o, len).ok()?;
                inner.end += len as u64;
                (o, map, true)
            }
        };
        drop(inner);
        let slot = Slot {
            map: Some(map),
            offset,
            capacity: self.capacity,
            area: Arc::clone(self),
        };
        let m = slot.map();
        for at in [R_HEAD_CTX, R_TAIL, R_HEAD, R_DROPS] {
            m.word(at).store(0, Ordering::Relaxed);
        }
        m.word32(R_THREAD).store(thread, Ordering::Relaxed);
        slot.set_name(name);
        if fresh {
            m.word(R_LEN).store(len as u64, Ordering::Relaxed);
            m.word32(R_KIND).store(KIND_RING, Ordering::Release);
        }
        // Last: a slot in use is one a recovery reads.
        m.word32(R_STATE).store(RING_IN_USE, Ordering::Release);
        Some(slot)
    }

    fn give_back(&self, offset: u64, map: Mapped) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .free
            .push((offset, map));
    }

    /// Appends a dictionary entry (a SITE entry, framed as the log frames
    /// it); false if the file cannot grow.
    pub(crate) fn add_entry(&self, entry: &[u8]) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let room = |d: &(Mapped, usize)| d.0.len - d.1 >= entry.len();
        if !inner.dict.as_ref().is_some_and(room) {
            let len = (PAGE + entry.len()).next_multiple_of(PAGE).max(DICT_REGION);
            let o = inner.end;
            if reserve(&self.file, o, len as u64).is_err() {
                return false;
            }
            let Ok(map) = Mapped::new(&self.file, o, len) else {
                return false;
            };
            inner.end += len as u64;
            map.word(R_LEN).store(len as u64, Ordering::Relaxed);
            map.word32(R_KIND).store(KIND_DICT, Ordering::Release);
            inner.dict = Some((map, PAGE));
        }
        let Some((map, used)) = inner.dict.as_mut() else {
            return false;
        };
        map.put(*used, entry);
        *used += entry.len();
        // Release: the entry's bytes before the count that covers them.
        map.word(D_USED)
            .store((*used - PAGE) as u64, Ordering::Release);
        true
    }

    /// Removes the area's file: the logger stopped cleanly, every record
    /// written.
    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A ring's region of the area: its header page, then its bytes. Given
/// back to the area when the ring is freed (by then, everything it held is
/// in OUT or the log: the flusher keeps the ring until its last bytes are
/// committed).
#[derive(Debug)]
pub(crate) struct Slot {
    /// Always `Some` until the slot is dropped (and its map given back).
    map: Option<Mapped>,
    offset: u64,
    capacity: usize,
    area: Arc<Area>,
}

impl Slot {
    fn map(&self) -> &Mapped {
        match &self.map {
            Some(m) => m,
            // `map` is taken only by `drop`.
            None => unreachable!("a slot's map is taken only when it drops"),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Where the ring's bytes start.
    pub(crate) fn bytes(&self) -> NonNull<u8> {
        // SAFETY: the mapping is PAGE + capacity bytes long.
        unsafe { self.map().base.add(PAGE) }
    }

    pub(crate) fn head(&self) -> NonNull<crate::sync::AtomicU64> {
        NonNull::from(self.map().word(R_HEAD)).cast()
    }

    pub(crate) fn tail(&self) -> NonNull<crate::sync::AtomicU64> {
        NonNull::from(self.map().word(R_TAIL)).cast()
    }

    /// The thread's name, for a recovery (cut at [`NAME_MAX`] bytes).
    pub(crate) fn set_name(&self, name: &str) {
        let mut n = name.len().min(NAME_MAX);
        while !name.is_char_boundary(n) {
            n -= 1;
        }
        // The length first to 0: a name half rewritten is never read whole.
        self.map().word32(R_NAME_LEN).store(0, Ordering::Relaxed);
        self.map().put(R_NAME, &name.as_bytes()[..n]);
        self.map()
            .word32(R_NAME_LEN)
            .store(n as u32, Ordering::Release);
    }

    /// The thread's drops not yet reported by a marker in the ring (a
    /// marker written sets 0; a kill between the two reports them twice,
    /// a count too high rather than records unaccounted for).
    pub(crate) fn set_drops(&self, count: u64, first: u64, last: u64) {
        self.map()
            .word(R_DROPS_FIRST)
            .store(first, Ordering::Relaxed);
        self.map().word(R_DROPS_LAST).store(last, Ordering::Relaxed);
        self.map().word(R_DROPS).store(count, Ordering::Release);
    }

    /// At a commit: the context at the head (the head itself the ring's
    /// release stores).
    fn set_head_ctx(&self, ctx: u64) {
        self.map().word(R_HEAD_CTX).store(ctx, Ordering::Relaxed);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Everything the ring held is written: free for another thread.
        if let Some(map) = self.map.take() {
            map.word32(R_STATE).store(0, Ordering::Release);
            self.area.give_back(self.offset, map);
        }
    }
}

/// Makes `len` bytes at `at` of the area file exist on disk: a page of a
/// shared mapping that the file system cannot back when it is first
/// written kills the process (`SIGBUS`), so the blocks are allocated now,
/// where a full disk is an error.
fn reserve(file: &File, at: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `posix_fallocate` on a descriptor this function borrows;
        // it touches no memory of ours.
        let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), at as i64, len as i64) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Elsewhere: zeros written through the file (the blocks exist).
        use std::os::unix::fs::FileExt;
        let zeros = vec![0u8; 1 << 16];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], at + done)?;
            done += n as u64;
        }
        Ok(())
    }
}
