//! A file's compressed blocks as the index keeps them: those inflated and
//! held (up to the resident budget), those past it inflated again when read,
//! and where a position among their entries lies in the file.

use super::*;

/// Whether position `at` is in a block past the resident budget.
#[inline]
pub(crate) fn at_lazy(at: usize) -> bool {
    at >= LAZY
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

/// Positions from here on are in the blocks past the resident budget: the
/// entries they hold, one block after another, not held by the index.
pub(crate) const LAZY: usize = INFLATED + (INFLATED >> 1);

/// A BLOCK of the file as indexed.
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockAt {
    /// Where its entries start: a position from [`INFLATED`] on (resident)
    /// or from [`LAZY`] on.
    pub(super) base: usize,
    /// Its body in the file.
    pub(super) start: usize,
    pub(super) end: usize,
    /// The earliest first tick of the extents in it (`u64::MAX`: none).
    pub(super) min_tick: u64,
}

/// A file's compressed blocks, as its index keeps them.
#[derive(Default)]
pub(super) struct Blocks {
    /// Positions from [`INFLATED`] on: the entries of the file's first
    /// BLOCKs, inflated one after another while they fit [`resident`]'s
    /// budget; after them, the STRINGS and SPAN entries of the blocks past
    /// it, copied (the dictionary stays whole however large the file).
    pub(super) inflated: Vec<u8>,
    /// Where the resident blocks end in `inflated` once blocks stopped
    /// fitting (`None` while they all do).
    pub(super) spilled: Option<usize>,
    /// The blocks, in file order (so in order of their positions).
    pub(super) at: Vec<BlockAt>,
    /// Where the dictionary entries copied into `inflated` start, with
    /// where the body of the block they came from starts in the file.
    pub(super) copies: Vec<(usize, usize)>,
    /// The blocks past the budget, from `at[lazy_from]` on, inflated
    /// when a reader without a cache of its own first reaches them (and
    /// kept while the file is open; [`Merge`](super::Merge)'s batches and
    /// [`LogFile::scan_extents`] inflate into buffers of their own).
    pub(super) lazy: Vec<std::sync::OnceLock<Box<[u8]>>>,
    pub(super) lazy_from: usize,
    /// Raw bytes of the blocks past the budget so far: their positions are
    /// [`LAZY`] on.
    pub(super) lazy_len: usize,
    /// Bytes of the BLOCK entries read (frames included) ...
    pub(super) bytes: usize,
    /// ... and what they inflated to.
    pub(super) raw: usize,
    /// The blocks of the runs [`LogFile::open_for`] left out, counted by
    /// their heads as the runs were stepped over (see `skip::LeftOut`).
    pub(super) skipped: BlockStats,
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

impl LogFile {
    /// A pre-scan went through the positions `[start, end)` (an extent's)
    /// and reads nothing of them again but the few records it kept: the
    /// file's pages wholly inside go back (see `Data::release`). A merge's
    /// pre-scan runs ahead of its streams, over every file of a group, and
    /// without this kept each page it touched mapped until the streams
    /// passed it: `decode --level error` of a 445 MB set peaked at 464 MB
    /// (measured 2026-12-06 on 8c89141), where a full decode stays under
    /// 40 MB. (Positions in inflated blocks are the reader's own buffers:
    /// nothing of the file to give back.)
    pub(crate) fn scanned(&self, start: usize, end: usize) {
        self.release_range(start, end);
    }

    /// The file's pages wholly inside positions `[start, end)` go back
    /// (see `Data::release`): a reader will read little of them again,
    /// and what it does read is mapped again. Positions in inflated
    /// blocks are the reader's own buffers: nothing of the file.
    pub(crate) fn release_range(&self, start: usize, end: usize) {
        if start < end && end <= INFLATED {
            self.data.release(start..end);
        }
    }

    /// Where position `at` lies in the file: itself, or for a position in
    /// a block's inflated bytes, where the block's body starts.
    pub(crate) fn file_offset(&self, at: usize) -> usize {
        if at < INFLATED {
            return at;
        }
        if self
            .blocks
            .spilled
            .is_some_and(|s| at < LAZY && at - INFLATED >= s)
        {
            let i = self.blocks.copies.partition_point(|&(base, _)| base <= at);
            return i.checked_sub(1).map_or(0, |i| self.blocks.copies[i].1);
        }
        let i = self.blocks.at.partition_point(|b| b.base <= at);
        i.checked_sub(1).map_or(0, |i| self.blocks.at[i].start)
    }

    /// The block past the resident budget that position `at` lies in, as
    /// an index of `blocks`.
    pub(crate) fn lazy_block(&self, at: usize) -> Option<usize> {
        if !at_lazy(at) {
            return None;
        }
        let i = self
            .blocks
            .at
            .partition_point(|b| b.base <= at)
            .checked_sub(1)?;
        (i >= self.blocks.lazy_from).then_some(i)
    }

    /// The bytes of `range` (positions of block `b`'s entries) in
    /// `block`, that block's entries inflated.
    pub(crate) fn in_block<'b>(
        &self,
        b: usize,
        block: &'b [u8],
        range: std::ops::Range<usize>,
    ) -> &'b [u8] {
        let base = self.blocks.at[b].base;
        block
            .get(range.start - base..range.end.wrapping_sub(base))
            .unwrap_or(&[])
    }

    /// Inflates block `b` into `out` (its whole length); false if its bytes
    /// no longer inflate (the file changed since it was indexed).
    pub(crate) fn inflate_block(&self, b: usize, out: &mut Vec<u8>) -> bool {
        let blk = self.blocks.at[b];
        out.clear();
        self.data
            .get(blk.start..blk.end)
            .is_some_and(|body| crate::wire::block::get_block(body, out).is_ok())
    }

    /// The file's compressed blocks that were read: how many of each codec,
    /// and what they take in the file and inflated (`nanolog info`).
    pub fn block_stats(&self) -> BlockStats {
        let mut st = BlockStats {
            bytes: self.blocks.bytes,
            raw: self.blocks.raw,
            ..BlockStats::default()
        };
        for b in &self.blocks.at {
            match self.data.get(b.start) {
                Some(&wire::block::DEFLATE_COMPACT) => st.deflate += 1,
                Some(_) => st.lz4 += 1,
                None => {}
            }
        }
        let k = self.blocks.skipped;
        st.lz4 += k.lz4;
        st.deflate += k.deflate;
        st.bytes += k.bytes;
        st.raw += k.raw;
        st
    }

    /// The file's length with its compressed blocks counted at their
    /// inflated size: what its entries take uncompressed (the size of the
    /// same file written with `Builder::compress(false)`, near enough).
    pub fn raw_len(&self) -> usize {
        // Blocks of runs left out unread count too (their heads state both
        // sizes).
        let k = &self.blocks.skipped;
        let (bytes, raw) = (self.blocks.bytes + k.bytes, self.blocks.raw + k.raw);
        (self.valid_len + raw).saturating_sub(bytes)
    }

    /// The bytes of `range` (an extent body the index points to).
    pub(in crate::reader) fn bytes(&self, range: std::ops::Range<usize>) -> &[u8] {
        if let Some(b) = self.lazy_block(range.start) {
            let buf = self.blocks.lazy[b - self.blocks.lazy_from].get_or_init(|| {
                let mut out = Vec::new();
                self.inflate_block(b, &mut out);
                out.into_boxed_slice()
            });
            return self.in_block(b, buf, range);
        }
        if range.start >= INFLATED {
            return self
                .blocks
                .inflated
                .get(range.start - INFLATED..range.end.wrapping_sub(INFLATED))
                .unwrap_or(&[]);
        }
        self.data.get(range).unwrap_or(&[])
    }
}

/// A block's entries inflated for a merge's batches, shared by the streams
/// reading it and the batches holding its records. Never written after it
/// is made.
pub(in crate::reader) type Block = std::sync::Arc<Vec<u8>>;

/// The blocks past their files' resident budget as a merge read in batches
/// inflates them: each once, while a stream reads it or a batch holds a
/// record of it, and let go after (a block a filter left no record of, at
/// once). The file's own cache ([`Blocks::lazy`]) keeps a block for the
/// file's life instead: a plain merge's events borrow from the file.
pub(in crate::reader) struct SharedBlocks {
    /// By (file, block): the block, while anyone holds it.
    live: std::collections::HashMap<(usize, usize), std::sync::Weak<Vec<u8>>>,
    prune_at: usize,
}

impl Default for SharedBlocks {
    fn default() -> Self {
        SharedBlocks {
            live: Default::default(),
            prune_at: 64,
        }
    }
}

impl SharedBlocks {
    /// Block `b` of file `file_ix`, inflated now unless someone holds it.
    pub(in crate::reader) fn get(&mut self, file: &LogFile, file_ix: usize, b: usize) -> Block {
        if let Some(blk) = self
            .live
            .get(&(file_ix, b))
            .and_then(std::sync::Weak::upgrade)
        {
            return blk;
        }
        if self.live.len() >= self.prune_at {
            // The blocks let go leave their entries behind: cleared when
            // they have doubled since the last time.
            self.live.retain(|_, w| w.strong_count() > 0);
            self.prune_at = (2 * self.live.len()).max(64);
        }
        let mut buf = Vec::new();
        file.inflate_block(b, &mut buf);
        let blk = std::sync::Arc::new(buf);
        self.live
            .insert((file_ix, b), std::sync::Arc::downgrade(&blk));
        blk
    }
}
