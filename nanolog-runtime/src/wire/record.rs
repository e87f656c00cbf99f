//! Record bodies inside an extent, and the argument encoding.
//!
//! A record is `site id: varint, tick delta: varint, nibbles, payloads`.
//! Integer-like arguments (all integers, `char`, and the length of each
//! string) get one 4-bit code each, packed two to a byte, low nibble first;
//! their payload is the value in the fewest bytes (as NanoLog's compaction does):
//!
//! | code | payload |
//! |---|---|
//! | 0..=7 | a non-negative value in `code + 1` bytes LE |
//! | 8..=14 | a negative value `v` as `!v` in `code - 7` bytes LE |
//! | 15 | the value in the full width of its type, LE two's complement |
//!
//! Floats are raw IEEE LE (4 or 8 bytes), `bool` one byte, and a
//! call-site-rendered value is `count: varint` then `count` strings of
//! `len: varint, bytes`. A string is a nibble-coded number `v`, then: in
//! format versions 3 and 4, its UTF-8 bytes if `v` is even (`v / 2` of
//! them), or nothing if `v` is odd (the string the file's STRINGS entries
//! define as id `v >> 1`); before version 3, `v` bytes. From version 5 an
//! even `v` says more: `v % 4 == 0`, `v / 4` bytes of UTF-8; `v % 4 == 2`,
//! `v / 4` bytes holding twice as many lowercase hex digits, two a byte,
//! the first in the high half (a request id, a trace id, a digest: half
//! the bytes). From version 7 the hex digits' number is `v / 8` bytes
//! with `v % 8 == 2`, and `v % 8 == 6` is a string that ends in decimal
//! digits after a prefix the file defines (`orders:48213`, `user-07`,
//! `10.0.0.12`): the prefix is string id `v >> 3`, and a varint follows,
//! the number the digits make shifted left by 5 bits, plus how many zeros
//! stand before it (a few bytes where the text took a dozen). [`Strings`]
//! says which.

use crate::wire::format::ArgKind;

pub use super::value::{HexStr, NumberedStr, PreformattedStrs, Value};
use super::{get_array, get_varint, put_varint};

/// The most digits a numbered string's tail holds (its number then fits
/// in 57 bits, and with its count of zeros in a `u64`).
const MAX_TAIL_DIGITS: usize = 17;

/// Bits of a numbered string's varint that count its zeros.
const ZERO_BITS: u32 = 5;

/// `s` as a prefix and its decimal tail, if it is one a writer packs so
/// (format version 7): at least one byte of prefix, ending in a byte that
/// is not a digit, then 1 to [`MAX_TAIL_DIGITS`] digits; with the varint
/// the tail is written as (the number shifted left by [`ZERO_BITS`], plus
/// the zeros before it; all zeros: the number 0 after the others).
#[inline]
pub(crate) fn numbered_parts(s: &[u8]) -> Option<(&[u8], u64)> {
    let digits = s.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > MAX_TAIL_DIGITS || digits == s.len() {
        return None;
    }
    let (prefix, tail) = s.split_at(s.len() - digits);
    let zeros = tail[..digits - 1]
        .iter()
        .take_while(|&&c| c == b'0')
        .count();
    let number = tail[zeros..]
        .iter()
        .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0'));
    Some((prefix, (number << ZERO_BITS) | zeros as u64))
}

/// The nibble-coded number of a numbered string whose prefix is string
/// `id` (format version 7).
#[inline]
pub(crate) fn numbered_number(id: u32) -> u64 {
    (u64::from(id) << 3) | 6
}

/// The longest string a writer packs as hex digits.
const MAX_HEX: usize = 1024;

/// A string a writer writes inline (format version 5): its text, or, for
/// an even number of lowercase hex digits, 8 to [`MAX_HEX`], the digits
/// packed two a byte. The one place the writers' two compactions (typed
/// and interpreted) take the form from.
pub(crate) struct InlineStr<'a> {
    s: &'a [u8],
    hex: bool,
}

impl<'a> InlineStr<'a> {
    #[inline]
    pub(crate) fn of(s: &'a [u8]) -> InlineStr<'a> {
        let hex = s.len() >= 8
            && s.len() <= MAX_HEX
            && s.len().is_multiple_of(2)
            && s.iter().all(|&c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
        InlineStr { s, hex }
    }

    /// Its prefix's string id and its tail's varint, if it is a numbered
    /// string whose prefix `strings` defines (see [`numbered_parts`]);
    /// packed hex digits are not.
    #[inline]
    pub(crate) fn numbered(&self, strings: &mut impl StringRefs) -> Option<(u32, u64)> {
        if self.hex {
            return None;
        }
        let (prefix, tail) = numbered_parts(self.s)?;
        Some((strings.lookup(prefix)?, tail))
    }

    /// Its number (the nibble-coded value before its bytes).
    #[inline]
    pub(crate) fn number(&self) -> u64 {
        if self.hex {
            ((self.s.len() as u64 / 2) << 3) | 2
        } else {
            (self.s.len() as u64) << 2
        }
    }

    /// Hands `put` its bytes, in pieces.
    #[inline]
    pub(crate) fn bytes(&self, mut put: impl FnMut(&[u8])) {
        if !self.hex {
            return put(self.s);
        }
        let digit = |c: u8| if c <= b'9' { c - b'0' } else { c - b'a' + 10 };
        let mut buf = [0u8; 32];
        for chunk in self.s.chunks(64) {
            for (o, pair) in buf.iter_mut().zip(chunk.chunks_exact(2)) {
                *o = digit(pair[0]) << 4 | digit(pair[1]);
            }
            put(&buf[..chunk.len() / 2]);
        }
    }
}

/// How a file stores strings, with the strings it defines (STRINGS
/// entries, format version 3) by id: what decoding a string argument needs
/// besides the record's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Strings<'a> {
    /// What a string's number says, by format version.
    form: Form,
    bytes: &'a [u8],
    /// A file's inflated blocks (positions from `block::INFLATED` on).
    inflated: &'a [u8],
    /// Where string `id` lies in `bytes`: `spans[id - 1]`, as (start,
    /// length); a length of `usize::MAX` for an id not defined.
    spans: &'a [(usize, usize)],
}

/// What a string's number says (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Versions 1 and 2: its length.
    Length,
    /// Versions 3 and 4: odd, a reference; even, twice its length.
    Tagged,
    /// Versions 5 and 6: odd, a reference; else four times its length,
    /// plus 2 for packed hex digits.
    Packed,
    /// Version 7: odd, a reference; four times its length for text; eight
    /// times it, plus 2, for packed hex digits; eight times a prefix's id,
    /// plus 6, for a numbered string.
    Numbered,
}

impl<'a> Strings<'a> {
    /// Files of format versions 1 and 2: every string inline, its number
    /// its length.
    pub const UNTAGGED: Strings<'static> = Strings {
        form: Form::Length,
        bytes: &[],
        inflated: &[],
        spans: &[],
    };

    /// Versions 3 and 4 with no strings defined.
    pub const TAGGED: Strings<'static> = Strings {
        form: Form::Tagged,
        bytes: &[],
        inflated: &[],
        spans: &[],
    };

    /// Versions 5 and 6 with no strings defined.
    pub const PACKED: Strings<'static> = Strings {
        form: Form::Packed,
        bytes: &[],
        inflated: &[],
        spans: &[],
    };

    /// Version 7 (this writer's) with no strings defined: what the
    /// writer's own inline encoding decodes by.
    pub const NUMBERED: Strings<'static> = Strings {
        form: Form::Numbered,
        bytes: &[],
        inflated: &[],
        spans: &[],
    };

    /// How a file of format `version` stores strings, with no strings
    /// defined.
    pub fn of_version(version: u16) -> Strings<'static> {
        match version {
            0..=2 => Strings::UNTAGGED,
            3 | 4 => Strings::TAGGED,
            5 | 6 => Strings::PACKED,
            _ => Strings::NUMBERED,
        }
    }

    /// A file of format `version` (3 on) with the strings at `spans` (by
    /// id, from 1) of `bytes`, or of `inflated` for positions from
    /// `block::INFLATED` on (strings defined inside BLOCK entries, version
    /// 4 on).
    pub fn tagged(
        version: u16,
        bytes: &'a [u8],
        inflated: &'a [u8],
        spans: &'a [(usize, usize)],
    ) -> Strings<'a> {
        Strings {
            form: Strings::of_version(version).form,
            bytes,
            inflated,
            spans,
        }
    }

    /// String `id`, if the file defines it (as valid UTF-8).
    #[inline]
    pub fn get(&self, id: u64) -> Option<&'a str> {
        let &(start, len) = self.spans.get(usize::try_from(id).ok()?.checked_sub(1)?)?;
        let (bytes, start) = match start.checked_sub(super::block::INFLATED) {
            Some(at) => (self.inflated, at),
            None => (self.bytes, start),
        };
        let b = bytes.get(start..start.checked_add(len)?)?;
        std::str::from_utf8(b).ok()
    }
}

fn full_width(kind: ArgKind) -> usize {
    match kind {
        ArgKind::Char => 4,
        ArgKind::Str | ArgKind::Rendered => 8,
        k => k.ring_width(),
    }
}

#[inline(always)]
fn is_nibbled(kind: ArgKind) -> bool {
    !matches!(
        kind,
        ArgKind::F32 | ArgKind::F64 | ArgKind::Bool | ArgKind::Rendered
    )
}

/// How many nibble codes a record of these kinds carries.
#[inline]
pub fn nibble_count(kinds: &[ArgKind]) -> usize {
    kinds.iter().filter(|k| is_nibbled(**k)).count()
}

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
struct Inline;

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
fn bytes_needed_64(v: u64) -> usize {
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

#[inline(always)]
fn get_nibbled(buf: &[u8], pos: &mut usize, kind: ArgKind, code: u8) -> Option<(u128, bool)> {
    // Returns the value's bits (two's complement for negatives) and whether
    // the value is negative.
    match code {
        0..=7 => {
            let n = code as usize + 1;
            let mut b = [0u8; 16];
            b[..n].copy_from_slice(buf.get(*pos..*pos + n)?);
            *pos += n;
            Some((u128::from_le_bytes(b), false))
        }
        8..=14 => {
            let n = code as usize - 7;
            let mut b = [0u8; 16];
            b[..n].copy_from_slice(buf.get(*pos..*pos + n)?);
            *pos += n;
            Some((!u128::from_le_bytes(b), true))
        }
        _ => {
            let w = full_width(kind);
            let mut b = [0u8; 16];
            b[..w].copy_from_slice(buf.get(*pos..*pos + w)?);
            *pos += w;
            let negative = kind.is_signed() && b[w - 1] & 0x80 != 0;
            if negative {
                for x in &mut b[w..] {
                    *x = 0xff;
                }
            }
            Some((u128::from_le_bytes(b), negative))
        }
    }
}

/// The nibble codes of one record, read in argument order.
struct Nibbles<'b> {
    codes: &'b [u8],
    ix: usize,
}

impl<'b> Nibbles<'b> {
    /// Takes the nibble bytes of a record of `kinds` at `*pos` and moves
    /// `*pos` past them; `None` if `buf` is too short.
    #[inline(always)]
    fn take(kinds: &[ArgKind], buf: &'b [u8], pos: &mut usize) -> Option<Nibbles<'b>> {
        let end = pos.checked_add(nibble_count(kinds).div_ceil(2))?;
        let codes = buf.get(*pos..end)?;
        *pos = end;
        Some(Nibbles { codes, ix: 0 })
    }

    /// The code of the next argument, of kind `kind` (0 for kinds without one).
    #[inline(always)]
    fn next(&mut self, kind: ArgKind) -> u8 {
        if !is_nibbled(kind) {
            return 0;
        }
        let c = (self.codes[self.ix / 2] >> ((self.ix & 1) * 4)) & 0xf;
        self.ix += 1;
        c
    }
}

/// Decodes the arguments of one record starting at `*pos`, calling `f` with
/// each value in order. Returns `None` on malformed input.
#[inline]
pub fn decode_args<'a>(
    kinds: &[ArgKind],
    buf: &'a [u8],
    pos: &mut usize,
    strings: Strings<'a>,
    mut f: impl FnMut(Value<'a>),
) -> Option<()> {
    let mut nibbles = Nibbles::take(kinds, buf, pos)?;
    for &kind in kinds {
        f(decode_one(kind, nibbles.next(kind), buf, pos, strings)?);
    }
    Some(())
}

/// What a string's number says.
enum StrForm {
    /// This many bytes of UTF-8 follow.
    Text(u128),
    /// This many bytes of packed hex digits follow.
    Hex(u128),
    /// The prefix is the string the file defines with this id; the tail's
    /// varint follows.
    Numbered(u128),
    /// The string the file defines with this id.
    Ref(u128),
}

/// A string's number `v` as `strings` says to read it.
#[inline(always)]
fn string_form(v: u128, strings: &Strings<'_>) -> StrForm {
    match strings.form {
        Form::Length => StrForm::Text(v),
        _ if v & 1 == 1 => StrForm::Ref(v >> 1),
        Form::Tagged => StrForm::Text(v >> 1),
        Form::Packed if v & 2 == 0 => StrForm::Text(v >> 2),
        Form::Packed => StrForm::Hex(v >> 2),
        Form::Numbered if v & 2 == 0 => StrForm::Text(v >> 2),
        Form::Numbered if v & 4 == 0 => StrForm::Hex(v >> 3),
        Form::Numbered => StrForm::Numbered(v >> 3),
    }
}

/// Decodes one argument at `*pos`; `code` is its nibble (if it has one).
#[inline(always)]
fn decode_one<'a>(
    kind: ArgKind,
    code: u8,
    buf: &'a [u8],
    pos: &mut usize,
    strings: Strings<'a>,
) -> Option<Value<'a>> {
    Some(match kind {
        ArgKind::F32 => Value::F32(f32::from_le_bytes(get_array(buf, pos)?)),
        ArgKind::F64 => Value::F64(f64::from_le_bytes(get_array(buf, pos)?)),
        ArgKind::Bool => Value::Bool(get_array::<1>(buf, pos)?[0] != 0),
        ArgKind::Str => {
            let (v, neg) = get_nibbled(buf, pos, ArgKind::U64, code)?;
            if neg {
                return None;
            }
            let (len, hex) = match string_form(v, &strings) {
                StrForm::Text(len) => (len, false),
                StrForm::Hex(len) => (len, true),
                StrForm::Ref(id) => return strings.get(u64::try_from(id).ok()?).map(Value::Str),
                StrForm::Numbered(id) => {
                    let prefix = strings.get(u64::try_from(id).ok()?)?;
                    let tail = get_varint(buf, pos)?;
                    return Some(Value::Numbered(NumberedStr {
                        prefix,
                        zeros: (tail & ((1 << ZERO_BITS) - 1)) as u8,
                        number: tail >> ZERO_BITS,
                    }));
                }
            };
            if len > (buf.len() - *pos) as u128 {
                return None;
            }
            let end = *pos + len as usize;
            let b = &buf[*pos..end];
            *pos = end;
            if hex {
                Value::Hex(HexStr(b))
            } else {
                Value::Str(std::str::from_utf8(b).ok()?)
            }
        }
        ArgKind::Char => {
            let (v, _) = get_nibbled(buf, pos, kind, code)?;
            Value::Char(char::from_u32(u32::try_from(v).ok()?)?)
        }
        ArgKind::Rendered => {
            let count = usize::try_from(get_varint(buf, pos)?).ok()?;
            let start = *pos;
            for _ in 0..count {
                super::get_str(buf, pos)?;
            }
            Value::Rendered(PreformattedStrs {
                count,
                bytes: &buf[start..*pos],
            })
        }
        _ => {
            let (v, neg) = get_nibbled(buf, pos, kind, code)?;
            if kind.is_signed() {
                let s = v as i128;
                // Values outside the kind's range mean corruption.
                let bits = kind.ring_width() * 8;
                if bits < 128 && (s >= 1i128 << (bits - 1) || s < -(1i128 << (bits - 1))) {
                    return None;
                }
                Value::Int(s)
            } else {
                let bits = kind.ring_width() * 8;
                if neg || (bits < 128 && v >> bits != 0) {
                    return None;
                }
                Value::Uint(v)
            }
        }
    })
}

/// Decodes only the `n`-th argument of a record at `pos`, skipping the
/// ones before it.
#[inline]
pub fn nth_arg<'a>(
    kinds: &[ArgKind],
    buf: &'a [u8],
    mut pos: usize,
    n: usize,
    strings: Strings<'a>,
) -> Option<Value<'a>> {
    let kind = *kinds.get(n)?;
    let mut nibbles = Nibbles::take(kinds, buf, &mut pos)?;
    for &k in &kinds[..n] {
        skip_one(k, nibbles.next(k), buf, &mut pos, &strings)?;
    }
    decode_one(kind, nibbles.next(kind), buf, &mut pos, strings)
}

/// Moves `*pos` past one argument; `code` is its nibble (if it has one).
#[inline(always)]
fn skip_one(
    kind: ArgKind,
    code: u8,
    buf: &[u8],
    pos: &mut usize,
    strings: &Strings<'_>,
) -> Option<()> {
    if is_nibbled(kind) {
        skip_nibbled(kind, code, buf, pos, strings)
    } else {
        skip_plain(kind, buf, pos)
    }
}

#[inline(always)]
fn skip_plain(kind: ArgKind, buf: &[u8], pos: &mut usize) -> Option<()> {
    match kind {
        ArgKind::F32 => *pos += 4,
        ArgKind::F64 => *pos += 8,
        ArgKind::Bool => *pos += 1,
        _ => {
            let count = get_varint(buf, pos)?;
            for _ in 0..count {
                let len = usize::try_from(get_varint(buf, pos)?).ok()?;
                *pos = pos.checked_add(len)?;
            }
        }
    }
    (*pos <= buf.len()).then_some(())
}

#[inline(always)]
fn skip_nibbled(
    kind: ArgKind,
    code: u8,
    buf: &[u8],
    pos: &mut usize,
    strings: &Strings<'_>,
) -> Option<()> {
    if kind == ArgKind::Str {
        let (v, neg) = get_nibbled(buf, pos, ArgKind::U64, code)?;
        // A reference has no bytes here (whether its id is defined is
        // the decoder's business).
        let len = match string_form(v, strings) {
            StrForm::Text(len) | StrForm::Hex(len) => len,
            StrForm::Ref(_) => 0,
            // (Its prefix is a reference, and its tail a varint.)
            StrForm::Numbered(_) => {
                get_varint(buf, pos)?;
                0
            }
        };
        if neg || len > (buf.len().saturating_sub(*pos)) as u128 {
            return None;
        }
        *pos += len as usize;
    } else {
        *pos += match code {
            0..=7 => code as usize + 1,
            8..=14 => code as usize - 7,
            _ => full_width(kind),
        };
    }
    (*pos <= buf.len()).then_some(())
}

/// Moves `*pos` past one record's arguments without decoding them (strings
/// are not checked for UTF-8 here; [`decode_args`] does that).
#[inline]
pub fn skip_args(
    kinds: &[ArgKind],
    buf: &[u8],
    pos: &mut usize,
    strings: &Strings<'_>,
) -> Option<()> {
    let mut nibbles = Nibbles::take(kinds, buf, pos)?;
    for &kind in kinds {
        skip_one(kind, nibbles.next(kind), buf, pos, strings)?;
    }
    Some(())
}

/// How a record of one call site is stepped over when its arguments are
/// integers, chars, floats and bools only: its arguments' length follows
/// from its nibble codes alone. Made once per site, so a reader that
/// leaves out most records (a level or site filter) pays a table lookup
/// and a few additions a record, not [`skip_args`]' walk of the kinds.
#[derive(Debug, Clone, Copy)]
pub struct SkipPlan {
    /// How many nibble-coded arguments (at most 8).
    codes: u8,
    /// The bytes of the arguments without a nibble code.
    fixed: u16,
    /// Each nibble-coded argument's full width (code 15), in order.
    full: [u8; 8],
}

impl SkipPlan {
    /// The plan for records of `kinds`, if they have one (no string or
    /// rendered argument, at most 8 coded ones).
    pub fn of(kinds: &[ArgKind]) -> Option<SkipPlan> {
        let mut plan = SkipPlan {
            codes: 0,
            fixed: 0,
            full: [0; 8],
        };
        for &kind in kinds {
            match kind {
                ArgKind::Str | ArgKind::Rendered => return None,
                ArgKind::F32 => plan.fixed += 4,
                ArgKind::F64 => plan.fixed += 8,
                ArgKind::Bool => plan.fixed += 1,
                k => {
                    let slot = plan.full.get_mut(usize::from(plan.codes))?;
                    *slot = full_width(k) as u8;
                    plan.codes += 1;
                }
            }
        }
        Some(plan)
    }

    /// The length of the arguments at `buf[at..]`, as [`skip_args`] would
    /// step over them; `None` if they run past the end of `buf`.
    #[inline(always)]
    pub fn args_len(&self, buf: &[u8], at: usize) -> Option<usize> {
        let n = usize::from(self.codes);
        let codes = buf.get(at..at.checked_add(n.div_ceil(2))?)?;
        let mut len = codes.len() + usize::from(self.fixed);
        for i in 0..n {
            let c = (codes[i / 2] >> ((i & 1) * 4)) & 0xf;
            // Codes 0-7: 1-8 bytes; 8-14: 1-7 bytes (negative); 15: full.
            len += if c == 15 {
                usize::from(self.full[i])
            } else {
                usize::from(c & 7) + 1
            };
        }
        (len <= buf.len() - at).then_some(len)
    }
}

/// Calls `f` with the values of `args` (stored by `kinds`) as a slice,
/// without allocating for up to 8 of them.
pub fn with_values<'a, R>(
    kinds: &[ArgKind],
    args: &'a [u8],
    strings: Strings<'a>,
    f: impl FnOnce(&[Value<'a>]) -> R,
) -> R {
    let mut pos = 0;
    if kinds.len() <= 8 {
        let mut buf = [Value::Bool(false); 8];
        let mut i = 0;
        let _ = decode_args(kinds, args, &mut pos, strings, |x| {
            buf[i] = x;
            i += 1;
        });
        f(&buf[..i])
    } else {
        let mut v = Vec::with_capacity(kinds.len());
        let _ = decode_args(kinds, args, &mut pos, strings, |x| v.push(x));
        f(&v)
    }
}

/// `strs` as a ring record holds string arguments: each a `u32` length,
/// then its bytes (for tests of compaction).
#[cfg(test)]
pub(crate) fn raw_strs(strs: &[&str]) -> Vec<u8> {
    let mut raw = Vec::new();
    for s in strs {
        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
        raw.extend_from_slice(s.as_bytes());
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raw ring bytes of a value of `kind` built from `bits` (truncated to
    /// the kind's width), and the value the reader must give back.
    fn sample(kind: ArgKind, bits: u128) -> (Vec<u8>, Value<'static>) {
        let w = kind.ring_width();
        let raw = bits.to_le_bytes()[..w].to_vec();
        let v = match kind {
            ArgKind::U8
            | ArgKind::U16
            | ArgKind::U32
            | ArgKind::U64
            | ArgKind::U128
            | ArgKind::Usize => Value::Uint(if w == 16 {
                bits
            } else {
                bits & ((1u128 << (8 * w)) - 1)
            }),
            _ => {
                let shift = 128 - 8 * w as u32;
                Value::Int(((bits << shift) as i128) >> shift)
            }
        };
        (raw, v)
    }

    #[test]
    fn integers_round_trip_at_every_width_and_length() {
        let kinds = [
            ArgKind::U8,
            ArgKind::U16,
            ArgKind::U32,
            ArgKind::U64,
            ArgKind::U128,
            ArgKind::Usize,
            ArgKind::I8,
            ArgKind::I16,
            ArgKind::I32,
            ArgKind::I64,
            ArgKind::I128,
            ArgKind::Isize,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values: Vec<u128> = vec![0, 1, u128::MAX, u128::MAX >> 1, 1 << 127];
        for shift in 0..128 {
            values.push(1u128 << shift);
            values.push((1u128 << shift) - 1);
            values.push(!((1u128 << shift) - 1));
        }
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(u128::from(x) << (x % 64) | u128::from(x >> 7));
        }
        for &a in &kinds {
            for &b in &kinds {
                for w in values.windows(2).step_by(3) {
                    let (ra, va) = sample(a, w[0]);
                    let (rb, vb) = sample(b, w[1]);
                    let raw = [ra, rb].concat();
                    let mut out = vec![0xAA];
                    compact(&[a, b], &raw, &mut out).unwrap();
                    let mut pos = 1;
                    let mut got = Vec::new();
                    decode_args(&[a, b], &out, &mut pos, Strings::TAGGED, |v| got.push(v)).unwrap();
                    assert_eq!(got, [va, vb], "{a:?} {b:?} {:x} {:x}", w[0], w[1]);
                    assert_eq!(pos, out.len(), "all bytes consumed");
                    let mut skip = 1;
                    skip_args(&[a, b], &out, &mut skip, &Strings::TAGGED).unwrap();
                    assert_eq!(skip, out.len());
                    // A refused record's plan steps over the same bytes,
                    // and not over a record cut short.
                    let plan = SkipPlan::of(&[a, b]).unwrap();
                    assert_eq!(plan.args_len(&out, 1), Some(out.len() - 1));
                    assert_eq!(plan.args_len(&out[..out.len() - 1], 1), None);
                    assert_eq!(nth_arg(&[a, b], &out, 1, 1, Strings::TAGGED), Some(vb));
                }
            }
        }
    }

    #[test]
    fn a_skip_plan_steps_over_floats_bools_and_chars_and_refuses_strings() {
        let kinds = [
            ArgKind::F64,
            ArgKind::Char,
            ArgKind::Bool,
            ArgKind::I32,
            ArgKind::F32,
            ArgKind::U64,
        ];
        let mut raw = Vec::new();
        raw.extend_from_slice(&1.5f64.to_le_bytes());
        raw.extend_from_slice(&u32::from('é').to_le_bytes());
        raw.push(1);
        raw.extend_from_slice(&(-70000i32).to_le_bytes());
        raw.extend_from_slice(&2.5f32.to_le_bytes());
        raw.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut out = vec![0xAA, 0xBB];
        compact(&kinds, &raw, &mut out).unwrap();
        let mut skip = 2;
        skip_args(&kinds, &out, &mut skip, &Strings::TAGGED).unwrap();
        let plan = SkipPlan::of(&kinds).unwrap();
        assert_eq!(plan.args_len(&out, 2), Some(skip - 2));
        assert_eq!(plan.args_len(&out[..skip - 1], 2), None);
        assert!(SkipPlan::of(&[ArgKind::U8, ArgKind::Str]).is_none());
        assert!(SkipPlan::of(&[ArgKind::Rendered]).is_none());
        assert!(
            SkipPlan::of(&[ArgKind::U8; 9]).is_none(),
            "more codes than it holds"
        );
        assert_eq!(SkipPlan::of(&[]).unwrap().args_len(&out, 2), Some(0));
    }

    #[test]
    fn strings_floats_and_rendered_round_trip() {
        let kinds = [
            ArgKind::Str,
            ArgKind::F64,
            ArgKind::Bool,
            ArgKind::Char,
            ArgKind::Rendered,
            ArgKind::F32,
        ];
        let s = "héllo";
        let mut raw = Vec::new();
        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
        raw.extend_from_slice(s.as_bytes());
        raw.extend_from_slice(&(-0.0f64).to_le_bytes());
        raw.push(1);
        raw.extend_from_slice(&('🎉' as u32).to_le_bytes());
        raw.extend_from_slice(&2u32.to_le_bytes());
        for r in ["P(3)", ""] {
            raw.extend_from_slice(&(r.len() as u32).to_le_bytes());
            raw.extend_from_slice(r.as_bytes());
        }
        raw.extend_from_slice(&f32::NAN.to_le_bytes());
        let mut out = Vec::new();
        compact(&kinds, &raw, &mut out).unwrap();
        let mut got = Vec::new();
        decode_args(&kinds, &out, &mut 0, Strings::NUMBERED, |v| got.push(v)).unwrap();
        assert_eq!(got[0], Value::Str(s));
        assert!(matches!(got[1], Value::F64(f) if f == 0.0 && f.is_sign_negative()));
        assert_eq!(got[2], Value::Bool(true));
        assert_eq!(got[3], Value::Char('🎉'));
        let Value::Rendered(r) = got[4] else { panic!() };
        assert_eq!(r.iter().collect::<Vec<_>>(), ["P(3)", ""]);
        assert!(matches!(got[5], Value::F32(f) if f.is_nan()));
        // Truncated anywhere: an error, never a panic or a wrong value.
        for n in 0..out.len() {
            assert!(
                decode_args(&kinds, &out[..n], &mut 0, Strings::NUMBERED, |_| {}).is_none(),
                "prefix {n}"
            );
            assert!(
                skip_args(&kinds, &out[..n], &mut 0, &Strings::NUMBERED).is_none(),
                "prefix {n}"
            );
        }
    }

    #[test]
    fn strings_of_version_2_files_read_as_lengths() {
        // "abc" as version 2 wrote it: nibble 0 (one byte), 3, the bytes.
        let v2 = [0x00, 3, b'a', b'b', b'c'];
        let mut got = Vec::new();
        decode_args(&[ArgKind::Str], &v2, &mut 0, Strings::UNTAGGED, |v| {
            got.push(v)
        })
        .unwrap();
        assert_eq!(got, [Value::Str("abc")]);
        // As versions 3 and 4 wrote it: 3 << 1.
        let v3 = [0x00, 6, b'a', b'b', b'c'];
        let mut got = Vec::new();
        decode_args(&[ArgKind::Str], &v3, &mut 0, Strings::TAGGED, |v| {
            got.push(v)
        })
        .unwrap();
        assert_eq!(got, [Value::Str("abc")]);
        // As version 5 writes it: 3 << 2.
        let mut v5 = Vec::new();
        compact(&[ArgKind::Str], &raw_strs(&["abc"]), &mut v5).unwrap();
        assert_eq!(v5, [0x00, 12, b'a', b'b', b'c']);
    }

    #[test]
    fn hex_digits_are_packed_two_a_byte_and_read_back_as_written() {
        let kinds = [ArgKind::Str, ArgKind::Str, ArgKind::U8];
        let cases = [
            // Packed: even, lowercase, 8 digits or more.
            ("9e3779b97f4a7c15", true),
            ("00000000", true),
            (&"f0".repeat(MAX_HEX / 2), true),
            // Inline: odd, upper case, short, another letter, too long.
            ("9e3779b97f4a7c1", false),
            ("9E3779B97F4A7C15", false),
            ("abcdef", false),
            ("9e3779b97f4a7c1g", false),
            (&"f0".repeat(MAX_HEX / 2 + 1), false),
        ];
        for (s, packed) in cases {
            let mut raw = raw_strs(&[s, "x"]);
            raw.push(7);
            let mut out = Vec::new();
            compact(&kinds, &raw, &mut out).unwrap();
            let mut got = Vec::new();
            decode_args(&kinds, &out, &mut 0, Strings::NUMBERED, |v| got.push(v)).unwrap();
            assert_eq!(got.len(), 3);
            match got[0] {
                Value::Hex(h) => {
                    assert!(packed, "{s}");
                    assert_eq!(h.to_string(), s);
                    assert_eq!((h.len(), h.bytes().len()), (s.len(), s.len() / 2));
                }
                Value::Str(t) => assert!(!packed && t == s, "{s}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(&got[1..], [Value::Str("x"), Value::Uint(7)]);
            // Half the bytes, when packed: the nibbles, the string's number
            // and bytes, "x" (its number and byte) and 7.
            let (number, bytes) = if packed {
                (((s.len() as u64 / 2) << 2) | 2, s.len() / 2)
            } else {
                ((s.len() as u64) << 2, s.len())
            };
            assert_eq!(
                out.len(),
                2 + bytes_needed_64(number) + bytes + 2 + 1,
                "{s}"
            );
            let mut end = 0;
            skip_args(&kinds, &out, &mut end, &Strings::NUMBERED).unwrap();
            assert_eq!(end, out.len());
            assert_eq!(
                nth_arg(&kinds, &out, 0, 2, Strings::NUMBERED),
                Some(Value::Uint(7))
            );
            for n in 0..out.len() {
                assert!(
                    decode_args(&kinds, &out[..n], &mut 0, Strings::NUMBERED, |_| {}).is_none()
                );
            }
        }
    }
}
