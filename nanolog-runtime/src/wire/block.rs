//! BLOCK entries (version 4): a run of whole entries, compressed together.
//!
//! `codec: u8 | raw length: varint | compressed bytes`. Codec 1 is an LZ4
//! block (the raw form of LZ4, no frame of its own: the entry's frame and
//! checksum already say where it ends and whether it is whole). The raw
//! bytes are entries exactly as they would stand in the file, frames and
//! checksums included, and never another BLOCK.
//!
//! Codec 2 (version 5) compresses the entries in a compact form: `codec |
//! raw length: varint | compact length: varint | LZ4 of the compact
//! entries`, each `tag: u8 | body length: varint | body` with no checksum
//! of its own (the block's covers them), and an EXTENT's base tick as the
//! zigzag varint of its difference from the previous EXTENT's in the block
//! (from 0 for the first). Inflated, they are expanded to the entries as
//! the file would hold them (9-byte frames, base ticks whole; the frames'
//! checksums left 0, as a reader checks no entry inside a block on its
//! own), `raw length` bytes exactly: what a reader sees of any codec is
//! the same.
//!
//! Codec 3 (version 8) is codec 2 with deflate (RFC 1951, raw: no zlib
//! header) in place of LZ4: the entries of a service's log are dense, and
//! most of what compresses in them is entropy (which deflate's Huffman
//! codes take and LZ4 does not), not repeats. A flusher with time to spare
//! writes it.

use std::cell::RefCell;

use super::frame::{begin_entry, end_entry, put_unchecked_head, Entries};
use super::{get_varint, put_varint, tag, unzigzag, varint_len, zigzag, FRAME_LEN, MAX_BODY};

/// Codec 1: an LZ4 block of whole entries.
pub const LZ4: u8 = 1;

/// Codec 2: an LZ4 block of entries framed compactly (format version 5).
pub const LZ4_COMPACT: u8 = 2;

/// Codec 3: a deflate stream of entries framed compactly (format version 8).
pub const DEFLATE_COMPACT: u8 = 3;

/// The deflate level of codec 3 (zlib's scale). On the tokio service
/// bench's blocks, against LZ4 (BENCHMARKS.md, "The codec policy";
/// measured 2026-11-28 at 97e2dc4): level 1 5%
/// smaller, 2 17%, 3 18%; compressing at 250, 111 and 101 MB/s against
/// LZ4's 685.
const DEFLATE_LEVEL: u32 = 2;

/// The most bytes deflate makes of one byte of its stream (258-byte
/// matches of 1 bit each, and a little): a block saying more is damage.
const DEFLATE_MOST: usize = 1032;

/// A reader's positions from here on are in a file's inflated blocks (the
/// entries they hold, one block after another), not in the file: an entry
/// inside a block has no place in the file of its own.
pub(crate) const INFLATED: usize = 1 << (usize::BITS - 1);

/// The largest raw size a block may say (a reader refuses more).
pub const MAX_RAW: usize = MAX_BODY;

/// Appends to `out` a BLOCK entry holding `raw` (whole entries), if it is
/// smaller than `raw` is; returns whether it did (`out` is left as it was
/// when not).
#[cfg(test)]
pub(crate) fn put_block(out: &mut Vec<u8>, raw: &[u8]) -> bool {
    match Packer::new().pack(raw, LZ4_COMPACT) {
        Some(entry) => {
            out.extend_from_slice(entry);
            true
        }
        None => false,
    }
}

/// Makes BLOCK entries, one batch after another, keeping what each needs
/// from one to the next: LZ4's hash table (allocated and freed for each
/// block, it was a fifth of the compression's instructions in the tokio
/// service bench), and the room the entry is made in, zeroed only when it
/// grows (a safe compressor writes into initialised bytes).
pub(crate) struct Packer {
    table: lz4_flex::block::CompressTable,
    /// Codec 3's compressor (its window and tables, about 300 KB), made
    /// when first used.
    deflater: Option<flate2::Compress>,
    /// The entry's frame, codec and lengths, made for each block.
    head: Vec<u8>,
    /// The batch's entries framed compactly (codecs 2 and 3).
    compact: Vec<u8>,
    /// The entry is `room[..len]` of it.
    room: Vec<u8>,
}

impl Packer {
    /// A packer with no block made yet (its tables are made as needed).
    pub(crate) fn new() -> Packer {
        Packer {
            table: lz4_flex::block::CompressTable::default(),
            deflater: None,
            head: Vec::new(),
            compact: Vec::new(),
            room: Vec::new(),
        }
    }

    /// The BLOCK entry of `codec` holding `raw` (whole entries), if it is
    /// smaller than `raw` is. (The writer makes codecs 2 and 3; codec 1 is
    /// made as a version 4 writer made it, for tests.)
    pub(crate) fn pack(&mut self, raw: &[u8], codec: u8) -> Option<&[u8]> {
        let raw_len = raw.len();
        if raw_len == 0 || raw_len > MAX_RAW {
            return None;
        }
        // The frame (filled in below), the codec, the raw length (and the
        // compact one), then the LZ4 block.
        self.head.clear();
        begin_entry(&mut self.head, tag::BLOCK);
        self.head.push(codec);
        put_varint(&mut self.head, raw_len as u64);
        self.compact.clear();
        let input = if codec != LZ4 {
            compact_entries(raw, &mut 0, &mut self.compact)?;
            put_varint(&mut self.head, self.compact.len() as u64);
            &self.compact[..]
        } else {
            raw
        };
        let at = self.head.len();
        let most = if codec == DEFLATE_COMPACT {
            // A stream that does not fit before `raw`'s length is no gain.
            at.max(raw_len)
        } else {
            at + lz4_flex::block::get_maximum_output_size(input.len())
        };
        if self.room.len() < most {
            self.room.resize(most, 0);
        }
        self.room[..at].copy_from_slice(&self.head);
        let n = if codec == DEFLATE_COMPACT {
            // A raw stream (no zlib header or trailer: the frame's
            // checksum covers the block).
            let d = self.deflater.get_or_insert_with(|| {
                flate2::Compress::new(flate2::Compression::new(DEFLATE_LEVEL), false)
            });
            d.reset();
            let status = d.compress(
                input,
                &mut self.room[at..most],
                flate2::FlushCompress::Finish,
            );
            // Anything but the stream's end: it did not fit in `most`.
            let done = matches!(status, Ok(flate2::Status::StreamEnd));
            done.then_some(d.total_out() as usize)?
        } else {
            lz4_flex::block::compress_into_with_table(
                input,
                &mut self.room[at..most],
                &mut self.table,
            )
            .ok()?
        };
        let len = at + n;
        if len >= raw_len {
            return None;
        }
        let entry = &mut self.room[..len];
        end_entry(entry, 0);
        Some(entry)
    }
}

/// Why a BLOCK body could not be inflated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// A codec this reader does not know.
    Codec(u8),
    /// The body is cut, or says a raw size over [`MAX_RAW`] or over what
    /// its bytes can hold, or its bytes do not inflate to the size it says.
    Damaged,
}

/// The parts of a BLOCK body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parts<'a> {
    /// The size of its entries as the file would hold them.
    pub(crate) raw: usize,
    /// Codecs 2 and 3: the size of its compact entries, which LZ4 or
    /// deflate makes.
    compact: Option<usize>,
    /// Its codec.
    codec: u8,
    /// Its LZ4 or deflate bytes.
    packed: &'a [u8],
}

#[cfg(test)]
impl<'a> Parts<'a> {
    /// These parts with `packed` for their LZ4 bytes (cut, or made up).
    pub(crate) fn with_packed(self, packed: &'a [u8]) -> Parts<'a> {
        Parts { packed, ..self }
    }

    /// Their LZ4 bytes.
    pub(crate) fn packed(&self) -> &'a [u8] {
        self.packed
    }

    /// Codec 1's parts of `packed` saying `raw`.
    pub(crate) fn lz4(packed: &'a [u8], raw: usize) -> Parts<'a> {
        Parts {
            raw,
            compact: None,
            codec: LZ4,
            packed,
        }
    }
}

/// The parts of the BLOCK body `body`. A size over [`MAX_RAW`], over what
/// LZ4 can make of that many bytes (under 256 bytes a byte) or deflate
/// (about 1,000), or (codecs 2 and 3) a raw size over what its compact
/// entries can expand to (15 bytes more an entry of 2 bytes or more), is
/// damage: refused before any memory is taken for it.
pub(crate) fn block_parts(body: &[u8]) -> Result<Parts<'_>, BlockError> {
    let (&codec, _) = body.split_first().ok_or(BlockError::Damaged)?;
    if !matches!(codec, LZ4 | LZ4_COMPACT | DEFLATE_COMPACT) {
        return Err(BlockError::Codec(codec));
    }
    let mut pos = 1;
    let size = |pos: &mut usize| {
        get_varint(body, pos)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= MAX_RAW)
            .ok_or(BlockError::Damaged)
    };
    let raw = size(&mut pos)?;
    let compact = if codec != LZ4 {
        let c = size(&mut pos)?;
        if raw > c.saturating_mul(8) {
            return Err(BlockError::Damaged);
        }
        Some(c)
    } else {
        None
    };
    let packed = &body[pos..];
    let most = if codec == DEFLATE_COMPACT {
        DEFLATE_MOST
    } else {
        256
    };
    if compact.unwrap_or(raw) > packed.len().saturating_mul(most) {
        return Err(BlockError::Damaged);
    }
    Ok(Parts {
        raw,
        compact,
        codec,
        packed,
    })
}

/// `raw` (whole entries as the file holds them, the writer's own) framed
/// compactly, as codec 2 compresses them, onto `out`; `None` if `raw` is
/// not whole entries. `prev`: the base tick of the block's last extent so
/// far (0 before the first), which each extent's is stated against.
fn compact_entries(raw: &[u8], prev: &mut u64, out: &mut Vec<u8>) -> Option<()> {
    let mut entries = Entries::inflated(raw, 0);
    for (_, t, body) in entries.by_ref() {
        out.push(t);
        if t == tag::EXTENT {
            // Its header: the thread (a varint), the base tick (a u64).
            let mut at = 0;
            get_varint(body, &mut at)?;
            let (thread, rest) = body.split_at(at);
            let (tick, records) = rest.split_first_chunk::<8>()?;
            let tick = u64::from_le_bytes(*tick);
            let delta = zigzag(tick.wrapping_sub(*prev) as i64);
            *prev = tick;
            put_varint(out, (at + varint_len(delta) + records.len()) as u64);
            out.extend_from_slice(thread);
            put_varint(out, delta);
            out.extend_from_slice(records);
        } else {
            put_varint(out, body.len() as u64);
            out.extend_from_slice(body);
        }
    }
    (entries.pos == raw.len()).then_some(())
}

/// Codec 2's compact entries `compact` expanded into `out` as the file
/// would hold them (see the module's doc): an error unless they fill it
/// exactly.
fn expand_entries(compact: &[u8], out: &mut [u8]) -> Result<(), BlockError> {
    let damaged = BlockError::Damaged;
    let (mut i, mut o) = (0, 0);
    let mut prev = 0u64;
    while i < compact.len() {
        let t = compact[i];
        i += 1;
        let len = get_varint(compact, &mut i)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(damaged)?;
        let body = compact
            .get(i..i.checked_add(len).ok_or(damaged)?)
            .ok_or(damaged)?;
        i += len;
        // An EXTENT: its thread, its base tick made whole, its records.
        let (head, tick, rest) = if t == tag::EXTENT {
            let mut p = 0;
            get_varint(body, &mut p).ok_or(damaged)?;
            let thread = &body[..p];
            let delta = get_varint(body, &mut p).ok_or(damaged)?;
            prev = prev.wrapping_add(unzigzag(delta) as u64);
            (thread, Some(prev.to_le_bytes()), &body[p..])
        } else {
            (body, None, &[][..])
        };
        let full = head.len() + tick.map_or(0, |t| t.len()) + rest.len();
        let entry = out.get_mut(o..o + FRAME_LEN + full).ok_or(damaged)?;
        let (frame, dst) = entry.split_at_mut(FRAME_LEN);
        let (a, b) = dst.split_at_mut(head.len());
        a.copy_from_slice(head);
        let b = match tick {
            Some(t) => {
                b[..8].copy_from_slice(&t);
                &mut b[8..]
            }
            None => b,
        };
        b.copy_from_slice(rest);
        put_unchecked_head(frame, t, u32::try_from(full).map_err(|_| damaged)?);
        o += FRAME_LEN + full;
    }
    if o == out.len() {
        Ok(())
    } else {
        Err(damaged)
    }
}

/// What the bytes at the start of a BLOCK body are, read by their own
/// structure (its codec byte, its raw length, and the LZ4 sequences that
/// make exactly that many bytes: each a token, literals, then a 2-byte
/// offset back into what was made and a match; the last literals only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// A whole body, this many bytes long.
    Whole(usize),
    /// A body cut short: every byte there parses, and the end came first.
    Cut,
    /// Not a body.
    Bad,
}

/// Walks the BLOCK body that starts `bytes` (see [`Walk`]). For a block
/// whose frame's length was damaged, the body's own structure says where
/// the entry after it begins; for a file that ends inside a block, it says
/// the bytes there are the start of one (a torn tail, not damage).
#[cfg(test)]
pub(crate) fn walk(bytes: &[u8]) -> Walk {
    walk_within(bytes, usize::MAX).unwrap_or(Walk::Bad)
}

/// As [`walk`], reading and making at most `work` bytes; `None` if it
/// would take more (a reader that walks many bodies, each running on to
/// the end of a file, bounds their sum by what it has read).
pub(crate) fn walk_within(bytes: &[u8], work: usize) -> Option<Walk> {
    // The end of `bytes` reached at `i`: cut, if nothing was wrong so far.
    let Some((&codec, _)) = bytes.split_first() else {
        return Some(Walk::Cut);
    };
    if !matches!(codec, LZ4 | LZ4_COMPACT | DEFLATE_COMPACT) {
        return Some(Walk::Bad);
    }
    let mut i = 1;
    // The raw length, and codec 2's or 3's compact one: the codec makes
    // the last.
    let lengths = if codec == LZ4 { 1 } else { 2 };
    let mut raw = 0;
    for _ in 0..lengths {
        let at = i;
        let Some(n) = get_varint(bytes, &mut i) else {
            // A varint cut short, or one too long.
            return Some(if bytes.len() < at + 10 {
                Walk::Cut
            } else {
                Walk::Bad
            });
        };
        raw = match usize::try_from(n) {
            Ok(r) if r > 0 && r <= MAX_RAW => r,
            _ => return Some(Walk::Bad),
        };
    }
    if codec == DEFLATE_COMPACT {
        return walk_deflate(bytes, i, raw, work);
    }
    // A length of 15 goes on in bytes of 255 and a last one below it.
    let more = |i: &mut usize, mut n: usize| -> Option<usize> {
        if n == 15 {
            loop {
                let b = *bytes.get(*i)?;
                *i += 1;
                n += usize::from(b);
                if b != 255 {
                    break;
                }
            }
        }
        Some(n)
    };
    let mut made = 0usize;
    loop {
        if i.saturating_add(made) > work {
            return None;
        }
        let Some(&token) = bytes.get(i) else {
            return Some(Walk::Cut);
        };
        i += 1;
        let Some(literals) = more(&mut i, usize::from(token >> 4)) else {
            return Some(Walk::Cut);
        };
        made = made.saturating_add(literals);
        if made > raw {
            return Some(Walk::Bad);
        }
        i = i.saturating_add(literals);
        if i > bytes.len() {
            return Some(Walk::Cut);
        }
        if made == raw {
            return Some(Walk::Whole(i));
        }
        // A match: its offset (1 to what was made), then its length (4
        // at least).
        let Some(offset) = bytes.get(i..i + 2) else {
            return Some(Walk::Cut);
        };
        let offset = usize::from(u16::from_le_bytes([offset[0], offset[1]]));
        if offset == 0 || offset > made {
            return Some(Walk::Bad);
        }
        i += 2;
        let Some(n) = more(&mut i, usize::from(token & 15)) else {
            return Some(Walk::Cut);
        };
        made = made.saturating_add(n + 4);
        if made >= raw {
            // The last sequence is literals only.
            return Some(Walk::Bad);
        }
    }
}

/// [`walk`] of a deflate stream that starts at `bytes[i..]` and makes
/// `made` bytes: inflated into a window of its own (deflate's 32 KiB
/// reach back), what it makes counted and let go, so a damaged block costs
/// no more memory than a whole one.
fn walk_deflate(bytes: &[u8], i: usize, made: usize, work: usize) -> Option<Walk> {
    // The decompressor and a piece's buffer are the thread's (see
    // `INFLATER`): a crafted file may ask for a walk every few bytes, and
    // making them afresh (tables, and a buffer zeroed) cost 10 µs a walk.
    let walk = |inf: &mut Inflater| {
        let state = inf
            .deflate
            .get_or_insert_with(|| flate2::Decompress::new(false));
        state.reset(false);
        if inf.compact.len() < WALK_PIECE {
            inf.compact.resize(WALK_PIECE, 0);
        }
        walk_deflate_with(state, &mut inf.compact[..WALK_PIECE], bytes, i, made, work)
    };
    let done = INFLATER.try_with(|c| c.try_borrow_mut().ok().map(|mut inf| walk(&mut inf)));
    match done {
        Ok(Some(r)) => r,
        _ => walk(&mut Inflater::default()),
    }
}

/// What a walk inflates at a time (and lets go).
const WALK_PIECE: usize = 32 << 10;

fn walk_deflate_with(
    state: &mut flate2::Decompress,
    out: &mut [u8],
    bytes: &[u8],
    i: usize,
    made: usize,
    work: usize,
) -> Option<Walk> {
    // What is made goes into `out` a piece at a time and is let go: the
    // decompressor keeps the window its matches reach back into. What is
    // made must be compact entries from its first byte (see
    // `CompactCheck`): a stream of other bytes is not a body, however far
    // it would go.
    let mut check = CompactCheck::default();
    let stream = &bytes[i..];
    // The pieces begin small and double: the first bytes made say whether
    // they are entries at all, and a walk held to a little work stops near
    // it.
    let mut piece = 256usize;
    loop {
        let (read, wrote) = (state.total_in(), state.total_out());
        let spent = (read + wrote) as usize;
        if spent > work {
            return None;
        }
        let room = piece.min(out.len()).min(work - spent).max(1);
        piece = piece.saturating_mul(2);
        let status = state.decompress(
            &stream[read as usize..],
            &mut out[..room],
            flate2::FlushDecompress::None,
        );
        let total = state.total_out() as usize;
        if total > made {
            return Some(Walk::Bad);
        }
        let piece = &out[..total - wrote as usize];
        if check.feed(piece, made).is_err() {
            return Some(Walk::Bad);
        }
        match status {
            Ok(flate2::Status::StreamEnd) if total == made && check.at_boundary() => {
                return Some(Walk::Whole(i + state.total_in() as usize));
            }
            Ok(flate2::Status::Ok | flate2::Status::BufError)
                if (state.total_in(), state.total_out()) != (read, wrote) => {}
            // No progress: the stream wants bytes after the last one.
            Ok(flate2::Status::Ok | flate2::Status::BufError)
                if state.total_in() as usize == stream.len() =>
            {
                return Some(Walk::Cut);
            }
            _ => return Some(Walk::Bad),
        }
    }
}

/// Where a BLOCK body that starts `bytes` ends, found from its own
/// contents ([`walk`]); `None` when `bytes` do not begin with a whole body.
#[cfg(test)]
pub(crate) fn body_len(bytes: &[u8]) -> Option<usize> {
    match walk(bytes) {
        Walk::Whole(n) => Some(n),
        Walk::Cut | Walk::Bad => None,
    }
}

/// What a thread keeps to inflate blocks with.
#[derive(Default)]
struct Inflater {
    /// Compact entries (codecs 2 and 3), inflated before they are expanded.
    compact: Vec<u8>,
    /// Codec 3's decompressor (its tables), made when first used.
    deflate: Option<flate2::Decompress>,
}

thread_local! {
    /// A thread's [`Inflater`] (kept for its memory).
    static INFLATER: RefCell<Inflater> = RefCell::new(Inflater::default());
}

/// Inflates a block into `out`, which is as long as the raw size the block
/// says: an error unless its entries fill it exactly.
pub(crate) fn inflate(parts: &Parts<'_>, out: &mut [u8]) -> Result<(), BlockError> {
    let lz4 = |packed: &[u8], out: &mut [u8]| match lz4_flex::block::decompress_into(packed, out) {
        Ok(n) if n == out.len() => Ok(()),
        _ => Err(BlockError::Damaged),
    };
    let Some(compact) = parts.compact else {
        return lz4(parts.packed, out);
    };
    let codec = parts.codec;
    let mut expand = |inf: &mut Inflater| {
        let buf = &mut inf.compact;
        buf.clear();
        let r = if codec == DEFLATE_COMPACT {
            let state = inf
                .deflate
                .get_or_insert_with(|| flate2::Decompress::new(false));
            inflate_deflate(state, parts.packed, buf, compact)
        } else {
            buf.resize(compact, 0);
            lz4(parts.packed, buf)
        };
        let r = r.and_then(|()| expand_entries(buf, out));
        // A block larger than the writer makes (a damaged or crafted one)
        // leaves no memory behind.
        if buf.capacity() > 4 << 20 {
            *buf = Vec::new();
        }
        r
    };
    let done = INFLATER.try_with(|c| c.try_borrow_mut().ok().map(|mut inf| expand(&mut inf)));
    match done {
        Ok(Some(r)) => r,
        // A thread being torn down: buffers of its own.
        _ => expand(&mut Inflater::default()),
    }
}

/// What a block's deflate stream is inflated by at first, then doubled
/// each step (to [`INFLATE_STEP_MOST`]): the writer's blocks (128 KiB of
/// entries, about 40 KiB compact) take a few steps.
const INFLATE_STEP: usize = 4 << 10;
const INFLATE_STEP_MOST: usize = 1 << 20;

/// Inflates the deflate stream `packed` into `out` (emptied), which ends
/// `len` bytes long: an error unless the stream makes exactly that many
/// bytes, ends where `packed` does, and they are compact entries.
///
/// A step at a time, each step's bytes checked as compact entries as they
/// come (a tag a file may hold, a length within the block): a stream whose
/// first bytes are not entries is given up there, its memory and time
/// those of a step, however much it says it holds. (Inflated in one call
/// into the stated size, 80 crafted blocks of 64 KB that each inflate to
/// 64 MiB of zeros took `decode` 17 s; zeroing the stated size first cost
/// as much again as the inflating.)
fn inflate_deflate(
    state: &mut flate2::Decompress,
    packed: &[u8],
    out: &mut Vec<u8>,
    len: usize,
) -> Result<(), BlockError> {
    let damaged = BlockError::Damaged;
    state.reset(false);
    out.clear();
    let mut step = INFLATE_STEP;
    let mut check = CompactCheck::default();
    loop {
        let made = out.len();
        out.resize((made + step).min(len), 0);
        let read = usize::try_from(state.total_in()).map_err(|_| damaged)?;
        let status = state
            .decompress(
                packed.get(read..).ok_or(damaged)?,
                &mut out[made..],
                flate2::FlushDecompress::None,
            )
            .map_err(|_| damaged)?;
        let made_now = usize::try_from(state.total_out()).map_err(|_| damaged)?;
        out.truncate(made_now);
        check.feed(&out[made..], len)?;
        if status == flate2::Status::StreamEnd {
            break;
        }
        if made_now == made && state.total_in() == read as u64 {
            // Nothing read, nothing made: the stream is cut short, or says
            // more than the block.
            return Err(damaged);
        }
        step = (step * 2).min(INFLATE_STEP_MOST);
    }
    let whole = state.total_in() == packed.len() as u64 && out.len() == len && check.at_boundary();
    if whole {
        Ok(())
    } else {
        Err(damaged)
    }
}

/// Compact entries checked as their bytes come, a piece at a time: each
/// a tag a file may hold in a block (1 to 32, not a BLOCK), then a length
/// (a varint) whose body ends within the block's stated compact size.
#[derive(Debug, Clone, Copy, Default)]
struct CompactCheck {
    /// Bytes fed so far.
    fed: usize,
    /// Where the body being skipped ends (while `fed` is short of it).
    body_end: usize,
    /// Inside a length: its value so far and the shift of its next group
    /// (`None`: at a tag, or inside a body).
    varint: Option<(u64, u32)>,
}

impl CompactCheck {
    /// Takes the next bytes of the stream, whose compact size is `len`; an
    /// error at the first byte that cannot be compact entries.
    fn feed(&mut self, bytes: &[u8], len: usize) -> Result<(), BlockError> {
        let damaged = BlockError::Damaged;
        let mut i = 0;
        while i < bytes.len() {
            let at = self.fed + i;
            if at < self.body_end {
                // Inside a body: skipped whole.
                i += (self.body_end - at).min(bytes.len() - i);
                continue;
            }
            let b = bytes[i];
            i += 1;
            match self.varint {
                None => {
                    if b == 0 || b > 32 || b == tag::BLOCK {
                        return Err(damaged);
                    }
                    self.varint = Some((0, 0));
                }
                Some((v, shift)) => {
                    if shift > 63 {
                        return Err(damaged);
                    }
                    let v = v | u64::from(b & 0x7f) << shift;
                    if b & 0x80 != 0 {
                        self.varint = Some((v, shift + 7));
                        continue;
                    }
                    self.varint = None;
                    self.body_end = usize::try_from(v)
                        .ok()
                        .and_then(|v| (self.fed + i).checked_add(v))
                        .filter(|&end| end <= len)
                        .ok_or(damaged)?;
                }
            }
        }
        self.fed += bytes.len();
        Ok(())
    }

    /// Whether what was fed ends where an entry does.
    fn at_boundary(&self) -> bool {
        self.varint.is_none() && self.fed >= self.body_end
    }
}

/// The entries the BLOCK body `body` holds, as they would stand in the
/// file (of either codec), for tools that look into a file's bytes.
#[doc(hidden)]
pub fn entries_of(body: &[u8]) -> Result<Vec<u8>, BlockError> {
    let mut out = Vec::new();
    get_block(body, &mut out)?;
    Ok(out)
}

/// Inflates the BLOCK body `body` onto the end of `into` (its entries, as
/// they would stand in the file); on an error `into` is left as it was.
pub(crate) fn get_block(body: &[u8], into: &mut Vec<u8>) -> Result<(), BlockError> {
    let parts = block_parts(body)?;
    let at = into.len();
    into.resize(at + parts.raw, 0);
    inflate(&parts, &mut into[at..]).inspect_err(|_| into.truncate(at))
}

#[cfg(test)]
mod tests {
    /// Entries of a batch: CLOCK entries, and EXTENTs of three threads
    /// whose base ticks go forward and back.
    fn batch(n: u32) -> Vec<u8> {
        let mut raw = Vec::new();
        for i in 0..n {
            put_entry(&mut raw, tag::CLOCK, |b| {
                b.extend_from_slice(&u64::from(i % 97).to_le_bytes());
                b.extend_from_slice(&1_795_000_000_000_000_000i64.to_le_bytes());
            });
            put_entry(&mut raw, tag::EXTENT, |b| {
                let tick = 1u64 << 40 | u64::from(i * 7919 % 5003) << 8;
                crate::wire::extent::put_header(b, i % 3, tick);
                b.extend_from_slice(&[1, 0x90, 0x4e, (i % 5) as u8]);
            });
        }
        raw
    }

    /// A block inflates to the entries it was packed from; bytes that are
    /// not whole entries make no block.
    #[test]
    fn a_block_inflates_to_its_entries_and_a_cut_entry_makes_none() {
        let whole = batch(300);
        for codec in [LZ4, LZ4_COMPACT, DEFLATE_COMPACT] {
            let block = Packer::new().pack(&whole, codec).unwrap().to_vec();
            let Frame::Ok { body, .. } = frame_at(&block, 0) else {
                panic!("not a whole entry")
            };
            let mut back = Vec::new();
            get_block(body, &mut back).unwrap();
            let want = if codec == LZ4 {
                whole.clone()
            } else {
                unchecked(&whole)
            };
            assert!(back == want, "codec {codec}");
        }
        assert!(Packer::new()
            .pack(&whole[..whole.len() - 3], LZ4_COMPACT)
            .is_none());
    }

    #[test]
    fn a_body_says_where_it_ends() {
        for codec in [LZ4, LZ4_COMPACT, DEFLATE_COMPACT] {
            let raw = batch(600);
            let mut out = Vec::new();
            assert!(put_block_of(codec, &mut out, &raw));
            let body = &out[super::super::FRAME_LEN..];
            let mut longer = body.to_vec();
            longer.extend_from_slice(&[7; 40]);
            assert_eq!(body_len(&longer), Some(body.len()));
            assert_eq!(body_len(&body[..body.len() - 1]), None);
            // Cut anywhere, the bytes there are the start of a body; a match
            // that reaches back before the start, or another codec, is not one.
            for cut in 0..body.len() {
                assert_eq!(walk(&body[..cut]), Walk::Cut, "cut at {cut}");
            }
            assert_eq!(walk(body), Walk::Whole(body.len()));
            let mut other = body.to_vec();
            other[0] = 9;
            assert_eq!(walk(&other), Walk::Bad);
            let head = body.len() - block_parts(body).unwrap().packed().len();
            let mut far = body[..head].to_vec();
            if codec == DEFLATE_COMPACT {
                // A stored block (final, 1 byte, its length's complement
                // wrong): not deflate.
                far.extend_from_slice(&[0x01, 1, 0, 0, 0, b'x']);
            } else {
                // The codec and lengths, then a token of 1 literal and a
                // match 2 bytes back: only 1 byte was made.
                far.extend_from_slice(&[0x10, b'x', 2, 0, 0]);
            }
            assert_eq!(walk(&far), Walk::Bad);
            // A whole deflate stream (it says where it ends) that makes
            // fewer or more bytes than its block says.
            let parts = block_parts(body).unwrap();
            if let (DEFLATE_COMPACT, Some(compact)) = (codec, parts.compact) {
                for says in [compact - 1, compact + 1] {
                    let mut other = vec![codec];
                    put_varint(&mut other, parts.raw as u64);
                    put_varint(&mut other, says as u64);
                    other.extend_from_slice(parts.packed());
                    assert_eq!(walk(&other), Walk::Bad, "{says}");
                }
            }
        }
    }

    /// Codec 3 (deflate) holds the same entries as codec 2, in fewer bytes
    /// where the entries' bytes are uneven (as a service's are), and the
    /// same packer makes blocks of either codec in turn.
    #[test]
    fn deflate_blocks_inflate_to_the_entries_written() {
        let raw = batch(2000);
        let mut packer = Packer::new();
        let mut sizes = Vec::new();
        for codec in [LZ4_COMPACT, DEFLATE_COMPACT, LZ4_COMPACT, DEFLATE_COMPACT] {
            let entry = packer
                .pack(&raw, codec)
                .expect("a batch that shrinks")
                .to_vec();
            let Frame::Ok { body, .. } = frame_at(&entry, 0) else {
                panic!("not a whole entry")
            };
            assert_eq!(body[0], codec);
            let mut back = Vec::new();
            get_block(body, &mut back).unwrap();
            assert!(back == unchecked(&raw), "codec {codec}");
            sizes.push(entry.len());
        }
        assert!(sizes[1] < sizes[0], "{sizes:?}");
        assert_eq!((sizes[0], sizes[1]), (sizes[2], sizes[3]));
    }

    /// `bytes` deflated, as codec 3 packs a block.
    fn deflated(bytes: &[u8]) -> Vec<u8> {
        let mut d = flate2::Compress::new(flate2::Compression::best(), false);
        let mut packed = vec![0u8; bytes.len()];
        let status = d.compress(bytes, &mut packed, flate2::FlushCompress::Finish);
        assert!(matches!(status, Ok(flate2::Status::StreamEnd)));
        packed.truncate(d.total_out() as usize);
        packed
    }

    /// A deflate stream that makes 250 times its size (empty END entries,
    /// compactly framed), whatever sizes its block says: refused or
    /// inflated to what it says, with no more memory than that.
    #[test]
    fn a_deflate_bomb_is_held_to_the_size_its_block_says() {
        let compact = 4 << 20;
        let packed = deflated(&[tag::END, 0].repeat(compact / 2));
        let n = packed.len();
        assert!(compact / n >= 250, "{n} bytes");
        for says in [compact / 2, compact, compact * 2] {
            let mut body = vec![DEFLATE_COMPACT];
            put_varint(&mut body, (says / 2 * 9) as u64);
            put_varint(&mut body, says as u64);
            body.extend_from_slice(&packed);
            let mut into = Vec::new();
            let r = get_block(&body, &mut into);
            if says == compact {
                assert_eq!(r, Ok(()));
                assert_eq!(into.len(), says / 2 * 9);
            } else {
                assert_eq!(r, Err(BlockError::Damaged), "{says}");
                assert!(into.is_empty());
            }
            assert_eq!(walk(&body).ne(&Walk::Bad), says == compact, "{says}");
        }
    }

    /// A walk held to some work gives up past it, and inside it says what
    /// a walk without a bound says.
    #[test]
    fn a_walk_is_held_to_its_work() {
        let compact = 1 << 20;
        let packed = deflated(&[tag::END, 0].repeat(compact / 2));
        let mut body = vec![DEFLATE_COMPACT];
        put_varint(&mut body, (compact / 2 * 9) as u64);
        put_varint(&mut body, compact as u64);
        body.extend_from_slice(&packed);
        assert_eq!(walk(&body), Walk::Whole(body.len()));
        assert_eq!(
            walk_within(&body, 2 * compact),
            Some(Walk::Whole(body.len()))
        );
        assert_eq!(walk_within(&body, compact / 2), None);
        assert_eq!(walk_within(&body[..body.len() / 2], compact / 8), None);
        // LZ4 alike.
        let raw = batch(2000);
        let mut one = Vec::new();
        assert!(put_block_of(LZ4, &mut one, &raw));
        let Frame::Ok { body, .. } = frame_at(&one, 0) else {
            panic!("not an entry");
        };
        assert_eq!(walk_within(body, usize::MAX), Some(Walk::Whole(body.len())));
        assert_eq!(walk_within(body, body.len() / 2), None);
    }

    /// A deflate stream whose first bytes are not entries (zeros: tag 0)
    /// is refused at its first step, whatever it would make.
    #[test]
    fn a_deflate_stream_of_no_entries_is_refused_at_its_first_step() {
        let compact = 4 << 20;
        let packed = deflated(&vec![0u8; compact]);
        let mut body = vec![DEFLATE_COMPACT];
        put_varint(&mut body, (compact / 2 * 9) as u64);
        put_varint(&mut body, compact as u64);
        body.extend_from_slice(&packed);
        let parts = block_parts(&body).unwrap();
        let mut state = flate2::Decompress::new(false);
        let mut buf = Vec::new();
        assert_eq!(
            inflate_deflate(&mut state, parts.packed, &mut buf, compact),
            Err(BlockError::Damaged)
        );
        assert!(buf.len() <= INFLATE_STEP, "{} bytes made", buf.len());
        assert!((state.total_out() as usize) <= INFLATE_STEP);
        // Checked a piece at a time, whatever the pieces: a length cut
        // between two pieces, a body over three.
        let bytes = [tag::END, 0, tag::CLOCK, 0x83, 0, 1, 2, 3, tag::END, 0];
        for cut in 0..=bytes.len() {
            for cut2 in cut..=bytes.len() {
                let mut c = CompactCheck::default();
                for piece in [&bytes[..cut], &bytes[cut..cut2], &bytes[cut2..]] {
                    assert_eq!(c.feed(piece, bytes.len()), Ok(()), "{cut} {cut2}");
                }
                assert!(c.at_boundary());
            }
        }
        let mut cut_short = CompactCheck::default();
        assert_eq!(cut_short.feed(&bytes[..4], bytes.len()), Ok(()));
        assert!(!cut_short.at_boundary());
        for bad in [&[tag::CLOCK, 16][..], &[tag::BLOCK, 0], &[33, 0], &[0]] {
            assert_eq!(
                CompactCheck::default().feed(bad, 10),
                Err(BlockError::Damaged),
                "{bad:?}"
            );
        }
    }

    /// Codec 2 frames entries compactly and codes extents' base ticks as
    /// differences: inflated, the writer's entries come back byte for byte
    /// (checksums made again), in fewer bytes than codec 1 takes.
    #[test]
    fn compact_entries_expand_to_the_entries_written() {
        let raw = batch(2000);
        let (mut one, mut two) = (Vec::new(), Vec::new());
        assert!(put_block_of(LZ4, &mut one, &raw));
        assert!(put_block_of(LZ4_COMPACT, &mut two, &raw));
        assert!(two.len() < one.len(), "{} against {}", two.len(), one.len());
        for (entry, want) in [(&one, raw.clone()), (&two, unchecked(&raw))] {
            let Frame::Ok { body, .. } = frame_at(entry, 0) else {
                panic!("not a whole entry")
            };
            let mut back = Vec::new();
            get_block(body, &mut back).unwrap();
            assert!(back == want);
        }
        // Not whole entries: no block of codec 2.
        assert!(!put_block_of(
            LZ4_COMPACT,
            &mut Vec::new(),
            &raw[..raw.len() - 1]
        ));
    }

    /// [`put_block`] with a packer of `codec`.
    fn put_block_of(codec: u8, out: &mut Vec<u8>, raw: &[u8]) -> bool {
        match Packer::new().pack(raw, codec) {
            Some(entry) => {
                out.extend_from_slice(entry);
                true
            }
            None => false,
        }
    }

    use super::*;
    use crate::wire::frame::{frame_at, put_entry, unchecked, Frame};
    use crate::wire::put_varint;

    #[test]
    fn a_block_inflates_to_the_entries_it_holds() {
        let mut raw = Vec::new();
        for i in 0..200u32 {
            put_entry(&mut raw, tag::CLOCK, |b| {
                b.extend_from_slice(&u64::from(i).to_le_bytes());
                b.extend_from_slice(&1_795_000_000_000_000_000i64.to_le_bytes());
            });
        }
        let mut out = vec![0xAA];
        assert!(put_block(&mut out, &raw));
        assert!(out.len() < raw.len() / 2, "{} of {}", out.len(), raw.len());
        let Frame::Ok { tag: t, body } = frame_at(&out, 1) else {
            panic!("not a whole entry")
        };
        assert_eq!(t, tag::BLOCK);
        let mut back = vec![1, 2, 3];
        get_block(body, &mut back).unwrap();
        assert_eq!(back[..3], [1, 2, 3]);
        assert_eq!(back[3..], unchecked(&raw));
    }

    /// One packer for a run of batches, large and small, as the flusher
    /// keeps it: each entry inflates back to its batch (nothing of the
    /// batch before leaks into it), no larger than a fresh packer's.
    #[test]
    fn a_packer_kept_across_batches_makes_each_block_as_a_fresh_one_does() {
        let batch = |n: u32, salt: u64| {
            let mut raw = Vec::new();
            for i in 0..n {
                put_entry(&mut raw, tag::CLOCK, |b| {
                    b.extend_from_slice(&(u64::from(i) * salt).to_le_bytes());
                    b.extend_from_slice(&(i64::from(i) ^ 0x5555).to_le_bytes());
                });
            }
            raw
        };
        let mut kept = Packer::new();
        // 100 KiB and more (LZ4's larger table), then small ones again.
        for (n, salt) in [(40u32, 3u64), (4_000, 7), (300, 11), (5_000, 13), (20, 17)] {
            let raw = batch(n, salt);
            let entry = kept
                .pack(&raw, LZ4_COMPACT)
                .expect("a batch that shrinks")
                .to_vec();
            let fresh = Packer::new().pack(&raw, LZ4_COMPACT).map(<[u8]>::len);
            // (After a batch of 64 KiB or more the kept table has 32-bit
            // slots: its matches, and so its bytes, may differ a little.)
            assert!(
                fresh.is_some_and(|f| entry.len() <= f + f / 20),
                "{n} entries: {} bytes kept, {fresh:?} fresh",
                entry.len()
            );
            let Frame::Ok { tag: t, body } = frame_at(&entry, 0) else {
                panic!("not a whole entry")
            };
            assert_eq!(
                (t, crate::wire::FRAME_LEN + body.len()),
                (tag::BLOCK, entry.len())
            );
            let mut back = Vec::new();
            get_block(body, &mut back).unwrap();
            assert_eq!(back, unchecked(&raw), "{n} entries");
        }
    }

    #[test]
    fn bytes_that_do_not_shrink_are_not_put_in_a_block() {
        let raw: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut out = vec![7];
        assert!(!put_block(&mut out, &raw));
        assert_eq!(out, [7]);
    }

    #[test]
    fn damaged_or_unknown_blocks_are_refused_without_a_panic() {
        for codec in [LZ4, LZ4_COMPACT, DEFLATE_COMPACT] {
            damaged_blocks_of(codec);
        }
    }

    /// Codec 2 bytes that inflate (zeros: entries of tag 0, each 2 bytes
    /// that would take 9) but say another size, or expand past it.
    #[test]
    fn compact_entries_that_do_not_expand_to_the_size_said_are_damage() {
        for (compact, raw) in [(1 << 20, 8 << 20), (1 << 20, 4 << 20), (1 << 20, 9 << 19)] {
            let packed = lz4_flex::block::compress(&vec![0u8; compact]);
            let mut body = vec![LZ4_COMPACT];
            put_varint(&mut body, raw as u64);
            put_varint(&mut body, compact as u64);
            body.extend_from_slice(&packed);
            let mut into = vec![1];
            let r = get_block(&body, &mut into);
            if raw == compact / 2 * 9 {
                // Whole frames of tag 0 (never written: the reader's walk
                // of the entries refuses them).
                assert_eq!(r, Ok(()));
            } else {
                assert_eq!(r, Err(BlockError::Damaged), "{raw}");
                assert_eq!(into, [1]);
            }
        }
        // More than 8 bytes a compact byte: refused before inflating.
        let mut body = vec![LZ4_COMPACT];
        put_varint(&mut body, 9 << 10);
        put_varint(&mut body, 1 << 10);
        body.extend_from_slice(&lz4_flex::block::compress(&[0u8; 1 << 10]));
        assert_eq!(block_parts(&body).err(), Some(BlockError::Damaged));
    }

    fn damaged_blocks_of(codec: u8) {
        let mut raw = batch(20);
        for _ in 0..50 {
            put_entry(&mut raw, tag::THREAD, |b| {
                b.extend_from_slice(b"\x01\x04main")
            });
        }
        let mut out = Vec::new();
        assert!(put_block_of(codec, &mut out, &raw));
        let body = &out[crate::wire::FRAME_LEN..];
        let mut into = Vec::new();
        assert_eq!(get_block(&[], &mut into), Err(BlockError::Damaged));
        assert_eq!(get_block(&[9, 1, 0], &mut into), Err(BlockError::Codec(9)));
        // A raw size past the limit is refused before any memory is taken.
        let mut huge = vec![LZ4];
        put_varint(&mut huge, u64::MAX);
        assert_eq!(get_block(&huge, &mut into), Err(BlockError::Damaged));
        // Cut anywhere, or any byte changed: an error or the same size, never
        // a panic.
        for cut in 0..body.len() {
            let _ = get_block(&body[..cut], &mut into);
            assert!(into.is_empty(), "a failed block left bytes");
        }
        for i in 1..body.len() {
            for bit in [0x01, 0x10, 0x80] {
                let mut b = body.to_vec();
                b[i] ^= bit;
                into.clear();
                if get_block(&b, &mut into).is_ok() {
                    assert_eq!(into.len(), raw.len());
                } else {
                    assert!(into.is_empty(), "a failed block left bytes");
                }
            }
        }
    }
}
