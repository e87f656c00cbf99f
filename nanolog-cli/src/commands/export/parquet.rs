//! `nanolog export --format parquet`: the records as Arrow columns written
//! by the Parquet writer (the `parquet` feature, on by default).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use arrow_array::builder::{StringBuilder, TimestampNanosecondBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use nanolog_runtime::reader::{Batch, Event, Record, Value};
use nanolog_runtime::text::render::format_message;
use nanolog_runtime::text::utc::rfc3339;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as Codec, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::cli::{Compression, ExportArgs, PartitionBy};
use crate::output;
use crate::read_plan::ReadPlan;

/// Rows gathered before they are handed to the Parquet writer.
const BATCH_ROWS: usize = 8192;

/// The columns of an export, in order (README.md).
fn schema() -> Schema {
    let utf8 = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        utf8("level", false),
        Field::new("thread", DataType::UInt32, false),
        utf8("thread_name", true),
        utf8("target", false),
        utf8("file", false),
        Field::new("line", DataType::UInt32, false),
        utf8("fmt", false),
        utf8("msg", false),
        utf8("args", false),
        utf8("fields", false),
        utf8("spans", false),
        // The W3C ids of its innermost traced span (README "Trace context").
        utf8("trace_id", true),
        utf8("span_id", true),
    ])
}

/// One batch of rows being gathered.
struct Columns {
    ts: TimestampNanosecondBuilder,
    level: StringBuilder,
    thread: UInt32Builder,
    thread_name: StringBuilder,
    target: StringBuilder,
    file: StringBuilder,
    line: UInt32Builder,
    fmt: StringBuilder,
    msg: StringBuilder,
    args: StringBuilder,
    fields: StringBuilder,
    spans: StringBuilder,
    trace_id: StringBuilder,
    span_id: StringBuilder,
    rows: usize,
}

impl Columns {
    fn new() -> Columns {
        let s = || StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 16);
        Columns {
            ts: TimestampNanosecondBuilder::with_capacity(BATCH_ROWS).with_timezone("UTC"),
            level: s(),
            thread: UInt32Builder::with_capacity(BATCH_ROWS),
            thread_name: s(),
            target: s(),
            file: s(),
            line: UInt32Builder::with_capacity(BATCH_ROWS),
            fmt: s(),
            msg: s(),
            args: s(),
            fields: s(),
            spans: s(),
            trace_id: s(),
            span_id: s(),
            rows: 0,
        }
    }

    /// Appends `rec`, whose decoded arguments are `args` and message `msg`;
    /// `scratch` is reused for the JSON of its arguments and fields.
    fn push(&mut self, rec: &Record<'_>, args: &[Value<'_>], msg: &str, scratch: &mut String) {
        let site = rec.site();
        self.ts.append_value(rec.unix_ns());
        self.level.append_value(site.level.as_str());
        self.thread.append_value(rec.thread());
        self.thread_name.append_option(rec.thread_name());
        self.target.append_value(&site.target);
        self.file.append_value(&site.file);
        self.line.append_value(site.line);
        self.fmt.append_value(&site.format);
        self.msg.append_value(msg);
        scratch.clear();
        output::json_args(args, scratch);
        self.args.append_value(&*scratch);
        scratch.clear();
        output::json_fields(site, args, scratch);
        self.fields.append_value(&*scratch);
        scratch.clear();
        output::json_spans(rec, scratch);
        self.spans.append_value(&*scratch);
        let trace = rec.trace_context();
        self.trace_id.append_option(trace.map(|t| t.trace_hex()));
        self.span_id.append_option(trace.map(|t| t.span_hex()));
        self.rows += 1;
    }

    /// The rows gathered so far as a batch; the builders start over.
    fn finish(&mut self, schema: &Arc<Schema>) -> anyhow::Result<RecordBatch> {
        // A string column starts the next batch with the room this one
        // took: growing it value by value was a tenth of the time.
        let text = |b: &mut StringBuilder| -> ArrayRef {
            let used = b.values_slice().len();
            let done = b.finish();
            *b = StringBuilder::with_capacity(BATCH_ROWS, used);
            Arc::new(done)
        };
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            text(&mut self.level),
            Arc::new(self.thread.finish()),
            text(&mut self.thread_name),
            text(&mut self.target),
            text(&mut self.file),
            Arc::new(self.line.finish()),
            text(&mut self.fmt),
            text(&mut self.msg),
            text(&mut self.args),
            text(&mut self.fields),
            text(&mut self.spans),
            text(&mut self.trace_id),
            text(&mut self.span_id),
        ];
        self.rows = 0;
        Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
    }
}

/// What an export wrote.
pub(crate) struct Written {
    pub(crate) rows: u64,
    /// Records the logger had dropped (gaps are not rows).
    pub(crate) dropped: u64,
    /// Partition files written (0: one file).
    pub(crate) partitions: u64,
}

/// Where an export goes: one file, or Hive-style partitions under a
/// directory.
pub(crate) enum Output {
    File(File),
    Partitions(PathBuf, PartitionBy),
}

/// What the writer thread is handed: the next file to write (the one
/// before is finished), or a batch of rows for the current one.
enum ToWriter {
    Open(File),
    Batch(RecordBatch),
}

/// The partition of a record at `unix_ns`: `date=2026-11-24`, or
/// `date=2026-11-24/hour=13` (UTC).
fn partition(by: PartitionBy, unix_ns: i64) -> String {
    let t = rfc3339(unix_ns); // 2026-11-24T13:02:03.123456789Z
    match by {
        PartitionBy::Day => format!("date={}", &t[..10]),
        PartitionBy::Hour => format!("date={}/hour={}", &t[..10], &t[11..13]),
    }
}

/// A new file in partition `part` under `dir`: the first free
/// `part-NNNNN.parquet`, so an export beside an earlier one adds to it.
fn open_partition(dir: &Path, part: &str) -> anyhow::Result<File> {
    let d = dir.join(part);
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    for n in 0..100_000 {
        let p = d.join(format!("part-{n:05}.parquet"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", p.display())),
        }
    }
    anyhow::bail!("{}: no free part-NNNNN.parquet name", d.display())
}

pub(crate) fn parquet(
    a: &ExportArgs,
    plan: &ReadPlan,
    inputs: &mut crate::window::Inputs,
    out: Output,
) -> anyhow::Result<Written> {
    let schema = Arc::new(schema());
    let codec = match a.compression {
        Compression::Zstd => Codec::ZSTD(ZstdLevel::default()),
        Compression::Snappy => Codec::SNAPPY,
        Compression::None => Codec::UNCOMPRESSED,
    };
    let mut props = WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_size(a.row_group.max(1))
        .set_created_by(format!("nanolog {}", env!("CARGO_PKG_VERSION")))
        // Messages and argument lists are nearly all distinct: a dictionary
        // would only cost hashing (a sixth of the export's time) before the
        // writer falls back to plain pages. The other columns repeat a few
        // values per call site and keep theirs.
        .set_column_dictionary_enabled(ColumnPath::from("msg"), false)
        .set_column_dictionary_enabled(ColumnPath::from("args"), false);
    if a.compression == Compression::Zstd {
        // A few bytes repeated (`{}`, `[]`, `INFO`): zstd packs them as
        // small as a dictionary would (0.3% more in all), for less than the
        // hash and compare per value a dictionary costs (4% of the time).
        for col in ["fields", "spans", "level"] {
            props = props.set_column_dictionary_enabled(ColumnPath::from(col), false);
        }
    }
    // Min/max statistics let a query skip row groups by time (and thread
    // or line). Of the string columns they would prune next to nothing (a
    // row group holds every level, file and target of its stretch of
    // time), and computing them is a string comparison per value: a fifth
    // of the writer thread's time for the free text, 5-8% of the export's
    // for the rest.
    let props = [
        "msg",
        "args",
        "fields",
        "spans",
        "trace_id",
        "span_id",
        "fmt",
        "level",
        "thread_name",
        "target",
        "file",
    ]
    .into_iter()
    .fold(props, |p, col| {
        p.set_column_statistics_enabled(ColumnPath::from(col), EnabledStatistics::None)
    })
    .build();
    // Encoding and compressing the columns (the writer) runs on a thread of
    // its own while this one merges and renders the next batch; two batches
    // in flight at most, so memory stays bounded. Each Open finishes the
    // file before it (footer, flush) and starts the next.
    let (to_writer, batches) = std::sync::mpsc::sync_channel::<ToWriter>(2);
    let encoder_schema = Arc::clone(&schema);
    let encoder = std::thread::Builder::new()
        .name("nanolog-export-writer".into())
        .spawn(move || -> anyhow::Result<()> {
            let mut writer: Option<ArrowWriter<BufWriter<File>>> = None;
            let finish = |w: Option<ArrowWriter<BufWriter<File>>>| -> anyhow::Result<()> {
                if let Some(w) = w {
                    w.into_inner()?.flush()?;
                }
                Ok(())
            };
            for m in batches {
                match m {
                    ToWriter::Open(file) => {
                        finish(writer.take())?;
                        writer = Some(ArrowWriter::try_new(
                            BufWriter::with_capacity(1 << 20, file),
                            Arc::clone(&encoder_schema),
                            Some(props.clone()),
                        )?);
                    }
                    ToWriter::Batch(b) => match writer.as_mut() {
                        Some(w) => w.write(&b)?,
                        None => anyhow::bail!("rows before a file to write them to"),
                    },
                }
            }
            finish(writer)
        })?;
    let partitions = match out {
        Output::File(f) => {
            let _ = to_writer.send(ToWriter::Open(f));
            None
        }
        Output::Partitions(dir, by) => Some((dir, by)),
    };
    let mut current_part: Option<String> = None;
    let mut cols = Columns::new();
    let (mut msg, mut scratch) = (String::with_capacity(256), String::with_capacity(256));
    let mut summary = Written {
        rows: 0,
        dropped: 0,
        partitions: 0,
    };
    let send = |batch: RecordBatch| -> bool { to_writer.send(ToWriter::Batch(batch)).is_ok() };
    let mut writer_gone = false;
    inputs.merges(
        true,
        || plan.filter_in(0),
        |merge| {
            let mut more = true;
            // In batches: a large file's blocks are inflated as the merge
            // reaches them, and let go once exported.
            let mut merge = merge.batches();
            let mut batch = Batch::with_capacity(1024);
            'events: loop {
                batch.clear();
                let go = merge.fill(&mut batch, 1024);
                for &ev in batch.events() {
                    match ev {
                        Event::Gap(g, _) => summary.dropped += g.count,
                        Event::Record(rec) => {
                            if !plan.in_trace(&rec) {
                                continue;
                            }
                            if plan.limit.is_some_and(|l| summary.rows >= l) {
                                more = false;
                                break 'events;
                            }
                            if let Some((dir, by)) = &partitions {
                                // Records come in time order: a partition, once
                                // left, does not come back.
                                let part = partition(*by, rec.unix_ns());
                                if current_part.as_deref() != Some(part.as_str()) {
                                    if cols.rows > 0 && !send(cols.finish(&schema)?) {
                                        writer_gone = true;
                                        more = false;
                                        break 'events;
                                    }
                                    let file = open_partition(dir, &part)?;
                                    if to_writer.send(ToWriter::Open(file)).is_err() {
                                        writer_gone = true;
                                        more = false;
                                        break 'events;
                                    }
                                    summary.partitions += 1;
                                    current_part = Some(part);
                                }
                            }
                            // The arguments decoded once, for the message and the
                            // columns.
                            let site = rec.site();
                            let kept = rec.with_args(|args| {
                                // `--grep` on the text line's message (with a
                                // bridge record's fields), the column the message
                                // alone.
                                if let Some(re) = &plan.grep {
                                    msg.clear();
                                    format_message(&site.pieces, &site.kinds, args, &mut msg);
                                    if !re.is_match(&msg) {
                                        return false;
                                    }
                                }
                                msg.clear();
                                format_message(site.message(), &site.kinds, args, &mut msg);
                                cols.push(&rec, args, &msg, &mut scratch);
                                true
                            });
                            if !kept {
                                continue;
                            }
                            summary.rows += 1;
                            if cols.rows >= BATCH_ROWS && !send(cols.finish(&schema)?) {
                                // The writer failed: its error is reported below.
                                writer_gone = true;
                                more = false;
                                break 'events;
                            }
                        }
                    }
                }
                if !go {
                    break;
                }
            }
            for e in merge.take_errors() {
                let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
            }
            Ok(more)
        },
    )?;
    if cols.rows > 0 && !writer_gone {
        send(cols.finish(&schema)?);
    }
    drop(to_writer);
    encoder
        .join()
        .map_err(|_| anyhow::anyhow!("the Parquet writer thread panicked"))??;
    Ok(summary)
}
