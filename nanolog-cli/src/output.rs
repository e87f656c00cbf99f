//! Text and JSON lines for records and gaps.

use nanolog_runtime::reader::render::{
    escape_line, json_string, json_value, needs_escape, push_u64,
};
use nanolog_runtime::reader::time::{rfc3339, UtcWriter};
use nanolog_runtime::reader::{Gap, LogFile, Record};

/// `2026-11-22 11:02:03.123456789 src/main.rs:42 INFO[name:3]: message`
pub fn text_record(t: &mut Text, rec: &Record<'_>, msg: &str, out: &mut String) {
    text_prefix(t, rec, out);
    escape_line(msg, out);
    out.push('\n');
}

/// As [`text_record`], rendering straight into `out` (no copy unless the
/// message needs escaping; `scratch` is used then).
pub fn text_record_direct(t: &mut Text, rec: &Record<'_>, out: &mut String, scratch: &mut String) {
    text_prefix(t, rec, out);
    let start = out.len();
    rec.render(out);
    if rec.may_need_escape() && needs_escape(&out.as_bytes()[start..]) {
        scratch.clear();
        scratch.push_str(&out[start..]);
        out.truncate(start);
        escape_line(scratch, out);
    }
    out.push('\n');
}

/// (file address, site id, thread id, prefix text).
type PrefixSlot = (usize, u32, u32, Box<str>);

/// The text of a line between the time and the message (`" src/main.rs:42
/// INFO[main:1]: "`), cached per (file, site, thread): it is the same for
/// every record of a call site on a thread.
#[derive(Default)]
pub struct PrefixCache {
    slots: Vec<Option<PrefixSlot>>,
}

impl PrefixCache {
    const SLOTS: usize = 1024;

    fn get(&mut self, rec: &Record<'_>) -> &str {
        if self.slots.is_empty() {
            self.slots = vec![None; Self::SLOTS];
        }
        let file = rec.file() as *const _ as usize;
        let (site, thread) = (rec.site().id, rec.thread());
        let h = (u64::from(site) << 32 | u64::from(thread)) ^ file as u64;
        let ix = (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % Self::SLOTS;
        let hit = matches!(&self.slots[ix], Some((f, s, t, _)) if *f == file && *s == site && *t == thread);
        if !hit {
            let mut p = String::new();
            prefix_text(rec, &mut p);
            self.slots[ix] = Some((file, site, thread, p.into_boxed_str()));
        }
        match &self.slots[ix] {
            Some((.., p)) => p,
            None => "",
        }
    }
}

/// State kept across text lines: the formatted second and the prefixes.
#[derive(Default)]
pub struct Text {
    utc: UtcWriter,
    prefixes: PrefixCache,
}

fn text_prefix(t: &mut Text, rec: &Record<'_>, out: &mut String) {
    t.utc.write(out, rec.unix_ns(), ' ');
    out.push_str(t.prefixes.get(rec));
}

fn prefix_text(rec: &Record<'_>, out: &mut String) {
    out.push(' ');
    let site = rec.site();
    out.push_str(&site.file);
    out.push(':');
    push_u64(out, u64::from(site.line));
    out.push(' ');
    out.push_str(site.level.as_str());
    thread_tag(out, rec.thread(), rec.thread_name());
    out.push_str(": ");
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
pub fn text_gap(t: &mut Text, g: &Gap, file: &LogFile, out: &mut String) {
    t.utc.write(out, g.first_unix_ns, ' ');
    out.push_str(" - DROPPED");
    thread_tag(out, g.thread, file.thread_name(g.thread));
    out.push_str(": ");
    out.push_str(&gap_message(g));
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
    // The record keys too, so a consumer reading every line as a record
    // finds them; `dropped` is what marks a gap.
    out.push_str(",\"level\":null,\"file\":null,\"line\":null,\"fmt\":null,\"args\":[],\"msg\":");
    json_string(&gap_message(g), out);
    out.push_str(",\"source\":");
    json_string(&file.path().to_string_lossy(), out);
    out.push_str("}\n");
}

fn gap_message(g: &Gap) -> String {
    format!(
        "{} records dropped between {} and {}",
        g.count,
        rfc3339(g.first_unix_ns),
        rfc3339(g.last_unix_ns)
    )
}
