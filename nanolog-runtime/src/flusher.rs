//! The flusher thread: drains the rings round-robin, compacts records into
//! extents, and writes them at the end of each batch.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::channel::Shared;
use crate::clock;
use crate::compact::CompactFn;
use crate::mirror::Mirror;
use crate::ring::{self, Consumer};
use crate::site::{self, Registration};
use crate::span::book::{Book, Context, SpanFile};
use crate::wire::extent;
use crate::wire::format::Role;
use crate::wire::frame::{begin_entry, end_entry, put_entry};
use crate::wire::{dict, put_varint, record, tag};
use crate::writer::{FileState, Lost, Writer};

/// How long the flusher sleeps after a pass that found fewer than
/// [`NAP_BELOW`] records, and after each of the first [`NAPS`] passes that
/// found none (`wake_delay` after that). The kernel's timer slack (50 us for
/// a normal thread) and the wake-up make it about 100 us in practice (a
/// 20 us `nanosleep` averaged 96 us on the CI machine); a full ring or a
/// flush wakes it at once.
///
/// Why sleep rather than spin: a flusher that polls again at once reads the
/// ring right behind its producer, taking each cache line the producer has
/// just written to its own core for a few records a pass; and a spinning
/// vCPU competes for the host core the producer's vCPU may share. Sleeping
/// lets a batch build up and leaves the core to the producer (BENCHMARKS.md,
/// "Design decisions measured", has the figures). C++ NanoLog's compression
/// thread waits on a condition variable the same way.
const NAP: Duration = Duration::from_micros(20);
/// Passes of fewer records than this end with a [`NAP`]: the flusher has
/// caught up with its producers. (A pass of 4096 records is 64 KiB of a
/// ring or more.)
const NAP_BELOW: u64 = 4096;
/// The nap instead of [`NAP`] while the machine's threads wait for cores
/// (Linux's pressure stall information says so: `crate::pressure`). Each
/// wake of the flusher then takes a core from a thread that was waiting
/// for it, and a flusher that wakes every 20 us to take a few hundred
/// records wakes thousands of times a second: in the tokio service of
/// `service_cost` (4 workers on 2 cores, crowded most of each round),
/// naps of 250 us took the process's CPU samples down 8% (median of 5
/// pairs in a fast phase, 4 of them lower: about a sixth of what nanolog
/// adds; BENCHMARKS.md, session 22). Records wait up to this long more in
/// their rings; the file is written once a millisecond under load either
/// way ([`WRITE_EVERY`]), and a full ring wakes the flusher at once. With
/// cores to spare, naps stay short.
const CROWDED_NAP: Duration = Duration::from_micros(250);
/// Idle passes that end with a [`NAP`] before the flusher sleeps for its
/// `wake_delay`.
const NAPS: u32 = 4;

/// How the flusher compresses the batches it writes
/// ([`Builder::compression`](crate::Builder::compression)). Measured on a
/// tokio service's log and on 10 M records of the benchmarks' mix
/// (BENCHMARKS.md, session 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Every batch as it is: the largest file, the fastest to read.
    None,
    /// LZ4 (FORMAT.md, BLOCK codec 2): the file about 45% smaller than
    /// [`None`](Compression::None); `stats` of it takes about 1.2 times, and
    /// `decode` 1.1 times, a plain file's time.
    Fast,
    /// Deflate (codec 3) while the flusher works less than an eighth of
    /// its time, LZ4 when busier: the file smaller than
    /// [`Fast`](Compression::Fast) makes it by as much as deflate gets to
    /// do (a tokio service's log 8-10%, 10 M records of the benchmarks'
    /// mix 23%, the same all deflated 31%). Deflate is read at about
    /// 450-800 MB of entries a second a core: `stats` of a file all of it
    /// takes about twice, and `decode` 1.3 times, a plain file's time.
    #[default]
    Small,
}

pub(crate) struct Config {
    pub(crate) wake_delay: Duration,
    pub(crate) clock_interval: Duration,
    pub(crate) compression: Compression,
    pub(crate) mirror: Option<Mirror>,
}

/// Close an extent once its body passes this size.
const EXTENT_MAX: usize = 64 << 10;
/// Write the buffer out once it passes this size. While the rings keep
/// the flusher busy it is written only when full or [`WRITE_EVERY`] old:
/// fewer, larger writes cost the flusher less per record than 64 KiB
/// writes (BENCHMARKS.md, "Design decisions measured").
const OUT_MAX: usize = 1 << 20;
/// Write a buffer that is this old even if the rings still hold records.
const WRITE_EVERY: Duration = Duration::from_millis(1);
/// Hand ring space back to the producer every this fraction of the ring
/// consumed ...
const RELEASE_FRACTION: u64 = 8;
/// ... but not less than this many bytes.
const RELEASE_MIN: u64 = 4096;

struct RingState {
    c: Consumer,
    /// The (file file_generation, name version) last recorded for this thread.
    thread_emitted: Option<(u64, u32)>,
    /// The thread's name as last recorded.
    name: String,
    /// The thread's spans.
    ctx: Context,
    /// Where the last drain stopped to wait a pass for a span's entry from
    /// another ring (it waits once at a record); `None` when it took every
    /// record there was.
    deferred_at: Option<u64>,
    /// The producer's position as this pass read it: the pass drains up to
    /// here (see the pass in `run`).
    tail: u64,
}

/// A site met in the current drain: its id (also its index in
/// `State::sites`) and its own compaction of a run of records, if any.
#[derive(Clone, Copy)]
struct Current {
    id: u32,
    compact: Option<CompactFn>,
    role: Role,
}

struct Open {
    start: usize,
    prev_tick: u64,
    /// The context (file id) its records are in now: where the thread was
    /// placed when it was opened, then its last context switch.
    ctx: u32,
}

struct Flusher {
    rings: Vec<RingState>,
    st: State,
}

/// Everything but the rings, so a ring can be drained while the rest changes.
struct State {
    shared: Arc<Shared>,
    writer: Writer,
    /// Bumped whenever the dictionary must be written again (a new file, or a
    /// failed write that may have lost it).
    file_generation: u64,
    out: Vec<u8>,
    /// Records in `out` not yet written.
    out_records: u64,
    /// Write `out` once it holds this much: [`OUT_MAX`], or less when the
    /// file is that close to its size limit, so files end near the limit.
    out_limit: usize,
    sites: Vec<Option<Arc<Registration>>>,
    site_emitted: Vec<bool>,
    clock_every: u64,
    last_clock: u64,
    logged: u64,
    /// The END entry is in `out`: no roll after it.
    closing: bool,
    /// When `out` was last written (ticks).
    last_write: u64,
    mirror: Option<Mirror>,
    /// The names of the threads recorded in the current file, for a file
    /// that must begin again with the whole dictionary.
    thread_names: std::collections::BTreeMap<u32, String>,
    /// Records lost (a failed write, the live file deleted or cut back)
    /// not yet reported in the file: the next write begins with the gap.
    pending_lost: Option<Lost>,
    /// When the flusher last looked at the live file's path (ticks).
    last_path_check: u64,
    /// An END was written since the process began to exit.
    ended_at_exit: bool,
    /// The spans the flusher knows of, and the threads' contexts.
    book: Book,
    /// The SITE entries `out` needs that the file lacks: written ahead of
    /// `out`, with the strings and spans below, so every dictionary entry
    /// of a write comes before every extent of it.
    defs: Vec<u8>,
    /// The file's repeated strings (STRINGS entries).
    strings: crate::intern::Interner,
    /// The SPAN entries `out` needs, one entry for the write.
    spans_out: dict::SpanBatch,
    /// The dictionary entries the last write brought to the file that the
    /// records of every later write may need (sites, strings, thread
    /// names), written again at the head of the next: each is in the file
    /// twice, in two writes, so a write lost to damage (a bad byte in its
    /// block) costs the records in it, not every record after it. (SPAN
    /// entries are not: restating them took the service bench's log from
    /// 19.5 to 26.2-26.5 bytes an event, and a second copy only where a
    /// later write's records use a span from 19.4-20.2 to 23.5-24.7
    /// (BENCHMARKS.md). A span defined in a lost write is marked lost on
    /// the records of it in later writes.)
    restate: Vec<u8>,
    /// The dictionary entries of the write being made, for `restate`
    /// (kept for its allocation).
    fresh: Vec<u8>,
    /// Threads named (THREAD entries, in `out`) since the last write.
    named: Vec<u32>,
    /// Batches go into the file as one compressed BLOCK entry while the
    /// flusher has the time (`Builder::compression`).
    compression: Compression,
    /// The share of its time the flusher works, in 1/1024ths, averaged over
    /// about its last [`DUTY_SPAN`] (each pass's share: from its start to
    /// its nap, against from its start to the next pass's start). Below
    /// [`DUTY_COMPRESS`] it compresses; busier, its time goes to the rings
    /// (the compressing counts in its work, so it turns itself off before it
    /// could make a producer wait).
    duty: u64,
    /// What makes a batch's BLOCK entry (kept for its memory).
    packer: crate::wire::block::Packer,
    /// Whether the machine's threads wait for cores (see [`CROWDED_NAP`]).
    pressure: crate::pressure::Pressure,
}

/// A batch smaller than this is written as it is (a block of it would
/// save a few bytes at most).
const MIN_BLOCK: usize = 256;
/// A batch larger than this is written as it is: a flusher that finds this
/// much at once is busy, and compressing it (0.16 ms for 128 KiB of
/// extents here) would be time the rings wait for.
const MAX_BLOCK: usize = 128 << 10;
/// Batches are compressed while the flusher works less than this share of
/// its time (in 1/1024ths): half.
const DUTY_COMPRESS: u64 = 512;
/// Below this share (an eighth) they are compressed with deflate (codec 3,
/// about 17% smaller than LZ4 on a service's entries, and 3 to 6 times its
/// work: BENCHMARKS.md, sessions 18 and 20); above it, with LZ4. The
/// deflating is counted in the flusher's work, so a flusher it keeps busy
/// turns to LZ4.
const DUTY_DEFLATE: u64 = 128;
/// The time over which the flusher's share of work is averaged.
const DUTY_SPAN: Duration = Duration::from_millis(1);

/// Marks the logger stopped when the flusher exits, even by panic, so no
/// producer waits for it forever.
struct RunningGuard(Arc<Shared>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        // Rings attached too late to be drained would otherwise live as long
        // as `Shared` (which the signal handler's copy keeps forever).
        self.0
            .new_rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.0.running.store(false, Ordering::Release);
        let _g = self
            .0
            .flush_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.0.flush_cv.notify_all();
    }
}

thread_local! {
    static IS_FLUSHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a flusher (which must not wait for itself).
pub(crate) fn is_flusher_thread() -> bool {
    IS_FLUSHER.try_with(std::cell::Cell::get).unwrap_or(false)
}

pub(crate) fn run(shared: Arc<Shared>, writer: Writer, config: Config) {
    let _guard = RunningGuard(Arc::clone(&shared));
    IS_FLUSHER.with(|f| f.set(true));
    shared
        .flusher_id
        .store(crate::channel::thread_id(), Ordering::Relaxed);
    let hz = clock::ticks_per_second();
    shared.counters.files.store(1, Ordering::Relaxed);
    shared
        .counters
        .bytes_written
        .store(crate::wire::HEADER_LEN as u64, Ordering::Relaxed);
    // From the first batch on: a file's size limit may be below OUT_MAX.
    let out_limit = out_limit(&writer);
    let st = State {
        shared,
        writer,
        file_generation: 0,
        out: Vec::with_capacity(OUT_MAX + EXTENT_MAX),
        out_records: 0,
        out_limit,
        sites: Vec::new(),
        site_emitted: Vec::new(),
        clock_every: (config.clock_interval.as_secs_f64() * hz) as u64,
        last_clock: 0,
        logged: 0,
        closing: false,
        last_write: 0,
        mirror: config.mirror,
        thread_names: Default::default(),
        pending_lost: None,
        last_path_check: 0,
        ended_at_exit: false,
        book: Book::default(),
        defs: Vec::new(),
        // (A text mirror decodes what is compacted against the table too.)
        strings: crate::intern::Interner::new(),
        // (The clock's rate is the process's: every file's header says it.)
        spans_out: dict::SpanBatch::new(dict::span_tick_shift(
            crate::wire::VERSION,
            clock::ticks_per_second(),
        )),
        restate: Vec::new(),
        fresh: Vec::new(),
        named: Vec::new(),
        compression: config.compression,
        duty: 0,
        packer: crate::wire::block::Packer::new(),
        pressure: crate::pressure::Pressure::open(),
    };
    let mut f = Flusher {
        rings: Vec::new(),
        st,
    };
    f.st.clock_pair();
    let mut idle = 0u32;
    let (mut flushed, mut synced) = (0u64, 0u64);
    // The flusher's duty cycle (`State::duty`): the last pass's start, and
    // how long it worked.
    let (mut last_start, mut last_work) = (0u64, 0u64);
    let duty_span = ((DUTY_SPAN.as_secs_f64() * hz) as u64).max(1);
    let write_every = (WRITE_EVERY.as_secs_f64() * hz) as u64;
    let pressure_every = (crate::pressure::EVERY.as_secs_f64() * hz) as u64;
    let mut pressure_read = 0u64;
    loop {
        f.st.shared.heartbeat.fetch_add(1, Ordering::Relaxed);
        // Acquire pairs with the SeqCst increments in `request_flush`: records
        // committed before a flush (or sync) request are visible when we load
        // the tails below.
        let ticket = f.st.shared.flush_requested.load(Ordering::Acquire);
        let sync_ticket = f.st.shared.sync_requested.load(Ordering::Acquire);
        let stopping = f.st.shared.stop.load(Ordering::Acquire);
        if !stopping && f.st.shared.held.load(Ordering::Acquire) {
            crate::sync::park_timeout(Duration::from_micros(100));
            continue;
        }
        // Spans closed before the rings' tails are read below: once they
        // are drained, no record can need them.
        let pass_start = clock::now();
        if last_start != 0 {
            // The last pass's share, weighed by its length against
            // DUTY_SPAN: a pass as long as that (an idle flusher's sleep)
            // sets the average alone.
            let cycle = pass_start.wrapping_sub(last_start).max(1);
            let sample = (last_work.min(cycle) * 1024 / cycle) as i64;
            let weight = (cycle.min(duty_span) * 1024 / duty_span) as i64;
            let duty = f.st.duty as i64;
            f.st.duty = (duty + (sample - duty) * weight / 1024) as u64;
        }
        last_start = pass_start;
        // Whether threads wait for cores (a system call every few
        // milliseconds): the naps between light passes are longer then.
        // (Not under loom: a model must branch the same way on every run.)
        if !cfg!(loom) && pass_start.wrapping_sub(pressure_read) > pressure_every {
            pressure_read = pass_start;
            f.st.pressure.sample();
        }
        let nap = if f.st.pressure.crowded() {
            CROWDED_NAP
        } else {
            NAP
        };
        {
            let (book, mut file) = f.st.split();
            book.take_closed(&mut file);
        }
        f.adopt_new_rings();
        // A pass takes what was there when it began: every ring's tail is
        // read first, then the threads' span changes once, which hold every
        // definition and value a record up to those tails needs (posted
        // before the record was committed, so before its tail was read).
        // No record of the pass then needs the mailboxes again, however
        // fast threads keep posting, and a stop is answered within a pass.
        for r in f.rings.iter_mut() {
            r.tail = r.c.available();
        }
        {
            let (book, mut file) = f.st.split();
            book.take_mail(&mut file);
        }
        let mut n = 0;
        for r in f.rings.iter_mut() {
            n += f.st.drain(r);
        }
        let waiting = f.rings.iter().any(|r| r.deferred_at.is_some());
        f.st.book.forget_spans(pass_start, waiting);
        f.rings.retain(|r| !r.c.ring.is_finished(r.c.head()));
        let now = clock::now();
        if now.wrapping_sub(f.st.last_clock) > f.st.clock_every {
            f.st.clock_pair();
        }
        // The end of a batch is when the rings are empty (or someone waits
        // for the file): a flusher that keeps up with a busy producer finds
        // a few hundred records a pass, and a write per pass would be a
        // system call per few hundred records. In between, the buffer goes
        // out once it is full (in `drain`) or a millisecond old.
        let urgent = stopping || ticket > flushed || sync_ticket > synced;
        // (Not under loom: a model must branch the same way on every run,
        // and the clock differs between runs.)
        let aged = !cfg!(loom) && now.wrapping_sub(f.st.last_write) > write_every;
        if n == 0 || urgent || aged {
            f.st.last_write = now;
            f.st.write_out();
        }
        if sync_ticket > synced {
            f.st.sync();
            synced = sync_ticket;
        }
        if ticket > flushed || synced > flushed {
            flushed = ticket.max(synced);
            f.st.shared.complete_flush(flushed, synced);
        }
        if stopping && n == 0 {
            let st = &mut f.st;
            st.writer.close_entries(&mut st.out, st.out_records);
            st.closing = true;
            st.write_out();
            st.sync();
            // Only the tickets this last pass covered (loaded before it
            // drained): a flush requested after it may have records this
            // pass did not see, and gets the stopped flusher's error
            // instead of a false Ok (found by the loom stop model).
            st.shared.complete_flush(ticket, ticket.max(sync_ticket));
            if let Some(m) = &mut st.mirror {
                m.finish();
            }
            // Spans closed while this logger ran need no more records.
            let (book, mut file) = st.split();
            book.hand_back(&mut file);
            crate::span::book::forget_all_closed();
            return;
        }
        last_work = clock::now().wrapping_sub(pass_start);
        if n > 0 {
            idle = 0;
            if n < NAP_BELOW && !urgent {
                crate::sync::park_timeout(nap);
            }
            continue;
        }
        idle += 1;
        crate::sync::park_timeout(if idle <= NAPS { nap } else { config.wake_delay });
    }
}

impl Flusher {
    fn adopt_new_rings(&mut self) {
        // Under the lock `ThreadProducer::attach` pushes under, and that
        // `Shared::begin_stop` sets `stop` under: a ring pushed before the
        // stop is adopted by the pass that first sees the stop, at the latest.
        // (An uncontended lock per pass; a lock-free "new rings" flag before
        // it let the loom stop model find a ring left unadopted.)
        let new = std::mem::take(
            &mut *self
                .st
                .shared
                .new_rings
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        self.rings.extend(new.into_iter().map(|r| RingState {
            c: Consumer::new(r),
            thread_emitted: None,
            name: String::new(),
            ctx: Context::default(),
            deferred_at: None,
            tail: 0,
        }));
    }
}

impl State {
    /// `fdatasync` of the current file; a failure is reported like a
    /// failed write, by the next flush.
    fn sync(&mut self) {
        if let Err(e) = self.writer.sync() {
            self.report(e);
        }
    }

    fn clock_pair(&mut self) {
        let (tick, ns) = clock::pair();
        dict::put_clock_entry(&mut self.out, tick, ns);
        self.last_clock = tick;
        if let Some(m) = &mut self.mirror {
            m.clock_pair(tick, ns);
        }
    }

    /// Writes the buffer (end of batch, or buffer full) and rolls the file
    /// if it is due (by size, or a time boundary passed even with nothing
    /// to write).
    fn write_out(&mut self) {
        if let Some(m) = &mut self.mirror {
            m.end_batch();
        }
        // The process is exiting (`exit`, a return from `main`): each write
        // ends the file cleanly, in case it is the last. Calls made later
        // (other exit hooks) add their records and another END.
        let exiting = crate::channel::exiting();
        if exiting && !self.closing && (!self.out.is_empty() || !self.ended_at_exit) {
            self.writer.close_entries(&mut self.out, self.out_records);
            self.ended_at_exit = true;
        }
        if !self.out.is_empty() || !self.defs.is_empty() || !self.spans_out.is_empty() {
            self.check_file();
            self.write_buffer();
        }
        if !self.closing && !exiting && self.writer.should_roll() {
            self.roll();
        }
        self.out_limit = out_limit(&self.writer);
    }

    /// Before a write: is the live file still at its path, whole? (It is
    /// cut back when an `fstat` says so, each write; the path is looked at
    /// once per clock interval.) If not, start a fresh file there, which
    /// begins with the dictionary `out` relies on.
    fn check_file(&mut self) {
        let now = clock::now();
        let look = now.wrapping_sub(self.last_path_check) > self.clock_every;
        if look {
            self.last_path_check = now;
        }
        let state = self.writer.check(look);
        if state == FileState::Ours {
            return;
        }
        match self.writer.restart(state) {
            Ok((header_len, lost)) => {
                self.shared.counters.files.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(header_len, Ordering::Relaxed);
                self.add_lost(lost);
                // The new file must read on its own: a clock pair and every
                // dictionary entry `out` refers to, ahead of the batch's own
                // (`defs`: sites new to the file, which SPAN entries may
                // use as well as the sites written before).
                let mut head = Vec::new();
                let (tick, ns) = clock::pair();
                dict::put_clock_entry(&mut head, tick, ns);
                for ix in 0..self.sites.len() {
                    if self.site_emitted[ix] {
                        emit_site(&mut head, &self.sites, ix);
                    }
                }
                for (&id, name) in &self.thread_names {
                    put_entry(&mut head, tag::THREAD, |b| dict::put_thread(b, id, name));
                }
                self.defs.splice(0..0, head);
                // Strings defined in the file that was replaced: all again.
                self.strings.rewrite_all();
                self.restate.clear();
                self.respan();
            }
            Err(e) => self.file_error(e),
        }
    }

    /// After the live file began again in place: every SPAN entry of this
    /// file once more, with the contexts it had, in the order they were
    /// made (a parent's before its children's). `out` and the records to
    /// come refer to them by those contexts; the entries themselves went
    /// with the file's old bytes.
    fn respan(&mut self) {
        self.spans_out.clear();
        let (book, mut file) = self.split();
        book.respan(&mut file);
    }

    /// Counts `lost` records (already counted as logged) as lost, to be
    /// reported in the file by the next write.
    fn add_lost(&mut self, lost: Lost) {
        if lost.records == 0 {
            return;
        }
        self.shared
            .counters
            .lost
            .fetch_add(lost.records, Ordering::Relaxed);
        self.pending_lost = Some(match self.pending_lost {
            Some(p) => Lost {
                records: p.records + lost.records,
                first_tick: p.first_tick.min(lost.first_tick),
                last_tick: p.last_tick.max(lost.last_tick),
            },
            None => lost,
        });
    }

    fn write_buffer(&mut self) {
        // Ahead of `out`: a gap of lost records, then the dictionary
        // entries `out` needs (sites, strings, then spans, which use both).
        let mut head = std::mem::take(&mut self.defs);
        self.strings.put_pending(&mut head);
        // This write's sites and strings, with the names of the threads it
        // names, kept to be written again; ahead of them, the last write's.
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.clear();
        fresh.extend_from_slice(&head);
        for id in self.named.drain(..) {
            if let Some(name) = self.thread_names.get(&id) {
                put_entry(&mut fresh, tag::THREAD, |b| dict::put_thread(b, id, name));
            }
        }
        self.spans_out.put_entry(&mut head);
        let restated = std::mem::replace(&mut self.restate, fresh);
        head.splice(0..0, restated.iter().copied());
        self.fresh = restated;
        if let Some(l) = self.pending_lost {
            let mut gap = Vec::new();
            put_entry(&mut gap, tag::DROP, |b| {
                dict::put_drop(b, dict::WRITER_THREAD, l.records, l.first_tick, l.last_tick)
            });
            head.splice(0..0, gap);
        }
        // (Not under loom: the duty cycle is measured by the clock.)
        let packed = if self.compression != Compression::None
            && !cfg!(loom)
            && self.duty < DUTY_COMPRESS
            && (MIN_BLOCK..=MAX_BLOCK).contains(&(head.len() + self.out.len()))
        {
            let small = self.compression == Compression::Small && self.duty < DUTY_DEFLATE;
            let codec = if small {
                crate::wire::block::DEFLATE_COMPACT
            } else {
                crate::wire::block::LZ4_COMPACT
            };
            self.packer.pack_parts([&head, &self.out], codec)
        } else {
            None
        };
        let (result, written) = if let Some(block) = packed {
            let r = self.writer.write(&[], block, self.out_records);
            (r, block.len())
        } else {
            let r = self.writer.write(&head, &self.out, self.out_records);
            (r, head.len() + self.out.len())
        };
        head.clear();
        self.defs = head;
        match result {
            Ok(()) => {
                self.strings.written();
                self.pending_lost = None;
                self.logged += self.out_records;
                self.shared
                    .counters
                    .logged
                    .store(self.logged, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(written as u64, Ordering::Relaxed);
            }
            Err(e) => {
                // (A pending gap's marker was in the failed batch: it stays
                // pending, with this batch's records added.)
                self.add_lost(Lost {
                    records: self.out_records,
                    first_tick: self.last_write,
                    last_tick: clock::now(),
                });
                self.report(e);
                // The lost batch may have held dictionary entries: write them again.
                self.forget_emitted();
                self.strings.unwritten();
            }
        }
        self.out.clear();
        self.out_records = 0;
    }

    /// Starts the next file; a failure leaves the live file in use.
    fn roll(&mut self) {
        match self.writer.roll() {
            Ok((header_len, retention)) => {
                self.shared.counters.files.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(header_len, Ordering::Relaxed);
                // The new file is complete on its own: dictionary and clock again.
                self.forget_emitted();
                self.strings.reset();
                self.clock_pair();
                if let Err(e) = retention {
                    self.file_error(e);
                }
            }
            Err(e) => self.file_error(e),
        }
    }

    /// A failed roll or deletion: counted, and reported by the next flush.
    fn file_error(&mut self, e: std::io::Error) {
        self.shared
            .counters
            .file_errors
            .fetch_add(1, Ordering::Relaxed);
        self.report(e);
    }

    /// Keeps the first error since the last flush, for it to report.
    fn report(&self, e: std::io::Error) {
        self.shared
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    }

    fn forget_emitted(&mut self) {
        // (The whole dictionary goes to the file again as records need it.)
        self.restate.clear();
        self.named.clear();
        self.site_emitted.iter_mut().for_each(|e| *e = false);
        self.thread_names.clear();
        self.file_generation += 1;
    }

    fn site(&mut self, id: u32) -> Option<usize> {
        site_ix(&mut self.sites, &mut self.site_emitted, id)
    }

    /// The spans the flusher knows, and the file being written as their
    /// resolution needs it.
    fn split(&mut self) -> (&mut Book, FileSide<'_>) {
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
        let ix = self.site(id)?;
        if !self.site_emitted[ix] {
            self.emit_site(ix);
        }
        let reg = self.sites[ix].as_ref();
        let c = Current {
            id,
            compact: reg.and_then(|r| r.compact),
            role: reg.map_or(Role::Record, |r| r.site.role),
        };
        *cur = Some(c);
        Some(c)
    }

    fn emit_site(&mut self, ix: usize) {
        emit_site(&mut self.defs, &self.sites, ix);
        self.site_emitted[ix] = true;
    }

    /// Drains a ring up to the tail this pass read; returns the records
    /// taken.
    fn drain(&mut self, r: &mut RingState) -> u64 {
        let tail = r.tail;
        if r.c.head() >= tail {
            r.deferred_at = None;
            return 0;
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
                    close(&mut self.out, &mut open);
                    let name = ring
                        .name
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    let start = begin_entry(&mut self.out, tag::THREAD);
                    dict::put_thread(&mut self.out, thread, &name);
                    end_entry(&mut self.out, start);
                    self.thread_names.insert(thread, name.clone());
                    self.named.push(thread);
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
                        switch_to(&mut self.out, o, c);
                    }
                }
                let out = &mut self.out;
                let o = open.get_or_insert_with(|| {
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
                    switch_to(out, &mut o, r.ctx.resolved.ctx);
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
                        let (used, recs) =
                            compact(raw, site, &mut o.prev_tick, out, stop, &mut self.strings);
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
            if r.c.head() - released_at >= release_bytes {
                r.c.release();
                released_at = r.c.head();
            }
            if self.out.len() >= self.out_limit {
                close(&mut self.out, &mut open);
                r.c.release();
                released_at = r.c.head();
                self.write_out();
                // A failed write or a new file forgets what was recorded.
                cur = None;
                check_thread = true;
            }
        }
        close(&mut self.out, &mut open);
        r.c.release();
        // A ring that waits for the next pass counts as work: the flusher
        // passes again (and does not stop) before it has drained it.
        if !deferred {
            r.deferred_at = None;
        }
        n + u64::from(deferred)
    }
}

impl State {
    /// A record the flusher cannot compact (its bytes do not match its
    /// site): never silently lost, it is counted as dropped and written as a
    /// one-record gap, which `decode` shows.
    #[cold]
    fn unreadable(&mut self, thread: u32, tick: u64, open: &mut Option<Open>) {
        self.shared.count_dropped();
        close(&mut self.out, open);
        put_entry(&mut self.out, tag::DROP, |b| {
            dict::put_drop(b, thread, 1, tick, tick)
        });
    }
}

/// The index of site `id` in the flusher's sites, registered there on its
/// first sight; `None` for an id no site has.
fn site_ix(
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

/// The file being written, as the resolution of a span context needs it:
/// its sites, its strings and its batch of SPAN entries.
struct FileSide<'a> {
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
        let strings = &mut *self.strings;
        self.spans_out.push(ctx, parent, site, from, |b| {
            let at = b.len();
            if record::compact_with(kinds, raw, b, strings).is_none() {
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
}

/// Appends the dictionary entry of site `ix` to `out`.
fn emit_site(out: &mut Vec<u8>, sites: &[Option<Arc<Registration>>], ix: usize) {
    let Some(info) = sites.get(ix).and_then(Option::as_ref) else {
        return;
    };
    let s = info.site;
    let start = begin_entry(out, tag::SITE);
    dict::put_site(
        out,
        &dict::SiteEntryRef {
            id: ix as u32,
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
        },
    );
    end_entry(out, start);
}

/// How much `out` may hold before it is written: [`OUT_MAX`], or less when
/// the file is that close to its size limit, so files end near the limit;
/// at least 4 KiB, so a small limit does not mean a write per record.
fn out_limit(w: &Writer) -> usize {
    w.room().clamp(4 << 10, OUT_MAX)
}

/// A context switch in the open extent `o` if its records are not in
/// context `ctx` already: the context as its difference from the one the
/// extent was in (0 as it opens). A worker of a service moves among the
/// requests in flight, whose contexts were given out lately: a byte or two
/// where the context itself grew to three and four as a file went on.
#[inline]
fn switch_to(out: &mut Vec<u8>, o: &mut Open, ctx: u32) {
    if ctx != o.ctx {
        put_varint(out, u64::from(crate::wire::CONTEXT_SWITCH));
        put_varint(out, crate::wire::zigzag(i64::from(ctx) - i64::from(o.ctx)));
        o.ctx = ctx;
    }
}

fn close(out: &mut [u8], open: &mut Option<Open>) {
    if let Some(o) = open.take() {
        end_entry(out, o.start);
    }
}
