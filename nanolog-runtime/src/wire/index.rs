//! INDEX entries (tag 13, FORMAT.md): the sparse index a writer keeps as it
//! goes. Each row says where one write's records lie in the file and what
//! they hold (their ticks, levels and threads), so that a reader asking for
//! a time window, a level or a thread can leave out the writes that cannot
//! match without inflating or indexing them.

use super::{get_varint, put_varint, unzigzag, zigzag};

/// One write's records in the file: the bytes `[offset, offset + len)`, a
/// run of whole top-level entries (EXTENTs and DROPs, or a BLOCK of them)
/// holding no dictionary entry, clock pair or END.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Where its first entry starts.
    pub offset: u64,
    /// Its bytes.
    pub len: u64,
    /// Its records.
    pub records: u64,
    /// The earliest tick of its records and dropped records ...
    pub first_tick: u64,
    /// ... and the latest.
    pub last_tick: u64,
    /// Bit `l` set when a record of level `l` (`Level as u8`) is there; all
    /// set when a gap (a DROP) is.
    pub levels: u8,
    /// Bit [`thread_bit`]`(t)` set for each thread `t` with a record or a
    /// gap there (a filter of one hash: a set bit says "maybe").
    pub threads: u64,
}

/// The bit of thread `t` in [`Row::threads`].
pub fn thread_bit(t: u32) -> u64 {
    1 << ((u64::from(t).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 58)
}

/// Appends the body of an INDEX entry of `rows`.
pub fn put_index(out: &mut Vec<u8>, rows: &[Row]) {
    put_varint(out, rows.len() as u64);
    let (mut end, mut tick) = (0u64, 0u64);
    for r in rows {
        // Offsets from the last row's end (rows go forward; a first row or
        // one that does not is written as it is, flagged by the low bit).
        match r.offset.checked_sub(end) {
            Some(d) => put_varint(out, d << 1),
            None => put_varint(out, r.offset << 1 | 1),
        }
        put_varint(out, r.len);
        put_varint(out, r.records);
        put_varint(out, zigzag(r.first_tick.wrapping_sub(tick) as i64));
        put_varint(out, r.last_tick.saturating_sub(r.first_tick));
        out.push(r.levels);
        put_varint(out, r.threads);
        end = r.offset + r.len;
        tick = r.first_tick;
    }
}

/// The rows of an INDEX entry's body; `None` if it is malformed (then none
/// of it is used).
pub fn get_index(body: &[u8]) -> Option<Vec<Row>> {
    let mut pos = 0;
    let n = get_varint(body, &mut pos)?;
    // Each row takes at least 7 bytes: a count the body cannot hold is damage.
    if n > body.len() as u64 / 7 {
        return None;
    }
    let mut rows = Vec::with_capacity(n as usize);
    let (mut end, mut tick) = (0u64, 0u64);
    for _ in 0..n {
        let o = get_varint(body, &mut pos)?;
        let offset = if o & 1 == 0 {
            end.checked_add(o >> 1)?
        } else {
            o >> 1
        };
        let len = get_varint(body, &mut pos)?;
        let records = get_varint(body, &mut pos)?;
        let first_tick = tick.wrapping_add(unzigzag(get_varint(body, &mut pos)?) as u64);
        let last_tick = first_tick.checked_add(get_varint(body, &mut pos)?)?;
        let levels = *body.get(pos)?;
        pos += 1;
        let threads = get_varint(body, &mut pos)?;
        end = offset.checked_add(len)?;
        tick = first_tick;
        rows.push(Row {
            offset,
            len,
            records,
            first_tick,
            last_tick,
            levels,
            threads,
        });
    }
    (pos == body.len()).then_some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_as_written() {
        let rows = [
            Row {
                offset: 4096,
                len: 70_000,
                records: 3_000,
                first_tick: 1 << 40,
                last_tick: (1 << 40) + 5_000_000,
                levels: 0b0_0110,
                threads: thread_bit(1) | thread_bit(7),
            },
            Row {
                offset: 80_000,
                len: 12,
                records: 1,
                // Ticks of another core may step back.
                first_tick: (1 << 40) - 10,
                last_tick: (1 << 40) - 10,
                levels: 0xff,
                threads: thread_bit(2),
            },
            // An offset behind the last row's end.
            Row {
                offset: 100,
                len: 1,
                records: 0,
                first_tick: 0,
                last_tick: u64::MAX,
                levels: 0,
                threads: 0,
            },
        ];
        let mut body = Vec::new();
        put_index(&mut body, &rows);
        assert_eq!(get_index(&body).unwrap(), rows);
        // Cut short, or with bytes after it: not an index.
        assert_eq!(get_index(&body[..body.len() - 1]), None);
        body.push(0);
        assert_eq!(get_index(&body), None);
        assert_eq!(get_index(&[0xff, 0xff, 0x03]), None);
    }

    #[test]
    fn a_thread_sets_one_bit_and_threads_spread() {
        let bits: std::collections::BTreeSet<u64> = (0..64).map(thread_bit).collect();
        assert!(bits.iter().all(|b| b.count_ones() == 1));
        assert!(
            bits.len() > 32,
            "{} distinct bits of 64 threads",
            bits.len()
        );
    }
}
