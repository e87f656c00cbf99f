//! BLOCK entries (version 4): a run of whole entries, compressed together.
//!
//! `codec: u8 | raw length: varint | compressed bytes`. Codec 1 is an LZ4
//! block (the raw form of LZ4, no frame of its own: the entry's frame and
//! checksum already say where it ends and whether it is whole). The raw
//! bytes are entries exactly as they would stand in the file, frames and
//! checksums included, and never another BLOCK.

use super::frame::{begin_entry, end_entry};
use super::{get_varint, put_varint, tag, MAX_BODY};

/// Codec 1: an LZ4 block.
pub const LZ4: u8 = 1;

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
    match Packer::new().pack(raw) {
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
    /// The entry's frame, codec and raw length, made for each block.
    head: Vec<u8>,
    /// The entry is `room[..len]` of it.
    room: Vec<u8>,
}

impl Packer {
    pub(crate) fn new() -> Packer {
        Packer {
            table: lz4_flex::block::CompressTable::default(),
            head: Vec::new(),
            room: Vec::new(),
        }
    }

    /// The BLOCK entry holding `raw` (whole entries), if it is smaller than
    /// `raw` is.
    pub(crate) fn pack(&mut self, raw: &[u8]) -> Option<&[u8]> {
        if raw.is_empty() || raw.len() > MAX_RAW {
            return None;
        }
        // The frame (filled in below), the codec, the raw length, then the
        // LZ4 block.
        self.head.clear();
        begin_entry(&mut self.head, tag::BLOCK);
        self.head.push(LZ4);
        put_varint(&mut self.head, raw.len() as u64);
        let at = self.head.len();
        let most = at + lz4_flex::block::get_maximum_output_size(raw.len());
        if self.room.len() < most {
            self.room.resize(most, 0);
        }
        self.room[..at].copy_from_slice(&self.head);
        let n = lz4_flex::block::compress_into_with_table(
            raw,
            &mut self.room[at..most],
            &mut self.table,
        )
        .ok()?;
        let len = at + n;
        if len >= raw.len() {
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

/// The parts of the BLOCK body `body`: the raw size it says and its
/// compressed bytes. A raw size over [`MAX_RAW`], or over what LZ4 can
/// make of that many bytes (under 256 bytes a byte), is damage: refused
/// before any memory is taken for it.
pub(crate) fn block_parts(body: &[u8]) -> Result<(usize, &[u8]), BlockError> {
    let (&codec, _) = body.split_first().ok_or(BlockError::Damaged)?;
    if codec != LZ4 {
        return Err(BlockError::Codec(codec));
    }
    let mut pos = 1;
    let packed = body.len() - pos;
    let raw = get_varint(body, &mut pos)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= MAX_RAW && n <= packed.saturating_mul(256))
        .ok_or(BlockError::Damaged)?;
    Ok((raw, &body[pos..]))
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
pub(crate) fn walk(bytes: &[u8]) -> Walk {
    // The end of `bytes` reached at `i`: cut, if nothing was wrong so far.
    let Some((&codec, _)) = bytes.split_first() else {
        return Walk::Cut;
    };
    if codec != LZ4 {
        return Walk::Bad;
    }
    let mut i = 1;
    let Some(raw) = get_varint(bytes, &mut i) else {
        // A varint cut short, or one too long.
        return if bytes.len() < 11 {
            Walk::Cut
        } else {
            Walk::Bad
        };
    };
    let raw = match usize::try_from(raw) {
        Ok(r) if r > 0 && r <= MAX_RAW => r,
        _ => return Walk::Bad,
    };
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
        let Some(&token) = bytes.get(i) else {
            return Walk::Cut;
        };
        i += 1;
        let Some(literals) = more(&mut i, usize::from(token >> 4)) else {
            return Walk::Cut;
        };
        made = made.saturating_add(literals);
        if made > raw {
            return Walk::Bad;
        }
        i = i.saturating_add(literals);
        if i > bytes.len() {
            return Walk::Cut;
        }
        if made == raw {
            return Walk::Whole(i);
        }
        // A match: its offset (1 to what was made), then its length (4
        // at least).
        let Some(offset) = bytes.get(i..i + 2) else {
            return Walk::Cut;
        };
        let offset = usize::from(u16::from_le_bytes([offset[0], offset[1]]));
        if offset == 0 || offset > made {
            return Walk::Bad;
        }
        i += 2;
        let Some(n) = more(&mut i, usize::from(token & 15)) else {
            return Walk::Cut;
        };
        made = made.saturating_add(n + 4);
        if made >= raw {
            // The last sequence is literals only.
            return Walk::Bad;
        }
    }
}

/// Where a BLOCK body that starts `bytes` ends, found from its own
/// contents ([`walk`]); `None` when `bytes` do not begin with a whole body.
pub(crate) fn body_len(bytes: &[u8]) -> Option<usize> {
    match walk(bytes) {
        Walk::Whole(n) => Some(n),
        Walk::Cut | Walk::Bad => None,
    }
}

/// Inflates a block's compressed bytes into `out`, which is as long as the
/// raw size the block says: an error unless they fill it exactly.
pub(crate) fn inflate(packed: &[u8], out: &mut [u8]) -> Result<(), BlockError> {
    match lz4_flex::block::decompress_into(packed, out) {
        Ok(n) if n == out.len() => Ok(()),
        _ => Err(BlockError::Damaged),
    }
}

/// Inflates the BLOCK body `body` onto the end of `into` (its entries, as
/// they would stand in the file); on an error `into` is left as it was.
pub(crate) fn get_block(body: &[u8], into: &mut Vec<u8>) -> Result<(), BlockError> {
    let (raw, packed) = block_parts(body)?;
    let at = into.len();
    into.resize(at + raw, 0);
    inflate(packed, &mut into[at..]).inspect_err(|_| into.truncate(at))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_body_says_where_it_ends() {
        let raw: Vec<u8> = (0..5000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        let mut out = Vec::new();
        assert!(put_block(&mut out, &raw));
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
        other[0] = 2;
        assert_eq!(walk(&other), Walk::Bad);
        // Codec, a 3-byte raw length, then a token of 1 literal and a
        // match 2 bytes back: only 1 byte was made.
        let mut far = body[..4].to_vec();
        far.extend_from_slice(&[0x10, b'x', 2, 0, 0]);
        assert_eq!(walk(&far), Walk::Bad);
    }

    use super::*;
    use crate::wire::frame::{frame_at, put_entry, Frame};
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
        assert_eq!(back[3..], raw);
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
            let entry = kept.pack(&raw).expect("a batch that shrinks").to_vec();
            let fresh = Packer::new().pack(&raw).map(<[u8]>::len);
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
            assert_eq!(back, raw, "{n} entries");
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
        let mut raw = Vec::new();
        for _ in 0..50 {
            put_entry(&mut raw, tag::THREAD, |b| {
                b.extend_from_slice(b"\x01\x04main")
            });
        }
        let mut out = Vec::new();
        assert!(put_block(&mut out, &raw));
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
