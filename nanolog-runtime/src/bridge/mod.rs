//! Records from other logging APIs (`log`, `tracing`): they have no static
//! call site, so one is interned per distinct call (level, target, file,
//! line, module and the fields' names and kinds) on first sight, leaked for
//! the life of the process like a macro's static. The dictionary stays as
//! small as the program's set of call sites, `nanolog stats` groups bridge
//! records per site, and the site caches its filter state as a macro's does.
//!
//! Their messages are formatted on the calling thread (the slow path).
//!
//! A program that makes targets or field sets at run time would grow the
//! table and the dictionary without bound: past [`MAX_SITES`] interned
//! sites, a new call's records go to its level's overflow site instead,
//! with their message, fields and target as text (`Stats::overflow`
//! counts them), and nothing more is interned.

#[cfg(feature = "log")]
pub(crate) mod log;
pub(crate) mod template;
#[cfg(feature = "tracing")]
pub(crate) mod tracing;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{PoisonError, RwLock};

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::encode::{Encode, SlotWriter};
use crate::level::Level;
use crate::producer;
use crate::site::Site;
use crate::wire::format::{ArgKind, Piece, Spec};

/// One value of a bridge record; `S` is `&str` when written, `String` while
/// a `tracing` event's fields are collected.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<S> {
    I64(i64),
    U64(u64),
    I128(i128),
    U128(u128),
    F64(f64),
    Bool(bool),
    Str(S),
}

impl<S: AsRef<str>> Arg<S> {
    /// The borrowed form, for writing.
    pub(crate) fn as_str_arg(&self) -> Arg<&str> {
        match self {
            Arg::I64(v) => Arg::I64(*v),
            Arg::U64(v) => Arg::U64(*v),
            Arg::I128(v) => Arg::I128(*v),
            Arg::U128(v) => Arg::U128(*v),
            Arg::F64(v) => Arg::F64(*v),
            Arg::Bool(v) => Arg::Bool(*v),
            Arg::Str(s) => Arg::Str(s.as_ref()),
        }
    }

    /// Hands `put` the value's bytes as the ring holds them (as its
    /// `Encode` writes it: little-endian at its width; a string's u32
    /// length, then its bytes).
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn encode_with(&self, mut put: impl FnMut(&[u8])) {
        match self {
            Arg::I64(v) => put(&v.to_le_bytes()),
            Arg::U64(v) => put(&v.to_le_bytes()),
            Arg::I128(v) => put(&v.to_le_bytes()),
            Arg::U128(v) => put(&v.to_le_bytes()),
            Arg::F64(v) => put(&v.to_le_bytes()),
            Arg::Bool(v) => put(&[u8::from(*v)]),
            Arg::Str(s) => {
                let s = s.as_ref();
                // As `&str` encodes itself: one longer than a u32 counts is
                // longer than any ring, and dropped as oversize.
                put(&(s.len() as u32).to_le_bytes());
                put(s.as_bytes());
            }
        }
    }
}

impl<S> Arg<S> {
    pub(crate) fn kind(&self) -> ArgKind {
        match self {
            Arg::I64(_) => ArgKind::I64,
            Arg::U64(_) => ArgKind::U64,
            Arg::I128(_) => ArgKind::I128,
            Arg::U128(_) => ArgKind::U128,
            Arg::F64(_) => ArgKind::F64,
            Arg::Bool(_) => ArgKind::Bool,
            Arg::Str(_) => ArgKind::Str,
        }
    }
}

impl<S: AsRef<str>> fmt::Display for Arg<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::I64(v) => v.fmt(f),
            Arg::U64(v) => v.fmt(f),
            Arg::I128(v) => v.fmt(f),
            Arg::U128(v) => v.fmt(f),
            Arg::F64(v) => v.fmt(f),
            Arg::Bool(v) => v.fmt(f),
            Arg::Str(s) => f.write_str(s.as_ref()),
        }
    }
}

impl Arg<&str> {
    pub(crate) fn ring_len(&self) -> usize {
        match self {
            Arg::I64(v) => v.ring_len(),
            Arg::U64(v) => v.ring_len(),
            Arg::I128(v) => v.ring_len(),
            Arg::U128(v) => v.ring_len(),
            Arg::F64(v) => v.ring_len(),
            Arg::Bool(v) => v.ring_len(),
            Arg::Str(v) => v.ring_len(),
        }
    }

    pub(crate) fn write<'w>(&self, c: SlotWriter<'w>) -> SlotWriter<'w> {
        match self {
            Arg::I64(v) => v.write(c),
            Arg::U64(v) => v.write(c),
            Arg::I128(v) => v.write(c),
            Arg::U128(v) => v.write(c),
            Arg::F64(v) => v.write(c),
            Arg::Bool(v) => v.write(c),
            Arg::Str(v) => v.write(c),
        }
    }
}

/// What identifies a bridge call site.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'a> {
    pub(crate) level: Level,
    pub(crate) target: &'a str,
    pub(crate) file: &'a str,
    pub(crate) line: u32,
    pub(crate) module: &'a str,
    /// The fields after the message, by name; the message (if any) is the
    /// first argument and has no name.
    pub(crate) fields: &'a [(&'a str, ArgKind)],
    /// Whether the record has a message argument.
    pub(crate) message: bool,
}

impl Key<'_> {
    fn hash64(&self) -> u64 {
        let mut h = DefaultHasher::new();
        (self.level, self.target, self.file, self.line, self.module).hash(&mut h);
        self.fields.hash(&mut h);
        self.message.hash(&mut h);
        h.finish()
    }

    /// A cheap slot for the per-thread cache: where the key's strings are
    /// (a macro's are static, so one call site always lands on one slot).
    fn slot(&self) -> usize {
        let h = (self.file.as_ptr() as usize)
            .wrapping_mul(31)
            .wrapping_add(self.target.as_ptr() as usize)
            .wrapping_mul(31)
            .wrapping_add(self.line as usize)
            .wrapping_mul(31)
            .wrapping_add(self.level as usize + self.fields.len());
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> 20) % RECENT_SLOTS
    }

    fn matches(&self, s: &Interned) -> bool {
        let site = s.site;
        site.level == self.level
            && site.line == self.line
            && site.file == self.file
            && site.target == self.target
            && site.module == self.module
            && s.message == self.message
            && *s.fields == *self.fields
    }

    /// A site for this key, leaked: `"{} k=v..."` over the message and the
    /// fields, which render as `key=value` after it.
    fn leak(&self) -> &'static Interned {
        Box::leak(Box::new(self.leak_interned()))
    }

    fn leak_interned(&self) -> Interned {
        self.leak_with(if self.message {
            Head::Message
        } else {
            Head::None
        })
    }

    /// The site of this key's fields after `head`, leaked: `head k=v ..`.
    pub(crate) fn leak_with(&self, head: Head<'_>) -> Interned {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        let mut pieces = Vec::new();
        let mut names: Vec<&'static str> = Vec::new();
        let mut kinds = Vec::new();
        let mut format = String::new();
        match head {
            Head::None => {}
            Head::Message => {
                pieces.push(Piece::Arg(Spec::display(0)));
                names.push("");
                kinds.push(ArgKind::Str);
                format.push_str("{}");
            }
            Head::Text(t) => {
                pieces.push(Piece::Lit(Cow::Owned(t.to_owned())));
                format.push_str(&t.replace('{', "{{").replace('}', "}}"));
            }
            Head::Template(items) => {
                for it in items {
                    match it {
                        template::Item::Lit(t) => {
                            pieces.push(Piece::Lit(Cow::Owned(t.to_string())))
                        }
                        template::Item::Gap(kind) => {
                            pieces.push(Piece::Arg(Spec::display(names.len() as u16)));
                            names.push("");
                            kinds.push(*kind);
                        }
                    }
                }
                format.push_str(&template::format_of(items));
            }
        }
        let message_pieces = pieces.len();
        let mut fields = Vec::with_capacity(self.fields.len());
        for &(name, kind) in self.fields {
            let sep = if format.is_empty() { "" } else { " " };
            pieces.push(Piece::Lit(Cow::Owned(format!("{sep}{name}="))));
            pieces.push(Piece::Arg(Spec::display(names.len() as u16)));
            let name = leak(name);
            names.push(name);
            kinds.push(kind);
            fields.push((name, kind));
            // `{name}` as the format shows it; braces cannot occur in a
            // Rust identifier, but a field name may be any string.
            format.push_str(&format!("{sep}{name}={{{}}}", name.replace(['{', '}'], "")));
        }
        let mut site = Site::new(
            self.level,
            leak(self.target),
            leak(self.file),
            self.line,
            leak(self.module),
            leak(&format),
            Vec::leak(pieces),
            Vec::leak(names),
        );
        site.message_pieces = message_pieces;
        Interned {
            site: Box::leak(Box::new(site)),
            kinds: kinds.into_boxed_slice(),
            fields: fields.into_boxed_slice(),
            message: matches!(head, Head::Message),
            overflow: false,
            learnt: template::Learnt::new(),
        }
    }
}

/// What a bridge site's text begins with, before its fields.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Head<'a> {
    /// Nothing: the fields alone.
    None,
    /// The record's message, its first argument.
    Message,
    /// Literal text, the same for every record (a typed `tracing` event's
    /// constant message).
    Text(&'a str),
    /// A message's template: literal text and gaps, each gap an argument.
    Template(&'a [template::Item]),
}

/// A bridge call site, interned for the life of the process.
#[derive(Debug)]
pub(crate) struct Interned {
    pub(crate) site: &'static Site,
    /// Its argument kinds, in order (the message first).
    kinds: Box<[ArgKind]>,
    fields: Box<[(&'static str, ArgKind)]>,
    message: bool,
    /// A level's overflow site: takes any call's record as text.
    overflow: bool,
    /// The templates learnt of its messages (a site with a message).
    learnt: template::Learnt,
}

impl Interned {
    /// Whether a record of `key` at this site passes the filter: the
    /// site's cached decision, or for an overflow site the filter's answer
    /// for the call's own level and target.
    pub(crate) fn enabled(&self, key: &Key<'_>) -> bool {
        if self.overflow {
            crate::filter::enabled(key.level, key.target)
        } else {
            self.site.enabled()
        }
    }
}

/// The most bridge call sites interned in a process. Past it, records of
/// new calls go to their level's overflow site (see the module's doc).
pub const MAX_SITES: usize = 16_384;

/// Bridge sites interned so far (written under the `SITES` write lock;
/// Relaxed: a stale read only takes the lock to find the cap reached).
static INTERNED: AtomicUsize = AtomicUsize::new(0);

/// A level's overflow site: `"{} target={}"`, the call's message and
/// fields as text, then its target.
fn overflow_site(level: Level) -> &'static Interned {
    static SITES: [std::sync::OnceLock<&'static Interned>; 5] =
        [const { std::sync::OnceLock::new() }; 5];
    SITES[level as usize].get_or_init(|| {
        let key = Key {
            level,
            target: "nanolog::overflow",
            file: "<bridge sites past the cap>",
            line: 0,
            module: "nanolog::overflow",
            fields: &[("target", ArgKind::Str)],
            message: true,
        };
        let mut s = key.leak_interned();
        s.overflow = true;
        Box::leak(Box::new(s))
    })
}

/// Interned sites by the hash of their key.
static SITES: RwLock<Option<HashMap<u64, Vec<&'static Interned>>>> = RwLock::new(None);

const RECENT_SLOTS: usize = 64;

thread_local! {
    /// The calling thread's recently used sites, so a bridge call seen
    /// before costs a few compares, not a hash of its strings and a lock.
    static RECENT: RefCell<[Option<&'static Interned>; RECENT_SLOTS]> =
        const { RefCell::new([None; RECENT_SLOTS]) };
}

/// The site of `key`, interned on first sight: from the thread's cache when
/// the same call was seen (checked by content, so a reused string buffer
/// cannot alias), else from the process-wide table.
pub(crate) fn site(key: &Key<'_>) -> &'static Interned {
    let slot = key.slot();
    let cached = RECENT
        .try_with(|r| r.try_borrow().ok().and_then(|r| r[slot]))
        .ok()
        .flatten()
        .filter(|s| key.matches(s));
    if let Some(s) = cached {
        return s;
    }
    let s = intern(key);
    let _ = RECENT.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r[slot] = Some(s);
        }
    });
    s
}

fn intern(key: &Key<'_>) -> &'static Interned {
    let h = key.hash64();
    {
        let map = SITES.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(&s) = map
            .as_ref()
            .and_then(|m| m.get(&h))
            .and_then(|v| v.iter().find(|s| key.matches(s)))
        {
            return s;
        }
    }
    // Past the cap nothing more is interned: no write lock for that.
    if INTERNED.load(Ordering::Relaxed) >= MAX_SITES {
        return overflow_site(key.level);
    }
    let mut map = SITES.write().unwrap_or_else(PoisonError::into_inner);
    let bucket = map.get_or_insert_with(HashMap::new).entry(h).or_default();
    if let Some(&s) = bucket.iter().find(|s| key.matches(s)) {
        return s;
    }
    // Relaxed: read and written only under the write lock.
    if INTERNED.load(Ordering::Relaxed) >= MAX_SITES {
        return overflow_site(key.level);
    }
    INTERNED.fetch_add(1, Ordering::Relaxed);
    let s = key.leak();
    bucket.push(s);
    s
}

/// The site of a template of `key`'s messages (`key` without its message:
/// the gaps, then the key's fields), leaked; `None` past the sites' cap.
fn intern_template(key: &Key<'_>, items: &[template::Item]) -> Option<&'static Interned> {
    // Under the write lock, as every site interned is counted.
    let _map = SITES.write().unwrap_or_else(PoisonError::into_inner);
    // Relaxed: read and written only under the write lock.
    if INTERNED.load(Ordering::Relaxed) >= MAX_SITES {
        return None;
    }
    INTERNED.fetch_add(1, Ordering::Relaxed);
    Some(Box::leak(Box::new(key.leak_with(Head::Template(items)))))
}

/// Logs one bridge record of `key` at `site` with `args` (the message
/// first, if the key has one, then the fields in the key's order).
pub(crate) fn write_record(site: &'static Interned, key: &Key<'_>, args: &[Arg<&str>]) {
    if site.overflow {
        return log_overflow(site, key, args);
    }
    debug_assert!(args.iter().map(Arg::kind).eq(site.kinds.iter().copied()));
    let id = site.site.id_dyn(&site.kinds);
    let len = args.iter().map(Arg::ring_len).sum();
    producer::log_id(id, len, |mut c| {
        for a in args {
            c = a.write(c);
        }
    });
}

/// A record of a call past the cap: its message and fields as text, and
/// its target, at its level's overflow site.
#[cold]
fn log_overflow(site: &'static Interned, key: &Key<'_>, args: &[Arg<&str>]) {
    use std::fmt::Write as _;
    let mut text = String::new();
    let mut rest = args.iter();
    if key.message {
        if let Some(m) = rest.next() {
            let _ = write!(text, "{m}");
        }
    }
    for ((name, _), v) in key.fields.iter().zip(rest) {
        let sep = if text.is_empty() { "" } else { " " };
        let _ = write!(text, "{sep}{name}={v}");
    }
    crate::channel::BRIDGE_OVERFLOW.fetch_add(1, Ordering::Relaxed);
    let args = [Arg::Str(text.as_str()), Arg::Str(key.target)];
    let id = site.site.id_dyn(&site.kinds);
    let len = args.iter().map(Arg::ring_len).sum();
    producer::log_id(id, len, |mut c| {
        for a in &args {
            c = a.write(c);
        }
    });
}

/// What identifies a bridge span's site: its callsite and its fields'
/// names and kinds, and which fields show by `Debug` (typed values, as
/// tracing-subscriber's fmt shows them: `user="ann"`, `ratio=1.0`) rather
/// than as the text they were given as (a `?debug` or `%display` value).
#[cfg(feature = "tracing")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SpanKey {
    /// The callsite's identity (its metadata's address).
    pub(crate) callsite: usize,
    pub(crate) fields: Vec<(&'static str, ArgKind, bool)>,
    /// Its trace context follows the fields (see [`CONTEXT_ARGS`]).
    pub(crate) traced: bool,
}

/// A traced span's trace context, after its fields and before its key, as
/// the ring holds them: `trace_id` (32 lowercase hex digits), `span_id`
/// (16), `trace_flags` (a `u8`). No piece renders them: text shows a
/// traced span as it shows it untraced.
#[cfg(feature = "tracing")]
pub(crate) const CONTEXT_ARGS: [(&str, ArgKind); 3] = [
    ("trace_id", ArgKind::Str),
    ("span_id", ArgKind::Str),
    ("trace_flags", ArgKind::U8),
];

/// A span site's fields: name, kind, and whether it shows by `Debug` (see
/// [`SpanKey`]), made once per site and kept for the process.
#[cfg(feature = "tracing")]
pub(crate) type Shape = &'static [(&'static str, ArgKind, bool)];

/// The site of a bridge span, interned on first sight, and its fields'
/// shape; `None` past the cap (the span is then not recorded: its records
/// still are).
#[cfg(feature = "tracing")]
pub(crate) fn span_site(
    key: &SpanKey,
    name: &'static str,
    target: &'static str,
    file: &'static str,
    line: u32,
    module: &'static str,
) -> Option<(u32, Shape)> {
    type Spans = HashMap<SpanKey, (u32, Shape)>;
    static SPANS: std::sync::Mutex<Option<Spans>> = std::sync::Mutex::new(None);
    let mut map = SPANS.lock().unwrap_or_else(PoisonError::into_inner);
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&found) = map.get(key) {
        return Some(found);
    }
    // Counted against the bridge sites' cap (Relaxed: under the lock).
    if INTERNED.load(Ordering::Relaxed) >= MAX_SITES {
        crate::channel::BRIDGE_OVERFLOW.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    INTERNED.fetch_add(1, Ordering::Relaxed);
    let mut pieces = vec![Piece::Lit(Cow::Borrowed(name))];
    let mut names: Vec<&'static str> = Vec::new();
    let mut kinds = Vec::new();
    for (i, &(field, kind, quoted)) in key.fields.iter().enumerate() {
        let open = if i == 0 { "{" } else { " " };
        pieces.push(Piece::Lit(Cow::Owned(format!("{open}{field}="))));
        let mut spec = Spec::display(i as u16);
        if quoted {
            spec.ty = crate::wire::format::Ty::Debug;
        }
        pieces.push(Piece::Arg(spec));
        names.push(field);
        kinds.push(kind);
    }
    if !key.fields.is_empty() {
        pieces.push(Piece::Lit(Cow::Borrowed("}")));
    }
    if key.traced {
        for (name, kind) in CONTEXT_ARGS {
            names.push(name);
            kinds.push(kind);
        }
    }
    // The key last, unnamed.
    names.push("");
    kinds.push(ArgKind::U64);
    let mut site = Site::span(
        name,
        target,
        file,
        line,
        module,
        Vec::leak(pieces),
        Vec::leak(names),
    );
    if key.traced {
        site.context_args = CONTEXT_ARGS.len();
    }
    let site: &'static Site = Box::leak(Box::new(site));
    let id = site.id_dyn(&kinds);
    let shape: Shape = Vec::leak(key.fields.clone());
    map.insert(key.clone(), (id, shape));
    Some((id, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_interns_once_and_renders_fields_as_key_value() {
        let fields = [("user", ArgKind::Str), ("n", ArgKind::I64)];
        let key = Key {
            level: Level::Info,
            target: "svc::db",
            file: "src/db.rs",
            line: 9,
            module: "svc::db",
            fields: &fields,
            message: true,
        };
        let a = site(&key);
        let b = site(&key);
        assert!(std::ptr::eq(a, b));
        assert_eq!(a.site.format, "{} user={user} n={n}");
        assert_eq!(a.site.names, ["", "user", "n"]);
        assert_eq!(*a.kinds, [ArgKind::Str, ArgKind::Str, ArgKind::I64]);
        let other = site(&Key { line: 10, ..key });
        assert!(!std::ptr::eq(a, other));
        // The same call from another thread finds the same site (the
        // per-thread caches front one table).
        let from_other = std::thread::scope(|t| t.spawn(|| site(&key) as *const _ as usize).join());
        assert_eq!(from_other.unwrap(), a as *const _ as usize);
    }
}
