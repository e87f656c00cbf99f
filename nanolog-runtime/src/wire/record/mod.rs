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

mod decode;
mod encode;
mod strings;

use crate::wire::format::ArgKind;

pub use super::value::{HexStr, NumberedStr, PreformattedStrs, Value};
use super::{get_array, get_varint, put_varint};
pub use decode::{decode_args, nth_arg, skip_args, with_values, SkipPlan};
pub(crate) use encode::nibbled;
pub use encode::{compact, compact_with, StringRefs};
pub use strings::Strings;
pub(crate) use strings::{numbered_number, InlineStr};

pub(super) fn full_width(kind: ArgKind) -> usize {
    match kind {
        ArgKind::Char => 4,
        ArgKind::Str | ArgKind::Rendered => 8,
        k => k.ring_width(),
    }
}

#[inline(always)]
pub(super) fn is_nibbled(kind: ArgKind) -> bool {
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
    use super::encode::bytes_needed_64;
    use super::strings::MAX_HEX;
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
