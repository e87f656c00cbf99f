//! A merge read in batches: blocks inflated as the merge reaches them and
//! held by the batches that have records of them.

use super::*;

/// A batch ([`Batches::fill`]) ends once its records take this many bytes
/// in the file, however many it was asked for: what a batch becomes (text,
/// rows) grows with its records' bytes, and a reader that renders several
/// batches at once held 171 MB of text for records of 4 KB strings, 4,096
/// records a batch (measured 2026-12-01).
pub(super) const BATCH_BYTES: usize = 1 << 20;

/// The blocks past their files' resident budget that a merge read through
/// [`Batches`] inflated (see [`SharedBlocks`]), and those its batches must
/// hold.
#[derive(Default)]
pub(super) struct BlockCache {
    pub(super) blocks: SharedBlocks,
    /// Blocks the streams left after giving records of them, since the
    /// batch being filled took its last: the batch holds them.
    pub(super) left: Vec<Block>,
}

/// A merge read in batches ([`Merge::batches`]): the blocks of a file past
/// its resident budget are inflated as the merge reaches them and let go
/// when no stream reads them and no batch holds their records, so memory
/// does not grow with the files' sizes.
pub struct Batches<'a> {
    merge: Merge<'a>,
}

/// Events taken from [`Batches`], with the inflated blocks they are read
/// from (held until the batch is cleared or dropped).
#[derive(Default)]
pub struct Batch<'a> {
    events: Vec<Event<'a>>,
    blocks: Vec<Block>,
}

impl<'a> Merge<'a> {
    /// The merge read in batches, with blocks inflated as it reaches them
    /// (see [`Batches`]). Call before the first event.
    pub fn batches(mut self) -> Batches<'a> {
        self.cache = Some(BlockCache::default());
        Batches { merge: self }
    }
}

impl<'a> Batch<'a> {
    /// An empty batch with room for `n` events.
    pub fn with_capacity(n: usize) -> Batch<'a> {
        Batch {
            events: Vec::with_capacity(n),
            blocks: Vec::new(),
        }
    }

    /// Its events, in the merge's order; borrowed from the batch.
    pub fn events(&self) -> &[Event<'_>] {
        &self.events
    }

    /// How many events it holds.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Empties it (keeping its room), letting its blocks go.
    pub fn clear(&mut self) {
        self.events.clear();
        self.blocks.clear();
    }

    fn hold(&mut self, blk: &Block) {
        if !self.blocks.iter().any(|b| Arc::ptr_eq(b, blk)) {
            self.blocks.push(Arc::clone(blk));
        }
    }
}

impl<'a> Batches<'a> {
    /// Appends up to `max` events to `batch`, fewer once their records take
    /// a MiB of the file; false when the merge has no more.
    pub fn fill(&mut self, batch: &mut Batch<'a>, max: usize) -> bool {
        let m = &mut self.merge;
        m.sweep();
        // The batch holds every block it has records of: those the streams
        // hold when it starts (their waiting records) and when it ends, and
        // those they left meanwhile after giving records of them.
        let hold_held = |m: &Merge<'a>, batch: &mut Batch<'a>| {
            for blk in m.streams.iter().filter_map(|s| s.held.as_ref()) {
                batch.hold(blk);
            }
            if let Some(blk) = &m.u_held {
                batch.hold(blk);
            }
        };
        hold_held(m, batch);
        let hold_left = |m: &mut Merge<'a>, batch: &mut Batch<'a>| {
            if let Some(cache) = m.cache.as_mut().filter(|c| !c.left.is_empty()) {
                for blk in cache.left.drain(..) {
                    batch.hold(&blk);
                }
            }
        };
        let mut more = true;
        let mut bytes = 0;
        for _ in 0..max {
            if bytes >= BATCH_BYTES {
                break;
            }
            let Some(ev) = m.next() else {
                more = false;
                break;
            };
            if let Event::Record(r) = &ev {
                bytes += r.encoded_len();
            }
            batch.events.push(ev);
            hold_left(m, batch);
        }
        hold_left(m, batch);
        hold_held(m, batch);
        more
    }

    /// Reads file `file_ix` by `clock` (see [`Merge::set_clock`]).
    pub fn set_clock(&mut self, file_ix: usize, clock: impl Into<Arc<TimeMap>>) {
        self.merge.set_clock(file_ix, clock);
    }

    /// The files being read.
    pub fn files(&self) -> &'a [LogFile] {
        self.merge.files()
    }

    /// Damaged extents met so far (see [`Merge::take_errors`]).
    pub fn take_errors(&mut self) -> Vec<ReadError> {
        self.merge.take_errors()
    }
}
