//! The file's dictionary as the flusher keeps it: the sites' entries put
//! ahead of their first use, and the side of the file that resolving span
//! contexts writes to (its sites, strings and SPAN entries).

use std::sync::Arc;

use super::State;
use crate::mirror::Mirror;
use crate::site::{self, Registration};
use crate::span::book::{Book, SpanFile};
use crate::wire::{dict, record};

impl State {
    /// The spans the flusher knows, and the file being written as their
    /// resolution needs it.
    pub(super) fn split(&mut self) -> (&mut Book, FileSide<'_>) {
        (
            &mut self.book,
            FileSide {
                generation: self.file_generation,
                sites: &mut self.sites,
                site_emitted: &mut self.site_emitted,
                defs: &mut self.defs,
                strings: &mut self.strings,
                spans_out: &mut self.spans_out,
                mirror: self.mirror.is_some(),
            },
        )
    }
}

/// The file being written, as the resolution of a span context needs it:
/// its sites, its strings and its batch of SPAN entries.
pub(super) struct FileSide<'a> {
    generation: u64,
    sites: &'a mut Vec<Option<Arc<Registration>>>,
    site_emitted: &'a mut Vec<bool>,
    defs: &'a mut Vec<u8>,
    strings: &'a mut crate::intern::Interner,
    spans_out: &'a mut dict::SpanBatch,
    mirror: bool,
}

impl SpanFile for FileSide<'_> {
    fn generation(&self) -> u64 {
        self.generation
    }

    fn knows_site(&mut self, site: u32) -> bool {
        site_ix(self.sites, self.site_emitted, site).is_some()
    }

    fn put_span(&mut self, ctx: u32, parent: u32, site: u32, from: u64, raw: &[u8]) {
        if let Some(ix) = site_ix(self.sites, self.site_emitted, site) {
            if !self.site_emitted[ix] {
                emit_site(self.defs, self.sites, ix);
                self.site_emitted[ix] = true;
            }
        }
        let reg = self.sites.get(site as usize).and_then(Option::as_deref);
        let kinds = reg.map_or(&[][..], |r| &r.kinds[..]);
        let traced = reg.is_some_and(|r| r.traced);
        let strings = &mut *self.strings;
        self.spans_out.push(ctx, parent, site, from, |b| {
            let at = b.len();
            let put = if traced {
                record::compact_with(kinds, raw, b, &mut SpanIdsInline(strings))
            } else {
                record::compact_with(kinds, raw, b, strings)
            };
            if put.is_none() {
                // The layer encodes a span's fields for its site's kinds.
                debug_assert!(false, "span fields do not match their site");
                b.truncate(at);
            }
        });
    }

    fn span_text(&mut self, site: u32, raw: &[u8]) -> Option<String> {
        if !self.mirror {
            return None;
        }
        let reg = self.sites.get(site as usize).and_then(Option::as_deref)?;
        Some(Mirror::span_text(reg, raw))
    }

    fn mirrored(&self) -> bool {
        self.mirror
    }

    fn traced(&mut self, site: u32) -> bool {
        let reg = site_ix(self.sites, self.site_emitted, site)
            .and_then(|ix| self.sites.get(ix))
            .and_then(Option::as_deref);
        reg.is_some_and(|r| r.traced)
    }
}

/// The file's strings for the fields of a span that may carry W3C ids: a
/// span id (16 lowercase hex digits) is written inline, never looked up.
/// Each span has its own, so none is ever met again; looking one up took a
/// random slot of the table and of its filter of strings seen (a cache
/// miss a span, `Interner::lookup` the flusher's largest symbol in the
/// OpenTelemetry service bench), and pushed out the sightings of strings
/// that repeat. A trace id (32 digits) is still looked up: a service that
/// sets it as a field of each span of a request repeats it.
struct SpanIdsInline<'a>(&'a mut crate::intern::Interner);

impl record::StringRefs for SpanIdsInline<'_> {
    #[inline]
    fn lookup(&mut self, s: &[u8]) -> Option<u32> {
        if s.len() == 16 && s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        self.0.lookup(s)
    }
}

/// Appends the dictionary entry of site `ix` to `out`.
pub(super) fn emit_site(out: &mut Vec<u8>, sites: &[Option<Arc<Registration>>], ix: usize) {
    if let Some(info) = sites.get(ix).and_then(Option::as_ref) {
        site::put_entry(out, ix as u32, info);
    }
}

/// The index of site `id` in the flusher's sites, registered there on its
/// first sight; `None` for an id no site has.
pub(super) fn site_ix(
    sites: &mut Vec<Option<Arc<Registration>>>,
    site_emitted: &mut Vec<bool>,
    id: u32,
) -> Option<usize> {
    let ix = id as usize;
    if sites.get(ix).is_none_or(Option::is_none) {
        let info = site::lookup(id)?;
        if sites.len() <= ix {
            sites.resize(ix + 1, None);
            site_emitted.resize(ix + 1, false);
        }
        sites[ix] = Some(info);
    }
    Some(ix)
}
