//! The few pieces of protobuf's wire format `ship` writes by hand: varints,
//! fixed-width fields, length-delimited fields, and OTLP's `KeyValue` and
//! `AnyValue` of a scalar.
//!
//! Written as prost writes them (fields of default value left out, a
//! oneof's value always written, lengths as shortest varints), so a request
//! decodes to the message prost would have encoded: `otlp.rs`'s tests
//! compare the two.

use prost::encoding::encoded_len_varint;

/// Appends `v` as a varint. (prost's `encode_varint` writes through
/// `BufMut` a byte at a time: 5% of ship's CPU on a traced log, 2026-12-06.)
#[inline]
pub(crate) fn varint(mut v: u64, out: &mut Vec<u8>) {
    if v < 0x80 {
        out.push(v as u8);
        return;
    }
    let mut b = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    out.extend_from_slice(&b[..=n]);
}

/// The tag byte of field `n` (1-15) of wire type `wire`.
pub(crate) const fn tag(n: u8, wire: u8) -> u8 {
    (n << 3) | wire
}

/// Wire type of varints.
pub(crate) const VARINT: u8 = 0;
/// Wire type of 8-byte fields.
pub(crate) const FIXED64: u8 = 1;
/// Wire type of length-delimited fields.
pub(crate) const LEN: u8 = 2;
/// Wire type of 4-byte fields.
pub(crate) const FIXED32: u8 = 5;

/// The tag of a length-delimited field `n`.
pub(crate) const fn len_tag(n: u8) -> u8 {
    tag(n, LEN)
}

/// The bytes a length-delimited field of a `len`-byte body takes.
pub(crate) fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// Appends `body` as length-delimited field `field`.
pub(crate) fn bytes_field(out: &mut Vec<u8>, field: u8, body: &[u8]) {
    out.push(len_tag(field));
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// Appends length-delimited field `field` whose body `body` writes at the
/// end of `out`: one byte is kept for its length, and the body moved up
/// when the length takes more (a body of 128 bytes or more).
pub(crate) fn nested(out: &mut Vec<u8>, field: u8, body: impl FnOnce(&mut Vec<u8>)) {
    nested_in(out, field, 1, body);
}

/// [`nested`] keeping `room` bytes (1 to 10) for the length: a body whose
/// length takes as many is not moved (2: bodies of 128 bytes to 16 KiB).
pub(crate) fn nested_in(
    out: &mut Vec<u8>,
    field: u8,
    room: usize,
    body: impl FnOnce(&mut Vec<u8>),
) {
    out.push(len_tag(field));
    let at = out.len();
    out.resize(at + room, 0);
    body(out);
    let end = out.len();
    let len = end - at - room;
    let n = encoded_len_varint(len as u64);
    if n != room {
        if n > room {
            out.resize(end + n - room, 0);
        }
        out.copy_within(at + room..end, at + n);
        out.truncate(at + n + len);
    }
    let mut len = len as u64;
    for b in &mut out[at..at + n] {
        *b = (len as u8) | 0x80;
        len >>= 7;
    }
    out[at + n - 1] &= 0x7f;
}

/// A scalar attribute value as OTLP's `AnyValue` holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Any<'a> {
    Str(&'a str),
    Int(i64),
    Double(f64),
    Bool(bool),
}

impl Any<'_> {
    /// The bytes of the `AnyValue` message holding it.
    fn len(self) -> usize {
        match self {
            Any::Str(s) => field_len(s.len()),
            Any::Int(i) => 1 + encoded_len_varint(i as u64),
            Any::Double(_) => 9,
            Any::Bool(_) => 2,
        }
    }

    /// Appends the `AnyValue` message's body (its oneof field: 1 string,
    /// 2 bool, 3 int, 4 double).
    fn put(self, out: &mut Vec<u8>) {
        match self {
            Any::Str(s) => bytes_field(out, 1, s.as_bytes()),
            Any::Bool(b) => out.extend_from_slice(&[tag(2, VARINT), u8::from(b)]),
            Any::Int(i) => {
                out.push(tag(3, VARINT));
                // (int64: a negative value as its two's complement, 10 bytes.)
                varint(i as u64, out);
            }
            Any::Double(f) => {
                out.push(tag(4, FIXED64));
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
    }
}

/// A `KeyValue`'s key, encoded (its field 1), to be written before many
/// values ([`key_value`]); empty for an empty key (prost leaves it out).
pub(crate) fn key(k: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(field_len(k.len()));
    if !k.is_empty() {
        bytes_field(&mut out, 1, k.as_bytes());
    }
    out
}

/// Appends field `field` holding a `KeyValue` of `key` (as [`key`] encodes
/// it) and `v`.
pub(crate) fn key_value(out: &mut Vec<u8>, field: u8, key: &[u8], v: Any<'_>) {
    let any = v.len();
    out.push(len_tag(field));
    varint((key.len() + field_len(any)) as u64, out);
    out.extend_from_slice(key);
    out.push(len_tag(2));
    varint(any as u64, out);
    v.put(out);
}

/// [`key_value`] of a key given as text.
pub(crate) fn kv(out: &mut Vec<u8>, field: u8, k: &str, v: Any<'_>) {
    let any = v.len();
    let key = if k.is_empty() { 0 } else { field_len(k.len()) };
    out.push(len_tag(field));
    varint((key + field_len(any)) as u64, out);
    if !k.is_empty() {
        bytes_field(out, 1, k.as_bytes());
    }
    out.push(len_tag(2));
    varint(any as u64, out);
    v.put(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field nested by [`nested`] is the field framed after the fact,
    /// on both sides of the one-byte length.
    #[test]
    fn nested_bodies_of_every_length_are_framed_as_the_bytes_would_be() {
        for len in [0usize, 1, 127, 128, 129, 300, 16_383, 16_384, 70_000] {
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut b = vec![7u8];
            bytes_field(&mut b, 5, &body);
            for room in 1..=4 {
                let mut a = vec![7u8];
                nested_in(&mut a, 5, room, |o| o.extend_from_slice(&body));
                assert_eq!(a, b, "a body of {len} bytes, {room} kept");
            }
        }
    }

    /// Varints are prost's, at every width.
    #[test]
    fn varints_are_prosts() {
        for shift in 0..64 {
            let p = 1u64 << shift;
            for v in [p, p - 1, p + 1, u64::MAX >> shift] {
                let mut a = Vec::new();
                varint(v, &mut a);
                let mut b = Vec::new();
                prost::encoding::encode_varint(v, &mut b);
                assert_eq!(a, b, "{v}");
            }
        }
    }
}
