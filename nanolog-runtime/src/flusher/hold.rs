//! A crash-safe logger's rings (see `crate::crash`) give their space back
//! only once the bytes the flusher took from them are in the log: until
//! then the ring itself, in the area, is where those records survive a
//! `kill -9`. The flusher holds each ring it drained here, with where its
//! head goes, and lets them all go when the write that carries their
//! records returns.

use std::sync::Arc;

use crate::channel::Shared;
use crate::ring::Ring;

/// A ring drained into the write being made.
struct Held {
    ring: Arc<Ring>,
    /// Its head once the write is made.
    head: u64,
    /// Its thread's span context there (the key; 0: none).
    ctx: u64,
}

/// The rings held for the write being made.
#[derive(Default)]
pub(super) struct Holds {
    #[cfg(all(unix, not(loom)))]
    area: Option<Arc<crate::crash::Area>>,
    held: Vec<Held>,
    /// Bumped as the held are let go (see [`HeldAt`]).
    round: u64,
}

/// Where a ring stands among the held: (the round, its index), if held.
#[derive(Default, Clone, Copy)]
pub(super) struct HeldAt(Option<(u64, usize)>);

impl Holds {
    pub(super) fn new(shared: &Shared) -> Holds {
        let _ = shared;
        Holds {
            #[cfg(all(unix, not(loom)))]
            area: shared.area.get().cloned(),
            held: Vec::new(),
            round: 0,
        }
    }

    /// Whether rings are held until written (the logger has an area).
    #[inline]
    pub(super) fn active(&self) -> bool {
        #[cfg(all(unix, not(loom)))]
        {
            self.area.is_some()
        }
        #[cfg(not(all(unix, not(loom))))]
        {
            false
        }
    }

    /// `ring` was drained up to `head`, where its thread is in context
    /// `ctx`. `at` is the ring's own note of where it stands among the held
    /// (its flusher state keeps it), so a pass over thousands of rings
    /// finds each in one step.
    pub(super) fn hold(&mut self, at: &mut HeldAt, ring: &Arc<Ring>, head: u64, ctx: u64) {
        if let Some(h) =
            at.0.filter(|&(round, _)| round == self.round)
                .and_then(|(_, i)| self.held.get_mut(i))
        {
            h.head = head;
            h.ctx = ctx;
            return;
        }
        *at = HeldAt(Some((self.round, self.held.len())));
        self.held.push(Held {
            ring: Arc::clone(ring),
            head,
            ctx,
        });
    }

    /// Whether a held ring has an eighth of its bytes waiting for the
    /// write: its producer may soon wait for room, so the pass writes as it
    /// ends (a pass that drained less leaves its records for the next
    /// write, as an ordinary logger's batch does).
    pub(super) fn pressing(&self) -> bool {
        self.held.iter().any(|h| {
            h.head - h.ring.released() >= h.ring.capacity() as u64 / super::drain::HELD_PRESS
        })
    }

    /// Before a write of `len` bytes at `at` of the file `identity`: the
    /// area says where each held ring's head goes once it is made.
    pub(super) fn before_write(&self, identity: (u64, u64), at: u64, len: u64) {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            for h in &self.held {
                if let Some(slot) = h.ring.slot() {
                    slot.set_pending(h.head, h.ctx);
                }
            }
            area.begin_write(identity, at, len);
        }
        let _ = (identity, at, len);
    }

    /// The write returned (or failed: its records are counted lost, and
    /// the rings must not stay full): every held ring's space goes back.
    pub(super) fn release(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Every ring's note of its place is stale from here.
        self.round += 1;
        for h in self.held.drain(..) {
            #[cfg(all(unix, not(loom)))]
            if let Some(slot) = h.ring.slot() {
                slot.set_head_ctx(h.ctx);
            }
            h.ring.release_to(h.head);
        }
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            area.end_write();
        }
    }

    /// A clock pair, for a recovery to map the rings' ticks with.
    pub(super) fn clock(&self, tick: u64, ns: i64) {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            area.clock(tick, ns);
        }
        let _ = (tick, ns);
    }
}
