//! Records as OTLP log records (README "Shipping"), written straight into
//! the bytes of a request (`pb.rs`): no message tree, no allocation per
//! record once a batch's buffers have grown.
//!
//! What repeats is encoded once: a call site's severity, `code.*` and
//! `target` attributes and its fields' keys once per site, a thread's
//! attributes once per thread, a span chain (and its trace context) once
//! per span context, all of a batch's file; a record copies those bytes.

use std::collections::HashMap;
use std::fmt::Write as _;

use nanolog_runtime::reader::{Gap, LogFile, Record, TraceContext, Value};
use nanolog_runtime::text::render::format_message;
use nanolog_runtime::wire::dict::SiteEntry;
use nanolog_runtime::Level;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use prost::Message;

use super::pb::{self, bytes_field, field_len, len_tag, nested, nested_in, tag, Any};

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

/// LogRecord's fields (opentelemetry/proto/logs/v1/logs.proto).
mod field {
    pub const TIME: u8 = 1;
    pub const SEVERITY_NUMBER: u8 = 2;
    pub const SEVERITY_TEXT: u8 = 3;
    pub const BODY: u8 = 5;
    pub const ATTRIBUTES: u8 = 6;
    pub const FLAGS: u8 = 8;
    pub const TRACE_ID: u8 = 9;
    pub const SPAN_ID: u8 = 10;
    pub const OBSERVED_TIME: u8 = 11;
}

/// The request being built: one resource (the writer process of the file
/// the batch comes from), one scope (`nanolog`), its records.
///
/// Each record is encoded as it is added, into the bytes of the request's
/// records, and the request is framed around them at the end. prost's
/// encoding of a message tree computes each nested message's length once
/// for every level above it, and a record's span chain sits nine levels
/// down: 45% of ship's CPU went to lengths (`perf record`, a traced log,
/// 2026-12-06); building the tree (strings, vectors, a chain's lists) was
/// most of the rest once that was gone (51% in making chains, 2026-12-06,
/// 5a5685b's encoder).
pub(crate) struct Batch {
    /// The encoded Resource and InstrumentationScope messages.
    resource: Vec<u8>,
    scope: Vec<u8>,
    /// The batch's records, encoded (each one ScopeLogs' `log_records`
    /// field, its tag and length included), after `head_room` bytes kept
    /// for the request's head: the request is sent from this buffer, not
    /// copied into another (7% of ship's CPU on a traced log, 2026-12-06).
    recs: Vec<u8>,
    head_room: usize,
    /// How many records `recs` holds.
    len: usize,
    /// Each span context's attributes (`spans`, and `spans_lost` when
    /// some were lost), encoded as LogRecord attribute fields (where in
    /// `chain_bytes`), and its trace context, by the context's id in the
    /// batch's file.
    chains: IdMap<(std::ops::Range<usize>, Option<TraceContext>)>,
    chain_bytes: Vec<u8>,
    /// Each span's element of a `spans` array (an AnyValue of its name
    /// and fields, where in `span_bytes`) and the trace context of the
    /// records made in it, by the context it opened: a span is encoded
    /// (and its values decoded) once, for all the chains it is in.
    spans: IdMap<(std::ops::Range<usize>, Option<TraceContext>)>,
    span_bytes: Vec<u8>,
    /// A chain's array, made of its spans' elements.
    array: Vec<u8>,
    /// What each call site of the batch's file gives its records, by the
    /// site's id in the file.
    sites: IdMap<SiteBytes>,
    /// Each thread's attributes (`thread.id`, `thread.name`), and the name
    /// they were made with (a live file may name a thread later).
    threads: IdMap<(Vec<u8>, Option<String>)>,
    /// A record's message, then a value's text, made here.
    body: String,
    text: String,
    service: String,
    host: String,
    /// Attributes added to the resource (`OTEL_RESOURCE_ATTRIBUTES`).
    extra: std::sync::Arc<Vec<(String, String)>>,
}

/// A call site's constant part of its records, encoded.
struct SiteBytes {
    /// `severity_number` and `severity_text`.
    severity: Vec<u8>,
    /// The `code.filepath` and `code.lineno` attributes.
    code: Vec<u8>,
    /// The `target` attribute.
    target: Vec<u8>,
    /// Each argument's key (see [`pb::key`]), for the named ones: a field
    /// named like one of nanolog's own keys goes under `field.NAME` (keys
    /// are unique in OTLP).
    keys: Vec<Option<Vec<u8>>>,
}

impl SiteBytes {
    fn of(site: &SiteEntry) -> SiteBytes {
        let mut severity = vec![tag(field::SEVERITY_NUMBER, pb::VARINT)];
        pb::varint(severity_level(site.level), &mut severity);
        bytes_field(
            &mut severity,
            field::SEVERITY_TEXT,
            site.level.as_str().as_bytes(),
        );
        let mut code = Vec::new();
        let a = field::ATTRIBUTES;
        pb::kv(&mut code, a, "code.filepath", Any::Str(&site.file));
        pb::kv(&mut code, a, "code.lineno", Any::Int(i64::from(site.line)));
        let mut target = Vec::new();
        pb::kv(&mut target, a, "target", Any::Str(&site.target));
        let keys = (0..site.kinds.len())
            .map(|i| {
                site.name(i).map(|name| {
                    if RESERVED.contains(&name) || name.starts_with("nanolog.") {
                        pb::key(&format!("field.{name}"))
                    } else {
                        pb::key(name)
                    }
                })
            })
            .collect();
        SiteBytes {
            severity,
            code,
            target,
            keys,
        }
    }
}

/// [`severity`] as the varint it is written as.
fn severity_level(level: Level) -> u64 {
    severity(level) as u64
}

/// Span chains a batch keeps encoded, at most (then it starts again).
const CHAINS_KEPT: usize = 1 << 14;

/// A map by a file's ids (of contexts, sites, threads: small integers,
/// mostly in order), hashed by one multiplication: std's SipHash was 3% of
/// ship's CPU on a traced log (2026-12-06).
type IdMap<T> = HashMap<u32, T, std::hash::BuildHasherDefault<IdHasher>>;

/// See [`IdMap`]: Fibonacci hashing of a `u32`, spread over the high bits
/// that hashbrown's control bytes take.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Batch {
    pub(crate) fn new(
        service: String,
        host: String,
        extra: std::sync::Arc<Vec<(String, String)>>,
    ) -> Batch {
        let mut scope = Vec::new();
        bytes_field(&mut scope, 1, b"nanolog");
        bytes_field(&mut scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut b = Batch {
            resource: Vec::new(),
            scope,
            recs: Vec::new(),
            head_room: 0,
            len: 0,
            chains: IdMap::default(),
            chain_bytes: Vec::new(),
            spans: IdMap::default(),
            span_bytes: Vec::new(),
            array: Vec::new(),
            sites: IdMap::default(),
            threads: IdMap::default(),
            body: String::new(),
            text: String::new(),
            service,
            host,
            extra,
        };
        // (A batch is made ready by `start`; until then, a resource of this
        // host, so that no order of calls leaves the head without room.)
        b.start_resource(None, None);
        b
    }

    /// How many records the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Empties the batch (its buffers are kept) and sets the resource of
    /// `file`'s writer.
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
        // (Context, site and thread ids are a file's: another batch may be
        // of another file.)
        self.chains.clear();
        self.chain_bytes.clear();
        self.spans.clear();
        self.span_bytes.clear();
        self.sites.clear();
        self.threads.clear();
        let r = &mut self.resource;
        r.clear();
        pb::kv(r, 1, "service.name", Any::Str(&self.service));
        pb::kv(r, 1, "host.name", Any::Str(host.unwrap_or(&self.host)));
        if let Some(pid) = pid {
            pb::kv(r, 1, "process.pid", Any::Int(pid));
        }
        for (k, v) in self.extra.iter() {
            pb::kv(r, 1, k, Any::Str(v));
        }
        // Two tags, two lengths of at most 10 bytes, the resource and the
        // scope (see `encode_into`).
        self.head_room = 2 * 11 + field_len(r.len()) + field_len(self.scope.len());
        self.recs.resize(self.head_room, 0);
    }

    /// Adds a WARN record of nanolog's own, at `time_ns`: `message`, and
    /// each count under its attribute key (`nanolog.*`).
    pub(crate) fn push_note(&mut self, time_ns: u64, message: &str, counts: &[(&str, u64)]) {
        self.push_warning(time_ns, message, |o| {
            for &(key, n) in counts {
                let n = n.min(i64::MAX as u64) as i64;
                pb::kv(o, field::ATTRIBUTES, key, Any::Int(n));
            }
        });
    }

    /// Adds a WARN record of nanolog's own, at `time_ns`, with `message` as
    /// its body and the attributes `attrs` writes.
    fn push_warning(&mut self, time_ns: u64, message: &str, attrs: impl FnOnce(&mut Vec<u8>)) {
        nested(&mut self.recs, 2, |o| {
            put_fixed64(o, field::TIME, time_ns);
            o.push(tag(field::SEVERITY_NUMBER, pb::VARINT));
            pb::varint(severity_level(Level::Warn), o);
            bytes_field(o, field::SEVERITY_TEXT, Level::Warn.as_str().as_bytes());
            put_body(o, message);
            attrs(o);
            put_fixed64(o, field::OBSERVED_TIME, time_ns);
        });
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
            self.chain_bytes.clear();
            self.spans.clear();
            self.span_bytes.clear();
        }
        let Batch {
            chain_bytes: bytes,
            spans,
            span_bytes,
            array,
            text,
            ..
        } = self;
        // The array of the chain's spans, each an AnyValue of a key-value
        // list `name`, `fields` (two bytes kept for lengths: most of these
        // levels pass 127 bytes).
        array.clear();
        let mut trace = None;
        rec.for_each_span(|s| {
            let (own, after) = spans.entry(s.context()).or_insert_with(|| {
                let start = span_bytes.len();
                nested_in(span_bytes, 1, 2, |o| {
                    nested_in(o, 6, 2, |o| {
                        pb::kv(o, 1, "name", Any::Str(s.name()));
                        nested_in(o, 1, 2, |o| {
                            bytes_field(o, 1, b"fields");
                            nested_in(o, 2, 2, |o| {
                                nested_in(o, 6, 2, |o| {
                                    s.for_each_field(|name, v| {
                                        pb::kv(o, 1, name, any(&v, text));
                                    });
                                });
                            });
                        });
                    });
                });
                (start..span_bytes.len(), s.trace_context_in(trace))
            });
            trace = *after;
            array.extend_from_slice(&span_bytes[own.clone()]);
        });
        // KeyValue `spans`: an AnyValue of an ArrayValue of those.
        let start = bytes.len();
        let any_len = field_len(array.len());
        bytes.push(len_tag(field::ATTRIBUTES));
        pb::varint(
            (field_len(b"spans".len()) + field_len(any_len)) as u64,
            bytes,
        );
        bytes_field(bytes, 1, b"spans");
        bytes.push(len_tag(2));
        pb::varint(any_len as u64, bytes);
        bytes_field(bytes, 5, array);
        if rec.spans_lost() {
            // Some of its spans were lost to damage: `spans` holds the rest.
            pb::kv(bytes, field::ATTRIBUTES, "spans_lost", Any::Bool(true));
        }
        let range = start..bytes.len();
        self.chains.insert(ctx, (range, trace));
        ctx
    }

    /// Adds a record of the log.
    pub(crate) fn push(&mut self, rec: &Record<'_>, observed_ns: u64) {
        // Its span chain, and the trace context in it, once a context.
        let chain = rec.in_spans().then(|| self.chain(rec));
        let site = rec.site();
        let thread = rec.thread();
        let name = rec.thread_name();
        if self
            .threads
            .get(&thread)
            .is_none_or(|t| t.1.as_deref() != name)
        {
            let mut b = Vec::new();
            let a = field::ATTRIBUTES;
            pb::kv(&mut b, a, "thread.id", Any::Int(i64::from(thread)));
            if let Some(name) = name {
                pb::kv(&mut b, a, "thread.name", Any::Str(name));
            }
            self.threads.insert(thread, (b, name.map(str::to_owned)));
        }
        let Batch {
            recs,
            chains,
            chain_bytes,
            sites,
            threads,
            body,
            text,
            ..
        } = self;
        let sb = sites.entry(site.id).or_insert_with(|| SiteBytes::of(site));
        let thread = &threads[&thread].0;
        let chain = chain.and_then(|c| chains.get(&c));
        // (Most records take 128 bytes to 16 KiB: two bytes of length.)
        nested_in(recs, 2, 2, |o| {
            put_fixed64(o, field::TIME, rec.unix_ns().max(0) as u64);
            o.extend_from_slice(&sb.severity);
            rec.with_args(|args| {
                body.clear();
                format_message(site.message(), &site.kinds, args, body);
                put_body(o, body);
                o.extend_from_slice(&sb.code);
                o.extend_from_slice(thread);
                o.extend_from_slice(&sb.target);
                for (v, key) in args.iter().zip(&sb.keys) {
                    if let Some(key) = key {
                        pb::key_value(o, field::ATTRIBUTES, key, any(v, text));
                    }
                }
            });
            // The W3C ids of its innermost traced span (README "Trace
            // context"), and its flags when the span says them (bits 0-7 of
            // `flags` are W3C's).
            if let Some(t) = chain.and_then(|c| c.1.as_ref()) {
                let flags = u32::from(t.flags.unwrap_or(0));
                if flags != 0 {
                    o.push(tag(field::FLAGS, pb::FIXED32));
                    o.extend_from_slice(&flags.to_le_bytes());
                }
                bytes_field(o, field::TRACE_ID, &t.trace_id);
                bytes_field(o, field::SPAN_ID, &t.span_id);
            }
            put_fixed64(o, field::OBSERVED_TIME, observed_ns);
            // Repeated fields may come in pieces: the chain's attributes
            // follow the record's own.
            if let Some((c, _)) = chain {
                o.extend_from_slice(&chain_bytes[c.clone()]);
            }
        });
        self.len += 1;
    }

    /// Adds a record that tells of dropped (or lost) records.
    pub(crate) fn push_gap(&mut self, g: &Gap, file: &LogFile, message: &str) {
        let time = g.first_unix_ns.max(0) as u64;
        self.push_warning(time, message, |o| {
            let a = field::ATTRIBUTES;
            pb::kv(o, a, "nanolog.dropped", Any::Int(g.count as i64));
            if g.is_lost() {
                pb::kv(o, a, "nanolog.lost", Any::Bool(true));
            } else {
                pb::kv(o, a, "thread.id", Any::Int(i64::from(g.thread)));
                if let Some(name) = file.thread_name(g.thread) {
                    pb::kv(o, a, "thread.name", Any::Str(name));
                }
            }
        });
    }

    /// Makes the request: an ExportLogsServiceRequest of one
    /// ResourceLogs (field 1: its Resource, field 2: one ScopeLogs) of one
    /// ScopeLogs (field 1: its InstrumentationScope, then the records,
    /// field 2). The records' buffer becomes `buf` (`buf`'s becomes the
    /// next batch's), the request `buf[returned..]`; the batch is empty
    /// after it.
    pub(crate) fn encode_into(&mut self, buf: &mut Vec<u8>) -> usize {
        let (resource, scope) = (self.resource.len(), self.scope.len());
        let room = self.head_room;
        let scope_logs = field_len(scope) + (self.recs.len() - room);
        let resource_logs = field_len(resource) + field_len(scope_logs);
        let mut head = Vec::with_capacity(room);
        head.push(len_tag(1));
        pb::varint(resource_logs as u64, &mut head);
        bytes_field(&mut head, 1, &self.resource);
        head.push(len_tag(2));
        pb::varint(scope_logs as u64, &mut head);
        bytes_field(&mut head, 1, &self.scope);
        let at = room - head.len();
        self.recs[at..room].copy_from_slice(&head);
        std::mem::swap(&mut self.recs, buf);
        self.recs.clear();
        self.recs.resize(room, 0);
        self.len = 0;
        at
    }
}

/// Appends fixed64 field `n` = `v`, unless 0 (prost leaves it out).
fn put_fixed64(o: &mut Vec<u8>, n: u8, v: u64) {
    if v != 0 {
        o.push(tag(n, pb::FIXED64));
        o.extend_from_slice(&v.to_le_bytes());
    }
}

/// Appends a LogRecord's body: an AnyValue of string `s`.
fn put_body(o: &mut Vec<u8>, s: &str) {
    o.push(len_tag(field::BODY));
    pb::varint(field_len(s.len()) as u64, o);
    bytes_field(o, 1, s.as_bytes());
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
        pb::varint(resource_logs as u64, &mut out);
        bytes_field(&mut out, 1, resource);
        out.push(len_tag(2));
        pb::varint(scope_logs as u64, &mut out);
        bytes_field(&mut out, 1, scope);
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
        bytes_field(&mut cur, 2, rec);
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
        r.attributes.push(kv_message(
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

/// `v` as OTLP holds an attribute's value: a text made in `text` when the
/// log holds it otherwise (hex digits, a numbered string, a char, an
/// integer outside OTLP's `int64`).
fn any<'s>(v: &Value<'s>, text: &'s mut String) -> Any<'s> {
    match *v {
        Value::Uint(u) => match i64::try_from(u) {
            Ok(i) => Any::Int(i),
            Err(_) => {
                text.clear();
                let _ = write!(text, "{u}");
                Any::Str(text)
            }
        },
        Value::Int(i) => match i64::try_from(i) {
            Ok(i) => Any::Int(i),
            Err(_) => {
                text.clear();
                let _ = write!(text, "{i}");
                Any::Str(text)
            }
        },
        Value::F32(f) => Any::Double(f64::from(f)),
        Value::F64(f) => Any::Double(f),
        Value::Bool(b) => Any::Bool(b),
        Value::Str(s) => Any::Str(s),
        Value::Char(c) => {
            text.clear();
            text.push(c);
            Any::Str(text)
        }
        Value::Hex(h) => {
            text.clear();
            h.for_each_piece(|d| text.push_str(d));
            Any::Str(text)
        }
        Value::Numbered(n) => {
            text.clear();
            let _ = write!(text, "{n}");
            Any::Str(text)
        }
        // One value per argument: the first rendering (they differ only
        // when several placeholders format the argument).
        Value::Rendered(r) => Any::Str(r.get(0).unwrap_or("")),
    }
}

/// A KeyValue message (for a record decoded to be cut).
fn kv_message(key: &str, v: V) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
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

    use nanolog_runtime::reader::{Event, Filter, Merge};
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use tracing_subscriber::layer::SubscriberExt;

    /// A record as prost encodes it, built as a message tree the way ship
    /// built it before it wrote records by hand (5a5685b): the oracle of
    /// the hand-written bytes.
    fn oracle(rec: &Record<'_>, observed: u64) -> LogRecord {
        fn any(v: &Value<'_>) -> V {
            match *v {
                Value::Uint(u) => {
                    i64::try_from(u).map_or(V::StringValue(u.to_string()), V::IntValue)
                }
                Value::Int(i) => {
                    i64::try_from(i).map_or(V::StringValue(i.to_string()), V::IntValue)
                }
                Value::F32(f) => V::DoubleValue(f64::from(f)),
                Value::F64(f) => V::DoubleValue(f),
                Value::Bool(b) => V::BoolValue(b),
                Value::Char(c) => V::StringValue(c.to_string()),
                Value::Str(s) => V::StringValue(s.into()),
                Value::Hex(h) => V::StringValue(h.to_string()),
                Value::Numbered(n) => V::StringValue(n.to_string()),
                Value::Rendered(r) => V::StringValue(r.get(0).unwrap_or("").into()),
            }
        }
        let site = rec.site();
        let mut attrs = vec![
            kv_message("code.filepath", V::StringValue(site.file.clone())),
            kv_message("code.lineno", V::IntValue(i64::from(site.line))),
            kv_message("thread.id", V::IntValue(i64::from(rec.thread()))),
        ];
        if let Some(name) = rec.thread_name() {
            attrs.push(kv_message("thread.name", V::StringValue(name.into())));
        }
        attrs.push(kv_message("target", V::StringValue(site.target.clone())));
        let mut body = String::new();
        rec.with_args(|args| {
            format_message(site.message(), &site.kinds, args, &mut body);
            for (i, v) in args.iter().enumerate() {
                if let Some(name) = site.name(i) {
                    let key = if RESERVED.contains(&name) || name.starts_with("nanolog.") {
                        format!("field.{name}")
                    } else {
                        name.to_owned()
                    };
                    attrs.push(kv_message(&key, any(v)));
                }
            }
        });
        let mut lr = LogRecord {
            time_unix_nano: rec.unix_ns().max(0) as u64,
            observed_time_unix_nano: observed,
            severity_number: severity(site.level),
            severity_text: site.level.as_str().into(),
            body: Some(AnyValue {
                value: Some(V::StringValue(body)),
            }),
            ..Default::default()
        };
        if rec.in_spans() {
            let mut spans = Vec::new();
            rec.for_each_span(|s| {
                let fields = s
                    .fields()
                    .iter()
                    .map(|(name, v)| kv_message(name, any(v)))
                    .collect();
                spans.push(AnyValue {
                    value: Some(V::KvlistValue(KeyValueList {
                        values: vec![
                            kv_message("name", V::StringValue(s.name().into())),
                            kv_message("fields", V::KvlistValue(KeyValueList { values: fields })),
                        ],
                    })),
                });
            });
            attrs.push(kv_message(
                "spans",
                V::ArrayValue(ArrayValue { values: spans }),
            ));
            if rec.spans_lost() {
                attrs.push(kv_message("spans_lost", V::BoolValue(true)));
            }
            if let Some(t) = rec.trace_context() {
                lr.trace_id = t.trace_id.to_vec();
                lr.span_id = t.span_id.to_vec();
                lr.flags = u32::from(t.flags.unwrap_or(0));
            }
        }
        lr.attributes = attrs;
        lr
    }

    /// One logger runs in a process at a time: the tests that start one
    /// take turns.
    static LOGGER: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A log in a directory of its own named after `name`, written by
    /// `write` with a logger running (one at a time: the tests take
    /// turns); returns the directory and the log's path.
    fn logged(name: &str, write: impl FnOnce()) -> (std::path::PathBuf, std::path::PathBuf) {
        let _one = LOGGER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let d = std::env::temp_dir().join(format!("nanolog-otlp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("app.nlog");
        let logger = nanolog::Logger::builder().path(&path).start().unwrap();
        write();
        drop(logger);
        (d, path)
    }

    /// Every record of the log at `path`, pushed into one batch: the
    /// request decodes to the oracle's records, and each record's bytes
    /// are prost's encoding of the oracle's, its span chain's attributes
    /// after its own fields (repeated fields in two pieces). Returns the
    /// oracle's records.
    fn encoded_as_prost_would(path: &std::path::Path) -> Vec<LogRecord> {
        let log = LogFile::open(path).unwrap();
        let mut b = Batch::new("svc".into(), "host".into(), Default::default());
        b.start(&log);
        let mut want = Vec::new();
        for (i, ev) in Merge::unsorted(std::slice::from_ref(&log), Filter::default()).enumerate() {
            let Event::Record(rec) = ev else { continue };
            let observed = 1_000 + i as u64;
            b.push(&rec, observed);
            want.push(oracle(&rec, observed));
        }
        let mut body = Vec::new();
        let at = b.encode_into(&mut body);
        let body = body.split_off(at);
        let got = records_of(std::slice::from_ref(&body));
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w);
        }
        // Byte for byte.
        let req = len_fields(&body).unwrap();
        let rl = len_fields(req[0].1).unwrap();
        let sl = len_fields(rl[1].1).unwrap();
        assert_eq!(sl.len(), want.len() + 1);
        for (&(n, bytes), w) in sl[1..].iter().zip(&want) {
            assert_eq!(n, 2);
            let mut own = w.clone();
            let chain: Vec<KeyValue> = own
                .attributes
                .extract_if(.., |a| a.key == "spans" || a.key == "spans_lost")
                .collect();
            let mut expected = own.encode_to_vec();
            for a in &chain {
                bytes_field(&mut expected, 6, &a.encode_to_vec());
            }
            assert_eq!(bytes, &expected[..]);
        }
        want
    }

    /// Every record of a log of every kind of value, in spans of both
    /// kinds (the macros' and `tracing`'s, trace ids and not), from named
    /// and unnamed threads, arrives as the message prost would have
    /// encoded: the request decodes to the oracle's records, and each
    /// record's bytes are the oracle's encoding.
    #[test]
    fn records_written_by_hand_are_the_records_prost_encodes() {
        let work = |worker: u64| {
            for i in 0..300u64 {
                let _r = nanolog::span!(
                    "request",
                    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                    span_id = "00f067aa0ba902b7",
                    trace_flags = "01",
                    id = i
                );
                nanolog::info!(
                    "order {target} by {who} at {px} x {qty} ok={ok} c={c}",
                    target = "desk",
                    who = "trader-000123",
                    px = -12.5f64,
                    qty = i as i64 - 150,
                    ok = i % 2 == 0,
                    c = 'é'
                );
                nanolog::warn!(
                    "hash {h} big {big} small {small} wide {wide}",
                    h = "deadbeefcafef00d0123",
                    big = u64::MAX - i,
                    small = i32::MIN,
                    wide = u128::MAX - u128::from(i)
                );
                {
                    let _c = nanolog::span!("call", span_id = "0102030405060708", shard = worker);
                    nanolog::error!("in call {} of {}", i, worker);
                }
                if i % 50 == 0 {
                    nanolog::info!("positional {} {} {}", i, "text", 3.25f32);
                }
            }
        };
        let (d, path) = logged("oracle", || {
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("named-worker".into())
                    .spawn_scoped(s, || work(1))
                    .unwrap();
                s.spawn(|| work(2));
            });
            let subscriber = tracing_subscriber::registry().with(nanolog::tracing_layer());
            tracing::subscriber::with_default(subscriber, || {
                for r in 0..200u64 {
                    let req = tracing::info_span!("request", method = "GET", id = r, ratio = 0.5);
                    let _req = req.enter();
                    tracing::info!(status = 200u16, spans = 3u8, "accepted");
                    let db = tracing::info_span!("db", table = "orders", neg = -7i64);
                    let _db = db.enter();
                    tracing::warn!(rows = r % 17, big = u64::MAX, ok = true, "rows {}", r);
                    tracing::error!(what = ?("dbg", r), "debug value");
                }
            });
        });
        let want = encoded_as_prost_would(&path);
        assert!(want.len() > 2_000, "{} records", want.len());
        // Each kind of record is there, as the oracle makes it.
        let has = |k: &str| {
            want.iter()
                .filter(|r| r.attributes.iter().any(|a| a.key == k))
                .count()
        };
        assert!(has("field.target") > 0 && has("thread.name") > 0 && has("spans") > 0);
        assert!(want.iter().any(|r| r.flags == 1) && want.iter().any(|r| r.trace_id.is_empty()));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// More span contexts in a batch than it keeps encoded (`CHAINS_KEPT`):
    /// the chains and the spans' elements are made again after the batch
    /// lets them go, and every record is still the oracle's.
    #[test]
    fn chains_past_what_a_batch_keeps_are_made_again_alike() {
        let n = CHAINS_KEPT as u64 + 3_000;
        let (d, path) = logged("chains", || {
            for i in 0..n {
                let _r = nanolog::span!("request", span_id = "00f067aa0ba902b7", id = i);
                let _c = nanolog::span!("call", shard = i % 7);
                nanolog::info!("in call {}", i);
            }
        });
        let want = encoded_as_prost_would(&path);
        assert_eq!(want.len() as u64, n);
        let _ = std::fs::remove_dir_all(&d);
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
        let at = b.encode_into(&mut body);
        let body = body.split_off(at);
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
