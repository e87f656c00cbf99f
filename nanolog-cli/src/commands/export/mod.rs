//! `nanolog export`: the records, in time order, as Apache Parquet (one row
//! per record, the columns README.md lists) or as the JSON lines of
//! `decode --format json`, for analytics engines.
//!
//! Parquet is written in row groups: records are gathered into Arrow column
//! builders a batch at a time and handed to the writer, which encodes and
//! flushes a row group once it holds `--row-group` rows, so memory stays
//! bounded by about one row group whatever the size of the input.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use anyhow::Context;

use crate::cli::{ExportArgs, ExportFormat, Format};
use crate::output::print::print_merge;
use crate::read_plan::ReadPlan;

#[cfg(feature = "parquet")]
mod parquet;

pub fn run(a: &ExportArgs) -> anyhow::Result<()> {
    let format = output_format(a)?;
    // The writes whose index says they hold no record of the window or
    // level are not read.
    ReadPlan::new(Format::Json, true, &a.filters)?.inputs_want(None);
    let mut inputs = crate::window::open(&a.files)?;
    let threads = inputs.threads();
    crate::inputs::warn_unknown_threads(&a.filters.thread, &threads);
    #[cfg(feature = "parquet")]
    if let Some(by) = a.partition_by {
        let plan = ReadPlan::new(Format::Json, true, &a.filters)?;
        let summary = parquet::parquet(
            a,
            &plan,
            &mut inputs,
            parquet::Output::Partitions(a.output.clone(), by),
        )
        .with_context(|| format!("cannot write under {}", a.output.display()))?;
        return report(a, &summary.into());
    }
    // `-o exports/host1.parquet` as the logger and --partition-by do: a
    // missing directory is made, as `mkdir -p` would.
    if let Some(dir) = a.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    let out =
        File::create(&a.output).with_context(|| format!("cannot create {}", a.output.display()))?;
    let summary = match format {
        ExportFormat::Jsonl => {
            let plan = ReadPlan::new(Format::Json, true, &a.filters)?;
            let mut w = BufWriter::with_capacity(1 << 16, out);
            let mut printed = 0;
            inputs.merges(
                true,
                || plan.filter_in(0),
                |merge| print_merge(&plan, merge, &mut 0, &mut w, &mut printed),
            )?;
            w.flush()
                .with_context(|| format!("cannot write {}", a.output.display()))?;
            // Gaps are lines here, as decode prints them.
            Summary {
                rows: printed,
                dropped: 0,
                partitions: 0,
            }
        }
        #[cfg(feature = "parquet")]
        ExportFormat::Parquet => {
            let plan = ReadPlan::new(Format::Json, true, &a.filters)?;
            parquet::parquet(a, &plan, &mut inputs, parquet::Output::File(out))
                .with_context(|| format!("cannot write {}", a.output.display()))?
                .into()
        }
        #[cfg(not(feature = "parquet"))]
        ExportFormat::Parquet => {
            drop(out);
            let _ = std::fs::remove_file(&a.output);
            anyhow::bail!(
                "this nanolog was built without Parquet support (the `parquet` feature, on by default); --format jsonl works"
            )
        }
    };
    report(a, &summary)
}

#[cfg(feature = "parquet")]
impl From<parquet::Written> for Summary {
    fn from(w: parquet::Written) -> Summary {
        Summary {
            rows: w.rows,
            dropped: w.dropped,
            partitions: w.partitions,
        }
    }
}

/// The format asked for, else the one the output's extension names.
fn output_format(a: &ExportArgs) -> anyhow::Result<ExportFormat> {
    if a.partition_by.is_some() {
        return match a.format {
            None | Some(ExportFormat::Parquet) => Ok(ExportFormat::Parquet),
            Some(ExportFormat::Jsonl) => {
                anyhow::bail!("--partition-by writes Parquet partitions: use --format parquet")
            }
        };
    }
    if let Some(f) = a.format {
        return Ok(f);
    }
    let ext = a
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("parquet" | "pq") => Ok(ExportFormat::Parquet),
        Some("jsonl" | "json" | "ndjson") => Ok(ExportFormat::Jsonl),
        _ => anyhow::bail!(
            "cannot tell the format from {}: give --format parquet or --format jsonl (or name it .parquet or .jsonl)",
            a.output.display()
        ),
    }
}

/// The summary lines on stderr.
fn report(a: &ExportArgs, summary: &Summary) -> anyhow::Result<()> {
    if summary.dropped > 0 {
        let _ = writeln!(
            io::stderr(),
            "nanolog: {} dropped by the logger (gaps are not rows)",
            crate::output::count(summary.dropped, "record was", "records were")
        );
    }
    let parts = if summary.partitions > 0 {
        format!(
            " in {}",
            crate::output::count(summary.partitions, "partition", "partitions")
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        io::stderr(),
        "nanolog: exported {} to {}{parts}",
        crate::output::count(summary.rows, "record", "records"),
        a.output.display()
    );
    Ok(())
}

struct Summary {
    rows: u64,
    dropped: u64,
    /// Partition files written (0: one file).
    partitions: u64,
}
