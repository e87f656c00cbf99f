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
    /// The call sites with a record there (writers since 2026-11-29, the
    /// commit after 281579e; [`Sites::ANY`] for older ones).
    pub sites: Sites,
}

/// The call sites of a run's records, as a filter of one hash: a set bit
/// says "maybe". Its size grows with the sites it holds (8 bits a site,
/// 64 to 1,024 bits), so that a site absent from a run is found absent
/// most of the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sites {
    /// Its bits: `2^log2` of them, 0 for "any site may be there".
    log2: u8,
    words: [u64; SITE_WORDS],
}

/// The largest site filter: 1,024 bits (128 bytes of an INDEX entry of a
/// run of at least a few KiB: a service's hundred sites or more).
const SITE_WORDS: usize = 16;

impl Sites {
    /// Any site may be there (an older writer's, or a run with a gap).
    pub const ANY: Sites = Sites {
        log2: 0,
        words: [0; SITE_WORDS],
    };

    /// The filter of the sites `ids` (each once), of at most `most` bits
    /// (but 64 at least).
    pub fn of(ids: &[u32], most: usize) -> Sites {
        let most = 1usize << most.max(64).ilog2();
        let bits = (ids.len() * 8).next_power_of_two().min(most);
        let log2 = bits.clamp(64, SITE_WORDS * 64).ilog2() as u8;
        let mut s = Sites {
            log2,
            words: [0; SITE_WORDS],
        };
        for &id in ids {
            let b = s.bit(id);
            s.words[b / 64] |= 1 << (b % 64);
        }
        s
    }

    fn bit(&self, id: u32) -> usize {
        (u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - u32::from(self.log2))) as usize
    }

    /// Whether one of the sites `ids` may have a record there.
    pub fn may_hold_any(&self, ids: &[u32]) -> bool {
        self.log2 == 0
            || ids.iter().any(|&id| {
                let b = self.bit(id);
                self.words[b / 64] & (1 << (b % 64)) != 0
            })
    }
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
    if row.sites.log2 > 0 {
        out.push(row.sites.log2);
        let bytes = 1usize << (row.sites.log2 - 3);
        for w in &row.sites.words[..bytes.div_ceil(8)] {
            out.extend_from_slice(&w.to_le_bytes()[..bytes.min(8)]);
        }
    }
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
    // The sites (writers since 2026-11-29): taken only whole and of a size
    // a writer gives them; else any site may be there.
    let sites = body
        .get(pos)
        .copied()
        .filter(|l| (6..=10).contains(l))
        .and_then(|log2| {
            let bytes = 1usize << (log2 - 3);
            let raw = body.get(pos + 1..pos + 1 + bytes)?;
            let mut s = Sites {
                log2,
                words: [0; SITE_WORDS],
            };
            for (w, chunk) in s.words.iter_mut().zip(raw.chunks(8)) {
                let mut b = [0u8; 8];
                b[..chunk.len()].copy_from_slice(chunk);
                *w = u64::from_le_bytes(b);
            }
            Some(s)
        })
        .unwrap_or(Sites::ANY);
    Some(Row {
        offset,
        len,
        records,
        first_tick,
        last_tick,
        levels,
        threads,
        sites,
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
                sites: Sites::of(&[1, 5, 9], usize::MAX),
            },
            Row {
                offset: 4096,
                len: 70_000,
                records: 3_000,
                first_tick: 1 << 40,
                last_tick: (1 << 40) + 5_000_000,
                levels: 0b0_0110,
                threads: thread_bit(1),
                sites: Sites::of(&(1..400).collect::<Vec<_>>(), usize::MAX),
            },
            Row {
                offset: 0,
                len: 0,
                records: 0,
                first_tick: u64::MAX,
                last_tick: u64::MAX,
                levels: 0xff,
                threads: u64::MAX,
                sites: Sites::ANY,
            },
        ] {
            let mut body = Vec::new();
            put_index(&mut body, &row);
            assert_eq!(get_index(&body, row.offset), Some(row));
            // Cut short: not a row; in its sites, a row of any site.
            let cut = get_index(&body[..body.len() - 1], row.offset);
            if row.sites == Sites::ANY {
                assert_eq!(cut, None);
            } else {
                assert_eq!(
                    cut,
                    Some(Row {
                        sites: Sites::ANY,
                        ..row
                    })
                );
            }
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
                sites: Sites::ANY,
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
    fn a_sites_filter_holds_its_sites_and_few_others() {
        for n in [1u32, 3, 20, 100, 300] {
            let ids: Vec<u32> = (1..=n).map(|i| i * 7).collect();
            let f = Sites::of(&ids, usize::MAX);
            assert!(ids.iter().all(|&id| f.may_hold_any(&[id])), "{n} sites");
            let others = (10_000..11_000).filter(|&id| f.may_hold_any(&[id])).count();
            // 8 bits a site (at most 1,024): an eighth of the others, or
            // fewer, say "maybe"; past 128 sites, more.
            let most = if n <= 128 { 180 } else { 400 };
            assert!(others < most, "{n} sites: {others} of 1000 others maybe");
        }
        assert!(Sites::ANY.may_hold_any(&[5]));
        assert!(!Sites::of(&[1], usize::MAX).may_hold_any(&[]));
        // Held to a size: 300 sites in 256 bits, 64 at least.
        assert_eq!(Sites::of(&(0..300).collect::<Vec<_>>(), 300).log2, 8);
        assert_eq!(Sites::of(&(0..300).collect::<Vec<_>>(), 10).log2, 6);
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
