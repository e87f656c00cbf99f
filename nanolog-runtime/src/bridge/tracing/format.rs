//! The formatting path: an event the typed path does not take, its
//! message and fields formatted on the calling thread, and a `log` record
//! that tracing-log made an event of.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};
use tracing_core::Event;

use super::*;
use crate::bridge::template::Pieces;
use crate::bridge::{Arg, Key};
use crate::level::Level;
use crate::wire::format::ArgKind;

#[derive(Default)]
pub(super) struct Fields {
    /// The message, write by write (its template is learnt from them).
    pub(super) message: Option<Pieces>,
    pub(super) fields: Vec<(&'static str, Arg<String>)>,
    /// A `log` record that tracing-log made an event of: where it really
    /// came from (`log.target`, `log.module_path`, `log.file`, `log.line`).
    pub(super) log: Option<LogOrigin>,
}

#[derive(Default)]
pub(super) struct LogOrigin {
    pub(super) target: Option<String>,
    pub(super) module: Option<String>,
    pub(super) file: Option<String>,
    pub(super) line: Option<u32>,
}

impl Fields {
    #[inline(always)]
    pub(super) fn push(&mut self, field: &Field, v: Arg<String>) {
        if let Some(o) = &mut self.log {
            let text = || match &v {
                Arg::Str(s) => s.clone(),
                other => other.to_string(),
            };
            match field.name() {
                "log.target" => return o.target = Some(text()),
                "log.module_path" => return o.module = Some(text()),
                "log.file" => return o.file = Some(text()),
                "log.line" => {
                    return o.line = match v {
                        Arg::U64(n) => u32::try_from(n).ok(),
                        Arg::I64(n) => u32::try_from(n).ok(),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        if field.name() == "message" {
            let mut m = Pieces::default();
            match v {
                Arg::Str(s) => m.set(&s),
                other => m.set(&other.to_string()),
            }
            self.message = Some(m);
        } else {
            self.fields.push((field.name(), v));
        }
    }
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Arg::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Arg::U64(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, Arg::I128(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, Arg::U128(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Arg::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Arg::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Arg::Str(value.to_owned()));
    }
    /// `Debug` and `Display` values (`%x` fields arrive as `Debug` wrappers
    /// that print their `Display`) as their text; the message
    /// (`format_args!`, which prints as it reads) write by write, as its
    /// template is learnt from them.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut m = Pieces::default();
        m.format(|m| write!(m, "{value:?}"), "<Debug panicked>");
        if field.name() == "message" {
            self.message = Some(m);
        } else {
            self.push(field, Arg::Str(m.text));
        }
    }
}

/// Whether `meta` is tracing-log's: a `log` record made a `tracing` event
/// (target `log`, with `log.target` and the other origin fields).
pub(super) fn from_tracing_log(meta: &tracing_core::Metadata<'_>) -> bool {
    meta.target() == "log" && meta.fields().field("log.target").is_some()
}

/// Where an event comes from: level, target, file, line, module.
pub(super) struct Origin<'a> {
    pub(super) level: Level,
    pub(super) target: &'a str,
    pub(super) file: &'a str,
    pub(super) line: u32,
    pub(super) module: &'a str,
}

impl<'a> Origin<'a> {
    /// A `tracing` callsite's own origin.
    pub(super) fn of(meta: &'a tracing_core::Metadata<'_>) -> Origin<'a> {
        Origin {
            level: level(meta.level()),
            target: meta.target(),
            file: meta.file().unwrap_or("<unknown>"),
            line: meta.line().unwrap_or(0),
            module: meta.module_path().unwrap_or(""),
        }
    }

    /// The key of this origin with `fields` (the gate's, with none: the
    /// filter is decided from the call site alone).
    pub(super) fn key<'k>(&'k self, fields: &'k [(&'k str, ArgKind)], message: bool) -> Key<'k> {
        Key {
            level: self.level,
            target: self.target,
            file: self.file,
            line: self.line,
            module: self.module,
            fields,
            message,
        }
    }

    /// Whether the filter lets this call site's records through.
    pub(super) fn enabled(&self) -> bool {
        let gate = self.key(&[], false);
        crate::bridge::site(&gate).enabled(&gate)
    }

    /// Logs the collected message and fields at the site of this origin.
    pub(super) fn log(&self, f: &Fields) {
        let kinds: Vec<(&str, ArgKind)> = f.fields.iter().map(|(n, v)| (*n, v.kind())).collect();
        let key = self.key(&kinds, f.message.is_some());
        let site = crate::bridge::site(&key);
        let args: Vec<Arg<&str>> = f.fields.iter().map(|(_, v)| v.as_str_arg()).collect();
        match &f.message {
            Some(m) => crate::bridge::template::log_message(site, &key, m, &args),
            None => crate::bridge::write_record(site, &key, &args),
        }
    }
}

impl EventLayer {
    /// An event the typed path did not take: its message and fields
    /// formatted on this thread.
    #[inline(never)]
    pub(super) fn format_event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if from_tracing_log(meta) {
            return self.log_record(event);
        }
        let origin = Origin::of(meta);
        // The filter first, before anything is collected.
        if !origin.enabled() {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        origin.log(&f);
    }

    /// A `log` record that arrived through tracing-log (the `log` feature of
    /// `tracing-subscriber`, on by default): recorded once, with its own
    /// target, module, file and line, as `capture_log` records it.
    #[cold]
    pub(super) fn log_record(&self, event: &Event<'_>) {
        let mut f = Fields {
            log: Some(LogOrigin::default()),
            ..Fields::default()
        };
        event.record(&mut f);
        let o = f.log.take().unwrap_or_default();
        let target = o.target.as_deref().unwrap_or("log");
        let origin = Origin {
            level: level(event.metadata().level()),
            target,
            file: o.file.as_deref().unwrap_or("<unknown>"),
            line: o.line.unwrap_or(0),
            module: o.module.as_deref().unwrap_or(target),
        };
        if origin.enabled() {
            origin.log(&f);
        }
    }
}
