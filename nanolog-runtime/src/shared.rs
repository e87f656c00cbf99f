//! What a running logger tells its user: its counters.

use std::sync::atomic::Ordering;

use crate::channel::Counters;
use crate::sync::AtomicU64;

/// Counters of a running logger, from [`Logger::stats`](crate::Logger::stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Records the flusher has taken from the rings and written out.
    pub logged: u64,
    /// Records dropped by `OnFull::Drop`, because they were larger than a
    /// whole ring (`oversize` of them), or because they were logged where no
    /// ring could take them (re-entrant calls, a forked child, a stopping
    /// logger).
    pub dropped: u64,
    /// Of `dropped`, records larger than the ring.
    pub oversize: u64,
    /// Bytes written to log files, headers included.
    pub bytes_written: u64,
    /// Records lost to failed writes (disk full, I/O error), or written
    /// into a live file that another program had deleted or cut back (these
    /// were counted in `logged` first). The file reports them too, as a
    /// loss at the start of the next successful write.
    pub lost: u64,
    /// Log files opened (more than one after a roll).
    pub files: u64,
    /// Rolls to a new file, and deletions of old files, that failed (each
    /// is also reported by the next `flush`; logging goes on in the
    /// current file, and a failed roll is tried again a second later).
    pub file_errors: u64,
    /// Logging threads seen.
    pub threads: u64,
    /// Lines the text mirror skipped because its writer was behind or had
    /// failed (the binary log has those records).
    pub mirror_skipped: u64,
    /// Records of `log`/`tracing` calls made after the process had interned
    /// its cap of bridge call sites (targets or field sets made at run
    /// time): logged at their level's overflow site with their message,
    /// fields and target as text. Counted since the process started.
    pub overflow: u64,
    /// Switches of a thread's span context (a span entered or exited) that
    /// its ring could not take (`OnFull::Drop`): not logging calls, so not
    /// in `dropped`. The thread's next record restates its context, so no
    /// record is shown in the wrong spans.
    pub context_lost: u64,
    /// Changes to `tracing` spans (a span's definition, or values recorded
    /// into it) that `OnFull::Drop` dropped because their thread's span
    /// changes had filled their budget (a sixteenth of the ring, at least
    /// 16 KiB): not logging calls, so not in `dropped`. The records made in
    /// such a span show their context as lost; a close is never dropped.
    pub spans_dropped: u64,
}

/// Reads the channel's counters (each on its own, Relaxed: a snapshot for
/// monitoring, not a consistent cut).
pub(crate) fn snapshot(c: &Counters) -> Stats {
    let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Stats {
        logged: r(&c.logged),
        dropped: r(&c.dropped),
        oversize: r(&c.oversize),
        bytes_written: r(&c.bytes_written),
        lost: r(&c.lost),
        files: r(&c.files),
        file_errors: r(&c.file_errors),
        threads: r(&c.threads),
        mirror_skipped: r(&c.mirror_skipped),
        overflow: crate::channel::BRIDGE_OVERFLOW.load(Ordering::Relaxed),
        context_lost: r(&c.context_lost),
        spans_dropped: crate::span::mail::spans_dropped(),
    }
}
