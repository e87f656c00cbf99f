//! `nanolog stats`: aggregations computed from the binary values, without
//! formatting, split across cores by extent.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::ops::Range;

use crate::output::json_string;
use crate::percentile;
use anyhow::{bail, Context};
use nanolog_runtime::text::utc::rfc3339;

use crate::time_args::parse_duration_ns;
use nanolog_runtime::reader::{LogFile, ReadError, Record, SiteEntry, Value, Wave};
use regex::Regex;

use crate::cli::{Format, GroupBy, StatsArgs};

/// A group's key: a call site (by location and format, so a rotated set or
/// several processes add up), a thread, or a level.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
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
struct Row {
    count: u64,
    bytes: u64,
    /// The first and last times of its records (while it has none, the
    /// widest values, so that any time narrows them).
    first: i64,
    last: i64,
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
    fn count_one(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }

    /// Records from `first` to `last` (ns) were counted.
    fn span(&mut self, first: i64, last: i64) {
        self.first = self.first.min(first);
        self.last = self.last.max(last);
    }

    fn merge(&mut self, o: &Row) {
        self.count += o.count;
        self.bytes += o.bytes;
        self.span(o.first, o.last);
    }
}

/// One worker's results.
#[derive(Default)]
struct Partial {
    /// Per group number (see [`Groups`]).
    rows: Vec<Row>,
    series: HashMap<(i64, u32), u64>,
    values: percentile::Values,
    /// Per work item taken (by its number): the sum of its values. Added
    /// up in the items' order, so the mean does not depend on which worker
    /// took which item (floating-point addition is not associative).
    sums: Vec<(usize, f64)>,
    non_numeric: Option<String>,
    errors: Vec<String>,
    /// Per file read (by its number), per group: the first and last tick
    /// of the group's records there, mapped to times once the file's clock
    /// is whole (see [`Totals::finish_file`]).
    ticks: HashMap<usize, Vec<(u64, u64)>>,
}

/// What `stats` knows of the files read, built a file at a time (a set
/// past the read budget is read a file at a time: see `window.rs`).
struct StatsPlan {
    by: GroupBy,
    every_ns: Option<i64>,
    /// `--site` or `--fmt`: the format strings of the sites to aggregate.
    site_re: Option<Regex>,
    /// `--arg`: what to aggregate, and where it is in each file's sites.
    arg: Option<ArgPlan>,
    /// Per file: the file whose thread ids it shares (the first file of
    /// the same process), so `--by thread` merges a set's files.
    thread_source: Vec<usize>,
    /// Per file, per site id: selected by --site.
    selected: Vec<Vec<bool>>,
    groups: Groups,
    /// Per file: what the output says of it.
    files: Vec<FileMeta>,
}

/// `--arg`: by index, or by name.
enum Want {
    Index(usize),
    Name(String),
}

/// `--arg` as the files are read.
struct ArgPlan {
    want: Want,
    /// Per file, per site id, the index of the argument to aggregate (a
    /// name may sit at another index in each site).
    per_file: Vec<Vec<Option<usize>>>,
}

/// What the output says of a file read (its threads' names, its writer's
/// pid, its path, its size), kept once the file is closed.
struct FileMeta {
    path: std::path::PathBuf,
    pid: u32,
    threads: HashMap<u32, String>,
    raw_len: u64,
}

impl FileMeta {
    fn thread_name(&self, id: u32) -> Option<&str> {
        self.threads.get(&id).map(String::as_str)
    }
}

impl StatsPlan {
    /// Takes in file `f`, the next of the read; its number (the files
    /// taken in before).
    fn add(&mut self, f: &LogFile) -> usize {
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
    fn refresh(&mut self, fi: usize, f: &LogFile) {
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

impl Partial {
    /// A worker's results before it begins: a row for each of `groups`.
    fn new(groups: usize) -> Partial {
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
struct Groups {
    /// Each group's key, once (a site in several files of a set is one).
    keys: Vec<Key>,
    /// Per file, per site id: the site's group (`--by site`).
    sites: Vec<Vec<u32>>,
    /// Per file: each thread's group (`--by thread`).
    threads: Vec<HashMap<u32, u32>>,
    /// Per level: its group (`--by level`, and a site missing from its
    /// file's dictionary under `--by site`).
    levels: Vec<u32>,
    /// Each key's number.
    numbers: HashMap<Key, u32>,
}

impl Groups {
    fn new() -> Groups {
        let mut g = Groups::default();
        g.levels = (0..=u8::MAX).map(|l| g.number(Key::Level(l))).collect();
        g
    }

    /// Key `k`'s group: its number, given it the first time it is seen.
    fn number(&mut self, k: Key) -> u32 {
        let keys = &mut self.keys;
        *self.numbers.entry(k).or_insert_with_key(|k| {
            keys.push(k.clone());
            keys.len() as u32 - 1
        })
    }

    /// The groups of file `fi`'s sites and threads (`source`: the file
    /// whose thread ids it shares).
    fn refresh(&mut self, fi: usize, f: &LogFile, source: usize) {
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

    /// The group of `rec`, a record of file `fi`.
    #[inline]
    fn of(&self, by: GroupBy, fi: usize, rec: &Record<'_>) -> u32 {
        let level = self.levels[rec.level() as usize];
        match by {
            GroupBy::Site => self.sites[fi]
                .get(rec.site().id as usize)
                .copied()
                .unwrap_or(level),
            GroupBy::Thread => self.threads[fi]
                .get(&rec.thread())
                .copied()
                .unwrap_or(level),
            GroupBy::Level => level,
        }
    }
}

fn site_key(s: &SiteEntry) -> Key {
    Key::Site {
        level: s.level as u8,
        file: s.file.clone(),
        line: s.line,
        format: s.format.clone(),
    }
}

pub fn run(a: &StatsArgs) -> anyhow::Result<()> {
    let (paths, at_once) = crate::window::inputs(&a.files)?;
    let site_re = match (&a.site, &a.fmt) {
        (Some(re), _) => Some(Regex::new(re).context("--site: invalid regular expression")?),
        // An exact format string: the regex of its text, anchored.
        (None, Some(text)) => Some(Regex::new(&format!("^{}$", regex::escape(text)))?),
        (None, None) => None,
    };
    if a.arg.is_some() && site_re.is_none() {
        bail!("--arg needs --site or --fmt to choose the call sites whose argument to aggregate");
    }
    let every_ns = a
        .every
        .as_deref()
        .map(parse_duration_ns)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--every: {e}"))?
        .map(|n| n as i64);
    let want = a.arg.as_deref().map(|w| match w.parse::<usize>() {
        Ok(i) => Want::Index(i),
        Err(_) => Want::Name(w.to_owned()),
    });
    let mut plan = StatsPlan {
        by: a.by.unwrap_or(GroupBy::Site),
        every_ns,
        site_re,
        arg: want.map(|want| ArgPlan {
            want,
            per_file: Vec::new(),
        }),
        thread_source: Vec::new(),
        selected: Vec::new(),
        groups: Groups::new(),
        files: Vec::new(),
    };
    let mut totals = Totals::default();
    if every_ns.is_none() {
        // Each file read as it is indexed (the order of records does not
        // matter here, nor their times but a group's first and last): a
        // compressed file's blocks are inflated once, a few MiB at a time.
        let mut state = (&mut plan, &mut totals, None);
        crate::inputs::open_each_in(
            &paths,
            true,
            &mut state,
            |(plan, totals, current), path| {
                *current = None;
                LogFile::open_streamed(path, |wave| {
                    let f = wave.file();
                    let fi = match *current {
                        Some(fi) => {
                            plan.refresh(fi, f);
                            fi
                        }
                        None => *current.insert(plan.add(f)),
                    };
                    totals.scan(plan, std::slice::from_ref(wave), fi);
                })
            },
            |(plan, totals, current), f| {
                let fi = match current.take() {
                    Some(fi) => {
                        plan.refresh(fi, &f);
                        fi
                    }
                    None => plan.add(&f),
                };
                totals.finish_file(fi, &f);
                Ok(())
            },
        )?;
        check(&plan, a)?;
    } else if at_once {
        let files = crate::inputs::open_expanded(&paths, true)?;
        for f in &files {
            plan.add(f);
        }
        check(&plan, a)?;
        totals.scan(&plan, &files, 0);
        for (fi, f) in files.iter().enumerate() {
            totals.finish_file(fi, f);
        }
    } else {
        // Past the read budget (see `window.rs`): a file at a time (the
        // order of records does not matter here), each one's groups
        // numbered as it comes.
        crate::inputs::open_each(&paths, true, |f| {
            let fi = plan.add(&f);
            totals.scan(&plan, std::slice::from_ref(&f), fi);
            totals.finish_file(fi, &f);
            Ok(())
        })?;
        check(&plan, a)?;
    }
    let Totals {
        total,
        values,
        mut sums,
        ..
    } = totals;
    sums.sort_unstable_by_key(|s| s.0);
    let sum = sums.iter().map(|s| s.1).sum();
    for e in &total.errors {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    let mut out = String::new();
    if let Some(n) = a.arg.as_deref() {
        if let Some(kind) = total.non_numeric {
            bail!("argument {n} of the selected call sites is {kind}, not a number");
        }
        write_arg_summary(a, n, &values, sum, &mut out);
    } else if every_ns.is_some() {
        let keys = &plan.groups.keys;
        let series = total
            .series
            .into_iter()
            .map(|((t, g), c)| ((t, keys[g as usize].clone()), c))
            .collect();
        write_series(a.format, &plan, &series, &mut out);
    } else {
        let groups = plan
            .groups
            .keys
            .iter()
            .cloned()
            .zip(total.rows)
            .filter(|(_, r)| r.count > 0)
            .collect();
        write_groups(a.format, &plan, &groups, &mut out);
    }
    io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

/// Says why the selection reads nothing: a `--site` that matches no call
/// site, an `--arg` name no selected site has.
fn check(plan: &StatsPlan, a: &StatsArgs) -> anyhow::Result<()> {
    let selector = if a.fmt.is_some() { "--fmt" } else { "--site" };
    if plan.site_re.is_some() && !plan.selected.iter().flatten().any(|&b| b) {
        bail!(
            "{selector} {:?} matches no call site's format string",
            a.site.as_deref().or(a.fmt.as_deref()).unwrap_or("")
        );
    }
    if let Some(ArgPlan {
        want: Want::Name(want),
        per_file,
    }) = &plan.arg
    {
        if !per_file.iter().flatten().any(Option::is_some) {
            bail!("--arg {want:?}: no selected call site has an argument of that name");
        }
    }
    Ok(())
}

/// The results of the files scanned so far.
#[derive(Default)]
struct Totals {
    total: Partial,
    /// `--arg`'s values, per worker of each scan (tens of MB for a large
    /// log: they stay in the workers' vectors).
    values: Vec<percentile::Values>,
    /// Per work item, numbered across scans in file order: its values' sum.
    sums: Vec<(usize, f64)>,
    /// Work items of the scans so far.
    items: usize,
}

/// What a scan reads: a file's extents, or a run of them read as the file
/// is indexed.
trait Extents: Sync {
    fn extent_count(&self) -> usize;
    fn scan_extents(&self, range: Range<usize>, f: impl FnMut(Result<Record<'_>, ReadError>));
}

impl Extents for LogFile {
    fn extent_count(&self) -> usize {
        LogFile::extent_count(self)
    }
    fn scan_extents(&self, range: Range<usize>, f: impl FnMut(Result<Record<'_>, ReadError>)) {
        LogFile::scan_extents(self, range, f)
    }
}

impl Extents for Wave<'_> {
    fn extent_count(&self) -> usize {
        Wave::extent_count(self)
    }
    fn scan_extents(&self, range: Range<usize>, f: impl FnMut(Result<Record<'_>, ReadError>)) {
        Wave::scan_extents(self, range, f)
    }
}

/// Extents a work item takes at least: a small file (a set of thousands)
/// is scanned on the calling thread, without starting others.
const MIN_ITEM: usize = 8;

impl Totals {
    /// Scans `sources`, of the files `first..` of the plan, on every core.
    fn scan(&mut self, plan: &StatsPlan, sources: &[impl Extents], first: usize) {
        // Work items: (file, extent range), about four per core.
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut work = Vec::new();
        for (fi, f) in sources.iter().enumerate() {
            let n = f.extent_count();
            let step = n.div_ceil(cores * 4).max(MIN_ITEM);
            let mut s = 0;
            while s < n {
                work.push((fi, s..(s + step).min(n)));
                s += step;
            }
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let groups = plan.groups.keys.len();
        let base = self.items;
        let worker = || {
            let mut p = Partial::new(groups);
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((fi, range)) = work.get(i) else {
                    break;
                };
                let before = p.values.len();
                scan(plan, &sources[*fi], first + fi, range.clone(), &mut p);
                if plan.arg.is_some() {
                    p.sums.push((base + i, p.values.since(before).iter().sum()));
                }
            }
            p
        };
        let workers = cores.min(work.len()).max(1);
        let partials: Vec<Partial> = if workers == 1 {
            vec![worker()]
        } else {
            std::thread::scope(|sc| {
                let handles: Vec<_> = (0..workers).map(|_| sc.spawn(worker)).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Partial::new(groups)))
                    .collect()
            })
        };
        self.items += work.len();
        let total = &mut self.total;
        total.rows.resize(groups, Row::default());
        for mut p in partials {
            self.values.push(std::mem::take(&mut p.values));
            self.sums.append(&mut p.sums);
            for (t, r) in total.rows.iter_mut().zip(&p.rows) {
                t.merge(r);
            }
            for (k, c) in p.series {
                *total.series.entry(k).or_default() += c;
            }
            total.non_numeric = total.non_numeric.take().or(p.non_numeric);
            total.errors.extend(p.errors);
            for (fi, ticks) in p.ticks {
                let t = total.ticks.entry(fi).or_default();
                if t.len() < ticks.len() {
                    t.resize(ticks.len(), (u64::MAX, 0));
                }
                for ((lo, hi), (l, h)) in t.iter_mut().zip(ticks) {
                    *lo = (*lo).min(l);
                    *hi = (*hi).max(h);
                }
            }
        }
    }

    /// File `fi` is read whole: its groups' first and last ticks become
    /// times, by its clock. (A file's map from ticks to time never goes
    /// backwards, so they are its first and last times, mapped once each:
    /// a lookup in the clock pairs for every record was half of `stats`'
    /// time.)
    fn finish_file(&mut self, fi: usize, f: &LogFile) {
        let Some(ticks) = self.total.ticks.remove(&fi) else {
            return;
        };
        let map = f.time_map();
        for (row, (lo, hi)) in self.total.rows.iter_mut().zip(ticks) {
            if lo <= hi {
                row.span(map.unix_ns(lo), map.unix_ns(hi));
            }
        }
    }
}

fn scan(plan: &StatsPlan, f: &impl Extents, fi: usize, range: Range<usize>, p: &mut Partial) {
    let sel = &plan.selected[fi];
    // Per group: the first and last tick of its records in the file.
    let ticks = p.ticks.entry(fi).or_default();
    ticks.resize(p.rows.len(), (u64::MAX, 0));
    // Blocks past the file's resident budget inflated one at a time as the
    // scan reaches them.
    f.scan_extents(range, |rec| {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                p.errors.push(e.to_string());
                return;
            }
        };
        let id = rec.site().id as usize;
        if !sel.get(id).copied().unwrap_or(false) {
            return;
        }
        if let Some(arg) = &plan.arg {
            let Some(n) = arg.per_file[fi].get(id).copied().flatten() else {
                // A selected site without an argument of that name.
                return;
            };
            match rec.arg(n) {
                Some(v) => match v.as_f64() {
                    Some(x) => p.values.push(x),
                    None => {
                        p.non_numeric
                            .get_or_insert_with(|| kind_name(&v).to_owned());
                    }
                },
                None => {
                    p.non_numeric.get_or_insert_with(|| "missing".to_owned());
                }
            }
            return;
        }
        let group = plan.groups.of(plan.by, fi, &rec);
        if let Some(every) = plan.every_ns {
            let ns = rec.unix_ns();
            *p.series
                .entry((ns.div_euclid(every) * every, group))
                .or_default() += 1;
        } else {
            let g = group as usize;
            p.rows[g].count_one(rec.encoded_len() as u64);
            let (lo, hi) = &mut ticks[g];
            *lo = (*lo).min(rec.tick());
            *hi = (*hi).max(rec.tick());
        }
    });
}

/// The column heading of `--by`'s groups.
fn group_name(by: GroupBy) -> &'static str {
    match by {
        GroupBy::Site => "site",
        GroupBy::Thread => "thread",
        GroupBy::Level => "level",
    }
}

fn kind_name(v: &Value<'_>) -> &'static str {
    match v {
        Value::Bool(_) => "a bool",
        Value::Char(_) => "a char",
        Value::Str(_) | Value::Hex(_) | Value::Numbered(_) => "a string",
        Value::Rendered(_) => "a value formatted at the call site",
        _ => "a number",
    }
}

fn level_name(l: u8) -> &'static str {
    nanolog_runtime::Level::from_u8(l)
        .map(|l| l.as_str())
        .unwrap_or("?")
}

fn key_label(plan: &StatsPlan, k: &Key) -> (String, String) {
    // (short label, long description)
    match k {
        Key::Site {
            level,
            file,
            line,
            format,
        } => (
            format!("{file}:{line}"),
            format!("{} {format:?}", level_name(*level)),
        ),
        Key::Thread { source, id } => {
            let name = plan.files[*source].thread_name(*id).unwrap_or("");
            // The files of one process (a rolled set) share their ids:
            // a thread is one row; threads of several processes are told
            // apart by pid.
            let processes = plan
                .thread_source
                .iter()
                .enumerate()
                .filter(|(i, s)| i == *s)
                .count();
            let label = if processes > 1 {
                format!("{}#{id}", plan.files[*source].pid)
            } else {
                id.to_string()
            };
            (label, name.to_owned())
        }
        Key::Level(l) => (level_name(*l).to_owned(), String::new()),
    }
}

fn write_groups(format: Format, plan: &StatsPlan, groups: &HashMap<Key, Row>, out: &mut String) {
    let mut rows: Vec<(&Key, &Row)> = groups.iter().collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
    let total: u64 = rows.iter().map(|r| r.1.count).sum();
    // "Share" is of the files' entries, uncompressed: what each group
    // costs of the log (its records' own bytes against all the entries').
    let file_bytes: u64 = plan.files.iter().map(|f| f.raw_len).sum();
    match format {
        Format::Text => {
            let what = group_name(plan.by);
            let _ = writeln!(
                out,
                "{:>12} {:>7} {:>12} {:>7}  {:<30} {:<30}  {:<24}",
                "count", "count%", "bytes", "bytes%", "first", "last", what
            );
            for (k, r) in rows {
                let (label, desc) = key_label(plan, k);
                let _ = writeln!(
                    out,
                    "{:>12} {:>6.2}% {:>12} {:>6.2}%  {:<30} {:<30}  {:<24} {}",
                    r.count,
                    100.0 * r.count as f64 / total.max(1) as f64,
                    r.bytes,
                    100.0 * r.bytes as f64 / file_bytes.max(1) as f64,
                    rfc3339(r.first),
                    rfc3339(r.last),
                    label,
                    desc
                );
            }
        }
        Format::Json => {
            for (k, r) in rows {
                out.push('{');
                match k {
                    Key::Site {
                        level,
                        file,
                        line,
                        format,
                    } => {
                        out.push_str("\"level\":\"");
                        out.push_str(level_name(*level));
                        out.push_str("\",\"file\":");
                        json_string(file, out);
                        let _ = write!(out, ",\"line\":{line},\"fmt\":");
                        json_string(format, out);
                    }
                    Key::Thread { source, id } => {
                        let _ = write!(out, "\"thread\":{id},\"thread_name\":");
                        json_string(plan.files[*source].thread_name(*id).unwrap_or(""), out);
                        out.push_str(",\"source\":");
                        json_string(&plan.files[*source].path.to_string_lossy(), out);
                    }
                    Key::Level(l) => {
                        let _ = write!(out, "\"level\":\"{}\"", level_name(*l));
                    }
                }
                let _ = writeln!(
                    out,
                    ",\"count\":{},\"count_share\":{},\"bytes\":{},\"share\":{},\"first_ts_ns\":{},\"last_ts_ns\":{}}}",
                    r.count,
                    r.count as f64 / total.max(1) as f64,
                    r.bytes,
                    r.bytes as f64 / file_bytes.max(1) as f64,
                    r.first,
                    r.last
                );
            }
        }
    }
}

fn write_series(
    format: Format,
    plan: &StatsPlan,
    series: &HashMap<(i64, Key), u64>,
    out: &mut String,
) {
    let mut rows: Vec<(&(i64, Key), &u64)> = series.iter().collect();
    rows.sort_by(|a, b| {
        a.0 .0
            .cmp(&b.0 .0)
            .then_with(|| b.1.cmp(a.1))
            .then_with(|| a.0 .1.cmp(&b.0 .1))
    });
    if format == Format::Text {
        let what = group_name(plan.by);
        let _ = writeln!(
            out,
            "{:<30}  {:>10}  {:<24}",
            "interval start", "count", what
        );
    }
    for ((t, k), c) in rows {
        let (label, desc) = key_label(plan, k);
        match format {
            Format::Text => {
                let _ = writeln!(out, "{}  {:>10}  {:<24} {}", rfc3339(*t), c, label, desc);
            }
            Format::Json => {
                let _ = write!(
                    out,
                    "{{\"ts_ns\":{t},\"ts\":\"{}\",\"count\":{c},\"group\":",
                    rfc3339(*t)
                );
                json_string(&label, out);
                out.push_str(",\"detail\":");
                json_string(&desc, out);
                out.push_str("}\n");
            }
        }
    }
}

/// `values`: per worker; `sum`: theirs, added in a fixed order.
fn write_arg_summary(
    a: &StatsArgs,
    n: &str,
    values: &[percentile::Values],
    sum: f64,
    out: &mut String,
) {
    let count = values.iter().map(percentile::Values::len).sum::<usize>();
    let (min, max) = percentile::min_max(values);
    let [p50, p90, p99] = percentile::percentiles(values, [50.0, 90.0, 99.0]);
    let mean = (count > 0).then(|| sum / count as f64);
    let fields = [
        ("min", min),
        ("max", max),
        ("mean", mean),
        ("p50", p50),
        ("p90", p90),
        ("p99", p99),
    ];
    let buckets = if a.histogram {
        histogram(values)
    } else {
        Vec::new()
    };
    match a.format {
        Format::Text => {
            let _ = writeln!(
                out,
                "site:  {}",
                a.site.as_deref().or(a.fmt.as_deref()).unwrap_or("")
            );
            let _ = writeln!(out, "arg:   {n}");
            let _ = writeln!(out, "count: {count}");
            for (name, v) in fields {
                match v {
                    // The mean is no value of the log: to 6 significant
                    // digits (JSON keeps it whole).
                    Some(v) if name == "mean" => {
                        let _ = writeln!(out, "{name:<6} {}", significant(v, 6));
                    }
                    Some(v) => {
                        let _ = writeln!(out, "{name:<6} {}", number(v));
                    }
                    None => {
                        let _ = writeln!(out, "{name:<6} -");
                    }
                }
            }
            if a.histogram {
                draw_histogram(&buckets, out);
            }
        }
        Format::Json => {
            out.push_str("{\"arg\":");
            match n.parse::<usize>() {
                Ok(i) => out.push_str(&i.to_string()),
                Err(_) => json_string(n, out),
            }
            let _ = write!(out, ",\"count\":{count}");
            for (name, v) in fields {
                match v {
                    Some(v) if v.is_finite() => {
                        let _ = write!(out, ",\"{name}\":{}", number(v));
                    }
                    Some(v) => {
                        let _ = write!(out, ",\"{name}\":\"{v}\"");
                    }
                    None => {
                        let _ = write!(out, ",\"{name}\":null");
                    }
                }
            }
            if a.histogram {
                out.push_str(",\"histogram\":[");
                for (i, b) in buckets.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let edge = |v: f64| {
                        if v.is_finite() {
                            number(v)
                        } else {
                            "null".into()
                        }
                    };
                    let _ = write!(
                        out,
                        "{{\"from\":{},\"to\":{},\"count\":{}}}",
                        edge(b.from),
                        edge(b.to),
                        b.count
                    );
                }
                out.push(']');
            }
            out.push_str("}\n");
        }
    }
}

/// A value as text: integral values (exact below 2^53) without a fraction.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:?}")
    }
}

/// `v` to `digits` significant digits, without trailing zeros
/// (46.80936454849498 -> 46.8094); integral values as [`number`] gives them.
fn significant(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 || (v.fract() == 0.0 && v.abs() < 9.0e15) {
        return number(v);
    }
    let decimals = (digits - 1 - v.abs().log10().floor() as i32).clamp(0, 17) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// One bar of a histogram: values in `[from, to)`.
struct Bucket {
    from: f64,
    to: f64,
    count: u64,
}

/// The edge at or below `v > 0` on the 1-2-5 log scale (..., 0.5, 1, 2,
/// 5, 10, 20, ...), and the next one up.
fn log_edges(v: f64) -> (f64, f64) {
    let decade = 10f64.powi(v.log10().floor() as i32);
    let m = v / decade;
    // (m is in [1, 10); rounding may put it a hair outside.)
    if m < 2.0 {
        (decade, 2.0 * decade)
    } else if m < 5.0 {
        (2.0 * decade, 5.0 * decade)
    } else {
        (5.0 * decade, 10.0 * decade)
    }
}

/// Log-scaled buckets of `values` (1-2-5 per decade) from the lowest to
/// the highest non-empty one, empty ones between kept (a gap in the
/// distribution is worth seeing); values at or below zero, and those not
/// finite, in buckets of their own.
fn histogram(values: &[percentile::Values]) -> Vec<Bucket> {
    let mut by_edge: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    let (mut non_positive, mut non_finite) = (0u64, 0u64);
    for &v in values.iter().flat_map(|p| p.since(0)) {
        if !v.is_finite() {
            non_finite += 1;
        } else if v <= 0.0 {
            non_positive += 1;
        } else {
            // Keyed by the bucket's index on the scale: 3 per decade.
            let (lo, _) = log_edges(v);
            let decade = lo.log10().floor() as i64;
            let step = match (lo / 10f64.powi(decade as i32)).round() as i64 {
                1 => 0,
                2 => 1,
                _ => 2,
            };
            *by_edge.entry(decade * 3 + step).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    if non_positive > 0 {
        out.push(Bucket {
            from: f64::NEG_INFINITY,
            to: 0.0,
            count: non_positive,
        });
    }
    if let (Some(&lo), Some(&hi)) = (by_edge.keys().next(), by_edge.keys().last()) {
        for k in lo..=hi {
            let decade = 10f64.powi(k.div_euclid(3) as i32);
            let from = decade * [1.0, 2.0, 5.0][k.rem_euclid(3) as usize];
            let to = decade * [2.0, 5.0, 10.0][k.rem_euclid(3) as usize];
            out.push(Bucket {
                from,
                to,
                count: by_edge.get(&k).copied().unwrap_or(0),
            });
        }
    }
    if non_finite > 0 {
        out.push(Bucket {
            from: f64::NAN,
            to: f64::NAN,
            count: non_finite,
        });
    }
    out
}

/// The histogram as text: one line a bucket, a bar of up to 50 cells.
fn draw_histogram(buckets: &[Bucket], out: &mut String) {
    let max = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let total: u64 = buckets.iter().map(|b| b.count).sum::<u64>().max(1);
    out.push_str("histogram (log-scaled buckets):\n");
    for b in buckets {
        let range = if b.from.is_nan() {
            "not finite".to_owned()
        } else if b.from == f64::NEG_INFINITY {
            "<= 0".to_owned()
        } else {
            format!("[{}, {})", number(b.from), number(b.to))
        };
        let cells = (b.count as f64 / max as f64 * 50.0).ceil() as usize;
        let _ = writeln!(
            out,
            "  {range:>22} {:>10} {:>6.2}% {}",
            b.count,
            b.count as f64 * 100.0 / total as f64,
            "#".repeat(if b.count > 0 { cells.max(1) } else { 0 })
        );
    }
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn a_mean_is_shown_to_six_significant_digits() {
        assert_eq!(significant(46.80936454849498, 6), "46.8094");
        assert_eq!(significant(0.000123456789, 6), "0.000123457");
        assert_eq!(significant(1234567.891, 6), "1234568");
        assert_eq!(significant(2.5, 6), "2.5");
        assert_eq!(significant(-3.0, 6), "-3");
        assert_eq!(significant(f64::NAN, 6), "NaN");
    }
}
