//! A span's trace context as tracing-opentelemetry's layer assigned it
//! (feature `opentelemetry`): taken once per span, on its first entry, and
//! written once per span with its fields (a new version of the span whose
//! site has the context arguments, `bridge::CONTEXT_ARGS`), never per
//! record.
//!
//! Why the first entry: tracing-opentelemetry 0.34 builds the
//! OpenTelemetry span (its ids, the sampler's decision) only when the span
//! is first entered or its context asked for, so that a service can still
//! give it a parent (`OpenTelemetrySpanExt::set_parent`, from an incoming
//! `traceparent`) between making it and entering it. Asking earlier (when
//! the span is made) would start it before that parent is set. Every
//! record made in a span is made while it is entered, so none comes
//! before its context; and asking is what starts it, so the layers'
//! order in the registry does not matter.
//!
//! A span whose parent in the file (the span it was made in) is its parent
//! in the registry too, and carries the same trace id, leaves its trace id
//! out (format version 9): a reader takes it from the parent. The trace's
//! 16 random bytes are then written once a request's spans, not with each
//! of them (they were also met often enough to be defined as strings, as
//! text: 44 bytes a span in all, where the ids are 24).

use opentelemetry::trace::TraceContextExt as _;
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::spans::{context_trace, encode_context, with_data};

/// On span `id`'s first entry: its OpenTelemetry span's context, if the
/// registry has tracing-opentelemetry's layer and the span is one it
/// traces, into the span's definition (a new version of it, from now on).
/// The context is asked of `dispatch`, the dispatcher the layer is in (the
/// span's: a thread whose default is another subscriber may enter it, and
/// that one's span of the same id is another span), else of the thread's
/// default.
///
/// Returns the span's key (0: not one of this layer's spans), as
/// `key_of` would: its one lookup on every entry serves both.
pub(super) fn take_context<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    owner: u64,
    id: &Id,
    dispatch: Option<&tracing_core::dispatcher::WeakDispatch>,
) -> u64 {
    let Some((key, first, parent)) = with_data(ctx, owner, id, |d| {
        (
            d.key,
            !std::mem::replace(&mut d.context_taken, true),
            d.parent,
        )
    }) else {
        return 0;
    };
    if !first {
        return key;
    }
    // (Nothing of the span is held here: the OpenTelemetry layer takes
    // the span's extensions and its own lock.)
    let otel = match dispatch.and_then(tracing_core::dispatcher::WeakDispatch::upgrade) {
        Some(d) => tracing_opentelemetry::get_otel_context(id, &d),
        None => tracing_core::dispatcher::get_default(|d| {
            tracing_opentelemetry::get_otel_context(id, d)
        }),
    };
    let Some(otel) = otel else { return key };
    let span = otel.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return key;
    }
    let Some(meta) = ctx.metadata(id) else {
        return key;
    };
    let (trace, span, flags) = (
        sc.trace_id().to_bytes(),
        sc.span_id().to_bytes(),
        sc.trace_flags().to_u8(),
    );
    let mut context = Vec::with_capacity(64);
    encode_context(Some(trace), span, flags, &mut context);
    if parent != 0 && parent_has_trace(ctx, owner, id, parent, &context) {
        context.clear();
        encode_context(None, span, flags, &mut context);
    }
    with_data(ctx, owner, id, |d| {
        let Some(new) = d.with_context(meta, &context) else {
            return;
        };
        *d = new;
        if d.dropped {
            return;
        }
        if let Some((site, _)) = d.site {
            d.context_posted = crate::span::redefine(d.key, site, &d.raw);
        }
    });
    key
}

/// Whether span `id`'s parent in the registry is the span of key `parent`
/// (its parent in the file: not a `nanolog::span!` between them, nor
/// another explicit parent) and went to the flusher with a trace context
/// of the trace id of `context` (as `encode_context` made it): a reader
/// then finds that trace in it, the nearest span outside `id`'s with ids.
fn parent_has_trace<S: Subscriber + for<'a> LookupSpan<'a>>(
    ctx: &Context<'_, S>,
    owner: u64,
    id: &Id,
    parent: u64,
    context: &[u8],
) -> bool {
    let Some(up) = ctx.span(id).and_then(|s| s.parent().map(|p| p.id())) else {
        return false;
    };
    let trace = context_trace(context);
    with_data(ctx, owner, &up, |p| {
        p.key == parent
            && p.context_posted
            && !p.dropped
            && trace.is_some()
            && context_trace(p.context_bytes()) == trace
    })
    .unwrap_or(false)
}
