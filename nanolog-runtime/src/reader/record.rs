//! One record: typed, unformatted; formatting is a separate call.

use std::fmt;

use super::file::{LogFile, SpanRef};
use crate::level::Level;
use crate::text::render;
use crate::wire;
use crate::wire::dict::SiteEntry;
use crate::wire::record::{with_values, Value};

/// `Record::ns` before it is computed.
const UNTIMED: i64 = i64::MIN;

/// The most contexts' trace contexts a file keeps found (see
/// [`Record::trace_context`]): past it, they are found afresh.
const TRACES_KEPT: usize = 1 << 16;

/// One record: its time, thread, call site and undecoded arguments.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    file: &'a LogFile,
    site: &'a SiteEntry,
    thread: u32,
    /// Its context (see `Item::Extent`).
    ctx: u32,
    tick: u64,
    args: &'a [u8],
    /// Bytes of the record in the file.
    len: u32,
    ns: i64,
}

/// A record's head: its call site, thread, tick and length, read without
/// its values ([`LogFile::tally_extents`]): what a count, a byte total or a
/// time range per site, thread or level needs.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// Its call site.
    pub site: &'a SiteEntry,
    /// The logger-assigned id of its thread.
    pub thread: u32,
    /// Its raw clock tick.
    pub tick: u64,
    /// Bytes of the record in the file (as [`Record::encoded_len`]).
    pub len: u32,
}

impl fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("unix_ns", &self.unix_ns())
            .field("thread", &self.thread)
            .field("site", &self.site.id)
            .field("message", &self.message())
            .finish()
    }
}

impl<'a> Record<'a> {
    /// A record stamped `ns`, or, if `None`, whose wall-clock time is
    /// computed from its file's map when asked for.
    #[inline]
    #[allow(clippy::too_many_arguments)] // the fields of a Copy record, set once
    pub(crate) fn new(
        file: &'a LogFile,
        site: &'a SiteEntry,
        thread: u32,
        ctx: u32,
        tick: u64,
        args: &'a [u8],
        len: u32,
        ns: Option<i64>,
    ) -> Record<'a> {
        Record {
            file,
            site,
            thread,
            ctx,
            tick,
            args,
            len,
            ns: ns.unwrap_or(UNTIMED),
        }
    }

    /// Bytes the record takes in the file (header and arguments).
    pub fn encoded_len(&self) -> usize {
        self.len as usize
    }

    /// The raw clock tick.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_ns(&self) -> i64 {
        if self.ns == UNTIMED {
            self.file.time_map().unix_ns(self.tick)
        } else {
            self.ns
        }
    }

    /// The level of its call site.
    pub fn level(&self) -> Level {
        self.site.level
    }

    /// The logger-assigned id of the thread that logged it (unique per file).
    pub fn thread(&self) -> u32 {
        self.thread
    }

    /// The thread's name, if it had one.
    pub fn thread_name(&self) -> Option<&'a str> {
        self.file.thread_name(self.thread)
    }

    /// The spans its thread was in when it was made, outermost first.
    pub fn spans(&self) -> Vec<SpanRef<'a>> {
        self.file.spans_of(self.ctx)
    }

    /// Calls `f` with each of its spans, outermost first (as
    /// [`Record::spans`], without allocating).
    pub fn for_each_span(&self, f: impl FnMut(SpanRef<'a>)) {
        self.file.for_each_span(self.ctx, f);
    }

    /// Its W3C trace context: the ids of the innermost of its spans that
    /// carries them (see [`TraceContext`](super::TraceContext)); `None` outside such spans.
    pub fn trace_context(&self) -> Option<super::TraceContext> {
        if self.ctx == 0 {
            return None;
        }
        // Each context's, found once (a context whose outer spans are lost
        // is found again each time: a live file may define them later).
        let memo = || {
            self.file
                .traces
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(&t) = memo().get(&self.ctx) {
            return t;
        }
        let t = self.find_trace_context();
        if !self.file.context_lost(self.ctx) {
            let mut m = memo();
            if m.len() >= TRACES_KEPT {
                m.clear();
            }
            m.insert(self.ctx, t);
        }
        t
    }

    /// [`Record::trace_context`], found in its spans: each span's applied
    /// from the outermost in ([`SpanRef::trace_context_in`]).
    fn find_trace_context(&self) -> Option<super::TraceContext> {
        let mut found = None;
        self.file
            .for_each_span(self.ctx, |s| found = s.trace_context_in(found));
        found
    }

    /// Its span context: an id within its file (0: made outside any span)
    /// that the file's records made in the same spans share, so what their
    /// spans make of them (a shipper's encoding of the chain) can be made
    /// once a context.
    pub fn context(&self) -> u32 {
        self.ctx
    }

    /// Whether it was made inside any span.
    pub fn in_spans(&self) -> bool {
        self.ctx != 0 && self.ctx != wire::RECOVERED_CONTEXT
    }

    /// Whether a recovery wrote it: its process was killed (`SIGKILL`, the
    /// OOM killer) with the record still in a ring, and the next start or
    /// `nanolog recover` read it from the rings' file. Its spans, if it
    /// was in any, are lost ([`Record::spans_lost`]).
    pub fn recovered(&self) -> bool {
        self.ctx == wire::RECOVERED_CONTEXT || self.ctx == wire::RECOVERED_LOST_CONTEXT
    }

    /// Whether some of its spans are not in the file (their SPAN entry was
    /// lost to damage): [`Record::spans`] holds those that are, the inner
    /// ones, and `decode` marks the record.
    pub fn spans_lost(&self) -> bool {
        self.ctx != 0 && self.file.context_lost(self.ctx)
    }

    /// Its call site: level, file, line, format string, argument kinds.
    pub fn site(&self) -> &'a SiteEntry {
        self.site
    }

    /// The file it came from.
    pub fn file(&self) -> &'a LogFile {
        self.file
    }

    /// The argument values, in argument order (named ones included, inline
    /// captures last).
    pub fn args(&self) -> impl Iterator<Item = Value<'a>> + 'a {
        let mut v = Vec::with_capacity(self.site.kinds.len());
        let mut pos = 0;
        let strings = self.file.strings();
        let _ = wire::record::decode_args(&self.site.kinds, self.args, &mut pos, strings, |x| {
            v.push(x)
        });
        v.into_iter()
    }

    /// The `n`-th argument (0-based), decoded without allocating.
    pub fn arg(&self, n: usize) -> Option<Value<'a>> {
        wire::record::nth_arg(&self.site.kinds, self.args, 0, n, self.file.strings())
    }

    /// Whether the rendered message can hold characters a one-line text
    /// output must escape: false when the literal text is plain and no
    /// argument is a string or char.
    pub fn may_need_escape(&self) -> bool {
        self.file.site_may_escape(self.site.id)
    }

    /// Calls `f` with the arguments as a slice, without allocating for up
    /// to 8 arguments.
    pub fn with_args<R>(&self, f: impl FnOnce(&[Value<'a>]) -> R) -> R {
        with_values(&self.site.kinds, self.args, self.file.strings(), f)
    }

    /// Appends the formatted message (what `format!` gave at the call site).
    pub fn render(&self, out: &mut String) {
        self.with_args(|args| {
            render::format_message(&self.site.pieces, &self.site.kinds, args, out)
        });
    }

    /// The formatted message.
    pub fn message(&self) -> String {
        let mut s = String::new();
        self.render(&mut s);
        s
    }
}
