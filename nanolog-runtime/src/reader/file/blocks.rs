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

    /// The bytes of `range` (an extent body the index points to).
    pub(in crate::reader) fn bytes(&self, range: std::ops::Range<usize>) -> &[u8] {
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
}
