//! `nanolog decode`.

use std::io::{self, Write};

use anyhow::bail;
use nanolog_runtime::reader::{Batch, Event, Header, LogFile, Merge};

use crate::cli::DecodeArgs;
use crate::follow::{follow, Cursor, Sink, Start};
use crate::live::LiveEdge;
use crate::output::print::{print_merge, BATCH};
use crate::read_plan::{passes_grep, ReadPlan};

pub fn run(a: &DecodeArgs) -> anyhow::Result<()> {
    let plan = ReadPlan::from_args(a)?;
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
    plan: &ReadPlan,
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
    plan: &ReadPlan,
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
fn count_records(plan: &ReadPlan, merge: Merge<'_>) -> u64 {
    count_records_from(plan, merge, 0)
}

/// [`count_records`] of the records at or after tick `from`.
fn count_records_from(plan: &ReadPlan, merge: Merge<'_>, from: u64) -> u64 {
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

/// `decode -f`: the follower prints what it finds, up to the live edge
/// (records after a running writer's last clock pair wait for the next
/// one), each record with the time `decode` of the finished set prints.
struct PrintSink<'p, W: Write> {
    plan: &'p ReadPlan,
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
