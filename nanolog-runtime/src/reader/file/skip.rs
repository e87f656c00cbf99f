//! Leaving out what a reader does not want: the writes a file's INDEX
//! entries say hold no record of a time window or level are not inflated or
//! indexed (FORMAT.md, "INDEX").
//!
//! Before the scan, the file's top-level frames are walked by their lengths
//! alone (no checksum, no inflating): that finds the INDEX entries and the
//! clock pairs, which writers that index put outside blocks. A row is used
//! only if it points at whole top-level entries found by that walk, all of
//! them EXTENT, DROP or BLOCK entries before its INDEX entry; the walk stops
//! at the first frame that does not hold together, and nothing past it is
//! left out. A file without INDEX entries (an older writer's, or a killed
//! writer's before its first) is read whole, as before.

use super::*;
use crate::level::Level;
use crate::wire::index::{get_index, Row};

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
    /// The latest time of the clock pairs of the files of this file's
    /// writer's clock that come before it (see [`last_pair_ns`]): a set's
    /// merge reads the files of one clock by all their pairs together,
    /// which never go back (see [`TimeMap::union`]), so it places no record
    /// of this file earlier than that. `None`: this file is read alone, or
    /// is its clock's first.
    pub floor_ns: Option<i64>,
}

impl Want {
    /// Records in the window `since_ns..=until_ns` (either end open), at or
    /// above `min_level`.
    pub fn new(since_ns: Option<i64>, until_ns: Option<i64>, min_level: Option<Level>) -> Want {
        Want {
            since_ns,
            until_ns,
            min_level,
            floor_ns: None,
        }
    }

    /// Whether it wants every record.
    pub fn all(&self) -> bool {
        self.since_ns.is_none() && self.until_ns.is_none() && self.min_level.is_none()
    }
}

/// A row with ticks outside its file's clock pairs (records drained after
/// a roll, older than the new file's header; a killed writer's last
/// second) is left out by time only when its records are this far outside
/// the window: their times are extrapolated at the calibrated rate, where
/// a set's merge may read them between another file's pairs (the clock's
/// drift over a second: microseconds). Between the file's pairs its own
/// pairs place them as the set's merge does, `floor_ns` given.
const MARGIN_NS: i64 = 2_000_000_000;

/// What a walk of a file's top-level frames by their lengths finds.
struct Walk {
    /// Each frame's start and tag.
    frames: Vec<(usize, u8)>,
    /// The clock pairs: the header's, then the CLOCK entries' outside blocks.
    pairs: Vec<(u64, i64)>,
    /// The INDEX entries' rows, with where their entry starts.
    rows: Vec<(Row, usize)>,
    /// Where the walk stopped: the end, or a frame that does not hold
    /// together.
    end: usize,
}

fn walk(data: &[u8], header: &Header) -> Walk {
    let mut w = Walk {
        frames: Vec::new(),
        pairs: vec![(header.base_tick, header.base_unix_ns)],
        rows: Vec::new(),
        end: wire::HEADER_LEN,
    };
    let mut pos = wire::HEADER_LEN;
    while pos + wire::FRAME_LEN <= data.len() {
        let t = data[pos];
        let len = u32::from_le_bytes([data[pos + 1], data[pos + 2], data[pos + 3], data[pos + 4]]);
        let next = pos + wire::FRAME_LEN + len as usize;
        if !(1..=32).contains(&t) || next > data.len() {
            break;
        }
        w.frames.push((pos, t));
        if t == tag::CLOCK || t == tag::INDEX {
            if let Frame::Ok { body, .. } = frame_at(data, pos) {
                if t == tag::CLOCK {
                    w.pairs.extend(dict::get_clock(body));
                } else if let Some(r) = get_index(body) {
                    w.rows.extend(r.into_iter().map(|r| (r, pos)));
                }
            }
        }
        pos = next;
    }
    w.end = pos;
    w
}

/// The header of the log at `path` and the latest time among its clock
/// pairs outside blocks (its header's at least): what a reader of a set
/// gives the next file of the same clock as [`Want::floor_ns`]. Reads the
/// frames' heads only.
pub fn last_pair_ns(path: &Path) -> Result<(Header, i64), ReadError> {
    let loaded = load(path)?;
    let header = Header::decode(&loaded.data).map_err(|_| ReadError::NotNanolog {
        path: path.to_path_buf(),
    })?;
    loaded.data.sparse(true);
    let w = walk(&loaded.data, &header);
    let last = w
        .pairs
        .iter()
        .map(|p| p.1)
        .max()
        .unwrap_or(header.base_unix_ns);
    Ok((header, last))
}

/// The regions `[start, end)` of the file's bytes `data` (of header
/// `header`) that hold no record `want` wants, sorted and disjoint.
pub(super) fn left_out(data: &[u8], header: &Header, want: &Want) -> Vec<(usize, usize)> {
    if want.all() {
        return Vec::new();
    }
    let Walk {
        frames,
        pairs,
        rows,
        end: walked,
    } = walk(data, header);
    if rows.is_empty() {
        return Vec::new();
    }
    let time = TimeMap::new(header.ticks_per_second, pairs);
    let (first_pair, last_pair) = match (time.pairs().first(), time.pairs().last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => return Vec::new(),
    };
    let levels = want
        .min_level
        .map_or(u8::MAX, |l| u8::MAX << (l as u8).min(7));
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (row, index_at) in rows {
        let (Ok(start), Ok(len)) = (usize::try_from(row.offset), usize::try_from(row.len)) else {
            continue;
        };
        let Some(end) = start
            .checked_add(len)
            .filter(|&e| e <= index_at.min(walked))
        else {
            continue;
        };
        // Whole entries of records, from one frame's start to another's.
        let first = frames.partition_point(|f| f.0 < start);
        let last = frames.partition_point(|f| f.0 < end);
        let bounded = frames.get(first).is_some_and(|f| f.0 == start)
            && frames.get(last).is_some_and(|f| f.0 == end);
        let records_only = frames[first..last]
            .iter()
            .all(|f| matches!(f.1, tag::EXTENT | tag::DROP | tag::BLOCK));
        if !bounded || !records_only || first == last {
            continue;
        }
        // (Times never go back: the first and last tick bound the rest.)
        let margin = if row.first_tick >= first_pair && row.last_tick <= last_pair {
            0
        } else {
            MARGIN_NS
        };
        let early = time.unix_ns(row.first_tick).saturating_sub(margin);
        let late = time
            .unix_ns(row.last_tick)
            .max(want.floor_ns.unwrap_or(i64::MIN))
            .saturating_add(margin);
        let wanted = want.since_ns.is_none_or(|s| late >= s)
            && want.until_ns.is_none_or(|u| early <= u)
            && row.levels & levels != 0;
        if !wanted {
            out.push((start, end));
        }
    }
    out.sort_unstable();
    // (Rows of two INDEX entries may repeat or overlap: merged.)
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(out.len());
    for (s, e) in out {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}
