//! `nanolog decode`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use nanolog_runtime::reader::{next_in_set, Event, Filter, Header, LogFile, Merge, Refresh};
use nanolog_runtime::Level;
use regex::Regex;

use crate::cli::{DecodeArgs, FilterArgs, Format};
use crate::output;

/// Options resolved from the command line.
pub(crate) struct DecodePlan {
    format: Format,
    sorted: bool,
    min_level: Option<Level>,
    since_ns: Option<i64>,
    until_ns: Option<i64>,
    /// `--thread` values: ids, or names resolved per set of files.
    threads: Vec<String>,
    pub(crate) grep: Option<Regex>,
    pub(crate) limit: Option<u64>,
    /// Text lines: colour the level.
    color: bool,
    /// Text lines: times in this zone.
    local: Option<jiff::tz::TimeZone>,
}

impl DecodePlan {
    fn from_args(a: &DecodeArgs) -> anyhow::Result<DecodePlan> {
        let mut plan = DecodePlan::new(a.format, !a.unsorted, &a.filters)?;
        plan.color = match a.color {
            crate::cli::Color::Always => true,
            crate::cli::Color::Never => false,
            crate::cli::Color::Auto => {
                use std::io::IsTerminal;
                io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        };
        if a.local {
            plan.local =
                Some(jiff::tz::TimeZone::try_system().map_err(|e| {
                    anyhow::anyhow!("--local: cannot find the local time zone: {e}")
                })?);
        }
        Ok(plan)
    }

    /// The plan of records in time order, in `format`, filtered by `f`.
    pub(crate) fn new(format: Format, sorted: bool, f: &FilterArgs) -> anyhow::Result<DecodePlan> {
        let min_level = f
            .level
            .as_deref()
            .map(str::parse::<Level>)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--level: {e}"))?;
        let now = jiff::Timestamp::now();
        let time = |s: &Option<String>, name: &str| -> anyhow::Result<Option<i64>> {
            s.as_deref()
                .map(|t| crate::time_args::parse_time(t, now))
                .transpose()
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))
        };
        let grep = f
            .grep
            .as_deref()
            .map(Regex::new)
            .transpose()
            .context("--grep: invalid regular expression")?;
        Ok(DecodePlan {
            format,
            sorted,
            min_level,
            since_ns: time(&f.since, "--since")?,
            until_ns: time(&f.until, "--until")?,
            threads: f.thread.clone(),
            grep,
            limit: f.limit,
            color: false,
            local: None,
        })
    }

    pub(crate) fn filter(&self, files: &[LogFile], min_offset: usize) -> Filter {
        Filter {
            min_level: self.min_level,
            since_ns: self.since_ns,
            until_ns: self.until_ns,
            threads: crate::thread_ids(&self.threads, files),
            site: None,
            // A gap has no message, so a --grep or --level query leaves it out.
            no_gaps: self.grep.is_some() || self.min_level.is_some(),
            min_offset,
        }
    }
}

pub fn run(a: &DecodeArgs) -> anyhow::Result<()> {
    let plan = DecodePlan::from_args(a)?;
    if a.follow {
        if a.files.len() != 1 {
            bail!("--follow takes exactly one file");
        }
        return follow(&plan, &a.files[0], a.cursor.as_deref());
    }
    let files = crate::open_all(&a.files, true)?;
    let stdout = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut printed = 0;
    print(&plan, &files, 0, &mut w, &mut printed)?;
    w.flush()?;
    Ok(())
}

/// Renders events into output text, one call per event.
struct Renderer {
    text: output::Text,
    json: output::Json,
    msg: String,
}

impl Renderer {
    fn new(plan: &DecodePlan) -> Renderer {
        Renderer {
            text: output::Text::new(plan.color, plan.local.clone()),
            json: Default::default(),
            msg: String::with_capacity(256),
        }
    }

    /// Appends the event's line to `out`; returns whether it was a record
    /// that passed `--grep`.
    fn event(&mut self, plan: &DecodePlan, ev: &Event<'_>, out: &mut String) -> bool {
        match ev {
            Event::Record(rec) => {
                match (&plan.grep, plan.format) {
                    (None, Format::Text) => {
                        output::text_record_direct(&mut self.text, rec, out, &mut self.msg)
                    }
                    (None, Format::Json) => {
                        output::json_record_direct(&mut self.json, rec, out, &mut self.msg)
                    }
                    (grep, format) => {
                        self.msg.clear();
                        rec.render(&mut self.msg);
                        if grep.as_ref().is_some_and(|re| !re.is_match(&self.msg)) {
                            return false;
                        }
                        match format {
                            Format::Text => {
                                output::text_record(&mut self.text, rec, &self.msg, out)
                            }
                            Format::Json => {
                                output::json_record(&mut self.json, rec, &self.msg, out)
                            }
                        }
                    }
                }
                true
            }
            Event::Gap(g, file) => {
                match plan.format {
                    Format::Text => output::text_gap(&mut self.text, g, file, out),
                    Format::Json => output::json_gap(&mut self.json, g, file, out),
                }
                false
            }
        }
    }
}

/// Prints the events of `files` from `min_offset` on; returns false once
/// `--limit` is reached.
pub(crate) fn print(
    plan: &DecodePlan,
    files: &[LogFile],
    min_offset: usize,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    let filter = plan.filter(files, min_offset);
    let mut merge = if plan.sorted {
        Merge::new(files, filter)
    } else {
        Merge::unsorted(files, filter)
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        - 1;
    // With --grep, how many records pass is known only after rendering, so
    // --limit needs the serial path.
    let more = if workers >= 1 && (plan.grep.is_none() || plan.limit.is_none()) {
        print_parallel(plan, &mut merge, workers, w, printed)?
    } else {
        print_serial(plan, &mut merge, w, printed)?
    };
    for e in merge.take_errors() {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    Ok(more)
}

fn print_serial(
    plan: &DecodePlan,
    merge: &mut Merge<'_>,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    let mut r = Renderer::new(plan);
    let mut line = String::with_capacity(1 << 17);
    for ev in merge.by_ref() {
        if plan.limit.is_some_and(|l| *printed >= l) {
            w.write_all(line.as_bytes())?;
            return Ok(false);
        }
        if r.event(plan, &ev, &mut line) {
            *printed += 1;
        }
        if line.len() >= 1 << 16 {
            w.write_all(line.as_bytes())?;
            line.clear();
        }
    }
    w.write_all(line.as_bytes())?;
    Ok(true)
}

const BATCH: usize = 4096;

/// A batch of events and the text rendered from it (the buffers go round
/// and round, so steady state allocates nothing).
type Job<'a> = (Vec<Event<'a>>, String);

/// A batch of output, in order: rendered here, or by worker `k`.
enum Slot<'a> {
    Local(Job<'a>, u64),
    Remote(usize),
}

fn render_job(r: &mut Renderer, plan: &DecodePlan, job: &mut Job<'_>) -> u64 {
    let (batch, out) = job;
    out.clear();
    let mut n = 0;
    for ev in batch.iter() {
        n += u64::from(r.event(plan, ev, out));
    }
    batch.clear();
    n
}

/// The merge runs on this thread; batches of events are rendered by worker
/// threads, or here when every worker is busy (so the work balances itself
/// whatever the cost of merging against rendering), and written back in
/// their original order.
fn print_parallel(
    plan: &DecodePlan,
    merge: &mut Merge<'_>,
    workers: usize,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    use std::collections::VecDeque;
    use std::sync::mpsc::{channel, sync_channel, TrySendError};
    std::thread::scope(|s| {
        let mut to = Vec::new();
        let mut from = Vec::new();
        for _ in 0..workers {
            let (tx, rx) = sync_channel::<Job<'_>>(1);
            let (rtx, rrx) = channel::<(Job<'_>, u64)>();
            s.spawn(move || {
                let mut r = Renderer::new(plan);
                for mut job in rx {
                    let n = render_job(&mut r, plan, &mut job);
                    if rtx.send((job, n)).is_err() {
                        break;
                    }
                }
            });
            to.push(tx);
            from.push(rrx);
        }
        let mut local = Renderer::new(plan);
        // Each slot with the number of records its batch holds (for --limit).
        let mut queue: VecDeque<(Slot<'_>, u64)> = VecDeque::new();
        let mut spare: Vec<Job<'_>> = Vec::new();
        let mut in_queue = 0u64;
        let mut next_worker = 0;
        let mut more = true;
        loop {
            let (mut batch, text) = spare
                .pop()
                .unwrap_or_else(|| (Vec::with_capacity(BATCH), String::with_capacity(BATCH * 96)));
            let mut in_batch = 0u64;
            while batch.len() < BATCH {
                if plan
                    .limit
                    .is_some_and(|l| *printed + in_queue + in_batch >= l)
                {
                    more = false;
                    break;
                }
                let Some(ev) = merge.next() else { break };
                in_batch += u64::from(matches!(ev, Event::Record(_)));
                batch.push(ev);
            }
            let last = batch.len() < BATCH;
            in_queue += in_batch;
            if batch.is_empty() {
                spare.push((batch, text));
            } else {
                let mut unsent = Some((batch, text));
                for k in 0..workers {
                    let idx = (next_worker + k) % workers;
                    let Some(b) = unsent.take() else { break };
                    match to[idx].try_send(b) {
                        Ok(()) => {
                            next_worker = idx + 1;
                            queue.push_back((Slot::Remote(idx), in_batch));
                        }
                        Err(TrySendError::Full(b) | TrySendError::Disconnected(b)) => {
                            unsent = Some(b)
                        }
                    }
                }
                if let Some(mut job) = unsent {
                    let n = render_job(&mut local, plan, &mut job);
                    queue.push_back((Slot::Local(job, n), in_batch));
                }
            }
            // Write what is ready at the front; wait only at the end or when
            // too much is queued.
            while let Some((front, recs)) = queue.front() {
                let recs = *recs;
                let (job, n) = match front {
                    Slot::Local(..) => match queue.pop_front() {
                        Some((Slot::Local(job, n), _)) => (job, n),
                        _ => break,
                    },
                    Slot::Remote(k) => {
                        let k = *k;
                        let got = if last || queue.len() > 2 * workers + 2 {
                            from[k].recv().ok()
                        } else {
                            from[k].try_recv().ok()
                        };
                        match got {
                            Some(r) => {
                                queue.pop_front();
                                r
                            }
                            None if last => {
                                queue.pop_front();
                                in_queue -= recs;
                                continue;
                            }
                            None => break,
                        }
                    }
                };
                in_queue -= recs;
                *printed += n;
                w.write_all(job.1.as_bytes())?;
                spare.push(job);
            }
            if last {
                break;
            }
        }
        drop(to);
        Ok(more)
    })
}

/// `--follow`: print what is there, then poll for growth. When the file
/// ends (it rolled, or a new run took the path), go on with the files of the
/// set that began after it, oldest first, then the live one: a follower
/// several rolls or a restart behind the writer prints every record once.
fn follow(plan: &DecodePlan, base: &Path, cursor: Option<&Path>) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut w = stdout.lock();
    let mut printed = 0u64;
    // The file being read, where it was opened, and how far it is printed.
    let mut cur: Option<(LogFile, PathBuf, usize)> = None;
    // The header of the last file read to its end: the next file is the
    // first of the set that began after it.
    let mut done: Option<Header> = None;
    // With no live file yet, the follower is there before the writer: every
    // file of the set that begins from now on is new (a writer that rolls
    // fast may have rolled several before the next look).
    let mut after_ns: Option<i64> = None;
    if std::fs::metadata(base).is_err() {
        after_ns = Some(newest_finished(base).unwrap_or(i64::MIN));
    }
    // A saved position: go on from it, in its file if the set still has
    // it, else from the first file that began after it.
    if let Some(c) = cursor.map(Cursor::load).transpose()?.flatten() {
        match find_in_set(base, c.pid, c.base_unix_ns) {
            Some((l, path)) => {
                let offset = c.offset.min(l.valid_len());
                let more = print(plan, std::slice::from_ref(&l), offset, &mut w, &mut printed)?;
                w.flush()?;
                if !more {
                    return Ok(());
                }
                let offset = l.valid_len();
                save_cursor(cursor, &l, offset)?;
                cur = Some((l, path, offset));
            }
            None => {
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: warning: the cursor's file is no longer in the set of {}; going on from the first file after it",
                    base.display()
                );
                after_ns = Some(c.base_unix_ns);
                done = None;
            }
        }
    }
    loop {
        let Some((log, path, offset)) = cur.as_mut() else {
            let next = match after_ns {
                Some(ns) => next_in_set(base, ns),
                None => base.to_path_buf(),
            };
            match LogFile::open_live(&next) {
                // The live file is still the one read to its end (the
                // writer has yet to start the next): wait for it.
                Ok(l) if Some(*l.header()) == done => {}
                Ok(l) => {
                    if done.is_some_and(|d| d.pid != l.header().pid) {
                        let _ = writeln!(
                            io::stderr(),
                            "nanolog: warning: {} holds another run from {}; following it",
                            base.display(),
                            next.display()
                        );
                    }
                    let more = print(plan, std::slice::from_ref(&l), 0, &mut w, &mut printed)?;
                    w.flush()?;
                    if !more {
                        break;
                    }
                    let offset = l.valid_len();
                    save_cursor(cursor, &l, offset)?;
                    cur = Some((l, next, offset));
                    continue;
                }
                // Not there yet, or its header is not written yet.
                Err(_) if std::fs::metadata(&next).map_or(true, |m| m.len() < 64) => {}
                Err(e) => return Err(e.into()),
            }
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let ended = match log.refresh()? {
            Refresh::Grew => {
                let files = std::slice::from_ref(&*log);
                let more = print(plan, files, *offset, &mut w, &mut printed)?;
                w.flush()?;
                if !more {
                    break;
                }
                if log.shrank() {
                    // Truncated while we read it: what was printed is good
                    // (records in lost bytes are errors, never printed);
                    // reopen and go on from there.
                    let _ = writeln!(
                        io::stderr(),
                        "nanolog: warning: {} shrank while being read",
                        path.display()
                    );
                    std::thread::sleep(Duration::from_millis(100));
                    reopen(log, path, offset)?;
                    continue;
                }
                *offset = log.valid_len();
                save_cursor(cursor, log, *offset)?;
                log.rotated_to().is_some()
            }
            // A finished file (not the live path) read to its end.
            Refresh::Unchanged => path != base,
            Refresh::Replaced => !reopen(log, path, offset)?,
        };
        if ended {
            done = Some(*log.header());
            after_ns = Some(log.header().base_unix_ns);
            cur = None;
            continue;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// A follower's saved position: the file (by its header's pid and start
/// time) and the offset printed up to.
struct Cursor {
    pid: u32,
    base_unix_ns: i64,
    offset: usize,
}

impl Cursor {
    /// The cursor saved at `path`; `None` if there is none yet.
    fn load(path: &Path) -> anyhow::Result<Option<Cursor>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let bad = || anyhow::anyhow!("{}: not a nanolog cursor", path.display());
        let mut f = text.split_whitespace();
        if f.next() != Some("nanolog-cursor-v1") {
            return Err(bad());
        }
        let mut num = || f.next().ok_or_else(bad);
        Ok(Some(Cursor {
            pid: num()?.parse().map_err(|_| bad())?,
            base_unix_ns: num()?.parse().map_err(|_| bad())?,
            offset: num()?.parse().map_err(|_| bad())?,
        }))
    }
}

/// Saves the position (`log` printed up to `offset`) at `path`, if a
/// cursor is kept: written beside it and renamed over it, so a reader (or
/// a kill) sees the old position or the new, never half of one.
fn save_cursor(path: Option<&Path>, log: &LogFile, offset: usize) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let h = log.header();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(
        &tmp,
        format!("nanolog-cursor-v1 {} {} {offset}\n", h.pid, h.base_unix_ns),
    )
    .and_then(|()| std::fs::rename(&tmp, path))
    .with_context(|| format!("cannot save the cursor {}", path.display()))
}

/// The file of the set at `base` whose header says `pid` and `base_unix_ns`
/// (the live file or a finished one), opened to follow.
fn find_in_set(base: &Path, pid: u32, base_unix_ns: i64) -> Option<(LogFile, PathBuf)> {
    let finished = nanolog_runtime::reader::finished_files(base).unwrap_or_default();
    let candidates = finished
        .into_iter()
        .map(|(p, _)| p)
        .chain([base.to_path_buf()]);
    for p in candidates {
        if let Ok(l) = LogFile::open_live(&p) {
            let h = l.header();
            if h.pid == pid && h.base_unix_ns == base_unix_ns {
                return Some((l, p));
            }
        }
    }
    None
}

/// When the newest finished file of the set at `base` began.
fn newest_finished(base: &Path) -> Option<i64> {
    let files = nanolog_runtime::reader::finished_files(base).ok()?;
    let (last, _) = files.last()?;
    Some(LogFile::open(last).ok()?.header().base_unix_ns)
}

/// The file at `path` was replaced or cut back: if it is the same file cut
/// back, reopen it and go on from what was printed (true); if another file
/// took the path, leave `log` as it is (false: it has ended).
fn reopen(log: &mut LogFile, path: &Path, offset: &mut usize) -> anyhow::Result<bool> {
    match LogFile::open_live(path) {
        Ok(l) if l.header() == log.header() => {
            *offset = (*offset).min(l.valid_len());
            *log = l;
            Ok(true)
        }
        Ok(_) => Ok(false),
        // Gone, or not yet written again: the file read so far has ended.
        Err(_) => Ok(false),
    }
}
