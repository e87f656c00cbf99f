//! One log file: [`LogFile`], what its index holds (dictionary, threads,
//! extents and drops, clock pairs, span contexts) and what it answers.
//!
//! Its rooms: the frame scan that builds the index ([`scan`]), its
//! compressed blocks, held or inflated again when read ([`blocks`]), and a
//! file still being written, read as it grows ([`live`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod blocks;
mod live;
mod scan;
mod skip;

pub use blocks::{__set_read_resident, BlockStats};
pub(crate) use blocks::{at_lazy, resident, LAZY};
pub(in crate::reader) use blocks::{Block, SharedBlocks};
use blocks::{BlockAt, Blocks};
pub use live::Refresh;
pub use scan::Wave;
pub use skip::Want;

use super::error::ReadError;
use super::inflate;
use super::map::{load, load_open, Behind, Data};
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
use crate::wire::totals::{self, Totals};
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
    /// What the TOTALS entry right before the last END says (see
    /// [`LogFile::totals`]) ...
    totals: Option<Totals>,
    /// ... and the TOTALS entry read last, with where its body ends (it
    /// counts for an END whose frame starts there).
    totals_next: Option<(usize, Totals)>,
    /// Read with [`Want::since_checkpoint`]: the last checkpoint, where it
    /// ends and what it counts (see [`LogFile::checkpoint`]).
    checkpoint: Option<(usize, Totals)>,
    /// What DROP entries hold, in file order (see `Item::Drop`).
    drops: Vec<DropInfo>,
    /// Its compressed blocks: where each is, which are held inflated.
    blocks: Blocks,
    /// While indexing: each thread's current context.
    thread_ctx: std::collections::HashMap<u32, u32>,
    /// The regions the scan leaves out, sorted (see `skip.rs`; empty but
    /// for [`LogFile::open_for`]).
    skip: Vec<(usize, usize)>,
    /// The file as opened, kept by [`LogFile::open_live`] only: after a
    /// roll renames it away from its path, its last entries are read
    /// through this.
    handle: Option<std::fs::File>,
    /// Read as a live file (see [`LogFile::open_live`]): an entry whose
    /// stated length runs past the bytes there is not written yet, never
    /// damage, until [`LogFile::settle`].
    live: bool,
    /// Each context's trace context, once a record asked for it (see
    /// `Record::trace_context`): the records of a context share it, and
    /// finding it walks the context's spans and decodes their ids.
    pub(crate) traces:
        std::sync::Mutex<std::collections::HashMap<u32, Option<super::TraceContext>>>,
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
        on_wave: impl FnMut(&Wave<'_>),
    ) -> Result<LogFile, ReadError> {
        Self::open_streamed_for(path, &Want::default(), on_wave)
    }

    /// [`LogFile::open_streamed`] leaving out what `want` does not want, as
    /// [`LogFile::open_for`] does: the waves hold the writes read.
    pub fn open_streamed_for(
        path: impl AsRef<Path>,
        want: &Want,
        mut on_wave: impl FnMut(&Wave<'_>),
    ) -> Result<LogFile, ReadError> {
        let path = path.as_ref();
        let loaded = load(path)?;
        let mut f = Self::index(
            path.to_path_buf(),
            loaded.data,
            false,
            Some(&mut on_wave),
            Some(want),
        )?;
        f.identity = loaded.identity;
        Ok(f)
    }

    /// [`LogFile::open`] for a reader that wants only some records: the
    /// writes the file's index says hold none of them are left out, neither
    /// inflated nor indexed (files of writers before 2026-11-29 have no
    /// index and are read whole). The file holds every record `want`
    /// wants, and others: a reader filters them as it would those of
    /// [`LogFile::open`]'s file, and gets the same records. Its counts
    /// ([`LogFile::records_total`], [`LogFile::block_stats`], ...) are of what
    /// was read.
    pub fn open_for(path: impl AsRef<Path>, want: &Want) -> Result<LogFile, ReadError> {
        let path = path.as_ref();
        let loaded = load(path)?;
        let mut f = Self::index(path.to_path_buf(), loaded.data, false, None, Some(want))?;
        f.identity = loaded.identity;
        Ok(f)
    }

    /// [`LogFile::open_live`] for a follower that wants only some of what
    /// is there now (`decode -f -n N`: the last N): the writes the file's
    /// index says hold none of them are left out, as [`LogFile::open_for`]
    /// leaves them; everything the file gains after is read.
    pub fn open_live_for(path: impl AsRef<Path>, want: &Want) -> Result<LogFile, ReadError> {
        let path = path.as_ref();
        let loaded = load(path)?;
        let mut f = Self::index(path.to_path_buf(), loaded.data, true, None, Some(want))?;
        f.identity = loaded.identity;
        f.handle = Some(loaded.file);
        Ok(f)
    }

    fn open_keeping(path: &Path, keep_handle: bool) -> Result<LogFile, ReadError> {
        let loaded = load(path)?;
        let mut f = Self::index(path.to_path_buf(), loaded.data, keep_handle, None, None)?;
        f.identity = loaded.identity;
        f.handle = keep_handle.then_some(loaded.file);
        Ok(f)
    }

    /// Indexes a log held in memory.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<LogFile, ReadError> {
        Self::index(name.into(), Data::Owned(bytes), false, None, None)
    }

    fn index(
        path: PathBuf,
        data: Data,
        live: bool,
        on_wave: Option<&mut dyn FnMut(&Wave<'_>)>,
        want: Option<&Want>,
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
            totals: None,
            totals_next: None,
            checkpoint: None,
            drops: Vec::new(),
            blocks: Blocks::default(),
            thread_ctx: Default::default(),
            skip: Vec::new(),
            traces: Default::default(),
        };
        // A reader that leaves some out reads the rest a few pages at a
        // time: no read-ahead while the file is indexed.
        let sparse = want.is_some_and(|w| !w.all());
        if let Some(want) = want.filter(|_| sparse) {
            f.data.sparse(true);
            let mut behind = Behind::at(wire::HEADER_LEN);
            let left = skip::left_out(
                &f.data,
                &header,
                want,
                || f.data.sparse(false),
                |pos| behind.passed(&f.data, pos),
            );
            // (What the walk left mapped, the scan reads in part and gives
            // back at its end.)
            f.skip = left.regions;
            f.checkpoint = left.checkpoint;
            f.blocks.skipped = left.blocks;
            if let Some((offset, why)) = left.refused {
                f.warnings.push(Warning::IndexRefused {
                    path: f.path.clone(),
                    offset,
                    why: why.says(),
                });
            }
        }
        let mut pairs = vec![(header.base_tick, header.base_unix_ns)];
        f.scan(wire::HEADER_LEN, &mut pairs, on_wave);
        if sparse {
            f.data.sparse(false);
        }
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

    /// Where an item lies in the file (for an item in a block, where the
    /// block's body starts): what batches, cursors and offset filters go by.
    pub(crate) fn offset_of(&self, it: &Item) -> usize {
        self.file_offset(it.at())
    }

    /// A reader going forward through the file with `behind` will read
    /// nothing before file offset `pos` again (see [`Behind`]): the pages
    /// it passed go back to the kernel a chunk at a time.
    #[inline]
    pub(crate) fn passed(&self, behind: &mut Behind, pos: usize) {
        behind.passed(&self.data, pos);
    }

    /// The reader with `behind` is done with the file's bytes before
    /// `pos`: their pages go back now (all of them: `usize::MAX`).
    pub(crate) fn done_with(&self, behind: &mut Behind, pos: usize) {
        behind.done(&self.data, pos);
    }

    /// How the file stores strings, with the strings it defines: what its
    /// records' and spans' arguments decode by.
    #[inline]
    pub(crate) fn strings(&self) -> Strings<'_> {
        if self.header.version >= 3 {
            Strings::tagged(
                self.header.version,
                &self.data,
                &self.blocks.inflated,
                &self.strs,
            )
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
        self.spans.chain(ctx, |c, d| {
            if let Some(site) = self.site(d.site) {
                f(SpanRef {
                    ctx: c,
                    site,
                    args: self.bytes(d.args.clone()),
                    tick: d.tick,
                    strings: self.strings(),
                });
            }
        });
    }

    /// The context ids of the file whose records' INDEX entries a reader
    /// of trace `trace_id` wants ([`Want::contexts`]): its spans that may
    /// carry trace ids (a field named `span_id`) whose records are of that
    /// trace ([`Record::trace_context`](super::Record::trace_context)), from
    /// its SPAN entries. (A writer names, for each record in a span, the
    /// innermost such span of its stack: FORMAT.md, "INDEX".)
    pub fn contexts_in_trace(&self, trace_id: [u8; 16]) -> Vec<u32> {
        self.spans.in_trace(
            trace_id,
            |d| self.site(d.site).is_some_and(SiteEntry::may_carry_trace),
            |d| {
                // (Most spans have no ids: their values are not decoded.)
                let site = self.site(d.site).filter(|s| s.may_carry_trace())?;
                let span = SpanRef {
                    // (Only its trace context is asked for.)
                    ctx: 0,
                    site,
                    args: self.bytes(d.args.clone()),
                    tick: d.tick,
                    strings: self.strings(),
                };
                span.trace_context().map(|t| t.trace_id)
            },
        )
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

    /// What the file's writer counted of its records (by call site and
    /// thread, their ticks' range, the drops and losses), as the TOTALS
    /// entry right ahead of its last END says: `None` for a file that did
    /// not end cleanly, of a writer before 2026-11-29, read with damage
    /// (a warning), or whose TOTALS does not count what its END does. A
    /// reader that trusts it needs none of the records: `nanolog info`
    /// opens such a file leaving them all out ([`Want::nothing`]).
    pub fn totals(&self) -> Option<&Totals> {
        let t = self.totals.as_ref()?;
        (self.warnings.is_empty() && self.records_total() == Some(t.records())).then_some(t)
    }

    /// Read with [`Want::since_checkpoint`]: what the file's last
    /// checkpoint counts (a TOTALS entry its writer puts after a write
    /// every 16 MiB, FORMAT.md), and where it ends: the records and gaps at
    /// or after that offset
    /// ([`Filter::min_offset`](super::Filter::min_offset)) are the ones it
    /// does not count, so its counts and theirs add up to the file's. (Records
    /// before it may have been read too: a write without an INDEX entry, or
    /// whose INDEX entry was damaged, is read; it counts them.) As with
    /// [`LogFile::totals`], damage inside the runs it counts is not seen;
    /// and as with it, a reading that found damage (a warning other than a
    /// torn tail, what a writer still writing or killed leaves) takes none,
    /// nor does a file that ended (its END's TOTALS is [`LogFile::totals`]).
    pub fn checkpoint(&self) -> Option<(usize, &Totals)> {
        let torn = |w: &Warning| matches!(w, Warning::TornTail { .. });
        if self.is_complete() || !self.warnings.iter().all(torn) {
            return None;
        }
        self.checkpoint.as_ref().map(|(end, t)| (*end, t))
    }

    /// Whether every record of the file was read: nothing was left out
    /// ([`LogFile::open_for`] found no run of records its want could do
    /// without, or the file was opened whole).
    pub fn is_whole(&self) -> bool {
        self.skip.is_empty()
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

    /// How many of the file's extents (counted as
    /// [`LogFile::scan_extents`] counts them) stand before byte `offset`
    /// of the file: those after it are `extents_before(offset)..`, as a
    /// reader of what follows a checkpoint ([`LogFile::checkpoint`]) wants
    /// them.
    pub fn extents_before(&self, offset: usize) -> usize {
        self.order
            .iter()
            .filter(|(_, it)| matches!(it, Item::Extent { .. }))
            .take_while(|(_, it)| self.offset_of(it) < offset)
            .count()
    }

    /// How many extents (runs of one thread's records) the file holds.
    pub fn extent_count(&self) -> usize {
        self.order
            .iter()
            .filter(|(_, it)| matches!(it, Item::Extent { .. }))
            .count()
    }

    /// The earliest tick of the file's records and drop gaps from byte
    /// `from` on (an extent's first record is its earliest), or `None` when
    /// there are none. A thread's ring can hold records from before the
    /// file began: their times lie between clock pairs of earlier files of
    /// its writer.
    ///
    /// A thread's records and gaps are in time order, so this looks at each
    /// thread's first extent and first gap from `from` on, not at every
    /// extent: a walk of every extent's head mapped every page of a large
    /// file again after its index had let them go (2026-12-01).
    pub fn first_tick(&self, from: usize) -> Option<u64> {
        let tick = |it: &Item| match *it {
            // (Not inflated again: its block's earliest, from the index.)
            Item::Extent { start, .. } if at_lazy(start) => self
                .lazy_block(start)
                .map(|b| self.blocks.at[b].min_tick)
                .filter(|&t| t != u64::MAX),
            Item::Extent { start, end, .. } => wire::extent::get_header(self.bytes(start..end))
                .1
                .map(|(t, _)| t),
            Item::Drop { ix, .. } => Some(self.drop_info(ix).first),
        };
        self.streams
            .values()
            .flat_map(|items| {
                let items = &items[items.partition_point(|it| self.offset_of(it) < from)..];
                // (An extent whose head is damaged says nothing: the next.)
                let extent = items
                    .iter()
                    .filter(|it| matches!(it, Item::Extent { .. }))
                    .find_map(tick);
                let gap = items
                    .iter()
                    .find(|it| matches!(it, Item::Drop { .. }))
                    .and_then(tick);
                [extent, gap]
            })
            .flatten()
            .min()
    }

    /// Which writer's clock the file's ticks count: files of one process
    /// (its pid and its calibrated tick rate) are read by one clock, the
    /// union of their clock pairs ([`TimeMap::union`]).
    pub fn clock_domain(&self) -> (u32, u64) {
        (self.header.pid, self.header.ticks_per_second.to_bits())
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
