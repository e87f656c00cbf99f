//! `nanolog decode`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use nanolog_runtime::reader::time::parse_rfc3339;
use nanolog_runtime::reader::{Event, Filter, LogFile, Merge};
use nanolog_runtime::Level;
use regex::Regex;

use crate::cli::{DecodeArgs, Format};
use crate::output;

/// Options resolved from the command line.
struct Plan {
    format: Format,
    sorted: bool,
    min_level: Option<Level>,
    since_ns: Option<i64>,
    until_ns: Option<i64>,
    threads: Option<Vec<u32>>,
    grep: Option<Regex>,
    limit: Option<u64>,
}

impl Plan {
    fn from_args(a: &DecodeArgs) -> anyhow::Result<Plan> {
        let min_level = a
            .level
            .as_deref()
            .map(str::parse::<Level>)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--level: {e}"))?;
        let time = |s: &Option<String>, name: &str| -> anyhow::Result<Option<i64>> {
            s.as_deref()
                .map(parse_rfc3339)
                .transpose()
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))
        };
        let grep = a
            .grep
            .as_deref()
            .map(Regex::new)
            .transpose()
            .context("--grep: invalid regular expression")?;
        Ok(Plan {
            format: a.format,
            sorted: !a.unsorted,
            min_level,
            since_ns: time(&a.since, "--since")?,
            until_ns: time(&a.until, "--until")?,
            threads: (!a.thread.is_empty()).then(|| a.thread.clone()),
            grep,
            limit: a.limit,
        })
    }

    fn filter(&self, min_offset: usize) -> Filter {
        Filter {
            min_level: self.min_level,
            since_ns: self.since_ns,
            until_ns: self.until_ns,
            threads: self.threads.clone(),
            site: None,
            // A gap has no message, so a --grep or --level query leaves it out.
            no_gaps: self.grep.is_some() || self.min_level.is_some(),
            min_offset,
        }
    }
}

pub fn run(a: &DecodeArgs) -> anyhow::Result<()> {
    let plan = Plan::from_args(a)?;
    if a.follow {
        if a.files.len() != 1 {
            bail!("--follow takes exactly one file");
        }
        return follow(&plan, &a.files[0]);
    }
    let files = crate::open_all(&a.files, true)?;
    let stdout = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut printed = 0;
    print(&plan, &files, 0, &mut w, &mut printed)?;
    w.flush()?;
    Ok(())
}

/// Prints the events of `files` from `min_offset` on; returns false once
/// `--limit` is reached.
fn print(
    plan: &Plan,
    files: &[LogFile],
    min_offset: usize,
    w: &mut impl Write,
    printed: &mut u64,
) -> anyhow::Result<bool> {
    let filter = plan.filter(min_offset);
    let mut merge = if plan.sorted {
        Merge::new(files, filter)
    } else {
        Merge::unsorted(files, filter)
    };
    let mut msg = String::with_capacity(256);
    let mut line = String::with_capacity(1 << 17);
    let mut more = true;
    for ev in merge.by_ref() {
        if plan.limit.is_some_and(|l| *printed >= l) {
            more = false;
            break;
        }
        match ev {
            Event::Record(rec) => {
                msg.clear();
                rec.render(&mut msg);
                if plan.grep.as_ref().is_some_and(|re| !re.is_match(&msg)) {
                    continue;
                }
                match plan.format {
                    Format::Text => output::text_record(&rec, &msg, &mut line),
                    Format::Json => output::json_record(&rec, &msg, &mut line),
                }
                *printed += 1;
            }
            Event::Gap(g, file) => match plan.format {
                Format::Text => output::text_gap(&g, file, &mut line),
                Format::Json => output::json_gap(&g, file, &mut line),
            },
        }
        if line.len() >= 1 << 16 {
            w.write_all(line.as_bytes())?;
            line.clear();
        }
    }
    w.write_all(line.as_bytes())?;
    for e in merge.take_errors() {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    Ok(more)
}

/// `--follow`: print what is there, then poll for growth; move on to the
/// next file when the log rotates.
fn follow(plan: &Plan, first: &Path) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut w = stdout.lock();
    let mut path: PathBuf = first.to_path_buf();
    let mut offset = 0usize;
    let mut seen_len = 0u64;
    let mut printed = 0u64;
    loop {
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if len != seen_len && len > 0 {
            seen_len = len;
            let log = match LogFile::open(&path) {
                Ok(l) => l,
                // A file just created may not hold its header yet.
                Err(_) if len < 64 => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let files = [log];
            if !print(plan, &files, offset, &mut w, &mut printed)? {
                break;
            }
            w.flush()?;
            offset = files[0].valid_len();
            if let Some(next) = files[0].rotated_to() {
                path = path.with_file_name(next);
                offset = 0;
                seen_len = 0;
                continue;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
