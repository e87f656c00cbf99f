//! Leaving out what a reader does not want: the runs of records whose
//! INDEX entries say they hold none of a time window or level are not
//! inflated or indexed (FORMAT.md, "INDEX").
//!
//! Before the scan, the file's top-level frames are walked by their lengths
//! (nothing inflated; only the INDEX and CLOCK entries and where a jump
//! lands are checksummed), jumping over each run of records
//! an INDEX entry announces: that finds the INDEX entries and the clock
//! pairs (which writers that index put outside blocks) in a few frames a
//! write. A jump is taken only from an INDEX entry whose checksum holds, to
//! a whole entry (its checksum holds too) or the end of the file; else the
//! run is walked frame by frame. The walk stops at the first frame that
//! does not hold together, and nothing past it is left out. A file without
//! INDEX entries (an older writer's) is read whole, as before.
//!
//! A RUN entry (FORMAT.md, "RUN") announces a run of small writes the same
//! way, and lists the stretches of dictionary entries and clock pairs among
//! them: the walk checks and reads those (their clock pairs), and a run
//! left out is left out around them.

use super::*;
use crate::level::Level;
use crate::wire::index::{get_index, get_run, thread_bit, Row, Run, RunBlocks};
use crate::wire::totals::Totals;

/// What a reader wants of a file's records (see [`LogFile::open_for`]):
/// records it cannot want may be left out of the index. Records left in
/// still go through the reader's own filter: this only saves work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Want {
    /// Records at or after this time (Unix ns).
    pub since_ns: Option<i64>,
    /// Records at or before this time (Unix ns).
    pub until_ns: Option<i64>,
    /// Records at or above this level.
    pub min_level: Option<Level>,
    /// Only the last this many records (`decode -n`): the runs of records
    /// older than the last runs that hold that many are left out. (With no
    /// other want: a run's count is of all its records.)
    pub last: Option<u64>,
    /// Records of these thread ids only (`decode --thread ID`): the runs
    /// whose INDEX entries name none of them are left out. (A gap of the
    /// writer's own, records it lost, is in every thread's answer.)
    pub threads: Option<Vec<u32>>,
    /// Records of these call sites only (ids of the file's dictionary:
    /// `stats --site`): the runs whose INDEX entries' sites filter names
    /// none of them are left out.
    pub sites: Option<Vec<u32>>,
    /// Records in these contexts only (context ids of the file: those of
    /// one trace, [`LogFile::contexts_in_trace`]): the runs whose INDEX
    /// entries' contexts filter names none of them are left out.
    pub contexts: Option<Vec<u32>>,
    /// No record at all: a reader of what the file says of itself (its
    /// dictionary, clock pairs and [`LogFile::totals`]) leaves out every
    /// run an INDEX entry announces.
    pub none: bool,
    /// Only the records after the file's last checkpoint (a TOTALS entry
    /// of a live file, FORMAT.md): with [`LogFile::checkpoint`], what the
    /// file holds without reading what the checkpoint counts.
    pub since_checkpoint: bool,
}

impl Want {
    /// Records in the window `since_ns..=until_ns` (either end open), at or
    /// above `min_level`.
    pub fn new(since_ns: Option<i64>, until_ns: Option<i64>, min_level: Option<Level>) -> Want {
        Want {
            since_ns,
            until_ns,
            min_level,
            last: None,
            threads: None,
            sites: None,
            contexts: None,
            none: false,
            since_checkpoint: false,
        }
    }

    /// No record: see [`Want::none`].
    pub fn nothing() -> Want {
        Want {
            none: true,
            ..Want::default()
        }
    }

    /// The records after the last checkpoint: see
    /// [`Want::since_checkpoint`].
    pub fn since_checkpoint() -> Want {
        Want {
            since_checkpoint: true,
            ..Want::default()
        }
    }

    /// Whether it wants every record.
    pub fn all(&self) -> bool {
        self.since_ns.is_none()
            && self.until_ns.is_none()
            && self.min_level.is_none()
            && self.last.is_none()
            && self.threads.is_none()
            && self.sites.is_none()
            && self.contexts.is_none()
            && !self.none
            && !self.since_checkpoint
    }
}

/// A row with ticks outside its file's clock pairs (records drained after
/// a roll, older than the new file's header; a killed writer's last
/// second) is left out by time only when its records are this far outside
/// the window: their times are extrapolated at the calibrated rate, where
/// a set's merge may read them between another file's pairs (the clock's
/// drift over a second: microseconds). Between the file's pairs its own
/// pairs place them as the set's merge does: the merge reads the files of
/// one writer's clock by all their pairs together, made never to go back
/// (`TimeMap::union`), and a writer that indexes never writes a pair
/// earlier than one it wrote before (`clock::pair`), so a file's own pairs
/// are already the set's.
const MARGIN_NS: i64 = 2_000_000_000;

/// What a RUN entry's run keeps when its records are left out: its
/// stretches of dictionary entries and clock pairs `[start, end)`, and the
/// blocks of the records.
type Kept = (Vec<(usize, usize)>, RunBlocks);

/// A row as the walk keeps it: its filters of sites and contexts already
/// asked about the ids wanted (and dropped), so that a row takes the same
/// few bytes whatever filters its entry carries.
struct Kept1 {
    offset: u64,
    len: u64,
    records: u64,
    first_tick: u64,
    last_tick: u64,
    threads: u64,
    levels: u8,
    /// Its filters may hold one of the sites and one of the contexts
    /// wanted (or no such want).
    ids: bool,
    /// When its run is one BLOCK (an INDEX entry's, as writers that index
    /// write them): whether of deflate, and its bytes inflated, from the
    /// block's head (counted when the run is left out, without touching
    /// its page again).
    block: Option<(bool, u64)>,
}

impl Kept1 {
    fn of(row: &Row, want: &Want, block: Option<(bool, u64)>) -> Kept1 {
        let may = |ids: &Option<Vec<u32>>, f: &crate::wire::index::Ids| {
            ids.as_ref().is_none_or(|ids| f.may_hold_any(ids))
        };
        Kept1 {
            offset: row.offset,
            len: row.len,
            records: row.records,
            first_tick: row.first_tick,
            last_tick: row.last_tick,
            threads: row.threads,
            levels: row.levels,
            ids: may(&want.sites, &row.sites) && may(&want.contexts, &row.contexts),
            block,
        }
    }
}

/// The memory a walk keeps for the rows of one file, at most: past it (a
/// crafted file of tiny INDEX entries: about 190,000 rows, 88 bytes each;
/// a writer's rows cover 64 KiB of records or more, so a writer's file of
/// 12 GB or more), the index is refused and the file read whole, which
/// holds a bounded share of it.
const MOST_ROW_BYTES: usize = 16 << 20;

/// How far outside its file's clock pairs a row's ticks may lie: a thread's
/// ring can hold records from before its file began (drained after a
/// roll), and a killed writer's last records come after its last pair, by
/// a pass or two of the flusher in each case. Ten minutes of ticks is far
/// past both, and a row beyond it claims times its records cannot have.
const CLOCK_SLACK_SECS: f64 = 600.0;

/// The most records a run of `len` bytes of the file can hold, whatever
/// its compression: a record takes a byte inflated at least, and no codec
/// of the format inflates a byte to more than 1,100.
const MOST_INFLATION: u64 = 1_100;

/// Why an index entry was refused: it contradicts itself or the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Records without a level bit (or levels for no record and no gap).
    Levels,
    /// More records than its bytes can hold.
    Records,
    /// Ticks wholly outside the file's clock.
    Ticks,
    /// More entries than a reader keeps in memory.
    TooMany,
}

impl Refusal {
    pub(super) fn says(self) -> &'static str {
        match self {
            Refusal::Levels => "names no level for the records it counts",
            Refusal::Records => "counts more records than its bytes can hold",
            Refusal::Ticks => "gives its records ticks wholly outside the file's clock",
            Refusal::TooMany => "is one of more index entries than a reader keeps in memory",
        }
    }
}

/// What a walk of a file's top-level frames by their lengths finds.
struct Walk {
    /// The clock pairs: the header's, then the CLOCK entries' outside blocks.
    pairs: Vec<(u64, i64)>,
    /// The runs of records the INDEX and RUN entries announce, each where
    /// it landed.
    rows: Vec<Kept1>,
    /// For each row of a RUN entry, the stretches of its bytes `[start,
    /// end)` a reader reads even when it leaves its records out (the
    /// dictionary entries and clock pairs among its writes) and the blocks
    /// its records are in; `None` for an INDEX entry's.
    runs: Vec<Option<Kept>>,
    /// The last TOTALS entry it landed on (whose checksum holds): where it
    /// ends, and what it counts.
    checkpoint: Option<(usize, Totals)>,
    /// The first entry refused (where it starts, and why): the walk's rows
    /// are then none, and the file is read whole.
    refused: Option<(usize, Refusal)>,
}

/// What a file's reader leaves out ([`left_out`]).
pub(super) struct LeftOut {
    /// The regions `[start, end)` holding no wanted record, sorted and
    /// disjoint.
    pub(super) regions: Vec<(usize, usize)>,
    /// With [`Want::since_checkpoint`]: the checkpoint whose runs before it
    /// are left out, where it ends and what it counts.
    pub(super) checkpoint: Option<(usize, Totals)>,
    /// The blocks of the records left out, counted by their heads (an
    /// INDEX entry's run: `wire::block::block_parts`, codec and inflated
    /// length, nothing inflated, no checksum, a page a run) or as a RUN
    /// entry says.
    pub(super) blocks: BlockStats,
    /// An index entry that contradicts itself or the file (where it starts,
    /// and why): nothing was left out.
    pub(super) refused: Option<(usize, Refusal)>,
}

/// Whether a frame that holds together by its head starts at `pos` of
/// `data`: a tag ever written, a length within the file.
fn holds(data: &[u8], pos: usize) -> Option<usize> {
    let head = data.get(pos..pos + wire::FRAME_LEN)?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let next = pos + wire::FRAME_LEN + len;
    ((1..=32).contains(&head[0]) && next <= data.len()).then_some(next)
}

/// Counts in `st` the block that the run `[start, end)` of the file's
/// bytes `data` is, if it is one (as writers that index write a run), by
/// its head (`wire::block::block_parts`: codec and inflated length;
/// nothing inflated, no checksum).
fn count_block(data: &[u8], (start, end): (usize, usize), st: &mut BlockStats) {
    if holds(data, start) != Some(end) || data[start] != tag::BLOCK {
        return;
    }
    let body = &data[start + wire::FRAME_LEN..end];
    if let Ok(parts) = wire::block::block_parts(body) {
        match body[0] {
            wire::block::DEFLATE_COMPACT => st.deflate += 1,
            _ => st.lz4 += 1,
        }
        st.bytes += end - start;
        st.raw += parts.raw;
    }
}

/// Whether `row`, of the run `[start, end)` of `data`, may be true of it,
/// by what it says of itself and the bytes it covers (its ticks are
/// checked against the file's clock once the walk has found every pair).
/// `raw`: what the run's blocks take inflated, as a RUN entry says.
///
/// Returns what the run's one BLOCK is, if it is one (see [`Kept1::block`]).
fn check_row(data: &[u8], row: &Row, raw: Option<u64>) -> Result<Option<(bool, u64)>, Refusal> {
    // A record has a level; a gap sets every bit. Levels with no record
    // are a run of gaps, which a writer counts as no record.
    if row.records > 0 && row.levels == 0 {
        return Err(Refusal::Levels);
    }
    let (start, end) = (row.offset as usize, (row.offset + row.len) as usize);
    let mut st = BlockStats::default();
    count_block(data, (start, end), &mut st);
    let most_raw = if st.lz4 + st.deflate == 1 {
        st.raw as u64
    } else {
        // (A RUN entry's run: its plain entries' bytes and its blocks'
        // inflated bytes, as the entry says them, within what any codec
        // makes of its length.)
        let said = raw.unwrap_or(0).min(row.len.saturating_mul(MOST_INFLATION));
        row.len.saturating_add(said)
    };
    if row.records > most_raw {
        return Err(Refusal::Records);
    }
    Ok((st.lz4 + st.deflate == 1).then_some((st.deflate == 1, st.raw as u64)))
}

fn walk(
    data: &[u8],
    header: &Header,
    want: &Want,
    mut dense: impl FnMut(),
    mut passed: impl FnMut(usize),
) -> Walk {
    let mut w = Walk {
        pairs: vec![(header.base_tick, header.base_unix_ns)],
        rows: Vec::new(),
        runs: Vec::new(),
        checkpoint: None,
        refused: None,
    };
    let mut pos = wire::HEADER_LEN;
    let mut judged = false;
    let mut is_dense = false;
    // What the rows kept take, and where each starts (its entry).
    let mut kept_bytes = 0usize;
    let mut entry_at: Vec<u64> = Vec::new();
    let refuse = |w: &mut Walk, at: usize, why: Refusal| {
        w.rows = Vec::new();
        w.runs = Vec::new();
        w.refused = Some((at, why));
    };
    while pos < data.len() {
        if !judged && w.rows.len() == DENSE_JUDGED_AFTER {
            judged = true;
            if pos / DENSE_JUDGED_AFTER < DENSE_WRITE {
                is_dense = true;
                dense();
            }
        }
        let Some(next) = holds(data, pos) else { break };
        let t = data[pos];
        let mut to = next;
        if t == tag::TOTALS {
            if let Frame::Ok { body, .. } = frame_at(data, pos) {
                if let Some(totals) = crate::wire::totals::get_totals(body) {
                    w.checkpoint = Some((next, totals));
                }
            }
        } else if t == tag::CLOCK || t == tag::INDEX {
            if let Frame::Ok { body, .. } = frame_at(data, pos) {
                if t == tag::CLOCK {
                    w.pairs.extend(dict::get_clock(body));
                } else if let Some(row) = get_index(body, next as u64, header.version) {
                    // Taken when it lands on a whole entry (one checksum
                    // a write) or the end of the file; else its run is
                    // walked as any entries are.
                    let end = usize::try_from(row.len)
                        .ok()
                        .and_then(|l| next.checked_add(l))
                        .filter(|&e| e > next && e <= data.len());
                    if let Some(end) = end.filter(|&e| {
                        e == data.len() || matches!(frame_at(data, e), Frame::Ok { .. })
                    }) {
                        let block = match check_row(data, &row, None) {
                            Ok(b) => b,
                            Err(why) => {
                                refuse(&mut w, pos, why);
                                break;
                            }
                        };
                        kept_bytes += std::mem::size_of::<Kept1>() + 16;
                        w.rows.push(Kept1::of(&row, want, block));
                        w.runs.push(None);
                        entry_at.push(pos as u64);
                        to = end;
                    }
                }
            }
        } else if t == tag::RUN {
            // (A placeholder not filled in, or one read while it was being
            // filled in, says nothing: its run is walked.)
            let run = match frame_at(data, pos) {
                Frame::Ok { body, .. } => get_run(body, next as u64, header.version),
                _ => None,
            };
            if let Some(run) = run {
                if let Some((end, kept)) = run_holds(data, &run, &mut w.pairs) {
                    if let Err(why) = check_row(data, &run.row, Some(run.blocks.raw)) {
                        refuse(&mut w, pos, why);
                        break;
                    }
                    kept_bytes += std::mem::size_of::<Kept1>()
                        + std::mem::size_of::<Option<Kept>>()
                        + 16 * kept.len()
                        + 16;
                    w.rows.push(Kept1::of(&run.row, want, None));
                    w.runs.push(Some((kept, run.blocks)));
                    entry_at.push(pos as u64);
                    to = end;
                }
            }
        }
        if kept_bytes > MOST_ROW_BYTES {
            refuse(&mut w, pos, Refusal::TooMany);
            break;
        }
        pos = to;
        // (A walk of large writes touches a page or two of each: what the
        // reading after it maps again, were they given back now.)
        if is_dense {
            passed(pos);
        }
    }
    // Every row's ticks meet the file's clock (with the slack a ring's
    // records take past it). A range that reaches past it on one side is
    // taken: a gap of records lost before the flusher's first write starts
    // at tick 0, and a wider range only makes a reader read more.
    let ticks = w.pairs.iter().map(|p| p.0);
    if let (Some(lo), Some(hi)) = (ticks.clone().min(), ticks.max()) {
        let slack = (header.ticks_per_second * CLOCK_SLACK_SECS) as u64;
        let (lo, hi) = (lo.saturating_sub(slack), hi.saturating_add(slack));
        let off = w.rows.iter().position(|r| {
            (r.records > 0 || r.levels != 0) && (r.last_tick < lo || r.first_tick > hi)
        });
        if let Some(i) = off {
            let at = entry_at.get(i).map_or(0, |&a| a as usize);
            refuse(&mut w, at, Refusal::Ticks);
        }
    }
    w
}

/// Whether the run a RUN entry announces holds together in `data`: it ends
/// on a whole entry (its checksum holds) or the end of the file, and each
/// stretch it lists starts with a whole entry and is whole frames to its
/// end. If so, where the run ends and its stretches (as `usize`), the clock
/// pairs among them added to `pairs` (their checksums holding).
fn run_holds(
    data: &[u8],
    run: &Run,
    pairs: &mut Vec<(u64, i64)>,
) -> Option<(usize, Vec<(usize, usize)>)> {
    let at = |v: u64| usize::try_from(v).ok().filter(|&v| v <= data.len());
    let (start, end) = (
        at(run.row.offset)?,
        at(run.row.offset.checked_add(run.row.len)?)?,
    );
    if end != data.len() && !matches!(frame_at(data, end), Frame::Ok { .. }) {
        return None;
    }
    let mut kept = Vec::with_capacity(run.kept.len());
    let mut found = Vec::new();
    let mut last = start;
    for &(a, b) in &run.kept {
        let (a, b) = (at(a)?, at(b)?);
        if a < last || b > end || !matches!(frame_at(data, a), Frame::Ok { .. }) {
            return None;
        }
        let mut pos = a;
        while pos < b {
            let next = holds(data, pos)?;
            if data[pos] == tag::CLOCK {
                if let Frame::Ok { body, .. } = frame_at(data, pos) {
                    found.extend(dict::get_clock(body));
                }
            }
            pos = next;
        }
        if pos != b {
            return None;
        }
        kept.push((a, b));
        last = b;
    }
    pairs.extend(found);
    Some((end, kept))
}

/// A file whose writes take less than this on average (a service's
/// flusher writing every millisecond or so, not a busy one's 1 MiB) is
/// read ahead while walked: a page touched every few pages, each a read of
/// its own from a cold page cache (about 50 µs here), cost more than
/// reading it all in order (a 101 MB file of 7,000 writes: 0.43 s and 35
/// MB read page by page, against 0.1 s reading it all; BENCHMARKS.md,
/// "Reading").
const DENSE_WRITE: usize = 128 << 10;

/// Writes walked before their size is judged (see [`DENSE_WRITE`]).
const DENSE_JUDGED_AFTER: usize = 16;

/// The regions `[start, end)` of the file's bytes `data` (of header
/// `header`) that hold no record `want` wants, sorted and disjoint.
///
/// `dense` is called once the walk finds the file's writes small (see
/// [`DENSE_WRITE`]): its caller may then read it ahead.
///
/// `passed(pos)` is called as the walk of a file of small writes goes
/// (see [`DENSE_WRITE`]), which touches every page of it: it reads nothing
/// before `pos` again, and the pages it mapped there may go back.
pub(super) fn left_out(
    data: &[u8],
    header: &Header,
    want: &Want,
    dense: impl FnMut(),
    passed: impl FnMut(usize),
) -> LeftOut {
    let mut out = LeftOut {
        regions: Vec::new(),
        checkpoint: None,
        blocks: BlockStats::default(),
        refused: None,
    };
    if want.all() {
        return out;
    }
    let Walk {
        pairs,
        rows,
        runs,
        checkpoint,
        refused,
    } = walk(data, header, want, dense, passed);
    if refused.is_some() {
        out.refused = refused;
        return out;
    }
    if rows.is_empty() {
        return out;
    }
    let time = TimeMap::new(header.ticks_per_second, pairs);
    let (first_pair, last_pair) = match (time.pairs().first(), time.pairs().last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => return out,
    };
    let checkpoint = checkpoint.filter(|_| want.since_checkpoint);
    let counted = checkpoint.as_ref().map_or(0, |c| c.0);
    let levels = want
        .min_level
        .map_or(u8::MAX, |l| u8::MAX << (l as u8).min(7));
    // A run's times: the earliest and latest a set's merge may give its
    // records. (Times never go back: the first and last tick bound the
    // rest.)
    let times = |row: &Kept1| {
        let margin = if row.first_tick >= first_pair && row.last_tick <= last_pair {
            0
        } else {
            MARGIN_NS
        };
        let early = time.unix_ns(row.first_tick).saturating_sub(margin);
        let late = time.unix_ns(row.last_tick).saturating_add(margin);
        (early, late)
    };
    // `last`: the runs from the end back that hold that many records; a
    // run wholly older than the earliest of them holds none of the last.
    // Told by ticks, not times: a set's merge orders the records of one
    // writer's clock by time, then tick, and their times never go back as
    // their ticks go on (`TimeMap::union`), so a file's last records by the
    // merge are its last by tick whatever times a set gives them. (By
    // times, a live or killed writer's last second, past its last clock
    // pair, took `MARGIN_NS` with it: `decode -n 20` of a killed writer's
    // 920 MB file read its last 2 s of records, about 3 s of CPU.)
    let older_than = want.last.and_then(|n| {
        let mut held = 0u64;
        let mut earliest = u64::MAX;
        for row in rows.iter().rev() {
            // (A run of writes of dictionary entries and clock pairs alone
            // holds no record, and no tick to say.)
            if row.levels == 0 {
                continue;
            }
            held = held.saturating_add(row.records);
            earliest = earliest.min(row.first_tick);
            if held >= n {
                return Some(earliest);
            }
        }
        None
    });
    let threads = want.threads.as_ref().map(|ids| {
        ids.iter()
            .fold(thread_bit(dict::WRITER_THREAD), |m, &t| m | thread_bit(t))
    });
    for (row, run) in rows.iter().zip(&runs) {
        // (Within the file: the walk checked where it lands.)
        let (start, end) = (row.offset as usize, (row.offset + row.len) as usize);
        let (early, late) = times(row);
        let wanted = !want.none
            && want.since_ns.is_none_or(|s| late >= s)
            && want.until_ns.is_none_or(|u| early <= u)
            && row.levels & levels != 0
            && older_than.is_none_or(|t| row.last_tick >= t)
            && threads.is_none_or(|m| row.threads & m != 0)
            && row.ids
            && end > counted;
        if wanted {
            continue;
        }
        match run {
            None => {
                out.regions.push((start, end));
                if let Some((deflate, raw)) = row.block {
                    let st = &mut out.blocks;
                    match deflate {
                        true => st.deflate += 1,
                        false => st.lz4 += 1,
                    }
                    st.bytes += end - start;
                    st.raw += raw as usize;
                }
            }
            // (A RUN entry's run: around the stretches it keeps.)
            Some((kept, blocks)) => {
                let mut from = start;
                for &(a, b) in kept.iter().chain([&(end, end)]) {
                    if a > from {
                        out.regions.push((from, a));
                    }
                    from = b;
                }
                let st = &mut out.blocks;
                let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                st.lz4 = st.lz4.saturating_add(n(blocks.lz4));
                st.deflate = st.deflate.saturating_add(n(blocks.deflate));
                st.bytes = st.bytes.saturating_add(n(blocks.bytes));
                st.raw = st.raw.saturating_add(n(blocks.raw));
            }
        }
    }
    // (In file order and apart: the walk jumped over each run in turn.)
    out.checkpoint = checkpoint;
    out
}
