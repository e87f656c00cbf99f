//! The process's table of `tracing` spans: each span's definition (its
//! parent and the versions of its fields), written by the threads that
//! make, record into and close spans, read by the flusher (`book.rs`).

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
            let Some(d) = spans.get_mut(k) else {
                return false;
            };
            // The newest version begun before the horizon is the oldest a
            // record can still need.
            let j = d
                .versions
                .iter()
                .rposition(|v| v.tick < horizon)
                .unwrap_or(0);
            d.versions.drain(..j);
            d.versions.len() > 1
        });
    }
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

/// Bumped whenever a span gets a new version (Release, after the shard's
/// lock is released; the flusher's Acquire load then finds it there).
pub(crate) static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A new `tracing` span `key` inside `parent` (0: a root).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn define(key: u64, parent: u64, site: u32, raw: Arc<[u8]>) {
    table(key, |t| {
        t.spans.insert(
            key,
            Def {
                parent,
                versions: smallvec::smallvec![Version { tick: 0, site, raw }],
            },
        )
    });
}

/// Values recorded into span `key`: its fields from now on.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn redefine(key: u64, site: u32, raw: Arc<[u8]>) {
    let tick = crate::clock::now();
    let known = table(key, |t| {
        let Some(d) = t.spans.get_mut(&key) else {
            return false;
        };
        if d.versions.len() >= MAX_VERSIONS {
            d.versions.remove(1);
        }
        d.versions.push(Version { tick, site, raw });
        t.versioned.insert(key);
        match &mut t.changed {
            Some(c) if c.len() < MAX_CHANGED => c.push(key),
            c => *c = None,
        }
        CHANGED_IN.fetch_or(shard_bit(key), Ordering::Release);
        VERSIONED_IN.fetch_or(shard_bit(key), Ordering::Release);
        true
    });
    if known {
        EPOCH.fetch_add(1, Ordering::Release);
    }
}

/// Span `key` was closed: forgotten by the flusher once the records logged
/// before now are written, or at once when no logger runs.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn close(key: u64) {
    let running = crate::channel::live();
    table(key, |t| {
        if running {
            t.closed.push(key);
            CLOSED_IN.fetch_or(shard_bit(key), Ordering::Release);
        } else {
            t.spans.remove(&key);
        }
    });
}
