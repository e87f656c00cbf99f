//! The typed path: an event callsite learnt from its first event, its
//! later events written as raw values, nothing formatted or allocated.

use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing_core::field::{Field, Visit};
use tracing_core::Event;

use std::sync::PoisonError;

use super::*;
use crate::bridge::Arg;
use crate::wire::format::ArgKind;

/// The typed path of an event callsite, learnt from its first event: its
/// message is the same text every time (kept in the site as literal text)
/// and its fields are numbers, bools and strings of fixed kinds, so an event
/// is written as raw values, nothing formatted or allocated.
pub(super) struct Typed {
    pub(super) message: Option<Box<str>>,
    pub(super) kinds: Box<[ArgKind]>,
    pub(super) site: &'static crate::site::Site,
    /// An event of the callsite did not fit: its message varies after all
    /// (`"{}", name` is one piece of text too). The callsite takes the
    /// formatting path from then on.
    pub(super) demoted: std::sync::atomic::AtomicBool,
}

/// Per callsite (its metadata's address): `Some` with its typed path,
/// `None` for a callsite that takes the formatting path.
pub(super) type TypedTable = std::collections::HashMap<usize, Option<&'static Typed>>;
pub(super) static TYPED: std::sync::RwLock<Option<TypedTable>> = std::sync::RwLock::new(None);

pub(super) const TYPED_SLOTS: usize = 64;

/// The most fields an event of the typed path has.
pub(super) const MAX_TYPED_FIELDS: usize = 16;

/// Bytes of an event's values the typed path stages; an event with more
/// (long strings) takes the formatting path.
pub(super) const STAGE_BYTES: usize = 1024;

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

pub(super) struct TypedTls {
    /// Recently seen callsites (by metadata address) and their typed paths.
    pub(super) recent: [std::cell::Cell<(usize, Option<&'static Typed>)>; TYPED_SLOTS],
    /// The values of the event being written, encoded.
    pub(super) stage: std::cell::RefCell<Stage>,
}

/// An event's values, encoded, on their way to the ring. They are kept in
/// the thread-local block, not on the heap: a small heap buffer written
/// per event can share a cache line with data the flusher reads per record
/// (a site's kinds), and each event then moved that line between the
/// cores (measured: 16 M events/s from one thread with a heap buffer of a
/// few bytes, 19.5 M/s with one far from the rest).
pub(super) struct Stage {
    pub(super) bytes: [u8; STAGE_BYTES],
    pub(super) len: usize,
}

impl Stage {
    /// Appends `bytes`; `false` (nothing appended) when they do not fit.
    #[inline(always)]
    pub(super) fn put(&mut self, bytes: &[u8]) -> bool {
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

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The callsite's typed path, if it has one (learnt from `event` on its
/// first sight); `None` for callsites that take the formatting path.
#[inline(always)]
pub(super) fn typed(tls: &TypedTls, event: &Event<'_>) -> Option<&'static Typed> {
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
pub(super) fn typed_slow(event: &Event<'_>) -> Option<&'static Typed> {
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
pub(super) fn learn(event: &Event<'_>, origin: &Origin<'_>) -> Option<&'static Typed> {
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
        .map_or(crate::bridge::Head::None, crate::bridge::Head::Text);
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
pub(super) fn take_typed(event: &Event<'_>) -> bool {
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
pub(super) trait Put {
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
pub(super) struct SameText<'a> {
    pub(super) rest: &'a str,
    pub(super) same: bool,
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
pub(super) struct Collect<'a, P> {
    pub(super) t: &'static Typed,
    pub(super) n: usize,
    pub(super) out: &'a mut P,
    pub(super) fits: bool,
    /// Every value fitted in `out`.
    pub(super) room: bool,
    pub(super) message_seen: bool,
}

impl<'a, P: Put> Collect<'a, P> {
    pub(super) fn new(t: &'static Typed, out: &'a mut P) -> Self {
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
    pub(super) fn collect(&mut self, event: &Event<'_>) -> Option<bool> {
        event.record(self);
        let t = self.t;
        if !self.fits || self.n != t.kinds.len() || self.message_seen != t.message.is_some() {
            t.demoted.store(true, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        Some(self.room)
    }

    #[inline(always)]
    pub(super) fn put(&mut self, bytes: &[u8]) {
        self.room &= self.out.put(bytes);
    }

    /// The next value, encoded as the ring holds it if it is of the kind
    /// the site expects.
    #[inline(always)]
    pub(super) fn value(&mut self, v: Arg<&str>) {
        if self.expect(v.kind()) {
            v.encode_with(|b| self.put(b));
        }
    }

    /// Whether the next value, of `kind`, is the one the site expects.
    #[inline(always)]
    pub(super) fn expect(&mut self, kind: ArgKind) -> bool {
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
pub(super) fn write_typed(tls: &TypedTls, t: &'static Typed, event: &Event<'_>) -> bool {
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
pub(super) fn write_typed_large(t: &'static Typed, event: &Event<'_>) -> bool {
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
