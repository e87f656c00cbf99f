//! Reading a set of files too large to hold at once, a window at a time.
//!
//! A reader holds each open file's entries (its mapped pages, and its
//! blocks inflated), so `decode` of a day of a rolled set held the whole
//! day. Files of one set follow each other in time: only those whose
//! records interleave need to be open together. So when the inputs' bytes
//! on disk pass a budget ([`BUDGET_VAR`], 256 MiB by default), every file is
//! opened once to learn the span of its records (and its clock pairs, and
//! its threads), closed (unless it has no END: see [`Member::kept`]), and
//! then read again group by group: each group the files whose spans
//! overlap, in time order, merged alone. The output is the merge of all of
//! them: every file is read by its writer's clock over the whole set (as
//! [`Merge`](nanolog_runtime::reader::Merge) reads a set; that map never goes
//! backwards, so a file's records lie between the times of its first and
//! last ticks), and a record of one group is earlier than every record of
//! the next. (`stats`, which needs no time order, reads such a set a file
//! at a time, without the first look.)

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

use nanolog_runtime::reader::{ClockGroups, Filter, Header, LogFile, Merge, ThreadInfo, TimeMap};

/// The environment variable that sets the budget, in MiB (0: read every
/// set of more than one file a window at a time, each group of files whose
/// records interleave alone).
pub(crate) const BUDGET_VAR: &str = "NANOLOG_READ_WINDOW_MB";

/// The budget when [`BUDGET_VAR`] is not set: bytes of the inputs on disk
/// read at once.
const DEFAULT_BUDGET: usize = 256 << 20;

/// The files a read takes.
pub(crate) enum Inputs {
    /// Every file, open (their bytes fit the budget, or there is one).
    All(Vec<LogFile>),
    /// A window at a time.
    Windows(Windows),
}

/// A set read a window at a time.
pub(crate) struct Windows {
    /// The files, in the order given.
    files: Vec<Member>,
    /// The union of the clock pairs of each writer's files ([`Member::clock`]),
    /// shared by the merges of its files (a writer of thousands of files
    /// has thousands of pairs).
    clocks: Vec<Arc<TimeMap>>,
    /// The groups of files whose records interleave, in time order; each
    /// group's files (indexes into `files`) in the order a merge of every
    /// file would take them.
    groups: Vec<Vec<usize>>,
    /// Every thread of every file (what `--thread` names are looked up in).
    threads: Vec<ThreadInfo>,
}

/// A file as the first reading of the set found it.
struct Member {
    path: PathBuf,
    /// Its header (when it began, and its writer): a file found otherwise
    /// when read again was replaced in between.
    header: Header,
    /// Its clock: an index into `Windows::clocks`.
    clock: usize,
    /// Its bytes as read.
    size: u64,
    /// The earliest and latest tick of its records and gaps (`None`:
    /// nothing to read).
    span: Option<(u64, u64)>,
    /// The file as first opened, kept when it had no END: its writer may
    /// still be appending to it and roll it away from its path before it
    /// is read again (what the path then names is another file). At most a
    /// writer's live file: one file's worth.
    kept: Option<LogFile>,
}

impl Inputs {
    /// Every thread of every file (what `--thread` names are looked up in).
    pub(crate) fn threads(&self) -> Vec<ThreadInfo> {
        match self {
            Inputs::All(files) => crate::inputs::threads_of(files),
            Inputs::Windows(w) => w.threads.clone(),
        }
    }

    /// The read's merges, given to `each` in turn until it returns false:
    /// one over every file, or one a group of a read a window at a time
    /// (unsorted: a file at a time, as given); `filter` makes each one's
    /// filter.
    pub(crate) fn merges(
        &mut self,
        sorted: bool,
        filter: impl Fn() -> Filter,
        mut each: impl FnMut(Merge<'_>) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        for g in 0..self.group_count(sorted) {
            if !self.merge_group(sorted, g, filter(), &mut each)? {
                break;
            }
        }
        Ok(())
    }
}

impl Inputs {
    /// How many merges [`Inputs::merges`] makes (each a group of files
    /// whose records interleave, in time order; with `sorted` false, each a
    /// file in the order given).
    pub(crate) fn group_count(&self, sorted: bool) -> usize {
        match self {
            Inputs::All(_) => 1,
            Inputs::Windows(w) if sorted => w.groups.len(),
            Inputs::Windows(w) => w.files.len(),
        }
    }

    /// `each` of the merge of group `i` alone (see [`Inputs::group_count`]):
    /// a query that wants the end of the input reads its last groups only.
    pub(crate) fn merge_group<R>(
        &mut self,
        sorted: bool,
        i: usize,
        filter: Filter,
        each: impl FnOnce(Merge<'_>) -> R,
    ) -> R {
        fn merge(files: &[LogFile], filter: Filter, sorted: bool) -> Merge<'_> {
            if sorted {
                Merge::new(files, filter)
            } else {
                Merge::unsorted(files, filter)
            }
        }
        match self {
            Inputs::All(files) => each(merge(files, filter, sorted)),
            Inputs::Windows(w) => {
                let group = if sorted {
                    w.groups.get(i).cloned().unwrap_or_default()
                } else {
                    vec![i]
                };
                let (files, clocks) = w.open(&group);
                let mut m = merge(&files, filter, sorted);
                for (k, c) in clocks.into_iter().enumerate() {
                    m.set_clock(k, c);
                }
                each(m)
            }
        }
    }
}

impl Windows {
    /// The files `group` (indexes, as in [`Windows::groups`]), opened
    /// again, each with the clock it is read by (their warnings were said
    /// when they were first opened). A file that can no longer be read is
    /// said and left out.
    pub(crate) fn open(&mut self, group: &[usize]) -> (Vec<LogFile>, Vec<Arc<TimeMap>>) {
        let mut files = Vec::new();
        let mut clocks = Vec::new();
        for &i in group {
            let m = &mut self.files[i];
            if let Some(f) = m.kept.take() {
                files.push(f);
                clocks.push(Arc::clone(&self.clocks[m.clock]));
                continue;
            }
            match crate::inputs::open_log(&m.path) {
                Ok(f) => {
                    if *f.header() != m.header {
                        let _ = writeln!(
                            io::stderr(),
                            "nanolog: warning: {}: replaced while the set was read (a roll?): read as it is now",
                            m.path.display()
                        );
                    }
                    files.push(f);
                    clocks.push(Arc::clone(&self.clocks[m.clock]));
                }
                Err(e) => {
                    let _ = writeln!(io::stderr(), "nanolog: warning: {e}; skipped");
                }
            }
        }
        (files, clocks)
    }
}

/// The budget: [`BUDGET_VAR`] MiB (a decimal number), or
/// [`DEFAULT_BUDGET`].
fn budget() -> usize {
    std::env::var(BUDGET_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|mb| *mb >= 0.0)
        .map_or(DEFAULT_BUDGET, |mb| (mb * f64::from(1 << 20)) as usize)
}

/// The inputs `files` (patterns expanded, see [`crate::inputs::expand`]), and
/// whether they are read at once: one file, or files whose bytes on disk
/// are within the budget (a compressed file's entries take about half as
/// much again inflated). A set past it is never held whole, not even while
/// its files are first looked at.
pub(crate) fn inputs(files: &[PathBuf]) -> anyhow::Result<(Vec<PathBuf>, bool)> {
    let paths = crate::inputs::expand(files)?;
    let on_disk: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let at_once = paths.len() == 1 || on_disk <= budget() as u64;
    Ok((paths, at_once))
}

/// Opens the inputs `files` (patterns expanded) as [`crate::inputs::open_all`]
/// does, their warnings said once: all of them, or, when they are several
/// and their bytes on disk pass the budget, the plan of a read a window at
/// a time.
pub(crate) fn open(files: &[PathBuf]) -> anyhow::Result<Inputs> {
    let (paths, at_once) = inputs(files)?;
    if at_once {
        return crate::inputs::open_expanded(&paths, true).map(Inputs::All);
    }
    let mut members = Vec::new();
    // Per writer's clock, its files' maps.
    let mut domains = ClockGroups::default();
    let mut threads = Vec::new();
    crate::inputs::open_each(&paths, true, |log| {
        let clock = domains.add(&log);
        threads.extend(log.threads());
        members.push(Member {
            path: log.path().to_owned(),
            header: *log.header(),
            clock,
            size: log.valid_len() as u64,
            span: log.tick_span(),
            kept: (!log.is_complete()).then_some(log),
        });
        Ok(())
    })?;
    let clocks: Vec<Arc<TimeMap>> = domains.maps();
    // A quarter of the budget a window: several windows' worth of the
    // set is never held (what a window holds inflated is about half as
    // much again as its files on disk).
    let groups = group(&members, &clocks, budget() as u64 / 4);
    Ok(Inputs::Windows(Windows {
        files: members,
        clocks,
        groups,
        threads,
    }))
}

/// The files with records or gaps, in groups whose spans overlap (in Unix
/// ns by their writer's clock, ends included), in time order; each group
/// in the order a merge of all the files takes them: by writer (the
/// writer of an earlier file first), then as given. Files with nothing to
/// read are in none.
fn group(members: &[Member], clocks: &[Arc<TimeMap>], together: u64) -> Vec<Vec<usize>> {
    let mut timed: Vec<(i64, i64, usize)> = members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let (lo, hi) = m.span?;
            let c = &clocks[m.clock];
            let (a, b) = (c.unix_ns(lo), c.unix_ns(hi));
            Some((a.min(b), a.max(b), i))
        })
        .collect();
    timed.sort_unstable();
    // The first file of each writer, as given: the merge's order of writers.
    let first_of = |clock: usize| members.iter().position(|m| m.clock == clock).unwrap_or(0);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut end = i64::MIN;
    for (lo, hi, i) in timed {
        match groups.last_mut() {
            Some(g) if lo <= end => g.push(i),
            _ => groups.push(vec![i]),
        }
        end = end.max(hi);
    }
    // Neighbouring groups read together while their files take at most
    // `together` bytes: a set of thousands of small files is read in a few
    // merges, not one a file (each merge starts its rendering threads; 2,158
    // files of 20 KB read 2.9 times slower one group at a time than at
    // once). The groups do not interleave, so reading them together changes
    // nothing but the memory held.
    let size = |g: &[usize]| g.iter().map(|&i| members[i].size).sum::<u64>();
    let mut windows: Vec<Vec<usize>> = Vec::new();
    let mut held = 0;
    for g in groups {
        let s = size(&g);
        match windows.last_mut() {
            Some(w) if held + s <= together => {
                w.extend(g);
                held += s;
            }
            _ => {
                windows.push(g);
                held = s;
            }
        }
    }
    for w in &mut windows {
        w.sort_unstable_by_key(|&i| (first_of(members[i].clock), i));
    }
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(clock: usize, span: Option<(u64, u64)>) -> Member {
        Member {
            path: PathBuf::new(),
            header: Header {
                version: 4,
                ticks_per_second: 1e9,
                base_tick: 0,
                base_unix_ns: 0,
                pid: clock as u32,
            },
            clock,
            size: 10,
            span,
            kept: None,
        }
    }

    /// Files whose spans overlap, directly or through another, share a
    /// group; a file with nothing to read is in none; within a group the
    /// files of the writer given first come first, each writer's as given.
    #[test]
    fn overlapping_spans_share_a_group_in_the_merges_order() {
        // One tick a nanosecond from the epoch; the second writer's clock
        // runs 100 ns ahead.
        let clocks = [
            Arc::new(TimeMap::new(1e9, vec![(0, 0)])),
            Arc::new(TimeMap::new(1e9, vec![(0, 100)])),
        ];
        let members = [
            member(1, Some((0, 5))),    // 100..105: with file 3
            member(0, Some((10, 20))),  // 10..20
            member(0, Some((19, 30))),  // 19..30: touches file 1
            member(0, Some((95, 101))), // 95..101: overlaps file 0
            member(0, None),
        ];
        let groups = group(&members, &clocks, 0);
        assert_eq!(groups, vec![vec![1, 2], vec![0, 3]]);
        // Groups read together up to 40 bytes of files (10 each): both.
        let groups = group(&members, &clocks, 40);
        assert_eq!(groups, vec![vec![0, 1, 2, 3]]);
        // Up to 30: a group is never split, so each alone.
        let groups = group(&members, &clocks, 30);
        assert_eq!(groups, vec![vec![1, 2], vec![0, 3]]);
    }
}
