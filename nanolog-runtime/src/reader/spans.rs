//! A file's span index: the contexts of its SPAN entries (a span entered
//! inside its parent), their file ids, the entries waiting for a site, and
//! the spans a record was made in, as the reader gives them.

use crate::text::render;
use crate::wire::dict::{self, SiteEntry};
use crate::wire::record::{with_values, Strings};

/// The context of records whose spans the file does not hold whole (a
/// SPAN entry lost to damage): they show the spans that are known, and say
/// that some are lost.
pub(crate) const LOST_CONTEXT: u32 = u32::MAX;
pub(crate) use crate::wire::{RECOVERED_CONTEXT, RECOVERED_LOST_CONTEXT};

/// A file's context ids (SPAN entries) to indices into its spans, plus
/// one. The flusher numbers a file's contexts one after another, so while
/// they come so this is an offset, with no memory per span; it turns into
/// a map when they do not (a damaged entry skipped, a wrapped counter).
#[derive(Debug, Default)]
struct ContextIds {
    /// The first context id, and how many follow it one by one.
    base: u32,
    dense: u32,
    map: Option<std::collections::HashMap<u32, u32>>,
}

impl ContextIds {
    fn get(&self, ctx: u32) -> Option<u32> {
        if let Some(m) = &self.map {
            return m.get(&ctx).copied();
        }
        let i = ctx.checked_sub(self.base)?;
        (i < self.dense).then(|| i + 1)
    }

    /// `ctx` is the span at index `ix1 - 1` (the one last pushed).
    fn insert(&mut self, ctx: u32, ix1: u32) {
        if let Some(m) = &mut self.map {
            m.insert(ctx, ix1);
            return;
        }
        if self.dense == 0 {
            self.base = ctx;
        }
        if ctx.checked_sub(self.base) == Some(self.dense) && ix1 == self.dense + 1 {
            self.dense += 1;
            return;
        }
        let mut m: std::collections::HashMap<u32, u32> =
            (0..self.dense).map(|i| (self.base + i, i + 1)).collect();
        m.insert(ctx, ix1);
        self.map = Some(m);
    }
}

/// A context as indexed: a span entered inside its parent.
#[derive(Debug, Clone)]
pub(crate) struct SpanDef {
    /// Its context id in the file (as context switches name it).
    id: u32,
    /// The parent's index in the file's spans, plus one (0: outermost;
    /// `LOST_CONTEXT`: its entry was lost).
    parent: u32,
    /// Its chain is cut: its parent's entry, or an outer one's, was lost.
    cut: bool,
    pub(super) site: u32,
    pub(super) tick: u64,
    /// Its arguments' bytes in the file.
    pub(super) args: std::ops::Range<usize>,
}

/// A span a record was made in: its site (name, field names and kinds)
/// and its field values.
#[derive(Debug, Clone, Copy)]
pub struct SpanRef<'a> {
    /// The context it opened (see [`SpanRef::context`]).
    pub(super) ctx: u32,
    pub(super) site: &'a SiteEntry,
    pub(super) args: &'a [u8],
    pub(super) tick: u64,
    pub(super) strings: Strings<'a>,
}

impl<'a> SpanRef<'a> {
    /// The span's name (`request` in `span!("request", id = 7)`).
    pub fn name(&self) -> &'a str {
        &self.site.format
    }

    /// Its site: where it was made, its field names and kinds.
    pub fn site(&self) -> &'a SiteEntry {
        self.site
    }

    /// The tick at which it was entered.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The context it opened: the [`Record::context`](super::Record::context)
    /// of the records made in it and in no span inside it. Spans of the
    /// same context are the same span, so what is made of a span (a
    /// shipper's encoding) can be made once and kept by it.
    pub fn context(&self) -> u32 {
        self.ctx
    }

    /// Its fields by name, in order (the span's key left out).
    pub fn fields(&self) -> Vec<(&'a str, crate::wire::record::Value<'a>)> {
        let mut v = Vec::new();
        self.for_each_field(|name, value| v.push((name, value)));
        v
    }

    /// Calls `f` with each field's name and value, in order (as
    /// [`SpanRef::fields`], without allocating for up to 8 values).
    pub fn for_each_field(&self, f: impl FnMut(&'a str, crate::wire::record::Value<'a>)) {
        self.for_each_value(false, f);
    }

    /// Its W3C trace context, if it carries one: as an OpenTelemetry layer
    /// assigned it (the site's context arguments), else as its own
    /// `trace_id` and `span_id` fields say (see
    /// [`TraceContext`](super::TraceContext)).
    pub fn trace_context(&self) -> Option<super::TraceContext> {
        self.trace_context_within(None)
    }

    /// The trace context of the records made in it, given that of the
    /// records made in its parent (`outer`): its own ids when it carries
    /// them (a span id with an empty trace id is of `outer`'s trace), else
    /// `outer`'s. [`Record::trace_context`](super::Record::trace_context)
    /// is this applied from the outermost span in; a caller that keeps
    /// what it made of each span ([`SpanRef::context`]) can keep this too.
    pub fn trace_context_in(
        &self,
        outer: Option<super::TraceContext>,
    ) -> Option<super::TraceContext> {
        // (Most spans have no ids: their values are not decoded.)
        if !self.site.may_carry_trace() {
            return outer;
        }
        self.trace_context_within(outer.map(|t| t.trace_id))
            .or(outer)
    }

    /// Its trace context inside spans whose trace is `outer` (the nearest
    /// of them with one): a span with a span id and an empty trace id is of
    /// that trace (see [`TraceContext`](super::TraceContext)).
    pub(crate) fn trace_context_within(
        &self,
        outer: Option<[u8; 16]>,
    ) -> Option<super::TraceContext> {
        super::TraceContext::of_fields_within(outer, |f| self.for_each_value(true, f))
    }

    /// Its named values in order: the fields, then (`context`) the trace
    /// context arguments, which come after them; never the key.
    fn for_each_value(
        &self,
        context: bool,
        mut f: impl FnMut(&'a str, crate::wire::record::Value<'a>),
    ) {
        let site = self.site;
        with_values(&site.kinds, self.args, self.strings, |vals| {
            // The last value is the span's key, not a field; the trace
            // context is not one either.
            let named = vals.len().saturating_sub(1);
            let fields = if context {
                named
            } else {
                named.saturating_sub(site.context_args)
            };
            for (i, v) in vals[..fields].iter().enumerate() {
                f(site.names.get(i).map_or("", String::as_str), *v);
            }
        });
    }

    /// Appends `name{k=v ..}` (`name` alone without fields), as
    /// tracing-subscriber's fmt prints a span.
    pub fn render(&self, out: &mut String) {
        let site = self.site;
        with_values(&site.kinds, self.args, self.strings, |vals| {
            render::format_message(&site.pieces, &site.kinds, vals, out)
        });
    }
}

/// The contexts of a file's SPAN entries, in file order, with their ids.
#[derive(Debug, Default)]
pub(crate) struct SpanIndex {
    defs: Vec<SpanDef>,
    /// While indexing: the index (plus one) of each live context id.
    ids: ContextIds,
    /// SPAN entries read before a site of theirs, with where they are (see
    /// `LogFile::span_batch`): a SITE entry lost to damage is restated by
    /// the next write, after them.
    waiting: Vec<(usize, Vec<u8>)>,
}

impl SpanIndex {
    /// Indexes a context: `args_at` is where its arguments start in the file.
    pub(super) fn add(&mut self, e: &dict::SpanEntry<'_>, args_at: usize) {
        // A parent whose entry was lost: the chain is cut there, and its
        // records say so (`Record::spans_lost`).
        let parent = match e.parent {
            0 => 0,
            p => self.ids.get(p).unwrap_or(LOST_CONTEXT),
        };
        // Known once, here: a record's spans are looked up for every record.
        let cut = parent == LOST_CONTEXT
            || parent
                .checked_sub(1)
                .and_then(|i| self.defs.get(i as usize))
                .is_some_and(|p| p.cut);
        self.defs.push(SpanDef {
            id: e.ctx,
            parent,
            cut,
            site: e.site,
            tick: e.tick,
            args: args_at..args_at + e.args.len(),
        });
        self.ids.insert(e.ctx, self.defs.len() as u32);
    }

    /// The index (plus one) of the file's context id `ctx`, if indexed.
    pub(super) fn index_of(&self, ctx: u32) -> Option<u32> {
        self.ids.get(ctx)
    }

    /// The context (an index into the spans, plus one; 0: none) of the
    /// file's context id `ctx`; [`LOST_CONTEXT`] for one not indexed.
    pub(super) fn context_of(&self, ctx: u32) -> u32 {
        // (A recovery's contexts are no span's: see `Record::recovered`.)
        if ctx == 0 || ctx == RECOVERED_CONTEXT || ctx == RECOVERED_LOST_CONTEXT {
            return ctx;
        }
        self.ids.get(ctx).unwrap_or(LOST_CONTEXT)
    }

    /// Whether the spans of context `ctx` are not all known (see
    /// `LogFile::context_lost`).
    pub(super) fn context_lost(&self, ctx: u32) -> bool {
        ctx != 0
            && ctx != RECOVERED_CONTEXT
            && ctx
                .checked_sub(1)
                .and_then(|i| self.defs.get(i as usize))
                .is_none_or(|d| d.cut)
    }

    /// Calls `f` with each span of context `ctx` (its context, its
    /// definition), outermost first, without allocating for up to 32
    /// nested spans.
    pub(super) fn chain<'a>(&'a self, mut ctx: u32, mut f: impl FnMut(u32, &'a SpanDef)) {
        // The chain from the innermost; past 32, the outer rest in `more`.
        let mut chain = [0u32; 32];
        let mut n = 0;
        let mut more = Vec::new();
        while let Some(d) = ctx.checked_sub(1).and_then(|i| self.defs.get(i as usize)) {
            if n < chain.len() {
                chain[n] = ctx;
                n += 1;
            } else {
                more.push(ctx);
            }
            // Parents come before their children in the file: the chain
            // only goes down, so a damaged file cannot loop.
            ctx = if d.parent < ctx { d.parent } else { 0 };
        }
        for &c in more.iter().rev().chain(chain[..n].iter().rev()) {
            f(c, &self.defs[c as usize - 1]);
        }
    }

    /// The file's context ids of trace `trace` that a writer's INDEX
    /// entries name (see FORMAT.md, "INDEX"): of the spans that may carry
    /// trace ids (`anchor`), those whose records are of that trace, as
    /// [`Record::trace_context`](super::Record::trace_context) finds it
    /// (`traced` gives a span's own trace id, if its values hold one; else
    /// its parent's counts: parents come first).
    pub(super) fn in_trace(
        &self,
        trace: [u8; 16],
        anchor: impl Fn(&SpanDef) -> bool,
        traced: impl Fn(&SpanDef) -> Option<[u8; 16]>,
    ) -> Vec<u32> {
        let mut inner: Vec<Option<[u8; 16]>> = Vec::with_capacity(self.defs.len());
        let mut ids = Vec::new();
        for d in &self.defs {
            let parent = d.parent.checked_sub(1).and_then(|i| inner.get(i as usize));
            let t = traced(d).or_else(|| parent.copied().flatten());
            if t == Some(trace) && anchor(d) {
                ids.push(d.id);
            }
            inner.push(t);
        }
        ids
    }

    /// A SPAN entry at `start` (its body `body`) waits for a site of its.
    pub(super) fn wait(&mut self, start: usize, body: Vec<u8>) {
        self.waiting.push((start, body));
    }

    /// Whether SPAN entries wait for a site.
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The SPAN entries waiting for a site, taken out.
    pub(super) fn take_waiting(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::ContextIds;

    /// Consecutive ids take no map; a gap, a repeat or a wrap turns the
    /// table into one, and every id found before is found after.
    #[test]
    fn context_ids_are_an_offset_until_they_skip() {
        let mut ids = ContextIds::default();
        assert_eq!(ids.get(0), None);
        for (i, ctx) in (500..600).enumerate() {
            ids.insert(ctx, i as u32 + 1);
        }
        assert!(ids.map.is_none());
        assert_eq!(ids.get(499), None);
        assert_eq!(ids.get(500), Some(1));
        assert_eq!(ids.get(599), Some(100));
        assert_eq!(ids.get(600), None);
        // A skipped id (a damaged SPAN entry left out).
        ids.insert(602, 101);
        assert!(ids.map.is_some());
        assert_eq!(ids.get(500), Some(1));
        assert_eq!(ids.get(599), Some(100));
        assert_eq!(ids.get(601), None);
        assert_eq!(ids.get(602), Some(101));
        // A repeated id: the newest entry wins, as it did.
        ids.insert(500, 102);
        assert_eq!(ids.get(500), Some(102));

        // The flusher's counter wraps from u32::MAX to 1.
        let mut ids = ContextIds::default();
        ids.insert(u32::MAX - 1, 1);
        ids.insert(u32::MAX, 2);
        assert!(ids.map.is_none());
        ids.insert(1, 3);
        assert_eq!(
            [u32::MAX - 1, u32::MAX, 1].map(|c| ids.get(c)),
            [Some(1), Some(2), Some(3)]
        );
    }
}
