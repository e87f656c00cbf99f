//! Bodies of the dictionary and control entries: SITE, THREAD, CLOCK, DROP, ROTATE.

use std::borrow::Cow;

use crate::level::Level;
use crate::wire::format::{Align, ArgKind, Count, Piece, Role, Spec, Ty};

use super::{get_array, get_str, get_varint, put_str, put_varint, unzigzag, zigzag};

/// A call site as the log describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteEntry {
    /// The id records refer to it by (unique within a file).
    pub id: u32,
    /// The call's level.
    pub level: Level,
    /// The source file of the call.
    pub file: String,
    /// The line of the call.
    pub line: u32,
    /// The module path of the call.
    pub module: String,
    /// The format string as written.
    pub format: String,
    /// How each argument is stored, in argument order.
    pub kinds: Vec<ArgKind>,
    /// The pre-parsed format string.
    pub pieces: Vec<Piece>,
    /// The call's target (its module path unless the call gave one; the
    /// module path in files written before targets were recorded).
    pub target: String,
    /// Each argument's name, in argument order (`""` for a positional
    /// argument); empty when no argument has a name, and in files written
    /// before names were recorded.
    pub names: Vec<String>,
    /// A log record's site, or a span's (its entries are SPAN entries,
    /// never records of an extent).
    pub role: Role,
    /// How many of `pieces` render the message; the rest render the
    /// record's fields (`key=value` after a `tracing` event's message),
    /// shown in text but not in JSON's `msg`. All of them in files written
    /// before this was recorded.
    pub message_pieces: usize,
    /// A span's site: how many of its arguments, before the span's key,
    /// are its trace context (`trace_id`, `span_id`, `trace_flags`, as an
    /// OpenTelemetry layer assigned them) rather than fields. 0 for other
    /// sites, and in files written before this was recorded.
    pub context_args: usize,
}

impl SiteEntry {
    /// Whether it has an argument named `span_id`: a span site whose spans
    /// may carry W3C trace ids (its trace context, or fields by the
    /// README's convention), which a record's trace context is looked for
    /// in and a writer's INDEX entries name.
    pub fn may_carry_trace(&self) -> bool {
        self.names.iter().any(|n| n == "span_id")
    }

    /// The pieces that render the message alone (a `tracing` or `log`
    /// record's, without its fields).
    pub fn message(&self) -> &[Piece] {
        &self.pieces[..self.message_pieces.min(self.pieces.len())]
    }

    /// The name of argument `i`, if it has one.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.names
            .get(i)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }
}

/// SITE body: `id, level: u8, line, file, module, format, kinds, pieces,
/// target, names` (integers are varints, strings length-prefixed; see
/// FORMAT.md). `target` and `names` were added after the first files were
/// written: a reader takes them as absent when the body ends before them.
pub fn put_site(out: &mut Vec<u8>, s: &SiteEntryRef<'_>) {
    put_varint(out, u64::from(s.id));
    out.push(s.level as u8);
    put_varint(out, u64::from(s.line));
    put_str(out, s.file);
    put_str(out, s.module);
    put_str(out, s.format);
    put_varint(out, s.kinds.len() as u64);
    out.extend(s.kinds.iter().map(|k| *k as u8));
    put_varint(out, s.pieces.len() as u64);
    for p in s.pieces {
        match p {
            Piece::Lit(l) => {
                out.push(0);
                put_str(out, l);
            }
            Piece::Arg(spec) => {
                out.push(1);
                put_varint(out, u64::from(spec.arg));
                put_varint(out, u64::from(spec.use_ix));
                put_varint(out, u64::from(spec.fill as u32));
                out.push(spec.align as u8);
                out.push(spec.flags);
                put_count(out, spec.width);
                put_count(out, spec.precision);
                out.push(spec.ty as u8);
            }
        }
    }
    put_str(out, s.target);
    // No names at all when every argument is positional: readers then skip
    // the named-fields work per record.
    let names = if s.names.iter().any(|n| !n.is_empty()) {
        s.names
    } else {
        &[]
    };
    put_varint(out, names.len() as u64);
    for n in names {
        put_str(out, n);
    }
    out.push(s.role as u8);
    // Only where fields follow the message, or a span's trace context
    // follows its fields: other sites end as before.
    if s.message_pieces < s.pieces.len() || s.context_args > 0 {
        put_varint(out, s.message_pieces.min(s.pieces.len()) as u64);
    }
    if s.context_args > 0 {
        put_varint(out, s.context_args as u64);
    }
}

/// The borrowed view of a site the writer encodes.
pub struct SiteEntryRef<'a> {
    /// The site id records refer to.
    pub id: u32,
    /// The call's level.
    pub level: Level,
    /// The source file of the call.
    pub file: &'a str,
    /// The line of the call.
    pub line: u32,
    /// The module path of the call.
    pub module: &'a str,
    /// The format string, as written.
    pub format: &'a str,
    /// The kinds of the recorded arguments, in order.
    pub kinds: &'a [ArgKind],
    /// The parsed format string.
    pub pieces: &'a [Piece],
    /// The call's target.
    pub target: &'a str,
    /// Each argument's name (`""` for a positional one).
    pub names: &'a [&'a str],
    /// A record's site or a span's.
    pub role: Role,
    /// How many of `pieces` render the message (the rest: its fields).
    pub message_pieces: usize,
    /// How many arguments before a span's key are its trace context.
    pub context_args: usize,
}

fn put_count(out: &mut Vec<u8>, c: Count) {
    match c {
        Count::Implied => out.push(0),
        Count::Is(n) => {
            out.push(1);
            put_varint(out, u64::from(n));
        }
        Count::Arg(i) => {
            out.push(2);
            put_varint(out, u64::from(i));
        }
    }
}

fn get_count(b: &[u8], pos: &mut usize) -> Option<Count> {
    let t = get_array::<1>(b, pos)?[0];
    Some(match t {
        0 => Count::Implied,
        1 => Count::Is(u32::try_from(get_varint(b, pos)?).ok()?),
        2 => Count::Arg(u16::try_from(get_varint(b, pos)?).ok()?),
        _ => return None,
    })
}

fn get_u32(b: &[u8], pos: &mut usize) -> Option<u32> {
    u32::try_from(get_varint(b, pos)?).ok()
}

fn get_u16(b: &[u8], pos: &mut usize) -> Option<u16> {
    u16::try_from(get_varint(b, pos)?).ok()
}

/// Decodes a SITE body; `None` if it is malformed or refers to arguments it
/// does not have.
pub fn get_site(b: &[u8]) -> Option<SiteEntry> {
    let pos = &mut 0;
    let id = get_u32(b, pos)?;
    let level = Level::from_u8(get_array::<1>(b, pos)?[0])?;
    let line = get_u32(b, pos)?;
    let file = get_str(b, pos)?.to_owned();
    let module = get_str(b, pos)?.to_owned();
    let format = get_str(b, pos)?.to_owned();
    let n_kinds = usize::try_from(get_varint(b, pos)?).ok()?;
    if n_kinds > b.len() {
        return None;
    }
    let mut kinds = Vec::with_capacity(n_kinds);
    for _ in 0..n_kinds {
        kinds.push(ArgKind::from_u8(get_array::<1>(b, pos)?[0])?);
    }
    let n_pieces = usize::try_from(get_varint(b, pos)?).ok()?;
    if n_pieces > b.len() {
        return None;
    }
    let mut pieces = Vec::with_capacity(n_pieces);
    for _ in 0..n_pieces {
        let t = get_array::<1>(b, pos)?[0];
        pieces.push(match t {
            0 => Piece::Lit(Cow::Owned(get_str(b, pos)?.to_owned())),
            1 => {
                let arg = get_u16(b, pos)?;
                let use_ix = get_u16(b, pos)?;
                let fill = char::from_u32(get_u32(b, pos)?)?;
                let align = match get_array::<1>(b, pos)?[0] {
                    0 => Align::Unknown,
                    1 => Align::Left,
                    2 => Align::Center,
                    3 => Align::Right,
                    _ => return None,
                };
                let flags = get_array::<1>(b, pos)?[0];
                let width = get_count(b, pos)?;
                let precision = get_count(b, pos)?;
                let ty = Ty::from_u8(get_array::<1>(b, pos)?[0])?;
                let spec = Spec {
                    arg,
                    use_ix,
                    fill,
                    align,
                    flags,
                    width,
                    precision,
                    ty,
                };
                let in_range = |c: Count| !matches!(c, Count::Arg(i) if i as usize >= n_kinds);
                if arg as usize >= n_kinds || !in_range(width) || !in_range(precision) {
                    return None;
                }
                Piece::Arg(spec)
            }
            _ => return None,
        });
    }
    // Trailing fields of later writers; a body that ends here is complete.
    let (target, names, role) = if *pos == b.len() {
        (module.clone(), Vec::new(), Role::Record)
    } else {
        let target = get_str(b, pos)?.to_owned();
        let n = usize::try_from(get_varint(b, pos)?).ok()?;
        if n > b.len() {
            return None;
        }
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(get_str(b, pos)?.to_owned());
        }
        // `role` came later still: absent, the site is a record's.
        let role = get_array::<1>(b, pos).map_or(Role::Record, |[r]| Role::from_u8(r));
        (target, names, role)
    };
    // And the message's pieces later again: absent, all of them.
    let message_pieces = get_varint(b, pos)
        .and_then(|m| usize::try_from(m).ok())
        .map_or(pieces.len(), |m| m.min(pieces.len()));
    // And a span's trace context after that: absent, none. (Never its key
    // or more: the key is the last argument.)
    let context_args = get_varint(b, pos)
        .and_then(|c| usize::try_from(c).ok())
        .filter(|_| role == Role::Span)
        .map_or(0, |c| c.min(kinds.len().saturating_sub(1)));
    Some(SiteEntry {
        id,
        level,
        file,
        line,
        module,
        format,
        kinds,
        pieces,
        target,
        names,
        role,
        message_pieces,
        context_args,
    })
}

/// SPAN body: `ctx: varint, parent: varint, site: varint, tick: u64 LE`,
/// then the span's arguments as a record stores them.
pub fn put_span(out: &mut Vec<u8>, s: &SpanEntry<'_>) {
    put_varint(out, u64::from(s.ctx));
    put_varint(out, u64::from(s.parent));
    put_varint(out, u64::from(s.site));
    out.extend_from_slice(&s.tick.to_le_bytes());
    out.extend_from_slice(s.args);
}

/// A context: a span entered inside its parent context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanEntry<'a> {
    /// Its id in the file (never 0).
    pub ctx: u32,
    /// The context it was entered in (0: none).
    pub parent: u32,
    /// The span's site (role `Span`).
    pub site: u32,
    /// When it was entered.
    pub tick: u64,
    /// Its arguments, as a record's.
    pub args: &'a [u8],
}

/// Reads a SPAN body.
pub fn get_span(b: &[u8]) -> Option<SpanEntry<'_>> {
    let pos = &mut 0;
    let ctx = get_u32(b, pos)?;
    let parent = get_u32(b, pos)?;
    let site = get_u32(b, pos)?;
    let tick = u64::from_le_bytes(get_array(b, pos)?);
    Some(SpanEntry {
        ctx,
        parent,
        site,
        tick,
        args: &b[*pos..],
    })
}

/// How many bits a SPAN entry's ticks drop in a file of `version` whose
/// clock runs `ticks_per_second`: from version 6, its ticks are in units of
/// the largest power of two of ticks not over a microsecond (2^11 ticks on
/// a 2.4 GHz TSC; none on a clock of 2 MHz or less). A span's tick says
/// when it was entered, for readers that show it; to the microsecond, it
/// takes one byte where the exact tick took three or four.
pub fn span_tick_shift(version: u16, ticks_per_second: f64) -> u32 {
    let per_us = ticks_per_second / 1e6;
    // (NaN, a rate the header check refuses anyway, is no unit either.)
    if version < 6 || per_us.is_nan() || per_us < 2.0 {
        return 0;
    }
    // (A rate past 2^63 ticks a microsecond is not a clock: capped.)
    (per_us.min(9.2e18) as u64).ilog2()
}

/// How a file's SPAN entries state their spans, by its format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanForm {
    /// Bits a span's tick drops (see [`span_tick_shift`]).
    pub shift: u32,
    /// Version 7: a span's site comes first, shifted left by one; its low
    /// bit clear, the span's context is the previous span's plus one (the
    /// writer numbers spans as it writes them) and is not written.
    pub numbered: bool,
}

impl SpanForm {
    /// The form of a file of `version` whose clock runs `ticks_per_second`.
    pub fn of(version: u16, ticks_per_second: f64) -> SpanForm {
        SpanForm {
            shift: span_tick_shift(version, ticks_per_second),
            numbered: version >= 7,
        }
    }
}

/// The SPAN body of format version 7, several spans in one entry, built a
/// span at a time: `count: varint`, then each span as `site: varint`
/// (shifted left by one, plus 1 when `ctx` follows), `ctx: varint` (less
/// the previous span's in the entry, wrapping at 2^32; when it is not 1),
/// `parent: varint` (0: none, else `ctx` less the parent, wrapping), `tick:
/// varint` (zigzag of the tick less the previous span's in the entry, both
/// in units of `2^shift` ticks: see [`span_tick_shift`]), then its
/// arguments as a record stores them. (Versions 3 to 6: `ctx`, `parent`,
/// `site`, `tick`, each always there.)
#[derive(Debug, Default)]
pub(crate) struct SpanBatch {
    body: Vec<u8>,
    count: u64,
    prev_ctx: u32,
    /// The previous span's tick, in units.
    prev_tick: u64,
    shift: u32,
}

impl SpanBatch {
    /// An empty batch whose ticks drop `shift` bits (see
    /// [`span_tick_shift`]).
    pub(crate) fn new(shift: u32) -> SpanBatch {
        SpanBatch {
            shift: shift.min(63),
            ..SpanBatch::default()
        }
    }

    /// Adds a span whose arguments `put_args` appends.
    pub(crate) fn push(
        &mut self,
        ctx: u32,
        parent: u32,
        site: u32,
        tick: u64,
        put_args: impl FnOnce(&mut Vec<u8>),
    ) {
        let b = &mut self.body;
        // Contexts are given out one after another as spans are written:
        // the next one is most spans' own (a byte a span, before).
        let step = ctx.wrapping_sub(self.prev_ctx);
        put_varint(b, (u64::from(site) << 1) | u64::from(step != 1));
        if step != 1 {
            put_varint(b, u64::from(step));
        }
        let up = if parent == 0 {
            0
        } else {
            ctx.wrapping_sub(parent)
        };
        put_varint(b, u64::from(up));
        let units = tick >> self.shift;
        put_varint(b, zigzag(units.wrapping_sub(self.prev_tick) as i64));
        put_args(b);
        self.prev_ctx = ctx;
        self.prev_tick = units;
        self.count += 1;
    }

    /// Whether no span was added since the last [`SpanBatch::put_entry`].
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends the SPAN entry of the spans added, and starts afresh.
    pub(crate) fn put_entry(&mut self, out: &mut Vec<u8>) {
        if self.count == 0 {
            return;
        }
        let start = super::frame::begin_entry(out, super::tag::SPAN);
        put_varint(out, self.count);
        out.extend_from_slice(&self.body);
        super::frame::end_entry(out, start);
        self.clear();
    }

    /// Forgets the spans added (their write was lost).
    pub(crate) fn clear(&mut self) {
        *self = SpanBatch {
            body: std::mem::take(&mut self.body),
            ..SpanBatch::new(self.shift)
        };
        self.body.clear();
    }
}

/// Reads a SPAN body of format version 3 on (FORMAT.md, "SPAN") in the
/// file's `form`, calling `f` with each span; `kinds_of` gives a site's
/// argument kinds (to find where a span's arguments end); a span's tick is
/// given as the start of its unit (see [`span_tick_shift`]).
/// `None` when the body is damaged or a span's site is unknown: the spans
/// before it were given to `f`.
pub fn get_spans<'a, 'k>(
    b: &'a [u8],
    form: SpanForm,
    strings: &super::record::Strings<'_>,
    kinds_of: impl Fn(u32) -> Option<&'k [ArgKind]>,
    mut f: impl FnMut(SpanEntry<'a>),
) -> Option<()> {
    let pos = &mut 0;
    let count = get_varint(b, pos)?;
    let (mut ctx, mut tick) = (0u32, 0u64);
    for _ in 0..count {
        let site = if form.numbered {
            let flagged = get_varint(b, pos)?;
            let step = if flagged & 1 == 1 {
                get_u32(b, pos)?
            } else {
                1
            };
            ctx = ctx.wrapping_add(step);
            u32::try_from(flagged >> 1).ok()?
        } else {
            ctx = ctx.wrapping_add(get_u32(b, pos)?);
            0
        };
        let up = get_u32(b, pos)?;
        let parent = if up == 0 { 0 } else { ctx.wrapping_sub(up) };
        let site = if form.numbered {
            site
        } else {
            get_u32(b, pos)?
        };
        tick = tick.wrapping_add(unzigzag(get_varint(b, pos)?) as u64);
        let at = *pos;
        // Only the file's form of strings matters for skipping (references
        // have no bytes).
        super::record::skip_args(kinds_of(site)?, b, pos, strings)?;
        f(SpanEntry {
            ctx,
            parent,
            site,
            tick: tick.checked_shl(form.shift).unwrap_or(0),
            args: &b[at..*pos],
        });
    }
    Some(())
}

/// Reads a STRINGS body: `count: varint`, then each string as `id: varint,
/// length: varint, bytes`; calls `f(id, offset of its bytes in the body,
/// length)`. `None` when it is damaged (the strings before were given).
pub fn get_strings(b: &[u8], mut f: impl FnMut(u64, usize, usize)) -> Option<()> {
    let pos = &mut 0;
    let count = get_varint(b, pos)?;
    for _ in 0..count {
        let id = get_varint(b, pos)?;
        let len = usize::try_from(get_varint(b, pos)?).ok()?;
        let end = pos.checked_add(len).filter(|&e| e <= b.len())?;
        f(id, *pos, len);
        *pos = end;
    }
    Some(())
}

/// CONTEXT body: `thread: varint, ctx: varint` (0: no span).
pub fn put_context(out: &mut Vec<u8>, thread: u32, ctx: u32) {
    put_varint(out, u64::from(thread));
    put_varint(out, u64::from(ctx));
}

/// Reads a CONTEXT body: `(thread, ctx)`.
pub fn get_context(b: &[u8]) -> Option<(u32, u32)> {
    let pos = &mut 0;
    Some((get_u32(b, pos)?, get_u32(b, pos)?))
}

/// What a SET entry says: the file's sequence number in its set, and the
/// host its writer ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetEntry {
    /// Counted up from 1, one a file, across rolls and restarts.
    pub seq: u64,
    /// The writer's host name (empty if it had none).
    pub host: String,
    /// Records the writer put in the set's files numbered below this one
    /// (as far as it knows: from the first file of writers that count),
    /// so a follower that finds files deleted knows how many records they
    /// held. `None` in files of writers before it.
    pub before: Option<u64>,
}

/// SET body: `seq: varint, host: str, before: varint`.
pub fn put_set(out: &mut Vec<u8>, seq: u64, host: &str, before: u64) {
    put_varint(out, seq);
    put_str(out, host);
    put_varint(out, before);
}

/// Reads a SET body.
pub fn get_set(b: &[u8]) -> Option<SetEntry> {
    let pos = &mut 0;
    let seq = get_varint(b, pos)?;
    // The host came with the entry, the count later; a body that ends
    // before one has none.
    let host = get_str(b, pos).unwrap_or("").to_owned();
    let before = get_varint(b, pos);
    Some(SetEntry { seq, host, before })
}

/// END body: `records: varint`, the records written to the file (absent
/// in files of earlier writers).
pub fn put_end(out: &mut Vec<u8>, records: u64) {
    put_varint(out, records);
}

/// Reads an END body: the records the file holds, if it says.
pub fn get_end(b: &[u8]) -> Option<u64> {
    get_varint(b, &mut 0)
}

/// The SET entry at the start of `entries` (a file's bytes after its
/// header), if the first entry is a whole, well-checked one.
pub fn first_set_entry(entries: &[u8]) -> Option<SetEntry> {
    match super::frame::frame_at(entries, 0) {
        super::frame::Frame::Ok { tag, body } if tag == super::tag::SET => get_set(body),
        _ => None,
    }
}

/// THREAD body: `id: varint, name: str`.
pub fn put_thread(out: &mut Vec<u8>, id: u32, name: &str) {
    put_varint(out, u64::from(id));
    put_str(out, name);
}

/// Reads a THREAD entry body: `(thread id, name)`.
pub fn get_thread(b: &[u8]) -> Option<(u32, &str)> {
    let pos = &mut 0;
    Some((get_u32(b, pos)?, get_str(b, pos)?))
}

/// CLOCK body: `tick: u64 LE, unix ns: i64 LE`.
pub fn put_clock(out: &mut Vec<u8>, tick: u64, unix_ns: i64) {
    out.extend_from_slice(&tick.to_le_bytes());
    out.extend_from_slice(&unix_ns.to_le_bytes());
}

/// Appends a whole CLOCK entry.
pub(crate) fn put_clock_entry(out: &mut Vec<u8>, tick: u64, unix_ns: i64) {
    super::frame::put_entry(out, super::tag::CLOCK, |b| put_clock(b, tick, unix_ns));
}

/// Reads a CLOCK entry body: `(tick, Unix ns)`.
pub fn get_clock(b: &[u8]) -> Option<(u64, i64)> {
    let pos = &mut 0;
    Some((
        u64::from_le_bytes(get_array(b, pos)?),
        i64::from_le_bytes(get_array(b, pos)?),
    ))
}

/// The thread id of a DROP entry for records the writer lost after they
/// left the rings (a failed write, the live file deleted or cut back under
/// it), not records a thread dropped.
pub const WRITER_THREAD: u32 = u32::MAX;

/// DROP body: `thread: varint, count: varint, first tick: u64 LE, last tick: u64 LE`.
pub fn put_drop(out: &mut Vec<u8>, thread: u32, count: u64, first: u64, last: u64) {
    put_varint(out, u64::from(thread));
    put_varint(out, count);
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&last.to_le_bytes());
}

/// `(thread, count, first tick, last tick)`.
pub fn get_drop(b: &[u8]) -> Option<(u32, u64, u64, u64)> {
    let pos = &mut 0;
    Some((
        get_u32(b, pos)?,
        get_varint(b, pos)?,
        u64::from_le_bytes(get_array(b, pos)?),
        u64::from_le_bytes(get_array(b, pos)?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::{frame_at, Frame};
    use crate::wire::record::Strings;

    /// A span site whose last arguments before its key are its trace
    /// context reads back so; on a record's site the count means nothing,
    /// and it never covers the key.
    #[test]
    fn a_span_sites_context_arguments_read_back() {
        use crate::wire::format::{Piece, Spec};
        let pieces = [
            Piece::Lit("req{id=".into()),
            Piece::Arg(Spec::display(0)),
            Piece::Lit("}".into()),
        ];
        let kinds = [
            ArgKind::U64,
            ArgKind::Str,
            ArgKind::Str,
            ArgKind::U8,
            ArgKind::U64,
        ];
        let site = |role, context_args| {
            let mut out = Vec::new();
            put_site(
                &mut out,
                &SiteEntryRef {
                    id: 9,
                    level: Level::Info,
                    file: "a.rs",
                    line: 3,
                    module: "m",
                    format: "req",
                    kinds: &kinds,
                    pieces: &pieces,
                    target: "m",
                    names: &["id", "trace_id", "span_id", "trace_flags", ""],
                    role,
                    message_pieces: usize::MAX,
                    context_args,
                },
            );
            get_site(&out).unwrap()
        };
        let traced = site(Role::Span, 3);
        assert_eq!((traced.context_args, traced.message_pieces), (3, 3));
        assert_eq!(site(Role::Span, 0).context_args, 0);
        assert_eq!(site(Role::Span, 9).context_args, 4, "never the key");
        assert_eq!(site(Role::Record, 3).context_args, 0);
    }

    #[test]
    fn a_span_tick_unit_is_the_largest_power_of_two_ticks_within_a_microsecond() {
        assert_eq!(span_tick_shift(6, 2.4e9), 11); // 2,048 ticks: 0.85 µs
        assert_eq!(span_tick_shift(6, 1e9), 9);
        assert_eq!(span_tick_shift(6, 24e6), 4); // an aarch64 counter
        assert_eq!(span_tick_shift(6, 1e6), 0);
        assert_eq!(span_tick_shift(6, f64::NAN), 0);
        // Before version 6, ticks are ticks.
        assert_eq!(span_tick_shift(5, 2.4e9), 0);
    }

    #[test]
    fn span_ticks_read_back_as_the_start_of_their_unit() {
        let shift = span_tick_shift(6, 2.4e9);
        let ticks = [
            5_000_000_123u64,
            5_000_000_900,
            5_000_004_096,
            4_999_000_000,
            0,
        ];
        let mut batch = SpanBatch::new(shift);
        for (i, &t) in ticks.iter().enumerate() {
            batch.push(i as u32 + 1, 0, 3, t, |_| {});
        }
        let mut out = Vec::new();
        batch.put_entry(&mut out);
        let Frame::Ok { body, .. } = frame_at(&out, 0) else {
            panic!("not an entry");
        };
        let mut got = Vec::new();
        let form = SpanForm::of(7, 2.4e9);
        get_spans(
            body,
            form,
            &Strings::NUMBERED,
            |_| Some(&[][..]),
            |e| got.push((e.ctx, e.tick)),
        )
        .unwrap();
        let want: Vec<(u32, u64)> = ticks
            .iter()
            .enumerate()
            .map(|(i, &t)| (i as u32 + 1, t / 2048 * 2048))
            .collect();
        assert_eq!(got, want);
        // The same spans read as a version 5 reader would: wrong ticks,
        // which is why the version says it.
        let mut v5 = Vec::new();
        get_spans(
            body,
            SpanForm { shift: 0, ..form },
            &Strings::NUMBERED,
            |_| Some(&[][..]),
            |e| v5.push(e.tick),
        )
        .unwrap();
        assert_ne!(v5[0], want[0].1);
    }

    #[test]
    fn spans_numbered_one_after_another_carry_no_context_of_their_own() {
        let form = SpanForm::of(7, 2.4e9);
        // (ctx, parent, site): a run, a gap, a root, a site past one byte.
        let spans = [
            (10, 0, 3),
            (11, 10, 4),
            (12, 10, 4),
            (40, 11, 3),
            (41, 0, 200),
            (42, 41, 5),
        ];
        let mut batch = SpanBatch::new(form.shift);
        for &(ctx, parent, site) in &spans {
            batch.push(ctx, parent, site, 1 << 30, |_| {});
        }
        let mut out = Vec::new();
        batch.put_entry(&mut out);
        let Frame::Ok { body, .. } = frame_at(&out, 0) else {
            panic!("not an entry");
        };
        let mut got = Vec::new();
        get_spans(
            body,
            form,
            &Strings::NUMBERED,
            |_| Some(&[][..]),
            |e| got.push((e.ctx, e.parent, e.site)),
        )
        .unwrap();
        assert_eq!(got, spans);
        // The count, then per span: site and flag (site 200 in two bytes),
        // its context where it is not the next one (10 and 40 only), the
        // parent, the tick (the first's, then no change).
        assert_eq!(body.len(), 1 + 7 + 2 + 6 + (3 + 5), "{body:?}");
        // Read in the form of version 6 (the context first): not these spans.
        let mut v6 = Vec::new();
        let _ = get_spans(
            body,
            SpanForm::of(6, 2.4e9),
            &Strings::NUMBERED,
            |_| Some(&[][..]),
            |e| v6.push((e.ctx, e.parent, e.site)),
        );
        assert_ne!(v6, spans);
    }
}
