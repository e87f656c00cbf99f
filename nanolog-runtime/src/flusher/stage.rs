//! A crash-safe logger's flusher (see `crate::crash`) keeps what it took
//! from the rings in the area until the write that carries it returns:
//! each time it hands a ring's room back (as an ordinary logger's does, an
//! eighth of the ring at a time), it first stages what it compacted from
//! the ring since the last time in the area's OUT region, with the
//! dictionary entries those records need that the log lacks, and commits
//! it with the ring's head. A record is then in the ring, in OUT, or in
//! the log, and a `kill -9` at any moment finds it in one of them, once.

#[cfg(all(unix, not(loom)))]
use std::sync::Arc;

use crate::channel::Shared;
use crate::intern::Interner;
use crate::ring::Ring;

/// Where the buffers of the write being made stand against what OUT holds.
#[derive(Default)]
pub(super) struct Stage {
    #[cfg(all(unix, not(loom)))]
    area: Option<Arc<crate::crash::Area>>,
    /// Bytes of the write's dictionary entries (`State::defs`) staged ...
    defs: usize,
    /// ... of its records (`State::out`) ...
    out: usize,
    /// ... and the first string id not staged.
    strings: u32,
    /// A commit's STRINGS entry (kept for its allocation).
    #[cfg(all(unix, not(loom)))]
    strings_entry: Vec<u8>,
}

impl Stage {
    pub(super) fn new(shared: &Shared) -> Stage {
        let _ = shared;
        Stage {
            #[cfg(all(unix, not(loom)))]
            area: shared.area.get().cloned(),
            defs: 0,
            out: 0,
            strings: 1,
            #[cfg(all(unix, not(loom)))]
            strings_entry: Vec::new(),
        }
    }

    /// Whether rings' room goes back through OUT (the logger has an area).
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

    /// Commits what `defs`, `strings` and `out` gained since the last
    /// commit (`out` ends at a whole entry: no extent open), with `ring`
    /// drained up to `head`, where its thread is in span context `ctx`.
    /// The caller then hands the ring's room back and calls
    /// [`done`](Self::done). False if OUT has no room: nothing is staged,
    /// and the records must reach the log before the room goes back.
    pub(super) fn commit(
        &mut self,
        defs: &[u8],
        strings: &Interner,
        out: &[u8],
        ring: &Ring,
        head: u64,
        ctx: u64,
    ) -> bool {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            // (The strings' entry first made apart: most commits have none.)
            let defined = &mut self.strings_entry;
            defined.clear();
            let next = strings.put_since(defined, self.strings);
            let parts = [
                &defs[self.defs.min(defs.len())..],
                &defined[..],
                &out[self.out.min(out.len())..],
            ];
            if !area.stage(parts, ring.slot(), head, ctx) {
                return false;
            }
            crate::writer::stop_point(5);
            (self.defs, self.out, self.strings) = (defs.len(), out.len(), next);
            return true;
        }
        let _ = (defs, strings, out, ring, head, ctx);
        true
    }

    /// The ring's room went back: the commit is done.
    pub(super) fn done(&self) {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            area.committed();
        }
    }

    /// Before a write of `len` bytes at `at` of the file `identity`, which
    /// carries every record staged.
    pub(super) fn before_write(&self, identity: (u64, u64), at: u64, len: u64) {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            area.begin_write(identity, at, len);
        }
        let _ = (identity, at, len);
    }

    /// The write returned (or failed: its records are counted lost): OUT
    /// is empty, and the next commit stages from the buffers' starts, and
    /// from the strings no write has taken (`strings`, after the write).
    pub(super) fn after_write(&mut self, strings: &Interner) {
        #[cfg(all(unix, not(loom)))]
        if let Some(area) = &self.area {
            area.out_written();
            area.end_write();
        }
        (self.defs, self.out, self.strings) = (0, 0, strings.queued());
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
