//! Reading a record's arguments back: decoding them to [`Value`]s, or
//! stepping over them (by their kinds, or by a site's [`SkipPlan`]).

use super::strings::{string_form, StrForm, ZERO_BITS};
use super::*;

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
                crate::wire::get_str(buf, pos)?;
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
#[inline]
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
