//! Call-site descriptors: what the macro emits once per call site, and the
//! process-wide table that gives each site a small id on its first call.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::compact::CompactFn;
use crate::filter;
use crate::level::Level;
use crate::wire::format::{ArgKind, Piece, Role};
use crate::wire::frame::{begin_entry, end_entry};
use crate::wire::{dict, tag};

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
    /// A log record's site, or a span's entry or exit.
    pub role: Role,
    /// How many of `pieces` render the message; the rest render a bridge
    /// record's fields (`usize::MAX`: all of them).
    pub message_pieces: usize,
    /// A span's site: how many of its arguments, before its key, are its
    /// trace context (`trace_id`, `span_id`, `trace_flags`, as an
    /// OpenTelemetry layer assigned them), not fields: no piece renders
    /// them. 0 for every other site.
    pub context_args: usize,
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
            role: Role::Record,
            message_pieces: usize::MAX,
            context_args: 0,
            interest: AtomicU8::new(filter::UNDECIDED),
            id: AtomicU32::new(0),
        }
    }

    /// The site of a span (`nanolog::span!`, a `tracing` span's callsite):
    /// `name` is the span's name, `pieces` render it as `name{k=v ..}`;
    /// its arguments are the fields, then the span's key. Spans pass no
    /// filter: the records inside them are what the filter selects.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn span(
        name: &'static str,
        target: &'static str,
        file: &'static str,
        line: u32,
        module: &'static str,
        pieces: &'static [Piece],
        names: &'static [&'static str],
    ) -> Site {
        let mut s = Site::new(Level::Info, target, file, line, module, name, pieces, names);
        s.role = Role::Span;
        s.interest = AtomicU8::new(filter::ENABLED);
        s
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

    /// The one site of span exits (see `span.rs`).
    pub(crate) const fn span_exit() -> Site {
        let mut s = Site::new(
            Level::Info,
            "nanolog::span",
            "<span exit>",
            0,
            "nanolog::span",
            "",
            &[],
            &[],
        );
        s.role = Role::SpanExit;
        s.interest = AtomicU8::new(filter::ENABLED);
        s
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
    pub(crate) fn id_dyn(&'static self, kinds: &[ArgKind]) -> u32 {
        // Acquire: as in `id`.
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        register(self, kinds, None)
    }
}

impl filter::Callsite for Site {
    fn level(&self) -> Level {
        self.level
    }

    fn target(&self) -> &str {
        self.target
    }

    fn interest(&self) -> u8 {
        self.interest.load(Ordering::Relaxed)
    }

    fn set_interest(&self, i: u8) {
        // A span's site stays enabled whatever the filter.
        if self.role == Role::Record {
            self.interest.store(i, Ordering::Relaxed);
        }
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
    /// A span site with a field named `span_id`: its spans may carry W3C
    /// trace ids (the flusher's INDEX entries name them; known once here,
    /// not by comparing names at each span chain the flusher resolves).
    pub traced: bool,
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
        traced: site.names.contains(&"span_id"),
    })));
    let id = (table.len() - 1) as u32;
    // (A billion call sites: ids above carry a flag in the rings.)
    debug_assert!(id < crate::ring::WITH_CONTEXT, "site ids exhausted");
    // Into the crash-safe area before any record of it can be in a ring.
    // (A full disk: the site's records are recovered as unreadable gaps.)
    #[cfg(all(unix, not(loom)))]
    if let (Some(Some(reg)), Some(area)) = (
        table.last(),
        DICTIONARY
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref(),
    ) {
        let mut entry = Vec::new();
        put_entry(&mut entry, id, reg);
        let _ = area.add_entry(&entry);
    }
    site.id.store(id, Ordering::Release);
    id
}

/// Appends the SITE entry of the site registered as `id` to `out`: what
/// the log's dictionary holds of it, and the crash-safe area's.
pub(crate) fn put_entry(out: &mut Vec<u8>, id: u32, info: &Registration) {
    let s = info.site;
    let start = begin_entry(out, tag::SITE);
    dict::put_site(
        out,
        &dict::SiteEntryRef {
            id,
            level: s.level,
            file: s.file,
            line: s.line,
            module: s.module,
            format: s.format,
            kinds: &info.kinds,
            pieces: s.pieces,
            target: s.target,
            names: s.names,
            role: s.role,
            message_pieces: s.message_pieces,
            context_args: s.context_args,
        },
    );
    end_entry(out, start);
}

/// The crash-safe area (`crate::crash`) the sites' entries go into as
/// they register: the running logger's. Set and read under `TABLE`'s lock,
/// so no site is missed between the sites written at attach and the next.
#[cfg(all(unix, not(loom)))]
static DICTIONARY: Mutex<Option<Arc<crate::crash::Area>>> = Mutex::new(None);

/// Makes `area` the one sites' entries go into: every site registered so
/// far now, each later one as it registers. False if the area cannot take
/// them (its file cannot grow).
#[cfg(all(unix, not(loom)))]
pub(crate) fn attach_dictionary(area: &Arc<crate::crash::Area>) -> bool {
    let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    let mut entry = Vec::new();
    for (id, reg) in table.iter().enumerate() {
        if let Some(r) = reg {
            entry.clear();
            put_entry(&mut entry, id as u32, r);
            if !area.add_entry(&entry) {
                return false;
            }
        }
    }
    *DICTIONARY.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(area));
    true
}

/// Sites registered from now on go into no area.
#[cfg(all(unix, not(loom)))]
pub(crate) fn detach_dictionary() {
    let _table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    *DICTIONARY.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// The descriptor of a registered site.
pub(crate) fn lookup(id: u32) -> Option<Arc<Registration>> {
    let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    table.get(id as usize).cloned().flatten()
}
