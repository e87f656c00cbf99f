//! The command line, as clap types only; each subcommand's module
//! (`commands/`: `decode.rs` and `export/` through `read_plan.rs`, `stats/`, `info.rs`) turns them into its plan.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Decode, filter, aggregate, export and ship nanolog binary logs.
#[derive(Debug, Parser)]
#[command(name = "nanolog", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print records as text or JSON, merged into time order across threads and files.
    Decode(DecodeArgs),
    /// Aggregate records per call site, thread or level, straight from the binary log.
    Stats(StatsArgs),
    /// Show the header, clock calibration, call-site dictionary and threads of a log.
    Info(InfoArgs),
    /// Write the records, in time order, as Parquet or JSON lines for analytics engines.
    Export(ExportArgs),
    /// Send the records to an OpenTelemetry collector (OTLP/HTTP), following the log.
    Ship(ShipArgs),
    /// Write into a log the records its killed writer's rings still held (`app.nlog.rings`).
    Recover(RecoverArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Log files (a rolled set, or logs of several processes).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// File order: no merge into time order.
    #[arg(long)]
    pub unsorted: bool,
    #[command(flatten)]
    pub filters: FilterArgs,
    /// Keep printing records as the file grows (and across rolls), until interrupted.
    #[arg(short, long)]
    pub follow: bool,
    /// With -f: resume from, and keep, the position saved in FILE (the
    /// file of the set and the offset printed up to, saved atomically after
    /// each batch printed): restarted, the follower prints what came after
    /// it, records of a batch cut off by a kill possibly twice.
    #[arg(long, value_name = "FILE", requires = "follow")]
    pub cursor: Option<PathBuf>,
    /// Only the last N records of the input (after the filters), in time
    /// order, as `tail -n`; with -f, the last N, then what follows.
    #[arg(
        short = 'n',
        long = "lines",
        value_name = "N",
        conflicts_with = "cursor"
    )]
    pub lines: Option<u64>,
    /// Colour the level in text lines: when stdout is a terminal (auto), always, never.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// Text times in the local time zone with its offset, instead of UTC (Z).
    #[arg(long)]
    pub local: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// The record filters `decode` and `export` share.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Minimum level (trace, debug, info, warn, error).
    #[arg(long)]
    pub level: Option<String>,
    /// Only records at or after this time: RFC 3339 (2026-11-22T11:02:03Z),
    /// a date (2026-11-22, midnight UTC), or a time ago (2h, -90s, "1h 30m",
    /// "2 hours ago").
    #[arg(long, allow_hyphen_values = true)]
    pub since: Option<String>,
    /// Only records at or before this time (same forms as --since).
    #[arg(long, allow_hyphen_values = true)]
    pub until: Option<String>,
    /// Only records of this thread, by id or by name (repeatable).
    #[arg(long, value_name = "ID|NAME")]
    pub thread: Vec<String>,
    /// Only records whose rendered message matches this regular expression.
    #[arg(long)]
    pub grep: Option<String>,
    /// Only records of this trace: its W3C trace id (32 hex digits), as the
    /// innermost of a record's spans that carries `trace_id` and `span_id`
    /// fields says it.
    #[arg(long, value_name = "TRACE_ID")]
    pub trace: Option<String>,
    /// Stop after this many records.
    #[arg(long)]
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Apache Parquet: one row per record (DuckDB, Spark, DataFusion, pyarrow).
    Parquet,
    /// The JSON lines of `decode --format json`.
    Jsonl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    Zstd,
    Snappy,
    None,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Log files (a rolled set, or logs of several processes).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format. Default: from the output's extension (`.parquet`,
    /// `.jsonl`/`.json`/`.ndjson`), Parquet with --partition-by.
    #[arg(long, value_enum)]
    pub format: Option<ExportFormat>,
    /// The file to write (replaced if it exists; missing parent
    /// directories are made); with --partition-by, the directory of the
    /// partitions.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Parquet only: Hive-style partitions by the records' UTC day
    /// (`DIR/date=2026-11-24/part-00000.parquet`) or hour (`.../hour=13/...`),
    /// which DuckDB (`hive_partitioning=true`) and Spark read as one table.
    #[arg(long, value_enum, value_name = "day|hour")]
    pub partition_by: Option<PartitionBy>,
    /// Parquet compression codec.
    #[arg(long, value_enum, default_value_t = Compression::Zstd)]
    pub compression: Compression,
    /// Rows per Parquet row group (memory stays bounded by about one group).
    #[arg(long, default_value_t = 1 << 20, value_name = "ROWS")]
    pub row_group: usize,
    #[command(flatten)]
    pub filters: FilterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PartitionBy {
    Day,
    Hour,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupBy {
    Site,
    Thread,
    Level,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Log files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Only call sites whose format string matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub site: Option<String>,
    /// Only call sites whose format string is exactly this text
    /// (`--fmt 'took {} us'`, no regex escapes needed).
    #[arg(long, value_name = "TEXT", conflicts_with = "site")]
    pub fmt: Option<String>,
    /// Aggregate an argument of the selected records: its index (0-based)
    /// or its name (`pct` in `{pct:.1}` or `pct = x`).
    #[arg(long, value_name = "N|NAME")]
    pub arg: Option<String>,
    /// With --arg: also draw the distribution, as a terminal histogram of
    /// log-scaled buckets (1-2-5 per decade).
    #[arg(long, requires = "arg")]
    pub histogram: bool,
    /// Group counts by call site (default), thread or level.
    #[arg(long, value_enum)]
    pub by: Option<GroupBy>,
    /// A time series: counts per interval (e.g. 1s, 100ms, "1h 30m") per group.
    #[arg(long, value_name = "DURATION")]
    pub every: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The log file.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The log whose writer was killed (its path, as the writer was given it).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ShipArgs {
    /// The log to ship (its path: its rolled files and later runs are
    /// followed too). Several logs are shipped side by side.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The collector's OTLP/HTTP endpoint (http://host:4318 or
    /// https://host:4318; batches go to URL/v1/logs, a query string kept
    /// after it). Default: $OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (used as it
    /// is), else $OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/logs), as
    /// OpenTelemetry's exporters read them. `user:password@` in it is sent
    /// as HTTP basic authentication and never printed. https:// is
    /// verified against the system's roots (or --ca); headers and
    /// credentials go only over https:// or to a loopback address.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// A header sent with every request (an API key, a tenant), NAME=VALUE;
    /// repeat for several. Added to $OTEL_EXPORTER_OTLP_LOGS_HEADERS (else
    /// $OTEL_EXPORTER_OTLP_HEADERS: k=v,k2=v2, percent-encoded), a flag's
    /// value replacing the variable's of the same name. Values are never
    /// printed.
    #[arg(long, value_name = "NAME=VALUE")]
    pub header: Vec<String>,
    /// Request bodies gzip'd or not: gzip, none. Default:
    /// $OTEL_EXPORTER_OTLP_LOGS_COMPRESSION, else
    /// $OTEL_EXPORTER_OTLP_COMPRESSION, else none.
    #[arg(long, value_name = "gzip|none")]
    pub compression: Option<String>,
    /// The CA certificates (PEM) an https:// collector is verified against,
    /// instead of the system's roots. Default:
    /// $OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE, else
    /// $OTEL_EXPORTER_OTLP_CERTIFICATE. Mutual TLS: the client's
    /// certificate and key from $OTEL_EXPORTER_OTLP_[LOGS_]CLIENT_CERTIFICATE
    /// and $OTEL_EXPORTER_OTLP_[LOGS_]CLIENT_KEY; a request's timeout from
    /// $OTEL_EXPORTER_OTLP_[LOGS_]TIMEOUT (milliseconds); attributes added to
    /// the resource from $OTEL_RESOURCE_ATTRIBUTES.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Resume from, and keep, the position saved in FILE: saved atomically
    /// after each batch the collector accepted, so a restarted ship sends
    /// nothing it accepted. Without it, ship starts at the oldest file of
    /// the set each time. Several logs: one --cursor each, in their order.
    #[arg(long, value_name = "FILE")]
    pub cursor: Vec<PathBuf>,
    /// The resource's service.name. Default: $OTEL_SERVICE_NAME, else
    /// unknown_service.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Ship what the log holds now and exit 0, instead of following it.
    /// A log path that does not exist is an error then, and a collector
    /// that takes no batch for --give-up-after ends ship with exit 1.
    #[arg(long)]
    pub once: bool,
    /// Give up (exit 1, the cursor saved up to the last batch accepted)
    /// when the collector has taken no batch for this long. Default: 2m
    /// with --once, never without.
    #[arg(long, value_name = "DURATION")]
    pub give_up_after: Option<String>,
    /// Print progress (records sent, retries, how far behind the log) to
    /// stderr at this interval (e.g. 10s).
    #[arg(long, value_name = "DURATION")]
    pub stats_every: Option<String>,
    /// The longest wait between two tries of a batch the collector did not
    /// take (429, 5xx, no connection); waits double from 100 ms up to it.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub max_backoff: String,
    /// About how many KiB of the log go into one batch (whole extents: a
    /// batch holds at least one).
    #[arg(long, value_name = "KIB", default_value_t = 64)]
    pub batch_kib: usize,
    /// The largest request body sent, in KiB (the OpenTelemetry
    /// Collector's own limit is 20 MiB by default). A batch over it is
    /// sent in parts; a record over it alone is cut to fit and marked
    /// (`nanolog.truncated_bytes`); a collector that refuses a request as
    /// too large (413, 400 "too large") or keeps closing the connection on
    /// it gets it in halves.
    #[arg(long, value_name = "KIB", default_value_t = 4096)]
    pub max_body_kib: usize,
}
