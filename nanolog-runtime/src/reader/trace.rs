//! A record's W3C trace context: the trace and span ids of the innermost
//! of its spans that carries them, so that its log line can be joined to
//! its trace (Jaeger, Tempo and Grafana join a log record to a span on its
//! trace id and span id).
//!
//! A service that propagates context itself (it reads an incoming
//! `traceparent` header) records them as span fields by a documented
//! convention: `trace_id` (32 hex digits) and `span_id` (16 hex digits),
//! and optionally `trace_flags` (the W3C flags, as 2 hex digits or a
//! number; bit 0 is "sampled"). The writer packs such strings of hex
//! digits as their bytes (format version 5), so the ids cost their binary
//! size, once per span.

use crate::wire::record::Value;

/// The trace context of a record (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The W3C trace id (never all zeros).
    pub trace_id: [u8; 16],
    /// The id of the span the record was made in (never all zeros).
    pub span_id: [u8; 8],
    /// The W3C trace flags, when the span says them (bit 0: sampled).
    pub flags: Option<u8>,
}

impl TraceContext {
    /// The trace id as 32 lowercase hex digits.
    pub fn trace_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// A trace id given as 32 hex digits (either case); `None` for
    /// anything else, or all zeros (not a valid id).
    pub fn parse_trace_id(s: &str) -> Option<[u8; 16]> {
        parse_hex(s)
    }

    /// The context in a span's fields, if it has `trace_id` and `span_id`
    /// (see the module's doc); `fields` are the span's (name, value) pairs.
    #[cfg(test)]
    pub(crate) fn of_fields<'a>(
        fields: impl FnOnce(&mut dyn FnMut(&'a str, Value<'a>)),
    ) -> Option<TraceContext> {
        Self::of_fields_within(None, fields)
    }

    /// The context in a span's fields, inside spans whose trace is `outer`
    /// (that of the nearest of them with one): a span whose
    /// `trace_id` is empty and whose `span_id` is an id is a span of that
    /// trace (format version 9: a writer leaves out a span's trace id when
    /// its parent, a span with ids, has the same).
    pub(crate) fn of_fields_within<'a>(
        outer: Option<[u8; 16]>,
        fields: impl FnOnce(&mut dyn FnMut(&'a str, Value<'a>)),
    ) -> Option<TraceContext> {
        let (mut trace, mut inherits, mut span, mut flags) = (None, false, None, None);
        fields(&mut |name, v| match name {
            "trace_id" => {
                trace = id_of(&v);
                inherits = matches!(v, Value::Str(""));
            }
            "span_id" => span = id_of(&v),
            "trace_flags" => flags = flags_of(&v),
            _ => {}
        });
        Some(TraceContext {
            trace_id: trace.or(outer.filter(|_| inherits))?,
            span_id: span?,
            flags,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|&b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

/// `N` bytes from `2 * N` hex digits, not all zeros.
fn parse_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let d = s.as_bytes();
    if d.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(d[2 * i])? << 4 | digit(d[2 * i + 1])?;
    }
    (out != [0u8; N]).then_some(out)
}

/// An id of `N` bytes from a field's value: a string of `2 * N` hex
/// digits, as written or as the file packs it.
fn id_of<const N: usize>(v: &Value<'_>) -> Option<[u8; N]> {
    match v {
        Value::Str(s) => parse_hex(s),
        Value::Hex(h) => {
            let b = h.bytes();
            let out: [u8; N] = b.try_into().ok()?;
            (out != [0u8; N]).then_some(out)
        }
        _ => None,
    }
}

/// W3C trace flags from a field's value: 2 hex digits, or a number.
fn flags_of(v: &Value<'_>) -> Option<u8> {
    match v {
        Value::Str(s) => parse_hex::<1>(s)
            .or((*s == "00").then_some([0]))
            .map(|b| b[0]),
        Value::Hex(h) => <[u8; 1]>::try_from(h.bytes()).ok().map(|b| b[0]),
        Value::Uint(n) => u8::try_from(*n).ok(),
        Value::Int(n) => u8::try_from(*n).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(fields: &[(&'static str, Value<'static>)]) -> Option<TraceContext> {
        TraceContext::of_fields(|f| {
            for (n, v) in fields {
                f(n, *v);
            }
        })
    }

    #[test]
    fn ids_are_read_from_hex_fields_and_nothing_else() {
        let t = ctx(&[
            ("trace_id", Value::Str("4BF92F3577B34DA6A3CE929D0E0E4736")),
            ("span_id", Value::Str("00f067aa0ba902b7")),
            ("trace_flags", Value::Str("01")),
        ])
        .expect("both ids");
        assert_eq!(t.trace_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span_hex(), "00f067aa0ba902b7");
        assert_eq!(t.flags, Some(1));
        // One id alone, a short one, a non-hex one, all zeros: none.
        assert_eq!(
            ctx(&[("trace_id", Value::Str("4bf92f3577b34da6a3ce929d0e0e4736"))]),
            None
        );
        assert_eq!(
            ctx(&[
                ("trace_id", Value::Str("4bf92f35")),
                ("span_id", Value::Str("00f067aa0ba902b7"))
            ]),
            None
        );
        assert_eq!(
            ctx(&[
                ("trace_id", Value::Str("4bf92f3577b34da6a3ce929d0e0e473x")),
                ("span_id", Value::Str("00f067aa0ba902b7"))
            ]),
            None
        );
        assert_eq!(
            ctx(&[
                ("trace_id", Value::Str("00000000000000000000000000000000")),
                ("span_id", Value::Str("00f067aa0ba902b7"))
            ]),
            None
        );
        // Flags as a number; unsampled as "00".
        let t = ctx(&[
            ("trace_id", Value::Str("4bf92f3577b34da6a3ce929d0e0e4736")),
            ("span_id", Value::Str("00f067aa0ba902b7")),
            ("trace_flags", Value::Uint(0)),
        ]);
        assert_eq!(t.and_then(|t| t.flags), Some(0));
        assert_eq!(
            TraceContext::parse_trace_id("4bf92f3577b34da6a3ce929d0e0e4736").map(|b| b[0]),
            Some(0x4b)
        );
    }
}
