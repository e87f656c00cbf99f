//! Turns a record's pre-parsed pieces and decoded values back into the text
//! `format!` would have produced.
//!
//! The value itself is formatted by Rust's own `fmt` (so digits, float
//! shortest-representation and escapes match exactly); fill, alignment, width,
//! sign and zero-padding are applied here from the spec, following
//! `core::fmt::Formatter::{pad, pad_integral, pad_formatted_parts}`.

use std::fmt::Write;

use crate::wire::format::{Align, ArgKind, Count, Piece, Spec, Ty};
use crate::wire::record::Value;

/// Appends the rendered message to `out`.
pub fn format_message(pieces: &[Piece], kinds: &[ArgKind], args: &[Value<'_>], out: &mut String) {
    for p in pieces {
        match p {
            Piece::Lit(s) => out.push_str(s),
            Piece::Arg(spec) => {
                let i = spec.arg as usize;
                match (args.get(i), kinds.get(i)) {
                    (Some(v), Some(&k)) => render_arg(spec, k, v, args, out),
                    _ => out.push_str("<missing argument>"),
                }
            }
        }
    }
}

fn count(c: Count, args: &[Value<'_>]) -> Option<usize> {
    match c {
        Count::Implied => None,
        Count::Is(n) => Some(n as usize),
        Count::Arg(i) => match args.get(i as usize) {
            Some(Value::Uint(v)) => Some(usize::try_from(*v).unwrap_or(usize::MAX)),
            Some(Value::Int(v)) => Some(usize::try_from(*v).unwrap_or(0)),
            _ => None,
        },
    }
}

fn render_arg(spec: &Spec, kind: ArgKind, v: &Value<'_>, args: &[Value<'_>], out: &mut String) {
    let width = count(spec.width, args);
    let precision = count(spec.precision, args);
    let alt = spec.flags & Spec::FLAG_ALTERNATE != 0;
    match *v {
        Value::Rendered(r) => out.push_str(r.get(spec.use_ix as usize).unwrap_or("")),
        Value::Str(s) => render_str(s, spec, alt, width, precision, out),
        // Packed hex digits (format version 5): as the digits.
        Value::Hex(h) if spec.ty != Ty::Debug && width.is_none() && precision.is_none() => {
            h.for_each_piece(|d| out.push_str(d));
        }
        Value::Hex(h) => render_str(&h.to_string(), spec, alt, width, precision, out),
        // A prefix and digits (format version 7): as its text.
        Value::Numbered(n) if spec.ty != Ty::Debug && width.is_none() && precision.is_none() => {
            let _ = write!(out, "{n}");
        }
        Value::Numbered(n) => render_str(&n.to_string(), spec, alt, width, precision, out),
        Value::Char(c) => {
            if spec.ty == Ty::Debug {
                let _ = write!(out, "{c:?}");
            } else {
                pad_str(c.encode_utf8(&mut [0; 4]), spec, width, precision, out);
            }
        }
        Value::Bool(b) => pad_str(
            if b { "true" } else { "false" },
            spec,
            width,
            precision,
            out,
        ),
        Value::Uint(u) => render_int(spec, kind, u, false, width, precision, out),
        Value::Int(i) => render_int(spec, kind, i as u128, i < 0, width, precision, out),
        Value::F32(f) => render_float(spec, f, f64::from(f), width, precision, out),
        Value::F64(f) => render_float(spec, f, f, width, precision, out),
    }
}

fn render_str(
    s: &str,
    spec: &Spec,
    alt: bool,
    width: Option<usize>,
    precision: Option<usize>,
    out: &mut String,
) {
    if spec.ty == Ty::Debug {
        if alt {
            let _ = write!(out, "{s:#?}");
        } else {
            let _ = write!(out, "{s:?}");
        }
    } else {
        pad_str(s, spec, width, precision, out);
    }
}

/// `{:.p}` of `v` for small `p`, when it can be decided without the exact
/// decimal expansion: `v * 10^p` is computed with an error below one unit in
/// its last place, so unless it lies within a few units of a rounding tie,
/// rounding it gives the digits `format!` prints (which rounds the exact
/// value, ties to even). Returns false, writing nothing, when it cannot decide.
fn fixed_fast(v: f64, p: usize, out: &mut String) -> bool {
    const POW10: [f64; 10] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
    const POW10_U: [u64; 10] = [
        1,
        10,
        100,
        1_000,
        10_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
        1_000_000_000,
    ];
    if p >= POW10.len() || !v.is_finite() {
        return false;
    }
    let a = v.abs();
    let s = a * POW10[p];
    if s >= 4.0e15 {
        return false;
    }
    let k = s.floor();
    let frac = s - k;
    // Distance from the tie, against a generous bound on the error of `s`.
    let err = s * f64::EPSILON * 4.0 + f64::MIN_POSITIVE;
    if (frac - 0.5).abs() <= err {
        return false;
    }
    let r = k as u64 + u64::from(frac > 0.5);
    if v.is_sign_negative() {
        out.push('-');
    }
    push_u64(out, r / POW10_U[p]);
    if p > 0 {
        out.push('.');
        let f = r % POW10_U[p];
        let mut buf = [b'0'; 9];
        let mut x = f;
        for i in (0..p).rev() {
            buf[i] = b'0' + (x % 10) as u8;
            x /= 10;
        }
        push_ascii(out, &buf[..p]);
    }
    true
}

fn render_float<F>(
    spec: &Spec,
    f: F,
    as_f64: f64,
    width: Option<usize>,
    precision: Option<usize>,
    out: &mut String,
) where
    F: std::fmt::Display + std::fmt::Debug + std::fmt::LowerExp + std::fmt::UpperExp,
{
    let nan = as_f64.is_nan();
    let start = out.len();
    let fast = spec.ty == Ty::Display && precision.is_some_and(|p| fixed_fast(as_f64, p, out));
    let _ = match (spec.ty, precision) {
        _ if fast => Ok(()),
        (Ty::Debug, None) => write!(out, "{f:?}"),
        (Ty::Debug, Some(p)) => write!(out, "{f:.p$?}"),
        (Ty::LowerExp, None) => write!(out, "{f:e}"),
        (Ty::LowerExp, Some(p)) => write!(out, "{f:.p$e}"),
        (Ty::UpperExp, None) => write!(out, "{f:E}"),
        (Ty::UpperExp, Some(p)) => write!(out, "{f:.p$E}"),
        (_, None) => write!(out, "{f}"),
        (_, Some(p)) => write!(out, "{f:.p$}"),
    };
    // `+` shows on everything but NaN (whose sign `format!` never prints).
    if spec.flags & Spec::FLAG_PLUS != 0 && !nan && !out[start..].starts_with('-') {
        out.insert(start, '+');
    }
    pad_number(out, start, 0, spec, width);
}

/// Appends ASCII bytes (digits) without a UTF-8 check.
#[inline]
pub fn push_ascii(out: &mut String, digits: &[u8]) {
    out.extend(digits.iter().map(|&b| char::from(b)));
}

const DIGITS3_BYTES: [u8; 3000] = {
    let mut b = [0u8; 3000];
    let mut i = 0;
    while i < 1000 {
        b[3 * i] = b'0' + (i / 100) as u8;
        b[3 * i + 1] = b'0' + (i / 10 % 10) as u8;
        b[3 * i + 2] = b'0' + (i % 10) as u8;
        i += 1;
    }
    b
};

/// "000001002...999": three decimal digits of every number below 1000.
const DIGITS3: &str = match std::str::from_utf8(&DIGITS3_BYTES) {
    Ok(s) => s,
    Err(_) => panic!("digits are ASCII"),
};

#[inline(always)]
fn three(n: u64) -> &'static str {
    let i = n as usize * 3;
    &DIGITS3[i..i + 3]
}

/// Appends `v` in decimal, three digits at a time.
#[inline]
pub fn push_u64(out: &mut String, v: u64) {
    if v < 1000 {
        let t = three(v);
        let skip = if v < 10 {
            2
        } else if v < 100 {
            1
        } else {
            0
        };
        out.push_str(&t[skip..]);
        return;
    }
    let mut groups = [0u64; 7];
    let mut n = 0;
    let mut w = v;
    while w >= 1000 {
        groups[n] = w % 1000;
        w /= 1000;
        n += 1;
    }
    push_u64(out, w);
    for g in groups[..n].iter().rev() {
        out.push_str(three(*g));
    }
}

/// Appends `v` (below 10^9) as exactly nine digits.
#[inline]
pub fn push_nine_digits(out: &mut String, v: u32) {
    out.push_str(nine_digits(v).as_str());
}

/// The nine decimal digits of `v % 10^9`, zero-padded, in one buffer (one
/// copy into the output, where three 3-byte copies cost a call each).
#[inline]
pub fn nine_digits(v: u32) -> NineDigits {
    let v = u64::from(v);
    let mut b = [0u8; 9];
    b[0..3].copy_from_slice(three(v / 1_000_000 % 1000).as_bytes());
    b[3..6].copy_from_slice(three(v / 1000 % 1000).as_bytes());
    b[6..9].copy_from_slice(three(v % 1000).as_bytes());
    NineDigits(b)
}

/// Nine ASCII digits, from [`nine_digits`].
#[derive(Debug, Clone, Copy)]
pub struct NineDigits([u8; 9]);

impl NineDigits {
    /// The digits.
    #[inline]
    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever stored (from the DIGITS3 table).
        std::str::from_utf8(&self.0).unwrap_or("000000000")
    }
}

/// Decimal digits of `v`, into the end of `buf`; returns where they start.
/// (For 128-bit magnitudes; [`push_u64`] does the rest.)
fn decimal(mut v: u128, buf: &mut [u8; 40]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return i;
        }
    }
}

fn render_int(
    spec: &Spec,
    kind: ArgKind,
    bits: u128,
    negative: bool,
    width: Option<usize>,
    precision: Option<usize>,
    out: &mut String,
) {
    let plus = spec.flags & Spec::FLAG_PLUS != 0;
    let alt = spec.flags & Spec::FLAG_ALTERNATE != 0;
    let start = out.len();
    // Radix formats show a negative number's two's complement at its type's width.
    let type_bits = kind.ring_width() * 8;
    let masked = if type_bits >= 128 {
        bits
    } else {
        bits & ((1u128 << type_bits) - 1)
    };
    let prefix = match spec.ty {
        Ty::Display | Ty::Debug => {
            let mag = if negative {
                (bits as i128).unsigned_abs()
            } else {
                bits
            };
            if negative {
                out.push('-');
            } else if plus {
                out.push('+');
            }
            match u64::try_from(mag) {
                Ok(m) => push_u64(out, m),
                Err(_) => {
                    let mut buf = [0u8; 40];
                    let at = decimal(mag, &mut buf);
                    push_ascii(out, &buf[at..]);
                }
            }
            if width.is_some() {
                pad_number(out, start, 0, spec, width);
            }
            return;
        }
        Ty::LowerExp | Ty::UpperExp => {
            let upper = spec.ty == Ty::UpperExp;
            let _ = match (negative, upper, precision) {
                (true, false, None) => write!(out, "{:e}", bits as i128),
                (true, false, Some(p)) => write!(out, "{:.p$e}", bits as i128),
                (true, true, None) => write!(out, "{:E}", bits as i128),
                (true, true, Some(p)) => write!(out, "{:.p$E}", bits as i128),
                (false, false, None) => write!(out, "{bits:e}"),
                (false, false, Some(p)) => write!(out, "{bits:.p$e}"),
                (false, true, None) => write!(out, "{bits:E}"),
                (false, true, Some(p)) => write!(out, "{bits:.p$E}"),
            };
            if plus && !negative {
                out.insert(start, '+');
            }
            pad_number(out, start, 0, spec, width);
            return;
        }
        Ty::LowerHex | Ty::UpperHex => "0x",
        Ty::Octal => "0o",
        Ty::Binary => "0b",
    };
    if plus {
        out.push('+');
    }
    if alt {
        out.push_str(prefix);
    }
    let _ = match spec.ty {
        Ty::LowerHex => write!(out, "{masked:x}"),
        Ty::UpperHex => write!(out, "{masked:X}"),
        Ty::Octal => write!(out, "{masked:o}"),
        _ => write!(out, "{masked:b}"),
    };
    pad_number(out, start, if alt { 2 } else { 0 }, spec, width);
}

/// Pads the number written to `out[start..]` (sign included) to `width`:
/// with zeros after the sign and the `prefix_len`-byte radix prefix if the
/// `0` flag is set, else with the fill character (right-aligned by default).
fn pad_number(
    out: &mut String,
    start: usize,
    prefix_len: usize,
    spec: &Spec,
    width: Option<usize>,
) {
    let Some(w) = width else { return };
    let len = out[start..].chars().count();
    if len >= w {
        return;
    }
    let pad = w - len;
    if spec.flags & Spec::FLAG_ZERO != 0 {
        let sign = usize::from(matches!(out.as_bytes().get(start), Some(b'+' | b'-')));
        let at = start + sign + prefix_len;
        out.insert_str(at, &"0".repeat(pad));
    } else {
        let (pre, post) = split_pad(pad, spec.align, Align::Right);
        if pre > 0 {
            let fill: String = std::iter::repeat_n(spec.fill, pre).collect();
            out.insert_str(start, &fill);
        }
        out.extend(std::iter::repeat_n(spec.fill, post));
    }
}

/// `Formatter::pad`: precision truncates, width pads (left-aligned by default).
fn pad_str(s: &str, spec: &Spec, width: Option<usize>, precision: Option<usize>, out: &mut String) {
    let s = match precision {
        Some(p) => match s.char_indices().nth(p) {
            Some((i, _)) => &s[..i],
            None => s,
        },
        None => s,
    };
    match width {
        Some(w) => {
            let len = s.chars().count();
            if len >= w {
                out.push_str(s);
            } else {
                let (pre, post) = split_pad(w - len, spec.align, Align::Left);
                out.extend(std::iter::repeat_n(spec.fill, pre));
                out.push_str(s);
                out.extend(std::iter::repeat_n(spec.fill, post));
            }
        }
        None => out.push_str(s),
    }
}

fn split_pad(pad: usize, align: Align, default: Align) -> (usize, usize) {
    let align = if align == Align::Unknown {
        default
    } else {
        align
    };
    match align {
        Align::Left | Align::Unknown => (0, pad),
        Align::Right => (pad, 0),
        Align::Center => (pad / 2, pad.div_ceil(2)),
    }
}

/// Whether `b` holds a byte a one-line text output must look at: a control
/// character, the backslash, or the first byte of U+0085, U+2028 or U+2029
/// (0xC2, 0xE2). Eight bytes at a time.
pub fn needs_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    #[inline(always)]
    fn has_zero(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGH
    }
    #[inline(always)]
    fn has_less_than(x: u64, n: u8) -> u64 {
        x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH
    }
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let hit = has_less_than(x, 0x20)
            | has_zero(x ^ (ONES * 0x7f))
            | has_zero(x ^ (ONES * u64::from(b'\\')))
            | has_zero(x ^ (ONES * 0xc2))
            | has_zero(x ^ (ONES * 0xe2));
        if hit != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&c| c < 0x20 || c == 0x7f || c == b'\\' || c == 0xc2 || c == 0xe2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(precision: Count) -> Spec {
        Spec {
            arg: 0,
            use_ix: 0,
            fill: ' ',
            align: Align::Unknown,
            flags: 0,
            width: Count::Implied,
            precision,
            ty: Ty::Display,
        }
    }

    /// The fixed-precision fast path against `format!`, over values near
    /// ties, tiny, huge and random, for every precision it takes.
    #[test]
    fn fixed_precision_floats_match_format() {
        let mut vals: Vec<f64> = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -2.5,
            0.25,
            0.125,
            0.05,
            0.15,
            0.35,
            1.005,
            2.675,
            1e-10,
            -1e-10,
            123456.789,
            0.1 + 0.2,
            9.9999999,
            999999999.9999,
            4.0e15,
            1.0 / 3.0,
            -2.0 / 3.0,
            1e300,
            f64::MIN_POSITIVE,
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 4 {
                0 => (x % 1_000_000) as f64 / 1000.0,
                1 => (x % 100_000) as f64 / 7.0,
                2 => f64::from_bits(x >> 2) * 1e-300,
                _ => (x as i64 as f64) / 1e12,
            };
            vals.push(v);
            vals.push(-v);
        }
        for &v in &vals {
            for p in 0..10u32 {
                let mut got = String::new();
                render_float(&spec(Count::Is(p)), v, v, None, Some(p as usize), &mut got);
                assert_eq!(got, format!("{v:.*}", p as usize), "{v:e} at .{p}");
            }
            let f = v as f32;
            let mut got = String::new();
            render_float(
                &spec(Count::Is(3)),
                f,
                f64::from(f),
                None,
                Some(3),
                &mut got,
            );
            assert_eq!(got, format!("{f:.3}"), "{f:e} f32");
        }
    }
}
