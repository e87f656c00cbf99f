//! Records in time order printed as text or JSON lines: rendered on this
//! thread, or by worker threads while the merge runs here, and written in
//! order.

use std::io::{self, Write};

use nanolog_runtime::reader::{Batch, Batches, Event, Merge};

use crate::cli::Format;
use crate::output;
use crate::read_plan::{passes_grep, ReadPlan};

/// Renders events into output text, one call per event.
struct Renderer {
    text: output::Text,
    json: output::Json,
    msg: String,
}

impl Renderer {
    fn new(plan: &ReadPlan) -> Renderer {
        Renderer {
            text: output::Text::new(plan.color, plan.local.clone()),
            json: Default::default(),
            msg: String::with_capacity(256),
        }
    }

    /// Appends the event's line to `out`; returns whether it was a record
    /// that passed `--grep`.
    fn event(&mut self, plan: &ReadPlan, ev: &Event<'_>, out: &mut String) -> bool {
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
    plan: &ReadPlan,
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
    plan: &ReadPlan,
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

/// Events a batch of the merge holds.
pub(crate) const BATCH: usize = 4096;

/// A batch of events and the text rendered from it (the buffers go round
/// and round, so steady state allocates nothing).
type Job<'a> = (Batch<'a>, String);

/// A batch of output, in order: rendered here, or by worker `k`.
enum Slot<'a> {
    Local(Job<'a>, u64),
    Remote(usize),
}

fn render_job(r: &mut Renderer, plan: &ReadPlan, job: &mut Job<'_>) -> u64 {
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
    plan: &ReadPlan,
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
