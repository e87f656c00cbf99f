//! The flusher thread: drains the rings round-robin, compacts records into
//! extents, and writes them at the end of each batch.
//!
//! This file is the pass loop: when the flusher passes, naps and stops.
//! Draining a ring is [`drain`], writing, rolling and the codec policy
//! [`output`], the file's dictionary [`dict`].

mod dict;
mod drain;
mod index;
mod output;
mod stage;

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::channel::Shared;
use crate::clock;
use crate::mirror::Mirror;
use crate::ring::Consumer;
use crate::site::Registration;
use crate::span::book::{Book, Context};
use crate::writer::{Lost, Writer};
use drain::EXTENT_MAX;
use output::{out_limit, OUT_MAX, WRITE_EVERY};

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
/// "Naps instead of spinning", has the figures). C++ NanoLog's compression
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
/// adds; BENCHMARKS.md, "Longer naps while threads wait for cores").
/// Records wait up to this long more in
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
/// (BENCHMARKS.md, "The codec policy").
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
    /// By site id, what its records need of its registration (see
    /// `State::current`).
    currents: Vec<Option<drain::Current>>,
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
    spans_out: crate::wire::dict::SpanBatch,
    /// The dictionary entries the last write brought to the file that the
    /// records of every later write may need (sites, strings, thread
    /// names), written again at the head of the next: each is in the file
    /// twice, in two writes, so a write lost to damage (a bad byte in its
    /// block) costs the records in it, not every record after it. (SPAN
    /// entries are not: restating them took the service bench's log from
    /// 19.5 to 26.2-26.5 bytes an event, and a second copy only where a
    /// later write's records use a span from 19.4-20.2 to 23.5-24.7
    /// (2026-11-27, `git show 81b8c7a:BENCHMARKS.md`, "#46: the dictionary
    /// written twice"). A span defined in a lost write is marked lost on
    /// the records of it in later writes.)
    restate: Vec<u8>,
    /// The dictionary entries of the write being made, for `restate`
    /// (kept for its allocation).
    fresh: Vec<u8>,
    /// The clock pairs due in the file: written with the next write, as
    /// entries of their own outside its blocks (a reader finds every pair
    /// without inflating, see [`index`]).
    clocks: Vec<u8>,
    /// A write's first region (see `State::write_buffer`), kept for its
    /// allocation.
    lead: Vec<u8>,
    /// What the records in `out` hold, for the write's INDEX entry.
    sum: index::Summary,
    /// The run of small writes being made, summed up for its RUN entry.
    run: Option<index::OpenRun>,
    /// The records in `out` counted by site and thread, for the file's
    /// TOTALS entry (the writer adds them up as writes succeed).
    tally: crate::wire::totals::Totals,
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
    /// What of the write being made a crash-safe logger's area holds
    /// (see [`stage`]).
    stage: stage::Stage,
}

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

impl State {
    /// The flusher's state for a logger sharing `shared`, writing through
    /// `writer`, configured by `config`: no rings yet, nothing written but
    /// the file's header.
    fn new(shared: Arc<Shared>, writer: Writer, config: Config) -> State {
        let hz = clock::ticks_per_second();
        shared.counters.files.store(1, Ordering::Relaxed);
        shared
            .counters
            .bytes_written
            .store(crate::wire::HEADER_LEN as u64, Ordering::Relaxed);
        // From the first batch on: a file's size limit may be below OUT_MAX.
        let out_limit = out_limit(&writer);
        let stage = stage::Stage::new(&shared);
        State {
            shared,
            writer,
            file_generation: 0,
            out: Vec::with_capacity(OUT_MAX + EXTENT_MAX),
            out_records: 0,
            out_limit,
            sites: Vec::new(),
            site_emitted: Vec::new(),
            currents: Vec::new(),
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
            spans_out: crate::wire::dict::SpanBatch::new(crate::wire::dict::span_tick_shift(
                crate::wire::VERSION,
                clock::ticks_per_second(),
            )),
            restate: Vec::new(),
            fresh: Vec::new(),
            clocks: Vec::new(),
            lead: Vec::new(),
            sum: index::Summary::default(),
            run: None,
            tally: crate::wire::totals::Totals::new(),
            compression: config.compression,
            duty: 0,
            packer: crate::wire::block::Packer::new(),
            pressure: crate::pressure::Pressure::open(),
            stage,
        }
    }
}

pub(crate) fn run(shared: Arc<Shared>, writer: Writer, config: Config) {
    let _guard = RunningGuard(Arc::clone(&shared));
    crate::channel::mark_flusher_thread();
    shared
        .flusher_id
        .store(crate::channel::thread_id(), Ordering::Relaxed);
    let hz = clock::ticks_per_second();
    let wake_delay = config.wake_delay;
    let st = State::new(shared, writer, config);
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
            st.close_out();
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
        crate::sync::park_timeout(if idle <= NAPS { nap } else { wake_delay });
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
