//! Records as OTLP log records (README "Shipping"), in the message types of the
//! `opentelemetry-proto` crate, encoded by prost.
//!
//! Records are encoded one by one as they are added (see [`Batch`]): the
//! record being made is kept from one to the next, its attribute list, keys
//! and strings overwritten, not allocated again, so a steady stream of
//! batches allocates almost nothing (a span chain is built once a context
//! of a batch).

use std::fmt::Write as _;

use nanolog_runtime::reader::{Gap, LogFile, Record, TraceContext, Value};
use nanolog_runtime::text::render::format_message;
use nanolog_runtime::Level;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
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
///
/// Each record is encoded as it is added, into the bytes of the request's
/// records, and the request is framed around them at the end: prost's
/// encoding of a whole request computes each nested message's length once
/// for every level above it, and a record's span chain (a list of
/// key-value lists of key-value lists) sits nine levels down, so 45% of
/// ship's CPU went to computing lengths (`perf record`, a traced log,
/// 2026-12-06). A span chain's encoding is made once per span context of
/// the batch and copied into each record made in it.
pub(crate) struct Batch {
    resource: Resource,
    scope: InstrumentationScope,
    /// The record being made: its attribute list, keys and strings are
    /// overwritten from one record to the next, not allocated again.
    lr: LogRecord,
    /// The batch's records, encoded: each one ScopeLogs' `log_records`
    /// field, its tag and length included.
    recs: Vec<u8>,
    /// One record's encoding, before it is framed into `recs`.
    one: Vec<u8>,
    /// How many records `recs` holds.
    len: usize,
    /// Each span context's attributes (`spans`, and `spans_lost` when
    /// some were lost), encoded as LogRecord attribute fields, and its
    /// trace context, by the context's id in the batch's file.
    chains: std::collections::HashMap<u32, (Vec<u8>, Option<TraceContext>)>,
    service: String,
    host: String,
    /// Attributes added to the resource (`OTEL_RESOURCE_ATTRIBUTES`).
    extra: std::sync::Arc<Vec<(String, String)>>,
}

/// Span chains a batch keeps encoded, at most (then it starts again).
const CHAINS_KEPT: usize = 1 << 14;

/// The tag of a length-delimited protobuf field `n`.
const fn len_tag(n: u8) -> u8 {
    (n << 3) | 2
}

/// Appends `body` as length-delimited field `field`.
fn put_field(out: &mut Vec<u8>, field: u8, body: &[u8]) {
    out.push(len_tag(field));
    prost::encoding::encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// The bytes a length-delimited field of a `len`-byte body takes.
fn field_len(len: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

impl Batch {
    pub(crate) fn new(
        service: String,
        host: String,
        extra: std::sync::Arc<Vec<(String, String)>>,
    ) -> Batch {
        Batch {
            resource: Resource::default(),
            scope: InstrumentationScope {
                name: "nanolog".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Default::default()
            },
            lr: LogRecord::default(),
            recs: Vec::new(),
            one: Vec::new(),
            len: 0,
            chains: std::collections::HashMap::new(),
            service,
            host,
            extra,
        }
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
        self.recs.clear();
        // (Context ids are a file's: another batch may be of another file.)
        self.chains.clear();
        let attrs = &mut self.resource.attributes;
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
        self.finish_record(None);
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

    /// The next record of the batch, in place: the last one's to
    /// overwrite (its strings and attribute list reused); added to the
    /// batch by [`Batch::finish_record`].
    fn next_record(&mut self) -> &mut LogRecord {
        let lr = &mut self.lr;
        // An earlier record's trace context is not this one's.
        lr.trace_id.clear();
        lr.span_id.clear();
        lr.flags = 0;
        lr
    }

    /// Encodes the record made into the batch, with the encoded attributes
    /// of span context `chain` (see [`Batch::chain`]) after its own.
    fn finish_record(&mut self, chain: Option<u32>) {
        self.one.clear();
        // (Into a Vec, which grows: encoding cannot run out of room.)
        let _ = self.lr.encode(&mut self.one);
        if let Some((c, _)) = chain.and_then(|c| self.chains.get(&c)) {
            // Repeated fields may come in pieces: these attributes follow
            // the record's own.
            self.one.extend_from_slice(c);
        }
        put_field(&mut self.recs, 2, &self.one);
        self.len += 1;
    }

    /// Encodes `rec`'s span chain as LogRecord attributes (`spans`, then
    /// `spans_lost` when some of its spans were lost), once for its
    /// context in this batch; returns the context.
    fn chain(&mut self, rec: &Record<'_>) -> u32 {
        let ctx = rec.context();
        if self.chains.contains_key(&ctx) {
            return ctx;
        }
        if self.chains.len() >= CHAINS_KEPT {
            self.chains.clear();
        }
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
        let mut bytes = Vec::new();
        put_field(
            &mut bytes,
            6,
            &kv("spans", V::ArrayValue(ArrayValue { values: spans })).encode_to_vec(),
        );
        if rec.spans_lost() {
            // Some of its spans were lost to damage: `spans` holds the rest.
            put_field(
                &mut bytes,
                6,
                &kv("spans_lost", V::BoolValue(true)).encode_to_vec(),
            );
        }
        self.chains.insert(ctx, (bytes, rec.trace_context()));
        ctx
    }

    /// Adds a record of the log.
    pub(crate) fn push(&mut self, rec: &Record<'_>, observed_ns: u64) {
        // Its span chain, and the trace context in it, once a context.
        let chain = rec.in_spans().then(|| self.chain(rec));
        let trace = chain.and_then(|c| self.chains.get(&c).and_then(|c| c.1));
        let lr = self.next_record();
        let site = rec.site();
        lr.time_unix_nano = rec.unix_ns().max(0) as u64;
        lr.observed_time_unix_nano = observed_ns;
        lr.severity_number = severity(site.level);
        set_str(&mut lr.severity_text, site.level.as_str());
        // The W3C ids of its innermost traced span (README "Trace context"), and its
        // flags when the span says them (bits 0-7 of `flags` are W3C's).
        if let Some(t) = trace {
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
        attrs.truncate(n);
        lr.body = Some(AnyValue {
            value: Some(V::StringValue(body)),
        });
        self.finish_record(chain);
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
        self.finish_record(None);
    }

    /// Encodes the request into `buf` (emptied first): an
    /// ExportLogsServiceRequest of one ResourceLogs (field 1: its
    /// Resource, field 2: one ScopeLogs) of one ScopeLogs (field 1: its
    /// InstrumentationScope, then the records, field 2).
    pub(crate) fn encode_into(&mut self, buf: &mut Vec<u8>) {
        buf.clear();
        let (resource, scope) = (self.resource.encoded_len(), self.scope.encoded_len());
        let scope_logs = field_len(scope) + self.recs.len();
        let resource_logs = field_len(resource) + field_len(scope_logs);
        buf.reserve(field_len(resource_logs));
        buf.push(len_tag(1));
        prost::encoding::encode_varint(resource_logs as u64, buf);
        buf.push(len_tag(1));
        prost::encoding::encode_varint(resource as u64, buf);
        // (Into a Vec, which grows: encoding cannot run out of room.)
        let _ = self.resource.encode(buf);
        buf.push(len_tag(2));
        prost::encoding::encode_varint(scope_logs as u64, buf);
        buf.push(len_tag(1));
        prost::encoding::encode_varint(scope as u64, buf);
        let _ = self.scope.encode(buf);
        buf.extend_from_slice(&self.recs);
    }
}

/// `body` (an encoded request of one resource and scope) as requests of at
/// most `max` bytes each, its records in order: split between records,
/// and a record larger than `max` on its own sent cut to fit, marked with
/// `nanolog.truncated_bytes` (its encoded size before the cut).
/// Empty for a request without records.
pub(crate) fn split_to_fit(body: &[u8], max: usize) -> anyhow::Result<Vec<Vec<u8>>> {
    match split_framed(body, max) {
        Some(parts) => Ok(parts),
        None => split_decoded(body, max),
    }
}

/// The length-delimited fields of the message `b`, as (number, body); `None`
/// if it holds a field of another wire type or does not parse.
fn len_fields(mut b: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = prost::encoding::decode_varint(&mut b).ok()?;
        if key & 7 != 2 {
            return None;
        }
        let len = usize::try_from(prost::encoding::decode_varint(&mut b).ok()?).ok()?;
        let body = b.get(..len)?;
        b = &b[len..];
        out.push((key >> 3, body));
    }
    Some(out)
}

/// [`split_to_fit`] of a request as [`Batch::encode_into`] frames it (one
/// resource, one scope, then the records): its records' bytes regrouped as
/// they are, none decoded but one over `max` alone, which is cut. `None`
/// for a request of another shape (read whole by [`split_decoded`]).
/// Decoding a request to split it, and encoding the parts again, was 76%
/// of ship's CPU on a traced log whose batches passed 4 MiB (2026-12-06).
fn split_framed(body: &[u8], max: usize) -> Option<Vec<Vec<u8>>> {
    let request = len_fields(body)?;
    let [(1, resource_logs)] = request[..] else {
        return None;
    };
    let resource_logs = len_fields(resource_logs)?;
    let [(1, resource), (2, scope_logs)] = resource_logs[..] else {
        return None;
    };
    let scope_logs = len_fields(scope_logs)?;
    let (&(1, scope), records) = scope_logs.split_first()? else {
        return None;
    };
    if records.iter().any(|&(n, _)| n != 2) {
        return None;
    }
    let frame = |recs: &[u8]| -> Vec<u8> {
        let scope_logs = field_len(scope.len()) + recs.len();
        let resource_logs = field_len(resource.len()) + field_len(scope_logs);
        let mut out = Vec::with_capacity(field_len(resource_logs));
        out.push(len_tag(1));
        prost::encoding::encode_varint(resource_logs as u64, &mut out);
        put_field(&mut out, 1, resource);
        out.push(len_tag(2));
        prost::encoding::encode_varint(scope_logs as u64, &mut out);
        put_field(&mut out, 1, scope);
        out.extend_from_slice(recs);
        out
    };
    // The request around the records, and a record's own framing.
    let overhead = frame(&[]).len() + 32;
    let room = max.saturating_sub(overhead).max(1024);
    let mut parts = Vec::new();
    let mut cur = Vec::new();
    for &(_, rec) in records {
        let cut;
        let rec = if rec.len() + 8 > room {
            let mut r = LogRecord::decode(rec).ok()?;
            cut_to_fit(&mut r, room);
            cut = r.encode_to_vec();
            &cut[..]
        } else {
            rec
        };
        if !cur.is_empty() && cur.len() + field_len(rec.len()) > room {
            parts.push(frame(&cur));
            cur.clear();
        }
        put_field(&mut cur, 2, rec);
    }
    if !cur.is_empty() {
        parts.push(frame(&cur));
    }
    Some(parts)
}

/// [`split_to_fit`] of any request, decoded whole and its parts encoded.
fn split_decoded(body: &[u8], max: usize) -> anyhow::Result<Vec<Vec<u8>>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of a request, in order, as the collector decodes them.
    fn records_of(parts: &[Vec<u8>]) -> Vec<LogRecord> {
        parts
            .iter()
            .flat_map(|p| {
                let req = ExportLogsServiceRequest::decode(&p[..]).unwrap();
                assert_eq!(req.resource_logs.len(), 1);
                let rl = &req.resource_logs[0];
                let service = &rl.resource.as_ref().unwrap().attributes[0];
                assert_eq!(service.key, "service.name");
                assert_eq!(rl.scope_logs[0].scope.as_ref().unwrap().name, "nanolog");
                rl.scope_logs[0].log_records.clone()
            })
            .collect()
    }

    /// A request split by its records' bytes holds what one decoded and
    /// encoded again holds, part for part, a record too large cut alike;
    /// both under the bound.
    #[test]
    fn a_request_split_by_its_bytes_is_the_one_split_decoded() {
        let mut b = Batch::new("svc".into(), "host".into(), Default::default());
        b.start_resource(Some(42), None);
        for i in 0..2_000u64 {
            let big = if i == 777 {
                300_000
            } else {
                (i as usize * 37) % 900
            };
            let msg = format!("note {i} {}", "x".repeat(big));
            b.push_note(i, &msg, &[("nanolog.count", i)]);
        }
        let mut body = Vec::new();
        b.encode_into(&mut body);
        let whole = records_of(std::slice::from_ref(&body));
        assert_eq!(whole.len(), 2_000);
        let max = 64 << 10;
        let framed = split_framed(&body, max).expect("a request as batches frame it");
        let decoded = split_decoded(&body, max).unwrap();
        assert!(framed.len() > 10, "{} parts", framed.len());
        for p in &framed {
            assert!(p.len() <= max, "a part of {} bytes", p.len());
        }
        assert_eq!(records_of(&framed), records_of(&decoded));
        let cut = records_of(&framed)
            .into_iter()
            .filter(|r| {
                r.attributes
                    .iter()
                    .any(|a| a.key == "nanolog.truncated_bytes")
            })
            .count();
        assert_eq!(cut, 1);
        // Another shape (two resources): read whole.
        let mut two = ExportLogsServiceRequest::decode(&body[..]).unwrap();
        two.resource_logs.push(two.resource_logs[0].clone());
        assert!(split_framed(&two.encode_to_vec(), max).is_none());
    }
}
