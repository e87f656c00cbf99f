//! Call-site descriptors: what the macro emits once per call site, and the
//! process-wide table that gives each site a small id on its first call.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::filter;
use crate::level::Level;
use crate::wire::compact::CompactFn;

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

/// The static descriptor of one call site, emitted by the logging macros
/// (or interned once per distinct call by a bridge).
#[derive(Debug)]
pub struct Site {
    /// The call's level.
    pub level: Level,
    /// The call's target: its module path unless given (`target: "audit"`).
    pub target: &'static str,
    /// The source file of the call.
    pub file: &'static str,
    /// The line of the call.
    pub line: u32,
    /// The module path of the call.
    pub module: &'static str,
    /// The format string, as written.
    pub format: &'static str,
    /// The format string, parsed at compile time.
    pub pieces: &'static [Piece],
    /// Each argument's name, in argument order (`""` for a positional one).
    pub names: &'static [&'static str],
    /// Whether calls are enabled (`filter::{DISABLED, UNDECIDED, ENABLED}`).
    interest: AtomicU8,
    /// 0 until the first call registers the site.
    id: AtomicU32,
}

impl Site {
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        level: Level,
        target: &'static str,
        file: &'static str,
        line: u32,
        module: &'static str,
        format: &'static str,
        pieces: &'static [Piece],
        names: &'static [&'static str],
    ) -> Site {
        Site {
            level,
            target,
            file,
            line,
            module,
            format,
            pieces,
            names,
            interest: AtomicU8::new(filter::UNDECIDED),
            id: AtomicU32::new(0),
        }
    }

    /// The sites of a `log!(level, ...)` call: one per level, indexed by the
    /// level's discriminant (`Level::ALL[i] as usize == i`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn per_level(
        target: &'static str,
        file: &'static str,
        line: u32,
        module: &'static str,
        format: &'static str,
        pieces: &'static [Piece],
        names: &'static [&'static str],
    ) -> [Site; Level::ALL.len()] {
        let [l0, l1, l2, l3, l4] = Level::ALL;
        [
            Site::new(l0, target, file, line, module, format, pieces, names),
            Site::new(l1, target, file, line, module, format, pieces, names),
            Site::new(l2, target, file, line, module, format, pieces, names),
            Site::new(l3, target, file, line, module, format, pieces, names),
            Site::new(l4, target, file, line, module, format, pieces, names),
        ]
    }

    /// Whether this call site is enabled now: one relaxed load and a test
    /// when disabled, decided on the site's first call (and again whenever
    /// the filter changes).
    #[inline(always)]
    pub fn enabled(&'static self) -> bool {
        // Relaxed: the state is advisory, as a level is in every logger; a
        // call racing a change of filter may go either way. What a record
        // needs published (its registration) is ordered by `id`.
        let i = self.interest.load(Ordering::Relaxed);
        if i == filter::DISABLED {
            return false;
        }
        i == filter::ENABLED || filter::decide(self)
    }

    pub(crate) fn interest(&self) -> u8 {
        self.interest.load(Ordering::Relaxed)
    }

    pub(crate) fn set_interest(&self, i: u8) {
        self.interest.store(i, Ordering::Relaxed);
    }

    /// The site's id, registering it on the first call.
    #[inline(always)]
    pub(crate) fn id<const N: usize>(
        &'static self,
        kinds: impl FnOnce() -> ([ArgKind; N], CompactFn),
    ) -> u32 {
        // Acquire pairs with the Release store in `register`: a thread that sees
        // the id also sees the table entry, so the flusher, which synchronizes
        // with this thread through the ring, finds it.
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        let (kinds, compact) = kinds();
        register(self, &kinds, Some(compact))
    }

    /// The id of a site whose argument kinds are known only at run time (a
    /// bridge's); registers it on its first call.
    #[cfg_attr(not(any(feature = "log", feature = "tracing")), allow(dead_code))]
    pub(crate) fn id_dyn(&'static self, kinds: &[ArgKind]) -> u32 {
        // Acquire: as in `id`.
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        register(self, kinds, None)
    }
}

/// A registered site: the static descriptor and its argument kinds.
#[derive(Debug)]
pub struct Registration {
    pub site: &'static Site,
    pub kinds: Box<[ArgKind]>,
    /// The site's own compaction (macro sites), else the flusher interprets
    /// `kinds` (bridge sites).
    pub compact: Option<CompactFn>,
}

/// Site id -> descriptor; index 0 unused. Append-only for the life of the process.
static TABLE: Mutex<Vec<Option<Arc<Registration>>>> = Mutex::new(Vec::new());

#[cold]
#[inline(never)]
fn register(site: &'static Site, kinds: &[ArgKind], compact: Option<CompactFn>) -> u32 {
    let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    let id = site.id.load(Ordering::Relaxed);
    if id != 0 {
        return id;
    }
    if table.is_empty() {
        table.push(None);
    }
    table.push(Some(Arc::new(Registration {
        site,
        kinds: kinds.into(),
        compact,
    })));
    let id = (table.len() - 1) as u32;
    site.id.store(id, Ordering::Release);
    id
}

/// The descriptor of a registered site.
pub(crate) fn lookup(id: u32) -> Option<Arc<Registration>> {
    let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    table.get(id as usize).cloned().flatten()
}
