//! Text lines for records and gaps: what `nanolog decode` prints by default.

use nanolog_runtime::reader::{Gap, LogFile, Record};
use nanolog_runtime::text::line::{escape_line, push_prefix, push_thread_tag};
use nanolog_runtime::text::render::needs_escape;
use nanolog_runtime::text::utc::{rfc3339, UtcWriter};

use super::SiteThreadCache;

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

/// State kept across text lines: the formatted second and the prefixes.
#[derive(Default)]
pub struct Text {
    utc: UtcWriter,
    prefixes: SiteThreadCache,
}

fn text_prefix(t: &mut Text, rec: &Record<'_>, out: &mut String) {
    t.utc.write(out, rec.unix_ns(), ' ');
    out.push_str(t.prefixes.get(rec, prefix_text));
}

fn prefix_text(rec: &Record<'_>, out: &mut String) {
    let site = rec.site();
    push_prefix(
        out,
        &site.file,
        site.line,
        site.level,
        rec.thread(),
        rec.thread_name(),
    );
}

/// The line that reports a dropped-records gap.
pub fn text_gap(t: &mut Text, g: &Gap, file: &LogFile, out: &mut String) {
    t.utc.write(out, g.first_unix_ns, ' ');
    if g.is_lost() {
        out.push_str(" - LOST: ");
    } else {
        out.push_str(" - DROPPED");
        push_thread_tag(out, g.thread, file.thread_name(g.thread));
        out.push_str(": ");
    }
    out.push_str(&gap_message(g));
    out.push('\n');
}

pub(super) fn gap_message(g: &Gap) -> String {
    if g.is_lost() {
        return format!(
            "{} records lost by the writer (a failed write, or the live file deleted or cut back) between {} and {}",
            g.count,
            rfc3339(g.first_unix_ns),
            rfc3339(g.last_unix_ns)
        );
    }
    format!(
        "{} records dropped between {} and {}",
        g.count,
        rfc3339(g.first_unix_ns),
        rfc3339(g.last_unix_ns)
    )
}
