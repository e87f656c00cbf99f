//! What the book takes in and lets go: the threads' changes to `tracing`
//! spans from their mailboxes, the closes, and the spans forgotten once no
//! record can need them.

use std::sync::atomic::Ordering;

use super::*;

impl Book {
    /// At the end of a pass: spans no record can need any more are
    /// forgotten (see [`Book`]). Not while a ring is `waiting` for a span's
    /// entry from another ring: it holds records the pass did not take,
    /// logged perhaps before a close or an exit the pass took, whose chains
    /// still need those spans (their closes and exits wait for a pass that
    /// takes every ring's records, or a grace: see `held`).
    pub(crate) fn forget_spans(&mut self, pass_start: u64, waiting: bool) {
        self.forget_spans_at(pass_start, waiting);
        // Relaxed: a count for tests, read after a flush.
        #[cfg(feature = "test-hooks")]
        mail::SPANS_KNOWN.store(self.spans.len(), Ordering::Relaxed);
    }

    fn forget_spans_at(&mut self, pass_start: u64, waiting: bool) {
        // Versions no record can need any more: followed by one older than
        // this pass's start, less a grace for producers that waited.
        let grace = (table::VERSION_GRACE.as_secs_f64() * crate::clock::ticks_per_second()) as u64;
        let horizon = pass_start.saturating_sub(grace);
        let b = self;
        if waiting {
            b.forget_held(pass_start, horizon);
        } else {
            b.held.clear();
            let exited = std::mem::take(&mut b.exited_last);
            b.forget_exited(&exited);
            std::mem::swap(&mut b.exited_last, &mut b.exited_now);
            let mut closed = std::mem::take(&mut b.closed);
            b.forget_closed(&mut closed);
            // (Kept for its allocation: the next pass takes its closes into
            // it.)
            b.closed = closed;
        }
        // After a burst of spans the map's table is given back (a map
        // never shrinks by itself): the flusher keeps what its open spans
        // need, not the most it ever held.
        let (len, cap) = (b.spans.len(), b.spans.capacity());
        if cap > 4096 && len < cap / 8 {
            b.spans.shrink_to(len * 2);
        }
        // Versions are pruned a tenth of their grace apart at most: every
        // pass (thousands a second) locked each shard holding versions.
        let epoch = table::EPOCH.load(Ordering::Acquire);
        let due = pass_start.saturating_sub(b.pruned_at) >= grace / 10;
        if due && !b.mail_versioned.is_empty() {
            // The same for the versions that came from mailboxes.
            let spans = &mut b.spans;
            b.mail_versioned.retain(|k| {
                spans
                    .get_mut(k)
                    .is_some_and(|sp| table::prune_versions(&mut sp.versions, |v| v.tick, horizon))
            });
        }
        if (epoch != b.pruned_epoch || b.versioned || !b.mail_versioned.is_empty()) && due {
            b.pruned_epoch = epoch;
            b.pruned_at = pass_start;
            let mut versioned = false;
            let versioned_in = table::VERSIONED_IN.load(Ordering::Acquire);
            table::tables_in(versioned_in, |bit, t| {
                t.prune(horizon);
                if t.versioned.is_empty() {
                    // Under the lock: a new version sets it again under it.
                    table::VERSIONED_IN.fetch_and(!bit, Ordering::Relaxed);
                } else {
                    versioned = true;
                }
            });
            b.versioned = versioned;
        }
    }

    /// `nanolog::span!`s past the pass after their exit: forgotten, or
    /// when their last child is.
    fn forget_exited(&mut self, keys: &[u64]) {
        for &k in keys {
            if let Some(sp) = self.spans.get_mut(&k) {
                sp.exited = true;
                if sp.children == 0 {
                    self.forget(k);
                }
            }
        }
    }

    /// `tracing` spans closed that no record can need any more: out of the
    /// book and the table; `keys` is left empty.
    fn forget_closed(&mut self, keys: &mut Vec<u64>) {
        // Out of the table too, unless the span came from a mailbox (the
        // table never had it).
        keys.retain(|&k| {
            let in_table = self.spans.get(&k).is_none_or(|sp| sp.in_table);
            self.forget(k);
            in_table
        });
        if !keys.is_empty() {
            table::remove(keys);
        }
        keys.clear();
    }

    /// At the end of pass `pass_start`, a ring waiting: the closes and
    /// exits taken by passes that began before `horizon` are forgotten
    /// (see `held`).
    fn forget_held(&mut self, pass_start: u64, horizon: u64) {
        let old = self.held.iter().rposition(|&(t, _, _)| t < horizon);
        if let Some(m) = old {
            let (_, closes, exits) = self.held[m];
            let mut gone: Vec<u64> = self.closed.drain(..closes).collect();
            self.forget_closed(&mut gone);
            let exited: Vec<u64> = std::mem::take(&mut self.exited_last)
                .into_iter()
                .chain(self.exited_now.drain(..exits))
                .collect();
            self.forget_exited(&exited);
            self.held.drain(..=m);
            for h in &mut self.held {
                h.1 -= closes;
                h.2 -= exits;
            }
        }
        self.held
            .push((pass_start, self.closed.len(), self.exited_now.len()));
    }

    /// The threads' changes to `tracing` spans, taken once a pass after it
    /// read the rings' tails (and before it drains them): every span a
    /// record up to those tails is in was defined before it (see `mail`),
    /// so the pass needs no other taking, and takes no more than the
    /// mailboxes' budgets however fast threads post meanwhile. The closes
    /// it brings wait for the next pass's `take_closed`.
    pub(crate) fn take_mail(&mut self, file: &mut impl SpanFile) {
        self.deliver(file);
    }

    /// Spans closed since the last pass, taken before the rings' tails are
    /// read: forgotten at the end of the pass (`forget_spans`), once every
    /// record logged before their close is drained.
    pub(crate) fn take_closed(&mut self, file: &mut impl SpanFile) {
        self.deliver(file);
        self.closed.append(&mut self.mail_closed);
        let closed_in = table::CLOSED_IN.swap(0, Ordering::Acquire);
        if closed_in != 0 {
            let closed = &mut self.closed;
            table::tables_in(closed_in, |_, t| closed.append(&mut t.closed));
        }
    }
}

impl Book {
    /// Takes the threads' changes to `tracing` spans from their mailboxes
    /// into the book: definitions first, then the changes held from the
    /// last taking, then this one's (held for the next if their span is
    /// not known yet).
    fn deliver(&mut self, file: &mut impl SpanFile) {
        let mut ops = std::mem::take(&mut self.taken);
        mail::take(&mut ops, &mut self.letters);
        if ops.is_empty() && self.later.is_empty() {
            self.taken = ops;
            return;
        }
        // (Both buffers kept for their allocations: the flusher takes mail
        // most passes.)
        let mut rest = std::mem::take(&mut self.rest);
        for op in ops.drain(..) {
            match op {
                Op::Define {
                    key,
                    parent,
                    site,
                    raw,
                } => self.insert(key, Known::from_mail(parent, site, raw, file)),
                op => rest.push(op),
            }
        }
        self.taken = ops;
        let mut versioned = false;
        for op in std::mem::take(&mut self.later) {
            // Held once already: a change to a span never defined (past
            // the sites' cap, or dropped under `OnFull::Drop`) is dropped.
            versioned |= matches!(op, Op::Version { .. });
            let _ = self.change(op, file);
        }
        for op in rest.drain(..) {
            versioned |= matches!(op, Op::Version { .. });
            if let Err(op) = self.change(op, file) {
                self.later.push(op);
            }
        }
        self.rest = rest;
        if versioned {
            // The epoch its poster moved may have gone by before the book
            // had the new value (contexts resolved at it, in this pass or
            // the last, hold the old one): moved again, so they see it.
            table::EPOCH.fetch_add(1, Ordering::Release);
        }
    }

    /// A new value or a close of a `tracing` span, from a mailbox; handed
    /// back if the span is known neither to the book nor to the table.
    fn change(&mut self, op: Op, file: &mut impl SpanFile) -> Result<(), Op> {
        let key = op.key();
        if !self.spans.contains_key(&key) && self.copy_from_table(key, file).is_none() {
            return Err(op);
        }
        match op {
            Op::Close { key } => self.mail_closed.push(key),
            Op::Version {
                key,
                tick,
                site,
                raw,
            } => {
                if !file.knows_site(site) {
                    return Ok(());
                }
                if let Some(sp) = self.spans.get_mut(&key) {
                    table::add_version(
                        &mut sp.versions,
                        |v| v.tick,
                        KnownVersion { tick, site, raw },
                    );
                    // Past the epoch now: contexts resolved before hold no
                    // more for it (see `unchanged_since`).
                    sp.stamp = table::EPOCH.load(Ordering::Acquire) + 1;
                    self.mail_versioned.insert(key);
                }
            }
            Op::Define { .. } => {}
        }
        Ok(())
    }

    /// The flusher ends (every record written): the changes still in
    /// mailboxes come to the book, closed spans go, and the `tracing`
    /// spans still open go to the table, where the threads' changes go
    /// from now on (and the next logger's flusher finds them).
    pub(crate) fn hand_back(&mut self, file: &mut impl SpanFile) {
        let mut taken = std::mem::take(&mut self.taken);
        let mut later = std::mem::take(&mut self.later);
        let mut closed = std::mem::take(&mut self.closed);
        closed.append(&mut self.mail_closed);
        let spans = &mut self.spans;
        mail::go_direct_with(|mut ops| {
            // (The table is locked: spans not in the book are left to it.)
            ops.append(&mut later);
            let mut out = Vec::new();
            for op in ops.drain(..) {
                match op {
                    Op::Define {
                        key,
                        parent,
                        site,
                        raw,
                    } => {
                        spans.insert(key, Known::from_mail(parent, site, raw, file));
                    }
                    op => taken.push(op),
                }
            }
            for op in taken.drain(..) {
                match op {
                    Op::Close { key } if spans.contains_key(&key) => {
                        spans.remove(&key);
                    }
                    Op::Version {
                        key,
                        tick,
                        site,
                        raw,
                    } if spans.contains_key(&key) => {
                        if let Some(sp) = spans.get_mut(&key) {
                            table::add_version(
                                &mut sp.versions,
                                |v| v.tick,
                                KnownVersion { tick, site, raw },
                            );
                        }
                    }
                    op => out.push(op),
                }
            }
            for key in closed {
                if spans.remove(&key).is_none_or(|sp| sp.in_table) {
                    out.push(Op::Close { key });
                }
            }
            for (&key, sp) in spans.iter().filter(|(_, sp)| sp.tracing) {
                let mut versions = sp.versions.iter();
                let Some(first) = versions.next() else {
                    continue;
                };
                out.push(Op::Define {
                    key,
                    parent: sp.parent,
                    site: first.site,
                    raw: SpanBytes::from_slice(&first.raw),
                });
                out.extend(versions.map(|v| Op::Version {
                    key,
                    tick: v.tick,
                    site: v.site,
                    raw: SpanBytes::from_slice(&v.raw),
                }));
            }
            out
        });
        self.spans.retain(|_, sp| !sp.tracing);
        #[cfg(feature = "test-hooks")]
        mail::SPANS_KNOWN.store(self.spans.len(), Ordering::Relaxed);
    }
}

/// Spans closed while a logger ran need no more records once it stopped:
/// out of the table.
pub(crate) fn forget_all_closed() {
    table::tables(|t| {
        for k in t.closed.drain(..) {
            t.spans.remove(&k);
        }
    });
}
