//! Compaction: a record's raw ring arguments into the nibble-coded form
//! the file holds (the flusher's path, and the recovery's).

use super::*;

#[inline(always)]
fn bytes_needed(v: u128) -> usize {
    (((128 - v.leading_zeros()) as usize).div_ceil(8)).max(1)
}

/// Appends one nibble-coded value and returns its code.
#[inline(always)]
pub(crate) fn put_nibbled(out: &mut Vec<u8>, kind: ArgKind, raw: &[u8]) -> u8 {
    let (bytes, n, code) = nibbled(kind, raw);
    out.extend_from_slice(&bytes[..n]);
    code
}

/// One value's nibble-coded form: its bytes (the first `n` of the array)
/// and its code. `raw` is the LE value in the ring at its natural width
/// (at most 16 bytes).
#[inline(always)]
pub(crate) fn nibbled(kind: ArgKind, raw: &[u8]) -> ([u8; 16], usize, u8) {
    let mut b = [0u8; 16];
    let raw = &raw[..raw.len().min(16)];
    b[..raw.len()].copy_from_slice(raw);
    let signed = kind.is_signed();
    let negative = signed && raw.last().is_some_and(|x| x & 0x80 != 0);
    if negative {
        // Sign-extend, then code the one's complement.
        for x in &mut b[raw.len()..] {
            *x = 0xff;
        }
        let m = !i128::from_le_bytes(b) as u128;
        let n = bytes_needed(m);
        if n <= 7 {
            return (m.to_le_bytes(), n, 7 + n as u8);
        }
    } else {
        let v = u128::from_le_bytes(b);
        let n = bytes_needed(v);
        if n <= 8 {
            return (v.to_le_bytes(), n, n as u8 - 1);
        }
    }
    (b, full_width(kind).min(16), 15)
}

/// Compacts one record's raw ring arguments into `out`. Returns `None` if the
/// raw bytes do not match the kinds (which would be a bug in the encoders).
///
/// The flusher's path for sites whose kinds are known only at run time (the
/// bridges'): integers up to 64 bits, and string lengths, take a `u64` path
/// with fixed-size copies; 128-bit integers the general one.
pub fn compact(kinds: &[ArgKind], raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    compact_impl(kinds, raw, out, &mut Inline)
}

/// [`compact`], with string values repeated in the file written as
/// references to their definitions in `strings`: the flusher's path.
#[doc(hidden)]
pub fn compact_with(
    kinds: &[ArgKind],
    raw: &[u8],
    out: &mut Vec<u8>,
    strings: &mut impl StringRefs,
) -> Option<()> {
    compact_impl(kinds, raw, out, strings)
}

/// Where compaction looks a string value up: the id of its definition in
/// the file's STRINGS entries, when it has one there (it is then written as
/// a reference, `id << 1 | 1`; otherwise inline). The format defines the
/// references; the table that gives them out (the flusher's interner)
/// lives above it.
#[doc(hidden)]
pub trait StringRefs {
    fn lookup(&mut self, s: &[u8]) -> Option<u32>;
}

/// Every string inline (no table: nothing to look up or pass).
pub(super) struct Inline;

impl StringRefs for Inline {
    #[inline(always)]
    fn lookup(&mut self, _: &[u8]) -> Option<u32> {
        None
    }
}

#[inline(always)]
fn compact_impl<L: StringRefs>(
    kinds: &[ArgKind],
    raw: &[u8],
    out: &mut Vec<u8>,
    strings: &mut L,
) -> Option<()> {
    if kinds.is_empty() {
        return Some(());
    }
    let nib_at = out.len();
    let n_nibbles = nibble_count(kinds);
    // Room for the nibbles, every value at its widest and the raw strings:
    // the writes below do not reallocate.
    out.reserve(n_nibbles.div_ceil(2) + 8 * kinds.len() + raw.len());
    out.resize(nib_at + n_nibbles.div_ceil(2), 0);
    let mut nib_ix = 0;
    let mut set_nibble = |out: &mut Vec<u8>, code: u8| {
        out[nib_at + nib_ix / 2] |= code << ((nib_ix & 1) * 4);
        nib_ix += 1;
    };
    let mut pos = 0usize;
    for &kind in kinds {
        match kind {
            ArgKind::F32 | ArgKind::F64 | ArgKind::Bool => {
                let w = kind.ring_width();
                out.extend_from_slice(raw.get(pos..pos + w)?);
                pos += w;
            }
            ArgKind::Str => {
                let len = read_le(raw, pos, 4)? as usize;
                let bytes = raw.get(pos + 4..pos + 4 + len)?;
                match strings.lookup(bytes) {
                    Some(id) => {
                        let code = put_small(out, false, 8, (u64::from(id) << 1) | 1);
                        set_nibble(out, code);
                    }
                    None => {
                        let inline = InlineStr::of(bytes);
                        match inline.numbered(strings) {
                            Some((id, tail)) => {
                                let code = put_small(out, false, 8, numbered_number(id));
                                set_nibble(out, code);
                                put_varint(out, tail);
                            }
                            None => {
                                let code = put_small(out, false, 8, inline.number());
                                set_nibble(out, code);
                                inline.bytes(|b| out.extend_from_slice(b));
                            }
                        }
                    }
                }
                pos += 4 + len;
            }
            ArgKind::Rendered => {
                let n = u32::from_le_bytes(raw.get(pos..pos + 4)?.try_into().ok()?);
                pos += 4;
                put_varint(out, u64::from(n));
                for _ in 0..n {
                    let len = u32::from_le_bytes(raw.get(pos..pos + 4)?.try_into().ok()?) as usize;
                    put_varint(out, len as u64);
                    out.extend_from_slice(raw.get(pos + 4..pos + 4 + len)?);
                    pos += 4 + len;
                }
            }
            ArgKind::U128 | ArgKind::I128 => {
                let code = put_nibbled(out, kind, raw.get(pos..pos + 16)?);
                set_nibble(out, code);
                pos += 16;
            }
            _ => {
                let w = kind.ring_width();
                let code = put_small(out, kind.is_signed(), w, read_le(raw, pos, w)?);
                set_nibble(out, code);
                pos += w;
            }
        }
    }
    Some(())
}

/// The `w`-byte (1, 2, 4 or 8) little-endian value at `raw[pos..]`,
/// zero-extended.
#[inline(always)]
fn read_le(raw: &[u8], pos: usize, w: usize) -> Option<u64> {
    let b = raw.get(pos..pos.checked_add(w)?)?;
    Some(match w {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_le_bytes(b.try_into().ok()?)),
        4 => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
        8 => u64::from_le_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

/// Appends the nibble-coded form of `v`, a `w`-byte integer (`w` at most
/// 8, its bits zero-extended), and returns its code: what [`nibbled`]
/// writes for it, in `u64`s and fixed-size copies.
#[inline(always)]
fn put_small(out: &mut Vec<u8>, signed: bool, w: usize, v: u64) -> u8 {
    let bits = 8 * w as u32;
    let shift = 64 - bits;
    if signed && (v >> (bits - 1)) & 1 == 1 {
        // Negative: the one's complement of its sign extension.
        let m = !(((v << shift) as i64) >> shift) as u64;
        let n = bytes_needed_64(m);
        if n <= 7 {
            push_low(out, m, n);
            return 7 + n as u8;
        }
        push_low(out, v, w);
        return 15;
    }
    let n = bytes_needed_64(v);
    push_low(out, v, n);
    n as u8 - 1
}

#[inline(always)]
pub(super) fn bytes_needed_64(v: u64) -> usize {
    ((64 - v.leading_zeros() as usize).div_ceil(8)).max(1)
}

/// Appends the low `n` bytes of `v`, little-endian: eight written, the rest
/// cut off (a fixed-size copy, not a call).
#[inline(always)]
fn push_low(out: &mut Vec<u8>, v: u64, n: usize) {
    let at = out.len();
    out.extend_from_slice(&v.to_le_bytes());
    out.truncate(at + n);
}
