//! Turns a record's pre-parsed pieces and decoded values back into the text
//! `format!` would have produced.
//!
//! The value itself is formatted by Rust's own `fmt` (so digits, float
//! shortest-representation and escapes match exactly); fill, alignment, width,
//! sign and zero-padding are applied here from the spec, following
//! `core::fmt::Formatter::{pad, pad_integral, pad_formatted_parts}`.

use std::fmt::Write;

use crate::site::{Align, ArgKind, Count, Piece, Spec, Ty};
use crate::wire::record::Value;

/// Appends the rendered message to `out`.
pub fn render(pieces: &[Piece], kinds: &[ArgKind], args: &[Value<'_>], out: &mut String) {
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
    let plus = spec.flags & Spec::FLAG_PLUS != 0;
    let alt = spec.flags & Spec::FLAG_ALTERNATE != 0;
    match *v {
        Value::Rendered(r) => out.push_str(r.get(spec.use_ix as usize).unwrap_or("")),
        Value::Str(s) => {
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
        Value::F32(f) => {
            let s = float_body(spec.ty, precision, f);
            pad_number(
                &s,
                plus && !f.is_nan() && !s.starts_with('-'),
                spec,
                width,
                out,
            );
        }
        Value::F64(f) => {
            let s = float_body(spec.ty, precision, f);
            pad_number(
                &s,
                plus && !f.is_nan() && !s.starts_with('-'),
                spec,
                width,
                out,
            );
        }
    }
}

fn float_body<F>(ty: Ty, precision: Option<usize>, f: F) -> String
where
    F: std::fmt::Display + std::fmt::Debug + std::fmt::LowerExp + std::fmt::UpperExp,
{
    match (ty, precision) {
        (Ty::Debug, None) => format!("{f:?}"),
        (Ty::Debug, Some(p)) => format!("{f:.p$?}"),
        (Ty::LowerExp, None) => format!("{f:e}"),
        (Ty::LowerExp, Some(p)) => format!("{f:.p$e}"),
        (Ty::UpperExp, None) => format!("{f:E}"),
        (Ty::UpperExp, Some(p)) => format!("{f:.p$E}"),
        (_, None) => format!("{f}"),
        (_, Some(p)) => format!("{f:.p$}"),
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
    // Radix formats show a negative number's two's complement at its type's width.
    let type_bits = kind.ring_width() * 8;
    let masked = if type_bits >= 128 {
        bits
    } else {
        bits & ((1u128 << type_bits) - 1)
    };
    let mut buf = String::new();
    let (nonneg, prefix, digits): (bool, &str, &str) = match spec.ty {
        Ty::Display | Ty::Debug => {
            let mag = if negative {
                (bits as i128).unsigned_abs()
            } else {
                bits
            };
            let _ = write!(buf, "{mag}");
            (!negative, "", &buf)
        }
        Ty::LowerHex => {
            let _ = write!(buf, "{masked:x}");
            (true, "0x", &buf)
        }
        Ty::UpperHex => {
            let _ = write!(buf, "{masked:X}");
            (true, "0x", &buf)
        }
        Ty::Octal => {
            let _ = write!(buf, "{masked:o}");
            (true, "0o", &buf)
        }
        Ty::Binary => {
            let _ = write!(buf, "{masked:b}");
            (true, "0b", &buf)
        }
        Ty::LowerExp | Ty::UpperExp => {
            let upper = spec.ty == Ty::UpperExp;
            let s = match (negative, upper, precision) {
                (true, false, None) => format!("{:e}", bits as i128),
                (true, false, Some(p)) => format!("{:.p$e}", bits as i128),
                (true, true, None) => format!("{:E}", bits as i128),
                (true, true, Some(p)) => format!("{:.p$E}", bits as i128),
                (false, false, None) => format!("{bits:e}"),
                (false, false, Some(p)) => format!("{bits:.p$e}"),
                (false, true, None) => format!("{bits:E}"),
                (false, true, Some(p)) => format!("{bits:.p$E}"),
            };
            pad_number(&s, plus && !negative, spec, width, out);
            return;
        }
    };
    let sign = if !nonneg {
        "-"
    } else if plus {
        "+"
    } else {
        ""
    };
    let prefix = if alt { prefix } else { "" };
    let len = sign.len() + prefix.len() + digits.len();
    match width {
        Some(w) if w > len => {
            if spec.flags & Spec::FLAG_ZERO != 0 {
                out.push_str(sign);
                out.push_str(prefix);
                out.extend(std::iter::repeat_n('0', w - len));
                out.push_str(digits);
            } else {
                let (pre, post) = split_pad(w - len, spec.align, Align::Right);
                out.extend(std::iter::repeat_n(spec.fill, pre));
                out.push_str(sign);
                out.push_str(prefix);
                out.push_str(digits);
                out.extend(std::iter::repeat_n(spec.fill, post));
            }
        }
        _ => {
            out.push_str(sign);
            out.push_str(prefix);
            out.push_str(digits);
        }
    }
}

/// Pads an already-formatted number `s` (which carries its own `-`), adding
/// `+` first if asked; zero-padding goes after the sign.
fn pad_number(s: &str, add_plus: bool, spec: &Spec, width: Option<usize>, out: &mut String) {
    let len = s.chars().count() + usize::from(add_plus);
    let sign = if add_plus { "+" } else { "" };
    match width {
        Some(w) if w > len => {
            if spec.flags & Spec::FLAG_ZERO != 0 {
                let (sgn, rest) = match s.as_bytes().first() {
                    Some(b'-' | b'+') => s.split_at(1),
                    _ => ("", s),
                };
                out.push_str(sign);
                out.push_str(sgn);
                out.extend(std::iter::repeat_n('0', w - len));
                out.push_str(rest);
            } else {
                let (pre, post) = split_pad(w - len, spec.align, Align::Right);
                out.extend(std::iter::repeat_n(spec.fill, pre));
                out.push_str(sign);
                out.push_str(s);
                out.extend(std::iter::repeat_n(spec.fill, post));
            }
        }
        _ => {
            out.push_str(sign);
            out.push_str(s);
        }
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

/// Appends `msg` with what could break the one-line-per-record text output
/// escaped: newlines, carriage returns, tabs, other control characters
/// (terminal escape sequences start with one), and backslashes.
pub fn escape_line(msg: &str, out: &mut String) {
    if !msg.bytes().any(|b| b < 0x20 || b == 0x7f || b == b'\\')
        && !msg.contains(['\u{85}', '\u{2028}', '\u{2029}'])
    {
        out.push_str(msg);
        return;
    }
    for c in msg.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// Appends `s` as a JSON string literal.
pub fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends a value as JSON: integers exact, NaN and infinities as strings.
pub fn json_value(v: &Value<'_>, out: &mut String) {
    match *v {
        Value::Uint(u) => {
            let _ = write!(out, "{u}");
        }
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::F32(f) => json_float(f64::from(f), &format!("{f:?}"), out),
        Value::F64(f) => json_float(f, &format!("{f:?}"), out),
        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Value::Char(c) => json_string(c.encode_utf8(&mut [0; 4]), out),
        Value::Str(s) => json_string(s, out),
        Value::Rendered(r) => {
            // One value per argument: the first rendering (they differ only
            // when the argument is formatted by several placeholders).
            json_string(r.get(0).unwrap_or(""), out);
        }
    }
}

fn json_float(f: f64, debug: &str, out: &mut String) {
    if f.is_nan() {
        out.push_str("\"NaN\"");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "\"inf\"" } else { "\"-inf\"" });
    } else if debug.contains('e') {
        // Rust's `1e20` is valid JSON; `1e-7` too.
        out.push_str(debug);
    } else {
        out.push_str(debug);
    }
}
