//! Draining a ring: its records compacted into the extents of the batch,
//! each thread's span context resolved as it changes, the sites' dictionary
//! entries put ahead of their first use.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use super::dict::{emit_site, site_ix};
use super::{RingState, State};
use crate::compact::CompactFn;
use crate::ring;
use crate::wire::extent;
use crate::wire::format::Role;
use crate::wire::frame::{begin_entry, end_entry, put_entry};
use crate::wire::{dict, put_varint, record, tag};

/// Close an extent once its body passes this size.
pub(super) const EXTENT_MAX: usize = 64 << 10;
/// Hand ring space back to the producer every this fraction of the ring
/// consumed ...
const RELEASE_FRACTION: u64 = 8;
/// ... but not less than this many bytes.
const RELEASE_MIN: u64 = 4096;

/// A site met in the current drain: its id (also its index in
/// `State::sites`) and its own compaction of a run of records, if any.
#[derive(Clone, Copy)]
pub(super) struct Current {
    id: u32,
    compact: Option<CompactFn>,
    role: Role,
    /// Its level's bit in an index row (see `index::Summary`).
    level_bit: u8,
}

pub(super) struct Open {
    start: usize,
    prev_tick: u64,
    /// The context (file id) its records are in now: where the thread was
    /// placed when it was opened, then its last context switch.
    ctx: u32,
}

impl State {
    fn site(&mut self, id: u32) -> Option<usize> {
        site_ix(&mut self.sites, &mut self.site_emitted, id)
    }

    /// The site `id` of the record being drained, with its dictionary entry
    /// on its way to the file (ahead of the write's extents); `None` for an
    /// unknown id. `cur` caches the answer for the next record.
    #[inline(always)]
    fn current(&mut self, id: u32, cur: &mut Option<Current>) -> Option<Current> {
        if let Some(c) = *cur {
            if c.id == id {
                return Some(c);
            }
        }
        // What a site's records need of it, in one dense table: a record of
        // another site than the last (most records, where sites interleave)
        // reads it there, not through its registration's pointers.
        let ix = id as usize;
        if let (Some(Some(c)), Some(true)) = (self.currents.get(ix), self.site_emitted.get(ix)) {
            *cur = Some(*c);
            return Some(*c);
        }
        let ix = self.site(id)?;
        if !self.site_emitted[ix] {
            self.emit_site(ix);
        }
        let reg = self.sites[ix].as_ref();
        let c = Current {
            id,
            compact: reg.and_then(|r| r.compact),
            role: reg.map_or(Role::Record, |r| r.site.role),
            level_bit: reg.map_or(0, |r| 1 << r.site.level as u8),
        };
        if self.currents.len() <= ix {
            self.currents.resize(ix + 1, None);
        }
        self.currents[ix] = Some(c);
        *cur = Some(c);
        Some(c)
    }

    fn emit_site(&mut self, ix: usize) {
        emit_site(&mut self.defs, &self.sites, ix);
        self.site_emitted[ix] = true;
    }

    /// Drains a ring up to the tail this pass read; returns the records
    /// taken.
    pub(super) fn drain(&mut self, r: &mut RingState) -> u64 {
        let tail = r.tail;
        if r.c.head() >= tail {
            r.deferred_at = None;
            return 0;
        }
        // A measuring build only (`RUSTFLAGS="--cfg nanolog_flusher_discards"`,
        // not a feature, so no dependency can turn it on): the pass steps
        // over every record by its header and writes nothing, so that a
        // benchmark shows what the logging threads' side costs with the
        // flusher's work on the records taken away (BENCHMARKS.md, "The
        // floor under the marks"). The file gets no record.
        // (`cfg!`, not `#[cfg]`: the lines are type-checked in every build.)
        if cfg!(nanolog_flusher_discards) {
            let mut n = 0;
            while let Some(rec) = r.c.peek(tail) {
                let len = rec.len();
                r.c.advance(len);
                n += 1;
            }
            r.c.release();
            r.deferred_at = None;
            return n;
        }
        let ring = Arc::clone(&r.c.ring);
        let thread = ring.thread;
        let mut open: Option<Open> = None;
        let mut n = 0u64;
        // Room goes back to the producer an eighth of the ring at a time (as
        // C++ NanoLog's release threshold): a producer waiting on a full ring
        // then writes a stretch the flusher has finished with, instead of
        // following it record by record through lines both cores touch.
        let release_bytes = (ring.capacity() as u64 / RELEASE_FRACTION).max(RELEASE_MIN);
        let mut released_at = r.c.head();
        // The THREAD entry is due at the start of a drain, and again after a
        // write that may have started a new file or lost the last one.
        let mut check_thread = true;
        // The site of the record before: a run of one site's records skips
        // the lookup and the dictionary check.
        let mut cur: Option<Current> = None;
        let mut deferred = false;
        loop {
            if check_thread {
                check_thread = false;
                let version = ring.name_version.load(Ordering::Acquire);
                if r.thread_emitted != Some((self.file_generation, version)) {
                    let name = ring
                        .name
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    // With the write's dictionary entries, ahead of its
                    // records (and given again by the next write with them).
                    let start = begin_entry(&mut self.defs, tag::THREAD);
                    dict::put_thread(&mut self.defs, thread, &name);
                    end_entry(&mut self.defs, start);
                    self.thread_names.insert(thread, name.clone());
                    r.thread_emitted = Some((self.file_generation, version));
                    r.name = name;
                }
            }
            let head = r.c.head();
            let Some(rec) = r.c.peek(tail) else { break };
            let mut len = rec.len();
            let (mut site, tick) = (rec.site, rec.tick);
            let mut args = rec.args;
            // A record that says its thread's context first (see
            // `ring::WITH_CONTEXT`): the switch is taken as a switch record
            // before it would be (again, should the record wait a pass).
            let fused = site != ring::DROPS && site & ring::WITH_CONTEXT != 0;
            if fused {
                site &= !ring::WITH_CONTEXT;
                match args.split_first_chunk::<8>() {
                    Some((key, rest)) => {
                        r.ctx.switch_to(u64::from_le_bytes(*key));
                        args = rest;
                    }
                    None => {
                        debug_assert!(false, "a record with its context has no key");
                        self.unreadable(thread, tick, &mut open);
                        r.c.advance(len);
                        continue;
                    }
                }
            }
            if site == ring::DROPS {
                let d = ring::DropMarker::parse(rec.args);
                self.sum.add_gap(thread, d.first, d.last);
                self.tally.dropped(thread, d.count);
                close(&mut self.out, &mut open);
                put_entry(&mut self.out, tag::DROP, |b| {
                    dict::put_drop(b, thread, d.count, d.first, d.last)
                });
            } else if let Some(cur) = self.current(site, &mut cur) {
                if cur.role != Role::Record {
                    // The extent stays open: the thread's next record says
                    // where it is now (see below).
                    // (A switch or an exit is read by its words: only a
                    // span's entry needs its site's kinds.)
                    let kinds = match cur.role {
                        Role::Span => self.sites[cur.id as usize]
                            .as_deref()
                            .map_or(&[][..], |s| &s.kinds[..]),
                        _ => &[],
                    };
                    self.book
                        .span_record(&mut r.ctx, cur.role, cur.id, kinds, args);
                    r.c.advance(len);
                    continue;
                }
                // The thread's context as the file knows it, resolved again
                // after a switch, in a new file, past a tick where a span of
                // its chain took new values, or when any span did: a switch
                // inside the open extent (the SPAN entries of spans new to
                // the file go ahead of the write's extents).
                if !self.book.fresh(&r.ctx, tick, self.file_generation) {
                    // A span of the chain not known yet: its entry is in
                    // another thread's ring, not drained this far (a thread
                    // using the fallback ring, a `tracing` span made inside
                    // a `nanolog::span!` and entered elsewhere). This ring
                    // waits for the next pass, once at this record.
                    let partial_ok = r.deferred_at == Some(head);
                    let (book, mut file) = self.split();
                    let Some(c) = book.resolve(&mut r.ctx, tick, partial_ok, &mut file) else {
                        r.deferred_at = Some(head);
                        deferred = true;
                        break;
                    };
                    if let Some(o) = open.as_mut() {
                        let anchor = r.ctx.resolved.anchor;
                        switch_to(&mut self.out, &mut self.sum, o, c, anchor);
                    }
                }
                let (out, sum, tally) = (&mut self.out, &mut self.sum, &mut self.tally);
                let o = open.get_or_insert_with(|| {
                    // Its records' ticks start here (the extent's base, then
                    // never back: see below); the write's INDEX entry names
                    // its thread.
                    sum.extent(thread);
                    tally.first_tick = tally.first_tick.min(tick);
                    let start = begin_entry(out, tag::EXTENT);
                    extent::put_header(out, thread, tick);
                    // An extent begins in no span (version 3 writes no
                    // CONTEXT entries): its first record says where the
                    // thread is.
                    let mut o = Open {
                        start,
                        prev_tick: tick,
                        ctx: 0,
                    };
                    let resolved = &r.ctx.resolved;
                    switch_to(out, sum, &mut o, resolved.ctx, resolved.anchor);
                    o
                });
                // A macro site's own function takes this record and the
                // site's records after it in one call (the text mirror wants
                // them one at a time). Ticks of one thread only go forward;
                // a backward step (a migration between cores whose counters
                // disagree) is clamped to zero, here as there.
                // (Not while a span of the thread's chain is due to take new
                // values inside the run: each record is checked then.)
                // (A record with its context is not one a run can take: its
                // site's compaction reads the ring's records as they are.)
                let run = self.mirror.is_none() && r.ctx.resolved.until == u64::MAX && !fused;
                match cur.compact.filter(|_| run) {
                    Some(compact) => {
                        // Stop where the checks below act: past the extent's
                        // limit, or at a full buffer.
                        let stop = (o.start + EXTENT_MAX + 1).min(self.out_limit);
                        // At least the whole first record: a run cut short
                        // inside it compacts nothing (a record larger than
                        // `release_bytes` was skipped so, uncounted, before).
                        let raw = r.c.contiguous(tail, (release_bytes as usize).max(len));
                        // The run's first record's tick, as its delta makes
                        // it (clamped, see above), and its bytes: `stats`
                        // answers from what the writer counts.
                        let (first, at) = (o.prev_tick.max(tick), out.len());
                        let (used, recs) =
                            compact(raw, site, &mut o.prev_tick, out, stop, &mut self.strings);
                        self.sum.records(cur.level_bit);
                        if recs > 0 {
                            let bytes = (self.out.len() - at) as u64;
                            self.tally
                                .count(site, thread, recs, bytes, first, o.prev_tick);
                        }
                        if recs == 0 {
                            // A malformed record: skipped as `peek` measured
                            // it, and counted and marked as a drop.
                            debug_assert!(false, "malformed ring record of site {site}");
                            self.unreadable(thread, tick, &mut open);
                        }
                        len = len.max(used);
                        self.out_records += recs;
                        n += recs;
                    }
                    None => {
                        let delta = tick.saturating_sub(o.prev_tick);
                        o.prev_tick += delta;
                        let reg = self.sites[cur.id as usize].as_deref();
                        let kinds = reg.map_or(&[][..], |s| &s.kinds[..]);
                        let rollback = (out.len(), o.prev_tick);
                        put_varint(out, u64::from(site));
                        put_varint(out, delta);
                        let at = out.len();
                        if record::compact_with(kinds, args, out, &mut self.strings).is_none() {
                            debug_assert!(false, "ring record does not match its site's kinds");
                            out.truncate(rollback.0);
                            o.prev_tick = rollback.1;
                            self.unreadable(thread, tick, &mut open);
                        } else {
                            // The mirror reads the record as the file now
                            // holds it (its compact bytes, the file's
                            // strings), not the ring's values: one decoder
                            // for both, so its line is the one `decode`
                            // prints (the README's mirror (`Builder::mirror`)).
                            if let (Some(m), Some(reg)) = (&mut self.mirror, reg) {
                                if m.wants(reg.site.level) {
                                    let spans = r.ctx.texts.iter().map(String::as_str);
                                    let strings = self.strings.strings();
                                    m.record(
                                        reg,
                                        thread,
                                        &r.name,
                                        tick,
                                        (&out[at..], strings),
                                        spans,
                                    );
                                }
                            }
                            self.sum.records(cur.level_bit);
                            let bytes = (self.out.len() - rollback.0) as u64;
                            self.tally
                                .count(site, thread, 1, bytes, o.prev_tick, o.prev_tick);
                            self.out_records += 1;
                            n += 1;
                        }
                    }
                }
                if open
                    .as_ref()
                    .is_some_and(|o| self.out.len() - o.start > EXTENT_MAX)
                {
                    close(&mut self.out, &mut open);
                }
            }
            r.c.advance(len);
            let mut wrote = false;
            if r.c.head() - released_at >= release_bytes {
                wrote = self.release(r, &mut open);
                released_at = r.c.head();
            }
            if self.out.len() >= self.out_limit {
                close(&mut self.out, &mut open);
                self.release(r, &mut open);
                released_at = r.c.head();
                self.write_out();
                wrote = true;
            }
            if wrote {
                // A failed write or a new file forgets what was recorded.
                cur = None;
                check_thread = true;
            }
        }
        close(&mut self.out, &mut open);
        self.release(r, &mut open);
        // A ring that waits for the next pass counts as work: the flusher
        // passes again (and does not stop) before it has drained it.
        if !deferred {
            r.deferred_at = None;
        }
        n + u64::from(deferred)
    }
}

impl State {
    /// Hands what was drained of `r` back to its producer. A crash-safe
    /// logger's flusher first commits what it compacted since the last
    /// time to the area (see `stage`), the open extent closed so that the
    /// area holds whole entries; if the area has no room for them, they go
    /// to the log first. Returns whether it wrote to the log.
    fn release(&mut self, r: &mut RingState, open: &mut Option<Open>) -> bool {
        if !self.stage.active() {
            r.c.release();
            return false;
        }
        close(&mut self.out, open);
        let (head, ctx) = (r.c.head(), r.ctx.key());
        let staged = self
            .stage
            .commit(&self.defs, &self.strings, &self.out, &r.c.ring, head, ctx);
        if !staged {
            self.write_out();
            // (Written: the commit holds only the ring's head.)
            let _ = self
                .stage
                .commit(&self.defs, &self.strings, &self.out, &r.c.ring, head, ctx);
        }
        r.c.release();
        self.stage.done();
        !staged
    }

    /// A record the flusher cannot compact (its bytes do not match its
    /// site): never silently lost, it is counted as dropped and written as a
    /// one-record gap, which `decode` shows.
    #[cold]
    fn unreadable(&mut self, thread: u32, tick: u64, open: &mut Option<Open>) {
        self.shared.count_dropped();
        self.sum.add_gap(thread, tick, tick);
        self.tally.dropped(thread, 1);
        close(&mut self.out, open);
        put_entry(&mut self.out, tag::DROP, |b| {
            dict::put_drop(b, thread, 1, tick, tick)
        });
    }
}

/// A context switch in the open extent `o` if its records are not in
/// context `ctx` already: the context as its difference from the one the
/// extent was in (0 as it opens). A worker of a service moves among the
/// requests in flight, whose contexts were given out lately: a byte or two
/// where the context itself grew to three and four as a file went on. The
/// write's INDEX entry is told the context's innermost span that may carry
/// trace ids (`anchor`, 0: none).
#[inline]
fn switch_to(
    out: &mut Vec<u8>,
    sum: &mut super::index::Summary,
    o: &mut Open,
    ctx: u32,
    anchor: u32,
) {
    if ctx != o.ctx {
        put_varint(out, u64::from(crate::wire::CONTEXT_SWITCH));
        put_varint(out, crate::wire::zigzag(i64::from(ctx) - i64::from(o.ctx)));
        o.ctx = ctx;
        if anchor != 0 {
            sum.context(anchor);
        }
    }
}

fn close(out: &mut [u8], open: &mut Option<Open>) {
    if let Some(o) = open.take() {
        end_entry(out, o.start);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::super::{Compression, Config, RingState, State};
    use crate::channel::{OnFull, Shared};
    use crate::level::Level;
    use crate::reader::{Event, Filter, LogFile, Merge};
    use crate::ring::{Consumer, Producer, Ring, DROPS_LEN, HEADER};
    use crate::site::Site;
    use crate::span::book::Context;
    use crate::wire::format::{ArgKind, Piece, Spec};
    use crate::wire::tag;
    use crate::writer::{Policy, Writer};

    static PIECES: [Piece; 2] = [
        Piece::Lit(Cow::Borrowed("n=")),
        Piece::Arg(Spec::display(0)),
    ];
    static SITE: Site = Site::new(
        Level::Info,
        "drain",
        "drain.rs",
        1,
        "drain",
        "n={}",
        &PIECES,
        &["n"],
    );

    /// A flusher's state writing a fresh file of its own (no compression:
    /// the bytes `drain` made are the file's), and one thread's ring.
    fn fixture(name: &str) -> (PathBuf, State, Producer, RingState) {
        let dir = std::env::temp_dir().join(format!("nanolog-drain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("drain.nlog");
        let writer = Writer::create(&path, Policy::default(), |_| {}).unwrap();
        let shared = Arc::new(Shared::new(1, 1 << 16, OnFull::Drop));
        let config = Config {
            wake_delay: std::time::Duration::from_millis(1),
            clock_interval: std::time::Duration::from_secs(1),
            compression: Compression::None,
            mirror: None,
        };
        let mut st = State::new(shared, writer, config);
        st.clock_pair();
        let ring = Arc::new(Ring::new(1 << 16, 7, "worker".into()));
        let producer = Producer::new(Arc::clone(&ring));
        let r = RingState {
            c: Consumer::new(ring),
            thread_emitted: None,
            name: String::new(),
            ctx: Context::default(),
            deferred_at: None,
            tail: 0,
        };
        (path, st, producer, r)
    }

    fn log(p: &mut Producer, site: u32, tick: u64, n: u64) {
        p.try_reserve(HEADER + 8)
            .expect("room in the ring")
            .commit_record(site, tick, |w| {
                w.put(&n.to_le_bytes());
            });
    }

    /// Drains what the ring holds now, as a pass does.
    fn drain(st: &mut State, r: &mut RingState) -> u64 {
        r.tail = r.c.available();
        st.drain(r)
    }

    /// What the file at `path` reads back: per record its thread's name and
    /// message, per gap its count.
    fn read_back(path: &PathBuf) -> Vec<String> {
        let files = [LogFile::open(path).unwrap()];
        assert!(files[0].warnings().is_empty(), "{:?}", files[0].warnings());
        Merge::new(&files, Filter::default())
            .map(|ev| match ev {
                Event::Record(r) => format!("{} {}", r.thread_name().unwrap(), r.message()),
                Event::Gap(g, _) => format!("gap of {}", g.count),
            })
            .collect()
    }

    /// A ring's records, drained in two passes with a drop marker between,
    /// read back from the file in order with their values; the thread is
    /// named once, the site's entry goes ahead of its first record once.
    #[test]
    fn drained_records_read_back_in_order_with_the_thread_named_and_the_site_defined_once() {
        let (path, mut st, mut p, mut r) = fixture("order");
        let site = SITE.id_dyn(&[ArgKind::U64]);
        let t0 = crate::clock::now();
        for i in 0..100 {
            log(&mut p, site, t0 + i, i);
        }
        assert_eq!(drain(&mut st, &mut r), 100);
        assert!(!st.defs.is_empty(), "the site's entry goes with the write");
        st.write_out();
        p.try_reserve(DROPS_LEN)
            .unwrap()
            .commit_drops(5, t0 + 100, t0 + 104);
        for i in 0..3 {
            log(&mut p, site, t0 + 105 + i, 1_000 + i);
        }
        // The drop marker is no record.
        assert_eq!(drain(&mut st, &mut r), 3);
        assert!(st.defs.is_empty(), "the file has the site's entry already");
        st.write_out();
        // Nothing more to drain: nothing taken, nothing written.
        let out = st.out.len();
        assert_eq!(drain(&mut st, &mut r), 0);
        assert_eq!(st.out.len(), out);
        st.write_out();

        let mut want: Vec<String> = (0..100).map(|i| format!("worker n={i}")).collect();
        want.push("gap of 5".into());
        want.extend((0..3).map(|i| format!("worker n={}", 1_000 + i)));
        assert_eq!(read_back(&path), want);
        let bytes = std::fs::read(&path).unwrap();
        let count = |t: u8| {
            crate::wire::frame::Entries::new(&bytes, crate::wire::HEADER_LEN)
                .filter(|&(_, tag, _)| tag == t)
                .count()
        };
        assert_eq!(count(tag::SITE), 2, "once, and restated by the next write");
        let _ = std::fs::remove_dir_all(path.parent().unwrap_or(&path));
    }

    /// A record whose site no one registered is left out, and the records
    /// around it are not.
    #[test]
    fn a_record_of_an_unknown_site_is_left_out_and_its_neighbours_kept() {
        let (path, mut st, mut p, mut r) = fixture("unknown");
        let site = SITE.id_dyn(&[ArgKind::U64]);
        let t0 = crate::clock::now();
        log(&mut p, site, t0, 1);
        log(&mut p, 0x00ff_fff0, t0 + 1, 2);
        log(&mut p, site, t0 + 2, 3);
        drain(&mut st, &mut r);
        st.write_out();
        let got = read_back(&path);
        assert!(got.contains(&"worker n=1".to_owned()), "{got:?}");
        assert!(got.contains(&"worker n=3".to_owned()), "{got:?}");
        assert!(!got.iter().any(|l| l.ends_with("n=2")), "{got:?}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap_or(&path));
    }
}
