//! What `stats` is asked: its plan (groups, sites, the argument to
//! aggregate), and the rows it adds up.

use std::collections::HashMap;

use nanolog_runtime::reader::{LogFile, SiteEntry};
use regex::Regex;

use super::percentile;
use crate::cli::GroupBy;

/// A group's key: a call site (by location and format, so a rotated set or
/// several processes add up), a thread, or a level.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Key {
    Site {
        level: u8,
        file: String,
        line: u32,
        format: String,
    },
    Thread {
        source: usize,
        id: u32,
    },
    Level(u8),
}

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) count: u64,
    pub(super) bytes: u64,
    /// The first and last times of its records (while it has none, the
    /// widest values, so that any time narrows them).
    pub(super) first: i64,
    pub(super) last: i64,
}

impl Default for Row {
    fn default() -> Row {
        Row {
            count: 0,
            bytes: 0,
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl Row {
    /// A record of `bytes`; its time goes in with [`Row::span`].
    pub(super) fn count_one(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }

    /// Records from `first` to `last` (ns) were counted.
    pub(super) fn span(&mut self, first: i64, last: i64) {
        self.first = self.first.min(first);
        self.last = self.last.max(last);
    }

    pub(super) fn merge(&mut self, o: &Row) {
        self.count += o.count;
        self.bytes += o.bytes;
        self.span(o.first, o.last);
    }
}

/// One worker's results.
#[derive(Default)]
pub(super) struct Partial {
    /// Per group number (see [`Groups`]).
    pub(super) rows: Vec<Row>,
    pub(super) series: HashMap<(i64, u32), u64>,
    pub(super) values: percentile::Values,
    /// Per work item taken (by its number): the sum of its values. Added
    /// up in the items' order, so the mean does not depend on which worker
    /// took which item (floating-point addition is not associative).
    pub(super) sums: Vec<(usize, f64)>,
    pub(super) non_numeric: Option<String>,
    pub(super) errors: Vec<String>,
    /// Per file read (by its number), per group: the first and last tick
    /// of the group's records there, mapped to times once the file's clock
    /// is whole (see [`Totals::finish_file`]).
    pub(super) ticks: HashMap<usize, Vec<(u64, u64)>>,
}

/// What `stats` knows of the files read, built a file at a time (a set
/// past the read budget is read a file at a time: see `window.rs`).
pub(super) struct StatsPlan {
    pub(super) by: GroupBy,
    pub(super) every_ns: Option<i64>,
    /// `--site` or `--fmt`: the format strings of the sites to aggregate.
    pub(super) site_re: Option<Regex>,
    /// `--arg`: what to aggregate, and where it is in each file's sites.
    pub(super) arg: Option<ArgPlan>,
    /// Per file: the file whose thread ids it shares (the first file of
    /// the same process), so `--by thread` merges a set's files.
    pub(super) thread_source: Vec<usize>,
    /// Per file, per site id: selected by --site.
    pub(super) selected: Vec<Vec<bool>>,
    pub(super) groups: Groups,
    /// Per file: what the output says of it.
    pub(super) files: Vec<FileMeta>,
}

/// `--arg`: by index, or by name.
pub(super) enum Want {
    Index(usize),
    Name(String),
}

/// `--arg` as the files are read.
pub(super) struct ArgPlan {
    pub(super) want: Want,
    /// Per file, per site id, the index of the argument to aggregate (a
    /// name may sit at another index in each site).
    pub(super) per_file: Vec<Vec<Option<usize>>>,
}

/// What the output says of a file read (its threads' names, its writer's
/// pid, its path, its size), kept once the file is closed.
pub(super) struct FileMeta {
    pub(super) path: std::path::PathBuf,
    pub(super) pid: u32,
    pub(super) threads: HashMap<u32, String>,
    pub(super) raw_len: u64,
}

impl FileMeta {
    pub(super) fn thread_name(&self, id: u32) -> Option<&str> {
        self.threads.get(&id).map(String::as_str)
    }
}

impl StatsPlan {
    /// Takes in file `f`, the next of the read; its number (the files
    /// taken in before).
    pub(super) fn add(&mut self, f: &LogFile) -> usize {
        let fi = self.files.len();
        let source = self
            .files
            .iter()
            .position(|m| m.pid == f.header().pid)
            .unwrap_or(fi);
        self.files.push(FileMeta {
            path: f.path().to_owned(),
            pid: f.header().pid,
            threads: HashMap::new(),
            raw_len: 0,
        });
        self.thread_source.push(source);
        self.selected.push(Vec::new());
        if let Some(arg) = &mut self.arg {
            arg.per_file.push(Vec::new());
        }
        self.groups.sites.push(Vec::new());
        self.groups.threads.push(HashMap::new());
        self.refresh(fi, f);
        fi
    }

    /// What file `fi` says now: its sites, threads and size (a file read
    /// as it is indexed says more with each run of its records).
    pub(super) fn refresh(&mut self, fi: usize, f: &LogFile) {
        let meta = &mut self.files[fi];
        meta.threads = f.threads().map(|t| (t.id, t.name)).collect();
        meta.raw_len = f.raw_len() as u64;
        let n = f.sites().map(|s| s.id as usize + 1).max().unwrap_or(0);
        let mut sel = vec![false; n];
        for s in f.sites() {
            sel[s.id as usize] = self
                .site_re
                .as_ref()
                .is_none_or(|re| re.is_match(&s.format));
        }
        if let Some(arg) = &mut self.arg {
            let mut v = vec![None; n];
            for s in f.sites().filter(|s| sel[s.id as usize]) {
                v[s.id as usize] = match &arg.want {
                    Want::Index(i) => Some(*i),
                    Want::Name(name) => (0..s.kinds.len()).find(|&i| s.name(i) == Some(name)),
                };
            }
            arg.per_file[fi] = v;
        }
        self.selected[fi] = sel;
        self.groups.refresh(fi, f, self.thread_source[fi]);
    }
}

impl StatsPlan {
    /// Whether what is asked is what a writer counts in a file's TOTALS
    /// (FORMAT.md): the records, bytes and time range of each site, of
    /// each thread, and of each thread's records of each site, so also of
    /// each level; but not a time series, or an argument's values.
    pub(super) fn counted_by_writer(&self) -> bool {
        self.arg.is_none() && self.every_ns.is_none()
    }

    /// Whether the answer needs each thread's records of each site (a
    /// thread's records of the sites selected), which only writers since
    /// 2026-11-30 count.
    pub(super) fn needs_pairs(&self) -> bool {
        self.by == GroupBy::Thread && self.site_re.is_some()
    }
}

/// Whether `f`, opened leaving its records out, is answered by its
/// writer's counts: a finished file whose TOTALS are taken (nothing read
/// was damaged, they add up to its END's count) and have their details,
/// every site and thread they count in its dictionary, and the pairs of
/// thread and site if `pairs` (see [`StatsPlan::needs_pairs`]).
pub(super) fn answered_by(f: &LogFile, pairs: bool) -> bool {
    f.totals().is_some_and(|t| counts_known(f, t, pairs))
}

/// Whether `f`, opened from its last checkpoint on (a file without its
/// END: live, or its writer killed), is answered by the checkpoint's counts
/// and the records after it: where those begin, if so.
pub(super) fn answered_from(f: &LogFile, pairs: bool) -> Option<usize> {
    f.checkpoint()
        .filter(|(_, t)| counts_known(f, t, pairs))
        .map(|(from, _)| from)
}

/// Whether the writer's counts `t` of file `f` have their bytes and ticks
/// (and its pairs of thread and site, if `pairs`), and every site and
/// thread they count is in its dictionary.
fn counts_known(f: &LogFile, t: &nanolog_runtime::reader::Totals, pairs: bool) -> bool {
    let counted = |v: &nanolog_runtime::wire::totals::Tallies| {
        v.iter()
            .filter(|(_, c)| c.records > 0)
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
    };
    let threads: std::collections::HashSet<u32> = f.threads().map(|t| t.id).collect();
    t.detailed
        && (!pairs || t.pairs.is_some())
        && counted(&t.sites).iter().all(|&id| f.site(id).is_some())
        && counted(&t.threads).iter().all(|id| threads.contains(id))
}

impl Partial {
    /// A worker's results before it begins: a row for each of `groups`.
    pub(super) fn new(groups: usize) -> Partial {
        Partial {
            rows: vec![Row::default(); groups],
            ..Default::default()
        }
    }
}

/// The groups of `--by`, numbered, so that a record's group is found by
/// an index into a table: not by building its key (for a site, two
/// strings) and hashing it a record: `stats` by site of a plain log of
/// 10 M records took 0.56 s so, 0.10 s numbered.
#[derive(Default)]
pub(super) struct Groups {
    /// Each group's key, once (a site in several files of a set is one).
    pub(super) keys: Vec<Key>,
    /// Per file, per site id: the site's group (`--by site`).
    pub(super) sites: Vec<Vec<u32>>,
    /// Per file: each thread's group (`--by thread`).
    pub(super) threads: Vec<HashMap<u32, u32>>,
    /// Per level: its group (`--by level`, and a site missing from its
    /// file's dictionary under `--by site`).
    pub(super) levels: Vec<u32>,
    /// Each key's number.
    pub(super) numbers: HashMap<Key, u32>,
}

impl Groups {
    pub(super) fn new() -> Groups {
        let mut g = Groups::default();
        g.levels = (0..=u8::MAX).map(|l| g.number(Key::Level(l))).collect();
        g
    }

    /// Key `k`'s group: its number, given it the first time it is seen.
    pub(super) fn number(&mut self, k: Key) -> u32 {
        let keys = &mut self.keys;
        *self.numbers.entry(k).or_insert_with_key(|k| {
            keys.push(k.clone());
            keys.len() as u32 - 1
        })
    }

    /// The groups of file `fi`'s sites and threads (`source`: the file
    /// whose thread ids it shares).
    pub(super) fn refresh(&mut self, fi: usize, f: &LogFile, source: usize) {
        let n = f.sites().map(|s| s.id as usize + 1).max().unwrap_or(0);
        let mut sites = vec![self.levels[0]; n];
        for s in f.sites() {
            sites[s.id as usize] = self.number(site_key(s));
        }
        self.sites[fi] = sites;
        let ids = f
            .threads()
            .map(|t| t.id)
            .chain([nanolog_runtime::wire::dict::WRITER_THREAD]);
        let threads = ids
            .map(|id| (id, self.number(Key::Thread { source, id })))
            .collect();
        self.threads[fi] = threads;
    }

    /// [`Groups::of`], a thread's group looked up once a run of its
    /// records (a file's records come an extent, one thread's run, at a
    /// time): `last` holds the last thread's and its group (hashing the
    /// thread a record was a tenth of a compressed file's `stats --by
    /// thread`).
    #[inline]
    pub(super) fn of_run(
        &self,
        by: GroupBy,
        fi: usize,
        site: &SiteEntry,
        thread: u32,
        last: &mut Option<(u32, u32)>,
    ) -> u32 {
        if by != GroupBy::Thread {
            return self.of(by, fi, site, thread);
        }
        match *last {
            Some((t, g)) if t == thread => g,
            _ => {
                let g = self.of(by, fi, site, thread);
                *last = Some((thread, g));
                g
            }
        }
    }

    /// The group of a record of call site `site` and thread `thread` in
    /// file `fi`.
    #[inline]
    pub(super) fn of(&self, by: GroupBy, fi: usize, site: &SiteEntry, thread: u32) -> u32 {
        let level = self.levels[site.level as usize];
        match by {
            GroupBy::Site => self.sites[fi]
                .get(site.id as usize)
                .copied()
                .unwrap_or(level),
            GroupBy::Thread => self.threads[fi].get(&thread).copied().unwrap_or(level),
            GroupBy::Level => level,
        }
    }
}

pub(super) fn site_key(s: &SiteEntry) -> Key {
    Key::Site {
        level: s.level as u8,
        file: s.file.clone(),
        line: s.line,
        format: s.format.clone(),
    }
}
