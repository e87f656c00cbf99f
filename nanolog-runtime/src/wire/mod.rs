//! The on-disk format, shared by the writer and the reader. FORMAT.md is the
//! specification; this module is its code.
//!
//! A file is a [`header`] followed by entries. Every entry is framed as
//! `tag: u8, body length: u32 LE, CRC-32 of tag, length and body: u32 LE, body`,
//! so a reader can check it and skip past anything it does not understand or
//! that is damaged.

pub mod block;
pub mod dict;
pub(crate) mod extent;
pub mod format;
pub(crate) mod frame;
pub mod header;
pub mod index;
pub mod record;
pub mod totals;
mod value;

/// The first eight bytes of every nanolog file.
pub const MAGIC: [u8; 8] = *b"NANOLOG\0";
/// The format version this crate writes. It reads this one and every one
/// from [`MIN_VERSION`] on.
///
/// Version 2 lets a thread's context change inside an extent (a record of
/// site id 0 naming the context, see FORMAT.md); version 1 files have no
/// such records and read as before. Version 3 writes repeated strings once
/// (STRINGS entries, a string argument's number says inline or reference)
/// and several spans to a SPAN entry in a smaller form. Version 4 may put a
/// batch of entries in a compressed BLOCK entry (a reader of version 3
/// would skip it as an entry it does not know, and lose its records).
/// Version 5 packs a string of lowercase hex digits two a byte (a reader of
/// version 4 would read it as text of another length). Version 6 states a
/// span's tick in units of the largest power of two of ticks not over a
/// microsecond (a reader of version 5 would take them for ticks). Version 7
/// packs a string that ends in decimal digits after a prefix the file
/// defines as the prefix's id and the number (a reader of version 6 would
/// take it for hex digits), numbers a SPAN entry's spans one after another
/// unless a span says otherwise, and states a context switch's context as
/// its difference from the extent's previous one. Version 8 may compress a
/// BLOCK with deflate (codec 3; a reader of version 7 would skip the block
/// as a codec it does not know, and lose its records). Version 9 leaves a
/// traced span's trace id out (empty) when its parent has the same (a
/// reader of version 8 would take the parent's span for the span's), and
/// sets three bits an id in the INDEX entries' filters (one before).
pub const VERSION: u16 = 9;
/// The oldest format version this crate reads.
pub const MIN_VERSION: u16 = 1;
/// The site id of an extent's context switch (no call site has id 0).
pub const CONTEXT_SWITCH: u32 = 0;
/// The context id a writer never defines: the parent of the outermost span
/// of a chain it cut short, and the context of a record whose own span it
/// does not have (FORMAT.md, SPAN). Readers show such records' spans as
/// lost, as for any parent whose entry is missing.
pub(crate) const LOST_CONTEXT: u32 = u32::MAX;
/// The context a recovery puts records in that were in no span when their
/// process was killed (FORMAT.md, "Recovered records"): readers say the
/// records were recovered, and show no spans.
pub const RECOVERED_CONTEXT: u32 = u32::MAX - 1;
/// The context of recovered records that were in spans: their
/// definitions went with the process, so readers show them as lost.
pub const RECOVERED_LOST_CONTEXT: u32 = u32::MAX - 2;
/// Bytes of the fixed file header.
pub const HEADER_LEN: usize = 48;
/// Bytes of an entry's frame before its body.
pub const FRAME_LEN: usize = 9;
/// The largest entry body a reader accepts (a guard against corrupt lengths).
pub const MAX_BODY: usize = 64 << 20;

/// Entry tags.
pub mod tag {
    /// A call site's dictionary entry.
    pub const SITE: u8 = 1;
    /// A logging thread's id and name.
    pub const THREAD: u8 = 2;
    /// A run of one thread's records.
    pub const EXTENT: u8 = 3;
    /// A (tick, Unix ns) clock pair.
    pub const CLOCK: u8 = 4;
    /// Records a thread dropped (`OnFull::Drop`, or too large for its ring).
    pub const DROP: u8 = 5;
    /// The log continues in another file.
    pub const ROTATE: u8 = 6;
    /// The logger closed the file cleanly.
    pub const END: u8 = 7;
    /// A context: a span entered, with its fields (a dictionary entry).
    pub const SPAN: u8 = 8;
    /// A thread's records from here on are in a context.
    pub const CONTEXT: u8 = 9;
    /// The file's place in its set (and its writer's host), first after
    /// the header.
    pub const SET: u8 = 10;
    /// Strings the file's records refer to by id (version 3).
    pub const STRINGS: u8 = 11;
    /// Entries compressed together (version 4).
    pub const BLOCK: u8 = 12;
    /// Where a run of writes' records lie and what they hold (the sparse
    /// index; writers since 2026-11-29, format version 8: older readers
    /// skip it, as any tag from 13 to 32).
    pub const INDEX: u8 = 13;
    /// What a finished file holds, counted by its writer, right ahead of
    /// its END (writers since 2026-11-29, format version 8: older readers
    /// skip it, as any tag from 13 to 32).
    pub const TOTALS: u8 = 14;
    /// How long the run of small writes after it is, what their records
    /// hold, and where the entries among them that are not records lie
    /// (writers since 2026-11-30, format version 9: older readers skip
    /// it, as any tag from 13 to 32). Written ahead of the run with its
    /// body zero, and filled in once the run ends.
    pub const RUN: u8 = 15;
}

/// CRC-32 (IEEE) of an entry's tag, length and body.
pub fn entry_crc(tag: u8, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[tag]);
    h.update(&(body.len() as u32).to_le_bytes());
    h.update(body);
    h.finalize()
}

/// Appends an unsigned LEB128 varint.
#[inline(always)]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A signed difference as an unsigned number for a varint: small
/// magnitudes, either sign, take few bytes (`(d << 1) ^ (d >> 63)`).
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The difference [`zigzag`] made `v` of.
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// How many bytes `v` takes as a varint.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Reads an unsigned LEB128 varint at `*pos`.
#[inline(always)]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Appends a length-prefixed UTF-8 string.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Reads a length-prefixed UTF-8 string.
pub fn get_str<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a str> {
    let len = usize::try_from(get_varint(buf, pos)?).ok()?;
    let end = pos.checked_add(len)?;
    let s = std::str::from_utf8(buf.get(*pos..end)?).ok()?;
    *pos = end;
    Some(s)
}

/// Reads a fixed-size little-endian array.
#[inline(always)]
pub fn get_array<const N: usize>(buf: &[u8], pos: &mut usize) -> Option<[u8; N]> {
    let a: [u8; N] = buf.get(*pos..pos.checked_add(N)?)?.try_into().ok()?;
    *pos += N;
    Some(a)
}
