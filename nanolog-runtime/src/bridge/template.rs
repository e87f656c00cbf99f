//! Messages formatted at the call (a `log` record's, a `tracing` event's
//! whose text varies), written as a template of their call site and the
//! text of its gaps, not as one string.
//!
//! A `log` call hands over its message as `fmt::Arguments`: formatting it
//! writes the format string's literal pieces and each argument's text, one
//! `write_str` after another. The literal pieces are the same call after
//! call; the arguments' texts differ. A call site's template is learnt from
//! its calls: the writes two calls share (in order, by content) are its
//! literal text, and what lies between them its gaps (`{}`). A record is
//! then written at the template's site with its gaps as arguments: a gap
//! whose text is a decimal integer as `u64`/`i64` prints (typed, and a few
//! bytes), any other gap as a string (which the flusher interns when it
//! repeats). `decode` prints exactly the text the call made, `stats` groups
//! the records by template, and JSON shows the template as `fmt` and the
//! gaps as `args`.
//!
//! Learning is per call site and bounded: a call that does not fit the
//! site's template (another literal, or a non-number in a number's gap)
//! makes a new template of the two, at most [`MAX_TEMPLATES`] times a site;
//! a message of more than [`MAX_WRITES`] writes (a large `Debug`), or longer
//! than [`MAX_TEXT`], is written as its text. Whatever the template, the text is the template's literals
//! and the gaps in order, so a template learnt wrongly costs bytes, never
//! the message.

use std::fmt;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use smallvec::SmallVec;

use super::{Arg, Interned, Key};
use crate::wire::format::ArgKind;

/// The most templates learnt for one call site (its first sighting
/// included); past it, calls that do not fit the last are written as text.
pub(crate) const MAX_TEMPLATES: u32 = 16;

/// The most writes a message is matched in; one of more is written as text.
pub(crate) const MAX_WRITES: usize = 64;

/// The longest message learnt from or matched; a longer one is written as
/// text (a template keeps its first call's text: a site's templates hold at
/// most [`MAX_TEMPLATES`] times this).
pub(crate) const MAX_TEXT: usize = 4096;

/// A message as its formatting wrote it: the text, and where each
/// (non-empty) write ended.
#[derive(Default)]
pub(crate) struct Pieces {
    pub(crate) text: String,
    ends: SmallVec<[u32; 16]>,
}

impl Pieces {
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// The message `text`, as one write.
    pub(crate) fn set(&mut self, text: &str) {
        self.clear();
        let _ = fmt::Write::write_str(self, text);
    }

    /// Formats `value` into this (cleared first); a `Display` or `Debug`
    /// impl that panics leaves `panicked` as the whole message.
    pub(crate) fn format(&mut self, value: impl FnOnce(&mut Self) -> fmt::Result, panicked: &str) {
        self.clear();
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| value(&mut *self)));
        if ok.is_err() {
            self.set(panicked);
        }
    }

    /// The writes, in order.
    fn writes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let w = (start, e as usize);
            start = e as usize;
            w
        })
    }

    fn write_count(&self) -> usize {
        self.ends.len()
    }
}

impl fmt::Write for Pieces {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if !s.is_empty() {
            self.text.push_str(s);
            // A message longer than 4 GiB is longer than any ring: it is
            // dropped as oversize whatever its ends say.
            self.ends.push(self.text.len() as u32);
        }
        Ok(())
    }
}

/// One part of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// Text every call of the template writes.
    Lit(Box<str>),
    /// A call's own text: `U64` or `I64` when it is a decimal integer as
    /// those print it, else `Str`.
    Gap(ArgKind),
}

/// A template of a call site: its parts, and the site its records are
/// written at (made when the first record fits it).
pub(crate) struct Template {
    items: Box<[Item]>,
    site: OnceLock<Option<&'static Interned>>,
}

/// What a call site has learnt: its current template (null before its
/// first call), and how many it has made.
pub(crate) struct Learnt {
    current: AtomicPtr<Template>,
    made: AtomicU32,
}

impl Learnt {
    pub(crate) const fn new() -> Learnt {
        Learnt {
            current: AtomicPtr::new(std::ptr::null_mut()),
            made: AtomicU32::new(0),
        }
    }

    fn current(&self) -> Option<&'static Template> {
        // Acquire: pairs with the Release store that published the
        // template, so its items are seen whole.
        let t = self.current.load(Ordering::Acquire);
        // SAFETY: a non-null pointer here was made by `Box::leak` of a
        // whole `Template` (in `learn`) and is never freed or written
        // after it is published.
        unsafe { t.as_ref() }
    }
}

impl fmt::Debug for Learnt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Learnt")
            .field("made", &self.made.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Serialises learning (a cold path: a site's first calls, and those that
/// do not fit), so two threads do not both make a template of one site.
static LEARNING: Mutex<()> = Mutex::new(());

/// The gaps of a call fitted to a template, as the record's arguments.
type Gaps<'m> = SmallVec<[Arg<&'m str>; 8]>;

/// Logs a record of `key` whose message is `message`, with `fields` after
/// it: at the template site of `site` (the key's site, with the message as
/// its first argument) the message fits, else as text at `site`.
pub(crate) fn log_message(
    site: &'static Interned,
    key: &Key<'_>,
    message: &Pieces,
    fields: &[Arg<&str>],
) {
    if let Some(done) = fitted(site, key, message, fields) {
        return done;
    }
    let mut args: SmallVec<[Arg<&str>; 8]> = SmallVec::with_capacity(fields.len() + 1);
    args.push(Arg::Str(&message.text));
    args.extend_from_slice(fields);
    super::write_record(site, key, &args);
}

/// Writes the record at a template's site: `None` (nothing written) when
/// the message fits none.
fn fitted(
    site: &'static Interned,
    key: &Key<'_>,
    message: &Pieces,
    fields: &[Arg<&str>],
) -> Option<()> {
    if site.overflow || message.write_count() > MAX_WRITES || message.text.len() > MAX_TEXT {
        return None;
    }
    let mut args = Gaps::new();
    let template = match site.learnt.current() {
        Some(t) if fit(&t.items, message, &mut args) => t,
        _ => learn(site, message, &mut args)?,
    };
    let tsite = (*template
        .site
        .get_or_init(|| super::intern_template(key, &template.items)))?;
    args.extend_from_slice(fields);
    super::write_record(tsite, key, &args);
    Some(())
}

/// Fits `message`'s writes to `items`: each literal must be one write of
/// the same text, in order; the writes between two literals are a gap's
/// text (empty if there are none). Fills `gaps` with the gaps' values;
/// `false` when the message does not fit (or a number's gap holds other
/// text).
fn fit<'m>(items: &[Item], message: &'m Pieces, gaps: &mut Gaps<'m>) -> bool {
    gaps.clear();
    let text = message.text.as_str();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut s = 0;
    // The gap being filled, if one is: its kind and where it starts.
    let mut open: Option<(ArgKind, usize)> = None;
    for &e in &message.ends {
        let e = e as usize;
        let Some(w) = bytes.get(s..e) else {
            return false;
        };
        if let Some(&Item::Gap(k)) = items.get(i) {
            open = Some((k, s));
            i += 1;
        }
        match items.get(i) {
            Some(Item::Lit(p)) if same(p.as_bytes(), w) => {
                if let Some((k, g)) = open.take() {
                    match text.get(g..s).and_then(|t| gap(k, t)) {
                        Some(v) => gaps.push(v),
                        None => return false,
                    }
                }
                i += 1;
            }
            _ if open.is_some() => {}
            _ => return false,
        }
        s = e;
    }
    if let Some(&Item::Gap(k)) = items.get(i) {
        open = Some((k, text.len()));
        i += 1;
    }
    if let Some((k, g)) = open {
        match text.get(g..).and_then(|t| gap(k, t)) {
            Some(v) => gaps.push(v),
            None => return false,
        }
    }
    i == items.len()
}

/// `a == b`, without a call for the short texts a format string's pieces
/// usually are (up to 16 bytes: two overlapping 8-byte words, or bytes).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |x: &[u8], at: usize| {
        x.get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
            .map(u64::from_ne_bytes)
    };
    match n {
        0..=7 => a.iter().zip(b).all(|(x, y)| x == y),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// A gap's value: a `u64` or `i64` exactly as it prints (no sign, no
/// leading zero), or any text for a string's.
fn gap(kind: ArgKind, text: &str) -> Option<Arg<&str>> {
    match kind {
        ArgKind::U64 => decimal(text.as_bytes()).map(Arg::U64),
        ArgKind::I64 => {
            let d = text.strip_prefix('-')?;
            let v = decimal(d.as_bytes())?;
            // Not "-0", and within i64 (its least is 2^63).
            (v != 0 && v <= 1 << 63).then(|| Arg::I64((v as i64).wrapping_neg()))
        }
        _ => Some(Arg::Str(text)),
    }
}

/// The `u64` whose digits, as it prints, are `d`.
#[inline]
fn decimal(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 20 || (d.len() > 1 && d[0] == b'0') {
        return None;
    }
    let mut v: u64 = 0;
    for &b in d {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(v)
}

/// Whether `text` is a gap of `kind`'s.
fn kind_fits(kind: ArgKind, text: &str) -> bool {
    gap(kind, text).is_some()
}

/// The kind of a gap that holds `text` in the call that made it.
fn kind_of(text: &str) -> ArgKind {
    if kind_fits(ArgKind::U64, text) {
        ArgKind::U64
    } else if kind_fits(ArgKind::I64, text) {
        ArgKind::I64
    } else {
        ArgKind::Str
    }
}

/// A call that fits no template yet: on a site's first call its writes are
/// kept as the first template (all literal, no site: the call is written as
/// text); on a later one a template of the two is made, published, and
/// returned if the call fits it.
#[cold]
#[inline(never)]
fn learn<'m>(
    site: &'static Interned,
    message: &'m Pieces,
    gaps: &mut Gaps<'m>,
) -> Option<&'static Template> {
    let learnt = &site.learnt;
    // Relaxed: a hint read before the lock; it is read again under it.
    if learnt.made.load(Ordering::Relaxed) >= MAX_TEMPLATES {
        return None;
    }
    let _one = LEARNING.lock().unwrap_or_else(PoisonError::into_inner);
    let now = learnt.current();
    // Another thread may have learnt one this call fits meanwhile.
    if let Some(t) = now.filter(|t| fit(&t.items, message, gaps)) {
        return Some(t);
    }
    // Relaxed: read and written only under `LEARNING`.
    let made = learnt.made.load(Ordering::Relaxed);
    if made >= MAX_TEMPLATES {
        return None;
    }
    learnt.made.store(made + 1, Ordering::Relaxed);
    let items = match now {
        None => {
            let first = message
                .writes()
                .map(|(a, b)| Item::Lit(message.text[a..b].into()))
                .collect();
            publish(learnt, first);
            return None;
        }
        Some(t) => merge(&t.items, message),
    };
    let t = publish(learnt, items);
    fit(&t.items, message, gaps).then_some(t)
}

fn publish(learnt: &Learnt, items: Box<[Item]>) -> &'static Template {
    let t: &'static Template = Box::leak(Box::new(Template {
        items,
        site: OnceLock::new(),
    }));
    // Release: the template's items are written before it is seen.
    learnt
        .current
        .store(t as *const Template as *mut Template, Ordering::Release);
    t
}

/// The template of `items` and a call that does not fit them: the longest
/// run of their literals that the call writes in order (by content) stays
/// literal, and wherever either side has anything else there is a gap.
fn merge(items: &[Item], message: &Pieces) -> Box<[Item]> {
    let writes: SmallVec<[&str; 16]> = message.writes().map(|(a, b)| &message.text[a..b]).collect();
    let pairs = common(items, &writes);
    let mut out = Vec::with_capacity(items.len() + 2);
    let (mut ti, mut wi) = (0, 0);
    let ends = pairs
        .iter()
        .copied()
        .chain(std::iter::once((items.len(), writes.len())));
    for (tj, wj) in ends {
        let theirs = &items[ti..tj];
        let ours = &writes[wi..wj];
        if !theirs.is_empty() || !ours.is_empty() {
            let text: String = ours.concat();
            let kind = if theirs.contains(&Item::Gap(ArgKind::Str)) {
                ArgKind::Str
            } else if let Some(Item::Gap(k)) = theirs.iter().find(|i| matches!(i, Item::Gap(_))) {
                if kind_fits(*k, &text) {
                    *k
                } else {
                    ArgKind::Str
                }
            } else {
                kind_of(&text)
            };
            out.push(Item::Gap(kind));
        }
        if let Some(lit) = items.get(tj) {
            out.push(lit.clone());
        }
        (ti, wi) = (tj + 1, wj + 1);
    }
    out.into_boxed_slice()
}

/// The longest common subsequence of `items`' literals and `writes` (equal
/// text), as (item index, write index) pairs in order.
fn common(items: &[Item], writes: &[&str]) -> Vec<(usize, usize)> {
    let (n, m) = (items.len(), writes.len());
    let same = |i: usize, j: usize| matches!(&items[i], Item::Lit(p) if **p == *writes[j]);
    // lcs[i][j]: the longest of items[i..] and writes[j..].
    let mut lcs = vec![0u16; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if same(i, j) {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if same(i, j) {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if lcs[at(i + 1, j)] >= lcs[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The format string of a template (literals with braces doubled, `{}`
/// for each gap) and its pieces.
pub(crate) fn format_of(items: &[Item]) -> String {
    let mut f = String::new();
    for it in items {
        match it {
            Item::Lit(t) => f.push_str(&t.replace('{', "{{").replace('}', "}}")),
            Item::Gap(_) => f.push_str("{}"),
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;
    // Literal arguments are folded into the format string by the compiler;
    // a program's are not.
    use std::hint::black_box as bb;

    fn pieces(args: fmt::Arguments<'_>) -> Pieces {
        let mut p = Pieces::default();
        let _ = p.write_fmt(args);
        p
    }

    /// The first sighting's template: every write literal.
    fn first(p: &Pieces) -> Box<[Item]> {
        p.writes()
            .map(|(s, e)| Item::Lit(p.text[s..e].into()))
            .collect()
    }

    /// The gaps' values as text.
    fn texts(gaps: &Gaps<'_>) -> Vec<String> {
        gaps.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn two_calls_make_the_format_strings_template_and_numbers_are_typed() {
        let a = pieces(format_args!("conn={} wait={}us", bb(3), bb(120)));
        let b = pieces(format_args!("conn={} wait={}us", bb(9), bb(7)));
        let t = merge(&first(&a), &b);
        assert_eq!(format_of(&t), "conn={} wait={}us");
        assert!(t.contains(&Item::Gap(ArgKind::U64)));
        let mut gaps = Gaps::new();
        assert!(fit(&t, &b, &mut gaps));
        assert_eq!(texts(&gaps), ["9", "7"]);
        // A non-number in a number's gap does not fit; merged again, the
        // gap becomes a string's, and numbers fit it too.
        let c = pieces(format_args!("conn={} wait={}us", bb("x"), bb(7)));
        let mut gaps = Gaps::new();
        assert!(!fit(&t, &c, &mut gaps));
        let t2 = merge(&t, &c);
        assert_eq!(format_of(&t2), "conn={} wait={}us");
        assert!(fit(&t2, &c, &mut gaps) && fit(&t2, &b, &mut gaps));
    }

    #[test]
    fn a_value_that_was_the_same_twice_becomes_a_gap_when_it_changes() {
        let a = pieces(format_args!("GET {} from {}", bb("/a"), bb("ann")));
        let b = pieces(format_args!("GET {} from {}", bb("/b"), bb("ann")));
        let t = merge(&first(&a), &b);
        assert_eq!(format_of(&t), "GET {} from ann");
        let c = pieces(format_args!("GET {} from {}", bb("/c"), bb("bob")));
        let mut gaps = Gaps::new();
        assert!(!fit(&t, &c, &mut gaps));
        let t2 = merge(&t, &c);
        assert_eq!(format_of(&t2), "GET {} from {}");
        assert!(fit(&t2, &c, &mut gaps));
        assert_eq!(texts(&gaps), ["/c", "bob"]);
    }

    #[test]
    fn any_fit_gives_back_the_text_exactly() {
        // Gaps empty, at the ends, holding a write equal to a literal, or
        // padded; braces in the text.
        let calls = [
            pieces(format_args!("{}{} x {}", bb("a"), bb(""), bb(" x "))),
            pieces(format_args!("{}{} x {}", bb(""), bb("b"), bb(""))),
            pieces(format_args!("{}{} x {}", bb(" x "), bb(" x "), bb(" x "))),
            pieces(format_args!("{:>6}|{:?} {{}}", bb(42), bb("q\""))),
            pieces(format_args!("{:>6}|{:?} {{}}", bb(-7), bb("{}"))),
        ];
        let mut t = first(&calls[0]);
        let mut fitted = 0;
        for c in &calls {
            let mut gaps = Gaps::new();
            if !fit(&t, c, &mut gaps) {
                t = merge(&t, c);
                if !fit(&t, c, &mut gaps) {
                    continue;
                }
            }
            fitted += 1;
            let mut back = String::new();
            let mut g = gaps.iter();
            for it in t.iter() {
                match it {
                    Item::Lit(l) => back.push_str(l),
                    Item::Gap(_) => back.push_str(&g.next().expect("a gap's value").to_string()),
                }
            }
            assert_eq!(back, c.text);
        }
        assert!(fitted >= 4, "{fitted} of {} calls fitted", calls.len());
    }

    #[test]
    fn numbers_fit_only_as_they_print() {
        for (t, u, i) in [
            ("0", true, false),
            ("007", false, false),
            ("18446744073709551615", true, false),
            ("18446744073709551616", false, false),
            ("-5", false, true),
            ("-0", false, false),
            ("+5", false, false),
            ("", false, false),
        ] {
            assert_eq!(kind_fits(ArgKind::U64, t), u, "{t}");
            assert_eq!(kind_fits(ArgKind::I64, t), i, "{t}");
        }
    }
}
