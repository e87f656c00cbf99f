//! The values a record's arguments decode to: integers, floats, bools,
//! chars, and strings as the file holds them (text, packed hex digits, a
//! numbered string, the strings a call site rendered), borrowed from the
//! log. Their encoding is `record/`'s.

/// One decoded argument value, borrowing strings from the log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Any unsigned integer type (`u8` to `u128`, `usize`).
    Uint(u128),
    /// Any signed integer type (`i8` to `i128`, `isize`).
    Int(i128),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
    /// A `bool`.
    Bool(bool),
    /// A `char`.
    Char(char),
    /// A string (`&str`, `String`, or a value formatted at the call site).
    Str(&'a str),
    /// A string of lowercase hex digits, as the file packs it (format
    /// version 5): shown as the digits.
    Hex(HexStr<'a>),
    /// A string of a prefix the file defines and decimal digits, as the
    /// file packs it (format version 7): shown as the prefix and the digits.
    Numbered(NumberedStr<'a>),
    /// A value rendered at the call site: one string per placeholder using it.
    Rendered(PreformattedStrs<'a>),
}

/// A string of lowercase hex digits as a file packs it: two digits a byte,
/// the first in the high half. `Display` shows the digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HexStr<'a>(pub(super) &'a [u8]);

impl<'a> HexStr<'a> {
    /// The packed bytes (each two digits).
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// How many digits it holds.
    pub fn len(&self) -> usize {
        2 * self.0.len()
    }

    /// Whether it holds none (never, as a writer packs only 8 or more).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Calls `f` with its digits, in pieces of up to 64.
    pub fn for_each_piece(&self, mut f: impl FnMut(&str)) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 64];
        for chunk in self.0.chunks(32) {
            for (i, &b) in chunk.iter().enumerate() {
                buf[2 * i] = DIGITS[usize::from(b >> 4)];
                buf[2 * i + 1] = DIGITS[usize::from(b & 15)];
            }
            // Hex digits are ASCII.
            f(std::str::from_utf8(&buf[..2 * chunk.len()]).unwrap_or_default());
        }
    }
}

impl std::fmt::Display for HexStr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut r = Ok(());
        self.for_each_piece(|s| {
            if r.is_ok() {
                r = f.write_str(s);
            }
        });
        r
    }
}

/// A string that is a prefix and decimal digits, as a file packs it (format
/// version 7): `Display` shows the prefix, then the digits (leading zeros
/// included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberedStr<'a> {
    pub(super) prefix: &'a str,
    /// Zeros before the number's digits (`user-007`: 2).
    pub(super) zeros: u8,
    pub(super) number: u64,
}

impl<'a> NumberedStr<'a> {
    /// The text before the digits.
    pub fn prefix(&self) -> &'a str {
        self.prefix
    }

    /// The number the digits make.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// How many zeros stand before the number's digits.
    pub fn zeros(&self) -> usize {
        usize::from(self.zeros)
    }
}

impl std::fmt::Display for NumberedStr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.prefix)?;
        for _ in 0..self.zeros {
            f.write_str("0")?;
        }
        write!(f, "{}", self.number)
    }
}

/// The strings of a call-site-rendered argument, undecoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreformattedStrs<'a> {
    pub(super) count: usize,
    pub(super) bytes: &'a [u8],
}

impl<'a> PreformattedStrs<'a> {
    /// How many strings there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no strings.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The `i`-th string (placeholder use `i` of the argument).
    pub fn get(&self, i: usize) -> Option<&'a str> {
        self.iter().nth(i)
    }

    /// The strings, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        let bytes = self.bytes;
        let mut pos = 0;
        (0..self.count).map_while(move |_| super::get_str(bytes, &mut pos))
    }
}

impl Value<'_> {
    /// The value as an `f64`, for aggregation (integers and floats only).
    #[inline]
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            // The 64-bit conversions are an instruction; the 128-bit ones a
            // library call, kept out of line so that the compiler cannot
            // fold the two arms into the slow one (it did: 5% of `stats`).
            Value::Uint(v) => Some(match u64::try_from(v) {
                Ok(v) => v as f64,
                Err(_) => wide_u_to_f64(v),
            }),
            Value::Int(v) => Some(match i64::try_from(v) {
                Ok(v) => v as f64,
                Err(_) => wide_i_to_f64(v),
            }),
            Value::F32(v) => Some(f64::from(v)),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

#[cold]
#[inline(never)]
fn wide_u_to_f64(v: u128) -> f64 {
    v as f64
}

#[cold]
#[inline(never)]
fn wide_i_to_f64(v: i128) -> f64 {
    v as f64
}
