//! The EXTENT entry's header: `thread: varint, base tick: u64 LE`, then the
//! records (see `wire::record`). Written by the flusher, read by the reader.

use super::format::ArgKind;
use super::record::{skip_args, Strings};
use super::{get_array, get_varint, put_varint, CONTEXT_SWITCH};

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

/// How many records the extent `body` holds (context switches are not
/// records), its sites' kinds given by `kinds_of`; a record of a site it
/// does not know, or damage, ends the count there. For the writer, which
/// carries a crashed file's count into a new run without the reader.
pub(crate) fn count_records<'k>(
    body: &[u8],
    kinds_of: impl Fn(u64) -> Option<&'k [ArgKind]>,
    strings: &Strings<'_>,
) -> u64 {
    let Some((_, mut pos)) = get_header(body).1 else {
        return 0;
    };
    let mut n = 0;
    while pos < body.len() {
        let Some(site) = get_varint(body, &mut pos) else {
            break;
        };
        if site == u64::from(CONTEXT_SWITCH) {
            if get_varint(body, &mut pos).is_none() {
                break;
            }
            continue;
        }
        let counted = get_varint(body, &mut pos)
            .and(kinds_of(site))
            .and_then(|kinds| skip_args(kinds, body, &mut pos, strings));
        if counted.is_none() {
            break;
        }
        n += 1;
    }
    n
}
