//! Loading a log file's bytes: memory maps that survive the file shrinking
//! under them, or the whole file read into memory.
//!
//! Reading a mapped page past a file's end raises SIGBUS, and another program
//! may truncate a log while we read it (a logger restarting at the same path
//! before nanolog kept old files, a writer cutting back a failed write,
//! logrotate's copytruncate). A reader must not die of that.
//!
//! Each map registers its address range in a fixed table. A SIGBUS handler,
//! installed with the first map, checks whether the faulting address lies
//! in a registered range; if so it maps a zero-filled page over the faulting
//! page (the read then completes, seeing zeros) and counts a fault for that
//! map. Record decoding checks the count after reading a record, so bytes
//! that were replaced by zeros are reported as an error and never decoded
//! as records. A SIGBUS elsewhere goes to the handler installed before ours,
//! or to the default action.
//!
//! When the table is full, the file is read into memory instead.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use super::error::ReadError;

/// A file's bytes: a guarded map, or owned (pipes, files read whole).
pub(super) enum Data {
    Map(GuardedMap),
    Owned(Vec<u8>),
}

impl Data {
    /// Says the bytes are about to be read a few here and there (`on`), or
    /// in runs again: a reader that steps over most of a file (see
    /// `file/skip.rs`) would otherwise have the kernel read ahead of each
    /// page it touches, megabytes at a time, the whole file from a cold
    /// page cache.
    pub(super) fn sparse(&self, on: bool) {
        #[cfg(unix)]
        if let Data::Map(m) = self {
            let advice = if on {
                memmap2::Advice::Random
            } else {
                memmap2::Advice::Normal
            };
            // (Advice only: a kernel that takes none reads as before.)
            let _ = m.map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = on;
    }

    /// Gives back the pages of the mapped bytes `range` that lie wholly
    /// in it (in [`RELEASE_ALIGN`] units): a reader that has gone past
    /// them. They stay in the page cache; reading them again maps them
    /// again. Without it a process's resident set grew to every byte of
    /// every file it read: a decode of a gigabyte set peaked at its size,
    /// all of it the map's pages (measured 2026-12-01 at ba8b345).
    pub(super) fn release(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        if let Data::Map(m) = self {
            m.release(range);
        }
        #[cfg(not(unix))]
        let _ = range;
    }

    /// Whether some bytes read as zeros because the file shrank under us.
    #[inline]
    pub(super) fn faulted(&self) -> bool {
        match self {
            Data::Map(m) => m.faulted(),
            Data::Owned(_) => false,
        }
    }
}

impl std::ops::Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Map(m) => m,
            Data::Owned(v) => v,
        }
    }
}

/// A file's bytes (mapped, or read whole when it is not a regular file or
/// cannot be guarded), its (device, inode), and the open file (kept to read
/// it again after it is renamed away from its path).
pub(super) fn load(path: &Path) -> Result<Loaded, ReadError> {
    let file = std::fs::File::open(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load_open(file, path)
}

/// What [`load`] returns.
pub(super) struct Loaded {
    pub(super) data: Data,
    pub(super) identity: Option<(u64, u64)>,
    pub(super) file: File,
}

/// [`load`] of a file already open (`path` names it in errors).
pub(super) fn load_open(mut file: File, path: &Path) -> Result<Loaded, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    let identity = identity(&meta);
    let read_whole = |file: &mut std::fs::File| {
        let mut v = Vec::new();
        std::io::Read::read_to_end(file, &mut v).map(|_| Data::Owned(v))
    };
    let data = if !meta.is_file() {
        // A pipe or device (`nanolog decode <(...)`): read it whole.
        read_whole(&mut file).map_err(io)?
    } else if meta.len() == 0 {
        Data::Owned(Vec::new())
    } else {
        match GuardedMap::new(&file).map_err(io)? {
            Some(m) => Data::Map(m),
            None => read_whole(&mut file).map_err(io)?,
        }
    };
    Ok(Loaded {
        data,
        identity,
        file,
    })
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// Maps that can be guarded at once; more files are read into memory.
const SLOTS: usize = 256;

struct Slot {
    /// The map's first byte, 0 when the slot is free.
    start: AtomicUsize,
    len: AtomicUsize,
    /// SIGBUS faults inside this map since it was registered.
    faults: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)] // used only to build TABLE
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faults: AtomicU32::new(0),
};
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// A read-only map of a whole file, guarded against the file shrinking.
pub(crate) struct GuardedMap {
    map: memmap2::Mmap,
    slot: usize,
}

impl GuardedMap {
    /// Maps `file` (of `len` > 0 bytes); `None` when no guard slot is free or
    /// the handler cannot be installed (the caller reads the file instead).
    pub(crate) fn new(file: &File) -> std::io::Result<Option<GuardedMap>> {
        if !os::install_handler() {
            return Ok(None);
        }
        // SAFETY: the map is read-only, and reads of pages the file no longer
        // covers are caught by the SIGBUS guard registered below before any
        // byte of the map is read.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        let start = map.as_ptr() as usize;
        for (i, s) in TABLE.iter().enumerate() {
            if s.start.load(Ordering::Relaxed) != 0 {
                continue;
            }
            // Claim the slot with its `len` store first, then publish the
            // start; the handler reads `start` (Acquire) then `len`.
            if s.len
                .compare_exchange(0, map.len(), Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            s.faults.store(0, Ordering::Relaxed);
            // Release pairs with the handler's Acquire load of `start`.
            s.start.store(start, Ordering::Release);
            return Ok(Some(GuardedMap { map, slot: i }));
        }
        Ok(None)
    }

    /// Whether a read of this map faulted: the file shrank while we read it,
    /// and some bytes read as zeros instead of the file's.
    #[inline]
    pub(crate) fn faulted(&self) -> bool {
        // Relaxed: the fault is counted by the handler on the thread that
        // made the faulting read, before that read completes, so a check by
        // the same thread after the read sees it. (Other threads learn of it
        // at their next check of their own reads.)
        TABLE[self.slot].faults.load(Ordering::Relaxed) != 0
    }
}

/// [`Data::release`] works in these units: a multiple of every page size
/// the platforms have (4, 16 and 64 KiB), so no system call asks for it.
pub(super) const RELEASE_ALIGN: usize = 64 << 10;

/// Releases the pages of a file a reader goes through forward as it
/// passes them (see [`Data::release`]), [`Behind::CHUNK`] at a time.
///
/// [`Behind::done`] gives back everything from the walk's start on, not
/// only what was passed since the last release: a page read again behind
/// the walk (a record rendered on another thread after the merge passed
/// it) is mapped again, and a narrow read (`decode --level error`: a
/// record every few pages, each read mapping the pages around it)
/// otherwise left every such page mapped: 464 MB for a 445 MB set
/// (measured 2026-12-06 on 8c89141). [`Behind::passed`] gives back only
/// what was passed since: the pages a reader's next steps read again (the
/// entries a scan reads after the walk of a file's index) stay mapped
/// until the walk's end (giving them back from the start each time cost
/// `stats` of a 1 GB set 1.4x its CPU, in pages mapped again).
#[derive(Default)]
pub(crate) struct Behind {
    /// Where the walk started: nothing before it is released.
    floor: usize,
    /// Bytes before this were released last (or are not to be).
    from: usize,
}

impl Behind {
    /// Bytes passed before they are released: a system call and a walk of
    /// the page tables per 16 MiB, and the pages read again when a reader
    /// steps back a little (records of threads that lag) stay mapped.
    pub(crate) const CHUNK: usize = 16 << 20;

    /// Starting at `from`: nothing before it is released by this walk.
    pub(crate) fn at(from: usize) -> Behind {
        Behind { floor: from, from }
    }

    /// The reader will read nothing before `pos` again (or little: what
    /// it does read again is mapped again).
    #[inline]
    pub(super) fn passed(&mut self, data: &Data, pos: usize) {
        if pos >= self.from.saturating_add(Self::CHUNK) {
            data.release(self.from..pos);
            self.from = self.from.max(pos - pos % RELEASE_ALIGN);
        }
    }

    /// The reader will read nothing before `pos` again: the pages before
    /// it go back now, however few, from the walk's start (a walk's end,
    /// or a merge's look behind the slowest stream of a file).
    pub(super) fn done(&mut self, data: &Data, pos: usize) {
        data.release(self.floor..pos);
        self.from = self.from.max(pos - pos % RELEASE_ALIGN);
    }
}

impl GuardedMap {
    #[cfg(unix)]
    fn release(&self, range: std::ops::Range<usize>) {
        let start = range.start.next_multiple_of(RELEASE_ALIGN);
        let end = range.end.min(self.map.len());
        let end = end - end % RELEASE_ALIGN;
        if end <= start {
            return;
        }
        // SAFETY: `DontNeed` on this map drops our page table entries for
        // [start, end), both inside the map and page aligned. The map is
        // a read-only shared map of a file (or, where the SIGBUS guard put
        // one, a private zero page over a page the file lost): a page read
        // again after this is the page cache's page of the file (or a zero
        // page again), the same bytes any slice borrowed from the map saw
        // before, so nothing that borrows the map sees its bytes change.
        // (The file changing under the map is the hazard every read of
        // this map already lives with, guarded by the SIGBUS handler.)
        // Advice only: an error leaves the pages mapped.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl std::ops::Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Unregister before the map is unmapped (fields drop after this).
        let s = &TABLE[self.slot];
        s.start.store(0, Ordering::Release);
        s.len.store(0, Ordering::Release);
    }
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
mod os {
    use super::*;
    use std::sync::OnceLock;

    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

    /// Installs the SIGBUS guard once; false if that failed.
    pub(super) fn install_handler() -> bool {
        static INSTALLED: OnceLock<bool> = OnceLock::new();
        *INSTALLED.get_or_init(|| {
            // SAFETY: all-zero bytes are a valid sigaction (SIG_DFL, no flags).
            let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: reads the current action into a valid sigaction.
            if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) } != 0 {
                return false;
            }
            let _ = PREVIOUS.set(previous);
            // SAFETY: as above.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_sigbus;
            action.sa_sigaction = handler as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: `action` is fully initialised and its handler has the
            // SA_SIGINFO signature.
            unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
            }
        })
    }

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        // SAFETY: sysconf is async-signal-safe.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        for s in TABLE.iter() {
            // Acquire pairs with the Release store in `GuardedMap::new`.
            let start = s.start.load(Ordering::Acquire);
            let len = s.len.load(Ordering::Acquire);
            if start == 0 || addr < start || addr >= start + len {
                continue;
            }
            let at = addr & !(page - 1);
            // SAFETY: [at, at + page) lies inside a live read-only map of
            // ours (registered, not yet unregistered); replacing that page
            // with an anonymous zero page changes only what our own reader
            // sees there, and mmap is a plain system call.
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                s.faults.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        chain(sig, info, ctx);
    }

    /// Not ours: the handler before ours, else the default action.
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let called = PREVIOUS
            .get()
            .is_some_and(|p| crate::signals::call_previous(p, sig, info, ctx));
        if !called {
            // Returning re-runs the faulting access under the default
            // action, which ends the process as the fault would have.
            crate::signals::restore_default(sig);
        }
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
)))]
mod os {
    /// No guard on this platform: files are read into memory instead.
    pub(super) fn install_handler() -> bool {
        false
    }
}
