//! The reading plan: what `decode` and `export` read, resolved from the
//! command line's filters (level, window, threads, `--grep`, `--trace`,
//! `--limit`) and how records are shown (format, colour, zone).

use std::io;

use anyhow::Context;
use nanolog_runtime::reader::{Filter, Record, SiteEntry, TraceContext};
use nanolog_runtime::Level;
use regex::Regex;

use crate::cli::{DecodeArgs, FilterArgs, Format};

/// Options resolved from the command line.
pub(crate) struct ReadPlan {
    pub(crate) format: Format,
    pub(crate) sorted: bool,
    min_level: Option<Level>,
    pub(crate) since_ns: Option<i64>,
    pub(crate) until_ns: Option<i64>,
    /// `--thread` values: ids, or names resolved per set of files.
    threads: Vec<String>,
    pub(crate) grep: Option<Regex>,
    /// `--trace`: only the records of this trace id.
    pub(crate) trace: Option<[u8; 16]>,
    pub(crate) limit: Option<u64>,
    /// Text lines: colour the level.
    pub(crate) color: bool,
    /// Text lines: times in this zone.
    pub(crate) local: Option<jiff::tz::TimeZone>,
}

impl ReadPlan {
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

    /// What the inputs of a set are opened wanting: [`ReadPlan::want`]
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

    pub(crate) fn from_args(a: &DecodeArgs) -> anyhow::Result<ReadPlan> {
        let mut plan = ReadPlan::new(a.format, !a.unsorted, &a.filters)?;
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
    pub(crate) fn new(format: Format, sorted: bool, f: &FilterArgs) -> anyhow::Result<ReadPlan> {
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
        Ok(ReadPlan {
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

/// `--grep` decided per call site where it can be (`grep.rs`): records of
/// a site that cannot match are stepped over unread, and the writes of a
/// finished file that hold none of the sites that may match are not read.
pub(crate) fn site_may_match(re: Regex) -> impl Fn(&SiteEntry) -> bool + Send + Sync + 'static {
    let grep = crate::grep::Grep::new(re);
    move |s: &SiteEntry| grep.site_may_match(s)
}

/// Whether `rec` passes `--trace` and `--grep` (its message rendered
/// into `msg`).
pub(crate) fn passes_grep(plan: &ReadPlan, rec: &Record<'_>, msg: &mut String) -> bool {
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
