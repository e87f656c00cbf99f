//! The EXTENT entry's header: `thread: varint, base tick: u64 LE`, then the
//! records (see `wire::record`). Written by the flusher, read by the reader.

use super::{get_array, get_varint, put_varint};

/// Writes the header of an extent of `thread`'s records starting at `tick`.
#[inline]
pub(crate) fn put_header(out: &mut Vec<u8>, thread: u32, tick: u64) {
    put_varint(out, u64::from(thread));
    out.extend_from_slice(&tick.to_le_bytes());
}

/// Reads the header: `(thread, base tick, offset of the first record)`.
/// The thread alone is readable from a body too short for the tick.
#[inline]
pub(crate) fn get_header(body: &[u8]) -> (Option<u32>, Option<(u64, usize)>) {
    let mut pos = 0;
    let thread = get_varint(body, &mut pos).and_then(|v| u32::try_from(v).ok());
    let tick = thread.and_then(|_| {
        let t = get_array::<8>(body, &mut pos).map(u64::from_le_bytes)?;
        Some((t, pos))
    });
    (thread, tick)
}
