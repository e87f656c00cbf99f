//! `tracing` events into nanolog: [`tracing_layer`].
//!
//! This file is the layer and its filter; the typed path of events is
//! [`typed`], the formatting path [`format`], spans [`spans`] (with the
//! table of open spans, [`open_spans`]).

mod format;
mod open_spans;
#[cfg(feature = "opentelemetry")]
mod otel;
mod spans;
mod typed;

use format::*;
use spans::*;
use typed::*;

use std::fmt;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::level::Level;

/// The `tracing_subscriber::Layer` that records `tracing` events as nanolog
/// records: level, target, file, line, its message and its fields (shown
/// in text as `key=value` after the message, in JSON under `fields`, with
/// `msg` the message alone). Spans are context: a span's fields are
/// written once, and every record made in its scope (events, `log`
/// records, nanolog's own) carries the chain of spans from the root, as
/// tracing-subscriber's fmt shows it (see `nanolog::span!`).
///
/// Its events pass nanolog's directives as a per-layer filter
/// ([`NanologFilter`] inside tracing-subscriber's `Filtered`): they decide
/// for this layer only. Its spans are all enabled (they are context), so
/// the layer follows them itself, without the per-span lookups `Filtered`
/// makes (a span entered and exited costs two fewer registry lookups).
pub struct NanologLayer<S> {
    events: Filtered<EventLayer, NanologFilter, S>,
    /// This layer's own tag in the threads' span stacks (see `owner`).
    owner: u64,
    /// The dispatcher this layer is in (set when it is registered in
    /// one): where a span's OpenTelemetry context is asked for, whatever
    /// the default of the thread that enters the span.
    #[cfg(feature = "opentelemetry")]
    dispatch: std::sync::OnceLock<tracing_core::dispatcher::WeakDispatch>,
}

impl<S> fmt::Debug for NanologLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NanologLayer").finish_non_exhaustive()
    }
}

/// The events' side of [`NanologLayer`], behind its per-layer filter.
#[derive(Debug, Clone, Copy)]
struct EventLayer {
    owner: u64,
}

/// A new layer's tag for the spans it sees entered: one per layer, so per
/// subscriber. Spans of a scoped dispatcher (`with_default`) and of the
/// global one share each thread's stack, and their ids may be equal (each
/// registry numbers its own from 1): the tag keeps them apart.
fn owner() -> u64 {
    // Relaxed: a unique number is all it hands out.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// nanolog's directives as a per-layer filter (tracing-subscriber's
/// `Filter`): an event callsite they disable is `never` for this layer
/// only, so the other layers of the subscriber still receive it, and where
/// nanolog's is the only layer, the subscriber decides it `never` (a
/// disabled event then costs tracing's cached check). With no logger
/// running every event is off for nanolog, and on for the others as their
/// own filters say. Spans are always enabled: they are context, and the
/// records inside them are what the directives select.
#[derive(Debug, Clone, Copy, Default)]
pub struct NanologFilter {
    _private: (),
}

/// The layer that records `tracing` events (see [`NanologLayer`]):
/// `tracing_subscriber::registry().with(nanolog::tracing_layer()).init()`.
pub fn tracing_layer<S>() -> NanologLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // tracing caches each callsite's interest (from `register_callsite`):
    // a change of nanolog's filter asks it again.
    crate::filter::after_change(rebuild_interest);
    let owner = owner();
    NanologLayer {
        events: EventLayer { owner }.with_filter(NanologFilter::default()),
        owner,
        #[cfg(feature = "opentelemetry")]
        dispatch: std::sync::OnceLock::new(),
    }
}

impl<S> Filter<S> for NanologFilter {
    fn enabled(&self, meta: &tracing_core::Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        wanted(meta)
    }

    /// Decided once per callsite, and again whenever nanolog's filter
    /// changes.
    fn callsite_enabled(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> tracing_core::Interest {
        if wanted(meta) {
            tracing_core::Interest::always()
        } else {
            tracing_core::Interest::never()
        }
    }
}

/// The dispatcher a nanolog layer was last registered in (a weak
/// reference: it is not kept alive for this).
static REGISTERED: std::sync::Mutex<Option<tracing_core::dispatcher::WeakDispatch>> =
    std::sync::Mutex::new(None);

/// Has tracing ask every callsite's interest again (nanolog's filter
/// changed). tracing asks the dispatchers it knows; but while only one is
/// alive it asks the calling thread's default instead, and a service whose
/// subscriber is scoped (`with_default`, or set on its runtime's threads)
/// starts its logger on a thread where that default is no subscriber:
/// every callsite already seen would then be `never`, for every layer of
/// the service's subscriber (its OpenTelemetry spans included). So the
/// question is asked with the dispatcher nanolog's layer is in as the
/// default while it is.
fn rebuild_interest() {
    let registered = REGISTERED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .and_then(tracing_core::dispatcher::WeakDispatch::upgrade);
    match registered {
        Some(d) => tracing_core::dispatcher::with_default(
            &d,
            tracing_core::callsite::rebuild_interest_cache,
        ),
        None => tracing_core::callsite::rebuild_interest_cache(),
    }
}

/// Whether nanolog's layer wants a callsite: every span, the one callsite
/// tracing-log gives every `log` record (decided per record, by its own
/// target, in the layer), and the events nanolog's directives enable.
fn wanted(meta: &tracing_core::Metadata<'_>) -> bool {
    meta.is_span()
        || from_tracing_log(meta)
        || crate::filter::enabled(level(meta.level()), meta.target())
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

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for EventLayer {
    /// An event in its scope: a contextual event in the span current on
    /// this thread for its subscriber (tracing's current span, or a
    /// `nanolog::span!` entered inside it), which is where the thread's
    /// ring already is unless another subscriber's span was entered since;
    /// an event with an explicit parent (or `parent: None`) in that span's
    /// scope. An event whose scope is not the thread's is written between
    /// two switches (the first one also on a thread with no ring yet).
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let current = crate::producer::current();
        let leaf = if event.is_contextual() {
            crate::span::current_for(self.owner)
        } else {
            event.parent().map_or(0, |p| key_of(&ctx, self.owner, p))
        };
        let elsewhere = leaf != current;
        if elsewhere {
            crate::span::switch_for_record(leaf);
        }
        if !take_typed(event) {
            self.format_event(event);
        }
        if elsewhere {
            crate::producer::context_changed();
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for NanologLayer<S> {
    // The events' side: the per-layer filter and the event layer behind it.

    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        *REGISTERED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(subscriber.downgrade());
        #[cfg(feature = "opentelemetry")]
        let _ = self.dispatch.set(subscriber.downgrade());
        self.events.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.events.on_layer(subscriber);
    }

    fn register_callsite(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> tracing_core::Interest {
        self.events.register_callsite(meta)
    }

    fn enabled(&self, meta: &tracing_core::Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.events.enabled(meta, ctx)
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.events.event_enabled(event, ctx)
    }

    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        self.events.max_level_hint()
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.events.on_event(event, ctx);
    }

    /// This layer, or what the events' `Filtered` answers (among it, the
    /// marker by which tracing-subscriber knows a layer has a per-layer
    /// filter, as `reload::Layer` forwards it).
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        if id == std::any::TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: the caller's contract (a pointer returned for `id` is
        // only cast to the type `id` names) is the one this method has,
        // passed on unchanged to the layer that answers for `id`.
        unsafe { self.events.downcast_raw(id) }
    }

    // The spans' side: every span is enabled for nanolog, so the layer
    // follows them itself.

    /// A new span: its key, its parent's (tracing's: the explicit one, else
    /// the span current on this thread, a `tracing` one or a
    /// `nanolog::span!`), and its fields, into the process's table of spans.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = match attrs.parent() {
            Some(p) => key_of(&ctx, self.owner, p),
            None if attrs.is_contextual() => crate::span::current_for(self.owner),
            None => 0,
        };
        let key = crate::span::span_key();
        let meta = attrs.metadata();
        let mut data = with_encoded(|e| {
            attrs.record(e);
            SpanData::new(key, meta, &e.shape, &mut e.values, &[])
        });
        data.parent = parent;
        if let Some((site, _)) = data.site {
            if !crate::span::define(data.key, parent, site, &data.raw) {
                // Entered, and a parent, by a key that says so (see
                // `DROPPED_KEY`).
                data.dropped = true;
                data.key |= crate::span::DROPPED_KEY;
            }
        }
        let key = data.key;
        // In the table of open spans; past its room, in the registry's
        // extensions of the span.
        if let Err(data) = OPEN.insert(self.owner, id.into_u64(), key, data) {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(data);
            }
        }
    }

    /// Values recorded later (`span.record("rows", 3)`): every record made
    /// in the span from now on, on any thread, shows them.
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(meta) = ctx.metadata(id) else { return };
        // The values are encoded before the span's data is taken (their
        // `Debug` is the program's code, and may record into it too).
        with_encoded(|e| {
            values.record(e);
            let recorded = |data: &mut SpanData| {
                let mut new = with_merged(|raw, shape| {
                    data.merge(e, raw, shape);
                    SpanData::new(data.key, meta, shape, raw, data.context_bytes())
                });
                new.dropped = data.dropped;
                new.context_taken = data.context_taken;
                new.context_posted = data.context_posted;
                new.parent = data.parent;
                *data = new;
                if data.dropped {
                    return;
                }
                if let Some((site, _)) = data.site {
                    // (Dropped, the version before stands: its context
                    // with it.)
                    let _ = crate::span::redefine(data.key, site, &data.raw);
                }
            };
            with_data(&ctx, self.owner, id, recorded);
        });
    }

    /// Entered on this thread: current here (stated in its ring before
    /// its next record).
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        // On its first entry, the trace context the OpenTelemetry layer
        // gave it (before the records made in it), in the same lookup that
        // finds its key.
        #[cfg(feature = "opentelemetry")]
        let key = otel::take_context(&ctx, self.owner, id, self.dispatch.get());
        #[cfg(not(feature = "opentelemetry"))]
        let key = key_of(&ctx, self.owner, id);
        crate::span::tracing_enter(self.owner, id.into_u64(), key);
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        crate::span::tracing_exit(self.owner, id.into_u64());
    }

    /// Closed: out of the table of open spans (before the registry frees
    /// its id for another span, which it does once every layer has seen
    /// the close), and forgotten once the records made in it are written.
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let key = match OPEN.remove(self.owner, id.into_u64()) {
            // (Its definition dropped: nobody knows it.)
            Some((_, data)) if data.dropped => 0,
            Some((key, _)) => key,
            None => ctx
                .span(&id)
                .and_then(|s| {
                    s.extensions()
                        .get::<SpanData>()
                        .filter(|d| !d.dropped)
                        .map(|d| d.key)
                })
                .unwrap_or(0),
        };
        if key != 0 {
            crate::span::close(key);
        }
    }
}
