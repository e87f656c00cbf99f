//! Spans as the layer keeps them: their fields encoded once, their sites,
//! and the table of open spans with their keys.

use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing_core::field::{Field, Visit};
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::open_spans::OpenSpans;
use crate::bridge::{Arg, Shape};
use crate::wire::format::ArgKind;

/// A span as the layer keeps it (in the table of open spans, or past its
/// room in the span's extensions in the registry): its key, and
/// its fields encoded once, as the ring and the table hold them, with the
/// site of their kinds. Nothing else is kept: the values are not held
/// apart as owned text (a span of two `&str` fields cost four allocations
/// that way, and their frees at its close); a value recorded later decodes
/// the others from these bytes ([`SpanData::fields`]).
pub(super) struct SpanData {
    /// Its key, unique in the process (tracing reuses span ids).
    pub(super) key: u64,
    /// Its site, and its fields' shape; `None` past the sites' cap.
    pub(super) site: Option<(u32, Shape)>,
    /// Its definition was dropped (`OnFull::Drop`, its thread's span
    /// changes over their budget): nothing more of it is posted, its
    /// values nor its close.
    pub(super) dropped: bool,
    /// Its trace context was looked for (on its first entry: see
    /// `otel.rs`), found or not.
    pub(super) context_taken: bool,
    /// Its trace context went to the flusher with it (not dropped): a
    /// span inside it of the same trace may leave its trace id out.
    pub(super) context_posted: bool,
    /// The key of the span it was defined inside (0: a root), as the file
    /// says its parent.
    pub(super) parent: u64,
    /// The bytes of its trace context in `raw`, after the fields and
    /// before the key (0: it has none).
    pub(super) context_len: u8,
    /// The fields' values, then its trace context if it has one, then the
    /// key, as the ring holds them (a copy goes to the flusher: no
    /// allocation a span up to 64 bytes).
    pub(super) raw: crate::span::SpanBytes,
}

impl SpanData {
    /// A span of `meta`'s callsite with fields of `shape` whose values are
    /// encoded in `values`, and the trace context encoded in `context`
    /// (empty: none): its site, and its bytes with the context and the key
    /// after them (appended to `values`, then copied once).
    pub(super) fn new(
        key: u64,
        meta: &'static tracing_core::Metadata<'static>,
        shape: &[(&'static str, ArgKind, bool)],
        values: &mut Vec<u8>,
        context: &[u8],
    ) -> SpanData {
        let site = span_site_of(meta, shape, !context.is_empty());
        values.extend_from_slice(context);
        values.extend_from_slice(&key.to_le_bytes());
        SpanData {
            key,
            site,
            dropped: false,
            context_taken: false,
            context_posted: false,
            parent: 0,
            // (57 bytes: see `CONTEXT_ARGS`.)
            context_len: u8::try_from(context.len()).unwrap_or(0),
            raw: crate::span::SpanBytes::from_slice(values),
        }
    }

    /// The fields' bytes in `raw`.
    fn field_bytes(&self) -> &[u8] {
        let end = self
            .raw
            .len()
            .saturating_sub(8 + usize::from(self.context_len));
        &self.raw[..end]
    }

    /// The trace context's bytes in `raw` (empty: none).
    pub(super) fn context_bytes(&self) -> &[u8] {
        let end = self.raw.len().saturating_sub(8);
        &self.raw[end.saturating_sub(usize::from(self.context_len))..end]
    }

    /// The span with its fields as they are and the trace context encoded
    /// in `context` (see [`encode_context`]).
    #[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
    pub(super) fn with_context(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
        context: &[u8],
    ) -> Option<SpanData> {
        let (_, shape) = self.site?;
        let mut new = with_merged(|raw, _| {
            raw.extend_from_slice(self.field_bytes());
            SpanData::new(self.key, meta, shape, raw, context)
        });
        new.dropped = self.dropped;
        new.context_taken = true;
        new.parent = self.parent;
        Some(new)
    }

    /// Its fields with the values `recorded` (encoded as `Encoded` holds
    /// them) in place of their old ones, and the fields new to it after
    /// them, into `out` as the ring holds them; their shape into `shape`.
    /// The old values are copied as their bytes, never decoded (a value
    /// recorded into a request's span decoded every other field into an
    /// owned value, strings allocated, and encoded them again).
    pub(super) fn merge(
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
            // (The trace context and the key, after the fields, are not
            // fields.)
            let mut rest = self.field_bytes();
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
pub(super) fn arg_len(kind: ArgKind, bytes: &[u8]) -> Option<usize> {
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
pub(super) struct Encoded {
    pub(super) values: Vec<u8>,
    pub(super) shape: Vec<(&'static str, ArgKind, bool)>,
}

impl Encoded {
    pub(super) fn push(&mut self, field: &Field, v: Arg<&str>, debug: bool) {
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
pub(super) fn with_encoded<R>(f: impl Fn(&mut Encoded) -> R) -> R {
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
pub(super) fn with_merged<R>(
    f: impl Fn(&mut Vec<u8>, &mut Vec<(&'static str, ArgKind, bool)>) -> R,
) -> R {
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
pub(super) fn span_site_of(
    meta: &'static tracing_core::Metadata<'static>,
    shape: &[(&'static str, ArgKind, bool)],
    traced: bool,
) -> Option<(u32, Shape)> {
    let callsite = meta as *const _ as usize;
    let slot = site_slot(callsite, shape, traced);
    let cached = SITES
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c[slot]
                .as_ref()
                .filter(|c| {
                    c.callsite == callsite && c.traced == traced && same_shape(&c.fields, shape)
                })
                .map(|c| c.site)
        })
        .ok()
        .flatten();
    if let Some(site) = cached {
        return site;
    }
    let key = crate::bridge::SpanKey {
        callsite,
        fields: shape.to_vec(),
        traced,
    };
    let site = crate::bridge::span_site(
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
                traced,
                fields: key.fields.into_boxed_slice(),
                site,
            });
        }
    });
    site
}

/// A span site this thread interned lately: its callsite, its fields'
/// names and kinds, and the site (`None`: past the cap).
pub(super) struct CachedSite {
    pub(super) callsite: usize,
    /// Its spans carry a trace context.
    pub(super) traced: bool,
    pub(super) fields: Box<[(&'static str, ArgKind, bool)]>,
    pub(super) site: Option<(u32, Shape)>,
}

pub(super) const SITE_SLOTS: usize = 64;

/// Whether two spans' fields have the same names and kinds: a name is
/// compared by its address first (a callsite's names are its metadata's
/// `&'static str`s, the same every time), its text only when that differs
/// (comparing the texts cost a `memcmp` a field on every span made).
#[inline]
pub(super) fn same_shape(
    a: &[(&'static str, ArgKind, bool)],
    b: &[(&'static str, ArgKind, bool)],
) -> bool {
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
pub(super) fn site_slot(
    callsite: usize,
    shape: &[(&'static str, ArgKind, bool)],
    traced: bool,
) -> usize {
    let mut h = callsite as u64 ^ u64::from(traced);
    for (n, k, d) in shape {
        h = (h ^ n.as_ptr() as u64 ^ (*k as u64) << 1 ^ u64::from(*d))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    (h >> 58) as usize % SITE_SLOTS
}

/// The spans this process's layers hold open, with their keys and data
/// (see `open_spans.rs`; a span past its slots' room keeps them in the
/// registry's extensions of the span instead). 4,096 slots of 192 bytes,
/// 768 KiB of `.bss`, touched as spans use them: room for a service's
/// open spans without a slot's neighbours filling up (the tokio service
/// bench keeps 64 requests in flight, a few spans open in each).
pub(super) static OPEN: OpenSpans<SpanData, 4096> = OpenSpans::new();

/// The key of span `id` of layer `owner` (0: not one of its spans), for a
/// span the caller holds open: one being entered, a parent handed in, one
/// being closed. From the table of open spans: a span is entered on other
/// threads than its maker's (tokio moves tasks between workers, and the
/// blocking pool runs their closures), and the registry's lookup of its
/// extensions took a slot's reference count and a lock, on lines every
/// worker writes. A span past the table's room: from the registry.
#[inline]
pub(super) fn key_of<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    owner: u64,
    id: &Id,
) -> u64 {
    match OPEN.key(owner, id.into_u64()) {
        Some(key) => key,
        None => overflow_key(ctx, id),
    }
}

/// `f` on the data of span `id` of layer `owner`: in the table of open
/// spans, or past its room in the registry's extensions of the span
/// (`None`: in neither).
pub(super) fn with_data<S: Subscriber + for<'a> LookupSpan<'a>, R>(
    ctx: &Context<'_, S>,
    owner: u64,
    id: &Id,
    f: impl FnOnce(&mut SpanData) -> R,
) -> Option<R> {
    let mut f = Some(f);
    if let Some(r) = OPEN.with(owner, id.into_u64(), |d| f.take().map(|f| f(d))) {
        return r;
    }
    let f = f.take()?;
    let span = ctx.span(id)?;
    let mut ext = span.extensions_mut();
    ext.get_mut::<SpanData>().map(f)
}

/// The key of span `id` kept past the table's room, in the registry's
/// extensions of the span (0: none).
pub(super) fn overflow_key<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    id: &Id,
) -> u64 {
    ctx.span(id)
        .and_then(|s| s.extensions().get::<SpanData>().map(|d| d.key))
        .unwrap_or(0)
}

/// A trace context as a traced span's site holds it (see
/// `bridge::CONTEXT_ARGS`): its ids as lowercase hex text, which the file
/// packs as their bytes, then its flags. With `inherits`, the trace id is
/// left out (empty): the span is of its parent's trace (format version 9),
/// and a trace's 16 bytes are written once, with its outermost span, not
/// again with each span inside it.
#[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
pub(super) fn encode_context(
    trace_id: Option<[u8; 16]>,
    span_id: [u8; 8],
    flags: u8,
    out: &mut Vec<u8>,
) {
    fn hex(bytes: &[u8], out: &mut Vec<u8>) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        out.extend_from_slice(&(2 * bytes.len() as u32).to_le_bytes());
        for &b in bytes {
            out.push(DIGITS[usize::from(b >> 4)]);
            out.push(DIGITS[usize::from(b & 15)]);
        }
    }
    hex(trace_id.as_ref().map_or(&[][..], |t| &t[..]), out);
    hex(&span_id, out);
    out.push(flags);
}

/// The trace id in a context as [`encode_context`] made it (`None`: left
/// out, or not there).
#[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
pub(super) fn context_trace(context: &[u8]) -> Option<&[u8]> {
    let (len, rest) = context.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    rest.get(..len).filter(|t| !t.is_empty())
}
