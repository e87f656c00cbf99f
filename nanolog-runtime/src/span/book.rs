//! The flusher's side of spans: the spans it knows (`nanolog::span!`s from
//! the rings, `tracing` spans copied from the process's [`table`] as records
//! need them), each thread's context as its switches say, and the
//! resolution of a record's context: the chain of spans from its leaf to
//! the root, each with the values it had at the record's tick, as the
//! file's SPAN entries (written before their first use, once per file).
//!
//! It writes through [`SpanFile`], the file being written as the flusher
//! keeps it: this room knows no writer, buffer or mirror.

use std::sync::atomic::Ordering;

use super::mail;

mod keep;
use super::table::{self, KeyMap, Op, SpanBytes, Version};
use crate::wire::format::{ArgKind, Role};
use crate::wire::record::{self, Value};
use crate::wire::LOST_CONTEXT;
pub(crate) use keep::forget_all_closed;

/// What resolving a context needs of the file being written.
pub(crate) trait SpanFile {
    /// The file's generation: contexts and SPAN entries are per file (a
    /// new file, or a write that may have lost the last, begins again).
    fn generation(&self) -> u64;
    /// Whether span site `site` is known to the flusher (a version of a
    /// site it cannot find is not kept).
    fn knows_site(&mut self, site: u32) -> bool;
    /// Puts the SPAN entry of context `ctx`, inside context `parent`, from
    /// tick `from`: span site `site`'s fields `raw` as the ring holds them
    /// (the file compacts them against its strings; the site's own entry
    /// goes ahead if the file lacks it).
    fn put_span(&mut self, ctx: u32, parent: u32, site: u32, from: u64, raw: &[u8]);
    /// `name{k=v ..}` of a span for the text mirror; `None` without one
    /// (and the mirror, which wants each record's chain, resolves each
    /// record's context whole).
    fn span_text(&mut self, site: u32, raw: &[u8]) -> Option<String>;
    /// Whether a text mirror wants the chains' texts.
    fn mirrored(&self) -> bool;
    /// Whether span site `site` has a field named `span_id` (a span that
    /// may carry W3C trace ids): a record's innermost such span is what
    /// the write's INDEX entry names for it (`Resolved::anchor`).
    fn traced(&mut self, site: u32) -> bool;
}

/// A thread's span context, as the flusher follows it.
#[derive(Default)]
pub(crate) struct Context {
    /// The key of the span current on the thread (0: none), as its
    /// switches say.
    key: u64,
    /// The key changed since the thread's last record: its next record
    /// resolves its context again.
    changed: bool,
    /// The context its records are in, as last resolved.
    pub(crate) resolved: Resolved,
    /// `name{k=v ..}` of each span of the chain, outermost first, as the
    /// text mirror prints them (empty without a mirror).
    pub(crate) texts: Vec<String>,
}

impl Context {
    /// The key of the span current on the thread (0: none).
    pub(crate) fn key(&self) -> u64 {
        self.key
    }

    /// Span `now` is current on the thread from its next record on (a
    /// switch record, an exit, or a record that carries its context: see
    /// `ring::WITH_CONTEXT`). A switch back to the span resolved last needs
    /// no new resolution: it still holds.
    #[inline]
    pub(crate) fn switch_to(&mut self, now: u64) {
        self.changed |= now != self.key;
        self.key = now;
    }
}

/// A span's context in a file: valid for records from `from` up to
/// `until` (ticks at which a span of its chain took or takes new values),
/// while no span has changed since `epoch`.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Resolved {
    generation: u64,
    /// The context (file id) of the chain: 0, no span.
    pub(crate) ctx: u32,
    /// The context (file id) of its innermost span that may carry trace
    /// ids ([`SpanFile::traced`]): 0, none.
    pub(crate) anchor: u32,
    from: u64,
    /// Records from this tick on need another resolution.
    pub(crate) until: u64,
    epoch: u64,
}

impl Resolved {
    /// Whether it holds for a record at `tick` in file `generation`, as
    /// far as the versions it knew say (the spans' later ones are checked
    /// by epoch, see `Book::resolve`).
    #[inline]
    fn holds(&self, generation: u64, tick: u64) -> bool {
        self.generation == generation && self.from <= tick && tick < self.until
    }
}

impl Default for Resolved {
    /// Outside spans in the first file, with nothing due to change: a
    /// thread that never enters a span is never resolved, and its runs of
    /// a macro site's records keep the site's own compaction (an `until`
    /// of 0 here sent every record through the interpreted path: 100 ->
    /// 60 M records/s, found by alternating with the old build).
    fn default() -> Self {
        Resolved {
            generation: 0,
            ctx: 0,
            anchor: 0,
            from: 0,
            until: u64::MAX,
            epoch: 0,
        }
    }
}

/// The spans the flusher knows of: `nanolog::span!`s from the rings,
/// `tracing` spans copied from the process's table as they are needed.
#[derive(Default)]
pub(crate) struct Book {
    spans: KeyMap<Known>,
    /// The table's epoch when the copies were last brought up to date.
    epoch: u64,
    /// `tracing` spans closed, taken at the start of this pass: forgotten
    /// at its end (every record logged before the close is drained by then).
    closed: Vec<u64>,
    /// `nanolog::span!`s exited in the last pass and in this one: forgotten
    /// at the end of the pass after their exit's (other rings, drained
    /// before it in a pass, may hold records of their `tracing` children).
    exited_last: Vec<u64>,
    exited_now: Vec<u64>,
    /// While rings wait pass after pass: per such pass, its start and how
    /// many of `closed` and `exited_now` it had taken by its end. Held
    /// closes and exits are forgotten once a grace older than the pass
    /// (a record waits a pass, not a grace), so memory stays bounded by the
    /// spans closed in a grace however long rings keep waiting.
    held: Vec<(u64, usize, usize)>,
    /// The epoch at the last prune of versions.
    pruned_epoch: u64,
    /// When versions were last pruned (ticks).
    pruned_at: u64,
    /// Spans had versions to prune after the last prune.
    versioned: bool,
    /// The last context id given (unique within a file while live).
    last_ctx: u32,
    /// The chain of spans being resolved, and a span's versions copied
    /// from the table (each kept for its allocation).
    chain: Vec<u64>,
    copied: Vec<Version>,
    /// The threads' changes to `tracing` spans from their mailboxes, as
    /// taken, and those held for the next taking (a new value or a close
    /// of a span whose definition came in a mailbox taken before it was
    /// posted: see `mail`).
    taken: Vec<Op>,
    rest: Vec<Op>,
    later: Vec<Op>,
    /// A mailbox's bytes, swapped out of it to be read (see `mail::take`).
    letters: Vec<u8>,
    /// Closes from mailboxes, taken into `closed` at the next pass's start
    /// (one taken in the middle of a pass may follow records in rings
    /// whose tails this pass read already).
    mail_closed: Vec<u64>,
    /// Spans defined through the mailboxes with more than one version.
    mail_versioned: std::collections::HashSet<u64, std::hash::BuildHasherDefault<table::KeyHasher>>,
}

/// A span the flusher knows.
struct Known {
    parent: u64,
    /// A `tracing` span: defined through a mailbox, or copied from the
    /// table (`in_table`).
    tracing: bool,
    in_table: bool,
    /// Its field values from each version's tick on, the first from 0
    /// (most spans have one: inline).
    versions: smallvec::SmallVec<[KnownVersion; 1]>,
    /// Its SPAN entries in the current file (most have one: inline).
    entries: smallvec::SmallVec<[Written; 1]>,
    /// Spans in the book whose parent it is: a `nanolog::span!` exited
    /// before its children is kept until they are forgotten.
    children: u32,
    /// A `nanolog::span!` exited (and past the pass after its exit).
    exited: bool,
    /// Its chain's context as last resolved whole: every thread whose
    /// records are in it (workers that poll a request's tasks in turn)
    /// takes it while it holds.
    resolved: Option<Resolved>,
    /// The table's epoch when its versions last changed (0: as first
    /// known): a resolution made at a later epoch still holds for it.
    stamp: u64,
}

impl Known {
    /// A `tracing` span made while a logger runs, as its maker's mailbox
    /// brought it: its one version (a site the flusher cannot find shows
    /// no fields, as `copy_versions` has it).
    fn from_mail(parent: u64, site: u32, raw: SpanBytes, file: &mut impl SpanFile) -> Known {
        let raw = if file.knows_site(site) {
            raw
        } else {
            SpanBytes::new()
        };
        Known {
            parent,
            tracing: true,
            in_table: false,
            versions: smallvec::smallvec![KnownVersion { tick: 0, site, raw }],
            entries: smallvec::SmallVec::new(),
            children: 0,
            exited: false,
            resolved: None,
            stamp: 0,
        }
    }
}

/// A SPAN entry of a span, in the file of generation `generation`: the
/// version of tick `vtick`, under context `parent`, as context `ctx`, said
/// to begin at `from`.
#[derive(Debug, Clone, Copy)]
struct Written {
    generation: u64,
    vtick: u64,
    parent: u32,
    ctx: u32,
    from: u64,
}

impl Book {
    /// Puts span `key` in the book, counted as its parent's child.
    fn insert(&mut self, key: u64, known: Known) {
        if let Some(p) = self.spans.get_mut(&known.parent) {
            p.children += 1;
        }
        if let Some(old) = self.spans.insert(key, known) {
            self.orphan(old.parent);
        }
    }

    /// Forgets span `key`, and then its parent if that was kept only for it.
    fn forget(&mut self, key: u64) {
        if let Some(old) = self.spans.remove(&key) {
            self.orphan(old.parent);
        }
    }

    /// A child of `parent` was forgotten.
    fn orphan(&mut self, mut parent: u64) {
        while let Some(p) = self.spans.get_mut(&parent) {
            p.children = p.children.saturating_sub(1);
            if !(p.exited && p.children == 0) {
                return;
            }
            let next = p.parent;
            self.spans.remove(&parent);
            parent = next;
        }
    }
}

struct KnownVersion {
    tick: u64,
    site: u32,
    /// Its arguments as its ring record (or the table) held them: each
    /// file compacts them against its own strings. Inline up to 64 bytes:
    /// the flusher allocates nothing for most spans, and frees nothing.
    raw: SpanBytes,
}

/// The longest chain of spans followed (a deeper one is cut at its root end).
const MAX_DEPTH: usize = 256;

impl Book {
    /// A switch, or a `nanolog::span!` entered or exited, on the ring's
    /// thread (a record of site `site`, of role `role` and argument kinds
    /// `kinds`): the span current on it changes; the file learns of it
    /// before the thread's next record ([`Book::resolve`]), so spans
    /// without records inside cost the file nothing.
    pub(crate) fn span_record(
        &mut self,
        r: &mut Context,
        role: Role,
        site: u32,
        kinds: &[ArgKind],
        raw: &[u8],
    ) {
        // A switch, or an exit: one or two `u64`s as the ring holds them
        // (8 bytes little-endian each), read in place.
        let word = |i: usize| {
            raw.get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
        };
        if role != Role::Span {
            let now = match (word(0), word(1)) {
                // A `nanolog::span!`'s exit: (its key, the span current again).
                (Some(exited), Some(now)) => {
                    self.exited_now.push(exited);
                    now
                }
                // A switch: the span current now.
                (Some(now), None) => now,
                _ => {
                    debug_assert!(false, "span bookkeeping record without its key");
                    return;
                }
            };
            r.switch_to(now);
            return;
        }
        let mut args = Vec::new();
        if record::compact(kinds, raw, &mut args).is_none() {
            debug_assert!(false, "span record does not match its site");
            return;
        }
        let key = match kinds
            .len()
            .checked_sub(1)
            .and_then(|i| record::nth_arg(kinds, &args, 0, i, record::Strings::NUMBERED))
        {
            Some(Value::Uint(v)) => v as u64,
            _ => {
                debug_assert!(false, "span record without its key");
                return;
            }
        };
        r.changed = true;
        // A `nanolog::span!`, entered inside the thread's current span.
        self.insert(
            key,
            Known {
                parent: r.key,
                tracing: false,
                in_table: false,
                versions: smallvec::smallvec![KnownVersion {
                    tick: 0,
                    site,
                    raw: SpanBytes::from_slice(raw),
                }],
                entries: smallvec::SmallVec::new(),
                children: 0,
                exited: false,
                resolved: None,
                stamp: 0,
            },
        );
        r.key = key;
    }

    /// Whether the thread's resolved context still holds for its record at
    /// `tick` in the current file.
    #[inline(always)]
    pub(crate) fn fresh(&self, r: &Context, tick: u64, generation: u64) -> bool {
        let res = &r.resolved;
        !r.changed
            && res.generation == generation
            && (r.key == 0
                || tick < res.until
                // Acquire: pairs with the Release bump after a span's new
                // version is in the table, which `resolve` then reads.
                && res.epoch == table::EPOCH.load(Ordering::Acquire))
    }

    /// The thread's context for its record at `tick`: the chain of spans
    /// from its current one to the root, each with the values it had at
    /// `tick`; the SPAN entries (and sites) the file lacks for it are put
    /// through `file`.
    ///
    /// `None` (nothing written, nothing changed) when a span of the chain
    /// is not known and `partial_ok` is false: the caller waits a pass for
    /// its entry; with `partial_ok` the chain is cut there.
    pub(crate) fn resolve(
        &mut self,
        r: &mut Context,
        tick: u64,
        partial_ok: bool,
        file: &mut impl SpanFile,
    ) -> Option<u32> {
        let generation = file.generation();
        let mirrored = file.mirrored();
        let epoch = table::EPOCH.load(Ordering::Acquire);
        // The span's chain as resolved last, by any thread, if it still
        // holds (the mirror wants the chain's texts: it resolves each time).
        if !mirrored && r.key != 0 {
            let hit = self
                .spans
                .get(&r.key)
                .and_then(|sp| sp.resolved)
                .filter(|res| res.holds(generation, tick));
            if let Some(mut res) = hit {
                // Values recorded into spans since: it still holds if none
                // of them is in its chain (most records are in chains of
                // other requests than the one that changed).
                if res.epoch != epoch {
                    if epoch != self.epoch {
                        self.refresh_tracing(epoch, file);
                        self.epoch = epoch;
                    }
                    if self.unchanged_since(r.key, res.epoch) {
                        res.epoch = epoch;
                        if let Some(sp) = self.spans.get_mut(&r.key) {
                            sp.resolved = Some(res);
                        }
                    }
                }
                if res.epoch == epoch {
                    r.changed = false;
                    r.resolved = res;
                    return Some(res.ctx);
                }
            }
        }
        if epoch != self.epoch {
            self.refresh_tracing(epoch, file);
            self.epoch = epoch;
        }
        let mut chain = std::mem::take(&mut self.chain);
        chain.clear();
        let mut k = r.key;
        // The chain reaches its root, or the depth limit: the resolution
        // can be kept (a chain cut at a span not known yet cannot).
        let mut whole = true;
        while k != 0 && chain.len() < MAX_DEPTH && !chain.contains(&k) {
            if k & super::DROPPED_KEY != 0 {
                // Its definition was dropped: the chain is cut here, now.
                whole = false;
                break;
            }
            let Some(parent) = self.known(k, file) else {
                if !partial_ok {
                    self.chain = chain;
                    return None;
                }
                whole = false;
                break;
            };
            chain.push(k);
            k = parent;
        }
        r.changed = false;
        r.texts.clear();
        // A chain that does not reach its root (a span whose definition
        // never came, or one past the depth limit) hangs from the lost
        // context: its records say that spans are lost.
        let root = if k == 0 { 0 } else { LOST_CONTEXT };
        let (mut ctx, mut from, mut until) = (root, 0u64, u64::MAX);
        let mut anchor = 0;
        for &k in chain.iter().rev() {
            let Some(sp) = self.spans.get(&k) else {
                break;
            };
            let vi = sp
                .versions
                .partition_point(|v| v.tick <= tick)
                .saturating_sub(1);
            if let Some(next) = sp.versions.get(vi + 1) {
                until = until.min(next.tick);
            }
            let (vtick, site) = (sp.versions[vi].tick, sp.versions[vi].site);
            from = from.max(vtick);
            let found = sp
                .entries
                .iter()
                .find(|e| e.generation == generation && e.vtick == vtick && e.parent == ctx)
                .map(|e| e.ctx);
            let c = match found {
                Some(c) => c,
                None => {
                    self.last_ctx = self
                        .last_ctx
                        .checked_add(1)
                        .filter(|&c| c != LOST_CONTEXT)
                        .unwrap_or(1);
                    let c = self.last_ctx;
                    let Some(sp) = self.spans.get_mut(&k) else {
                        break;
                    };
                    // A `nanolog::span!` (no version tick) from the record
                    // that first needs it.
                    let from = if vtick == 0 { tick } else { vtick.min(tick) };
                    file.put_span(c, ctx, site, from, &sp.versions[vi].raw);
                    sp.entries.retain(|e| e.generation == generation);
                    sp.entries.push(Written {
                        generation,
                        vtick,
                        parent: ctx,
                        ctx: c,
                        from,
                    });
                    c
                }
            };
            if mirrored {
                if let Some(sp) = self.spans.get(&k) {
                    if let Some(text) = file.span_text(site, &sp.versions[vi].raw) {
                        r.texts.push(text);
                    }
                }
            }
            if file.traced(site) {
                anchor = c;
            }
            ctx = c;
        }
        r.resolved = Resolved {
            generation,
            ctx,
            anchor,
            from,
            until,
            epoch,
        };
        self.chain = chain;
        if whole {
            if let Some(sp) = self.spans.get_mut(&r.key) {
                sp.resolved = Some(r.resolved);
            }
        }
        Some(ctx)
    }

    /// Whether no span of `key`'s chain took new values after `epoch`
    /// (every span of it is in the book: a resolution of it was whole).
    fn unchanged_since(&self, mut key: u64, epoch: u64) -> bool {
        for _ in 0..MAX_DEPTH {
            if key == 0 {
                return true;
            }
            match self.spans.get(&key) {
                Some(sp) if sp.stamp <= epoch => key = sp.parent,
                _ => return false,
            }
        }
        true
    }

    /// Span `key`'s parent, with the span in the book (a `tracing` span
    /// from a mailbox, or copied from the process's table); `None` for a
    /// span not known (its definition lost: the chain is cut there).
    fn known(&mut self, key: u64, file: &mut impl SpanFile) -> Option<u64> {
        if let Some(sp) = self.spans.get(&key) {
            return Some(sp.parent);
        }
        // Not known: it may be in the table (made while no logger ran). Not
        // in a mailbox: the pass took them after it read the rings' tails
        // (`take_mail`), so with every definition a record it drains needs.
        self.copy_from_table(key, file)
    }

    /// Span `key` copied from the table into the book, if the table has
    /// it: its parent.
    fn copy_from_table(&mut self, key: u64, file: &mut impl SpanFile) -> Option<u64> {
        // Its versions copied out under the shard's lock into a buffer
        // kept for it (a clone of the definition allocated for each span).
        let mut copied = std::mem::take(&mut self.copied);
        copied.clear();
        let parent = table::table(key, |t| {
            let d = t.spans.get(&key)?;
            copied.extend(d.versions.iter().cloned());
            Some(d.parent)
        });
        let Some(parent) = parent else {
            self.copied = copied;
            return None;
        };
        let mut known = Known {
            parent,
            tracing: true,
            in_table: true,
            versions: smallvec::SmallVec::with_capacity(copied.len()),
            entries: smallvec::SmallVec::new(),
            children: 0,
            exited: false,
            resolved: None,
            stamp: 0,
        };
        copy_versions(&mut known, copied.drain(..), file);
        self.copied = copied;
        self.insert(key, known);
        Some(parent)
    }

    /// Brings the book's copies of `tracing` spans up to date with the
    /// table (values were recorded into some spans).
    fn refresh_tracing(&mut self, epoch: u64, file: &mut impl SpanFile) {
        // (The new values posted through mailboxes came with the pass's
        // `take_mail`: those a record of the pass can show.)
        let book = &self.spans;
        let mut defs: Vec<(u64, table::Def)> = Vec::new();
        let changed_in = table::CHANGED_IN.swap(0, Ordering::Acquire);
        table::tables_in(changed_in, |_, t| {
            let changed = t.changed.replace(Vec::new());
            let mut copy = |k: u64| {
                if let Some(d) = t.spans.get(&k) {
                    defs.push((k, d.clone()));
                }
            };
            match changed {
                Some(c) => c
                    .into_iter()
                    .filter(|k| book.contains_key(k))
                    .for_each(&mut copy),
                // Too many to list: every span of the book this shard holds.
                None => book
                    .iter()
                    .filter(|(_, sp)| sp.tracing)
                    .for_each(|(&k, _)| copy(k)),
            }
        });
        for (k, def) in defs {
            let Some(mut known) = self.spans.remove(&k) else {
                continue;
            };
            copy_versions(&mut known, def.versions.into_iter(), file);
            known.stamp = epoch;
            self.spans.insert(k, known);
        }
    }

    /// After the live file began again in place: every SPAN entry of this
    /// file once more, with the contexts it had, in the order they were
    /// made (a parent's before its children's). The records to come refer
    /// to them by those contexts; the entries themselves went with the
    /// file's old bytes.
    pub(crate) fn respan(&self, file: &mut impl SpanFile) {
        let generation = file.generation();
        let mut all: Vec<(u64, Written)> = self
            .spans
            .iter()
            .flat_map(|(&k, sp)| {
                sp.entries
                    .iter()
                    .filter(|e| e.generation == generation)
                    .map(move |e| (k, *e))
            })
            .collect();
        all.sort_unstable_by_key(|(_, e)| e.ctx);
        for (k, e) in all {
            let Some(v) = self
                .spans
                .get(&k)
                .and_then(|sp| sp.versions.iter().find(|v| v.tick == e.vtick))
            else {
                continue;
            };
            file.put_span(e.ctx, e.parent, v.site, e.from, &v.raw);
        }
    }
}

/// The table's `versions` of a `tracing` span into `known` (a version
/// already copied is kept as it is).
fn copy_versions(
    known: &mut Known,
    versions: impl Iterator<Item = Version>,
    file: &mut impl SpanFile,
) {
    let mut old = std::mem::take(&mut known.versions);
    let mut first_site = None;
    for v in versions {
        first_site.get_or_insert(v.site);
        if let Some(i) = old
            .iter()
            .position(|o| o.tick == v.tick && o.site == v.site)
        {
            known.versions.push(old.swap_remove(i));
            continue;
        }
        // A version of a site the flusher has (its fields were encoded for
        // that site's kinds by the layer; each file compacts them, see
        // `Book::resolve`).
        if file.knows_site(v.site) {
            known.versions.push(KnownVersion {
                tick: v.tick,
                site: v.site,
                raw: SpanBytes::from_slice(&v.raw),
            });
        }
    }
    if known.versions.is_empty() {
        // (A version of a site not found: the span shows no fields.)
        known.versions.push(KnownVersion {
            tick: 0,
            site: first_site.unwrap_or(0),
            raw: SpanBytes::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SPAN entries a resolution puts: (ctx, parent, site).
    #[derive(Default)]
    struct Spans(Vec<(u32, u32, u32)>);

    impl SpanFile for Spans {
        fn generation(&self) -> u64 {
            1
        }
        fn knows_site(&mut self, _site: u32) -> bool {
            true
        }
        fn put_span(&mut self, ctx: u32, parent: u32, site: u32, _from: u64, _raw: &[u8]) {
            self.0.push((ctx, parent, site));
        }
        fn span_text(&mut self, _site: u32, _raw: &[u8]) -> Option<String> {
            None
        }
        fn mirrored(&self) -> bool {
            false
        }
        fn traced(&mut self, _site: u32) -> bool {
            false
        }
    }

    /// A chain cut short (its outer span's definition never came: a record
    /// taken after its wait) hangs from the lost context, which a reader
    /// shows as spans lost; a record whose own span is not known is in it.
    /// A whole chain begins at the root.
    #[test]
    fn a_chain_cut_short_hangs_from_the_lost_context() {
        // Keys no other test defines; 0x5EED_0001 is never defined.
        let (inner, middle, unknown) = (0x5EED_0003u64, 0x5EED_0002u64, 0x5EED_0001u64);
        assert!(crate::span::mail::define(middle, unknown, 7, &[]));
        assert!(crate::span::mail::define(inner, middle, 8, &[]));
        let mut book = Book::default();
        let mut file = Spans::default();
        let mut ctx = Context::default();
        ctx.switch_to(inner);
        assert_eq!(
            book.resolve(&mut ctx, 10, false, &mut file),
            None,
            "it waits first"
        );
        let c = book.resolve(&mut ctx, 10, true, &mut file);
        assert_eq!(file.0, [(1, LOST_CONTEXT, 7), (2, 1, 8)]);
        assert_eq!(c, Some(2));

        let mut alone = Context::default();
        alone.switch_to(unknown);
        assert_eq!(
            book.resolve(&mut alone, 11, true, &mut file),
            Some(LOST_CONTEXT)
        );

        let root = 0x5EED_0004u64;
        assert!(crate::span::mail::define(root, 0, 9, &[]));
        let mut whole = Context::default();
        whole.switch_to(root);
        assert_eq!(book.resolve(&mut whole, 12, false, &mut file), Some(3));
        assert_eq!(file.0[2], (3, 0, 9));
        let mut gone = vec![inner, middle, root];
        table::remove(&mut gone);
    }

    /// A ring waiting at the end of every pass holds the closes taken
    /// meanwhile (a waiting record may still need them), but only for a
    /// grace: after it they are forgotten though rings still wait, so the
    /// book does not grow with every span closed while they do.
    #[test]
    fn closes_held_while_rings_wait_are_forgotten_after_a_grace() {
        let key = 0x5EED_0010u64;
        assert!(crate::span::mail::define(key, 0, 7, &[]));
        let mut book = Book::default();
        let mut file = Spans::default();
        let mut ctx = Context::default();
        ctx.switch_to(key);
        assert!(book.resolve(&mut ctx, 10, false, &mut file).is_some());
        let grace = (table::VERSION_GRACE.as_secs_f64() * crate::clock::ticks_per_second()) as u64;
        let t0 = 1 << 40;
        // Closed, taken by the pass at t0, which ends with a ring waiting.
        book.closed.push(key);
        book.forget_spans(t0, true);
        let step = grace / 8;
        let mut t = t0;
        while t < t0 + grace {
            t += step;
            book.forget_spans(t, true);
            if t <= t0 + grace {
                assert!(book.spans.contains_key(&key), "held at t0 + {}", t - t0);
            }
        }
        book.forget_spans(t0 + grace + 2 * step, true);
        assert!(!book.spans.contains_key(&key), "forgotten after a grace");
        assert!(book.closed.is_empty());
        assert!(book.held.len() <= 10, "{} passes held", book.held.len());
        assert!(
            table::table(key, |t| !t.spans.contains_key(&key)),
            "out of the table too"
        );
    }
}
