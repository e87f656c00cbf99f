//! The text mirror: the flusher also renders every record at or above a
//! level as the text line `nanolog decode` prints, for stderr, `kubectl
//! logs` and journald.
//!
//! Lines are rendered on the flusher thread (never on a calling thread) into
//! one chunk per batch, and handed to a writer thread through a bounded
//! queue. A slow or broken writer never stalls the flusher: when the queue
//! is full, or the writer has failed (a closed pipe), the chunk is skipped
//! and its lines counted in `Stats::mirror_skipped`. The binary log does not
//! depend on the mirror in any way.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::channel::Shared;
use crate::level::Level;
use crate::site::Registration;
use crate::text::line::{push_prefix, push_rest, push_utc_time, Prefix};
use crate::text::render::format_message;
use crate::text::utc::UtcWriter;
use crate::wire::record::{self, Strings, Value};

/// Chunks (batches of lines) the writer thread may fall behind by.
const QUEUE: usize = 64;
/// A chunk is handed over once it passes this size, batch or not.
const CHUNK_MAX: usize = 256 << 10;
/// How long a stopping logger waits for the mirror to write what it has.
const FINISH_WAIT: Duration = Duration::from_secs(2);

/// The writer `Builder::mirror` was given (shared by the builder's clones).
pub(crate) type SharedWriter = Arc<Mutex<dyn Write + Send>>;

/// What `Builder::mirror` configures.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) writer: SharedWriter,
    pub(crate) level: Level,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mirror::Config")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

/// The flusher's side of the mirror.
pub(crate) struct Mirror {
    level: Level,
    shared: Arc<Shared>,
    chunk: String,
    lines: u64,
    tx: Option<SyncSender<(String, u64)>>,
    done: Receiver<()>,
    utc: UtcWriter,
    /// The last clock pair (tick, Unix ns) and the calibrated rate.
    clock: (u64, i64),
    ns_per_tick: f64,
    message: String,
}

impl Mirror {
    pub(crate) fn start(
        config: Config,
        shared: Arc<Shared>,
        ticks_per_second: f64,
    ) -> std::io::Result<Mirror> {
        let (tx, rx) = mpsc::sync_channel::<(String, u64)>(QUEUE);
        let (done_tx, done) = mpsc::sync_channel(1);
        let counters = Arc::clone(&shared);
        let writer = config.writer;
        std::thread::Builder::new()
            .name("nanolog-mirror".into())
            .spawn(move || {
                let mut broken = false;
                for (chunk, lines) in rx {
                    if !broken {
                        let mut w = writer.lock().unwrap_or_else(PoisonError::into_inner);
                        broken = w
                            .write_all(chunk.as_bytes())
                            .and_then(|()| w.flush())
                            .is_err();
                        if !broken {
                            continue;
                        }
                    }
                    counters
                        .counters
                        .mirror_skipped
                        .fetch_add(lines, Ordering::Relaxed);
                }
                let _ = done_tx.send(());
            })?;
        Ok(Mirror {
            level: config.level,
            shared,
            chunk: String::new(),
            lines: 0,
            tx: Some(tx),
            done,
            utc: UtcWriter::default(),
            clock: (0, 0),
            ns_per_tick: 1e9 / ticks_per_second,
            message: String::new(),
        })
    }

    /// Whether records of `level` are mirrored.
    #[inline]
    pub(crate) fn wants(&self, level: Level) -> bool {
        level >= self.level
    }

    /// A span of site `reg` with fields `raw` (as its ring record held
    /// them) as a line shows it (`name{k=v ..}`, unescaped): rendered once,
    /// when it is entered.
    pub(crate) fn span_text(reg: &Registration, raw: &[u8]) -> String {
        let mut values = Vec::with_capacity(reg.kinds.len());
        let mut text = String::new();
        let mut args = Vec::new();
        if record::compact(&reg.kinds, raw, &mut args).is_some()
            && record::decode_args(&reg.kinds, &args, &mut 0, Strings::NUMBERED, |v| {
                values.push(v)
            })
            .is_some()
        {
            format_message(reg.site.pieces, &reg.kinds, &values, &mut text);
        }
        text
    }

    /// A new clock pair: later ticks map from it.
    pub(crate) fn clock_pair(&mut self, tick: u64, unix_ns: i64) {
        self.clock = (tick, unix_ns);
    }

    /// Renders one record from its compacted arguments (with the strings
    /// they refer to): decoded by the reader's own decoder, not from the
    /// ring's raw arguments, which have none (a second decoder of raw bytes
    /// would be the one place a mirrored line could differ from `decode`'s).
    /// Its time is mapped
    /// from the last clock pair at the calibrated rate (`decode`, which also
    /// sees the next pair, interpolates: the two agree to within the clock's
    /// drift over a second, microseconds at most).
    ///
    /// `spans` are the thread's spans, outermost first, each as
    /// [`Mirror::span_text`] rendered it; they print as `decode` prints them.
    pub(crate) fn record<'s>(
        &mut self,
        reg: &Registration,
        thread: u32,
        name: &str,
        tick: u64,
        (compacted, strings): (&[u8], Strings<'_>),
        spans: impl Iterator<Item = &'s str>,
    ) {
        let site = reg.site;
        let mut values: Vec<Value<'_>> = Vec::with_capacity(reg.kinds.len());
        let ok = record::decode_args(&reg.kinds, compacted, &mut 0, strings, |v| values.push(v));
        if ok.is_none() {
            return;
        }
        let (t0, n0) = self.clock;
        let dt = tick.wrapping_sub(t0) as i64 as f64 * self.ns_per_tick;
        push_utc_time(&mut self.utc, &mut self.chunk, n0.saturating_add(dt as i64));
        push_rest(
            &mut self.chunk,
            |out| {
                push_prefix(
                    out,
                    &Prefix {
                        file: site.file,
                        line: site.line,
                        level: site.level,
                        thread,
                        name: Some(name),
                        target: site.target,
                        module: site.module,
                        color: false,
                    },
                )
            },
            false,
            // `request{id=7}:db{table="users"}`.
            |out| {
                for span in spans {
                    if !out.is_empty() {
                        out.push(':');
                    }
                    out.push_str(span);
                }
            },
            |out| format_message(site.pieces, &reg.kinds, &values, out),
            true,
            &mut self.message,
        );
        self.lines += 1;
        if self.chunk.len() >= CHUNK_MAX {
            self.end_batch();
        }
    }

    /// Hands the batch's lines to the writer thread, or skips and counts
    /// them if it is behind or gone.
    pub(crate) fn end_batch(&mut self) {
        if self.lines == 0 {
            return;
        }
        let chunk = std::mem::take(&mut self.chunk);
        let lines = std::mem::take(&mut self.lines);
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.try_send((chunk, lines)).is_ok());
        if !sent {
            self.shared
                .counters
                .mirror_skipped
                .fetch_add(lines, Ordering::Relaxed);
        }
    }

    /// The logger stops: the last lines go out, and the writer thread gets
    /// [`FINISH_WAIT`] to write what it holds (a stuck writer is left behind).
    pub(crate) fn finish(&mut self) {
        self.end_batch();
        self.tx = None;
        // Done, gone, or still stuck after the wait: either way the logger stops.
        let _ = self.done.recv_timeout(FINISH_WAIT);
    }
}
