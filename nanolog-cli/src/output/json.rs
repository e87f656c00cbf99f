//! JSON: the lines of `nanolog decode --format json`, and the strings and
//! values the other subcommands' JSON output is made of.
//!
//! Hand-written for speed, like the text lines: per record only the time,
//! the thread-independent parts cached per (file, site, thread), and the
//! arguments and message are written; nothing is allocated.

use std::fmt::Write;

use nanolog_runtime::reader::{Gap, LogFile, Record, SiteEntry, Value};
use nanolog_runtime::text::render::{format_message, nine_digits, push_u64, NineDigits};
use nanolog_runtime::text::utc::UtcWriter;

use super::text::gap_message;
use super::SiteThreadCache;

/// State kept across JSON lines: the formatted second, the cached key
/// segments, and each file's `source` tail.
#[derive(Default)]
pub struct Json {
    utc: UtcWriter,
    /// The decimal seconds of the last `ts_ns` written, and those seconds.
    ts_secs: (String, i64),
    keys: SiteThreadCache,
    /// (file address, `,"source":"…"}` and the newline).
    sources: Vec<(usize, Box<str>)>,
}

impl Json {
    /// Writes `ns` in decimal: the seconds' digits cached (they change once
    /// a second), then the nine digits of the nanoseconds.
    fn ts_ns(&mut self, out: &mut String, ns: i64, nanos: &NineDigits) {
        if ns < 1_000_000_000 {
            push_i64(out, ns);
            return;
        }
        let secs = ns / 1_000_000_000;
        if self.ts_secs.0.is_empty() || self.ts_secs.1 != secs {
            self.ts_secs.0.clear();
            push_i64(&mut self.ts_secs.0, secs);
            self.ts_secs.1 = secs;
        }
        out.push_str(&self.ts_secs.0);
        out.push_str(nanos.as_str());
    }

    fn source(&mut self, file: &LogFile) -> &str {
        let addr = file as *const LogFile as usize;
        let ix = match self.sources.iter().position(|(a, _)| *a == addr) {
            Some(ix) => ix,
            None => {
                let mut s = String::from(",\"source\":");
                json_string(&file.path().to_string_lossy(), &mut s);
                s.push_str("}\n");
                self.sources.push((addr, s.into_boxed_str()));
                self.sources.len() - 1
            }
        };
        &self.sources[ix].1
    }
}

/// One JSON object for a record (and its newline), its message already
/// rendered in `msg`.
pub fn json_record(j: &mut Json, rec: &Record<'_>, msg: &str, out: &mut String) {
    json_head(j, rec, out);
    json_string(msg, out);
    out.push_str(j.source(rec.file()));
}

/// As [`json_record`], rendering the message straight into `out` (copied
/// through `scratch` only when it needs escaping), from the same decoded
/// arguments as `args`.
pub fn json_record_direct(j: &mut Json, rec: &Record<'_>, out: &mut String, scratch: &mut String) {
    json_time_and_keys(j, rec, out);
    let site = rec.site();
    rec.with_args(|args| {
        json_args_and_fields(site, args, out);
        json_spans_key(rec, out);
        out.push_str(",\"msg\":\"");
        let start = out.len();
        format_message(site.message(), &site.kinds, args, out);
        if needs_json_escape(&out.as_bytes()[start..]) {
            scratch.clear();
            scratch.push_str(&out[start..]);
            out.truncate(start);
            json_escape_into(scratch, out);
        }
    });
    out.push('"');
    out.push_str(j.source(rec.file()));
}

/// Everything before the message's value.
fn json_head(j: &mut Json, rec: &Record<'_>, out: &mut String) {
    json_time_and_keys(j, rec, out);
    let site = rec.site();
    rec.with_args(|args| json_args_and_fields(site, args, out));
    json_spans_key(rec, out);
    out.push_str(",\"msg\":");
}

/// `,"spans":[..]`: see [`json_spans`].
fn json_spans_key(rec: &Record<'_>, out: &mut String) {
    out.push_str(",\"spans\":");
    json_spans(rec, out);
    // The W3C ids of its innermost traced span (README "Trace context"), absent
    // outside one.
    if let Some(t) = rec.trace_context() {
        out.push_str(",\"trace_id\":\"");
        out.push_str(&t.trace_hex());
        out.push_str("\",\"span_id\":\"");
        out.push_str(&t.span_hex());
        out.push('"');
    }
    if rec.spans_lost() {
        // Some of its spans were lost to damage: `spans` holds the rest.
        out.push_str(",\"spans_lost\":true");
    }
    if rec.recovered() {
        // Read from a killed writer's rings (README "What survives what").
        out.push_str(",\"recovered\":true");
    }
}

/// The JSON array of the spans a record was made in, outermost first:
/// `[{"name":"request","fields":{"id":7}}, ..]`, `[]` outside spans.
pub fn json_spans(rec: &Record<'_>, out: &mut String) {
    if !rec.in_spans() {
        out.push_str("[]");
        return;
    }
    out.push('[');
    let mut first = true;
    rec.for_each_span(|s| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str("{\"name\":");
        json_string(s.name(), out);
        out.push_str(",\"fields\":{");
        let mut first_field = true;
        s.for_each_field(|name, v| {
            if !first_field {
                out.push(',');
            }
            first_field = false;
            json_string(name, out);
            out.push(':');
            json_value(&v, out);
        });
        out.push_str("}}");
    });
    out.push(']');
}

/// `{"ts_ns":…,"ts":"…"` and the cached keys up to the opening of `args`.
fn json_time_and_keys(j: &mut Json, rec: &Record<'_>, out: &mut String) {
    let ns = rec.unix_ns();
    // The nanoseconds' digits once, for both keys.
    let nanos = nine_digits(ns.rem_euclid(1_000_000_000) as u32);
    out.push_str("{\"ts_ns\":");
    j.ts_ns(out, ns, &nanos);
    out.push_str(",\"ts\":\"");
    j.utc.write_with(out, ns, 'T', &nanos);
    out.push_str("Z\"");
    out.push_str(j.keys.get(rec, record_keys));
}

/// The values of `args` (its `[` already written), then `fields`: the named
/// arguments by name.
fn json_args_and_fields(site: &SiteEntry, args: &[Value<'_>], out: &mut String) {
    json_arg_values(args, out);
    out.push_str("],\"fields\":");
    json_fields(site, args, out);
}

/// The values of `args`, comma-separated (no brackets).
fn json_arg_values(args: &[Value<'_>], out: &mut String) {
    for (i, v) in args.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_value(v, out);
    }
}

/// The JSON array of a record's argument values, as in `args`.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub fn json_args(args: &[Value<'_>], out: &mut String) {
    out.push('[');
    json_arg_values(args, out);
    out.push(']');
}

/// The JSON object of a record's named arguments, as in `fields`.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub fn json_fields(site: &SiteEntry, args: &[Value<'_>], out: &mut String) {
    out.push('{');
    if site.names.is_empty() {
        out.push('}');
        return;
    }
    let mut first = true;
    for (i, v) in args.iter().enumerate() {
        if let Some(name) = site.name(i) {
            if !first {
                out.push(',');
            }
            first = false;
            json_string(name, out);
            out.push(':');
            json_value(v, out);
        }
    }
    out.push('}');
}

/// The keys from `level` to the opening of `args`: the same for every record
/// of a call site on a thread.
fn record_keys(rec: &Record<'_>, out: &mut String) {
    let site = rec.site();
    out.push_str(",\"level\":\"");
    out.push_str(site.level.as_str());
    out.push_str("\",\"thread\":");
    push_u64(out, u64::from(rec.thread()));
    out.push_str(",\"thread_name\":");
    match rec.thread_name() {
        Some(n) => json_string(n, out),
        None => out.push_str("null"),
    }
    out.push_str(",\"file\":");
    json_string(&site.file, out);
    out.push_str(",\"line\":");
    push_u64(out, u64::from(site.line));
    out.push_str(",\"module\":");
    json_string(&site.module, out);
    out.push_str(",\"target\":");
    json_string(&site.target, out);
    out.push_str(",\"fmt\":");
    json_string(&site.format, out);
    out.push_str(",\"args\":[");
}

/// The line that reports a dropped-records gap: the record keys too (null
/// where they do not apply), so a consumer reading every line as a record
/// finds them; `dropped` is what marks a gap.
pub fn json_gap(j: &mut Json, g: &Gap, file: &LogFile, out: &mut String) {
    out.push_str("{\"ts_ns\":");
    push_i64(out, g.first_unix_ns);
    out.push_str(",\"ts\":\"");
    j.utc.write(out, g.first_unix_ns, 'T');
    out.push_str("Z\",\"dropped\":");
    push_u64(out, g.count);
    if g.is_lost() {
        out.push_str(",\"lost\":true,\"thread\":null,\"thread_name\":null");
    } else {
        out.push_str(",\"thread\":");
        push_u64(out, u64::from(g.thread));
        out.push_str(",\"thread_name\":");
        match file.thread_name(g.thread) {
            Some(n) => json_string(n, out),
            None => out.push_str("null"),
        }
    }
    out.push_str(",\"first_ts_ns\":");
    push_i64(out, g.first_unix_ns);
    out.push_str(",\"last_ts_ns\":");
    push_i64(out, g.last_unix_ns);
    out.push_str(",\"level\":null,\"file\":null,\"line\":null,\"target\":null,\"fmt\":null,\"args\":[],\"fields\":{},\"spans\":[],\"msg\":");
    json_string(&gap_message(g), out);
    out.push_str(j.source(file));
}

/// For each byte, the escape JSON needs (0: none; 1: `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = 1;
        c += 1;
    }
    t[0x7f] = 1;
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t
};

/// Appends `s` as a JSON string literal. Control characters and DEL are
/// escaped; everything else, UTF-8 included, is copied as it is (runs of
/// plain bytes in one copy).
pub fn json_string(s: &str, out: &mut String) {
    out.push('"');
    json_escape_into(s, out);
    out.push('"');
}

/// Appends `s` escaped for the inside of a JSON string.
fn json_escape_into(s: &str, out: &mut String) {
    let b = s.as_bytes();
    if !needs_json_escape(b) {
        out.push_str(s);
        return;
    }
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let e = ESCAPE[usize::from(c)];
        if e == 0 {
            continue;
        }
        // Only ASCII bytes are escaped, so `start` and `i` are on char
        // boundaries.
        out.push_str(&s[start..i]);
        if e == 1 {
            let _ = write!(out, "\\u{:04x}", c);
        } else {
            out.push('\\');
            out.push(char::from(e));
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// Whether `b` holds a byte JSON escapes: a control character, DEL, `"` or
/// `\`. Eight bytes at a time.
fn needs_json_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    #[inline(always)]
    fn has_zero(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGH
    }
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Bytes below 0x20: x - 0x20 borrows into the high bit where x's
        // high bit is clear.
        let hit = (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
            | has_zero(x ^ (ONES * 0x7f))
            | has_zero(x ^ (ONES * u64::from(b'"')))
            | has_zero(x ^ (ONES * u64::from(b'\\')));
        if hit != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&c| ESCAPE[usize::from(c)] != 0)
}

/// Appends a value as JSON: integers exact, finite floats as Rust prints
/// them (`{:?}`), NaN and infinities as strings.
pub fn json_value(v: &Value<'_>, out: &mut String) {
    match *v {
        Value::Uint(u) => match u64::try_from(u) {
            Ok(u) => push_u64(out, u),
            Err(_) => {
                let _ = write!(out, "{u}");
            }
        },
        Value::Int(i) => {
            if i < 0 {
                out.push('-');
            }
            match u64::try_from(i.unsigned_abs()) {
                Ok(u) => push_u64(out, u),
                Err(_) => {
                    let _ = write!(out, "{}", i.unsigned_abs());
                }
            }
        }
        Value::F32(f) => {
            if !json_non_finite(f64::from(f), out) {
                let _ = write!(out, "{f:?}");
            }
        }
        Value::F64(f) => {
            if !json_non_finite(f, out) {
                let _ = write!(out, "{f:?}");
            }
        }
        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Value::Char(c) => json_string(c.encode_utf8(&mut [0; 4]), out),
        Value::Str(s) => json_string(s, out),
        // Hex digits need no escaping.
        Value::Hex(h) => {
            out.push('"');
            h.for_each_piece(|d| out.push_str(d));
            out.push('"');
        }
        // A prefix and digits (format version 7): the digits need no
        // escaping, and nothing is allocated for them.
        Value::Numbered(n) => {
            out.push('"');
            json_escape_into(n.prefix(), out);
            out.extend(std::iter::repeat_n('0', n.zeros()));
            let _ = write!(out, "{}\"", n.number());
        }
        Value::Rendered(r) => {
            // One value per argument: the first rendering (they differ only
            // when the argument is formatted by several placeholders).
            json_string(r.get(0).unwrap_or(""), out);
        }
    }
}

/// Writes NaN and the infinities as JSON strings; false for a finite value.
fn json_non_finite(f: f64, out: &mut String) -> bool {
    if f.is_nan() {
        out.push_str("\"NaN\"");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "\"inf\"" } else { "\"-inf\"" });
    } else {
        return false;
    }
    true
}

fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-table escaper against the char-by-char definition.
    #[test]
    fn json_string_escapes_exactly_what_the_definition_does() {
        fn reference(s: &str) -> String {
            let mut out = String::from('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 || c == '\u{7f}' => {
                        let _ = write!(out, "\\u{:04x}", c as u32);
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        let cases = [
            "",
            "plain",
            "quote \" and \\ back",
            "tab\tnl\ncr\r",
            "\u{0}\u{1f}\u{7f}",
            "ünïcødé ✓ 𝄞",
            "\u{2028}\u{85}",
            "end\\",
            "\"",
        ];
        for s in cases {
            let mut got = String::new();
            json_string(s, &mut got);
            assert_eq!(got, reference(s), "{s:?}");
        }
        // Every single char below 0x800, alone and between text.
        for c in (0u32..0x800).filter_map(char::from_u32) {
            let s = format!("a{c}b");
            let mut got = String::new();
            json_string(&s, &mut got);
            assert_eq!(got, reference(&s), "{c:?}");
        }
    }

    #[test]
    fn ts_ns_is_the_plain_decimal() {
        let mut j = Json::default();
        for ns in [
            0i64,
            5,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            1_795_000_000_000_000_042,
            1_795_000_000_999_999_999,
            1_795_000_001_000_000_000,
            -1,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = String::new();
            j.ts_ns(
                &mut out,
                ns,
                &nine_digits(ns.rem_euclid(1_000_000_000) as u32),
            );
            assert_eq!(out, ns.to_string());
        }
    }

    #[test]
    fn integers_are_exact_at_every_width() {
        let mut out = String::new();
        for v in [
            Value::Uint(0),
            Value::Uint(u128::from(u64::MAX)),
            Value::Uint(u128::MAX),
            Value::Int(-1),
            Value::Int(i128::from(i64::MIN)),
            Value::Int(i128::MIN),
            Value::Int(i128::MAX),
        ] {
            out.clear();
            json_value(&v, &mut out);
            let want = match v {
                Value::Uint(u) => u.to_string(),
                Value::Int(i) => i.to_string(),
                _ => unreachable!(),
            };
            assert_eq!(out, want);
        }
    }
}
