//! The text line of a record, as `nanolog decode` prints it and the mirror
//! writes it: `2026-11-22 11:02:03.123456789 src/main.rs:42 INFO[name:3]: message`.

use std::fmt::Write;

use super::render::{needs_escape, push_u64};
use crate::level::Level;

/// Appends what follows the time: ` src/main.rs:42 INFO[name:3]: `.
pub fn push_prefix(
    out: &mut String,
    file: &str,
    line: u32,
    level: Level,
    thread: u32,
    name: Option<&str>,
) {
    out.push(' ');
    out.push_str(file);
    out.push(':');
    push_u64(out, u64::from(line));
    out.push(' ');
    out.push_str(level.as_str());
    push_thread_tag(out, thread, name);
    out.push_str(": ");
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

/// Appends `msg` with what could break the one-line-per-record text output
/// escaped: newlines, carriage returns, tabs, other control characters
/// (terminal escape sequences start with one), and backslashes.
pub fn escape_line(msg: &str, out: &mut String) {
    if !needs_escape(msg.as_bytes()) {
        out.push_str(msg);
        return;
    }
    for c in msg.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}
