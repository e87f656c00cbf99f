//! Records from other logging APIs (`log`, `tracing`): they have no static
//! call site, so one is interned per distinct call (level, target, file,
//! line, module and the fields' names and kinds) on first sight, leaked for
//! the life of the process like a macro's static. The dictionary stays as
//! small as the program's set of call sites, `nanolog stats` groups bridge
//! records per site, and the site caches its filter state as a macro's does.
//!
//! Their messages are formatted on the calling thread (the slow path).

#[cfg(feature = "log")]
pub(crate) mod log;
#[cfg(feature = "tracing")]
pub(crate) mod tracing;

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{PoisonError, RwLock};

use crate::encode::{Encode, SlotWriter};
use crate::level::Level;
use crate::producer;
use crate::site::{Align, ArgKind, Count, Piece, Site, Spec, Ty};

/// One value of a bridge record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    I64(i64),
    U64(u64),
    I128(i128),
    U128(u128),
    F64(f64),
    Bool(bool),
    Str(&'a str),
}

impl Arg<'_> {
    fn kind(&self) -> ArgKind {
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

    fn ring_len(&self) -> usize {
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

    fn write<'w>(&self, c: SlotWriter<'w>) -> SlotWriter<'w> {
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

    fn matches(&self, s: &Interned) -> bool {
        let site = s.site;
        site.level == self.level
            && site.target == self.target
            && site.file == self.file
            && site.line == self.line
            && site.module == self.module
            && s.message == self.message
            && *s.fields == *self.fields
    }

    /// A site for this key, leaked: `"{} k=v..."` over the message and the
    /// fields, which render as `key=value` after it.
    fn leak(&self) -> Interned {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        let arg = |i: usize| {
            Piece::Arg(Spec {
                arg: i as u16,
                use_ix: 0,
                fill: ' ',
                align: Align::Unknown,
                flags: 0,
                width: Count::Implied,
                precision: Count::Implied,
                ty: Ty::Display,
            })
        };
        let mut pieces = Vec::new();
        let mut names: Vec<&'static str> = Vec::new();
        let mut format = String::new();
        if self.message {
            pieces.push(arg(0));
            names.push("");
            format.push_str("{}");
        }
        for (name, _) in self.fields {
            let sep = if format.is_empty() { "" } else { " " };
            pieces.push(Piece::Lit(Cow::Owned(format!("{sep}{name}="))));
            pieces.push(arg(names.len()));
            names.push(leak(name));
            // `{name}` as the format shows it; braces cannot occur in a
            // Rust identifier, but a field name may be any string.
            format.push_str(&format!("{sep}{name}={{{}}}", name.replace(['{', '}'], "")));
        }
        let fields: Vec<(&'static str, ArgKind)> = self
            .fields
            .iter()
            .zip(names.iter().skip(usize::from(self.message)))
            .map(|((_, k), n)| (*n, *k))
            .collect();
        let site = Site::new(
            self.level,
            leak(self.target),
            leak(self.file),
            self.line,
            leak(self.module),
            leak(&format),
            Vec::leak(pieces),
            Vec::leak(names),
        );
        Interned {
            site: Box::leak(Box::new(site)),
            fields: fields.into_boxed_slice(),
            message: self.message,
        }
    }
}

#[derive(Debug)]
struct Interned {
    site: &'static Site,
    fields: Box<[(&'static str, ArgKind)]>,
    message: bool,
}

/// Interned sites by the hash of their key.
static SITES: RwLock<Option<HashMap<u64, Vec<Interned>>>> = RwLock::new(None);

/// The site of `key`, interned on first sight.
pub(crate) fn site(key: &Key<'_>) -> &'static Site {
    let h = key.hash64();
    {
        let map = SITES.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = map
            .as_ref()
            .and_then(|m| m.get(&h))
            .and_then(|v| v.iter().find(|s| key.matches(s)))
        {
            return s.site;
        }
    }
    let mut map = SITES.write().unwrap_or_else(PoisonError::into_inner);
    let bucket = map.get_or_insert_with(HashMap::new).entry(h).or_default();
    if let Some(s) = bucket.iter().find(|s| key.matches(s)) {
        return s.site;
    }
    let s = key.leak();
    let site = s.site;
    bucket.push(s);
    site
}

/// Logs one bridge record of `site` with `args` (the message first, if the
/// site has one, then the fields in the key's order).
pub(crate) fn log(site: &'static Site, args: &[Arg<'_>]) {
    let mut kinds = [ArgKind::Str; 16];
    let kinds: Cow<'_, [ArgKind]> = if args.len() <= kinds.len() {
        for (k, a) in kinds.iter_mut().zip(args) {
            *k = a.kind();
        }
        Cow::Borrowed(&kinds[..args.len()])
    } else {
        Cow::Owned(args.iter().map(Arg::kind).collect())
    };
    let id = site.id_dyn(&kinds);
    let len = args.iter().map(Arg::ring_len).sum();
    producer::log_id(id, len, |mut c| {
        for a in args {
            c = a.write(c);
        }
    });
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
        assert_eq!(a.format, "{} user={user} n={n}");
        assert_eq!(a.names, ["", "user", "n"]);
        let other = site(&Key { line: 10, ..key });
        assert!(!std::ptr::eq(a, other));
    }
}
