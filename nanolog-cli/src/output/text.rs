//! Text lines for records and gaps: what `nanolog decode` prints by default.

use nanolog_runtime::reader::{Gap, LogFile, Record};
use nanolog_runtime::text::line::{push_prefix, push_rest, push_thread_tag, push_utc_time, Prefix};
use nanolog_runtime::text::utc::{rfc3339, UtcWriter};

use super::SiteThreadCache;

/// `2026-11-22 11:02:03.123456789 src/main.rs:42 INFO[name:3]: message`,
/// `msg` the record's message as rendered.
pub fn text_record(t: &mut Text, rec: &Record<'_>, msg: &str, out: &mut String) {
    let mut scratch = std::mem::take(&mut t.scratch);
    text_line(t, rec, out, |o| o.push_str(msg), true, &mut scratch);
    t.scratch = scratch;
}

/// As [`text_record`], rendering straight into `out` (no copy unless the
/// message needs escaping; `scratch` is used then).
pub fn text_record_direct(t: &mut Text, rec: &Record<'_>, out: &mut String, scratch: &mut String) {
    let may = rec.may_need_escape();
    text_line(t, rec, out, |o| rec.render(o), may, scratch);
}

/// A record's line (`text/line.rs` lays it out): its time, its prefix
/// cached per site and thread, its spans, its message as `message` writes
/// it.
fn text_line(
    t: &mut Text,
    rec: &Record<'_>,
    out: &mut String,
    message: impl FnOnce(&mut String),
    may_escape: bool,
    scratch: &mut String,
) {
    t.write_time(out, rec.unix_ns());
    let color = t.color;
    let prefixes = &mut t.prefixes;
    push_rest(
        out,
        |o| o.push_str(prefixes.get(rec, |rec, out| prefix_text(rec, color, out))),
        rec.recovered(),
        |o| {
            if rec.in_spans() {
                spans_text(rec, o)
            }
        },
        message,
        may_escape,
        scratch,
    );
}

/// State kept across text lines: the formatted second and the prefixes.
#[derive(Default)]
pub struct Text {
    utc: UtcWriter,
    prefixes: SiteThreadCache,
    /// Colour the level (`--color`).
    color: bool,
    /// Times in this zone with its offset (`--local`), else UTC with `Z`.
    local: Option<jiff::tz::TimeZone>,
    /// A message to escape, when it was rendered before (`--grep`).
    scratch: String,
}

impl Text {
    /// Text lines with the level coloured or not, times in `local` or UTC.
    pub fn new(color: bool, local: Option<jiff::tz::TimeZone>) -> Text {
        Text {
            color,
            local,
            ..Default::default()
        }
    }

    /// `2026-11-22 11:02:03.123456789Z`, or with `--local`
    /// `2026-11-22 12:02:03.123456789+01:00`.
    fn write_time(&mut self, out: &mut String, unix_ns: i64) {
        match &self.local {
            None => push_utc_time(&mut self.utc, out, unix_ns),
            Some(tz) => match jiff::Timestamp::from_nanosecond(i128::from(unix_ns)) {
                Ok(ts) => {
                    let z = ts.to_zoned_datetime(tz.clone());
                    let _ = std::fmt::Write::write_fmt(
                        out,
                        format_args!("{}", z.strftime("%Y-%m-%d %H:%M:%S%.9f%:z")),
                    );
                }
                Err(_) => push_utc_time(&mut self.utc, out, unix_ns),
            },
        }
    }
}

/// `request{id=7}:db{table="users"}` (as tracing-subscriber's fmt prints
/// the spans of an event).
fn spans_text(rec: &Record<'_>, out: &mut String) {
    let mut first = true;
    if rec.spans_lost() {
        // Spans of it the file lost to damage: said where they stood.
        out.push_str("<spans lost>");
        first = false;
    }
    rec.for_each_span(|s| {
        if !first {
            out.push(':');
        }
        first = false;
        s.render(out);
    });
}

fn prefix_text(rec: &Record<'_>, color: bool, out: &mut String) {
    let site = rec.site();
    push_prefix(
        out,
        &Prefix {
            file: &site.file,
            line: site.line,
            level: site.level,
            thread: rec.thread(),
            name: rec.thread_name(),
            target: &site.target,
            module: &site.module,
            color,
        },
    );
}

/// The line that reports a dropped-records gap.
pub fn text_gap(t: &mut Text, g: &Gap, file: &LogFile, out: &mut String) {
    t.write_time(out, g.first_unix_ns);
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

pub fn gap_message(g: &Gap) -> String {
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
