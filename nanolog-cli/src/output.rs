//! Text and JSON lines for records and gaps.

use nanolog_runtime::reader::render::{escape_line, json_string, json_value};
use nanolog_runtime::reader::time::{rfc3339, write_utc};
use nanolog_runtime::reader::{Gap, LogFile, Record};

/// `2026-11-22 11:02:03.123456789 src/main.rs:42 INFO[name:3]: message`
pub fn text_record(rec: &Record<'_>, msg: &str, out: &mut String) {
    write_utc(out, rec.unix_ns(), ' ');
    out.push(' ');
    let site = rec.site();
    out.push_str(&site.file);
    out.push(':');
    push_u64(out, u64::from(site.line));
    out.push(' ');
    out.push_str(site.level.as_str());
    thread_tag(out, rec.thread(), rec.thread_name());
    out.push_str(": ");
    escape_line(msg, out);
    out.push('\n');
}

fn thread_tag(out: &mut String, id: u32, name: Option<&str>) {
    out.push('[');
    if let Some(n) = name {
        escape_line(n, out);
        out.push(':');
    }
    push_u64(out, u64::from(id));
    out.push(']');
}

fn push_u64(out: &mut String, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("?"));
}

/// One JSON object for a record.
pub fn json_record(rec: &Record<'_>, msg: &str, out: &mut String) {
    let ns = rec.unix_ns();
    let site = rec.site();
    out.push_str("{\"ts_ns\":");
    out.push_str(&ns.to_string());
    out.push_str(",\"ts\":\"");
    out.push_str(&rfc3339(ns));
    out.push_str("\",\"level\":\"");
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
    out.push_str(",\"fmt\":");
    json_string(&site.format, out);
    out.push_str(",\"args\":[");
    rec.with_args(|args| {
        for (i, v) in args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_value(v, out);
        }
    });
    out.push_str("],\"msg\":");
    json_string(msg, out);
    out.push_str(",\"source\":");
    json_string(&rec.file().path().to_string_lossy(), out);
    out.push_str("}\n");
}

/// The line that reports a dropped-records gap.
pub fn text_gap(g: &Gap, file: &LogFile, out: &mut String) {
    write_utc(out, g.first_unix_ns, ' ');
    out.push_str(" - DROPPED");
    thread_tag(out, g.thread, file.thread_name(g.thread));
    out.push_str(": ");
    push_u64(out, g.count);
    out.push_str(" records dropped between ");
    out.push_str(&rfc3339(g.first_unix_ns));
    out.push_str(" and ");
    out.push_str(&rfc3339(g.last_unix_ns));
    out.push('\n');
}

pub fn json_gap(g: &Gap, file: &LogFile, out: &mut String) {
    out.push_str("{\"ts_ns\":");
    out.push_str(&g.first_unix_ns.to_string());
    out.push_str(",\"ts\":\"");
    out.push_str(&rfc3339(g.first_unix_ns));
    out.push_str("\",\"dropped\":");
    push_u64(out, g.count);
    out.push_str(",\"thread\":");
    push_u64(out, u64::from(g.thread));
    out.push_str(",\"thread_name\":");
    match file.thread_name(g.thread) {
        Some(n) => json_string(n, out),
        None => out.push_str("null"),
    }
    out.push_str(",\"first_ts_ns\":");
    out.push_str(&g.first_unix_ns.to_string());
    out.push_str(",\"last_ts_ns\":");
    out.push_str(&g.last_unix_ns.to_string());
    out.push_str(",\"source\":");
    json_string(&file.path().to_string_lossy(), out);
    out.push_str("}\n");
}
