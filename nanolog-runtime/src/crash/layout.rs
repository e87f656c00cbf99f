//! Where each field of the crash-safe area lives: the offsets both sides
//! agree on, the logger that writes the area as it runs ([`super::area`])
//! and the recovery that reads it after the logger's process died
//! ([`super::recover`]). All numbers are little-endian; the area never
//! leaves the machine that wrote it (it is kept beside the log, not
//! shipped), so its words are the CPU's own 64-bit stores.
//!
//! ```text
//! page 0   the header: identity, clock, the write under way, the flusher's
//!          commit under way, a recovery's state
//! then     regions, one after another, each a whole number of pages:
//!   OUT    a header page (bytes used), then what the flusher took from the
//!          rings, compacted, as the log's entries, not yet written
//!   DICT   a header page (bytes used), then SITE entries as the log has them
//!   RING   a header page (thread, name, positions), then the ring's bytes
//! ```
//!
//! A ring's room goes back to its thread once what the flusher took from
//! it is in OUT (a commit: OUT's length and the ring's head move together,
//! see `Area::stage`); OUT empties once the write that carries it returns.
//!
//! A region is created by extending the file, then writing its kind last:
//! a walk stops at the first page whose kind is neither, the end of the
//! regions a process finished making.

/// The size of every header and the unit of every region.
pub(crate) const PAGE: usize = 4096;

/// The first bytes of an area.
pub(crate) const MAGIC: [u8; 8] = *b"NLRINGS\0";
/// The layout this build writes and reads; any other is kept aside.
pub(crate) const VERSION: u32 = 2;

// The header page.
pub(crate) const H_VERSION: usize = 8;
pub(crate) const H_PID: usize = 12;
pub(crate) const H_CAPACITY: usize = 16;
/// The clock's ticks a second (`f64` bits) as the process calibrated it.
pub(crate) const H_HZ: usize = 24;
/// The kernel's boot id (36 characters): ticks of another boot are not on
/// this boot's counter.
pub(crate) const H_BOOT: usize = 32;
pub(crate) const BOOT_LEN: usize = 40;
/// How many clock pairs were stored; the last is at `H_PAIRS + 16 * (n % 2)`.
pub(crate) const H_CLOCK_SEQ: usize = 72;
pub(crate) const H_PAIRS: usize = 80;
/// The flusher's write under way (see `Area::begin_write`): 1 while it is.
pub(crate) const H_WRITE: usize = 128;
pub(crate) const H_WRITE_DEV: usize = 136;
pub(crate) const H_WRITE_INO: usize = 144;
pub(crate) const H_WRITE_AT: usize = 152;
pub(crate) const H_WRITE_LEN: usize = 160;
/// The flusher's commit under way (see `Area::stage`): 1 while it is; the
/// ring region's offset in the file, its head and span context once
/// committed, and OUT's length then.
pub(crate) const H_COMMIT: usize = 320;
pub(crate) const H_COMMIT_SLOT: usize = 328;
pub(crate) const H_COMMIT_HEAD: usize = 336;
pub(crate) const H_COMMIT_CTX: usize = 344;
pub(crate) const H_COMMIT_OUT: usize = 352;
/// A recovery's progress: 0 none, [`REC_JUDGED`], [`REC_WRITING`].
pub(crate) const H_REC: usize = 256;
/// The recovery's verdict on the flusher's write under way: 1 if it was whole.
pub(crate) const H_REC_WHOLE: usize = 264;
pub(crate) const H_REC_DEV: usize = 272;
pub(crate) const H_REC_INO: usize = 280;
/// Where the recovery's bytes go in the log (its last whole entry's end).
pub(crate) const H_REC_AT: usize = 288;
pub(crate) const H_REC_LEN: usize = 296;
/// The log's path as the logger was given it (`u32` length, then bytes).
pub(crate) const H_LOG_PATH: usize = 512;

/// A recovery judged the write under way and found where its bytes go.
pub(crate) const REC_JUDGED: u64 = 1;
/// A recovery's bytes are being written.
pub(crate) const REC_WRITING: u64 = 2;

// Every region's header page.
pub(crate) const R_KIND: usize = 0;
pub(crate) const R_STATE: usize = 4;
pub(crate) const R_LEN: usize = 8;
pub(crate) const KIND_RING: u32 = u32::from_le_bytes(*b"RING");
pub(crate) const KIND_DICT: u32 = u32::from_le_bytes(*b"DICT");
pub(crate) const KIND_OUT: u32 = u32::from_le_bytes(*b"OUT\0");
/// A RING region's state: its ring belongs to a thread (else it is free,
/// everything it held written).
pub(crate) const RING_IN_USE: u32 = 1;

// A RING region's header page.
pub(crate) const R_THREAD: usize = 16;
pub(crate) const R_NAME_LEN: usize = 20;
/// The thread's span context (the key, 0: none) at the ring's head.
pub(crate) const R_HEAD_CTX: usize = 80;
/// Calls the thread dropped (`OnFull::Drop`) that no drop marker in the
/// ring reports yet: the count, the first's tick, the last's.
pub(crate) const R_DROPS: usize = 88;
pub(crate) const R_DROPS_FIRST: usize = 96;
pub(crate) const R_DROPS_LAST: usize = 104;
/// The producer's position (`tail`) and the flusher's (`head`), on cache
/// lines of their own, as a heap ring has them.
pub(crate) const R_TAIL: usize = 256;
pub(crate) const R_HEAD: usize = 384;
pub(crate) const R_NAME: usize = 512;
pub(crate) const NAME_MAX: usize = PAGE - R_NAME;

// A DICT or OUT region's header page: the bytes used after it.
pub(crate) const D_USED: usize = 16;

/// The little-endian `u64` at `at` of `b` (0 past its end).
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The little-endian `u32` at `at` of `b` (0 past its end).
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// This boot's id (Linux), or empty where there is none to read: then
/// ticks are never carried from a dead process's clock to a new one.
pub(crate) fn boot_id() -> [u8; BOOT_LEN] {
    let mut id = [0u8; BOOT_LEN];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let s = s.trim().as_bytes();
        let n = s.len().min(BOOT_LEN);
        id[..n].copy_from_slice(&s[..n]);
    }
    id
}
