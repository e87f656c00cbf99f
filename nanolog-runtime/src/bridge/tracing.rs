//! `tracing` events into nanolog: [`tracing_layer`].

use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use std::sync::PoisonError;

use super::open_spans::OpenSpans;
use super::template::Pieces;
use super::{Arg, Key, Shape};
use crate::level::Level;
use crate::wire::format::ArgKind;

/// The `tracing_subscriber::Layer` that records `tracing` events as nanolog
/// records: level, target, file, line, its message and its fields (shown
/// in text as `key=value` after the message, in JSON under `fields`, with
/// `msg` the message alone). Spans are context: a span's fields are
/// written once, and every record made in its scope (events, `log`
/// records, nanolog's own) carries the chain of spans from the root, as
/// tracing-subscriber's fmt shows it (see `nanolog::span!`).
///
/// Its events pass nanolog's directives as a per-layer filter
/// ([`NanologFilter`] inside tracing-subscriber's `Filtered`): they decide
/// for this layer only. Its spans are all enabled (they are context), so
/// the layer follows them itself, without the per-span lookups `Filtered`
/// makes (a span entered and exited costs two fewer registry lookups).
pub struct NanologLayer<S> {
    events: Filtered<EventLayer, NanologFilter, S>,
    /// This layer's own tag in the threads' span stacks (see `owner`).
    owner: u64,
}

impl<S> fmt::Debug for NanologLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NanologLayer").finish_non_exhaustive()
    }
}

/// The events' side of [`NanologLayer`], behind its per-layer filter.
#[derive(Debug, Clone, Copy)]
struct EventLayer {
    owner: u64,
}

/// A new layer's tag for the spans it sees entered: one per layer, so per
/// subscriber. Spans of a scoped dispatcher (`with_default`) and of the
/// global one share each thread's stack, and their ids may be equal (each
/// registry numbers its own from 1): the tag keeps them apart.
fn owner() -> u64 {
    // Relaxed: a unique number is all it hands out.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// nanolog's directives as a per-layer filter (tracing-subscriber's
/// `Filter`): an event callsite they disable is `never` for this layer
/// only, so the other layers of the subscriber still receive it, and where
/// nanolog's is the only layer, the subscriber decides it `never` (a
/// disabled event then costs tracing's cached check). With no logger
/// running every event is off for nanolog, and on for the others as their
/// own filters say. Spans are always enabled: they are context, and the
/// records inside them are what the directives select.
#[derive(Debug, Clone, Copy, Default)]
pub struct NanologFilter {
    _private: (),
}

/// The layer that records `tracing` events (see [`NanologLayer`]):
/// `tracing_subscriber::registry().with(nanolog::tracing_layer()).init()`.
pub fn tracing_layer<S>() -> NanologLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // tracing caches each callsite's interest (from `register_callsite`):
    // a change of nanolog's filter asks it again.
    crate::filter::after_change(tracing_core::callsite::rebuild_interest_cache);
    let owner = owner();
    NanologLayer {
        events: EventLayer { owner }.with_filter(NanologFilter::default()),
        owner,
    }
}

impl<S> Filter<S> for NanologFilter {
    fn enabled(&self, meta: &tracing_core::Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        wanted(meta)
    }

    /// Decided once per callsite, and again whenever nanolog's filter
    /// changes.
    fn callsite_enabled(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> tracing_core::Interest {
        if wanted(meta) {
            tracing_core::Interest::always()
        } else {
            tracing_core::Interest::never()
        }
    }
}

/// Whether nanolog's layer wants a callsite: every span, the one callsite
/// tracing-log gives every `log` record (decided per record, by its own
/// target, in the layer), and the events nanolog's directives enable.
fn wanted(meta: &tracing_core::Metadata<'_>) -> bool {
    meta.is_span()
        || from_tracing_log(meta)
        || crate::filter::enabled(level(meta.level()), meta.target())
}

fn level(l: &tracing_core::Level) -> Level {
    match *l {
        tracing_core::Level::TRACE => Level::Trace,
        tracing_core::Level::DEBUG => Level::Debug,
        tracing_core::Level::INFO => Level::Info,
        tracing_core::Level::WARN => Level::Warn,
        _ => Level::Error,
    }
}

#[derive(Default)]
struct Fields {
    /// The message, write by write (its template is learnt from them).
    message: Option<Pieces>,
    fields: Vec<(&'static str, Arg<String>)>,
    /// A `log` record that tracing-log made an event of: where it really
    /// came from (`log.target`, `log.module_path`, `log.file`, `log.line`).
    log: Option<LogOrigin>,
}

#[derive(Default)]
struct LogOrigin {
    target: Option<String>,
    module: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

impl Fields {
    #[inline(always)]
    fn push(&mut self, field: &Field, v: Arg<String>) {
        if let Some(o) = &mut self.log {
            let text = || match &v {
                Arg::Str(s) => s.clone(),
                other => other.to_string(),
            };
            match field.name() {
                "log.target" => return o.target = Some(text()),
                "log.module_path" => return o.module = Some(text()),
                "log.file" => return o.file = Some(text()),
                "log.line" => {
                    return o.line = match v {
                        Arg::U64(n) => u32::try_from(n).ok(),
                        Arg::I64(n) => u32::try_from(n).ok(),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        if field.name() == "message" {
            let mut m = Pieces::default();
            match v {
                Arg::Str(s) => m.set(&s),
                other => m.set(&other.to_string()),
            }
            self.message = Some(m);
        } else {
            self.fields.push((field.name(), v));
        }
    }
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Arg::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Arg::U64(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, Arg::I128(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, Arg::U128(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Arg::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Arg::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Arg::Str(value.to_owned()));
    }
    /// `Debug` and `Display` values (`%x` fields arrive as `Debug` wrappers
    /// that print their `Display`) as their text; the message
    /// (`format_args!`, which prints as it reads) write by write, as its
    /// template is learnt from them.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut m = Pieces::default();
        m.format(|m| write!(m, "{value:?}"), "<Debug panicked>");
        if field.name() == "message" {
            self.message = Some(m);
        } else {
            self.push(field, Arg::Str(m.text));
        }
    }
}

/// A span as the layer keeps it (in the table of open spans, or past its
/// room in the span's extensions in the registry): its key, and
/// its fields encoded once, as the ring and the table hold them, with the
/// site of their kinds. Nothing else is kept: the values are not held
/// apart as owned text (a span of two `&str` fields cost four allocations
/// that way, and their frees at its close); a value recorded later decodes
/// the others from these bytes ([`SpanData::fields`]).
struct SpanData {
    /// Its key, unique in the process (tracing reuses span ids).
    key: u64,
    /// Its site, and its fields' shape; `None` past the sites' cap.
    site: Option<(u32, Shape)>,
    /// Its definition was dropped (`OnFull::Drop`, its thread's span
    /// changes over their budget): nothing more of it is posted, its
    /// values nor its close.
    dropped: bool,
    /// The fields' values, then the key, as the ring holds them (a
    /// copy goes to the flusher: no allocation a span up to 64 bytes).
    raw: crate::span::SpanBytes,
}

impl SpanData {
    /// A span of `meta`'s callsite with fields of `shape` whose values are
    /// encoded in `values`: its site, and its bytes with the key after them
    /// (appended to `values`, then copied once).
    fn new(
        key: u64,
        meta: &'static tracing_core::Metadata<'static>,
        shape: &[(&'static str, ArgKind, bool)],
        values: &mut Vec<u8>,
    ) -> SpanData {
        let site = span_site_of(meta, shape);
        values.extend_from_slice(&key.to_le_bytes());
        SpanData {
            key,
            site,
            dropped: false,
            raw: crate::span::SpanBytes::from_slice(values),
        }
    }

    /// Its fields with the values `recorded` (encoded as `Encoded` holds
    /// them) in place of their old ones, and the fields new to it after
    /// them, into `out` as the ring holds them; their shape into `shape`.
    /// The old values are copied as their bytes, never decoded (a value
    /// recorded into a request's span decoded every other field into an
    /// owned value, strings allocated, and encoded them again).
    fn merge(
        &self,
        recorded: &Encoded,
        out: &mut Vec<u8>,
        shape: &mut Vec<(&'static str, ArgKind, bool)>,
    ) {
        // The recorded values' bytes, in their order.
        let mut rest = &recorded.values[..];
        let mut new: smallvec::SmallVec<[(&[u8], bool); 4]> = smallvec::SmallVec::new();
        for &(_, kind, _) in &recorded.shape {
            let Some(len) = arg_len(kind, rest) else {
                break;
            };
            let (bytes, r) = rest.split_at(len);
            new.push((bytes, false));
            rest = r;
        }
        let fresh = &recorded.shape[..new.len()];
        // The last value recorded for `name`, marked as placed.
        let mut take = |name: &str| {
            let i = fresh.iter().rposition(|f| f.0 == name)?;
            new[i].1 = true;
            Some((fresh[i], new[i].0))
        };
        if let Some((_, old)) = self.site {
            // (The key, after the fields, is not a field.)
            let mut rest = &self.raw[..self.raw.len().saturating_sub(8)];
            for &(name, kind, debug) in old {
                let Some(len) = arg_len(kind, rest) else {
                    break;
                };
                let (bytes, r) = rest.split_at(len);
                rest = r;
                match take(name) {
                    Some((f, b)) => {
                        out.extend_from_slice(b);
                        shape.push(f);
                    }
                    None => {
                        out.extend_from_slice(bytes);
                        shape.push((name, kind, debug));
                    }
                }
            }
        }
        for (i, &f) in fresh.iter().enumerate() {
            // A field new to the span, once (its last value).
            if !new[i].1 && fresh[i + 1..].iter().all(|g| g.0 != f.0) {
                out.extend_from_slice(new[i].0);
                shape.push(f);
            }
        }
    }
}

/// The length of one value as [`Arg::encode_with`] wrote it at the front of
/// `bytes`, as the ring holds it (`None`: cut short, or a kind a span field
/// never has).
fn arg_len(kind: ArgKind, bytes: &[u8]) -> Option<usize> {
    let len = match kind {
        ArgKind::Str => {
            let n = u32::from_le_bytes(*bytes.first_chunk::<4>()?) as usize;
            4usize.checked_add(n)?
        }
        ArgKind::Rendered => return None,
        _ => kind.ring_width(),
    };
    (len <= bytes.len()).then_some(len)
}

/// A span's fields visited straight into their encoding (no value kept
/// apart), and their shape.
#[derive(Default)]
struct Encoded {
    values: Vec<u8>,
    shape: Vec<(&'static str, ArgKind, bool)>,
}

impl Encoded {
    fn push(&mut self, field: &Field, v: Arg<&str>, debug: bool) {
        v.encode_with(|b| self.values.extend_from_slice(b));
        self.shape.push((field.name(), v.kind(), debug));
    }
}

impl Visit for Encoded {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Arg::I64(value), true);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Arg::U64(value), true);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, Arg::I128(value), true);
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, Arg::U128(value), true);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Arg::F64(value), true);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Arg::Bool(value), true);
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Arg::Str(value), true);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // The text straight into the encoding: its length, then its bytes.
        struct Append<'a>(&'a mut Vec<u8>);
        impl fmt::Write for Append<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0.extend_from_slice(s.as_bytes());
                Ok(())
            }
        }
        let at = self.values.len();
        self.values.extend_from_slice(&[0; 4]);
        let ok = catch_unwind(AssertUnwindSafe(|| {
            write!(Append(&mut self.values), "{value:?}")
        }))
        .is_ok_and(|r| r.is_ok());
        if !ok {
            self.values.truncate(at + 4);
            self.values.extend_from_slice(b"<Debug panicked>");
        }
        let len = (self.values.len() - at - 4) as u32;
        self.values[at..at + 4].copy_from_slice(&len.to_le_bytes());
        self.shape.push((field.name(), ArgKind::Str, false));
    }
}

/// Runs `f` on this thread's (emptied) encoding buffers, or on new ones if
/// they are in use (a span made inside a `Debug` of a span being made).
fn with_encoded<R>(f: impl Fn(&mut Encoded) -> R) -> R {
    let done = ENCODED.try_with(|e| {
        let mut e = e.try_borrow_mut().ok()?;
        e.values.clear();
        e.shape.clear();
        Some(f(&mut e))
    });
    match done {
        Ok(Some(r)) => r,
        _ => f(&mut Encoded::default()),
    }
}

/// A span's fields and their shape as a value recorded into it merges
/// them (see [`SpanData::merge`]): into this thread's buffers, kept for
/// their memory, so a `record` allocates nothing but what a span of more
/// than 64 bytes of fields keeps.
fn with_merged<R>(f: impl Fn(&mut Vec<u8>, &mut Vec<(&'static str, ArgKind, bool)>) -> R) -> R {
    type Merged = (Vec<u8>, Vec<(&'static str, ArgKind, bool)>);
    thread_local! {
        static MERGED: std::cell::RefCell<Merged> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let done = MERGED.try_with(|m| {
        let mut m = m.try_borrow_mut().ok()?;
        let (raw, shape) = &mut *m;
        raw.clear();
        shape.clear();
        let r = f(raw, shape);
        // A span of very large values leaves no memory behind.
        if raw.capacity() > 64 << 10 {
            *raw = Vec::new();
        }
        Some(r)
    });
    match done {
        Ok(Some(r)) => r,
        // A thread being torn down, or a record inside one.
        _ => f(&mut Vec::new(), &mut Vec::new()),
    }
}

/// The site of a span of `meta`'s callsite with fields of `shape`: from
/// this thread's recent ones, else the process's (under its lock, which
/// every worker would otherwise take at every span).
fn span_site_of(
    meta: &'static tracing_core::Metadata<'static>,
    shape: &[(&'static str, ArgKind, bool)],
) -> Option<(u32, Shape)> {
    let callsite = meta as *const _ as usize;
    let slot = site_slot(callsite, shape);
    let cached = SITES
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c[slot]
                .as_ref()
                .filter(|c| c.callsite == callsite && same_shape(&c.fields, shape))
                .map(|c| c.site)
        })
        .ok()
        .flatten();
    if let Some(site) = cached {
        return site;
    }
    let key = super::SpanKey {
        callsite,
        fields: shape.to_vec(),
    };
    let site = super::span_site(
        &key,
        meta.name(),
        meta.target(),
        meta.file().unwrap_or("<unknown>"),
        meta.line().unwrap_or(0),
        meta.module_path().unwrap_or(""),
    );
    let _ = SITES.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c[slot] = Some(CachedSite {
                callsite,
                fields: key.fields.into_boxed_slice(),
                site,
            });
        }
    });
    site
}

/// A span site this thread interned lately: its callsite, its fields'
/// names and kinds, and the site (`None`: past the cap).
struct CachedSite {
    callsite: usize,
    fields: Box<[(&'static str, ArgKind, bool)]>,
    site: Option<(u32, Shape)>,
}

const SITE_SLOTS: usize = 64;

/// Whether two spans' fields have the same names and kinds: a name is
/// compared by its address first (a callsite's names are its metadata's
/// `&'static str`s, the same every time), its text only when that differs
/// (comparing the texts cost a `memcmp` a field on every span made).
#[inline]
fn same_shape(a: &[(&'static str, ArgKind, bool)], b: &[(&'static str, ArgKind, bool)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.1 == y.1 && x.2 == y.2 && (std::ptr::eq(x.0, y.0) || x.0 == y.0))
}

thread_local! {
    /// Recent span sites, by a hash of their callsite and fields.
    static SITES: std::cell::RefCell<[Option<CachedSite>; SITE_SLOTS]> =
        const { std::cell::RefCell::new([const { None }; SITE_SLOTS]) };
    /// The encoding of the span being made (kept for its allocation).
    static ENCODED: std::cell::RefCell<Encoded> =
        const { std::cell::RefCell::new(Encoded { values: Vec::new(), shape: Vec::new() }) };
}

/// The slot of `SITES` for a span of `callsite` with fields of `shape`.
fn site_slot(callsite: usize, shape: &[(&'static str, ArgKind, bool)]) -> usize {
    let mut h = callsite as u64;
    for (n, k, d) in shape {
        h = (h ^ n.as_ptr() as u64 ^ (*k as u64) << 1 ^ u64::from(*d))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    (h >> 58) as usize % SITE_SLOTS
}

/// The typed path of an event callsite, learnt from its first event: its
/// message is the same text every time (kept in the site as literal text)
/// and its fields are numbers, bools and strings of fixed kinds, so an event
/// is written as raw values, nothing formatted or allocated.
struct Typed {
    message: Option<Box<str>>,
    kinds: Box<[ArgKind]>,
    site: &'static crate::site::Site,
    /// An event of the callsite did not fit: its message varies after all
    /// (`"{}", name` is one piece of text too). The callsite takes the
    /// formatting path from then on.
    demoted: std::sync::atomic::AtomicBool,
}

/// Per callsite (its metadata's address): `Some` with its typed path,
/// `None` for a callsite that takes the formatting path.
type TypedTable = std::collections::HashMap<usize, Option<&'static Typed>>;
static TYPED: std::sync::RwLock<Option<TypedTable>> = std::sync::RwLock::new(None);

const TYPED_SLOTS: usize = 64;

/// The most fields an event of the typed path has.
const MAX_TYPED_FIELDS: usize = 16;

/// Bytes of an event's values the typed path stages; an event with more
/// (long strings) takes the formatting path.
const STAGE_BYTES: usize = 1024;

thread_local! {
    /// This thread's side of the typed path, in one block without a
    /// destructor: reaching it is one thread-local address, no
    /// registration check (measured: the recent-callsite table and the
    /// stage as two thread-locals, the stage with a heap spill, cost
    /// 2-3 ns more per event).
    static TYPED_TLS: TypedTls = const {
        TypedTls {
            recent: [const { std::cell::Cell::new((0, None)) }; TYPED_SLOTS],
            stage: std::cell::RefCell::new(Stage { bytes: [0; STAGE_BYTES], len: 0 }),
        }
    };
}

struct TypedTls {
    /// Recently seen callsites (by metadata address) and their typed paths.
    recent: [std::cell::Cell<(usize, Option<&'static Typed>)>; TYPED_SLOTS],
    /// The values of the event being written, encoded.
    stage: std::cell::RefCell<Stage>,
}

/// An event's values, encoded, on their way to the ring. They are kept in
/// the thread-local block, not on the heap: a small heap buffer written
/// per event can share a cache line with data the flusher reads per record
/// (a site's kinds), and each event then moved that line between the
/// cores (measured: 16 M events/s from one thread with a heap buffer of a
/// few bytes, 19.5 M/s with one far from the rest).
struct Stage {
    bytes: [u8; STAGE_BYTES],
    len: usize,
}

impl Stage {
    /// Appends `bytes`; `false` (nothing appended) when they do not fit.
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) -> bool {
        let end = self.len + bytes.len();
        match self.bytes.get_mut(self.len..end) {
            Some(room) => {
                room.copy_from_slice(bytes);
                self.len = end;
                true
            }
            None => false,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The callsite's typed path, if it has one (learnt from `event` on its
/// first sight); `None` for callsites that take the formatting path.
#[inline(always)]
fn typed(tls: &TypedTls, event: &Event<'_>) -> Option<&'static Typed> {
    let meta = event.metadata();
    let addr = meta as *const _ as usize;
    let slot = &tls.recent[(addr >> 4) % TYPED_SLOTS];
    let (seen, t) = slot.get();
    let t = if seen == addr {
        t
    } else {
        let t = typed_slow(event);
        slot.set((addr, t));
        t
    };
    // Relaxed: a hint; an event that misses a demotion only tries and
    // falls back.
    t.filter(|t| !t.demoted.load(std::sync::atomic::Ordering::Relaxed))
}

/// A callsite not in this thread's recent table: from the process's, or
/// learnt now.
#[cold]
#[inline(never)]
fn typed_slow(event: &Event<'_>) -> Option<&'static Typed> {
    let meta = event.metadata();
    let addr = meta as *const _ as usize;
    let known = TYPED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&addr).copied());
    if let Some(t) = known {
        return t;
    }
    // tracing-log's one callsite carries every `log` record: never typed.
    let learnt = if from_tracing_log(meta) {
        None
    } else {
        learn(event, &Origin::of(meta))
    };
    *TYPED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(Default::default)
        .entry(addr)
        .or_insert(learnt)
}

/// Whether an event's callsite can take the typed path, and its site.
#[cold]
fn learn(event: &Event<'_>, origin: &Origin<'_>) -> Option<&'static Typed> {
    struct Learn {
        message: Option<String>,
        fields: Vec<(&'static str, ArgKind)>,
        typed: bool,
    }
    /// Counts the pieces a message is written in: a constant one
    /// (`Arguments::as_str()`) is written in one.
    struct Pieces(String, usize);
    impl fmt::Write for Pieces {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0.push_str(s);
            self.1 += 1;
            Ok(())
        }
    }
    impl Visit for Learn {
        fn record_i64(&mut self, f: &Field, _: i64) {
            self.fields.push((f.name(), ArgKind::I64));
        }
        fn record_u64(&mut self, f: &Field, _: u64) {
            self.fields.push((f.name(), ArgKind::U64));
        }
        fn record_i128(&mut self, f: &Field, _: i128) {
            self.fields.push((f.name(), ArgKind::I128));
        }
        fn record_u128(&mut self, f: &Field, _: u128) {
            self.fields.push((f.name(), ArgKind::U128));
        }
        fn record_f64(&mut self, f: &Field, _: f64) {
            self.fields.push((f.name(), ArgKind::F64));
        }
        fn record_bool(&mut self, f: &Field, _: bool) {
            self.fields.push((f.name(), ArgKind::Bool));
        }
        fn record_str(&mut self, f: &Field, _: &str) {
            self.fields.push((f.name(), ArgKind::Str));
        }
        fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
            if f.name() == "message" && self.message.is_none() {
                let mut p = Pieces(String::new(), 0);
                if catch_unwind(AssertUnwindSafe(|| write!(p, "{v:?}"))).is_ok() && p.1 <= 1 {
                    self.message = Some(p.0);
                    return;
                }
            }
            self.typed = false;
        }
    }
    let mut l = Learn {
        message: None,
        fields: Vec::new(),
        typed: true,
    };
    event.record(&mut l);
    if !l.typed || l.fields.len() > MAX_TYPED_FIELDS {
        return None;
    }
    let key = origin.key(&l.fields, false);
    let head = l
        .message
        .as_deref()
        .map_or(super::Head::None, super::Head::Text);
    let site = key.leak_with(head);
    Some(Box::leak(Box::new(Typed {
        message: l.message.map(String::into_boxed_str),
        kinds: site.kinds,
        site: site.site,
        demoted: std::sync::atomic::AtomicBool::new(false),
    })))
}

/// Takes `event` by its callsite's typed path: `true` when that is done
/// (written, or below the filter); `false` (nothing written) for a callsite
/// without one, or an event that does not fit it (another message text, a
/// field of another kind, values past the stage), for the formatting path
/// to take it.
#[inline(always)]
fn take_typed(event: &Event<'_>) -> bool {
    TYPED_TLS
        .try_with(|tls| match typed(tls, event) {
            // The site's cached filter decision, then raw values.
            Some(t) => !t.site.enabled() || write_typed(tls, t, event),
            None => false,
        })
        .unwrap_or(false)
}

/// Where an event's encoded values go: the thread's stage, or (an event
/// that outgrew it, visited again) a heap buffer.
trait Put {
    /// Appends `bytes`; `false` (nothing appended) when they do not fit.
    fn put(&mut self, bytes: &[u8]) -> bool;
}

impl Put for Stage {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) -> bool {
        Stage::put(self, bytes)
    }
}

impl Put for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) -> bool {
        self.extend_from_slice(bytes);
        true
    }
}

/// Compares the text written to it with the expected message.
struct SameText<'a> {
    rest: &'a str,
    same: bool,
}

impl fmt::Write for SameText<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        match self.rest.strip_prefix(s) {
            Some(r) if self.same => self.rest = r,
            _ => self.same = false,
        }
        Ok(())
    }
}

/// The values of an event of `t`'s callsite, encoded as the ring holds
/// them, into `out` as they are visited: one copy into the ring after, no
/// value kept aside.
struct Collect<'a, P> {
    t: &'static Typed,
    n: usize,
    out: &'a mut P,
    fits: bool,
    /// Every value fitted in `out`.
    room: bool,
    message_seen: bool,
}

impl<'a, P: Put> Collect<'a, P> {
    fn new(t: &'static Typed, out: &'a mut P) -> Self {
        Collect {
            t,
            n: 0,
            out,
            fits: true,
            room: true,
            message_seen: false,
        }
    }

    /// Visits `event`: `None` when its values do not fit the callsite's
    /// typed path (the callsite is demoted), else whether they all fitted
    /// in `out`.
    #[inline(always)]
    fn collect(&mut self, event: &Event<'_>) -> Option<bool> {
        event.record(self);
        let t = self.t;
        if !self.fits || self.n != t.kinds.len() || self.message_seen != t.message.is_some() {
            t.demoted.store(true, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        Some(self.room)
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.room &= self.out.put(bytes);
    }

    /// The next value, encoded as the ring holds it if it is of the kind
    /// the site expects.
    #[inline(always)]
    fn value(&mut self, v: Arg<&str>) {
        if self.expect(v.kind()) {
            v.encode_with(|b| self.put(b));
        }
    }

    /// Whether the next value, of `kind`, is the one the site expects.
    #[inline(always)]
    fn expect(&mut self, kind: ArgKind) -> bool {
        let ok = self.t.kinds.get(self.n) == Some(&kind);
        self.n += 1;
        self.fits &= ok;
        ok
    }
}

impl<P: Put> Visit for Collect<'_, P> {
    fn record_i64(&mut self, _: &Field, v: i64) {
        self.value(Arg::I64(v));
    }
    fn record_u64(&mut self, _: &Field, v: u64) {
        self.value(Arg::U64(v));
    }
    fn record_i128(&mut self, _: &Field, v: i128) {
        self.value(Arg::I128(v));
    }
    fn record_u128(&mut self, _: &Field, v: u128) {
        self.value(Arg::U128(v));
    }
    fn record_f64(&mut self, _: &Field, v: f64) {
        self.value(Arg::F64(v));
    }
    fn record_bool(&mut self, _: &Field, v: bool) {
        self.value(Arg::Bool(v));
    }
    fn record_str(&mut self, _: &Field, v: &str) {
        self.value(Arg::Str(v));
    }
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        let Some(m) = self.t.message.as_deref() else {
            self.fits = false;
            return;
        };
        if f.name() != "message" || self.message_seen {
            self.fits = false;
            return;
        }
        self.message_seen = true;
        let mut cmp = SameText {
            rest: m,
            same: true,
        };
        let ok = catch_unwind(AssertUnwindSafe(|| write!(cmp, "{v:?}"))).is_ok();
        if !(ok && cmp.same && cmp.rest.is_empty()) {
            self.fits = false;
        }
    }
}

/// Writes `event`'s values as a record of `t`'s site (see [`take_typed`]).
fn write_typed(tls: &TypedTls, t: &'static Typed, event: &Event<'_>) -> bool {
    let Ok(mut stage) = tls.stage.try_borrow_mut() else {
        return false;
    };
    stage.len = 0;
    match Collect::new(t, &mut *stage).collect(event) {
        None => false,
        Some(true) => {
            let (id, values) = (t.site.id_dyn(&t.kinds), stage.bytes());
            crate::producer::log_id(id, values.len(), |w| {
                let _ = w.put(values);
            });
            true
        }
        Some(false) => write_typed_large(t, event),
    }
}

/// An event whose values outgrew the stage: visited again into the heap
/// (its message compared a second time; such events are rare, and the
/// common path then carries no heap buffer).
#[cold]
#[inline(never)]
fn write_typed_large(t: &'static Typed, event: &Event<'_>) -> bool {
    let mut values = Vec::new();
    if Collect::new(t, &mut values).collect(event).is_none() {
        return false;
    }
    // A closure of its own: the common path's call of `log_id` stays its
    // only caller, and inlined.
    let id = t.site.id_dyn(&t.kinds);
    crate::producer::log_id(id, values.len(), |w| {
        let _ = w.put(&values);
    });
    true
}

/// Whether `meta` is tracing-log's: a `log` record made a `tracing` event
/// (target `log`, with `log.target` and the other origin fields).
fn from_tracing_log(meta: &tracing_core::Metadata<'_>) -> bool {
    meta.target() == "log" && meta.fields().field("log.target").is_some()
}

/// Where an event comes from: level, target, file, line, module.
struct Origin<'a> {
    level: Level,
    target: &'a str,
    file: &'a str,
    line: u32,
    module: &'a str,
}

impl<'a> Origin<'a> {
    /// A `tracing` callsite's own origin.
    fn of(meta: &'a tracing_core::Metadata<'_>) -> Origin<'a> {
        Origin {
            level: level(meta.level()),
            target: meta.target(),
            file: meta.file().unwrap_or("<unknown>"),
            line: meta.line().unwrap_or(0),
            module: meta.module_path().unwrap_or(""),
        }
    }

    /// The key of this origin with `fields` (the gate's, with none: the
    /// filter is decided from the call site alone).
    fn key<'k>(&'k self, fields: &'k [(&'k str, ArgKind)], message: bool) -> Key<'k> {
        Key {
            level: self.level,
            target: self.target,
            file: self.file,
            line: self.line,
            module: self.module,
            fields,
            message,
        }
    }

    /// Whether the filter lets this call site's records through.
    fn enabled(&self) -> bool {
        let gate = self.key(&[], false);
        super::site(&gate).enabled(&gate)
    }

    /// Logs the collected message and fields at the site of this origin.
    fn log(&self, f: &Fields) {
        let kinds: Vec<(&str, ArgKind)> = f.fields.iter().map(|(n, v)| (*n, v.kind())).collect();
        let key = self.key(&kinds, f.message.is_some());
        let site = super::site(&key);
        let args: Vec<Arg<&str>> = f.fields.iter().map(|(_, v)| v.as_str_arg()).collect();
        match &f.message {
            Some(m) => super::template::log_message(site, &key, m, &args),
            None => super::write_record(site, &key, &args),
        }
    }
}

impl EventLayer {
    /// An event the typed path did not take: its message and fields
    /// formatted on this thread.
    #[inline(never)]
    fn format_event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if from_tracing_log(meta) {
            return self.log_record(event);
        }
        let origin = Origin::of(meta);
        // The filter first, before anything is collected.
        if !origin.enabled() {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        origin.log(&f);
    }

    /// A `log` record that arrived through tracing-log (the `log` feature of
    /// `tracing-subscriber`, on by default): recorded once, with its own
    /// target, module, file and line, as `capture_log` records it.
    #[cold]
    fn log_record(&self, event: &Event<'_>) {
        let mut f = Fields {
            log: Some(LogOrigin::default()),
            ..Fields::default()
        };
        event.record(&mut f);
        let o = f.log.take().unwrap_or_default();
        let target = o.target.as_deref().unwrap_or("log");
        let origin = Origin {
            level: level(event.metadata().level()),
            target,
            file: o.file.as_deref().unwrap_or("<unknown>"),
            line: o.line.unwrap_or(0),
            module: o.module.as_deref().unwrap_or(target),
        };
        if origin.enabled() {
            origin.log(&f);
        }
    }
}

/// The spans this process's layers hold open, with their keys and data
/// (see `open_spans.rs`; a span past its slots' room keeps them in the
/// registry's extensions of the span instead). 4,096 slots of 192 bytes,
/// 768 KiB of `.bss`, touched as spans use them: room for a service's
/// open spans without a slot's neighbours filling up (the tokio service
/// bench keeps 64 requests in flight, a few spans open in each).
static OPEN: OpenSpans<SpanData, 4096> = OpenSpans::new();

/// The key of span `id` of layer `owner` (0: not one of its spans), for a
/// span the caller holds open: one being entered, a parent handed in, one
/// being closed. From the table of open spans: a span is entered on other
/// threads than its maker's (tokio moves tasks between workers, and the
/// blocking pool runs their closures), and the registry's lookup of its
/// extensions took a slot's reference count and a lock, on lines every
/// worker writes. A span past the table's room: from the registry.
#[inline]
fn key_of<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    owner: u64,
    id: &Id,
) -> u64 {
    match OPEN.key(owner, id.into_u64()) {
        Some(key) => key,
        None => overflow_key(ctx, id),
    }
}

/// The key of span `id` kept past the table's room, in the registry's
/// extensions of the span (0: none).
fn overflow_key<S: Subscriber + for<'a> LookupSpan<'a>>(ctx: &Context<'_, S>, id: &Id) -> u64 {
    ctx.span(id)
        .and_then(|s| s.extensions().get::<SpanData>().map(|d| d.key))
        .unwrap_or(0)
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for EventLayer {
    /// An event in its scope: a contextual event in the span current on
    /// this thread for its subscriber (tracing's current span, or a
    /// `nanolog::span!` entered inside it), which is where the thread's
    /// ring already is unless another subscriber's span was entered since;
    /// an event with an explicit parent (or `parent: None`) in that span's
    /// scope. An event whose scope is not the thread's is written between
    /// two switches (the first one also on a thread with no ring yet).
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let current = crate::producer::current();
        let leaf = if event.is_contextual() {
            crate::span::current_for(self.owner)
        } else {
            event.parent().map_or(0, |p| key_of(&ctx, self.owner, p))
        };
        let elsewhere = leaf != current;
        if elsewhere {
            crate::span::switch_for_record(leaf);
        }
        if !take_typed(event) {
            self.format_event(event);
        }
        if elsewhere {
            crate::producer::context_changed();
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for NanologLayer<S> {
    // The events' side: the per-layer filter and the event layer behind it.

    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        self.events.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.events.on_layer(subscriber);
    }

    fn register_callsite(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> tracing_core::Interest {
        self.events.register_callsite(meta)
    }

    fn enabled(&self, meta: &tracing_core::Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.events.enabled(meta, ctx)
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.events.event_enabled(event, ctx)
    }

    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        self.events.max_level_hint()
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.events.on_event(event, ctx);
    }

    /// This layer, or what the events' `Filtered` answers (among it, the
    /// marker by which tracing-subscriber knows a layer has a per-layer
    /// filter, as `reload::Layer` forwards it).
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        if id == std::any::TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: the caller's contract (a pointer returned for `id` is
        // only cast to the type `id` names) is the one this method has,
        // passed on unchanged to the layer that answers for `id`.
        unsafe { self.events.downcast_raw(id) }
    }

    // The spans' side: every span is enabled for nanolog, so the layer
    // follows them itself.

    /// A new span: its key, its parent's (tracing's: the explicit one, else
    /// the span current on this thread, a `tracing` one or a
    /// `nanolog::span!`), and its fields, into the process's table of spans.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = match attrs.parent() {
            Some(p) => key_of(&ctx, self.owner, p),
            None if attrs.is_contextual() => crate::span::current_for(self.owner),
            None => 0,
        };
        let key = crate::span::span_key();
        let meta = attrs.metadata();
        let mut data = with_encoded(|e| {
            attrs.record(e);
            SpanData::new(key, meta, &e.shape, &mut e.values)
        });
        if let Some((site, _)) = data.site {
            if !crate::span::define(data.key, parent, site, &data.raw) {
                // Entered, and a parent, by a key that says so (see
                // `DROPPED_KEY`).
                data.dropped = true;
                data.key |= crate::span::DROPPED_KEY;
            }
        }
        let key = data.key;
        // In the table of open spans; past its room, in the registry's
        // extensions of the span.
        if let Err(data) = OPEN.insert(self.owner, id.into_u64(), key, data) {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(data);
            }
        }
    }

    /// Values recorded later (`span.record("rows", 3)`): every record made
    /// in the span from now on, on any thread, shows them.
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(meta) = ctx.metadata(id) else { return };
        // The values are encoded before the span's data is taken (their
        // `Debug` is the program's code, and may record into it too).
        with_encoded(|e| {
            values.record(e);
            let recorded = |data: &mut SpanData| {
                let mut new = with_merged(|raw, shape| {
                    data.merge(e, raw, shape);
                    SpanData::new(data.key, meta, shape, raw)
                });
                new.dropped = data.dropped;
                *data = new;
                if data.dropped {
                    return;
                }
                if let Some((site, _)) = data.site {
                    crate::span::redefine(data.key, site, &data.raw);
                }
            };
            if OPEN.with(self.owner, id.into_u64(), recorded).is_none() {
                if let Some(span) = ctx.span(id) {
                    if let Some(data) = span.extensions_mut().get_mut::<SpanData>() {
                        recorded(data);
                    }
                }
            }
        });
    }

    /// Entered on this thread: current here (stated in its ring before
    /// its next record).
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let key = key_of(&ctx, self.owner, id);
        crate::span::tracing_enter(self.owner, id.into_u64(), key);
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        crate::span::tracing_exit(self.owner, id.into_u64());
    }

    /// Closed: out of the table of open spans (before the registry frees
    /// its id for another span, which it does once every layer has seen
    /// the close), and forgotten once the records made in it are written.
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let key = match OPEN.remove(self.owner, id.into_u64()) {
            // (Its definition dropped: nobody knows it.)
            Some((_, data)) if data.dropped => 0,
            Some((key, _)) => key,
            None => ctx
                .span(&id)
                .and_then(|s| {
                    s.extensions()
                        .get::<SpanData>()
                        .filter(|d| !d.dropped)
                        .map(|d| d.key)
                })
                .unwrap_or(0),
        };
        if key != 0 {
            crate::span::close(key);
        }
    }
}
