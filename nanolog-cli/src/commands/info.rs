//! `nanolog info`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::output::json_string;
use nanolog_runtime::reader::{Batch, Event, Filter, LogFile, Merge, Want};
use nanolog_runtime::text::utc::rfc3339;
use nanolog_runtime::wire::totals::Tally;

use crate::cli::{Format, InfoArgs};

/// How a file ended, as `info` tells it.
enum State {
    /// Its last entry is an END: a dropped logger, a roll, an exit.
    Ended,
    /// No END, and the process that wrote it holds the log's lock: a
    /// writer is appending.
    Live,
    /// No END and no writer: killed or crashed.
    CutOff,
}

fn state(log: &LogFile) -> State {
    if log.is_complete() {
        return State::Ended;
    }
    if crate::inputs::writer_alive(log.path(), log.header().pid) == Some(true) {
        State::Live
    } else {
        State::CutOff
    }
}

/// What `info` counts of a file's records.
#[derive(Default)]
struct Counts {
    records: u64,
    per_thread: BTreeMap<u32, u64>,
    thread_drops: BTreeMap<u32, u64>,
    per_site: BTreeMap<u32, u64>,
    /// The earliest and latest record's time (`i64::MAX`, `i64::MIN` with
    /// none).
    first: i64,
    last: i64,
    dropped: u64,
    /// Records the writer lost (a failed write, its file deleted or cut
    /// back under it), apart from those dropped by a full ring.
    lost: u64,
    /// Records some of whose spans were lost to damage.
    spans_lost: u64,
    /// Records a recovery read from a killed writer's rings.
    recovered: u64,
}

/// A finished file's counts as its writer wrote them at its end (its TOTALS
/// entry), from a reading that left every indexed run of records out:
/// what `info` answers without reading the records. `None` when the file
/// has no TOTALS it can trust (see `LogFile::totals`).
fn from_totals(log: &LogFile) -> Option<Counts> {
    Some(counts_of(log, log.totals()?))
}

/// What a TOTALS entry `t` of `log` counts.
fn counts_of(log: &LogFile, t: &nanolog_runtime::reader::Totals) -> Counts {
    let mut c = Counts {
        records: t.records(),
        first: i64::MAX,
        last: i64::MIN,
        lost: t.lost,
        ..Counts::default()
    };
    if c.records > 0 {
        // (Times never go back in a file of a writer that counts: its pairs
        // only go forward, so the first and last tick are the first and
        // last time.)
        c.first = log.time_map().unix_ns(t.first_tick);
        c.last = log.time_map().unix_ns(t.last_tick);
    }
    for (id, s) in t.sites.iter().filter(|(_, s)| s.records > 0) {
        c.per_site.insert(id, s.records);
    }
    for (
        id,
        &Tally {
            records: r,
            dropped: d,
            ..
        },
    ) in t.threads.iter()
    {
        if r > 0 {
            c.per_thread.insert(id, r);
        }
        if d > 0 {
            c.thread_drops.insert(id, d);
            c.dropped += d;
        }
    }
    c
}

impl Counts {
    /// Adds what `o` counts (of records after those these count).
    fn add(&mut self, o: Counts) {
        self.records += o.records;
        for (k, v) in o.per_thread {
            *self.per_thread.entry(k).or_default() += v;
        }
        for (k, v) in o.thread_drops {
            *self.thread_drops.entry(k).or_default() += v;
        }
        for (k, v) in o.per_site {
            *self.per_site.entry(k).or_default() += v;
        }
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
        self.dropped += o.dropped;
        self.lost += o.lost;
        self.spans_lost += o.spans_lost;
        self.recovered += o.recovered;
    }
}

/// A file still being written, or a killed writer's: what its last
/// checkpoint counts and the records after it, read (`None`: it has no
/// checkpoint to trust; read it whole).
fn from_checkpoint(path: &std::path::Path) -> Option<(LogFile, Counts)> {
    let log = LogFile::open_for(path, &Want::since_checkpoint()).ok()?;
    let (from, t) = log.checkpoint()?;
    let mut c = counts_of(&log, t);
    crate::inputs::tell_warnings(&log);
    let files = [log];
    c.add(counted_from(&files, from));
    let [log] = files;
    Some((log, c))
}

/// Counts every record of `files` (one file), merged.
fn counted(files: &[LogFile]) -> Counts {
    counted_from(files, 0)
}

/// Counts the records of `files` (one file) at or after byte `min_offset`.
fn counted_from(files: &[LogFile], min_offset: usize) -> Counts {
    let mut c = Counts {
        first: i64::MAX,
        last: i64::MIN,
        ..Counts::default()
    };
    let filter = Filter {
        min_offset,
        ..Filter::default()
    };
    let mut merge = Merge::unsorted(files, filter).batches();
    let mut batch = Batch::with_capacity(1024);
    let mut go = true;
    while go {
        batch.clear();
        go = merge.fill(&mut batch, 1024);
        for &ev in batch.events() {
            match ev {
                Event::Record(r) => {
                    c.records += 1;
                    c.spans_lost += u64::from(r.spans_lost());
                    c.recovered += u64::from(r.recovered());
                    *c.per_thread.entry(r.thread()).or_default() += 1;
                    *c.per_site.entry(r.site().id).or_default() += 1;
                    let ns = r.unix_ns();
                    c.first = c.first.min(ns);
                    c.last = c.last.max(ns);
                }
                Event::Gap(g, _) if g.is_lost() => c.lost += g.count,
                Event::Gap(g, _) => {
                    c.dropped += g.count;
                    *c.thread_drops.entry(g.thread).or_default() += g.count;
                }
            }
        }
    }
    c
}

pub fn run(a: &InfoArgs) -> anyhow::Result<()> {
    // A finished file says what it holds at its end: read so, it costs its
    // dictionary and its end, not its records. Else every record is read.
    let mut files = Vec::new();
    crate::inputs::open_each_in(
        &crate::inputs::expand(std::slice::from_ref(&a.file))?,
        false,
        &mut files,
        |_, path| LogFile::open_for(path, &Want::nothing()),
        |files, log| {
            files.push(log);
            Ok(())
        },
    )?;
    let quick = files.first().and_then(from_totals);
    let (files, c) = match quick {
        Some(c) => (files, c),
        // Nothing was left out (an older writer's file, or one of small
        // writes): that reading is the whole one.
        None if files.first().is_some_and(LogFile::is_whole) => {
            crate::inputs::tell_warnings(&files[0]);
            let c = counted(&files);
            (files, c)
        }
        None => match files.first().and_then(|f| from_checkpoint(f.path())) {
            Some((log, c)) => (vec![log], c),
            None => {
                let files = crate::inputs::open_all(std::slice::from_ref(&a.file), true)?;
                let c = counted(&files);
                (files, c)
            }
        },
    };
    let log = &files[0];
    let h = log.header();
    let Counts {
        records,
        per_thread,
        thread_drops,
        per_site,
        first,
        last,
        dropped,
        lost,
        spans_lost,
        recovered,
    } = c;
    let mut s = String::new();
    let time = |ns: i64| {
        if ns == i64::MAX || ns == i64::MIN {
            "-".to_owned()
        } else {
            rfc3339(ns)
        }
    };
    match a.format {
        Format::Text => {
            let _ = writeln!(s, "file:            {}", log.path().display());
            let _ = writeln!(s, "format version:  {}", h.version);
            let _ = writeln!(s, "process id:      {}", h.pid);
            let _ = writeln!(
                s,
                "clock:           {:.0} ticks/s (base tick {} = {})",
                h.ticks_per_second,
                h.base_tick,
                rfc3339(h.base_unix_ns)
            );
            let _ = writeln!(s, "clock pairs:     {}", log.time_map().pairs().len());
            let _ = writeln!(s, "first record:    {}", time(first));
            let _ = writeln!(s, "last record:     {}", time(last));
            let _ = writeln!(s, "records:         {records}");
            let _ = writeln!(s, "dropped:         {dropped}");
            let _ = writeln!(s, "lost by writer:  {lost}");
            if spans_lost > 0 {
                let _ = writeln!(
                    s,
                    "spans lost:      {spans_lost} records (their SPAN entries damaged)"
                );
            }
            if recovered > 0 {
                let _ = writeln!(
                    s,
                    "recovered:       {recovered} records (from its killed writer's rings)"
                );
            }
            if let Some(seq) = log.seq() {
                let _ = writeln!(s, "number in set:   {seq}");
            }
            if let Some(host) = log.host() {
                let _ = writeln!(s, "host:            {host}");
            }
            let _ = writeln!(
                s,
                "state:           {}",
                match state(log) {
                    State::Ended => "ended cleanly",
                    State::Live => "live (a writer is appending)",
                    State::CutOff => {
                        "cut off (its writer was killed or crashed: the records up to the last whole entry)"
                    }
                }
            );
            if let Some(n) = log.rotated_to() {
                let _ = writeln!(s, "continues in:    {n}");
            }
            let b = log.block_stats();
            if b.lz4 + b.deflate > 0 {
                let _ = writeln!(
                    s,
                    "blocks:          {} ({} deflate, {} LZ4): {} bytes, {} inflated",
                    b.lz4 + b.deflate,
                    b.deflate,
                    b.lz4,
                    b.bytes,
                    b.raw
                );
            }
            let _ = writeln!(s, "\ncall sites:");
            let _ = writeln!(
                s,
                "{:>5} {:<5} {:>10}  {:<30} {:<20} format",
                "id", "level", "records", "file:line", "args"
            );
            for site in log.sites() {
                let kinds: Vec<&str> = site.kinds.iter().map(|k| k.name()).collect();
                let _ = writeln!(
                    s,
                    "{:>5} {:<5} {:>10}  {:<30} {:<20} {:?}",
                    site.id,
                    site.level.as_str(),
                    per_site.get(&site.id).copied().unwrap_or(0),
                    format!("{}:{}", site.file, site.line),
                    kinds.join(","),
                    site.format
                );
            }
            let _ = writeln!(s, "\nthreads:");
            let _ = writeln!(s, "{:>5} {:>10} {:>10}  name", "id", "records", "dropped");
            for t in log.threads() {
                let _ = writeln!(
                    s,
                    "{:>5} {:>10} {:>10}  {}",
                    t.id,
                    per_thread.get(&t.id).copied().unwrap_or(0),
                    thread_drops.get(&t.id).copied().unwrap_or(0),
                    t.name
                );
            }
        }
        Format::Json => {
            let blocks = log.block_stats();
            let _ = write!(
                s,
                "{{\"file\":{},\"version\":{},\"pid\":{},\"ticks_per_second\":{},\"base_tick\":{},\"base_unix_ns\":{},\"records\":{records},\"dropped\":{dropped},\"lost\":{lost},\"spans_lost\":{spans_lost},\"recovered\":{recovered},\"seq\":{},\"host\":{},\"complete\":{},\"state\":\"{}\",\"blocks\":{{\"lz4\":{},\"deflate\":{},\"bytes\":{},\"raw\":{}}},\"first_ts_ns\":{},\"last_ts_ns\":{},\"sites\":[",
                json(&log.path().to_string_lossy()),
                h.version,
                h.pid,
                h.ticks_per_second,
                h.base_tick,
                h.base_unix_ns,
                log.seq().map_or_else(|| "null".to_owned(), |s| s.to_string()),
                log.host().map_or_else(|| "null".to_owned(), json),
                log.is_complete(),
                match state(log) {
                    State::Ended => "ended",
                    State::Live => "live",
                    State::CutOff => "cut off",
                },
                blocks.lz4,
                blocks.deflate,
                blocks.bytes,
                blocks.raw,
                if records > 0 { first.to_string() } else { "null".into() },
                if records > 0 { last.to_string() } else { "null".into() },
            );
            for (i, site) in log.sites().enumerate() {
                let kinds: Vec<String> = site.kinds.iter().map(|k| json(k.name())).collect();
                let names: Vec<String> = (0..site.kinds.len())
                    .map(|i| site.name(i).map_or_else(|| "null".into(), json))
                    .collect();
                let _ = write!(
                    s,
                    "{}{{\"id\":{},\"level\":\"{}\",\"file\":{},\"line\":{},\"target\":{},\"fmt\":{},\"args\":[{}],\"names\":[{}],\"records\":{}}}",
                    if i > 0 { "," } else { "" },
                    site.id,
                    site.level.as_str(),
                    json(&site.file),
                    site.line,
                    json(&site.target),
                    json(&site.format),
                    kinds.join(","),
                    names.join(","),
                    per_site.get(&site.id).copied().unwrap_or(0)
                );
            }
            s.push_str("],\"threads\":[");
            for (i, t) in log.threads().enumerate() {
                let _ = write!(
                    s,
                    "{}{{\"id\":{},\"name\":{},\"records\":{},\"dropped\":{}}}",
                    if i > 0 { "," } else { "" },
                    t.id,
                    json(&t.name),
                    per_thread.get(&t.id).copied().unwrap_or(0),
                    thread_drops.get(&t.id).copied().unwrap_or(0)
                );
            }
            s.push_str("]}\n");
        }
    }
    io::stdout().lock().write_all(s.as_bytes())?;
    Ok(())
}

fn json(v: &str) -> String {
    let mut s = String::new();
    json_string(v, &mut s);
    s
}
