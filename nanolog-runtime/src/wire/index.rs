//! INDEX entries (tag 13, FORMAT.md): a writer's sparse index, one entry
//! ahead of each write's records. It says how long the run of records after
//! it is and what they hold (their ticks, levels and threads), so that a
//! reader asking for a time window or a level steps over the runs that
//! cannot match without inflating or indexing them, and a walk of the file
//! by its frames' lengths jumps from one write to the next.

use super::{get_varint, put_varint};

/// A write's records in the file: the bytes `[offset, offset + len)`, a
/// run of whole top-level entries (EXTENTs and DROPs, or a BLOCK of them)
/// right after its INDEX entry, holding no dictionary entry, clock pair or
/// END.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Where its first entry starts: where its INDEX entry ends (not in the
    /// entry's bytes).
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

/// Appends the body of the INDEX entry of `row` (its offset is where the
/// entry ends).
pub fn put_index(out: &mut Vec<u8>, row: &Row) {
    put_varint(out, row.len);
    put_varint(out, row.records);
    put_varint(out, row.first_tick);
    put_varint(out, row.last_tick.saturating_sub(row.first_tick));
    out.push(row.levels);
    put_varint(out, row.threads);
}

/// The row of an INDEX entry's body, its records at `offset` (where the
/// entry ends); `None` if it is malformed. Bytes after the fields are
/// left for later revisions.
pub fn get_index(body: &[u8], offset: u64) -> Option<Row> {
    let mut pos = 0;
    let len = get_varint(body, &mut pos)?;
    let records = get_varint(body, &mut pos)?;
    let first_tick = get_varint(body, &mut pos)?;
    let last_tick = first_tick.checked_add(get_varint(body, &mut pos)?)?;
    let levels = *body.get(pos)?;
    pos += 1;
    let threads = get_varint(body, &mut pos)?;
    Some(Row {
        offset,
        len,
        records,
        first_tick,
        last_tick,
        levels,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_reads_back_as_written() {
        for row in [
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
                offset: 0,
                len: 0,
                records: 0,
                first_tick: u64::MAX,
                last_tick: u64::MAX,
                levels: 0xff,
                threads: u64::MAX,
            },
        ] {
            let mut body = Vec::new();
            put_index(&mut body, &row);
            assert_eq!(get_index(&body, row.offset), Some(row));
            // Cut short: not a row.
            assert_eq!(get_index(&body[..body.len() - 1], row.offset), None);
        }
        // A last tick before the first cannot be said; past u64 is damage.
        let mut body = Vec::new();
        put_index(
            &mut body,
            &Row {
                offset: 0,
                len: 1,
                records: 1,
                first_tick: u64::MAX,
                last_tick: 0,
                levels: 1,
                threads: 1,
            },
        );
        assert_eq!(get_index(&body, 0).unwrap().last_tick, u64::MAX);
        assert_eq!(
            get_index(
                &[1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 1, 1],
                0
            ),
            None
        );
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
