//! Spans as context, with tracing's meaning: every span has a parent (the
//! explicit one, else the span current on the thread where it was made),
//! and a record is in the scope of one span, its leaf, from which the
//! chain to the root is followed.
//!
//! The calling thread keeps which span is current on it (a key) and tells
//! its ring only when a record is made in another span than the ring's
//! last (a *switch*, one `u64`, ahead of the record): a record itself
//! carries nothing, so a record inside spans costs what one outside costs,
//! and spans entered and exited between two records (a task polled with
//! nothing to log) cost the ring nothing.
//! A span's definition (site, fields, parent) is given once:
//!
//! - a `nanolog::span!` writes its fields to its own thread's ring when it
//!   is entered (its parent is the thread's current span then), and its
//!   exit names the span it restores;
//! - a `tracing` span's definition goes into the process's [`table`] when
//!   it is made, with a new version (and its tick) whenever a value is
//!   recorded into it, so that every thread's records see it from then on;
//!   while a logger runs, through its thread's mailbox ([`mail`]) to the
//!   flusher's book instead.
//!
//! The flusher follows each thread's switches, resolves the chain of its
//! leaf at the tick of each record, and writes the SPAN entries a file
//! needs before their first use (see [`book`]).

pub(crate) mod book;

/// Marks the key of a `tracing` span whose definition was dropped
/// (`OnFull::Drop`, its thread's span changes over their budget): the
/// threads enter it, and make spans inside it, by the marked key, so the
/// flusher knows at once that a chain through it is lost, rather than
/// waiting a pass for a definition that may be in another ring, as for a
/// key it does not know. (Keys count up from 1 in blocks: never this high.)
pub(crate) const DROPPED_KEY: u64 = 1 << 63;

pub(crate) mod mail;
mod stack;
pub(crate) mod table;

#[cfg_attr(not(feature = "tracing"), allow(unused_imports))]
pub(crate) use mail::{close, define, redefine};
#[cfg_attr(not(feature = "tracing"), allow(unused_imports))]
pub(crate) use stack::{current_for, switch_for_record, tracing_enter, tracing_exit};
pub use stack::{span_key, SpanGuard};
#[cfg_attr(not(feature = "tracing"), allow(unused_imports))]
pub(crate) use table::SpanBytes;
