//! Per-site compaction: the flusher's record compaction specialised at
//! compile time to a call site's argument types, as NanoLog generates one
//! compaction function per log statement.
//!
//! The macro expansion hands the runtime a [`CompactFn`] monomorphised over
//! the call's prepared argument types (a tuple of `PhantomData`s), so the
//! flusher runs straight-line code per record instead of interpreting the
//! site's kind list, and takes a run of the site's records in one call. It
//! writes exactly what [`record::compact`] writes (a test checks every kind
//! at every width against it); bridge sites, whose types are known only at
//! run time, keep the interpreter.
//!
//! [`record::compact`]: crate::wire::record::compact

use std::marker::PhantomData;

use crate::encode::Preformatted;
pub use crate::intern::Interner;
use crate::ring;
use crate::wire::format::ArgKind;
use crate::wire::record::{self, nibbled};

/// A call site's compaction of a run of its ring records:
/// `(run, site, prev_tick, out, out_stop, strings)` to the bytes of `run` consumed
/// and the records compacted. `run` starts with a record of `site`; each
/// record of `site` from there goes into `out` as an extent body holds it
/// (site id and tick delta from `prev_tick` as varints, then the
/// arguments, repeated strings as references to `strings`), up to another
/// site's record or a PAD word, the end of `run`, or the record that brings
/// `out` to `out_stop` bytes.
pub type CompactFn = fn(
    run: &[u8],
    site: u32,
    prev_tick: &mut u64,
    out: &mut Vec<u8>,
    out_stop: usize,
    strings: &mut Interner,
) -> (usize, u64);

/// Where one record's compact form is written: a zero-filled window of the
/// output buffer that `compact_run` has sized for the record, so that a
/// write is a copy and a bounds check on a slice held in registers, not a
/// capacity check and a length update of a `Vec` in memory. A write that
/// does not fit (not possible for a record within its bound) fails.
pub struct Cursor<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn put(&mut self, b: &[u8]) -> Option<()> {
        self.buf
            .get_mut(self.pos..self.pos + b.len())?
            .copy_from_slice(b);
        self.pos += b.len();
        Some(())
    }

    /// The low `n` bytes of `v` (1 to 8), as one 8-byte store.
    #[inline(always)]
    fn put_low(&mut self, v: u64, n: usize) -> Option<()> {
        self.buf
            .get_mut(self.pos..self.pos + 8)?
            .copy_from_slice(&v.to_le_bytes());
        self.pos += n.min(8);
        Some(())
    }

    /// An unsigned LEB128 varint, as `put_varint` writes it.
    #[inline(always)]
    fn put_varint(&mut self, mut v: u64) -> Option<()> {
        while v >= 0x80 {
            *self.buf.get_mut(self.pos)? = v as u8 | 0x80;
            self.pos += 1;
            v >>= 7;
        }
        *self.buf.get_mut(self.pos)? = v as u8;
        self.pos += 1;
        Some(())
    }
}

/// Output bytes reserved for one record whose raw arguments take `raw`
/// bytes: the site and delta varints (15), the nibble bytes (at most one
/// per two raw bytes), each value's compact form (at most its raw bytes
/// and one), and the slack of an 8-byte store.
#[inline(always)]
fn bound(raw: usize) -> usize {
    32 + 2 * raw
}

/// The most the output's window grows by at a time (see `compact_run`).
const GROW: usize = 4096;
/// The least it grows by for a run of records (a lone record: its bound).
const FIRST: usize = 512;

/// One argument type's compaction: reads its raw form at `raw[*pos..]`,
/// appends its compact form, and returns its nibble code (0 if it has none).
pub trait CompactArg {
    /// Whether the value has a nibble code.
    const NIBBLED: bool;
    /// Compacts one value.
    fn compact(
        raw: &[u8],
        pos: &mut usize,
        out: &mut Cursor<'_>,
        strings: &mut Interner,
    ) -> Option<u8>;
}

#[inline(always)]
fn take<const W: usize>(raw: &[u8], pos: &mut usize) -> Option<[u8; W]> {
    let b = raw.get(*pos..*pos + W)?.try_into().ok()?;
    *pos += W;
    Some(b)
}

/// Bytes needed for `v`, at least one.
#[inline(always)]
fn bytes_of(v: u64) -> usize {
    ((64 - v.leading_zeros() as usize).div_ceil(8)).max(1)
}

/// An unsigned value of up to 8 bytes: its significant bytes, code n - 1.
#[inline(always)]
fn put_unsigned(out: &mut Cursor<'_>, v: u64) -> Option<u8> {
    let n = bytes_of(v);
    out.put_low(v, n)?;
    Some(n as u8 - 1)
}

/// A signed value of up to 8 bytes (`width` of them in the ring): a
/// negative one as its complement, code 7 + n.
#[inline(always)]
fn put_signed(out: &mut Cursor<'_>, v: i64, width: usize) -> Option<u8> {
    if v >= 0 {
        return put_unsigned(out, v as u64);
    }
    let m = !v as u64;
    let n = bytes_of(m);
    if n <= 7 {
        out.put_low(m, n)?;
        return Some(7 + n as u8);
    }
    // Only an i64/isize below -2^55 gets here: the raw value, full width.
    out.put_low(v as u64, width)?;
    Some(15)
}

// `type => the type its raw form has in the ring`.
macro_rules! unsigned {
    ($($t:ty => $ring:ty),*) => {$(
        impl CompactArg for $t {
            const NIBBLED: bool = true;
            #[inline(always)]
            fn compact(
                raw: &[u8],
                pos: &mut usize,
                out: &mut Cursor<'_>,
                _: &mut Interner,
            ) -> Option<u8> {
                let v = <$ring>::from_le_bytes(take(raw, pos)?);
                put_unsigned(out, v as u64)
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
            fn compact(
                raw: &[u8],
                pos: &mut usize,
                out: &mut Cursor<'_>,
                _: &mut Interner,
            ) -> Option<u8> {
                let v = <$ring>::from_le_bytes(take(raw, pos)?);
                put_signed(out, i64::from(v), std::mem::size_of::<$ring>())
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
            fn compact(
                raw: &[u8],
                pos: &mut usize,
                out: &mut Cursor<'_>,
                _: &mut Interner,
            ) -> Option<u8> {
                let b = take::<16>(raw, pos)?;
                let (bytes, n, code) = nibbled(ArgKind::$k, &b);
                out.put(&bytes[..n])?;
                Some(code)
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
            fn compact(
                raw: &[u8],
                pos: &mut usize,
                out: &mut Cursor<'_>,
                _: &mut Interner,
            ) -> Option<u8> {
                out.put(&take::<$w>(raw, pos)?)?;
                Some(0)
            }
        }
    )*};
}
plain!(f32 => 4, f64 => 8, bool => 1);

impl CompactArg for &str {
    const NIBBLED: bool = true;
    #[inline(always)]
    fn compact(
        raw: &[u8],
        pos: &mut usize,
        out: &mut Cursor<'_>,
        strings: &mut Interner,
    ) -> Option<u8> {
        let len = u32::from_le_bytes(take(raw, pos)?) as usize;
        let bytes = raw.get(*pos..*pos + len)?;
        *pos += len;
        match strings.lookup(bytes) {
            Some(id) => put_unsigned(out, (u64::from(id) << 1) | 1),
            None => {
                let inline = record::InlineStr::of(bytes);
                if let Some((id, tail)) = inline.numbered(strings) {
                    let code = put_unsigned(out, record::numbered_number(id))?;
                    out.put_varint(tail)?;
                    return Some(code);
                }
                let code = put_unsigned(out, inline.number())?;
                let mut room = true;
                inline.bytes(|b| room &= out.put(b).is_some());
                room.then_some(code)
            }
        }
    }
}

impl<const N: usize> CompactArg for Preformatted<N> {
    const NIBBLED: bool = false;
    fn compact(raw: &[u8], pos: &mut usize, out: &mut Cursor<'_>, _: &mut Interner) -> Option<u8> {
        let n = u32::from_le_bytes(take(raw, pos)?);
        out.put_varint(u64::from(n))?;
        for _ in 0..n {
            let len = u32::from_le_bytes(take(raw, pos)?) as usize;
            out.put_varint(len as u64)?;
            out.put(raw.get(*pos..*pos + len)?)?;
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
        out: &mut Cursor<'_>,
        strings: &mut Interner,
        nib_at: usize,
        ix: usize,
    ) -> Option<()>;
}

impl ArgList for () {
    const NIBBLES: usize = 0;
    #[inline(always)]
    fn compact_all(
        _: &[u8],
        _: &mut usize,
        _: &mut Cursor<'_>,
        _: &mut Interner,
        _: usize,
        _: usize,
    ) -> Option<()> {
        Some(())
    }
}

impl<H: CompactArg, T: ArgList> ArgList for (PhantomData<H>, T) {
    const NIBBLES: usize = H::NIBBLED as usize + T::NIBBLES;
    #[inline(always)]
    fn compact_all(
        raw: &[u8],
        pos: &mut usize,
        out: &mut Cursor<'_>,
        strings: &mut Interner,
        nib_at: usize,
        ix: usize,
    ) -> Option<()> {
        let code = H::compact(raw, pos, out, strings)?;
        if H::NIBBLED {
            *out.buf.get_mut(nib_at + ix / 2)? |= code << ((ix & 1) * 4);
        }
        T::compact_all(raw, pos, out, strings, nib_at, ix + H::NIBBLED as usize)
    }
}

/// The compaction of one record's raw ring arguments of types `T` (`None`
/// if the raw bytes do not match the types, which would be a bug in the
/// encoders): the nibble bytes first (zeroed, filled in as the values are
/// written), then each value.
#[inline(always)]
fn compact_args<T: ArgList>(
    raw: &[u8],
    out: &mut Cursor<'_>,
    strings: &mut Interner,
) -> Option<()> {
    let nib_at = out.pos;
    let k = T::NIBBLES.div_ceil(2);
    out.buf.get_mut(nib_at..nib_at + k)?.fill(0);
    out.pos += k;
    T::compact_all(raw, &mut 0, out, strings, nib_at, 0)
}

/// Compacts the ring records at the start of `run` that belong to `site`
/// (whose argument types are `T`) into `out`, each as an extent body holds
/// it: the site id and the tick delta from `prev_tick` as varints (the
/// delta clamped at zero), then the arguments. `run` starts with a record
/// of `site`; the run ends before the first record of another site or a
/// PAD word, before a header that does not fit in `run` or a record that
/// overruns it, or after the record that brings `out` to `out_stop` bytes.
/// Returns the bytes of `run` consumed and the records compacted, (0, 0)
/// when the first record is malformed.
///
/// One call per run rather than per record: in a burst from one call site,
/// the flusher's per-record work is this loop, with no site lookup,
/// dictionary check or indirect call between records. `out` grows ahead
/// of the writes, zero-filled, a few KiB at a time, and is cut back to what
/// was written at the end.
fn compact_run<T: ArgList>(
    run: &[u8],
    site: u32,
    prev_tick: &mut u64,
    out: &mut Vec<u8>,
    out_stop: usize,
    strings: &mut Interner,
) -> (usize, u64) {
    let mut len = out.len();
    let mut pos = 0;
    let mut n = 0;
    let mut prev = *prev_tick;
    // The window past `len` that `resize` zero-fills: a record followed by
    // another site's (a lone record, as wherever sites interleave) gets
    // its own bound; a run, FIRST bytes, doubling as it goes on, at most
    // GROW at a time. (A 4 KiB window at every call was a 4 KiB memset a
    // record where sites interleave: 58% of a flat-out writer's flusher in
    // its profile, b5a4103 to 888f9b2.)
    let mut grow = 0;
    while let Some((id, rec_len, tick)) = run.get(pos..).and_then(ring::parse_header) {
        if id != site {
            break;
        }
        // A length below the header's makes the range end before it: None.
        let Some(args) = run.get(pos + ring::HEADER..pos + rec_len) else {
            break;
        };
        let need = bound(args.len());
        if out.len() - len < need {
            let lone = run
                .get(pos + rec_len..)
                .and_then(ring::parse_header)
                .is_none_or(|(next, _, _)| next != site);
            grow = match lone {
                true => need,
                false => (grow * 2).clamp(FIRST, GROW).max(need),
            };
            out.resize(len + grow, 0);
        }
        let delta = tick.saturating_sub(prev);
        prev += delta;
        let mut w = Cursor {
            buf: &mut out[len..],
            pos: 0,
        };
        let ok = w
            .put_varint(u64::from(site))
            .and_then(|()| w.put_varint(delta))
            .and_then(|()| compact_args::<T>(args, &mut w, strings))
            .is_some();
        debug_assert!(ok, "ring record does not match its site's types");
        len += w.pos;
        pos += rec_len;
        n += 1;
        if len >= out_stop {
            break;
        }
    }
    out.truncate(len);
    *prev_tick = prev;
    (pos, n)
}

/// The compaction function for the argument types of `_types` (the nested
/// `PhantomData` list the macro builds from the prepared arguments).
#[inline(always)]
pub fn compactor<T: ArgList>(_types: &T) -> CompactFn {
    compact_run::<T>
}

/// One ring record of `site` at `tick` holding the raw arguments `args`,
/// padded as the ring pads it: input for benchmarks and tests of a
/// [`CompactFn`].
#[doc(hidden)]
#[cfg(any(test, feature = "test-hooks"))]
pub fn __ring_record(site: u32, tick: u64, args: &[u8]) -> Vec<u8> {
    let len = (ring::HEADER + args.len()).next_multiple_of(ring::ALIGN);
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&site.to_le_bytes());
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.extend_from_slice(&tick.to_le_bytes());
    r.extend_from_slice(args);
    r.resize(len, 0);
    r
}

/// `PhantomData` of a value's type, for [`compactor`].
#[inline(always)]
pub fn type_of<T>(_: &T) -> PhantomData<T> {
    PhantomData
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::put_varint;
    use crate::wire::record::compact;

    /// One record's arguments through the typed path, into a `Vec`.
    fn compact_record<T: ArgList>(
        raw: &[u8],
        out: &mut Vec<u8>,
        strings: &mut Interner,
    ) -> Option<()> {
        let at = out.len();
        out.resize(at + bound(raw.len()), 0);
        let mut w = Cursor {
            buf: &mut out[at..],
            pos: 0,
        };
        let r = compact_args::<T>(raw, &mut w, strings);
        let end = at + w.pos;
        out.truncate(end);
        r
    }

    fn same<T: ArgList>(_types: T, kinds: &[ArgKind], raw: &[u8]) {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let typed = compact_record::<T>(raw, &mut a, &mut Interner::off());
        let interpreted = compact(kinds, raw, &mut b);
        assert_eq!(typed, interpreted, "{kinds:?} {raw:?}");
        assert_eq!(a, b, "{kinds:?} {raw:?}");
        // Against a table, four times (a string is interned at its third
        // sighting): the same bytes, the same references.
        let (mut ta, mut tb) = (Interner::new(), Interner::new());
        for _ in 0..4 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let typed = compact_record::<T>(raw, &mut a, &mut ta);
            let interpreted = crate::wire::record::compact_with(kinds, raw, &mut b, &mut tb);
            assert_eq!(typed, interpreted, "{kinds:?} {raw:?}");
            assert_eq!(a, b, "{kinds:?} {raw:?}");
        }
    }

    fn p<T>() -> PhantomData<T> {
        PhantomData
    }

    /// A run takes the records of its site up to another site's, each with
    /// the site id and the tick delta, and stops early at `out_stop`.
    #[test]
    fn a_run_takes_its_sites_records_until_another_site_or_out_stop() {
        let types = (p::<u32>(), (p::<&str>(), ()));
        let f = compactor(&types);
        let args = |v: u32, s: &str| {
            let mut a = v.to_le_bytes().to_vec();
            a.extend_from_slice(&(s.len() as u32).to_le_bytes());
            a.extend_from_slice(s.as_bytes());
            a
        };
        // Ticks 1000, 1300, 1200 (a backward step), then a record of site 9.
        let recs = [
            (7, 1000, args(5, "a")),
            (7, 1300, args(300, "bc")),
            (7, 1200, args(0, "")),
        ];
        let mut ring = Vec::new();
        for (site, tick, a) in &recs {
            ring.extend_from_slice(&__ring_record(*site, *tick, a));
        }
        let first_three = ring.len();
        ring.extend_from_slice(&__ring_record(9, 1400, &args(1, "z")));

        let mut want = Vec::new();
        let mut prev = 900;
        for (site, tick, a) in &recs {
            let delta = u64::saturating_sub(*tick, prev);
            prev += delta;
            put_varint(&mut want, *site as u64);
            put_varint(&mut want, delta);
            compact(&[ArgKind::U32, ArgKind::Str], a, &mut want).unwrap();
        }
        let (mut out, mut prev) = (Vec::new(), 900);
        assert_eq!(
            f(
                &ring,
                7,
                &mut prev,
                &mut out,
                usize::MAX,
                &mut Interner::off()
            ),
            (first_three, 3)
        );
        assert_eq!(out, want);
        assert_eq!(prev, 1300, "a backward step adds nothing");

        // out_stop: the run ends after the record that reaches it.
        let (mut out, mut prev) = (Vec::new(), 900);
        let (used, n) = f(&ring, 7, &mut prev, &mut out, 1, &mut Interner::off());
        assert_eq!((used, n), (__ring_record(7, 1000, &recs[0].2).len(), 1));
        // A run cut inside a record stops before it; a malformed first
        // record (length below a header) takes nothing.
        let cut = &ring[..first_three - 1];
        let (mut out, mut prev) = (Vec::new(), 900);
        assert_eq!(
            f(
                cut,
                7,
                &mut prev,
                &mut out,
                usize::MAX,
                &mut Interner::off()
            )
            .1,
            2
        );
        let mut bad = ring.clone();
        bad[4..8].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            f(
                &bad,
                7,
                &mut prev,
                &mut Vec::new(),
                usize::MAX,
                &mut Interner::off()
            ),
            (0, 0)
        );
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
        // Strings of hex digits, packed and not, repeated (interned).
        for h in [
            "9e3779b97f4a7c15",
            "9e3779b97f4a7c1",
            "DEADBEEF",
            "00ff00ff",
        ] {
            let mut raw = Vec::new();
            for _ in 0..2 {
                raw.extend_from_slice(&(h.len() as u32).to_le_bytes());
                raw.extend_from_slice(h.as_bytes());
            }
            same(
                (p::<&str>(), (p::<&str>(), ())),
                &[ArgKind::Str, ArgKind::Str],
                &raw,
            );
        }
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
