//! Records as OTLP log records (CONTRACT §13), in the message types of the
//! `opentelemetry-proto` crate, encoded by prost.
//!
//! A request is built in place and its parts are kept from one batch to
//! the next: a record's attribute list, keys and strings are overwritten,
//! not allocated again, so a steady stream of batches allocates almost
//! nothing (records inside spans excepted: their span lists are built anew).

use std::fmt::Write as _;

use nanolog_runtime::reader::{Gap, LogFile, Record, Value};
use nanolog_runtime::text::render::format_message;
use nanolog_runtime::Level;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

/// The attribute keys nanolog gives every record (and `spans`): a record's
/// field of one of these names is sent as `field.NAME`.
pub(crate) const RESERVED: [&str; 7] = [
    "code.filepath",
    "code.lineno",
    "thread.id",
    "thread.name",
    "target",
    "spans",
    "spans_lost",
];

/// OTLP's severity number of a level (the first of its range).
pub(crate) fn severity(level: Level) -> i32 {
    match level {
        Level::Trace => 1,
        Level::Debug => 5,
        Level::Info => 9,
        Level::Warn => 13,
        Level::Error => 17,
    }
}

/// The request being built: one resource (the writer process of the file
/// the batch comes from), one scope (`nanolog`), its records.
pub(crate) struct Batch {
    req: ExportLogsServiceRequest,
    /// How many of the scope's records are this batch's; those after them
    /// are kept from earlier batches, to be overwritten.
    len: usize,
    service: String,
    host: String,
    /// Attributes added to the resource (`OTEL_RESOURCE_ATTRIBUTES`).
    extra: std::sync::Arc<Vec<(String, String)>>,
}

impl Batch {
    pub(crate) fn new(
        service: String,
        host: String,
        extra: std::sync::Arc<Vec<(String, String)>>,
    ) -> Batch {
        Batch {
            req: ExportLogsServiceRequest {
                resource_logs: vec![ResourceLogs {
                    resource: Some(Resource::default()),
                    scope_logs: vec![ScopeLogs {
                        scope: Some(InstrumentationScope {
                            name: "nanolog".into(),
                            version: env!("CARGO_PKG_VERSION").into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            },
            len: 0,
            service,
            host,
            extra,
        }
    }

    fn records(&mut self) -> &mut Vec<LogRecord> {
        &mut self.req.resource_logs[0].scope_logs[0].log_records
    }

    /// How many records the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Empties the batch (its records are kept to be overwritten) and sets
    /// the resource of `file`'s writer.
    ///
    /// `host.name` is the host the file says its writer ran on (files of
    /// writers since the SET entry), else this machine's.
    pub(crate) fn start(&mut self, file: &LogFile) {
        self.start_resource(Some(i64::from(file.header().pid)), file.host());
    }

    /// Empties the batch and sets its resource: the writer's pid (if
    /// known) and host (else this machine's).
    pub(crate) fn start_resource(&mut self, pid: Option<i64>, host: Option<&str>) {
        self.len = 0;
        let attrs = &mut self.req.resource_logs[0]
            .resource
            .get_or_insert_with(Resource::default)
            .attributes;
        let mut n = 0;
        put(attrs, &mut n, "service.name", Val::Str(&self.service));
        put(
            attrs,
            &mut n,
            "host.name",
            Val::Str(host.unwrap_or(&self.host)),
        );
        if let Some(pid) = pid {
            put(attrs, &mut n, "process.pid", Val::Int(pid));
        }
        for (k, v) in self.extra.iter() {
            put(attrs, &mut n, k, Val::Str(v));
        }
        attrs.truncate(n);
    }

    /// Adds a WARN record of nanolog's own, at `time_ns`: `message`, and
    /// the count `n` under the attribute `key` (`nanolog.*`).
    pub(crate) fn push_note(&mut self, time_ns: u64, message: &str, counts: &[(&str, u64)]) {
        let attrs = &mut self.next_warning(time_ns, message).attributes;
        let mut k = 0;
        for &(key, n) in counts {
            put(attrs, &mut k, key, Val::Int(n.min(i64::MAX as u64) as i64));
        }
        attrs.truncate(k);
    }

    /// The next record of the batch as a WARN record of nanolog's own, at
    /// `time_ns`, with `message` as its body (its attributes the caller's).
    fn next_warning(&mut self, time_ns: u64, message: &str) -> &mut LogRecord {
        let lr = self.next_record();
        lr.time_unix_nano = time_ns;
        lr.observed_time_unix_nano = time_ns;
        lr.severity_number = severity(Level::Warn);
        set_str(&mut lr.severity_text, Level::Warn.as_str());
        let mut body = take_string(&mut lr.body);
        body.push_str(message);
        lr.body = Some(AnyValue {
            value: Some(V::StringValue(body)),
        });
        lr
    }

    /// The next record of the batch, in place: one of an earlier batch to
    /// overwrite (its strings and attribute list reused), or a new one.
    fn next_record(&mut self) -> &mut LogRecord {
        let n = self.len;
        self.len += 1;
        let records = self.records();
        if n == records.len() {
            records.push(LogRecord::default());
        }
        let lr = &mut records[n];
        // An earlier record's trace context is not this one's.
        lr.trace_id.clear();
        lr.span_id.clear();
        lr.flags = 0;
        lr
    }

    /// Adds a record of the log.
    pub(crate) fn push(&mut self, rec: &Record<'_>, observed_ns: u64) {
        let lr = self.next_record();
        let site = rec.site();
        lr.time_unix_nano = rec.unix_ns().max(0) as u64;
        lr.observed_time_unix_nano = observed_ns;
        lr.severity_number = severity(site.level);
        set_str(&mut lr.severity_text, site.level.as_str());
        // The W3C ids of its innermost traced span (CONTRACT §16), and its
        // flags when the span says them (bits 0-7 of `flags` are W3C's).
        if let Some(t) = rec.trace_context() {
            lr.trace_id.extend_from_slice(&t.trace_id);
            lr.span_id.extend_from_slice(&t.span_id);
            lr.flags = u32::from(t.flags.unwrap_or(0));
        }
        let mut body = take_string(&mut lr.body);
        let attrs = &mut lr.attributes;
        let mut n = 0;
        put(attrs, &mut n, "code.filepath", Val::Str(&site.file));
        put(attrs, &mut n, "code.lineno", Val::Int(i64::from(site.line)));
        put(
            attrs,
            &mut n,
            "thread.id",
            Val::Int(i64::from(rec.thread())),
        );
        if let Some(name) = rec.thread_name() {
            put(attrs, &mut n, "thread.name", Val::Str(name));
        }
        put(attrs, &mut n, "target", Val::Str(&site.target));
        rec.with_args(|args| {
            format_message(site.message(), &site.kinds, args, &mut body);
            if !site.names.is_empty() {
                for (i, v) in args.iter().enumerate() {
                    if let Some(name) = site.name(i) {
                        // Keys are unique in OTLP: a field named like one
                        // of nanolog's own keys goes under `field.NAME`.
                        if RESERVED.contains(&name) || name.starts_with("nanolog.") {
                            put(attrs, &mut n, &format!("field.{name}"), Val::of(v));
                        } else {
                            put(attrs, &mut n, name, Val::of(v));
                        }
                    }
                }
            }
        });
        if rec.in_spans() {
            let mut spans = Vec::new();
            rec.for_each_span(|s| {
                let mut fields = Vec::new();
                let mut k = 0;
                s.for_each_field(|name, v| put(&mut fields, &mut k, name, Val::of(&v)));
                spans.push(kvlist(vec![
                    kv("name", V::StringValue(s.name().into())),
                    kv("fields", V::KvlistValue(KeyValueList { values: fields })),
                ]));
            });
            if n < attrs.len() {
                attrs.truncate(n);
            }
            attrs.push(kv("spans", V::ArrayValue(ArrayValue { values: spans })));
            n += 1;
            if rec.spans_lost() {
                // Some of its spans were lost to damage: `spans` holds the rest.
                attrs.truncate(n);
                attrs.push(kv("spans_lost", V::BoolValue(true)));
                n += 1;
            }
        }
        attrs.truncate(n);
        lr.body = Some(AnyValue {
            value: Some(V::StringValue(body)),
        });
    }

    /// Adds a record that tells of dropped (or lost) records.
    pub(crate) fn push_gap(&mut self, g: &Gap, file: &LogFile, message: &str) {
        let time = g.first_unix_ns.max(0) as u64;
        let attrs = &mut self.next_warning(time, message).attributes;
        let mut n = 0;
        put(attrs, &mut n, "nanolog.dropped", Val::Int(g.count as i64));
        if g.is_lost() {
            put(attrs, &mut n, "nanolog.lost", Val::Bool(true));
        } else {
            put(attrs, &mut n, "thread.id", Val::Int(i64::from(g.thread)));
            if let Some(name) = file.thread_name(g.thread) {
                put(attrs, &mut n, "thread.name", Val::Str(name));
            }
        }
        attrs.truncate(n);
    }

    /// Encodes the request into `buf` (emptied first).
    pub(crate) fn encode_into(&mut self, buf: &mut Vec<u8>) {
        // The records kept beyond this batch's are set aside meanwhile.
        let n = self.len;
        let kept = self.records().split_off(n);
        buf.clear();
        // Into a Vec, which grows (and keeps its size for the next batch):
        // encoding cannot run out of room.
        let _ = self.req.encode(buf);
        self.records().extend(kept);
    }
}

/// `body` (an encoded request of one resource and scope) as requests of at
/// most `max` bytes each, its records in order: split between records,
/// and a record larger than `max` on its own sent cut to fit, marked with
/// `nanolog.truncated_bytes` (its encoded size before the cut).
/// Empty for a request without records.
pub(crate) fn split_to_fit(body: &[u8], max: usize) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut req = ExportLogsServiceRequest::decode(body)
        .map_err(|e| anyhow::anyhow!("a batch to split does not decode: {e}"))?;
    let Some(scope) = req
        .resource_logs
        .get_mut(0)
        .and_then(|r| r.scope_logs.get_mut(0))
    else {
        return Ok(Vec::new());
    };
    let records = std::mem::take(&mut scope.log_records);
    let template = req;
    // The request around the records, and a record's own framing.
    let overhead = template.encoded_len() + 32;
    let room = max.saturating_sub(overhead).max(1024);
    let mut parts = Vec::new();
    let mut cur: Vec<LogRecord> = Vec::new();
    let mut size = 0;
    let flush = |cur: &mut Vec<LogRecord>, parts: &mut Vec<Vec<u8>>| {
        if cur.is_empty() {
            return;
        }
        let mut r = template.clone();
        r.resource_logs[0].scope_logs[0].log_records = std::mem::take(cur);
        parts.push(r.encode_to_vec());
    };
    for mut r in records {
        let mut len = r.encoded_len() + 8;
        if len > room {
            cut_to_fit(&mut r, room);
            len = r.encoded_len() + 8;
        }
        if size + len > room {
            flush(&mut cur, &mut parts);
            size = 0;
        }
        size += len;
        cur.push(r);
    }
    flush(&mut cur, &mut parts);
    Ok(parts)
}

/// Cuts a record's body (and its longest string attributes, if need be)
/// so that it encodes in about `room` bytes, and marks it.
fn cut_to_fit(r: &mut LogRecord, room: usize) {
    let body_len = match &r.body {
        Some(AnyValue {
            value: Some(V::StringValue(s)),
        }) => s.len(),
        _ => 0,
    };
    // Its size before the first cut (a record cut again keeps it).
    if !r
        .attributes
        .iter()
        .any(|a| a.key == "nanolog.truncated_bytes")
    {
        r.attributes.push(kv(
            "nanolog.truncated_bytes",
            V::IntValue(r.encoded_len() as i64),
        ));
    }
    let cut = |s: &mut String, keep: usize| {
        if s.len() > keep {
            let mut at = keep;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.truncate(at);
        }
    };
    // The body first, then string attributes, longest first.
    let over = r.encoded_len().saturating_sub(room);
    if let Some(AnyValue {
        value: Some(V::StringValue(s)),
    }) = &mut r.body
    {
        cut(s, body_len.saturating_sub(over));
    }
    while r.encoded_len() > room {
        let longest = r
            .attributes
            .iter_mut()
            .filter_map(|a| match &mut a.value {
                Some(AnyValue {
                    value: Some(V::StringValue(s)),
                }) => Some(s),
                _ => None,
            })
            .max_by_key(|s| s.len());
        match longest {
            Some(s) if !s.is_empty() => {
                let keep = s.len() / 2;
                cut(s, keep);
            }
            _ => break,
        }
    }
}

/// An attribute value, borrowed until it is written.
enum Val<'a> {
    Int(i64),
    Double(f64),
    Bool(bool),
    Str(&'a str),
    /// Packed hex digits: the digits.
    Hex(nanolog_runtime::reader::HexStr<'a>),
    /// A prefix and decimal digits: the text.
    Numbered(nanolog_runtime::reader::NumberedStr<'a>),
    Char(char),
    /// An integer outside OTLP's `int64`: its decimal text.
    Wide(i128),
    WideU(u128),
}

impl<'a> Val<'a> {
    fn of(v: &Value<'a>) -> Val<'a> {
        match *v {
            Value::Uint(u) => i64::try_from(u).map_or(Val::WideU(u), Val::Int),
            Value::Int(i) => i64::try_from(i).map_or(Val::Wide(i), Val::Int),
            Value::F32(f) => Val::Double(f64::from(f)),
            Value::F64(f) => Val::Double(f),
            Value::Bool(b) => Val::Bool(b),
            Value::Char(c) => Val::Char(c),
            Value::Str(s) => Val::Str(s),
            Value::Hex(h) => Val::Hex(h),
            Value::Numbered(n) => Val::Numbered(n),
            // One value per argument: the first rendering (they differ
            // only when several placeholders format the argument).
            Value::Rendered(r) => Val::Str(r.get(0).unwrap_or("")),
        }
    }
}

/// Writes attribute `*n` as `key` = `v` over what the slot held (its
/// strings reused), and counts it.
fn put(attrs: &mut Vec<KeyValue>, n: &mut usize, key: &str, v: Val<'_>) {
    if *n == attrs.len() {
        attrs.push(KeyValue::default());
    }
    let slot = &mut attrs[*n];
    *n += 1;
    set_str(&mut slot.key, key);
    let value = match v {
        Val::Int(i) => V::IntValue(i),
        Val::Double(f) => V::DoubleValue(f),
        Val::Bool(b) => V::BoolValue(b),
        text => {
            let mut s = take_string(&mut slot.value);
            match text {
                Val::Str(t) => s.push_str(t),
                Val::Hex(h) => h.for_each_piece(|d| s.push_str(d)),
                Val::Numbered(n) => {
                    let _ = write!(s, "{n}");
                }
                Val::Char(c) => s.push(c),
                Val::Wide(i) => {
                    let _ = write!(s, "{i}");
                }
                Val::WideU(u) => {
                    let _ = write!(s, "{u}");
                }
                Val::Int(_) | Val::Double(_) | Val::Bool(_) => {}
            }
            V::StringValue(s)
        }
    };
    slot.value = Some(AnyValue { value: Some(value) });
}

/// The string a value held, emptied (its allocation kept), or a new one.
fn take_string(v: &mut Option<AnyValue>) -> String {
    match v.take().and_then(|a| a.value) {
        Some(V::StringValue(mut s)) => {
            s.clear();
            s
        }
        _ => String::new(),
    }
}

fn set_str(s: &mut String, v: &str) {
    s.clear();
    s.push_str(v);
}

fn kv(key: &str, v: V) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn kvlist(values: Vec<KeyValue>) -> AnyValue {
    AnyValue {
        value: Some(V::KvlistValue(KeyValueList { values })),
    }
}
