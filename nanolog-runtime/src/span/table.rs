//! The process's table of `tracing` spans: each span's definition (its
//! parent and the versions of its fields), written by the threads that
//! make, record into and close spans while no logger runs (while one runs
//! they post to the flusher instead, see `mail.rs`), read by the flusher
//! (`book.rs`) for spans made before it started, and given the spans
//! still open when it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A `tracing` span's definition, as the flusher reads it: its site, its
/// parent's key and its versions (a value recorded makes a new one).
#[derive(Debug, Clone)]
pub(crate) struct Def {
    pub(crate) parent: u64,
    /// Most spans keep one: inline, no allocation.
    pub(crate) versions: smallvec::SmallVec<[Version; 1]>,
}

/// One state of a span's fields, from `tick` on (the first's is 0).
#[derive(Debug, Clone)]
pub(crate) struct Version {
    pub(crate) tick: u64,
    /// The span site of the fields' kinds.
    pub(crate) site: u32,
    /// The fields, then the key, as the ring holds them.
    pub(crate) raw: Arc<[u8]>,
}

/// The most versions a span keeps. The flusher forgets the versions no
/// record can need any more (see `Table::prune`); a span whose values are
/// recorded faster than that keeps its first and latest ones (a record
/// logged before the versions dropped shows the first's values).
pub(crate) const MAX_VERSIONS: usize = 1024;

/// A version is needed while a record of a tick before its successor's may
/// still come: records are drained within a pass, but a producer waiting
/// for room keeps the tick of its call. Versions followed by one this much
/// older than the flusher's pass are forgotten.
pub(crate) const VERSION_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// A hasher for span keys: unique integers handed out in blocks, so one
/// multiplication spreads them (SipHash, the default, cost the flusher and
/// the calling threads a few percent of a service's time).
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map by span key.
pub(crate) type KeyMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// The `tracing` spans alive in the process, by key (`nanolog::span!`'s
/// are defined through their thread's ring instead): one shard of them
/// (see [`table`]).
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) spans: KeyMap<Def>,
    /// Spans closed since the flusher last looked: it forgets them once
    /// every record logged before the close has been written.
    pub(crate) closed: Vec<u64>,
    /// Spans given a new version since the flusher last looked (`None`:
    /// too many to list, look at every span).
    pub(crate) changed: Option<Vec<u64>>,
    /// Spans with more than one version.
    pub(crate) versioned: std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>,
}

/// The longest list of changed spans kept for the flusher, per shard.
const MAX_CHANGED: usize = 1024;

impl Table {
    /// Forgets the versions of spans that no record can need any more:
    /// those followed by a version older than `horizon` (a tick).
    pub(crate) fn prune(&mut self, horizon: u64) {
        let spans = &mut self.spans;
        self.versioned.retain(|k| {
            spans
                .get_mut(k)
                .is_some_and(|d| prune_versions(&mut d.versions, |v| v.tick, horizon))
        });
    }
}

/// Forgets a span's `versions` (in tick order, `tick` of each) that no
/// record can need any more: those followed by one begun before `horizon`
/// (the newest such is the oldest a record can still need). Whether it
/// keeps more than one.
pub(crate) fn prune_versions<V>(
    versions: &mut smallvec::SmallVec<[V; 1]>,
    tick: impl Fn(&V) -> u64,
    horizon: u64,
) -> bool {
    let j = versions
        .iter()
        .rposition(|v| tick(v) < horizon)
        .unwrap_or(0);
    versions.drain(..j);
    versions.len() > 1
}

/// Shards of the table, each under its own lock: the threads that make,
/// record into and close spans (every worker of a service, at every
/// request) and the flusher that reads their definitions take the lock of
/// one key's shard, so they seldom meet (one lock for all of them was the
/// most contended lock of a tokio service's logging).
const SHARDS: usize = 64;

static TABLE: [Mutex<Option<Table>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];

/// The shard of span `key`.
#[inline]
fn shard_of(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// Runs `f` on the shard of the table that holds span `key`, under its lock.
pub(crate) fn table<R>(key: u64, f: impl FnOnce(&mut Table) -> R) -> R {
    let mut t = TABLE[shard_of(key)]
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    f(t.get_or_insert_with(|| Table {
        changed: Some(Vec::new()),
        ..Table::default()
    }))
}

/// Runs `f` on every shard of the table, one after another, each under its
/// lock.
pub(crate) fn tables(mut f: impl FnMut(&mut Table)) {
    tables_in(u64::MAX, |_, t| f(t));
}

/// Runs `f` on the shards whose bits are set in `bits`, each under its lock
/// (with its bit).
pub(crate) fn tables_in(mut bits: u64, mut f: impl FnMut(u64, &mut Table)) {
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let mut t = TABLE[i].lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = t.as_mut() {
            f(1 << i, t);
        }
    }
}

/// Takes spans `keys` out of the table, each shard locked once (their
/// definitions are dropped after its lock is released).
pub(crate) fn remove(keys: &mut [u64]) {
    keys.sort_unstable_by_key(|&k| shard_of(k));
    let mut gone = Vec::new();
    for group in keys.chunk_by(|a, b| shard_of(*a) == shard_of(*b)) {
        let mut t = TABLE[shard_of(group[0])]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = t.as_mut() {
            gone.extend(group.iter().filter_map(|k| t.spans.remove(k)));
        }
        drop(t);
        gone.clear();
    }
}

/// Shards (one bit each) with spans closed, with new versions listed in
/// `changed`, and with spans of several versions, since the flusher last
/// took them: the flusher locks only those. Set under the shard's lock
/// (Release); taken with Acquire, which pairs with it, before the shard's
/// lock is taken. A bit set again after it was taken only costs the
/// flusher a look at a shard with nothing new.
pub(crate) static CLOSED_IN: AtomicU64 = AtomicU64::new(0);
pub(crate) static CHANGED_IN: AtomicU64 = AtomicU64::new(0);
pub(crate) static VERSIONED_IN: AtomicU64 = AtomicU64::new(0);

/// The bit of span `key`'s shard.
fn shard_bit(key: u64) -> u64 {
    1 << shard_of(key)
}

/// Sets the bit of span `key`'s shard in `bits`, under that shard's lock.
/// Most calls find it set already (many spans close between two of the
/// flusher's passes): a load then spares every worker's close a write to
/// the line all of them share. Sound under the lock: a flusher that took
/// the bits (`swap`) and then this shard's lock before us released that
/// lock before we took it, so our load sees its swap (or a later set).
#[inline]
fn flag(bits: &AtomicU64, key: u64) {
    let bit = shard_bit(key);
    if bits.load(Ordering::Relaxed) & bit == 0 {
        bits.fetch_or(bit, Ordering::Release);
    }
}

/// Bumped whenever a span gets a new version (Release, after the shard's
/// lock is released; the flusher's Acquire load then finds it there).
pub(crate) static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A span's fields, then its key, as a change carries them from the thread
/// that made it: inline up to 64 bytes (a service's spans, a few ids and
/// short strings, fit), so making a span allocates nothing for them on
/// its thread, nor does the flusher's book, which keeps them as they came
/// (an `Arc` made by the worker was freed on the flusher, in the worker's
/// allocator arena, and its count was a line both wrote). The table, for
/// the spans made while no logger runs, keeps an `Arc` of them.
pub(crate) type SpanBytes = smallvec::SmallVec<[u8; 64]>;

/// One change to the table (see `mail`).
#[derive(Debug)]
pub(crate) enum Op {
    /// A new span `key` inside `parent` (0: a root).
    Define {
        key: u64,
        parent: u64,
        site: u32,
        raw: SpanBytes,
    },
    /// Values recorded into span `key`: its fields from `tick` on.
    Version {
        key: u64,
        tick: u64,
        site: u32,
        raw: SpanBytes,
    },
    /// Span `key` closed.
    Close { key: u64 },
}

impl Op {
    /// The span it changes.
    pub(crate) fn key(&self) -> u64 {
        match self {
            Op::Define { key, .. } | Op::Version { key, .. } | Op::Close { key } => *key,
        }
    }
}

/// Applies change `op` to the table, with a logger `live` (a closed span
/// is then listed for the flusher, not dropped); hands back a new value or
/// a close of a span the table does not know.
pub(crate) fn apply(op: Op, live: bool) -> Result<(), Op> {
    table(op.key(), |t| apply_in(t, op, live))
}

/// [`apply`], on the shard of the span's key, locked.
fn apply_in(t: &mut Table, op: Op, live: bool) -> Result<(), Op> {
    if !matches!(op, Op::Define { .. }) && !t.spans.contains_key(&op.key()) {
        return Err(op);
    }
    match op {
        Op::Define {
            key,
            parent,
            site,
            raw,
        } => {
            t.spans.insert(
                key,
                Def {
                    parent,
                    versions: smallvec::smallvec![Version {
                        tick: 0,
                        site,
                        raw: Arc::from(&raw[..]),
                    }],
                },
            );
        }
        Op::Version {
            key,
            tick,
            site,
            raw,
        } => {
            if let Some(d) = t.spans.get_mut(&key) {
                let raw = Arc::from(&raw[..]);
                add_version(&mut d.versions, |v| v.tick, Version { tick, site, raw });
            }
            t.versioned.insert(key);
            match &mut t.changed {
                Some(c) if c.len() < MAX_CHANGED => c.push(key),
                c => *c = None,
            }
            flag(&CHANGED_IN, key);
            flag(&VERSIONED_IN, key);
        }
        Op::Close { key } => {
            if live {
                t.closed.push(key);
                flag(&CLOSED_IN, key);
            } else {
                t.spans.remove(&key);
            }
        }
    }
    Ok(())
}

/// Adds version `v` to a span's `versions` (`tick` of each), in tick
/// order (two threads recording into one span post to two mailboxes),
/// the second oldest dropped past [`MAX_VERSIONS`].
pub(crate) fn add_version<V>(
    versions: &mut smallvec::SmallVec<[V; 1]>,
    tick: impl Fn(&V) -> u64,
    v: V,
) {
    if versions.len() >= MAX_VERSIONS {
        versions.remove(1);
    }
    let t = tick(&v);
    let at = versions.partition_point(|o| tick(o) <= t).max(1);
    versions.insert(at, v);
}

/// Runs `f` with every shard of the table locked, and applies the changes
/// it returns before the locks are released (definitions first; no logger
/// runs them: a closed span goes at once).
pub(crate) fn with_all_locked(f: impl FnOnce() -> Vec<Op>) {
    let mut guards: Vec<_> = TABLE
        .iter()
        .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
        .collect();
    let mut ops = f();
    ops.sort_by_key(|op| !matches!(op, Op::Define { .. }));
    for op in ops {
        let t = guards[shard_of(op.key())].get_or_insert_with(|| Table {
            changed: Some(Vec::new()),
            ..Table::default()
        });
        // A change to a span not known is dropped: its definition was
        // never made (past the sites' cap), or went with a thread's locals.
        let _ = apply_in(t, op, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_stay_in_tick_order_and_capped_with_the_first_kept() {
        let mut v: smallvec::SmallVec<[u64; 1]> = smallvec::smallvec![0];
        // Posted out of order by two threads.
        for t in [30, 10, 20] {
            add_version(&mut v, |&t| t, t);
        }
        assert_eq!(&v[..], [0, 10, 20, 30]);
        for t in 100..100 + MAX_VERSIONS as u64 {
            add_version(&mut v, |&t| t, t);
        }
        assert_eq!(v.len(), MAX_VERSIONS);
        assert_eq!(v[0], 0, "the first version is kept");
        assert_eq!(*v.last().unwrap(), 99 + MAX_VERSIONS as u64);
    }

    #[test]
    fn pruning_keeps_the_newest_version_begun_before_the_horizon() {
        let mut v: smallvec::SmallVec<[u64; 1]> = smallvec::smallvec![0, 10, 20, 30];
        assert!(prune_versions(&mut v, |&t| t, 25));
        assert_eq!(&v[..], [20, 30], "a record at 21..25 still needs 20");
        assert!(!prune_versions(&mut v, |&t| t, 1000));
        assert_eq!(&v[..], [30]);
        assert!(!prune_versions(&mut v, |&t| t, 5));
        assert_eq!(&v[..], [30], "never the last");
    }
}
