//! What the macro expansions call: argument preparation and the typed encoders.
//!
//! Preparation picks, per argument type, between the raw binary path (integers,
//! floats, `bool`, `char`, `&str`, `String`) and the slow path (any other
//! `Display`/`Debug` type, rendered at the call site) by autoref
//! specialisation: `(&Wrap(x)).__nl_prep(..)` finds [`PrepRaw`] on `Wrap<T>`
//! first and falls back to [`PrepFmt`] on `&Wrap<T>`.

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use crate::ring::SlotWriter;
use crate::wire::format::ArgKind;

/// A borrowed argument, the receiver of `__nl_prep`.
pub struct Wrap<'a, T: ?Sized>(pub &'a T);

/// The raw path: the value is copied as it is.
pub trait PrepRaw {
    /// The value the call site records (its binary form, or its text).
    type Out: Encode;
    /// Prepares the value for recording as it is (`render` is not called).
    fn __nl_prep<F>(&self, render: F) -> Self::Out;
}

/// The slow path: the value is rendered by `render` (one string per
/// placeholder that formats it) on the calling thread.
pub trait PrepFmt {
    /// The type the slow path formats.
    type Target: ?Sized;
    /// Formats the value with `render` (the slow path).
    fn __nl_prep<const N: usize, F: FnOnce(&Self::Target) -> [String; N]>(
        &self,
        render: F,
    ) -> Preformatted<N>;
}

/// Gives the render closure its argument type, so `format!`'s own type errors
/// appear at the call site for either path.
#[inline(always)]
pub fn fmt_closure<T: ?Sized, R, F: FnOnce(&T) -> R>(_: &T, f: F) -> F {
    f
}

macro_rules! raw {
    ($($t:ty),*) => {$(
        impl PrepRaw for Wrap<'_, $t> {
            type Out = $t;
            #[inline(always)]
            fn __nl_prep<F>(&self, _: F) -> $t {
                *self.0
            }
        }
    )*};
}
raw!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, bool, char);

impl<'a> PrepRaw for Wrap<'a, str> {
    type Out = &'a str;
    #[inline(always)]
    fn __nl_prep<F>(&self, _: F) -> &'a str {
        self.0
    }
}

impl<'a> PrepRaw for Wrap<'a, String> {
    type Out = &'a str;
    #[inline(always)]
    fn __nl_prep<F>(&self, _: F) -> &'a str {
        self.0.as_str()
    }
}

impl<'a, 'b, T: ?Sized> PrepRaw for Wrap<'a, &'b T>
where
    Wrap<'b, T>: PrepRaw,
{
    type Out = <Wrap<'b, T> as PrepRaw>::Out;
    #[inline(always)]
    fn __nl_prep<F>(&self, render: F) -> Self::Out {
        Wrap(*self.0).__nl_prep(render)
    }
}

impl<T: ?Sized> PrepFmt for &Wrap<'_, T> {
    type Target = T;
    fn __nl_prep<const N: usize, F: FnOnce(&T) -> [String; N]>(
        &self,
        render: F,
    ) -> Preformatted<N> {
        let value = self.0;
        // A panicking Display impl must not take the logging thread down with it.
        match catch_unwind(AssertUnwindSafe(|| render(value))) {
            Ok(strings) => Preformatted(strings),
            Err(_) => Preformatted(std::array::from_fn(|_| String::from("<Display panicked>"))),
        }
    }
}

/// Strings rendered at the call site, one per placeholder of the argument.
pub struct Preformatted<const N: usize>(pub [String; N]);

mod sealed {
    pub trait Sealed {}
}

/// A value that can be written raw into a staging ring.
pub trait Encode: sealed::Sealed {
    /// How the flusher reads it back.
    const KIND: ArgKind;
    /// Bytes it takes in the ring.
    fn ring_len(&self) -> usize;
    /// Writes it and returns the cursor past it.
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a>;
}

macro_rules! encode_int {
    ($($t:ty => $k:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Encode for $t {
            const KIND: ArgKind = ArgKind::$k;
            #[inline(always)]
            fn ring_len(&self) -> usize {
                std::mem::size_of::<$t>()
            }
            #[inline(always)]
            fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
                c.put(&self.to_le_bytes())
            }
        }
    )*};
}
encode_int!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, u128 => U128,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64, i128 => I128,
    f32 => F32, f64 => F64);

impl sealed::Sealed for usize {}
impl Encode for usize {
    const KIND: ArgKind = ArgKind::Usize;
    #[inline(always)]
    fn ring_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        c.put(&(*self as u64).to_le_bytes())
    }
}

impl sealed::Sealed for isize {}
impl Encode for isize {
    const KIND: ArgKind = ArgKind::Isize;
    #[inline(always)]
    fn ring_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        c.put(&(*self as i64).to_le_bytes())
    }
}

impl sealed::Sealed for bool {}
impl Encode for bool {
    const KIND: ArgKind = ArgKind::Bool;
    #[inline(always)]
    fn ring_len(&self) -> usize {
        1
    }
    #[inline(always)]
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        c.put(&[*self as u8])
    }
}

impl sealed::Sealed for char {}
impl Encode for char {
    const KIND: ArgKind = ArgKind::Char;
    #[inline(always)]
    fn ring_len(&self) -> usize {
        4
    }
    #[inline(always)]
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        c.put(&(*self as u32).to_le_bytes())
    }
}

impl sealed::Sealed for &str {}
impl Encode for &str {
    const KIND: ArgKind = ArgKind::Str;
    #[inline(always)]
    fn ring_len(&self) -> usize {
        4 + self.len()
    }
    #[inline(always)]
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        // Strings longer than u32::MAX bytes cannot fit a ring; the record is
        // dropped as oversize before we get here.
        c.put(&(self.len() as u32).to_le_bytes())
            .put(self.as_bytes())
    }
}

impl<const N: usize> sealed::Sealed for Preformatted<N> {}
impl<const N: usize> Encode for Preformatted<N> {
    const KIND: ArgKind = ArgKind::Rendered;
    fn ring_len(&self) -> usize {
        4 + self.0.iter().map(|s| 4 + s.len()).sum::<usize>()
    }
    fn write<'a>(&self, c: SlotWriter<'a>) -> SlotWriter<'a> {
        let mut c = c.put(&(N as u32).to_le_bytes());
        for s in &self.0 {
            c = c.put(&(s.len() as u32).to_le_bytes()).put(s.as_bytes());
        }
        c
    }
}

/// The argument's kind, for the call-site dictionary.
#[inline(always)]
pub fn kind_of<T: Encode>(_: &T) -> ArgKind {
    T::KIND
}

/// Bytes the argument takes in the ring.
#[inline(always)]
pub fn encoded_len<T: Encode>(v: &T) -> usize {
    v.ring_len()
}

/// Writes the argument.
#[inline(always)]
pub fn encode<'a, T: Encode>(v: &T, c: SlotWriter<'a>) -> SlotWriter<'a> {
    v.write(c)
}
