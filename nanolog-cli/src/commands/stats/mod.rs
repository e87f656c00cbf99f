//! `nanolog stats`: aggregations computed from the binary values, without
//! formatting, split across cores by extent.
//!
//! This file runs it; the plan and its rows are [`plan`], reading the
//! records [`scan`], printing [`print`], the histogram [`histogram`].

mod histogram;
mod percentile;
mod plan;
mod print;
mod scan;

use histogram::*;
use plan::*;
use print::*;
use scan::*;

use std::io::{self, Write};

use anyhow::{bail, Context};

use crate::time_args::parse_duration_ns;
use nanolog_runtime::reader::{LogFile, Want as Reading};
use regex::Regex;

use crate::cli::{GroupBy, StatsArgs};

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
        // A finished file whose writer counted what is asked is answered
        // from its end (its TOTALS entry), its records left unread; one
        // without its END (live, or its writer killed) from its last
        // checkpoint and the records after it.
        let from_end = plan.counted_by_writer();
        let pairs = plan.needs_pairs();
        let mut state = (&mut plan, &mut totals, None, Source::Records);
        crate::inputs::open_each_in(
            &paths,
            true,
            &mut state,
            |(plan, totals, current, source), path| {
                *current = None;
                *source = Source::Records;
                // The file's dictionary and end, its records left out.
                let mut head = (from_end || plan.site_re.is_some())
                    .then(|| LogFile::open_for(path, &Reading::nothing()).ok())
                    .flatten();
                if from_end {
                    if let Some(log) = head.take_if(|h| answered_by(h, pairs)) {
                        *source = Source::End;
                        return Ok(log);
                    }
                    if head.as_ref().is_some_and(|h| !h.is_complete()) {
                        if let Ok(log) = LogFile::open_for(path, &Reading::since_checkpoint()) {
                            if let Some(from) = answered_from(&log, pairs) {
                                *source = Source::Checkpoint(from);
                                return Ok(log);
                            }
                        }
                    }
                }
                // `--site`: the writes whose index names none of the sites
                // it selects there are left out (of a finished file: a
                // live one may define another such site meanwhile).
                let mut want = Reading::default();
                let finished = head.filter(|h| h.is_complete());
                if let (Some(re), Some(h)) = (&plan.site_re, &finished) {
                    let ids = h.sites().filter(|s| re.is_match(&s.format)).map(|s| s.id);
                    want.sites = Some(ids.collect());
                }
                LogFile::open_streamed_for(path, &want, |wave| {
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
            |(plan, totals, current, source), f| {
                let fi = match current.take() {
                    Some(fi) => {
                        plan.refresh(fi, &f);
                        fi
                    }
                    None => plan.add(&f),
                };
                match *source {
                    Source::End => {
                        if let Some(t) = f.totals() {
                            totals.counted(plan, fi, &f, t);
                        }
                    }
                    Source::Checkpoint(from) => {
                        if let Some((_, t)) = f.checkpoint() {
                            totals.counted(plan, fi, &f, t);
                        }
                        let after = After {
                            file: &f,
                            first: f.extents_before(from),
                        };
                        totals.scan(plan, std::slice::from_ref(&after), fi);
                        totals.finish_file(fi, &f);
                    }
                    Source::Records => totals.finish_file(fi, &f),
                }
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
        write_arg_summary(a, n, &values, sum, &mut out).context(
            "the argument's values, written out to a temporary file, could not be read back",
        )?;
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

/// How `stats` reads a file.
#[derive(Clone, Copy)]
enum Source {
    /// Every record (as it is indexed).
    Records,
    /// Its writer's counts at its end.
    End,
    /// Its writer's counts at its last checkpoint, and the records after
    /// it, which begin at this byte.
    Checkpoint(usize),
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
