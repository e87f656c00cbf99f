//! `nanolog ship` (README "Shipping"): follows a log as `decode -f` does and
//! sends its records to an OpenTelemetry collector as OTLP/HTTP protobuf.
//!
//! At least once, and nothing twice across restarts: a batch is a run of
//! whole extents of one file, `[from, to)`; `to` is saved in the cursor
//! only once the collector accepted the batch. A ship killed at any point
//! sends again at most the batch it had sent and not yet seen accepted.
//! Memory is a few batches (two in flight per encoding thread, and their
//! encodings), whatever the backlog.

mod http;
mod options;
mod otlp;
mod pb;
mod stop;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nanolog_runtime::reader::{Batch, Event, Filter, LogFile, Merge, TimeMap};

use crate::cli::ShipArgs;
use crate::follow::{follow, Cursor, Sink, Start};
use crate::live::LiveEdge;
use crate::output::gap_message;

pub fn run(a: &ShipArgs) -> anyhow::Result<()> {
    let r = ship(a);
    match r {
        // SIGTERM/SIGINT: the cursor is at the last batch accepted and the
        // summary is printed; a clean end.
        Err(e) if e.chain().any(|c| c.is::<stop::Stopped>()) => {
            let _ = writeln!(io::stderr(), "nanolog: ship stopped by a signal");
            Ok(())
        }
        r => r,
    }
}

fn ship(a: &ShipArgs) -> anyhow::Result<()> {
    stop::install();
    // As OpenTelemetry's exporters read them: the signal-specific variable
    // is the whole URL, the general one a base that /v1/logs is added to.
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (endpoint, exact) = match &a.endpoint {
        Some(e) => (e.clone(), false),
        None => match (
            env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"),
            env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(e), _) => (e, true),
            (None, Some(e)) => (e, false),
            (None, None) => anyhow::bail!(
                "no collector: give --endpoint URL or set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"
            ),
        },
    };
    let give_up = match (&a.give_up_after, a.once) {
        (Some(d), _) => Some(Duration::from_nanos(
            crate::time_args::parse_duration_ns(d)
                .map_err(|e| anyhow::anyhow!("--give-up-after: {e}"))?,
        )),
        (None, true) => Some(Duration::from_secs(120)),
        (None, false) => None,
    };
    if a.once {
        for f in &a.files {
            let base = nanolog_runtime::reader::resolve_log_path(f);
            if !base.exists()
                && nanolog_runtime::reader::finished_files(&base)
                    .unwrap_or_default()
                    .is_empty()
            {
                anyhow::bail!(
                    "{}: no such log (nor finished files of its set)",
                    f.display()
                );
            }
        }
    }
    let max_backoff = crate::time_args::parse_duration_ns(&a.max_backoff)
        .map_err(|e| anyhow::anyhow!("--max-backoff: {e}"))?;
    let stats_every = a
        .stats_every
        .as_deref()
        .map(crate::time_args::parse_duration_ns)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--stats-every: {e}"))?
        .map(Duration::from_nanos);
    let abort = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The files of one set given together (`app.nlog app.*Z.nlog`, as
    // `decode` takes a set) are one log: followed from its live path.
    let logs = logs_of(&a.files);
    if !a.cursor.is_empty() && a.cursor.len() != logs.len() {
        anyhow::bail!(
            "{} logs and {} cursors: give one --cursor per log, in the order of the logs (the files of one set are one log)",
            logs.len(),
            a.cursor.len()
        );
    }
    // (Read before anything is sent: a bad variable stops ship here.)
    let opts = options::options(a)?;
    let mut extra = options::resource_attributes()?;
    // service.name: --service, OTEL_SERVICE_NAME, then
    // OTEL_RESOURCE_ATTRIBUTES', as the specification orders them.
    let from_attributes = extra
        .iter()
        .find(|(k, _)| k == "service.name")
        .map(|(_, v)| v.clone());
    let service = a
        .service
        .clone()
        .or_else(|| std::env::var("OTEL_SERVICE_NAME").ok())
        .filter(|s| !s.is_empty())
        .or(from_attributes)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown_service".into());
    // (The writer's host and pid, from the file, are not replaced.)
    extra.retain(|(k, _)| !matches!(k.as_str(), "service.name" | "host.name" | "process.pid"));
    let extra = std::sync::Arc::new(extra);
    // For files of writers before the SET entry, which names their host.
    let host = Some(nanolog_runtime::host_name())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    // Building and encoding batches is most of ship's work: one thread per
    // core does it, the batches still sent one at a time in file order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let make = |base: &Path| -> anyhow::Result<Shipper> {
        Ok(Shipper {
            workers: (0..threads)
                .map(|_| {
                    otlp::Batch::new(service.clone(), host.clone(), std::sync::Arc::clone(&extra))
                })
                .collect(),
            batch_bytes: a.batch_kib.max(1) << 10,
            once: a.once,
            abort: std::sync::Arc::clone(&abort),
            live: LiveEdge::new(base),
            taken: 0,
            spare: Vec::new(),
            progress: Progress {
                // A link at the path: the set is beside its target.
                base: nanolog_runtime::reader::resolve_log_path(base),
                client: http::Client::new(
                    &endpoint,
                    exact,
                    Duration::from_nanos(max_backoff),
                    give_up,
                    opts.clone(),
                )?,
                stats_every,
                last_stats: Instant::now(),
                records: 0,
                batches: 0,
                shipped_bytes: 0,
                at: None,
                files_missed: 0,
                records_missed: 0,
                max_body: (a.max_body_kib << 10).max(MIN_BODY),
            },
        })
    };
    let cursor = |i: usize| Cursor::new(a.cursor.get(i).map(PathBuf::as_path), &logs[i]);
    if let [one] = logs.as_slice() {
        let mut s = make(one)?;
        let result = follow(one, &cursor(0), Start::WholeSet, None, &mut s)
            .with_context(|| format!("shipping {}", one.display()));
        s.progress.summary();
        return result;
    }
    // Several logs: one follower each, side by side; one that fails stops
    // the others.
    let shippers = logs
        .iter()
        .enumerate()
        .map(|(i, f)| Ok((make(f)?, cursor(i))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    std::thread::scope(|scope| {
        let running: Vec<_> = shippers
            .into_iter()
            .map(|(mut s, cursor)| {
                let abort = std::sync::Arc::clone(&abort);
                scope.spawn(move || {
                    let base = s.progress.base.clone();
                    let r = follow(&base, &cursor, Start::WholeSet, None, &mut s)
                        .with_context(|| format!("shipping {}", base.display()));
                    s.progress.summary();
                    match &r {
                        Err(e) if e.chain().any(|c| c.is::<stop::Stopped>()) => {}
                        Err(e) => {
                            // Said now, and the other logs stop: a ship that
                            // cannot go on with one of its logs ends (exit
                            // 1), for its supervisor to see.
                            let _ = writeln!(io::stderr(), "nanolog: error: {e:#}");
                            abort.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(()) => {}
                    }
                    r
                })
            })
            .collect();
        let mut first = None;
        for r in running {
            let r = r
                .join()
                .map_err(|_| anyhow::anyhow!("a shipping thread panicked"))
                .and_then(|r| r);
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    })
}

/// The follower's sink: batches of the log, sent and then saved.
struct Shipper {
    /// One batch being built per encoding thread.
    workers: Vec<otlp::Batch>,
    batch_bytes: usize,
    once: bool,
    /// Set when one of the ship's logs failed.
    abort: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How far the last `take` shipped its file.
    taken: usize,
    /// The live file's edge and the set's clocks.
    live: LiveEdge,
    progress: Progress,
    /// Request buffers between batches, kept from one `take` to the next
    /// (a follower takes a live file a little at a time): a buffer let go
    /// and made again is a few MB of fresh pages to fault in.
    spare: Vec<Vec<u8>>,
}

/// The batch of `log` in `[from, to)`, built into `batch` and encoded
/// into `buf`; returns how many records it holds and where in `buf` the
/// request starts.
fn fill(
    batch: &mut otlp::Batch,
    log: &LogFile,
    from: usize,
    to: usize,
    clock: &TimeMap,
    buf: &mut Vec<u8>,
) -> (usize, usize) {
    batch.start(log);
    let filter = Filter {
        min_offset: from,
        max_offset: Some(to),
        ..Filter::default()
    };
    let mut merge = Merge::unsorted(std::slice::from_ref(log), filter).batches();
    merge.set_clock(0, clock.clone());
    let observed = now_ns();
    // In batches: a large file's blocks are inflated as the merge reaches
    // them, and let go once encoded.
    let mut events = Batch::with_capacity(1024);
    let mut go = true;
    while go {
        events.clear();
        go = merge.fill(&mut events, 1024);
        for ev in events.events() {
            match ev {
                Event::Record(rec) => batch.push(rec, observed),
                Event::Gap(g, file) => batch.push_gap(g, file, &gap_message(g)),
            }
        }
    }
    for e in merge.take_errors() {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    let n = batch.len();
    (n, batch.encode_into(buf))
}

/// What has been sent, and where to.
struct Progress {
    base: PathBuf,
    client: http::Client,
    stats_every: Option<Duration>,
    last_stats: Instant,
    records: u64,
    batches: u64,
    /// Bytes of log the batches sent so far held (for the lag's estimate
    /// of records per byte).
    shipped_bytes: u64,
    /// The file being shipped (its path) and the position reached in it,
    /// for the lag.
    at: Option<(PathBuf, usize)>,
    /// Files of the set deleted before they were shipped, and the records
    /// they held (as far as the files around them say).
    files_missed: u64,
    records_missed: u64,
    /// The largest request body sent (`--max-body-kib`, halved when the
    /// collector refuses a request as too large).
    max_body: usize,
}

/// The smallest request body ship halves down to.
const MIN_BODY: usize = 16 << 10;

impl Sink for Shipper {
    /// Damage in a file being shipped: the warning `decode` gives, on
    /// stderr, and a WARN record at the collector counting the bytes
    /// skipped (`nanolog.corrupt_bytes`), as drop gaps carry theirs.
    fn warned(&mut self, w: &nanolog_runtime::reader::Warning) -> anyhow::Result<()> {
        use nanolog_runtime::reader::Warning;
        let _ = writeln!(io::stderr(), "nanolog: warning: {w}");
        let bytes = match w {
            Warning::SkippedCorrupt { len, .. }
            | Warning::TornTail { len, .. }
            | Warning::BadBlock { len, .. } => *len as u64,
            Warning::MoreSkipped { bytes, .. } => *bytes as u64,
            _ => 0,
        };
        self.send_note(&w.to_string(), &[("nanolog.corrupt_bytes", bytes)])
    }

    /// Files retention deleted before they were shipped: said on stderr,
    /// counted in the progress lines, and told to the collector as a WARN
    /// record with `nanolog.files_missed`, as drop gaps are.
    fn missed(&mut self, files: u64, records: Option<u64>, set: &Path) -> anyhow::Result<()> {
        let held = records.map_or_else(
            || "their records (not counted by their writer) are lost".to_owned(),
            |n| format!("their {n} records are lost"),
        );
        let message = format!(
            "{files} file(s) of {} were deleted (by the writer's retention) before they were shipped: {held}",
            set.display()
        );
        let _ = writeln!(io::stderr(), "nanolog: warning: {message}");
        self.progress.files_missed += files;
        self.progress.records_missed += records.unwrap_or(0);
        let mut counts = vec![("nanolog.files_missed", files)];
        counts.extend(records.map(|n| ("nanolog.records_missed", n)));
        self.send_note(&message, &counts)
    }

    /// Batches are built and encoded on worker threads, several at a time,
    /// and sent from this one in file order; each one's end is saved in
    /// the cursor once the collector accepted it, so the cursor never
    /// passes a batch that was not accepted.
    fn take(&mut self, log: &LogFile, from: usize, cursor: &Cursor) -> anyhow::Result<bool> {
        if self.aborted() {
            return Ok(false);
        }
        let end = self.live.edge(log);
        self.taken = end.max(from);
        if from >= end {
            return Ok(true);
        }
        let clock = self.live.clock(log, from);
        let first_end = log.batch_end(from, self.batch_bytes);
        if first_end >= end || self.workers.len() == 1 {
            // One batch (a live log's latest records): no threads.
            let mut pos = from;
            let mut buf = self.spare.pop().unwrap_or_default();
            while pos < end {
                let to = log.batch_end(pos, self.batch_bytes).min(end);
                let (n, at) = fill(&mut self.workers[0], log, pos, to, &clock, &mut buf);
                self.progress.sent(log, pos, to, n, &buf[at..], cursor)?;
                pos = to;
            }
            self.spare.push(buf);
            return Ok(true);
        }
        let batch_bytes = self.batch_bytes;
        let (workers, this, spare) = (&mut self.workers, &mut self.progress, &mut self.spare);
        std::thread::scope(|s| -> anyhow::Result<()> {
            let mut jobs = Vec::new();
            let mut done = Vec::new();
            for batch in workers.iter_mut() {
                let (job_tx, job_rx) = sync_channel::<(usize, usize, Vec<u8>)>(1);
                let (done_tx, done_rx) = sync_channel::<(Vec<u8>, (usize, usize))>(1);
                let clock = &clock;
                s.spawn(move || {
                    for (a, b, mut buf) in job_rx {
                        let n = fill(batch, log, a, b, clock, &mut buf);
                        if done_tx.send((buf, n)).is_err() {
                            break;
                        }
                    }
                });
                jobs.push(job_tx);
                done.push(done_rx);
            }
            // Batch i is worker i % w's; each worker answers in order.
            let w = jobs.len();
            let mut in_flight = std::collections::VecDeque::new();
            let (mut next, mut issued) = (from, 0usize);
            loop {
                while in_flight.len() < 2 * w && next < end {
                    let to = log.batch_end(next, batch_bytes).min(end);
                    let k = issued % w;
                    let buf = spare.pop().unwrap_or_default();
                    if jobs[k].send((next, to, buf)).is_err() {
                        anyhow::bail!("a batch-encoding thread ended");
                    }
                    in_flight.push_back((next, to, k));
                    issued += 1;
                    next = to;
                }
                let Some((a, b, k)) = in_flight.pop_front() else {
                    break;
                };
                let (buf, (n, at)) = done[k]
                    .recv()
                    .map_err(|_| anyhow::anyhow!("a batch-encoding thread ended"))?;
                this.sent(log, a, b, n, &buf[at..], cursor)?;
                spare.push(buf);
            }
            Ok(())
        })?;
        Ok(true)
    }

    fn idle(&mut self) -> anyhow::Result<bool> {
        self.progress.maybe_stats();
        if stop::requested() {
            return Err(stop::Stopped.into());
        }
        // `--once` waits for the records held at the live edge (the
        // writer's next clock pair, within a second, or the hold's end).
        if self.once && self.live.holding() {
            return Ok(!self.aborted());
        }
        Ok(!self.once && !self.aborted())
    }

    fn taken_to(&self, log: &LogFile) -> usize {
        self.taken.min(log.valid_len())
    }
}

impl Shipper {
    /// Sends a WARN record of nanolog's own, now: `message`, and the count
    /// `n` under the attribute `key`.
    fn send_note(&mut self, message: &str, counts: &[(&str, u64)]) -> anyhow::Result<()> {
        let batch = &mut self.workers[0];
        batch.start_resource(None, None);
        batch.push_note(now_ns(), message, counts);
        let mut buf = Vec::new();
        let at = batch.encode_into(&mut buf);
        self.progress.client.send(&buf[at..])
    }

    /// Another log of this ship failed: this one stops too.
    fn aborted(&self) -> bool {
        self.abort.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Progress {
    /// Sends the batch of `[from, to)` of `log` (`n` records, encoded in
    /// `body`) until the collector accepts it, then saves `to` in the
    /// cursor.
    fn sent(
        &mut self,
        log: &LogFile,
        from: usize,
        to: usize,
        n: usize,
        body: &[u8],
        cursor: &Cursor,
    ) -> anyhow::Result<()> {
        if n > 0 {
            self.send_bounded(body)?;
            self.records += n as u64;
            self.batches += 1;
            self.shipped_bytes += (to - from) as u64;
        }
        // Accepted (or nothing to send): the position moves past it.
        cursor.save(log, to)?;
        if stop::requested() {
            self.at = Some((log.path().to_path_buf(), to));
            return Err(stop::Stopped.into());
        }
        self.at = Some((log.path().to_path_buf(), to));
        self.maybe_stats();
        Ok(())
    }

    /// Sends `body`, in parts of at most `max_body` bytes, each part split
    /// again in halves while the collector refuses it as too large.
    fn send_bounded(&mut self, body: &[u8]) -> anyhow::Result<()> {
        let mut parts: std::collections::VecDeque<Vec<u8>> = if body.len() <= self.max_body {
            match self.client.send(body) {
                Ok(()) => return Ok(()),
                Err(e) if e.is::<http::TooLarge>() => self.halve(body, &e)?.into(),
                Err(e) => return Err(e),
            }
        } else {
            otlp::split_to_fit(body, self.max_body)?.into()
        };
        while let Some(part) = parts.pop_front() {
            match self.client.send(&part) {
                Ok(()) => {}
                Err(e) if e.is::<http::TooLarge>() => {
                    for p in self.halve(&part, &e)?.into_iter().rev() {
                        parts.push_front(p);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `body`, refused as too large, in parts of half its size (the bound
    /// for later batches halved too); an error once it is down to
    /// [`MIN_BODY`].
    fn halve(&mut self, body: &[u8], e: &anyhow::Error) -> anyhow::Result<Vec<Vec<u8>>> {
        let half = body.len() / 2;
        if half < MIN_BODY {
            anyhow::bail!(
                "{e:#}; a request of {} bytes is as small as ship makes them",
                body.len()
            );
        }
        let _ = writeln!(
            io::stderr(),
            "nanolog: warning: {e:#}; sending it in parts of at most {half} bytes"
        );
        self.max_body = self.max_body.min(half);
        otlp::split_to_fit(body, half)
    }

    fn maybe_stats(&mut self) {
        let Some(every) = self.stats_every else {
            return;
        };
        if self.last_stats.elapsed() < every {
            return;
        }
        self.last_stats = Instant::now();
        let behind = self.behind_bytes();
        let per_record = if self.records > 0 {
            self.shipped_bytes as f64 / self.records as f64
        } else {
            0.0
        };
        let records_behind = if per_record > 0.0 {
            format!("~{:.0} records", behind as f64 / per_record)
        } else {
            "? records".into()
        };
        let _ = writeln!(
            io::stderr(),
            "nanolog ship: {}: {} in {} sent, {}; behind the live file by {records_behind} ({behind} bytes); {} ({}) deleted before they were shipped",
            self.base.display(),
            crate::output::count(self.records, "record", "records"),
            crate::output::count(self.batches, "batch", "batches"),
            crate::output::count(self.client.retries, "retry", "retries"),
            crate::output::count(self.files_missed, "file", "files"),
            crate::output::count(self.records_missed, "record", "records"),
        );
    }

    /// Bytes of the set not shipped yet: the rest of the file being
    /// shipped, and every file of the set that began after it.
    fn behind_bytes(&self) -> u64 {
        let Some((path, pos)) = &self.at else {
            return 0;
        };
        let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let mut behind = len(path).saturating_sub(*pos as u64);
        // The files after it in the set's order (by their names: none is
        // opened).
        let set = nanolog_runtime::reader::finished_files_keyed(&self.base).unwrap_or_default();
        if let Some(i) = set.iter().position(|(_, p, _)| p == path) {
            behind += set[i + 1..].iter().map(|f| f.2).sum::<u64>();
        }
        if *path != self.base {
            behind += len(&self.base);
        }
        behind
    }

    /// The last line: what was shipped.
    fn summary(&self) {
        let _ = writeln!(
            io::stderr(),
            "nanolog: shipped {} in {} to {} ({})",
            crate::output::count(self.records, "record", "records"),
            crate::output::count(self.batches, "batch", "batches"),
            self.client.shown_url(),
            crate::output::count(self.client.retries, "retry", "retries")
        );
    }
}

/// The logs `files` name: each file, or for a finished file of a set, the
/// set's live path; each log once, in the order first named.
fn logs_of(files: &[PathBuf]) -> Vec<PathBuf> {
    let key = |p: &Path| {
        let p = nanolog_runtime::reader::resolve_log_path(p);
        std::path::absolute(&p).unwrap_or(p)
    };
    let mut logs: Vec<(PathBuf, PathBuf)> = Vec::new();
    for f in files {
        let log = nanolog_runtime::reader::set_base_of(f).unwrap_or_else(|| f.clone());
        let k = key(&log);
        if !logs.iter().any(|(_, seen)| *seen == k) {
            logs.push((log, k));
        }
    }
    logs.into_iter().map(|(l, _)| l).collect()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
