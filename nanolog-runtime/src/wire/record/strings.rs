//! How a string argument is written: inline as text or packed hex
//! digits, as a reference to a string the file defines, or as a defined
//! prefix and a decimal tail; and [`Strings`], what a reader needs to tell
//! them apart (the file's form, by format version, and its definitions).

use super::*;

/// The most digits a numbered string's tail holds (its number then fits
/// in 57 bits, and with its count of zeros in a `u64`).
const MAX_TAIL_DIGITS: usize = 17;

/// Bits of a numbered string's varint that count its zeros.
pub(super) const ZERO_BITS: u32 = 5;

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
pub(super) const MAX_HEX: usize = 1024;

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
        let (bytes, start) = match start.checked_sub(crate::wire::block::INFLATED) {
            Some(at) => (self.inflated, at),
            None => (self.bytes, start),
        };
        let b = bytes.get(start..start.checked_add(len)?)?;
        std::str::from_utf8(b).ok()
    }
}

/// What a string's number says.
pub(super) enum StrForm {
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
pub(super) fn string_form(v: u128, strings: &Strings<'_>) -> StrForm {
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
