//! Reading nanolog files: the header, the dictionary, and the records, typed
//! and unformatted. Formatting a record is a separate call ([`Record::render`]).
//!
//! ```no_run
//! use nanolog_runtime::reader::{LogFile, Value};
//!
//! let log = LogFile::open("app.nlog")?;
//! for rec in log.records() {
//!     let rec = rec?;
//!     if let Some(Value::Uint(n)) = rec.arg(0) {
//!         println!("{} {} {}", rec.unix_ns(), rec.site().format, n);
//!     }
//! }
//! # Ok::<(), nanolog_runtime::reader::ReadError>(())
//! ```
//!
//! [`Merge`] interleaves the threads of one or more files into time order.

mod map;
mod merge;
pub mod render;
pub mod time;
mod warning;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::writer::rotated_path;
pub use merge::{Event, Filter, Merge};
pub use time::TimeMap;
pub use warning::Warning;

use crate::site::ArgKind;
pub use crate::wire::dict::SiteDef;
pub use crate::wire::header::{Header, HeaderError};
pub use crate::wire::record::{RenderedStrs, Value};
use crate::wire::{self, dict, get_varint, tag};
use crate::Level;

/// Why a file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or mapped.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is empty.
    Empty { path: PathBuf },
    /// The file is not a nanolog log.
    NotNanolog { path: PathBuf },
    /// The file was written by a format version this reader does not know.
    UnsupportedVersion { path: PathBuf, version: u16 },
    /// The header is damaged.
    BadHeader { path: PathBuf, reason: String },
    /// An extent refers to a call site missing from the dictionary, or its
    /// records are malformed though its checksum matched.
    Malformed {
        path: PathBuf,
        offset: usize,
        reason: &'static str,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ReadError::Empty { path } => {
                write!(f, "{}: empty file, not a nanolog log", path.display())
            }
            ReadError::NotNanolog { path } => {
                write!(f, "{}: not a nanolog log (bad magic bytes)", path.display())
            }
            ReadError::UnsupportedVersion { path, version } => write!(
                f,
                "{}: unsupported nanolog format version {version} (this reader knows version {})",
                path.display(),
                wire::VERSION
            ),
            ReadError::BadHeader { path, reason } => {
                write!(f, "{}: damaged header: {reason}", path.display())
            }
            ReadError::Malformed {
                path,
                offset,
                reason,
            } => {
                write!(
                    f,
                    "{}: malformed extent at byte {offset}: {reason}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

enum Data {
    Map(map::GuardedMap),
    Owned(Vec<u8>),
}

impl Data {
    /// Whether some bytes read as zeros because the file shrank under us.
    fn faulted(&self) -> bool {
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

/// Where a thread's records are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Item {
    /// An EXTENT body: `[start, end)` in the file.
    Extent { start: usize, end: usize },
    /// A DROP entry.
    Drop {
        count: u64,
        first: u64,
        last: u64,
        offset: usize,
    },
}

/// A dropped-records gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub thread: u32,
    /// Records dropped.
    pub count: u64,
    pub first_tick: u64,
    pub last_tick: u64,
    pub first_unix_ns: i64,
    pub last_unix_ns: i64,
}

/// A logging thread as the file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub id: u32,
    /// Empty if the thread had no name.
    pub name: String,
}

/// One nanolog file, memory-mapped and indexed.
pub struct LogFile {
    path: PathBuf,
    data: Data,
    header: Header,
    sites: Vec<Option<SiteDef>>,
    threads: BTreeMap<u32, String>,
    /// Per site id: see [`Record::may_need_escape`].
    site_may_escape: Vec<bool>,
    /// Names of the low thread ids, for a lookup per record.
    thread_names: Vec<Option<String>>,
    /// Per thread, its extents and drops in file order.
    streams: BTreeMap<u32, Vec<Item>>,
    /// All extents and drops in file order.
    order: Vec<(u32, Item)>,
    time: TimeMap,
    warnings: Vec<Warning>,
    clean_end: bool,
    rotated_to: Option<String>,
    /// Bytes up to the end of the last whole entry.
    valid_len: usize,
    /// The file's (device, inode) when opened, to notice a replacement.
    identity: Option<(u64, u64)>,
}

/// What [`LogFile::refresh`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Nothing new.
    Unchanged,
    /// The file grew; the new entries are indexed.
    Grew,
    /// The path now holds another file (a new run, a rotation by another
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
    pub fn open(path: impl AsRef<Path>) -> Result<LogFile, ReadError> {
        let path = path.as_ref();
        let (data, identity) = load(path)?;
        let mut f = Self::index(path.to_path_buf(), data)?;
        f.identity = identity;
        Ok(f)
    }

    /// Indexes what a growing file (a live log) has gained since it was
    /// opened or last refreshed: the file is mapped again and only the new
    /// entries are read. A file replaced at the path (a new run) or cut
    /// below what was read is reported as [`Refresh::Replaced`], never read
    /// with this file's dictionary.
    pub fn refresh(&mut self) -> Result<Refresh, ReadError> {
        let (data, identity) = load(&self.path)?;
        // The parsed header, not the old map's bytes: a file rewritten in
        // place shows its new bytes through the old map too.
        let replaced = identity != self.identity
            || data.len() < self.valid_len
            || Header::decode(&data).ok() != Some(self.header);
        if replaced {
            return Ok(Refresh::Replaced);
        }
        if data.len() <= self.data.len() {
            return Ok(Refresh::Unchanged);
        }
        self.data = data;
        let mut pairs = self.time.pairs().to_vec();
        // A torn tail seen before may be whole now: read from the last whole entry.
        self.warnings
            .retain(|w| !matches!(w, Warning::TornTail { .. }));
        self.scan(self.valid_len, &mut pairs);
        self.warn_if_shrank();
        self.time = TimeMap::new(self.header.ticks_per_second, pairs);
        self.derive();
        Ok(Refresh::Grew)
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
    pub fn shrank(&self) -> bool {
        self.data.faulted()
    }

    /// Indexes a log held in memory.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<LogFile, ReadError> {
        Self::index(name.into(), Data::Owned(bytes))
    }

    fn index(path: PathBuf, data: Data) -> Result<LogFile, ReadError> {
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
            data,
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
            valid_len: wire::HEADER_LEN,
            identity: None,
        };
        let mut pairs = vec![(header.base_tick, header.base_unix_ns)];
        f.scan(wire::HEADER_LEN, &mut pairs);
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
                            crate::site::Piece::Lit(l) => render::needs_escape(l.as_bytes()),
                            crate::site::Piece::Arg(spec) => spec.fill != ' ',
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

    fn scan(&mut self, from: usize, pairs: &mut Vec<(u64, i64)>) {
        // Moved out while indexing, so `entry` can update `self`.
        let owned = std::mem::replace(&mut self.data, Data::Owned(Vec::new()));
        let data = &owned[..];
        let mut pos = from;
        let mut skipped_from: Option<usize> = None;
        while pos < data.len() {
            match frame_at(data, pos) {
                Frame::Ok { tag: t, body } => {
                    if let Some(from) = skipped_from.take() {
                        self.warnings.push(Warning::SkippedCorrupt {
                            path: self.path.clone(),
                            offset: from,
                            len: pos - from,
                            to_end: false,
                        });
                    }
                    let body_start = pos + wire::FRAME_LEN;
                    let end = body_start + body.len();
                    self.entry(t, body, body_start, end, pairs);
                    pos = end;
                    self.valid_len = end;
                }
                Frame::Truncated if skipped_from.is_some() => pos += 1,
                Frame::Truncated => {
                    // Either a torn tail (the writer died mid-entry) or a
                    // damaged length: it is damage if a whole entry follows.
                    if (pos + 1..data.len()).any(|p| matches!(frame_at(data, p), Frame::Ok { .. }))
                    {
                        skipped_from = Some(pos);
                        pos += 1;
                        continue;
                    }
                    self.warnings.push(Warning::TornTail {
                        path: self.path.clone(),
                        offset: pos,
                        len: data.len() - pos,
                    });
                    break;
                }
                Frame::Bad => {
                    // Resynchronise: look for the next position where a whole
                    // entry with a matching checksum starts.
                    skipped_from.get_or_insert(pos);
                    pos += 1;
                }
            }
        }
        if let Some(from) = skipped_from {
            self.warnings.push(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: from,
                len: data.len() - from,
                to_end: true,
            });
        }
        self.data = owned;
    }

    fn entry(&mut self, t: u8, body: &[u8], start: usize, end: usize, pairs: &mut Vec<(u64, i64)>) {
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
                let mut p = 0;
                if let Some(thread) = get_varint(body, &mut p).and_then(|v| u32::try_from(v).ok()) {
                    let it = Item::Extent { start, end };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::CLOCK => {
                if let Some(p) = dict::get_clock(body) {
                    pairs.push(p);
                }
            }
            tag::DROP => {
                if let Some((thread, count, first, last)) = dict::get_drop(body) {
                    let it = Item::Drop {
                        count,
                        first,
                        last,
                        offset: start,
                    };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::ROTATE => {
                let mut p = 0;
                self.rotated_to = wire::get_str(body, &mut p).map(str::to_owned);
            }
            tag::END => self.clean_end = true,
            // An entry of a later minor revision: checksummed, so skip it.
            _ => {}
        }
    }

    /// The file's path (or the name given to [`from_bytes`](Self::from_bytes)).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Problems found while indexing: a torn tail, skipped corrupt bytes.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Whether the logger closed the file (an END entry is present).
    pub fn is_complete(&self) -> bool {
        self.clean_end
    }

    /// The next file of a rotated set, if this one ended by rotating.
    pub fn rotated_to(&self) -> Option<&str> {
        self.rotated_to.as_deref()
    }

    /// Bytes up to the end of the last whole entry.
    pub fn valid_len(&self) -> usize {
        self.valid_len
    }

    /// The call sites, by id.
    pub fn sites(&self) -> impl Iterator<Item = &SiteDef> {
        self.sites.iter().flatten()
    }

    pub fn site(&self, id: u32) -> Option<&SiteDef> {
        self.sites.get(id as usize)?.as_ref()
    }

    /// Thread ids and names.
    pub fn threads(&self) -> impl Iterator<Item = ThreadInfo> + '_ {
        let mut ids: Vec<u32> = self
            .threads
            .keys()
            .chain(self.streams.keys())
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|id| ThreadInfo {
            id,
            name: self.threads.get(&id).cloned().unwrap_or_default(),
        })
    }

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
                if let Item::Drop {
                    count, first, last, ..
                } = *it
                {
                    v.push(self.gap(thread, count, first, last));
                }
            }
        }
        v
    }

    fn gap(&self, thread: u32, count: u64, first: u64, last: u64) -> Gap {
        self.gap_in(&self.time, thread, count, first, last)
    }

    pub(crate) fn gap_in(
        &self,
        time: &TimeMap,
        thread: u32,
        count: u64,
        first: u64,
        last: u64,
    ) -> Gap {
        Gap {
            thread,
            count,
            first_tick: first,
            last_tick: last,
            first_unix_ns: time.unix_ns(first),
            last_unix_ns: time.unix_ns(last),
        }
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

    /// Every record of every thread, thread by thread (not in time order; see
    /// [`Merge`] for that).
    pub fn records(&self) -> impl Iterator<Item = Result<Record<'_>, ReadError>> + '_ {
        self.streams
            .iter()
            .flat_map(move |(&thread, items)| {
                items.iter().flat_map(move |it| match *it {
                    Item::Extent { start, end } => Some(self.extent(thread, start, end)),
                    Item::Drop { .. } => None,
                })
            })
            .flatten()
    }

    /// How many extents (runs of one thread's records) the file holds.
    pub fn extent_count(&self) -> usize {
        self.order
            .iter()
            .filter(|(_, it)| matches!(it, Item::Extent { .. }))
            .count()
    }

    /// The records of every extent in `range` (extents counted in file
    /// order), for splitting work across threads. Records come thread-run by
    /// thread-run, not in time order.
    pub fn records_of_extents(&self, range: std::ops::Range<usize>) -> ExtentRecords<'_> {
        ExtentRecords {
            file: self,
            items: self.order.iter(),
            skip: range.start,
            left: range.len(),
            current: None,
        }
    }

    /// The records of one extent.
    pub(crate) fn extent(&self, thread: u32, start: usize, end: usize) -> Extent<'_> {
        let body = &self.data[start..end];
        let mut pos = 0;
        let _ = get_varint(body, &mut pos);
        let base = wire::get_array::<8>(body, &mut pos).map(u64::from_le_bytes);
        Extent {
            file: self,
            thread,
            body,
            body_offset: start,
            pos: if base.is_some() { pos } else { body.len() },
            tick: base.unwrap_or(0),
            failed: base.is_none(),
            rec_start: 0,
            untimed: false,
        }
    }

    pub(crate) fn malformed(&self, offset: usize, reason: &'static str) -> ReadError {
        ReadError::Malformed {
            path: self.path.clone(),
            offset,
            reason,
        }
    }
}

/// Reads one byte of every page `bytes` spans (see `Extent::take_args`).
#[inline]
fn touch_pages(bytes: &[u8]) {
    const PAGE: usize = 4096;
    let mut i = PAGE - (bytes.as_ptr() as usize % PAGE);
    while i < bytes.len() {
        std::hint::black_box(bytes[i]);
        i += PAGE;
    }
    if let Some(last) = bytes.last() {
        std::hint::black_box(*last);
    }
}

/// A file's bytes (mapped, or read whole when it is not a regular file or
/// cannot be guarded) and its (device, inode).
fn load(path: &Path) -> Result<(Data, Option<(u64, u64)>), ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
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
        match map::GuardedMap::new(&file).map_err(io)? {
            Some(m) => Data::Map(m),
            None => read_whole(&mut file).map_err(io)?,
        }
    };
    Ok((data, identity))
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

enum Frame<'a> {
    Ok {
        tag: u8,
        body: &'a [u8],
    },
    /// Not enough bytes left for the entry the frame announces.
    Truncated,
    /// Bad tag, length or checksum.
    Bad,
}

fn frame_at(data: &[u8], pos: usize) -> Frame<'_> {
    let Some(f) = data.get(pos..pos + wire::FRAME_LEN) else {
        return Frame::Truncated;
    };
    let t = f[0];
    if t == 0 || t > 32 {
        return Frame::Bad;
    }
    let len = u32::from_le_bytes([f[1], f[2], f[3], f[4]]) as usize;
    let crc = u32::from_le_bytes([f[5], f[6], f[7], f[8]]);
    if len > wire::MAX_BODY {
        return Frame::Bad;
    }
    let start = pos + wire::FRAME_LEN;
    let Some(body) = data.get(start..start + len) else {
        return Frame::Truncated;
    };
    if wire::entry_crc(t, body) != crc {
        return Frame::Bad;
    }
    Frame::Ok { tag: t, body }
}

/// The records of a range of extents, from [`LogFile::records_of_extents`];
/// their wall-clock time is computed only when asked for.
pub struct ExtentRecords<'a> {
    file: &'a LogFile,
    items: std::slice::Iter<'a, (u32, Item)>,
    skip: usize,
    left: usize,
    current: Option<Extent<'a>>,
}

impl<'a> Iterator for ExtentRecords<'a> {
    type Item = Result<Record<'a>, ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.current.as_mut() {
                match e.next() {
                    Some(r) => return Some(r),
                    None => self.current = None,
                }
            }
            if self.left == 0 {
                return None;
            }
            let &(thread, item) = self.items.next()?;
            let Item::Extent { start, end } = item else {
                continue;
            };
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.left -= 1;
            let mut e = self.file.extent(thread, start, end);
            e.untimed = true;
            self.current = Some(e);
        }
    }
}

/// The records of one extent, in order.
pub(crate) struct Extent<'a> {
    file: &'a LogFile,
    thread: u32,
    body: &'a [u8],
    body_offset: usize,
    pos: usize,
    tick: u64,
    failed: bool,
    rec_start: usize,
    /// Leave the wall-clock time to be computed on demand.
    untimed: bool,
}

impl<'a> Extent<'a> {
    /// The next record's header fields, without decoding its arguments:
    /// `(site, tick)`; then [`Extent::take_args`] must be called.
    #[inline]
    fn next_header(&mut self) -> Option<Result<(&'a SiteDef, u64), ReadError>> {
        if self.pos >= self.body.len() || self.failed {
            return None;
        }
        self.rec_start = self.pos;
        let site_id = get_varint(self.body, &mut self.pos);
        let delta = get_varint(self.body, &mut self.pos);
        let (Some(site_id), Some(delta)) = (site_id, delta) else {
            return Some(Err(self.fail("truncated record header")));
        };
        let Some(site) = u32::try_from(site_id)
            .ok()
            .and_then(|id| self.file.site(id))
        else {
            return Some(Err(
                self.fail("record of a call site missing from the dictionary")
            ));
        };
        self.tick = self.tick.wrapping_add(delta);
        Some(Ok((site, self.tick)))
    }

    /// The record's arguments and its total length in bytes.
    #[inline]
    fn take_args(&mut self, site: &SiteDef) -> Result<(&'a [u8], u32), ReadError> {
        let start = self.pos;
        let skipped = wire::record::skip_args(&site.kinds, self.body, &mut self.pos);
        // Skipping reads lengths, not every value byte: read a byte of each
        // page the record spans, so a page the file no longer covers faults
        // now, on this thread, and is counted before the check below.
        touch_pages(&self.body[self.rec_start..self.pos.min(self.body.len())]);
        if self.file.data.faulted() {
            return Err(
                self.fail("the file shrank while being read (truncated by another program)")
            );
        }
        match skipped {
            Some(()) => Ok((
                &self.body[start..self.pos],
                (self.pos - self.rec_start) as u32,
            )),
            None => Err(self.fail("malformed record arguments")),
        }
    }

    fn fail(&mut self, reason: &'static str) -> ReadError {
        self.failed = true;
        self.file.malformed(self.body_offset + self.pos, reason)
    }
}

impl<'a> Iterator for Extent<'a> {
    type Item = Result<Record<'a>, ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (site, tick) = match self.next_header()? {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        let untimed = self.untimed;
        Some(self.take_args(site).map(|(args, len)| {
            let mut r = Record::new_untimed(self.file, site, self.thread, tick, args, len);
            if !untimed {
                r.ns = self.file.time.unix_ns(tick);
            }
            r
        }))
    }
}

impl Record<'_> {
    /// Sets the wall-clock time (by a clock shared with other files).
    #[inline]
    pub(crate) fn set_unix_ns(&mut self, ns: i64) {
        self.ns = ns;
    }
}

/// `Record::ns` before it is computed.
const UNTIMED: i64 = i64::MIN;

/// One record: its time, thread, call site and undecoded arguments.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    file: &'a LogFile,
    site: &'a SiteDef,
    thread: u32,
    tick: u64,
    args: &'a [u8],
    /// Bytes of the record in the file.
    len: u32,
    ns: i64,
}

impl fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("unix_ns", &self.unix_ns())
            .field("thread", &self.thread)
            .field("site", &self.site.id)
            .field("message", &self.message())
            .finish()
    }
}

impl<'a> Record<'a> {
    /// A record whose wall-clock time is computed when asked for.
    #[inline]
    pub(crate) fn new_untimed(
        file: &'a LogFile,
        site: &'a SiteDef,
        thread: u32,
        tick: u64,
        args: &'a [u8],
        len: u32,
    ) -> Record<'a> {
        Record {
            file,
            site,
            thread,
            tick,
            args,
            len,
            ns: UNTIMED,
        }
    }

    /// Bytes the record takes in the file (header and arguments).
    pub fn encoded_len(&self) -> usize {
        self.len as usize
    }

    /// The raw clock tick.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_ns(&self) -> i64 {
        if self.ns == UNTIMED {
            self.file.time.unix_ns(self.tick)
        } else {
            self.ns
        }
    }

    pub fn level(&self) -> Level {
        self.site.level
    }

    /// The logger-assigned id of the thread that logged it (unique per file).
    pub fn thread(&self) -> u32 {
        self.thread
    }

    /// The thread's name, if it had one.
    pub fn thread_name(&self) -> Option<&'a str> {
        self.file.thread_name(self.thread)
    }

    pub fn site(&self) -> &'a SiteDef {
        self.site
    }

    /// The file it came from.
    pub fn file(&self) -> &'a LogFile {
        self.file
    }

    /// The argument values, in argument order (named ones included, inline
    /// captures last).
    pub fn args(&self) -> impl Iterator<Item = Value<'a>> + 'a {
        let mut v = Vec::with_capacity(self.site.kinds.len());
        let mut pos = 0;
        let _ = wire::record::decode_args(&self.site.kinds, self.args, &mut pos, |x| v.push(x));
        v.into_iter()
    }

    /// The `n`-th argument (0-based), decoded without allocating.
    pub fn arg(&self, n: usize) -> Option<Value<'a>> {
        wire::record::nth_arg(&self.site.kinds, self.args, 0, n)
    }

    /// Whether the rendered message can hold characters a one-line text
    /// output must escape: false when the literal text is plain and no
    /// argument is a string or char.
    pub fn may_need_escape(&self) -> bool {
        self.file
            .site_may_escape
            .get(self.site.id as usize)
            .copied()
            .unwrap_or(true)
    }

    /// Calls `f` with the arguments as a slice, without allocating for up
    /// to 8 arguments.
    pub fn with_args<R>(&self, f: impl FnOnce(&[Value<'a>]) -> R) -> R {
        let n = self.site.kinds.len();
        let mut pos = 0;
        if n <= 8 {
            let mut buf = [Value::Bool(false); 8];
            let mut i = 0;
            let _ = wire::record::decode_args(&self.site.kinds, self.args, &mut pos, |x| {
                buf[i] = x;
                i += 1;
            });
            f(&buf[..i])
        } else {
            let mut v = Vec::with_capacity(n);
            let _ = wire::record::decode_args(&self.site.kinds, self.args, &mut pos, |x| v.push(x));
            f(&v)
        }
    }

    /// Appends the formatted message (what `format!` gave at the call site).
    pub fn render(&self, out: &mut String) {
        self.with_args(|args| render::render(&self.site.pieces, &self.site.kinds, args, out));
    }

    /// The formatted message.
    pub fn message(&self) -> String {
        let mut s = String::new();
        self.render(&mut s);
        s
    }
}
