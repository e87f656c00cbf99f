//! `nanolog decode`.

use std::io::{self, Write};

use anyhow::{bail, Context};
use nanolog_runtime::reader::{
    Batch, Batches, Event, Filter, Header, LogFile, Merge, Record, SiteEntry, TraceContext,
};
use nanolog_runtime::Level;
use regex::Regex;

use crate::cli::{DecodeArgs, FilterArgs, Format};
use crate::follow::{follow, Cursor, Sink, Start};
use crate::live::LiveEdge;
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
    /// `--trace`: only the records of this trace id.
    pub(crate) trace: Option<[u8; 16]>,
    pub(crate) limit: Option<u64>,
    /// Text lines: colour the level.
    color: bool,
    /// Text lines: times in this zone.
    local: Option<jiff::tz::TimeZone>,
}

impl DecodePlan {
    /// What its filters want of the inputs' records, for the files' index
    /// (`LogFile::open_for`): the time window and the level.
    pub(crate) fn want(&self) -> nanolog_runtime::reader::Want {
        let mut w =
            nanolog_runtime::reader::Want::new(self.since_ns, self.until_ns, self.min_level);
        // `--thread ID`s: the runs of none of them are left out. (Names:
        // see `inputs_want`.)
        if !self.threads.is_empty() {
            w.threads = self
                .threads
                .iter()
                .map(|t| t.parse::<u32>().ok())
                .collect::<Option<Vec<u32>>>();
        }
        w
    }

    /// What the inputs of a set are opened wanting: [`DecodePlan::want`]
    /// with `last` (`-n` alone: see `Want::last`), `--thread`'s names, each
    /// looked up in each file's dictionary as it is opened (a thread's id
    /// is its run's), their ids added to its `--thread` ids, and
    /// `--trace`'s contexts there (see `inputs::open_log`).
    pub(crate) fn inputs_want(&self, last: Option<u64>) {
        let mut w = self.want();
        w.last = last;
        let per_file = crate::inputs::PerFile {
            thread_names: crate::inputs::thread_names(&self.threads),
            trace: self.trace,
            sites: self
                .grep
                .clone()
                .map(|re| Box::new(site_may_match(re)) as crate::inputs::SiteTest),
        };
        if per_file.thread_names.is_some() {
            w.threads = Some(crate::inputs::thread_ids(&self.threads).unwrap_or_default());
        }
        if !w.all() || per_file.trace.is_some() || per_file.sites.is_some() {
            crate::inputs::want(w, per_file);
        }
    }

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
        let trace = f
            .trace
            .as_deref()
            .map(|t| {
                TraceContext::parse_trace_id(t.trim()).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--trace: {t:?} is not a trace id (32 hex digits, not all zeros)"
                    )
                })
            })
            .transpose()?;
        Ok(DecodePlan {
            format,
            sorted,
            trace,
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

    /// The reader's filter for its options, entries from `min_offset` on
    /// (`--thread` names are looked up in each file: see
    /// [`Filter::thread_names`]).
    pub(crate) fn filter_in(&self, min_offset: usize) -> Filter {
        Filter {
            min_level: self.min_level,
            since_ns: self.since_ns,
            until_ns: self.until_ns,
            threads: crate::inputs::thread_ids(&self.threads),
            thread_names: crate::inputs::thread_names(&self.threads),
            site: self
                .grep
                .clone()
                .map(|re| Box::new(site_may_match(re)) as Box<dyn Fn(&SiteEntry) -> bool>),
            // A gap has no message, so a --grep or --level query leaves it out.
            no_gaps: self.grep.is_some() || self.min_level.is_some() || self.trace.is_some(),
            min_offset,
            max_offset: None,
        }
    }

    /// Whether `rec` is of the `--trace` asked for (every record without one).
    pub(crate) fn in_trace(&self, rec: &Record<'_>) -> bool {
        self.trace
            .is_none_or(|id| rec.trace_context().is_some_and(|t| t.trace_id == id))
    }
}

pub fn run(a: &DecodeArgs) -> anyhow::Result<()> {
    let plan = DecodePlan::from_args(a)?;
    // The writes whose index says they hold no record of the window or
    // level (or none of the last `-n`) are not read.
    let mut want = plan.want();
    // `-n N` alone: the runs older than the last ones holding N records are
    // left out (a filter would make a run's count of all its records
    // say nothing of how many pass).
    let filtered =
        !want.all() || !a.filters.thread.is_empty() || plan.grep.is_some() || plan.trace.is_some();
    if !filtered {
        want.last = a.lines;
    }
    if a.follow {
        if a.files.len() != 1 {
            bail!("--follow takes exactly one file");
        }
        let mut sink = PrintSink {
            plan: &plan,
            w: io::stdout().lock(),
            printed: 0,
            live: LiveEdge::new(&a.files[0]),
            taken: 0,
            tail: a.lines,
        };
        let cursor = Cursor::new(a.cursor.as_deref(), &a.files[0]);
        // `-f -n N` (or a window, a level): the live file as it is opened
        // is read from its last writes that hold the answer; a saved
        // position goes on from where it was instead.
        let first = Some(want).filter(|w| !w.all() && a.cursor.is_none());
        return follow(&a.files[0], &cursor, Start::LiveFile, first, &mut sink);
    }
    // (`-n` alone: from e014745 on, 2026-11-29, to the commit after
    // d179320, its `last` was left out here, and a file was read whole.)
    plan.inputs_want(want.last);
    let stdout = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut printed = 0;
    if let Some(n) = a.lines {
        if let Some(mut last) = last_files(&plan, a, n)? {
            print_last(&plan, &mut last, n, &mut w, &mut printed)?;
            w.flush()?;
            return Ok(());
        }
    }
    let mut inputs = crate::window::open(&a.files)?;
    let threads = inputs.threads();
    crate::inputs::warn_unknown_threads(&a.filters.thread, &threads);
    if let Some(n) = a.lines {
        print_last(&plan, &mut inputs, n, &mut w, &mut printed)?;
        w.flush()?;
        return Ok(());
    }
    inputs.merges(
        plan.sorted,
        || plan.filter_in(0),
        |merge| print_merge(&plan, merge, &mut 0, &mut w, &mut printed),
    )?;
    w.flush()?;
    Ok(())
}

/// `-n N`: the last `n` records of the inputs that pass the filters, in the
/// order of the read. The groups of files are counted from the last one
/// back until they hold `n` records (a rolled set reads its last files
/// only), then printed from there, the records before the last `n`
/// merged but not rendered.
fn print_last(
    plan: &DecodePlan,
    inputs: &mut crate::window::Inputs,
    n: u64,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<()> {
    if n == 0 {
        return Ok(());
    }
    let groups = inputs.group_count(plan.sorted);
    let (mut first, mut held) = (groups, 0u64);
    // (Files open all at once are one group: their records are counted in
    // file order, which a count does not need sorted. A set read a window
    // at a time is counted by its sorted groups.)
    let count_sorted = plan.sorted && !matches!(inputs, crate::window::Inputs::All(_));
    while first > 0 && held < n {
        first -= 1;
        held += inputs.merge_group(count_sorted, first, plan.filter_in(0), |m| {
            count_records(plan, m)
        });
    }
    let mut skip = held.saturating_sub(n);
    for g in first..groups {
        let filter = plan.filter_in(0);
        let more = inputs.merge_group(plan.sorted, g, filter, |m| {
            print_merge(plan, m, &mut skip, w, printed)
        })?;
        if !more {
            break;
        }
    }
    Ok(())
}

/// `-n N` of files of one writer: only the newest files that hold the last
/// `n` records, opened from the newest back; `None` when the rule below
/// does not apply (one file, files of several writers, `--thread`,
/// `--since`/`--until` or `--unsorted`), and every file is read as before.
///
/// A process runs one logger at a time, so the files of one writer's clock
/// (its pid and tick rate: [`LogFile::clock_domain`]) were written one
/// after another: every record of a file is older than the tick at which
/// a later file was begun (its header's base tick; the later file may
/// hold older records too, drained after the roll). So once the records
/// at or after their own file's base tick, counted from the newest file
/// back, are `n`, no older file holds one of the last `n`, and the older
/// files are not opened (`decode -n 20` of a 277 MB set of 5 files opened
/// all 5 to learn their spans first). The records printed are at or after
/// the oldest chosen file's base tick, so the clock pairs their times are
/// read by are the chosen files' own, as the whole set's merge reads them;
/// but for one case: a wall clock stepped back inside an older file, which
/// the whole set's map holds level until it catches up, and this one does
/// not see.
fn last_files(
    plan: &DecodePlan,
    a: &DecodeArgs,
    n: u64,
) -> anyhow::Result<Option<crate::window::Inputs>> {
    // (A time window is read by every file's clock over the whole set: a
    // record at its edge is not counted by one file's alone.)
    let windowed = plan.since_ns.is_some() || plan.until_ns.is_some();
    if !plan.sorted || !a.filters.thread.is_empty() || windowed {
        return Ok(None);
    }
    let paths = crate::inputs::expand_quietly(&a.files);
    if paths.len() < 2 {
        return Ok(None);
    }
    let Some(headers) = paths
        .iter()
        .map(|p| nanolog_runtime::reader::read_header(p))
        .collect::<Option<Vec<Header>>>()
    else {
        return Ok(None);
    };
    let domain = |h: &Header| (h.pid, h.ticks_per_second.to_bits());
    if headers.iter().any(|h| domain(h) != domain(&headers[0])) {
        return Ok(None);
    }
    let mut newest_first: Vec<usize> = (0..paths.len()).collect();
    newest_first.sort_by_key(|&i| std::cmp::Reverse(headers[i].base_tick));
    let mut chosen = Vec::new();
    let mut held = 0u64;
    for i in newest_first {
        // (A file gone since its header was read, retention racing the
        // read: every file is read as before, which skips it with a word.)
        let Ok(mut opened) = crate::inputs::open_expanded(std::slice::from_ref(&paths[i]), true)
        else {
            return Ok(None);
        };
        let Some(file) = opened.pop() else { continue };
        let filter = plan.filter_in(0);
        held += count_records_from(
            plan,
            Merge::unsorted(std::slice::from_ref(&file), filter),
            headers[i].base_tick,
        );
        chosen.push((i, file));
        if held >= n {
            break;
        }
    }
    // In the order given (the merge's order among files of one writer).
    chosen.sort_by_key(|&(i, _)| i);
    Ok(Some(crate::window::Inputs::All(
        chosen.into_iter().map(|(_, f)| f).collect(),
    )))
}

/// The records `merge` yields that pass the filters, `--grep` included.
fn count_records(plan: &DecodePlan, merge: Merge<'_>) -> u64 {
    count_records_from(plan, merge, 0)
}

/// [`count_records`] of the records at or after tick `from`.
fn count_records_from(plan: &DecodePlan, merge: Merge<'_>, from: u64) -> u64 {
    let mut merge = merge.batches();
    let mut batch = Batch::with_capacity(BATCH);
    let mut msg = String::new();
    let mut n = 0;
    loop {
        batch.clear();
        let more = merge.fill(&mut batch, BATCH);
        for ev in batch.events() {
            if let Event::Record(rec) = ev {
                n += u64::from(rec.tick() >= from && passes_grep(plan, rec, &mut msg));
            }
        }
        if !more {
            break;
        }
    }
    // (Its warnings are said when it is printed, if it is.)
    let _ = merge.take_errors();
    n
}

/// `--grep` decided per call site where it can be (`grep.rs`): records of
/// a site that cannot match are stepped over unread, and the writes of a
/// finished file that hold none of the sites that may match are not read.
fn site_may_match(re: Regex) -> impl Fn(&SiteEntry) -> bool + Send + Sync + 'static {
    let grep = crate::grep::Grep::new(re);
    move |s: &SiteEntry| grep.site_may_match(s)
}

/// Whether `rec` passes `--trace` and `--grep` (its message rendered
/// into `msg`).
fn passes_grep(plan: &DecodePlan, rec: &Record<'_>, msg: &mut String) -> bool {
    if !plan.in_trace(rec) {
        return false;
    }
    match &plan.grep {
        None => true,
        Some(re) => {
            msg.clear();
            rec.render(msg);
            re.is_match(msg)
        }
    }
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
                if !plan.in_trace(rec) {
                    return false;
                }
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

/// Prints the events `merge` yields; returns false once `--limit` is
/// reached.
pub(crate) fn print_merge(
    plan: &DecodePlan,
    merge: Merge<'_>,
    skip: &mut u64,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    // Read in batches: a large file's blocks are inflated as the merge
    // reaches them, and let go once printed.
    let mut merge = merge.batches();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        - 1;
    // With --grep or --trace, how many records pass is known only after
    // rendering, so --limit needs the serial path; so does `-n`'s skip.
    let filtered = plan.grep.is_some() || plan.trace.is_some();
    let more = if workers >= 1 && (!filtered || plan.limit.is_none()) && *skip == 0 {
        print_parallel(plan, &mut merge, workers, w, printed)?
    } else {
        print_serial(plan, &mut merge, skip, w, printed)?
    };
    for e in merge.take_errors() {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    Ok(more)
}

/// Prints the events after the first `skip` records (`-n`: the events
/// among those are not printed; `skip` is counted down).
fn print_serial(
    plan: &DecodePlan,
    merge: &mut Batches<'_>,
    skip: &mut u64,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    let mut r = Renderer::new(plan);
    let mut line = String::with_capacity(1 << 17);
    let mut msg = String::new();
    let mut batch = Batch::with_capacity(1024);
    loop {
        batch.clear();
        let more = merge.fill(&mut batch, 1024);
        for ev in batch.events() {
            if plan.limit.is_some_and(|l| *printed >= l) {
                w.write_all(line.as_bytes())?;
                return Ok(false);
            }
            if *skip > 0 {
                if let Event::Record(rec) = ev {
                    *skip -= u64::from(passes_grep(plan, rec, &mut msg));
                }
                continue;
            }
            if r.event(plan, ev, &mut line) {
                *printed += 1;
            }
            if line.len() >= 1 << 16 {
                w.write_all(line.as_bytes())?;
                line.clear();
            }
        }
        if !more {
            break;
        }
    }
    w.write_all(line.as_bytes())?;
    Ok(true)
}

const BATCH: usize = 4096;

/// A batch of events and the text rendered from it (the buffers go round
/// and round, so steady state allocates nothing).
type Job<'a> = (Batch<'a>, String);

/// A batch of output, in order: rendered here, or by worker `k`.
enum Slot<'a> {
    Local(Job<'a>, u64),
    Remote(usize),
}

fn render_job(r: &mut Renderer, plan: &DecodePlan, job: &mut Job<'_>) -> u64 {
    let (batch, out) = job;
    out.clear();
    let mut n = 0;
    for ev in batch.events() {
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
    merge: &mut Batches<'_>,
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
            let (mut batch, text) = spare.pop().unwrap_or_else(|| {
                (
                    Batch::with_capacity(BATCH),
                    String::with_capacity(BATCH * 96),
                )
            });
            // Up to BATCH events, and no more records than --limit leaves.
            let room = plan
                .limit
                .map_or(BATCH as u64, |l| l.saturating_sub(*printed + in_queue))
                .min(BATCH as u64) as usize;
            let ended = room == 0 || !merge.fill(&mut batch, room);
            let in_batch = batch
                .events()
                .iter()
                .filter(|ev| matches!(ev, Event::Record(_)))
                .count() as u64;
            if plan
                .limit
                .is_some_and(|l| *printed + in_queue + in_batch >= l)
            {
                more = false;
            }
            let last = ended || !more;
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

/// `decode -f`: the follower prints what it finds, up to the live edge
/// (records after a running writer's last clock pair wait for the next
/// one), each record with the time `decode` of the finished set prints.
struct PrintSink<'p, W: Write> {
    plan: &'p DecodePlan,
    w: W,
    printed: u64,
    live: LiveEdge,
    /// How far the last `take` printed its file.
    taken: usize,
    /// `-n N`: the first `take` prints only its last N records.
    tail: Option<u64>,
}

impl<W: Write> Sink for PrintSink<'_, W> {
    fn take(&mut self, log: &LogFile, from: usize, cursor: &Cursor) -> anyhow::Result<bool> {
        let end = self.live.edge(log);
        self.taken = end.max(from);
        if from >= end {
            return Ok(true);
        }
        let files = std::slice::from_ref(log);
        let clock = self.live.clock(log, from);
        let plan = self.plan;
        let merge = || {
            let mut filter = plan.filter_in(from);
            filter.max_offset = Some(end);
            let mut merge = if plan.sorted {
                Merge::new(files, filter)
            } else {
                Merge::unsorted(files, filter)
            };
            merge.set_clock(0, clock.clone());
            merge
        };
        // `-n`: the last N of what is there, then everything that follows.
        let mut skip = self
            .tail
            .take()
            .map_or(0, |n| count_records(self.plan, merge()).saturating_sub(n));
        let more = print_merge(
            self.plan,
            merge(),
            &mut skip,
            &mut self.w,
            &mut self.printed,
        )?;
        self.w.flush()?;
        if more {
            cursor.save(log, end)?;
        }
        Ok(more)
    }

    fn taken_to(&self, log: &LogFile) -> usize {
        self.taken.min(log.valid_len())
    }
}
