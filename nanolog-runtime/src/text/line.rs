//! The text line of a record, as `nanolog decode` prints it and the mirror
//! writes it:
//! `2026-11-22 11:02:03.123456789Z src/main.rs:42 INFO[name:3] audit: message`
//! (the target only when it is not the module path).

use std::fmt::Write;

use super::render::{needs_escape, push_u64};
use super::utc::UtcWriter;
use crate::level::Level;

/// Appends a line's time in UTC: `2026-11-22 11:02:03.123456789Z`.
pub fn push_utc_time(utc: &mut UtcWriter, out: &mut String, unix_ns: i64) {
    utc.write(out, unix_ns, ' ');
    out.push('Z');
}

/// Colours for the level in a line read on a terminal (ANSI SGR codes).
pub fn level_color(level: Level) -> &'static str {
    match level {
        Level::Error => "\x1b[31m",
        Level::Warn => "\x1b[33m",
        Level::Info => "\x1b[32m",
        Level::Debug => "\x1b[34m",
        Level::Trace => "\x1b[35m",
    }
}

/// What the prefix of a line says of its call site.
pub struct Prefix<'a> {
    pub file: &'a str,
    pub line: u32,
    pub level: Level,
    pub thread: u32,
    pub name: Option<&'a str>,
    /// Shown when it is not `module` (a `target:` the call gave, a bridge's).
    pub target: &'a str,
    pub module: &'a str,
    /// Colour the level (ANSI).
    pub color: bool,
}

/// Appends what follows the time: ` src/main.rs:42 INFO[name:3]: `, or
/// ` src/main.rs:42 INFO[name:3] audit: ` for a target of its own.
pub fn push_prefix(out: &mut String, p: &Prefix<'_>) {
    out.push(' ');
    out.push_str(p.file);
    out.push(':');
    push_u64(out, u64::from(p.line));
    out.push(' ');
    if p.color {
        out.push_str(level_color(p.level));
        out.push_str(p.level.as_str());
        out.push_str("\x1b[0m");
    } else {
        out.push_str(p.level.as_str());
    }
    push_thread_tag(out, p.thread, p.name);
    if !p.target.is_empty() && p.target != p.module {
        out.push(' ');
        escape_line(p.target, out);
    }
    out.push_str(": ");
}

/// The mark of a record a recovery wrote (README "What survives what"),
/// after its prefix.
pub const RECOVERED: &str = "<recovered>: ";

/// Appends a record's line after its time, laid out here for every writer
/// of one (`nanolog decode`, the mirror): the prefix `prefix` writes, the
/// recovery's mark, `SPANS: ` when `spans` writes any (their text as
/// tracing-subscriber's fmt prints a span chain), the message `message`
/// writes, and the newline; the spans and the message escaped as a line
/// needs ([`escape_line`]). `may_escape` false says the message cannot
/// hold a character to escape (it is not looked at); `scratch` is for the
/// spans and a message that must be escaped.
pub fn push_rest(
    out: &mut String,
    prefix: impl FnOnce(&mut String),
    recovered: bool,
    spans: impl FnOnce(&mut String),
    message: impl FnOnce(&mut String),
    may_escape: bool,
    scratch: &mut String,
) {
    prefix(out);
    if recovered {
        out.push_str(RECOVERED);
    }
    scratch.clear();
    spans(scratch);
    if !scratch.is_empty() {
        escape_line(scratch, out);
        out.push_str(": ");
    }
    // The message straight into `out`, and moved out to be escaped only
    // when it holds a byte that may need it.
    let start = out.len();
    message(out);
    if may_escape && needs_escape(&out.as_bytes()[start..]) {
        scratch.clear();
        scratch.push_str(&out[start..]);
        out.truncate(start);
        escape_line(scratch, out);
    }
    out.push('\n');
}

/// Appends `[name:3]`, or `[3]` for a thread without a name.
pub fn push_thread_tag(out: &mut String, id: u32, name: Option<&str>) {
    out.push('[');
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        escape_line(n, out);
        out.push(':');
    }
    push_u64(out, u64::from(id));
    out.push(']');
}

/// Appends `msg` exactly as it is, unless it holds a character that could
/// break the one-line-per-record output (a newline, a carriage return, a
/// tab, another control character: terminal escape sequences start with
/// one; U+0085, U+2028, U+2029). Then those are escaped (`\n`, `\t`,
/// `\u{1b}`), and so is every backslash, so the escaped line reads back
/// unambiguously.
pub fn escape_line(msg: &str, out: &mut String) {
    if !needs_escape(msg.as_bytes()) || !msg.chars().any(breaks_line) {
        out.push_str(msg);
        return;
    }
    for c in msg.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if breaks_line(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// A character a one-line output escapes.
fn breaks_line(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}
