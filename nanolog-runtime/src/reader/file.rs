//! One log file: loading, the frame scan with resynchronisation, and the
//! index of its dictionary, threads, extents and gaps.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::error::ReadError;
use super::inflate;
use super::map::{load, load_open, Data};
use super::spans::SpanIndex;
pub use super::spans::SpanRef;
use super::time::TimeMap;
use super::warning::Warning;
use crate::text::render;
use crate::wire::block::{BlockError, INFLATED};
use crate::wire::dict::SiteEntry;
use crate::wire::format::ArgKind;
use crate::wire::frame::{frame_at, frame_within, Entries, Frame};
use crate::wire::header::{Header, HeaderError};
use crate::wire::record::Strings;
use crate::wire::{self, dict, tag};

/// Where a thread's records are. One per extent, twice (per thread and in
/// file order): kept small, as a file whose threads enter a span per
/// request has an extent per request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Item {
    /// An EXTENT body: `[start, end)` in the file; its records start in
    /// context `ctx` (an index into the file's spans, plus one; 0: none),
    /// and its context switches change that.
    Extent { start: usize, end: usize, ctx: u32 },
    /// A DROP entry at `offset`: `LogFile::drop_info(ix)` says what it holds.
    Drop { ix: u32, offset: usize },
}

const _: () = assert!(std::mem::size_of::<Item>() <= 24);

/// What a DROP entry holds: `count` records of its thread dropped between
/// ticks `first` and `last`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DropInfo {
    pub(crate) count: u64,
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl Item {
    /// Where the entry lies: an extent's body, a DROP entry; a position
    /// in the file, or in a block's inflated bytes (see [`INFLATED`]).
    fn at(&self) -> usize {
        match *self {
            Item::Extent { start, .. } => start,
            Item::Drop { offset, .. } => offset,
        }
    }
}

/// A dropped-records gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The logger-assigned id of the thread whose records were dropped.
    pub thread: u32,
    /// Records dropped.
    pub count: u64,
    /// The tick of the first dropped record.
    pub first_tick: u64,
    /// The tick of the last dropped record.
    pub last_tick: u64,
    /// The first dropped record's time, in ns since the Unix epoch.
    pub first_unix_ns: i64,
    /// The last dropped record's time, in ns since the Unix epoch.
    pub last_unix_ns: i64,
}

impl Gap {
    /// Whether the records were lost by the writer after they left the
    /// rings (a failed write, the live file deleted or cut back under it),
    /// rather than dropped by a thread.
    pub fn is_lost(&self) -> bool {
        self.thread == crate::wire::dict::WRITER_THREAD
    }

    /// A gap of `count` records between two ticks, stamped by `time`.
    pub(crate) fn stamped(time: &TimeMap, thread: u32, count: u64, first: u64, last: u64) -> Gap {
        Gap {
            thread,
            count,
            first_tick: first,
            last_tick: last,
            first_unix_ns: time.unix_ns(first),
            last_unix_ns: time.unix_ns(last),
        }
    }
}

/// A logging thread as the file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The logger-assigned thread id (unique within a file).
    pub id: u32,
    /// Empty if the thread had no name.
    pub name: String,
}

/// Whether position `at` is in a block past the resident budget.
#[inline]
pub(crate) fn at_lazy(at: usize) -> bool {
    at >= LAZY
}

/// Raw bytes of the blocks past the resident budget inflated together
/// while a file is indexed (two threads' worth; see `inflate`): what
/// indexing a file of any size holds of its blocks at a time.
const LAZY_WAVE: usize = 4 << 20;

/// The first tops of `tops` whose blocks together say at most `wave` raw
/// bytes (at least one block, or all that is left), and those bytes.
fn next_wave<'t>(data: &[u8], tops: &'t [Top], wave: usize) -> (&'t [Top], usize) {
    let mut raw = 0;
    let mut n = 0;
    for t in tops {
        if let Top::Block { start, end } = *t {
            let r = crate::wire::block::block_parts(&data[start..end]).map_or(0, |p| p.raw);
            if raw > 0 && raw + r > wave {
                break;
            }
            raw += r;
        }
        n += 1;
    }
    (&tops[..n], raw)
}

/// A file's compressed blocks ([`LogFile::block_stats`]): those a reader
/// inflated (a damaged one is not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockStats {
    /// Blocks of LZ4 (codecs 1 and 2: `Compression::Fast`, and a busier
    /// flusher's blocks under `Compression::Small`).
    pub lz4: usize,
    /// Blocks of deflate (codec 3, format version 8).
    pub deflate: usize,
    /// What the blocks take in the file, their frames included.
    pub bytes: usize,
    /// What their entries take inflated.
    pub raw: usize,
}

/// A run of a file's records as [`LogFile::open_streamed`] indexes it:
/// the extents the index reached since the last run, with the bytes of the
/// blocks it inflated for them, held only while the run is read.
///
/// The file it gives is indexed up to the run's end: every site, string
/// and span its records use is there (the format writes them before their
/// first use). Their wall-clock times are of the clock pairs read so far:
/// a record past the last one is placed by the clock's rate until the next
/// pair is read; a reader that needs the file's exact times reads the
/// opened file.
pub struct Wave<'w> {
    pub(super) file: &'w LogFile,
    /// The run's blocks' entries, one block after another (empty when
    /// none was inflated).
    pub(super) bytes: &'w [u8],
    /// The position of `bytes[0]`.
    pub(super) base: usize,
    /// Its extents and drops: these of the file's `order`.
    pub(super) items: std::ops::Range<usize>,
}

/// A wave's blocks inflated ahead, while the wave before it was read (see
/// `LogFile::scan`): how many tops the wave is, and per BLOCK where its
/// entries are in the spare buffer, or why not.
struct Prefetched {
    tops: usize,
    blocks: Vec<Result<std::ops::Range<usize>, BlockError>>,
}

/// The bodies of the BLOCKs among `tops`.
fn block_bodies<'d, 't>(data: &'d [u8], tops: &'t [Top]) -> impl Iterator<Item = &'d [u8]> + 't
where
    'd: 't,
{
    tops.iter().filter_map(move |t| match *t {
        Top::Block { start, end } => Some(&data[start..end]),
        _ => None,
    })
}

/// What the first pass of a scan finds at the top level of a file.
enum Top {
    /// A whole entry of tag `tag`, its body `[start, end)`.
    Entry { tag: u8, start: usize, end: usize },
    /// A whole BLOCK entry, its body `[start, end)`.
    Block { start: usize, end: usize },
    /// Damage skipped, or a torn tail.
    Warn(Warning),
}

/// The most string ids a file may define (see STRINGS in FORMAT.md).
const MAX_STRING_IDS: usize = 1 << 20;

/// One nanolog file, memory-mapped and indexed.
pub struct LogFile {
    path: PathBuf,
    /// Shared with the threads that inflate its blocks while it is indexed.
    data: std::sync::Arc<Data>,
    header: Header,
    sites: Vec<Option<SiteEntry>>,
    threads: BTreeMap<u32, String>,
    /// Per site id: see `Record::may_need_escape`.
    site_may_escape: Vec<bool>,
    /// Names of the low thread ids, for a lookup per record.
    thread_names: Vec<Option<String>>,
    /// Per thread, its extents and drops in file order.
    pub(super) streams: BTreeMap<u32, Vec<Item>>,
    /// All extents and drops in file order.
    order: Vec<(u32, Item)>,
    time: TimeMap,
    warnings: Vec<Warning>,
    clean_end: bool,
    rotated_to: Option<String>,
    /// Its SET entry: its place in its set, its writer's host.
    set: Option<dict::SetEntry>,
    /// Where the last CLOCK entry ends (0: none yet).
    clock_end: usize,
    /// Bytes up to the end of the last whole entry.
    valid_len: usize,
    /// The file's (device, inode) when opened, to notice a replacement.
    identity: Option<(u64, u64)>,
    /// The contexts of its SPAN entries (see `spans.rs`).
    spans: SpanIndex,
    /// Where each string of the STRINGS entries lies in the file, id `i`
    /// at `i - 1` as (start, length); `usize::MAX` long if not defined.
    strs: Vec<(usize, usize)>,
    /// What the last END entry counts of the file's records.
    end_records: Option<u64>,
    /// What DROP entries hold, in file order (see `Item::Drop`).
    drops: Vec<DropInfo>,
    /// Positions from [`INFLATED`] on: the entries of the file's first
    /// BLOCKs, inflated one after another while they fit [`resident`]'s
    /// budget; after them, the STRINGS and SPAN entries of the blocks past
    /// it, copied (the dictionary stays whole however large the file).
    inflated: Vec<u8>,
    /// Where the resident blocks end in `inflated` once blocks stopped
    /// fitting (`None` while they all do).
    spilled: Option<usize>,
    /// The blocks, in file order (so in order of their positions).
    blocks: Vec<BlockAt>,
    /// Where the dictionary entries copied into `inflated` start, with
    /// where the body of the block they came from starts in the file.
    copies: Vec<(usize, usize)>,
    /// The blocks past the budget, from `blocks[lazy_from]` on, inflated
    /// when a reader without a cache of its own first reaches them (and
    /// kept while the file is open; [`Merge`](super::Merge)'s batches and
    /// [`LogFile::scan_extents`] inflate into buffers of their own).
    lazy: Vec<std::sync::OnceLock<Box<[u8]>>>,
    lazy_from: usize,
    /// Raw bytes of the blocks past the budget so far: their positions are
    /// [`LAZY`] on.
    lazy_len: usize,
    /// Bytes of the BLOCK entries read (frames included) ...
    block_bytes: usize,
    /// ... and what they inflated to.
    block_raw: usize,
    /// While indexing: each thread's current context.
    thread_ctx: std::collections::HashMap<u32, u32>,
    /// The file as opened, kept by [`LogFile::open_live`] only: after a
    /// roll renames it away from its path, its last entries are read
    /// through this.
    handle: Option<std::fs::File>,
    /// Read as a live file (see [`LogFile::open_live`]): an entry whose
    /// stated length runs past the bytes there is not written yet, never
    /// damage, until [`LogFile::settle`].
    live: bool,
}

/// Positions from here on are in the blocks past the resident budget: the
/// entries they hold, one block after another, not held by the index.
pub(crate) const LAZY: usize = INFLATED + (INFLATED >> 1);

/// A BLOCK of the file as indexed.
#[derive(Debug, Clone, Copy)]
struct BlockAt {
    /// Where its entries start: a position from [`INFLATED`] on (resident)
    /// or from [`LAZY`] on.
    base: usize,
    /// Its body in the file.
    start: usize,
    end: usize,
    /// The earliest first tick of the extents in it (`u64::MAX`: none).
    min_tick: u64,
}

/// Raw bytes of blocks a file holds inflated from its index on:
/// `NANOLOG_READ_RESIDENT_MB` (a decimal; default 32 MiB). A file whose
/// blocks inflate to more keeps only their dictionary entries past it; its
/// other blocks are inflated again as they are read, so reading a file of
/// any size takes about this much memory for its blocks.
pub(crate) fn resident() -> usize {
    match RESIDENT.load(std::sync::atomic::Ordering::Relaxed) {
        usize::MAX => {
            let bytes = std::env::var("NANOLOG_READ_RESIDENT_MB")
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|mb| mb.is_finite() && *mb >= 0.0)
                .map_or(32 << 20, |mb| (mb * (1 << 20) as f64) as usize)
                .min(usize::MAX - 1);
            RESIDENT.store(bytes, std::sync::atomic::Ordering::Relaxed);
            bytes
        }
        bytes => bytes,
    }
}

/// See [`resident`]; `usize::MAX`: not read from the environment yet.
/// (Relaxed: a setting of its own, read when a file is opened.)
static RESIDENT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);

/// Tests only: sets the resident budget of the files opened from now on
/// in this process (what `NANOLOG_READ_RESIDENT_MB` sets), in bytes.
#[doc(hidden)]
pub fn __set_read_resident(bytes: usize) {
    RESIDENT.store(
        bytes.min(usize::MAX - 1),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// What a search for whole entries among damaged bytes may checksum: 8
/// bytes for each byte searched, and 4 MiB to begin with. An entry found
/// there is checksummed whole, so without a bound every offset stating a
/// length of megabytes cost megabytes (17 MB of `0x01` bytes took minutes);
/// with it, the search is linear. An entry longer than the bound right
/// after damage (the writer's are at most 128 KiB, a record's extent at
/// most its 32 MiB) is skipped with the damage.
#[derive(Default)]
struct Budget {
    /// Bytes checksummed so far.
    spent: usize,
}

impl Budget {
    const START: usize = 4 << 20;
    const PER_BYTE: usize = 8;

    /// The entry at `pos`, searched for from `from` on.
    fn frame<'d>(&mut self, data: &'d [u8], from: usize, pos: usize) -> Frame<'d> {
        let allowed = (pos - from)
            .saturating_mul(Self::PER_BYTE)
            .saturating_add(Self::START)
            .saturating_sub(self.spent);
        let f = frame_within(data, pos, allowed);
        if let Frame::Ok { body, .. } = f {
            self.spent += body.len();
        } else if let Some(len) = stated_len(data, pos).filter(|&l| l <= allowed) {
            // A checksum that did not match (or a cut frame: not counted).
            if pos + wire::FRAME_LEN + len <= data.len() {
                self.spent += len;
            }
        }
        f
    }
}

/// The body length the frame at `pos` states, if a frame header with a
/// tag that is ever written is there.
fn stated_len(data: &[u8], pos: usize) -> Option<usize> {
    let f = data.get(pos..pos + wire::FRAME_LEN)?;
    (1..=32)
        .contains(&f[0])
        .then(|| u32::from_le_bytes([f[1], f[2], f[3], f[4]]) as usize)
}

/// What [`LogFile::refresh`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Nothing new.
    Unchanged,
    /// The file grew; the new entries are indexed.
    Grew,
    /// The path now holds another file (a new run, a rename by another
    /// tool) or this one was cut below what was read: this `LogFile` stays
    /// as it was; open the path again to read the new content.
    Replaced,
}

impl fmt::Debug for LogFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogFile")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("sites", &self.sites.iter().flatten().count())
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl LogFile {
    /// Opens and indexes a log file (memory-mapped; see [`LogFile::shrank`]).
    /// The map keeps no file descriptor: any number of files can be open.
    pub fn open(path: impl AsRef<Path>) -> Result<LogFile, ReadError> {
        Self::open_keeping(path.as_ref(), false)
    }

    /// [`LogFile::open`] for a log being written, to follow with
    /// [`LogFile::refresh`]: it also keeps the file open, so that once the
    /// writer rolls it away from its path its last entries can still be read.
    pub fn open_live(path: impl AsRef<Path>) -> Result<LogFile, ReadError> {
        Self::open_keeping(path.as_ref(), true)
    }

    /// [`LogFile::open`] that reads the file's records while it is
    /// indexed: `on_wave` is given each run of them as the index reaches
    /// it, every extent of the file in exactly one [`Wave`], in file order.
    /// A compressed file's blocks are inflated once, a few MiB at a time
    /// into one buffer used again for each run, and each run is read before
    /// its bytes are let go: a reader that needs no time order (`stats`)
    /// inflates nothing twice and holds no block.
    ///
    /// The file returned is indexed as [`LogFile::open`]'s is, with every
    /// block past its resident budget: reading its records again inflates
    /// them again.
    pub fn open_streamed(
        path: impl AsRef<Path>,
        mut on_wave: impl FnMut(&Wave<'_>),
    ) -> Result<LogFile, ReadError> {
        let path = path.as_ref();
        let loaded = load(path)?;
        let mut f = Self::index(path.to_path_buf(), loaded.data, false, Some(&mut on_wave))?;
        f.identity = loaded.identity;
        Ok(f)
    }

    fn open_keeping(path: &Path, keep_handle: bool) -> Result<LogFile, ReadError> {
        let loaded = load(path)?;
        let mut f = Self::index(path.to_path_buf(), loaded.data, keep_handle, None)?;
        f.identity = loaded.identity;
        f.handle = keep_handle.then_some(loaded.file);
        Ok(f)
    }

    /// Indexes what a growing file (a live log) has gained since it was
    /// opened or last refreshed: the file is mapped again and only the new
    /// entries are read. A file replaced at the path (a new run) or cut
    /// below what was read is reported as [`Refresh::Replaced`], never read
    /// with this file's dictionary.
    ///
    /// A file opened with [`LogFile::open_live`] and renamed away from its
    /// path (nanolog rolling to a new file: the old one ends with a ROTATE
    /// entry) is first read to its end through the handle opened with it, so a follower misses none of its
    /// records: that is a [`Refresh::Grew`], and [`LogFile::rotated_to`]
    /// then says where the log goes on.
    ///
    /// A file opened so whose path is gone (retention deleted a finished
    /// file while it was read) is read to its end through that handle too;
    /// it then stays [`Refresh::Unchanged`].
    pub fn refresh(&mut self) -> Result<Refresh, ReadError> {
        let loaded = match load(&self.path) {
            Ok(l) => l,
            Err(e) => {
                if self.handle.is_none() || std::fs::symlink_metadata(&self.path).is_ok() {
                    return Err(e);
                }
                return Ok(if self.read_through_handle() {
                    Refresh::Grew
                } else {
                    Refresh::Unchanged
                });
            }
        };
        let data = loaded.data;
        // The parsed header, not the old map's bytes: a file rewritten in
        // place shows its new bytes through the old map too.
        let moved = loaded.identity != self.identity;
        let replaced =
            moved || data.len() < self.valid_len || Header::decode(&data).ok() != Some(self.header);
        // Checked after the path: what was written to the old file before
        // it was renamed away is visible through its handle now.
        if moved && self.read_through_handle() {
            return Ok(Refresh::Grew);
        }
        if replaced {
            return Ok(Refresh::Replaced);
        }
        if data.len() <= self.data.len() {
            return Ok(Refresh::Unchanged);
        }
        self.grow(std::sync::Arc::new(data));
        Ok(Refresh::Grew)
    }

    /// Indexes what the file opened with [`LogFile::open_live`] has gained,
    /// read through the handle kept from then (the path may name another
    /// file now, or none); whether it had grown.
    fn read_through_handle(&mut self) -> bool {
        let old = self
            .handle
            .as_ref()
            .and_then(|h| h.try_clone().ok())
            .and_then(|h| load_open(h, &self.path).ok());
        let Some(old) = old else { return false };
        let same = Header::decode(&old.data).ok() == Some(self.header);
        if same && old.data.len() > self.data.len() && !old.data.faulted() {
            self.grow(std::sync::Arc::new(old.data));
            return true;
        }
        false
    }

    /// Indexes the entries `data` (the same file, longer) has past what was read.
    fn grow(&mut self, data: std::sync::Arc<Data>) {
        self.data = data;
        let mut pairs = self.time.pairs().to_vec();
        // A torn tail seen before may be whole now: read from the last whole entry.
        self.warnings
            .retain(|w| !matches!(w, Warning::TornTail { .. }));
        self.scan(self.valid_len, &mut pairs, None);
        self.warn_if_shrank();
        self.time = TimeMap::new(self.header.ticks_per_second, pairs);
        self.derive();
    }

    /// Reads the file as a finished one from now on: a follower done with
    /// it (the writer rolled to the next file, or a new run took the path)
    /// calls this, so that an entry whose length was damaged, which a live
    /// reader waits behind, is skipped as damage and the whole entries
    /// after it are read. Whether that indexed anything more.
    pub fn settle(&mut self) -> bool {
        if !std::mem::replace(&mut self.live, false) {
            return false;
        }
        let torn = self
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::TornTail { .. }));
        if !torn {
            return false;
        }
        let before = (self.valid_len, self.order.len());
        self.grow(std::sync::Arc::clone(&self.data));
        (self.valid_len, self.order.len()) != before
    }

    fn warn_if_shrank(&mut self) {
        if self.shrank() {
            self.warnings.push(Warning::Shrank {
                path: self.path.clone(),
            });
        }
    }

    /// Whether the file shrank while it was being read (another program
    /// truncated it): bytes past its new end read as zeros, and records
    /// in them are reported as errors instead of being decoded.
    #[inline]
    pub fn shrank(&self) -> bool {
        self.data.faulted()
    }

    /// Indexes a log held in memory.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<LogFile, ReadError> {
        Self::index(name.into(), Data::Owned(bytes), false, None)
    }

    fn index(
        path: PathBuf,
        data: Data,
        live: bool,
        on_wave: Option<&mut dyn FnMut(&Wave<'_>)>,
    ) -> Result<LogFile, ReadError> {
        if data.is_empty() {
            return Err(ReadError::Empty { path });
        }
        let header = match Header::decode(&data) {
            Ok(h) => h,
            Err(HeaderError::NotNanolog) => return Err(ReadError::NotNanolog { path }),
            Err(HeaderError::TooShort(n)) => {
                return Err(ReadError::BadHeader {
                    path,
                    reason: format!(
                        "file is {n} bytes, shorter than the {}-byte header",
                        wire::HEADER_LEN
                    ),
                })
            }
            Err(HeaderError::UnsupportedVersion(version)) => {
                return Err(ReadError::UnsupportedVersion { path, version })
            }
            Err(HeaderError::Corrupt(r)) => {
                return Err(ReadError::BadHeader {
                    path,
                    reason: r.to_owned(),
                })
            }
        };
        let mut f = LogFile {
            path,
            data: std::sync::Arc::new(data),
            header,
            sites: Vec::new(),
            threads: BTreeMap::new(),
            thread_names: Vec::new(),
            site_may_escape: Vec::new(),
            streams: BTreeMap::new(),
            order: Vec::new(),
            time: TimeMap::new(header.ticks_per_second, vec![]),
            warnings: Vec::new(),
            clean_end: false,
            rotated_to: None,
            set: None,
            clock_end: 0,
            valid_len: wire::HEADER_LEN,
            identity: None,
            handle: None,
            live,
            spans: SpanIndex::default(),
            strs: Vec::new(),
            end_records: None,
            drops: Vec::new(),
            inflated: Vec::new(),
            spilled: None,
            blocks: Vec::new(),
            copies: Vec::new(),
            lazy: Vec::new(),
            lazy_from: 0,
            lazy_len: 0,
            block_bytes: 0,
            block_raw: 0,
            thread_ctx: Default::default(),
        };
        let mut pairs = vec![(header.base_tick, header.base_unix_ns)];
        f.scan(wire::HEADER_LEN, &mut pairs, on_wave);
        f.warn_if_shrank();
        f.time = TimeMap::new(header.ticks_per_second, pairs);
        f.derive();
        Ok(f)
    }

    /// Tables derived from the dictionary, for per-record lookups.
    fn derive(&mut self) {
        let f = self;
        let dense = f
            .threads
            .keys()
            .copied()
            .filter(|&id| id < 1 << 16)
            .max()
            .map_or(0, |m| m as usize + 1);
        f.site_may_escape = f
            .sites
            .iter()
            .map(|s| {
                s.as_ref().is_none_or(|s| {
                    s.kinds
                        .iter()
                        .any(|k| matches!(k, ArgKind::Str | ArgKind::Char | ArgKind::Rendered))
                        || s.pieces.iter().any(|p| match p {
                            crate::wire::format::Piece::Lit(l) => {
                                render::needs_escape(l.as_bytes())
                            }
                            crate::wire::format::Piece::Arg(spec) => spec.fill != ' ',
                        })
                })
            })
            .collect();
        f.thread_names = (0..dense)
            .map(|id| {
                f.threads
                    .get(&(id as u32))
                    .filter(|n| !n.is_empty())
                    .cloned()
            })
            .collect();
    }

    /// Indexes the file's entries from `from` on: the whole entries at its
    /// top level (resynchronising past damage), then, a wave of blocks at a
    /// time, the inflation of the wave's BLOCKs at once (see `inflate`) and
    /// its entries in file order, a block's in its place. The blocks that
    /// fit the [`resident`] budget stay inflated; past it, a wave is
    /// inflated into one buffer, indexed, and let go, but for its
    /// dictionary entries.
    ///
    /// With `on_wave` (see [`LogFile::open_streamed`]) no block stays: each
    /// wave's records are given to it before the wave is let go.
    fn scan(
        &mut self,
        from: usize,
        pairs: &mut Vec<(u64, i64)>,
        mut on_wave: Option<&mut dyn FnMut(&Wave<'_>)>,
    ) {
        // Held apart from `self` while indexing, so `entry` can update it.
        let owned = std::sync::Arc::clone(&self.data);
        let data = &owned[..];
        let tops = self.frames(data, from);
        let budget = if on_wave.is_some() { 0 } else { resident() };
        // The resident blocks' buffer, out of `self` while blocks are
        // inflated into it; once they stop fitting it is back in `self`,
        // where the lazy blocks' dictionary entries are copied.
        let mut resident = match self.spilled {
            None => Some(std::mem::take(&mut self.inflated)),
            Some(_) => None,
        };
        let mut scratch = Vec::new();
        // Read with `on_wave`: the next wave past the budget, inflated into
        // `spare` while `on_wave` reads this one (see `Prefetched`).
        let mut spare = Vec::new();
        let mut prefetched: Option<Prefetched> = None;
        // How many clock pairs the map a wave's records see was made of.
        let mut mapped_pairs = usize::MAX;
        let mut rest = &tops[..];
        while !rest.is_empty() {
            // While blocks stay, a wave is what is left of the budget (at
            // least a block); past it, waves of a few MiB, let go in turn.
            let room = resident.as_ref().map(|b| budget.saturating_sub(b.len()));
            let (mut wave, raw) =
                next_wave(data, rest, room.unwrap_or(LAZY_WAVE).min(inflate::WAVE));
            if let Some(buf) = resident.take_if(|_| room.is_some_and(|r| raw > r)) {
                self.spilled = Some(buf.len());
                self.lazy_from = self.blocks.len();
                self.inflated = buf;
                wave = next_wave(data, rest, LAZY_WAVE).0;
            }
            rest = &rest[wave.len()..];
            // Per BLOCK, in file order: where its entries are, or why not.
            let mut blocks = match (resident.as_mut(), prefetched.take()) {
                (Some(buf), _) => {
                    let at = buf.len();
                    inflate::inflate_blocks(block_bodies(data, wave), buf, at, inflate::MAX_THREADS)
                }
                (None, Some(p)) if p.tops == wave.len() => {
                    std::mem::swap(&mut scratch, &mut spare);
                    p.blocks
                }
                (None, _) => inflate::inflate_blocks(
                    block_bodies(data, wave),
                    &mut scratch,
                    0,
                    inflate::MAX_THREADS,
                ),
            }
            .into_iter();
            let kept = resident.is_some();
            // What the wave adds: its extents and drops, and (past the
            // budget) its blocks' entries, from position `LAZY + lazy_at`.
            let (items_at, lazy_at) = (self.order.len(), self.lazy_len);
            for top in wave {
                match *top {
                    Top::Warn(ref w) => self.warnings.push(w.clone()),
                    Top::Entry { tag: t, start, end } => {
                        self.entry(t, &data[start..end], start, end, pairs)
                    }
                    Top::Block { start, end } => {
                        // Its entries say whether the file ended cleanly.
                        self.clean_end = false;
                        match blocks.next().unwrap_or(Err(BlockError::Damaged)) {
                            Ok(range) => {
                                let raw = match resident.as_ref() {
                                    Some(b) => &b[range.clone()],
                                    None => &scratch[range.clone()],
                                };
                                let at = kept.then_some(range.start);
                                self.block(raw, at, start, end, pairs)
                            }
                            Err(e) => self.warnings.push(Warning::BadBlock {
                                path: self.path.clone(),
                                offset: start,
                                len: end - start,
                                codec: match e {
                                    BlockError::Codec(c) => Some(c),
                                    BlockError::Damaged => None,
                                },
                            }),
                        }
                    }
                }
            }
            if let Some(on_wave) = on_wave.as_mut() {
                // The file as indexed so far, whole for the wave's records
                // (a dictionary entry comes before its first use).
                if let Some(buf) = resident.as_mut() {
                    self.inflated = std::mem::take(buf);
                }
                // (Pairs are only added: a map rebuilt only when one was.)
                if pairs.len() != mapped_pairs {
                    self.time = TimeMap::new(self.header.ticks_per_second, pairs.clone());
                    mapped_pairs = pairs.len();
                }
                self.derive();
                let next = next_wave(data, rest, LAZY_WAVE).0;
                let this = &*self;
                let wave = Wave {
                    file: this,
                    bytes: if kept { &[] } else { &scratch },
                    base: LAZY + lazy_at,
                    items: items_at..this.order.len(),
                };
                if resident.is_some() || next.is_empty() {
                    on_wave(&wave);
                } else {
                    // The reader keeps the cores busy: the next wave is
                    // inflated on one thread beside it, not on every core
                    // between its waves (the index of a wave, between
                    // them, is the only work done alone).
                    let spare = &mut spare;
                    prefetched = std::thread::scope(|s| {
                        let inflating = s.spawn(move || Prefetched {
                            tops: next.len(),
                            blocks: inflate::inflate_blocks(block_bodies(data, next), spare, 0, 1),
                        });
                        on_wave(&wave);
                        match inflating.join() {
                            Ok(p) => Some(p),
                            // LZ4 on a slice of our own does not panic;
                            // should it, the panic goes on as ours.
                            Err(p) => std::panic::resume_unwind(p),
                        }
                    });
                }
                if let Some(buf) = resident.as_mut() {
                    *buf = std::mem::take(&mut self.inflated);
                }
            }
        }
        if let Some(buf) = resident {
            self.inflated = buf;
        }
        // (A live file's next write may yet bring the site.)
        if !self.live {
            self.warn_pending_spans();
        }
    }

    /// The whole entries of `data` from `from` on at the top level of the
    /// file, with the damage skipped between them; sets `valid_len`.
    fn frames(&mut self, data: &[u8], from: usize) -> Vec<Top> {
        let mut tops = Vec::new();
        let mut pos = from;
        let mut skipped_from: Option<usize> = None;
        // Among damaged bytes, every offset may state a length to
        // checksum: what the search may checksum is bounded by the bytes
        // searched (see `Budget`), so it costs O(bytes) whatever they state.
        let mut budget = Budget::default();
        // A BLOCK's body read by its own structure (`walk`) may run on to
        // the end of the file, and a crafted file may make every 32 bytes
        // such a frame (each walk inflating the rest: 2 MB took 51 s): the
        // walks may read and make 4 MiB and 8 bytes for each byte scanned,
        // in all; past that a body is not walked (its frame is damage if a
        // whole entry follows, a torn tail if none does).
        let mut walked = 0usize;
        let mut walk = |body: &[u8], pos: usize| {
            let allowed = (4usize << 20)
                .saturating_add((pos - from).saturating_mul(8))
                .saturating_sub(walked);
            walked = walked.saturating_add(body.len().min(allowed));
            wire::block::walk_within(body, allowed).unwrap_or(wire::block::Walk::Bad)
        };
        // The damage being searched past began at a BLOCK's frame (its
        // length damaged): its compressed bytes may hold entries byte for
        // byte, so an entry found there counts only if another whole entry
        // (or the end of a finished file) follows it, as one after the
        // block does and one inside it, among compressed bytes, seldom does.
        let mut in_block = false;
        // The file's last entry runs from `at` past its end.
        let torn_tail = |at: usize| {
            Top::Warn(Warning::TornTail {
                path: self.path.clone(),
                offset: at,
                len: data.len() - at,
            })
        };
        // Whether a whole entry starts at `next` (or the file ends there,
        // finished): where an entry skipped as damage is taken to end.
        let lands = |next: usize| {
            if next == data.len() {
                !self.live
            } else {
                matches!(frame_at(data, next), Frame::Ok { .. })
            }
        };
        // The bytes `[from, to)` are damage, skipped.
        let skipped = |from: usize, to: usize| {
            Top::Warn(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: from,
                len: to - from,
                to_end: false,
            })
        };
        while pos < data.len() {
            let frame = match skipped_from {
                None => frame_at(data, pos),
                Some(from) => budget.frame(data, from, pos),
            };
            match frame {
                Frame::Ok { body, .. }
                    if in_block && skipped_from.is_some() && {
                        let next = pos + wire::FRAME_LEN + body.len();
                        let follows = if next == data.len() {
                            !self.live
                        } else {
                            matches!(frame_at(data, next), Frame::Ok { .. })
                                || self.live && matches!(frame_at(data, next), Frame::Truncated)
                        };
                        !follows
                    } =>
                {
                    pos += 1;
                }
                Frame::Ok { tag: t, body } => {
                    budget = Budget::default();
                    in_block = false;
                    if let Some(from) = skipped_from.take() {
                        tops.push(skipped(from, pos));
                    }
                    let start = pos + wire::FRAME_LEN;
                    let end = start + body.len();
                    tops.push(if t == tag::BLOCK && self.header.version >= 4 {
                        Top::Block { start, end }
                    } else {
                        Top::Entry { tag: t, start, end }
                    });
                    pos = end;
                    self.valid_len = end;
                }
                Frame::Truncated if skipped_from.is_some() => pos += 1,
                // A live file: the writer's entry seen half written. The
                // bytes after its frame are its own (a block's compressed
                // bytes can hold whole entries, kept byte for byte): wait
                // for the rest, never search inside them.
                Frame::Truncated if self.live => {
                    tops.push(torn_tail(pos));
                    break;
                }
                Frame::Truncated => {
                    // A BLOCK read by its own structure: bytes that are
                    // all the start of one are a torn tail (the writer
                    // died in the middle of the block: the whole entries
                    // LZ4 keeps byte for byte in it are not the file's); a
                    // whole block whose length was damaged is skipped
                    // alone.
                    if self.header.version >= 4 && data[pos] == tag::BLOCK {
                        let body = data.get(pos + wire::FRAME_LEN..).unwrap_or(&[]);
                        match walk(body, pos) {
                            wire::block::Walk::Cut => {
                                tops.push(torn_tail(pos));
                                break;
                            }
                            wire::block::Walk::Whole(len) => {
                                let next = pos + wire::FRAME_LEN + len;
                                if lands(next) {
                                    tops.push(skipped(pos, next));
                                    pos = next;
                                    continue;
                                }
                            }
                            wire::block::Walk::Bad => {}
                        }
                    }
                    // Either a torn tail (the writer died mid-entry) or a
                    // damaged length: it is damage if a whole entry follows.
                    let mut ahead = Budget::default();
                    if (pos + 1..data.len())
                        .any(|p| matches!(ahead.frame(data, pos, p), Frame::Ok { .. }))
                    {
                        skipped_from = Some(pos);
                        pos += 1;
                        continue;
                    }
                    tops.push(torn_tail(pos));
                    break;
                }
                Frame::Bad => {
                    // An entry whose body is damaged but whose length is
                    // not: the length leads to the next whole entry (or to
                    // the end of a finished file). Only that entry is
                    // skipped; a search inside it could take for the
                    // file's an entry a BLOCK holds byte for byte.
                    // (A BLOCK whose length is what was damaged: its body's
                    // own structure says where it ends.)
                    let block_body = || {
                        let body = data.get(pos + wire::FRAME_LEN..)?;
                        if self.header.version < 4 || data[pos] != tag::BLOCK {
                            return None;
                        }
                        match walk(body, pos) {
                            wire::block::Walk::Whole(len) => Some(len),
                            _ => None,
                        }
                    };
                    // (The block's body walked only when its stated length
                    // does not land, and never while searching past damage:
                    // a deflate body is walked by inflating it.)
                    let next = skipped_from.is_none().then(|| {
                        stated_len(data, pos)
                            .into_iter()
                            .chain(std::iter::once_with(block_body).flatten())
                            .map(|len| pos + wire::FRAME_LEN + len)
                            .find(|&next| lands(next))
                    });
                    if let Some(next) = next.flatten() {
                        tops.push(skipped(pos, next));
                        pos = next;
                        continue;
                    }
                    // Resynchronise: look for the next position where a whole
                    // entry with a matching checksum starts.
                    if skipped_from.is_none() {
                        in_block = self.header.version >= 4 && data[pos] == tag::BLOCK;
                    }
                    skipped_from.get_or_insert(pos);
                    pos += 1;
                }
            }
        }
        if let Some(from) = skipped_from {
            tops.push(Top::Warn(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: from,
                len: data.len() - from,
                to_end: true,
            }));
        }
        tops
    }

    fn entry(&mut self, t: u8, body: &[u8], start: usize, end: usize, pairs: &mut Vec<(u64, i64)>) {
        // The file ended cleanly if its last entry is an END: a process that
        // exits writes one, and calls made after that (other exit hooks)
        // add their records and another END.
        self.clean_end = t == tag::END;
        match t {
            tag::SITE => match dict::get_site(body) {
                Some(s) => {
                    let id = s.id as usize;
                    if id > 1 << 24 {
                        self.warnings.push(Warning::SiteIdOutOfRange {
                            path: self.path.clone(),
                            id,
                        });
                        return;
                    }
                    if self.sites.len() <= id {
                        self.sites.resize(id + 1, None);
                    }
                    self.sites[id] = Some(s);
                    if self.spans.has_waiting() {
                        self.retry_spans();
                    }
                }
                None => self.warnings.push(Warning::MalformedSite {
                    path: self.path.clone(),
                    offset: start,
                }),
            },
            tag::THREAD => {
                if let Some((id, name)) = dict::get_thread(body) {
                    self.threads.insert(id, name.to_owned());
                }
            }
            tag::EXTENT => {
                if let (Some(thread), _) = wire::extent::get_header(body) {
                    let ctx = self.thread_ctx.get(&thread).copied().unwrap_or(0);
                    let it = Item::Extent { start, end, ctx };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::CLOCK => {
                if let Some(p) = dict::get_clock(body) {
                    pairs.push(p);
                    self.clock_end = end;
                }
            }
            tag::DROP => {
                if let Some((thread, count, first, last)) = dict::get_drop(body) {
                    let ix = self.drops.len() as u32;
                    self.drops.push(DropInfo { count, first, last });
                    let it = Item::Drop { ix, offset: start };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::ROTATE => {
                let mut p = 0;
                self.rotated_to = wire::get_str(body, &mut p).map(str::to_owned);
            }
            tag::END => self.end_records = dict::get_end(body),
            tag::SET => {
                if let Some(e) = dict::get_set(body) {
                    self.set = Some(e);
                }
            }
            tag::SPAN if self.header.version >= 3 => self.span_entry(body, start),
            tag::SPAN => match dict::get_span(body) {
                Some(e) if e.ctx != 0 => self.spans.add(&e, end - e.args.len()),
                _ => self.warnings.push(Warning::MalformedSite {
                    path: self.path.clone(),
                    offset: start,
                }),
            },
            tag::STRINGS => {
                let ok = dict::get_strings(body, |id, at, len| {
                    // Ids are dense from 1 in the writer's files, and a file
                    // holds at most 1 MiB of strings of 4 bytes or more: an
                    // id past 2^20 is damage, not a reason for memory.
                    let Some(i) = usize::try_from(id)
                        .ok()
                        .and_then(|id| id.checked_sub(1))
                        .filter(|&i| i < MAX_STRING_IDS)
                    else {
                        return;
                    };
                    if self.strs.len() <= i {
                        self.strs.resize(i + 1, (0, usize::MAX));
                    }
                    // The first copy stands: the writer gives a string again
                    // (the next write restates each write's strings) with
                    // the same bytes, and the first is nearer the records
                    // that use it (a file cut back keeps it).
                    if self.strs[i].1 == usize::MAX {
                        self.strs[i] = (start + at, len);
                    }
                });
                if ok.is_none() {
                    self.warnings.push(Warning::MalformedSite {
                        path: self.path.clone(),
                        offset: start,
                    });
                }
            }
            tag::CONTEXT => {
                if let Some((thread, ctx)) = dict::get_context(body) {
                    let ix = self.spans.index_of(ctx).unwrap_or(0);
                    self.thread_ctx.insert(thread, ix);
                }
            }
            // An entry of a later minor revision: checksummed, so skip it.
            _ => {}
        }
    }

    /// Indexes the entries of the BLOCK whose body is `[start, end)` of
    /// the file, inflated to `raw`: resident at `at` of the file's
    /// inflated bytes, or (`None`) past the budget, to be inflated again
    /// when read.
    fn block(
        &mut self,
        raw: &[u8],
        at: Option<usize>,
        start: usize,
        end: usize,
        pairs: &mut Vec<(u64, i64)>,
    ) {
        let base = match at {
            Some(at) => INFLATED + at,
            None => {
                self.lazy.push(std::sync::OnceLock::new());
                self.lazy_len += raw.len();
                LAZY + self.lazy_len - raw.len()
            }
        };
        self.blocks.push(BlockAt {
            base,
            start,
            end,
            min_tick: u64::MAX,
        });
        self.block_bytes += wire::FRAME_LEN + (end - start);
        self.block_raw += raw.len();
        let (clock_end, warned) = (self.clock_end, self.warnings.len());
        // How many extents and drops the index held after the block's last
        // CLOCK entry.
        let mut at_last_pair = None;
        let mut entries = Entries::inflated(raw, 0);
        for (at, t, body) in entries.by_ref() {
            if at_lazy(base) && matches!(t, tag::STRINGS | tag::SPAN) {
                // The dictionary stays: its bytes are copied out of a
                // block that is let go.
                let copy = INFLATED + self.inflated.len();
                self.inflated.extend_from_slice(body);
                self.copies.push((copy, start));
                self.entry(t, body, copy, copy + body.len(), pairs);
                continue;
            }
            self.entry(t, body, base + at, base + at + body.len(), pairs);
            if t == tag::CLOCK && self.clock_end != clock_end {
                at_last_pair = Some(self.order.len());
            }
            if t == tag::EXTENT {
                if let (_, Some((tick, _))) = wire::extent::get_header(body) {
                    let b = self.blocks.last_mut().expect("pushed above");
                    b.min_tick = b.min_tick.min(tick);
                }
            }
        }
        if entries.pos < raw.len() {
            // Checksummed as a whole, yet not whole entries inside: the
            // rest of the block is skipped.
            self.warnings.push(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: start,
                len: end - start,
                to_end: false,
            });
        }
        // Said of the block's place in the file: its end, or its start when
        // records follow the pair inside it (a new file's block begins with
        // its first pair): a position is never inside a block, and those
        // records wait for a later pair.
        if let Some(n) = at_last_pair {
            self.clock_end = if self.order.len() > n {
                start.saturating_sub(wire::FRAME_LEN).max(clock_end)
            } else {
                end
            };
        }
        for w in &mut self.warnings[warned..] {
            if let Warning::MalformedSite { offset, .. } = w {
                *offset = start;
            }
        }
    }

    /// Where position `at` lies in the file: itself, or for a position in
    /// a block's inflated bytes, where the block's body starts.
    pub(crate) fn file_offset(&self, at: usize) -> usize {
        if at < INFLATED {
            return at;
        }
        if self
            .spilled
            .is_some_and(|s| at < LAZY && at - INFLATED >= s)
        {
            let i = self.copies.partition_point(|&(base, _)| base <= at);
            return i.checked_sub(1).map_or(0, |i| self.copies[i].1);
        }
        let i = self.blocks.partition_point(|b| b.base <= at);
        i.checked_sub(1).map_or(0, |i| self.blocks[i].start)
    }

    /// The block past the resident budget that position `at` lies in, as
    /// an index of `blocks`.
    pub(crate) fn lazy_block(&self, at: usize) -> Option<usize> {
        if !at_lazy(at) {
            return None;
        }
        let i = self
            .blocks
            .partition_point(|b| b.base <= at)
            .checked_sub(1)?;
        (i >= self.lazy_from).then_some(i)
    }

    /// The bytes of `range` (positions of block `b`'s entries) in
    /// `block`, that block's entries inflated.
    pub(crate) fn in_block<'b>(
        &self,
        b: usize,
        block: &'b [u8],
        range: std::ops::Range<usize>,
    ) -> &'b [u8] {
        let base = self.blocks[b].base;
        block
            .get(range.start - base..range.end.wrapping_sub(base))
            .unwrap_or(&[])
    }

    /// Inflates block `b` into `out` (its whole length); false if its bytes
    /// no longer inflate (the file changed since it was indexed).
    pub(crate) fn inflate_block(&self, b: usize, out: &mut Vec<u8>) -> bool {
        let blk = self.blocks[b];
        out.clear();
        self.data
            .get(blk.start..blk.end)
            .is_some_and(|body| crate::wire::block::get_block(body, out).is_ok())
    }

    /// Where an item lies in the file (for an item in a block, where the
    /// block's body starts): what batches, cursors and offset filters go by.
    pub(crate) fn offset_of(&self, it: &Item) -> usize {
        self.file_offset(it.at())
    }

    /// A SPAN entry (version 3 on): its spans, or, when a span of it is of
    /// a site whose first SITE entry was lost, kept until the writer's next
    /// write restates the site.
    fn span_entry(&mut self, body: &[u8], start: usize) {
        if !self.span_batch(body, start) {
            self.spans.wait(start, body.to_vec());
        }
    }

    /// Adds the spans of a SPAN entry (version 3 on) whose body, at `start`
    /// of the file, is `body`; false (nothing added) when a span of it is
    /// of a site not known yet.
    fn span_batch(&mut self, body: &[u8], start: usize) -> bool {
        let sites = &self.sites;
        let unknown = std::cell::Cell::new(false);
        let kinds_of = |site: u32| {
            let kinds = sites
                .get(site as usize)
                .and_then(Option::as_ref)
                .map(|s| &s.kinds[..]);
            unknown.set(unknown.get() || kinds.is_none());
            kinds
        };
        let mut whole = true;
        let mut defs = Vec::new();
        let all = dict::get_spans(
            body,
            dict::SpanForm::of(self.header.version, self.header.ticks_per_second),
            &Strings::of_version(self.header.version),
            kinds_of,
            |e| defs.push(e),
        );
        if all.is_none() && unknown.get() {
            return false;
        }
        for e in defs {
            if e.ctx == 0 {
                whole = false;
                continue;
            }
            self.spans.add(
                &e,
                start + (e.args.as_ptr() as usize - body.as_ptr() as usize),
            );
        }
        if all.is_none() || !whole {
            self.warnings.push(Warning::MalformedSite {
                path: self.path.clone(),
                offset: start,
            });
        }
        true
    }

    /// The SPAN entries waiting for a site, read again now that another
    /// site is known.
    fn retry_spans(&mut self) {
        for (start, body) in self.spans.take_waiting() {
            if !self.span_batch(&body, start) {
                self.spans.wait(start, body);
            }
        }
    }

    /// SPAN entries still waiting for a site once the file is read whole:
    /// damage (their site is nowhere in the file).
    fn warn_pending_spans(&mut self) {
        for (start, _) in self.spans.take_waiting() {
            self.warnings.push(Warning::MalformedSite {
                path: self.path.clone(),
                offset: start,
            });
        }
    }

    /// How the file stores strings, with the strings it defines: what its
    /// records' and spans' arguments decode by.
    #[inline]
    pub(crate) fn strings(&self) -> Strings<'_> {
        if self.header.version >= 3 {
            Strings::tagged(self.header.version, &self.data, &self.inflated, &self.strs)
        } else {
            Strings::UNTAGGED
        }
    }

    /// The spans of context `ctx` (as an extent holds it), outermost first.
    pub(crate) fn spans_of(&self, ctx: u32) -> Vec<SpanRef<'_>> {
        let mut v = Vec::new();
        self.for_each_span(ctx, |s| v.push(s));
        v
    }

    /// Calls `f` with each span of context `ctx`, outermost first, without
    /// allocating for up to 32 nested spans.
    pub(crate) fn for_each_span<'a>(&'a self, ctx: u32, mut f: impl FnMut(SpanRef<'a>)) {
        self.spans.chain(ctx, |d| {
            if let Some(site) = self.site(d.site) {
                f(SpanRef {
                    site,
                    args: self.bytes(d.args.clone()),
                    tick: d.tick,
                    strings: self.strings(),
                });
            }
        });
    }

    /// The file's path (or the name given to [`from_bytes`](Self::from_bytes)).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file header: format version, clock calibration, process id.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Problems found while indexing: a torn tail, skipped corrupt bytes.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Whether the logger closed the file: its last entry is an END (a
    /// dropped `Logger`, a roll, or a process that exited).
    pub fn is_complete(&self) -> bool {
        self.clean_end
    }

    /// The next file of a rolled set, if this one ended by rolling (the
    /// name `rotated_to` is kept: it is public).
    pub fn rotated_to(&self) -> Option<&str> {
        self.rotated_to.as_deref()
    }

    /// Where the file's last CLOCK entry ends. Every record before it in
    /// the file was logged before that pair was read, so its time lies
    /// between two pairs and no later pair changes it: a reader at the live
    /// edge that wants the times `decode` will print once the file is
    /// finished takes records up to here (the writer adds a pair at least
    /// every second).
    pub fn clock_end(&self) -> usize {
        self.clock_end
    }

    /// The file's sequence number in its set (`None`: a file of a writer
    /// before sequence numbers).
    pub fn seq(&self) -> Option<u64> {
        self.set.as_ref().map(|s| s.seq)
    }

    /// The host its writer ran on, if the file says.
    pub fn host(&self) -> Option<&str> {
        self.set
            .as_ref()
            .map(|s| s.host.as_str())
            .filter(|h| !h.is_empty())
    }

    /// Bytes up to the end of the last whole entry.
    pub fn valid_len(&self) -> usize {
        self.valid_len
    }

    /// The call sites, by id.
    pub fn sites(&self) -> impl Iterator<Item = &SiteEntry> {
        self.sites.iter().flatten()
    }

    /// Records the writer put in the set's files numbered below this one,
    /// as the file's SET entry says (`None` for files of earlier writers):
    /// with [`LogFile::records_total`] of an earlier file, how many records
    /// the files between the two held.
    pub fn records_before(&self) -> Option<u64> {
        self.set.as_ref().and_then(|s| s.before)
    }

    /// The records the file holds, as its END entry says; `None` for a file
    /// that did not end cleanly (still written, or its writer died) or of an
    /// earlier writer.
    pub fn records_total(&self) -> Option<u64> {
        self.end_records.filter(|_| self.clean_end)
    }

    /// The call site with this id, if the dictionary has it.
    pub fn site(&self, id: u32) -> Option<&SiteEntry> {
        self.sites.get(id as usize)?.as_ref()
    }

    /// Thread ids and names.
    pub fn threads(&self) -> impl Iterator<Item = ThreadInfo> + '_ {
        let mut ids: Vec<u32> = self
            .threads
            .keys()
            .chain(self.streams.keys())
            .copied()
            .filter(|&id| id != crate::wire::dict::WRITER_THREAD)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|id| ThreadInfo {
            id,
            name: self.threads.get(&id).cloned().unwrap_or_default(),
        })
    }

    /// The name of thread `id`, if it had one.
    pub fn thread_name(&self, id: u32) -> Option<&str> {
        self.threads
            .get(&id)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// The tick-to-wall-clock mapping.
    pub fn time_map(&self) -> &TimeMap {
        &self.time
    }

    /// Dropped-record gaps, in file order.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut v = Vec::new();
        for (&thread, items) in &self.streams {
            for it in items {
                if let Item::Drop { ix, .. } = *it {
                    let d = self.drop_info(ix);
                    v.push(self.gap(thread, d.count, d.first, d.last));
                }
            }
        }
        v
    }

    fn gap(&self, thread: u32, count: u64, first: u64, last: u64) -> Gap {
        Gap::stamped(&self.time, thread, count, first, last)
    }

    /// The context (an index into the spans, plus one; 0: none) of the
    /// file's context id `ctx`, as an extent's context switch names it.
    pub(crate) fn context_of(&self, ctx: u32) -> u32 {
        self.spans.context_of(ctx)
    }

    /// Whether the spans of context `ctx` (as an extent holds it) are not
    /// all known: its SPAN entry, or one of its parents', was lost to
    /// damage (the spans that are known are the inner ones).
    pub(crate) fn context_lost(&self, ctx: u32) -> bool {
        self.spans.context_lost(ctx)
    }

    /// What the DROP entry `ix` (of an `Item::Drop`) holds.
    pub(crate) fn drop_info(&self, ix: u32) -> DropInfo {
        self.drops.get(ix as usize).copied().unwrap_or(DropInfo {
            count: 0,
            first: 0,
            last: 0,
        })
    }

    pub(crate) fn stream_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.streams.keys().copied()
    }

    pub(crate) fn order(&self) -> &[(u32, Item)] {
        &self.order
    }

    pub(crate) fn stream(&self, thread: u32) -> &[Item] {
        self.streams.get(&thread).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Where a batch that begins at byte `from` should end so that it
    /// holds about `max_bytes` of extents: the offset of the first entry
    /// left for the next batch, or [`LogFile::valid_len`] when the rest
    /// fits. A batch holds at least one entry (one extent may exceed
    /// `max_bytes`). With [`Filter::min_offset`](super::Filter) and
    /// `max_offset` it selects whole extents, so a position saved between
    /// batches is never inside one.
    pub fn batch_end(&self, from: usize, max_bytes: usize) -> usize {
        let first = self
            .order
            .partition_point(|(_, it)| self.offset_of(it) < from);
        let mut bytes = 0;
        for (_, it) in &self.order[first..] {
            // (The entries of one block go together: they have one offset.)
            let at = self.offset_of(it);
            if bytes >= max_bytes.max(1) && at > from {
                return at;
            }
            bytes += match *it {
                Item::Extent { start, end, .. } => end - start,
                Item::Drop { .. } => 1,
            };
        }
        self.valid_len.max(from)
    }

    /// How many extents (runs of one thread's records) the file holds.
    pub fn extent_count(&self) -> usize {
        self.order
            .iter()
            .filter(|(_, it)| matches!(it, Item::Extent { .. }))
            .count()
    }

    /// The file's compressed blocks that were read: how many of each codec,
    /// and what they take in the file and inflated (`nanolog info`).
    pub fn block_stats(&self) -> BlockStats {
        let mut st = BlockStats {
            bytes: self.block_bytes,
            raw: self.block_raw,
            ..BlockStats::default()
        };
        for b in &self.blocks {
            match self.data.get(b.start) {
                Some(&wire::block::DEFLATE_COMPACT) => st.deflate += 1,
                Some(_) => st.lz4 += 1,
                None => {}
            }
        }
        st
    }

    /// The file's length with its compressed blocks counted at their
    /// inflated size: what its entries take uncompressed (the size of the
    /// same file written with `Builder::compress(false)`, near enough).
    pub fn raw_len(&self) -> usize {
        self.valid_len - self.block_bytes + self.block_raw
    }

    /// The earliest tick of the file's records and drop gaps from byte
    /// `from` on (an extent's first record is its earliest), or `None` when
    /// there are none. A thread's ring can hold records from before the
    /// file began: their times lie between clock pairs of earlier files of
    /// its writer.
    pub fn first_tick(&self, from: usize) -> Option<u64> {
        let first = self
            .order
            .partition_point(|(_, it)| self.offset_of(it) < from);
        self.order[first..]
            .iter()
            .filter_map(|(_, it)| match *it {
                // (Not inflated again: its block's earliest, from the index.)
                Item::Extent { start, .. } if at_lazy(start) => self
                    .lazy_block(start)
                    .map(|b| self.blocks[b].min_tick)
                    .filter(|&t| t != u64::MAX),
                Item::Extent { start, end, .. } => wire::extent::get_header(self.bytes(start..end))
                    .1
                    .map(|(t, _)| t),
                Item::Drop { ix, .. } => Some(self.drop_info(ix).first),
            })
            .min()
    }

    /// Which writer's clock the file's ticks count: files of one process
    /// (its pid and its calibrated tick rate) are read by one clock, the
    /// union of their clock pairs ([`TimeMap::union`]).
    pub fn clock_domain(&self) -> (u32, u64) {
        (self.header.pid, self.header.ticks_per_second.to_bits())
    }

    /// The bytes of `range` (an extent body the index points to).
    pub(super) fn bytes(&self, range: std::ops::Range<usize>) -> &[u8] {
        if let Some(b) = self.lazy_block(range.start) {
            let buf = self.lazy[b - self.lazy_from].get_or_init(|| {
                let mut out = Vec::new();
                self.inflate_block(b, &mut out);
                out.into_boxed_slice()
            });
            return self.in_block(b, buf, range);
        }
        if range.start >= INFLATED {
            return self
                .inflated
                .get(range.start - INFLATED..range.end.wrapping_sub(INFLATED))
                .unwrap_or(&[]);
        }
        self.data.get(range).unwrap_or(&[])
    }

    /// The sites' slots (ids up to the largest, some possibly empty).
    pub(super) fn site_slots(&self) -> &[Option<SiteEntry>] {
        &self.sites
    }

    /// See `Record::may_need_escape`.
    pub(super) fn site_may_escape(&self, id: u32) -> bool {
        self.site_may_escape
            .get(id as usize)
            .copied()
            .unwrap_or(true)
    }

    pub(crate) fn malformed(&self, offset: usize, reason: &'static str) -> ReadError {
        ReadError::Malformed {
            path: self.path.clone(),
            offset: self.file_offset(offset),
            reason,
        }
    }
}
