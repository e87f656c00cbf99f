//! The vocabulary of format strings and arguments as the file records
//! them: pieces of a parsed format string, placeholder specs, and the kinds
//! of argument (with their on-disk codes). The macros, the call-site
//! registry, the writer and the reader all speak it; it knows none of them.

use std::borrow::Cow;

/// One piece of a pre-parsed format string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text (`{{`/`}}` already unescaped).
    Lit(Cow<'static, str>),
    /// A placeholder.
    Arg(Spec),
}

/// Alignment of a placeholder; `Unknown` means the type's default.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// No alignment given: the type's default.
    Unknown = 0,
    /// `<`
    Left = 1,
    /// `^`
    Center = 2,
    /// `>`
    Right = 3,
}

/// A width or precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Not given.
    Implied,
    /// A literal number.
    Is(u32),
    /// The value of argument N (a `usize`).
    Arg(u16),
}

/// The formatting trait a placeholder asks for.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `{}`
    Display = 0,
    /// `{:?}`
    Debug = 1,
    /// `{:x}`
    LowerHex = 2,
    /// `{:X}`
    UpperHex = 3,
    /// `{:o}`
    Octal = 4,
    /// `{:b}`
    Binary = 5,
    /// `{:e}`
    LowerExp = 6,
    /// `{:E}`
    UpperExp = 7,
}

impl Ty {
    /// The type with this on-disk number.
    pub fn from_u8(v: u8) -> Option<Ty> {
        Some(match v {
            0 => Ty::Display,
            1 => Ty::Debug,
            2 => Ty::LowerHex,
            3 => Ty::UpperHex,
            4 => Ty::Octal,
            5 => Ty::Binary,
            6 => Ty::LowerExp,
            7 => Ty::UpperExp,
            _ => return None,
        })
    }
}

/// A placeholder's format spec, resolved to argument indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The argument formatted.
    pub arg: u16,
    /// Which of that argument's value uses this is (selects the pre-rendered
    /// string of a slow-path argument).
    pub use_ix: u16,
    /// The fill character (default space).
    pub fill: char,
    /// The alignment.
    pub align: Align,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The minimum width.
    pub width: Count,
    /// The precision.
    pub precision: Count,
    /// The formatting trait.
    pub ty: Ty,
}

impl Spec {
    /// A plain `{}` placeholder of argument `arg`, used once.
    pub const fn display(arg: u16) -> Spec {
        Spec {
            arg,
            use_ix: 0,
            fill: ' ',
            align: Align::Unknown,
            flags: 0,
            width: Count::Implied,
            precision: Count::Implied,
            ty: Ty::Display,
        }
    }

    /// `+`: always print the sign.
    pub const FLAG_PLUS: u8 = 1;
    /// `-` (accepted, unused, as in `std::fmt`).
    pub const FLAG_MINUS: u8 = 2;
    /// `#`: the alternate form.
    pub const FLAG_ALTERNATE: u8 = 4;
    /// `0`: pad numbers with zeros after the sign.
    pub const FLAG_ZERO: u8 = 8;
}

/// What a call site's records are. The numbers are the on-disk codes
/// (FORMAT.md, the SITE entry's `role`).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// A log record (every site of files written before spans).
    #[default]
    Record = 0,
    /// A span entered: its arguments are the span's fields, then its key
    /// (a `u64` that the matching exit names).
    Span = 1,
    /// A span exited: one `u64` argument, the key of the span.
    SpanExit = 2,
}

impl Role {
    /// The role with this on-disk number (an unknown one reads as a record).
    pub fn from_u8(v: u8) -> Role {
        match v {
            1 => Role::Span,
            2 => Role::SpanExit,
            _ => Role::Record,
        }
    }
}

/// How an argument is stored. The numbers are the on-disk codes (FORMAT.md).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// `u8`
    U8 = 1,
    /// `u16`
    U16 = 2,
    /// `u32`
    U32 = 3,
    /// `u64`
    U64 = 4,
    /// `u128`
    U128 = 5,
    /// `usize`
    Usize = 6,
    /// `i8`
    I8 = 7,
    /// `i16`
    I16 = 8,
    /// `i32`
    I32 = 9,
    /// `i64`
    I64 = 10,
    /// `i128`
    I128 = 11,
    /// `isize`
    Isize = 12,
    /// `f32`
    F32 = 13,
    /// `f64`
    F64 = 14,
    /// `bool`
    Bool = 15,
    /// `char`
    Char = 16,
    /// A UTF-8 string recorded as-is (`&str`, `String`).
    Str = 17,
    /// Any other type: rendered at the call site, one string per placeholder
    /// that formats it (the slow path).
    Rendered = 18,
}

impl ArgKind {
    /// The kind with this on-disk number.
    pub fn from_u8(v: u8) -> Option<ArgKind> {
        use ArgKind::*;
        Some(match v {
            1 => U8,
            2 => U16,
            3 => U32,
            4 => U64,
            5 => U128,
            6 => Usize,
            7 => I8,
            8 => I16,
            9 => I32,
            10 => I64,
            11 => I128,
            12 => Isize,
            13 => F32,
            14 => F64,
            15 => Bool,
            16 => Char,
            17 => Str,
            18 => Rendered,
            _ => return None,
        })
    }

    /// Bytes of the raw value in a staging ring (strings: excluding their bytes).
    pub fn ring_width(self) -> usize {
        use ArgKind::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | Char | F32 | Str => 4,
            U64 | I64 | Usize | Isize | F64 => 8,
            U128 | I128 => 16,
            Rendered => 0,
        }
    }

    /// Whether it is a signed integer type.
    pub fn is_signed(self) -> bool {
        use ArgKind::*;
        matches!(self, I8 | I16 | I32 | I64 | I128 | Isize)
    }

    /// The Rust type name, for `nanolog info`.
    pub fn name(self) -> &'static str {
        use ArgKind::*;
        match self {
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            U128 => "u128",
            Usize => "usize",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            I128 => "i128",
            Isize => "isize",
            F32 => "f32",
            F64 => "f64",
            Bool => "bool",
            Char => "char",
            Str => "str",
            Rendered => "rendered",
        }
    }
}
