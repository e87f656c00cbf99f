//! `nanolog export --format parquet`: the records as Arrow columns written
//! by the Parquet writer (the `parquet` feature, on by default).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::Arc;

use arrow_array::builder::{StringBuilder, TimestampNanosecondBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use nanolog_runtime::reader::{Event, Merge, Record, Value};
use nanolog_runtime::text::render::format_message;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as Codec, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::cli::{Compression, ExportArgs};
use crate::decode::DecodePlan;
use crate::export::Summary;
use crate::output;

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
        self.rows += 1;
    }

    /// The rows gathered so far as a batch; the builders start over.
    fn finish(&mut self, schema: &Arc<Schema>) -> anyhow::Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.level.finish()),
            Arc::new(self.thread.finish()),
            Arc::new(self.thread_name.finish()),
            Arc::new(self.target.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.fmt.finish()),
            Arc::new(self.msg.finish()),
            Arc::new(self.args.finish()),
            Arc::new(self.fields.finish()),
        ];
        self.rows = 0;
        Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
    }
}

pub(crate) fn parquet(
    a: &ExportArgs,
    plan: &DecodePlan,
    files: &[nanolog_runtime::reader::LogFile],
    out: File,
) -> anyhow::Result<Summary> {
    let schema = Arc::new(schema());
    let codec = match a.compression {
        Compression::Zstd => Codec::ZSTD(ZstdLevel::default()),
        Compression::Snappy => Codec::SNAPPY,
        Compression::None => Codec::UNCOMPRESSED,
    };
    let props = WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_size(a.row_group.max(1))
        .set_created_by(format!("nanolog {}", env!("CARGO_PKG_VERSION")))
        // Messages and argument lists are nearly all distinct: a dictionary
        // would only cost hashing (a sixth of the export's time) before the
        // writer falls back to plain pages. The other columns repeat a few
        // values per call site and keep theirs.
        .set_column_dictionary_enabled(ColumnPath::from("msg"), false)
        .set_column_dictionary_enabled(ColumnPath::from("args"), false)
        .build();
    let writer = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, out),
        Arc::clone(&schema),
        Some(props),
    )?;
    // Encoding and compressing the columns (the writer) runs on a thread of
    // its own while this one merges and renders the next batch; two batches
    // in flight at most, so memory stays bounded.
    let (to_writer, batches) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
    let encoder = std::thread::Builder::new()
        .name("nanolog-export-writer".into())
        .spawn(move || -> anyhow::Result<()> {
            let mut writer = writer;
            for batch in batches {
                writer.write(&batch)?;
            }
            // Writes the footer; then the buffered bytes go out.
            writer.into_inner()?.flush()?;
            Ok(())
        })?;
    let mut cols = Columns::new();
    let (mut msg, mut scratch) = (String::with_capacity(256), String::with_capacity(256));
    let mut summary = Summary {
        rows: 0,
        dropped: 0,
    };
    let mut merge = Merge::new(files, plan.filter(files, 0));
    let send = |batch: RecordBatch| -> bool { to_writer.send(batch).is_ok() };
    let mut writer_gone = false;
    for ev in merge.by_ref() {
        match ev {
            Event::Gap(g, _) => summary.dropped += g.count,
            Event::Record(rec) => {
                if plan.limit.is_some_and(|l| summary.rows >= l) {
                    break;
                }
                // The arguments decoded once, for the message and the columns.
                let site = rec.site();
                let kept = rec.with_args(|args| {
                    msg.clear();
                    format_message(&site.pieces, &site.kinds, args, &mut msg);
                    if plan.grep.as_ref().is_some_and(|re| !re.is_match(&msg)) {
                        return false;
                    }
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
                    break;
                }
            }
        }
    }
    for e in merge.take_errors() {
        let _ = writeln!(io::stderr(), "nanolog: warning: {e}");
    }
    if cols.rows > 0 && !writer_gone {
        send(cols.finish(&schema)?);
    }
    drop(to_writer);
    encoder
        .join()
        .map_err(|_| anyhow::anyhow!("the Parquet writer thread panicked"))??;
    Ok(summary)
}
