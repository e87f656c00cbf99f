//! `tracing` events into nanolog: [`tracing_layer`].

use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::{Arg, Key};
use crate::level::Level;
use crate::wire::format::ArgKind;

/// A `tracing_subscriber::Layer` that records every enabled event as a
/// nanolog record: level, target, file, line, its message and its fields
/// (shown in text as `key=value` after the message, in JSON under
/// `fields`). Spans are not recorded.
///
/// Events pass the running logger's directives (per target), decided once
/// per event call site and cached. Their message and fields are collected on
/// the calling thread (the slow path: it allocates for strings and `Debug`
/// values).
#[derive(Debug, Clone, Copy, Default)]
pub struct NanologLayer {
    _private: (),
}

/// The layer that records `tracing` events (see [`NanologLayer`]):
/// `tracing_subscriber::registry().with(nanolog::tracing_layer()).init()`.
pub fn tracing_layer() -> NanologLayer {
    // tracing caches each callsite's interest (from `register_callsite`):
    // a change of nanolog's filter asks it again.
    crate::filter::after_change(tracing_core::callsite::rebuild_interest_cache);
    NanologLayer::default()
}

fn level(l: &tracing_core::Level) -> Level {
    match *l {
        tracing_core::Level::TRACE => Level::Trace,
        tracing_core::Level::DEBUG => Level::Debug,
        tracing_core::Level::INFO => Level::Info,
        tracing_core::Level::WARN => Level::Warn,
        _ => Level::Error,
    }
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: Vec<(&'static str, Arg<String>)>,
    /// A `log` record that tracing-log made an event of: where it really
    /// came from (`log.target`, `log.module_path`, `log.file`, `log.line`).
    log: Option<LogOrigin>,
}

#[derive(Default)]
struct LogOrigin {
    target: Option<String>,
    module: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

impl Fields {
    fn push(&mut self, field: &Field, v: Arg<String>) {
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
            self.message = Some(match v {
                Arg::Str(s) => s,
                other => other.to_string(),
            });
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
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%x` fields arrive here as Debug wrappers that print their Display;
        // the message (`format_args!`) prints as it reads.
        let mut s = String::new();
        let ok = catch_unwind(AssertUnwindSafe(|| {
            let _ = write!(s, "{value:?}");
        }));
        if ok.is_err() {
            s = String::from("<Debug panicked>");
        }
        self.push(field, Arg::Str(s));
    }
}

/// Whether `meta` is tracing-log's: a `log` record made a `tracing` event
/// (target `log`, with `log.target` and the other origin fields).
fn from_tracing_log(meta: &tracing_core::Metadata<'_>) -> bool {
    meta.target() == "log" && meta.fields().field("log.target").is_some()
}

/// Where an event comes from: level, target, file, line, module.
struct Origin<'a> {
    level: Level,
    target: &'a str,
    file: &'a str,
    line: u32,
    module: &'a str,
}

impl Origin<'_> {
    /// The key of this origin with `fields` (the gate's, with none: the
    /// filter is decided from the call site alone).
    fn key<'k>(&'k self, fields: &'k [(&'k str, ArgKind)], message: bool) -> Key<'k> {
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
    fn enabled(&self) -> bool {
        let gate = self.key(&[], false);
        super::site(&gate).enabled(&gate)
    }

    /// Logs the collected message and fields at the site of this origin.
    fn log(&self, f: &Fields) {
        let kinds: Vec<(&str, ArgKind)> = f.fields.iter().map(|(n, v)| (*n, v.kind())).collect();
        let key = self.key(&kinds, f.message.is_some());
        let site = super::site(&key);
        let mut args: Vec<Arg<&str>> = Vec::with_capacity(f.fields.len() + 1);
        if let Some(m) = &f.message {
            args.push(Arg::Str(m.as_str()));
        }
        args.extend(f.fields.iter().map(|(_, v)| v.as_str_arg()));
        super::log(site, &key, &args);
    }
}

impl NanologLayer {
    /// A `log` record that arrived through tracing-log (the `log` feature of
    /// `tracing-subscriber`, on by default): recorded once, with its own
    /// target, module, file and line, as `capture_log` records it.
    #[cold]
    fn log_record(&self, event: &Event<'_>) {
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

impl<S: Subscriber> Layer<S> for NanologLayer {
    /// An event's callsite is decided by nanolog's filter, once, and again
    /// whenever the filter changes: a disabled event then costs what
    /// tracing's cached interest costs, and is never built. (As with any
    /// filtering layer, a callsite this says `never` to is off for the
    /// whole subscriber.) Spans, and the one callsite tracing-log gives every
    /// `log` record, are decided per record instead.
    fn register_callsite(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> tracing_core::Interest {
        if meta.is_span() || from_tracing_log(meta) {
            return tracing_core::Interest::sometimes();
        }
        if crate::filter::enabled(level(meta.level()), meta.target()) {
            tracing_core::Interest::always()
        } else {
            tracing_core::Interest::never()
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if from_tracing_log(meta) {
            return self.log_record(event);
        }
        let origin = Origin {
            level: level(meta.level()),
            target: meta.target(),
            file: meta.file().unwrap_or("<unknown>"),
            line: meta.line().unwrap_or(0),
            module: meta.module_path().unwrap_or(""),
        };
        // The filter first, before anything is collected.
        if !origin.enabled() {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        origin.log(&f);
    }
}
