//! Per-site compaction: the flusher's record compaction specialised at
//! compile time to a call site's argument types, as NanoLog generates one
//! compaction function per log statement.
//!
//! The macro expansion hands the runtime a [`CompactFn`] monomorphised over
//! the call's prepared argument types (a tuple of `PhantomData`s), so the
//! flusher runs straight-line code per record instead of interpreting the
//! site's kind list. It writes exactly what [`record::compact`] writes (a
//! test checks every kind at every width against it); bridge sites, whose
//! types are known only at run time, keep the interpreter.
//!
//! [`record::compact`]: super::record::compact

use std::marker::PhantomData;

use super::put_varint;
use super::record::put_nibbled;
use crate::encode::Preformatted;
use crate::site::ArgKind;

/// Compacts one record's raw ring arguments into `out` (`None` if the raw
/// bytes do not match the types, which would be a bug in the encoders).
pub type CompactFn = fn(raw: &[u8], out: &mut Vec<u8>) -> Option<()>;

/// One argument type's compaction: reads its raw form at `raw[*pos..]`,
/// appends its compact form, and returns its nibble code (0 if it has none).
pub trait CompactArg {
    /// Whether the value has a nibble code.
    const NIBBLED: bool;
    /// Compacts one value.
    fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8>;
}

#[inline(always)]
fn take<const W: usize>(raw: &[u8], pos: &mut usize) -> Option<[u8; W]> {
    let b = raw.get(*pos..*pos + W)?.try_into().ok()?;
    *pos += W;
    Some(b)
}

/// Appends the low `n` bytes of `v` (1 to 8) as one 8-byte store and a
/// truncation, not a copy of `n` bytes.
#[inline(always)]
fn put_low(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_le_bytes());
    out.truncate(out.len() - (8 - n));
}

/// Bytes needed for `v`, at least one.
#[inline(always)]
fn bytes_of(v: u64) -> usize {
    ((64 - v.leading_zeros() as usize).div_ceil(8)).max(1)
}

/// An unsigned value of up to 8 bytes: its significant bytes, code n - 1.
#[inline(always)]
fn put_unsigned(out: &mut Vec<u8>, v: u64) -> u8 {
    let n = bytes_of(v);
    put_low(out, v, n);
    n as u8 - 1
}

/// A signed value of up to 8 bytes (`width` of them in the ring): a
/// negative one as its complement, code 7 + n.
#[inline(always)]
fn put_signed(out: &mut Vec<u8>, v: i64, width: usize) -> u8 {
    if v >= 0 {
        return put_unsigned(out, v as u64);
    }
    let m = !v as u64;
    let n = bytes_of(m);
    if n <= 7 {
        put_low(out, m, n);
        return 7 + n as u8;
    }
    // Only an i64/isize below -2^55 gets here: the raw value, full width.
    put_low(out, v as u64, width);
    15
}

// `type => the type its raw form has in the ring`.
macro_rules! unsigned {
    ($($t:ty => $ring:ty),*) => {$(
        impl CompactArg for $t {
            const NIBBLED: bool = true;
            #[inline(always)]
            fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
                let v = <$ring>::from_le_bytes(take(raw, pos)?);
                Some(put_unsigned(out, v as u64))
            }
        }
    )*};
}
unsigned!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, usize => u64, char => u32);

macro_rules! signed {
    ($($t:ty => $ring:ty),*) => {$(
        impl CompactArg for $t {
            const NIBBLED: bool = true;
            #[inline(always)]
            fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
                let v = <$ring>::from_le_bytes(take(raw, pos)?);
                Some(put_signed(out, i64::from(v), std::mem::size_of::<$ring>()))
            }
        }
    )*};
}
signed!(i8 => i8, i16 => i16, i32 => i32, i64 => i64, isize => i64);

macro_rules! wide {
    ($($t:ty => $k:ident),*) => {$(
        impl CompactArg for $t {
            const NIBBLED: bool = true;
            #[inline(always)]
            fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
                let b = take::<16>(raw, pos)?;
                Some(put_nibbled(out, ArgKind::$k, &b))
            }
        }
    )*};
}
wide!(u128 => U128, i128 => I128);

macro_rules! plain {
    ($($t:ty => $w:literal),*) => {$(
        impl CompactArg for $t {
            const NIBBLED: bool = false;
            #[inline(always)]
            fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
                out.extend_from_slice(&take::<$w>(raw, pos)?);
                Some(0)
            }
        }
    )*};
}
plain!(f32 => 4, f64 => 8, bool => 1);

impl CompactArg for &str {
    const NIBBLED: bool = true;
    #[inline(always)]
    fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
        let len = u32::from_le_bytes(take(raw, pos)?);
        let code = put_unsigned(out, u64::from(len));
        out.extend_from_slice(raw.get(*pos..*pos + len as usize)?);
        *pos += len as usize;
        Some(code)
    }
}

impl<const N: usize> CompactArg for Preformatted<N> {
    const NIBBLED: bool = false;
    fn compact(raw: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Option<u8> {
        let n = u32::from_le_bytes(take(raw, pos)?);
        put_varint(out, u64::from(n));
        for _ in 0..n {
            let len = u32::from_le_bytes(take(raw, pos)?) as usize;
            put_varint(out, len as u64);
            out.extend_from_slice(raw.get(*pos..*pos + len)?);
            *pos += len;
        }
        Some(0)
    }
}

/// The argument types of a call, as a list of `PhantomData`s nested in
/// pairs: `(PhantomData<A>, (PhantomData<B>, ()))`. Nesting has no arity limit.
pub trait ArgList {
    /// How many arguments have a nibble code.
    const NIBBLES: usize;
    /// Compacts the arguments in order; the `ix`-th nibble code goes into
    /// the nibble bytes at `out[nib_at..]`.
    fn compact_all(
        raw: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        nib_at: usize,
        ix: usize,
    ) -> Option<()>;
}

impl ArgList for () {
    const NIBBLES: usize = 0;
    #[inline(always)]
    fn compact_all(_: &[u8], _: &mut usize, _: &mut Vec<u8>, _: usize, _: usize) -> Option<()> {
        Some(())
    }
}

impl<H: CompactArg, T: ArgList> ArgList for (PhantomData<H>, T) {
    const NIBBLES: usize = H::NIBBLED as usize + T::NIBBLES;
    #[inline(always)]
    fn compact_all(
        raw: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        nib_at: usize,
        ix: usize,
    ) -> Option<()> {
        let code = H::compact(raw, pos, out)?;
        if H::NIBBLED {
            *out.get_mut(nib_at + ix / 2)? |= code << ((ix & 1) * 4);
        }
        T::compact_all(raw, pos, out, nib_at, ix + H::NIBBLED as usize)
    }
}

/// The compaction of one record of argument types `T`: the nibble bytes
/// first (zeroed, filled in as the values are written), then each value.
fn compact_record<T: ArgList>(raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let nib_at = out.len();
    out.resize(nib_at + T::NIBBLES.div_ceil(2), 0);
    T::compact_all(raw, &mut 0, out, nib_at, 0)
}

/// The compaction function for the argument types of `_types` (the nested
/// `PhantomData` list the macro builds from the prepared arguments).
#[inline(always)]
pub fn compactor<T: ArgList>(_types: &T) -> CompactFn {
    compact_record::<T>
}

/// `PhantomData` of a value's type, for [`compactor`].
#[inline(always)]
pub fn type_of<T>(_: &T) -> PhantomData<T> {
    PhantomData
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::record::compact;

    fn same<T: ArgList>(types: T, kinds: &[ArgKind], raw: &[u8]) {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let typed = compactor(&types)(raw, &mut a);
        let interpreted = compact(kinds, raw, &mut b);
        assert_eq!(typed, interpreted, "{kinds:?} {raw:?}");
        assert_eq!(a, b, "{kinds:?} {raw:?}");
    }

    fn p<T>() -> PhantomData<T> {
        PhantomData
    }

    /// Every width's boundary values, as the ring holds them.
    #[test]
    fn typed_compaction_writes_what_the_interpreter_writes() {
        let mut edges: Vec<u128> = vec![0, 1, 2];
        for bits in [
            7, 8, 15, 16, 23, 24, 31, 32, 39, 40, 47, 48, 55, 56, 63, 64, 127,
        ] {
            let v = 1u128 << bits;
            edges.extend([v - 1, v, v + 1]);
        }
        edges.push(u128::MAX);
        macro_rules! check {
            ($($t:ty => $k:ident),*) => {$(
                for &e in &edges {
                    for v in [e as $t, (e as $t).wrapping_neg(), !(e as $t)] {
                        let raw = v.to_le_bytes();
                        same((p::<$t>(), ()), &[ArgKind::$k], &raw);
                        // Between two others, so positions and nibbles move.
                        let mut r3 = 3u32.to_le_bytes().to_vec();
                        r3.extend_from_slice(&raw);
                        r3.extend_from_slice(&(-5i16).to_le_bytes());
                        same(
                            (p::<u32>(), (p::<$t>(), (p::<i16>(), ()))),
                            &[ArgKind::U32, ArgKind::$k, ArgKind::I16],
                            &r3,
                        );
                    }
                }
            )*};
        }
        check!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, u128 => U128,
            i8 => I8, i16 => I16, i32 => I32, i64 => I64, i128 => I128);
        for v in [0u64, 1, 255, 1 << 40, u64::MAX] {
            same((p::<usize>(), ()), &[ArgKind::Usize], &v.to_le_bytes());
            same((p::<isize>(), ()), &[ArgKind::Isize], &v.to_le_bytes());
        }
    }

    #[test]
    fn floats_bools_chars_strings_and_preformatted_match_too() {
        let mut raw = Vec::new();
        raw.extend_from_slice(&1.5f32.to_le_bytes());
        raw.extend_from_slice(&(-2.25f64).to_le_bytes());
        raw.push(1);
        raw.extend_from_slice(&('é' as u32).to_le_bytes());
        let s = "hello, world";
        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
        raw.extend_from_slice(s.as_bytes());
        raw.extend_from_slice(&2u32.to_le_bytes());
        for t in ["ab", ""] {
            raw.extend_from_slice(&(t.len() as u32).to_le_bytes());
            raw.extend_from_slice(t.as_bytes());
        }
        raw.extend_from_slice(&(-7i64).to_le_bytes());
        same(
            (
                p::<f32>(),
                (
                    p::<f64>(),
                    (
                        p::<bool>(),
                        (
                            p::<char>(),
                            (p::<&str>(), (p::<Preformatted<2>>(), (p::<i64>(), ()))),
                        ),
                    ),
                ),
            ),
            &[
                ArgKind::F32,
                ArgKind::F64,
                ArgKind::Bool,
                ArgKind::Char,
                ArgKind::Str,
                ArgKind::Rendered,
                ArgKind::I64,
            ],
            &raw,
        );
        // Seventeen nibbled arguments: nine nibble bytes, the last half full.
        let mut raw = Vec::new();
        for i in 0..17u64 {
            raw.extend_from_slice(&(i << (i * 3)).to_le_bytes());
        }
        type L4<T> = (
            PhantomData<u64>,
            (PhantomData<u64>, (PhantomData<u64>, (PhantomData<u64>, T))),
        );
        type L16 = L4<L4<L4<L4<()>>>>;
        let types: (PhantomData<u64>, L16) = Default::default();
        same(types, &[ArgKind::U64; 17], &raw);
        // Short input: both refuse.
        same((p::<u64>(), ()), &[ArgKind::U64], &[1, 2, 3]);
    }
}
