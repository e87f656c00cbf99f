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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// commit after 281579e; [`Ids::ANY`] for older ones).
    pub sites: Ids,
    /// The contexts (span stacks, by their ids in the file) its records
    /// switch to (writers since 2026-11-29, the commit after 395c780;
    /// [`Ids::ANY`] for older ones).
    pub contexts: Ids,
}

/// Ids (call sites, contexts) as a Bloom filter: an id sets [`HASHES`]
/// bits (one in files before format version 9), and an id of which one is
/// clear is not there. Its size grows with the ids it holds (8 bits an id,
/// 64 bits to a largest size), so that an id absent from a run is found
/// absent most of the time: with three bits an id, all but about 3% of the
/// time (one bit: all but 12%).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ids {
    /// Its bits: `2^log2` of them, 0 for "any id may be there".
    log2: u8,
    /// The bits an id sets.
    hashes: u8,
    words: Vec<u64>,
}

/// The bits an id sets in an [`Ids`] filter of a format version 9 file.
pub const HASHES: u8 = 3;

/// The bits an id sets in an [`Ids`] filter of a file of format `version`.
pub fn hashes_of(version: u16) -> u8 {
    if version >= 9 {
        HASHES
    } else {
        1
    }
}

/// The largest sites filter: 1,024 bits (a service's hundred sites or
/// more).
pub const MOST_SITE_BITS: usize = 1 << 10;

/// The largest contexts filter: 8,192 bits (1 KiB, for a busy write's
/// thousand requests).
pub const MOST_CONTEXT_BITS: usize = 1 << 13;

impl Ids {
    /// Any id may be there (an older writer's, or a run with a gap).
    pub const ANY: Ids = Ids {
        log2: 0,
        hashes: 1,
        words: Vec::new(),
    };

    /// The filter of `ids` (each once), of at most `most` bits (a power of
    /// two; 64 at least), as a writer of this version makes it.
    pub fn of(ids: &[u32], most: usize) -> Ids {
        Ids::of_hashes(ids, most, HASHES)
    }

    /// [`Ids::of`], an id setting `hashes` bits.
    pub fn of_hashes(ids: &[u32], most: usize, hashes: u8) -> Ids {
        let most = 1usize << most.max(64).ilog2();
        let bits = (ids.len() * 8).next_power_of_two().clamp(64, most);
        let mut f = Ids {
            log2: bits.ilog2() as u8,
            hashes,
            words: vec![0; bits / 64],
        };
        for &id in ids {
            for i in 0..hashes {
                let b = f.bit(id, i);
                f.words[b / 64] |= 1 << (b % 64);
            }
        }
        f
    }

    /// Bit `i` of `id`: the top bits of two multiplicative hashes combined
    /// (`h1 + i * h2`: the first is the one-bit filter's).
    fn bit(&self, id: u32, i: u8) -> usize {
        let id = u64::from(id);
        let h1 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let h2 = (id ^ 0x5bd1_e995).wrapping_mul(0xc2b2_ae3d_27d4_eb4f) | 1;
        let h = h1.wrapping_add(u64::from(i).wrapping_mul(h2));
        (h >> (64 - u32::from(self.log2))) as usize
    }

    /// Whether one of `ids` may be there.
    pub fn may_hold_any(&self, ids: &[u32]) -> bool {
        self.log2 == 0
            || ids.iter().any(|&id| {
                (0..self.hashes).all(|i| {
                    let b = self.bit(id, i);
                    self.words
                        .get(b / 64)
                        .is_some_and(|w| w & (1 << (b % 64)) != 0)
                })
            })
    }

    /// Appends it: `log2: u8`, then `2^log2 / 8` bytes (none for "any").
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.log2);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// The filter at `body[*pos..]`, of at most `most` bits, an id setting
    /// `hashes` of them; `None` if it is cut short or of another size.
    fn get(body: &[u8], pos: &mut usize, most: usize, hashes: u8) -> Option<Ids> {
        let log2 = *body.get(*pos)?;
        if log2 == 0 {
            *pos += 1;
            return Some(Ids::ANY);
        }
        if !(6..=most.ilog2()).contains(&u32::from(log2)) {
            return None;
        }
        let bytes = 1usize << (log2 - 3);
        let raw = body.get(*pos + 1..*pos + 1 + bytes)?;
        *pos += 1 + bytes;
        let words = raw
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        Some(Ids {
            log2,
            hashes,
            words,
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
    row.sites.put(out);
    row.contexts.put(out);
}

/// The row of an INDEX entry's body in a file of format `version`, its
/// records at `offset` (where the entry ends); `None` if it is malformed.
/// Bytes after the fields are left for later revisions.
pub fn get_index(body: &[u8], offset: u64, version: u16) -> Option<Row> {
    let mut pos = 0;
    get_row(body, &mut pos, offset, version, false)
}

/// The row at `body[*pos..]`; with `whole`, `None` unless its filters are
/// whole and of a size a writer gives them (else they say "any", as an
/// INDEX entry's may).
fn get_row(body: &[u8], pos: &mut usize, offset: u64, version: u16, whole: bool) -> Option<Row> {
    let hashes = hashes_of(version);
    let len = get_varint(body, pos)?;
    let records = get_varint(body, pos)?;
    let first_tick = get_varint(body, pos)?;
    let last_tick = first_tick.checked_add(get_varint(body, pos)?)?;
    let levels = *body.get(*pos)?;
    *pos += 1;
    let threads = get_varint(body, pos)?;
    // The sites and contexts (writers since 2026-11-29): taken only whole
    // and of a size a writer gives them; else any may be there.
    let sites = Ids::get(body, pos, MOST_SITE_BITS, hashes);
    let contexts = sites
        .as_ref()
        .and_then(|_| Ids::get(body, pos, MOST_CONTEXT_BITS, hashes));
    if whole && contexts.is_none() {
        return None;
    }
    let contexts = contexts.unwrap_or(Ids::ANY);
    let sites = sites.unwrap_or(Ids::ANY);
    Some(Row {
        offset,
        len,
        records,
        first_tick,
        last_tick,
        levels,
        threads,
        sites,
        contexts,
    })
}

/// The most entries a RUN entry lists among its run's records: with its
/// row's largest fields and filters of [`MOST_RUN_BITS`], they fit in
/// [`RUN_BODY`] bytes at 6 bytes each (`Run::kept`).
pub const MOST_KEPT: usize = 24;

/// The most bits of a RUN entry's filters of sites and of contexts.
pub const MOST_RUN_BITS: usize = 1 << 9;

/// The body length of every RUN entry a writer writes: its row (at most
/// 51 bytes), two filters of at most [`MOST_RUN_BITS`] (65 bytes each),
/// its blocks (four varints, 10 bytes at most in a run under 2 MiB), the
/// count of kept stretches (a byte) and [`MOST_KEPT`] of them (two varints
/// each, of 3 bytes at most), then zeros.
pub const RUN_BODY: usize = 51 + 2 * 65 + 10 + 1 + MOST_KEPT * 6;

/// The BLOCK entries among a run's records (not among the stretches it
/// keeps), so a reader that steps over them can say what the file holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunBlocks {
    /// Blocks of LZ4 (codecs 1 and 2).
    pub lz4: u64,
    /// Blocks of deflate (codec 3).
    pub deflate: u64,
    /// What they take in the file, their frames included.
    pub bytes: u64,
    /// What their entries take inflated.
    pub raw: u64,
}

/// A run of small writes as its RUN entry says (FORMAT.md, "RUN"): its
/// records summed up in `row` (`row.offset` is where the entry ends and
/// the run starts), and the stretches `[start, end)` of whole top-level
/// entries in it that are not records (dictionary entries and clock pairs:
/// each write's first region), as offsets in the file, sorted and apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Where the run is and what its records hold.
    pub row: Row,
    /// What a reader that leaves its records out still reads.
    pub kept: Vec<(u64, u64)>,
    /// The blocks its records are in.
    pub blocks: RunBlocks,
}

/// Appends the body of the RUN entry of `run` (its row's offset is where
/// the entry ends): the row as an INDEX entry's body, then its blocks
/// (`lz4, deflate, bytes, raw`: varints), then `kept: varint` and for each
/// stretch the bytes since the last one's end (or the run's start) and its
/// length; then zeros to [`RUN_BODY`] bytes, if it takes fewer.
pub fn put_run(out: &mut Vec<u8>, run: &Run) {
    let start = out.len();
    put_index(out, &run.row);
    let b = &run.blocks;
    for v in [b.lz4, b.deflate, b.bytes, b.raw] {
        put_varint(out, v);
    }
    put_varint(out, run.kept.len() as u64);
    let mut at = run.row.offset;
    for &(a, b) in &run.kept {
        put_varint(out, a.saturating_sub(at));
        put_varint(out, b.saturating_sub(a));
        at = b;
    }
    let len = out.len() - start;
    out.resize(start + len.max(RUN_BODY), 0);
}

/// The run of a RUN entry's body in a file of format `version`, its run at
/// `offset` (where the entry ends); `None` if the body is a writer's
/// placeholder not filled in (a run of length 0: the run is still being
/// written, or its writer died before it ended), is malformed, or lists
/// stretches that do not lie in order inside the run. Bytes after the
/// stretches are left for later revisions.
pub fn get_run(body: &[u8], offset: u64, version: u16) -> Option<Run> {
    let mut pos = 0;
    let row = get_row(body, &mut pos, offset, version, true)?;
    let end = offset.checked_add(row.len)?;
    if row.len == 0 {
        return None;
    }
    let mut next = || get_varint(body, &mut pos);
    let blocks = RunBlocks {
        lz4: next()?,
        deflate: next()?,
        bytes: next()?,
        raw: next()?,
    };
    let n = get_varint(body, &mut pos)?;
    // (Two bytes a stretch at least: the count cannot make it allocate.)
    if n > body.len() as u64 {
        return None;
    }
    let mut kept = Vec::with_capacity(n as usize);
    let mut at = offset;
    for _ in 0..n {
        let a = at.checked_add(get_varint(body, &mut pos)?)?;
        let b = a.checked_add(get_varint(body, &mut pos)?)?;
        if b <= a || b > end {
            return None;
        }
        kept.push((a, b));
        at = b;
    }
    Some(Run { row, kept, blocks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::VERSION;

    fn row(sites: Ids, contexts: Ids) -> Row {
        Row {
            offset: 4096,
            len: 70_000,
            records: 3_000,
            first_tick: 1 << 40,
            last_tick: (1 << 40) + 5_000_000,
            levels: 0b0_0110,
            threads: thread_bit(1) | thread_bit(7),
            sites,
            contexts,
        }
    }

    #[test]
    fn a_row_reads_back_as_written() {
        let many: Vec<u32> = (1..400).collect();
        for row in [
            row(
                Ids::of(&[1, 5, 9], usize::MAX),
                Ids::of(&many, MOST_CONTEXT_BITS),
            ),
            row(Ids::of(&many, MOST_SITE_BITS), Ids::ANY),
            row(Ids::ANY, Ids::ANY),
            Row {
                offset: 0,
                len: 0,
                records: 0,
                first_tick: u64::MAX,
                last_tick: u64::MAX,
                levels: 0xff,
                threads: u64::MAX,
                sites: Ids::ANY,
                contexts: Ids::ANY,
            },
        ] {
            let mut body = Vec::new();
            put_index(&mut body, &row);
            assert_eq!(get_index(&body, row.offset, VERSION).as_ref(), Some(&row));
            // Cut short in its filters: any id may be there; in its fields:
            // not a row.
            let cut = get_index(&body[..body.len() - 1], row.offset, VERSION).unwrap();
            assert_eq!(cut.contexts, Ids::ANY);
            assert_eq!((cut.len, cut.threads), (row.len, row.threads));
            assert_eq!(get_index(&body[..3], row.offset, VERSION), None);
            // An older writer's row (no filters): any.
            let old =
                &body[..body.len() - 2 - row.sites.words.len() * 8 - row.contexts.words.len() * 8];
            let old = get_index(old, row.offset, VERSION).unwrap();
            assert_eq!((old.sites, old.contexts), (Ids::ANY, Ids::ANY));
        }
        // A filter of a size no writer gives: any.
        let mut body = Vec::new();
        put_index(&mut body, &row(Ids::of(&many, 1 << 12), Ids::ANY));
        assert_eq!(get_index(&body, 4096, VERSION).unwrap().sites, Ids::ANY);
        // A last tick before the first cannot be said; past u64 is damage.
        let mut body = Vec::new();
        put_index(
            &mut body,
            &Row {
                first_tick: u64::MAX,
                last_tick: 0,
                ..row(Ids::ANY, Ids::ANY)
            },
        );
        assert_eq!(get_index(&body, 0, VERSION).unwrap().last_tick, u64::MAX);
        assert_eq!(
            get_index(
                &[1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 1, 1],
                0,
                VERSION
            ),
            None
        );
    }

    #[test]
    fn a_filter_holds_its_ids_and_few_others() {
        for n in [1u32, 3, 20, 100, 300] {
            let ids: Vec<u32> = (1..=n).map(|i| i * 7).collect();
            let f = Ids::of(&ids, MOST_SITE_BITS);
            assert!(ids.iter().all(|&id| f.may_hold_any(&[id])), "{n} sites");
            let others = (10_000..11_000).filter(|&id| f.may_hold_any(&[id])).count();
            // 8 bits an id (at most 1,024), three an id: about 3% of the
            // others, or fewer, say "maybe"; past 128 ids, more.
            let most = if n <= 128 { 60 } else { 260 };
            assert!(others < most, "{n} sites: {others} of 1000 others maybe");
            // A file before version 9: one bit an id, an eighth.
            let one = Ids::of_hashes(&ids, MOST_SITE_BITS, hashes_of(8));
            assert!(ids.iter().all(|&id| one.may_hold_any(&[id])), "{n} sites");
            let others = (10_000..11_000)
                .filter(|&id| one.may_hold_any(&[id]))
                .count();
            let most = if n <= 128 { 180 } else { 400 };
            assert!(others < most, "{n} sites: {others} of 1000 others maybe");
        }
        // A version 8 writer's filter (one bit an id, the first hash)
        // reads as it did: the bits of `id * 0x9e3779b97f4a7c15`'s top.
        let ids = [3u32, 17, 400];
        let f = Ids::of_hashes(&ids, MOST_SITE_BITS, 1);
        let mut body = Vec::new();
        f.put(&mut body);
        let mut want = vec![0u64; 1 << (f.log2 - 6)];
        for id in ids {
            let b = (u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - f.log2)) as usize;
            want[b / 64] |= 1 << (b % 64);
        }
        assert_eq!(f.words, want);
        let back = Ids::get(&body, &mut 0, MOST_SITE_BITS, hashes_of(8)).unwrap();
        assert_eq!(back, f);
        assert!(Ids::ANY.may_hold_any(&[5]));
        assert!(!Ids::of(&[1], usize::MAX).may_hold_any(&[]));
        // Held to a size: 300 ids in 256 bits, 64 at least.
        let many: Vec<u32> = (0..300).collect();
        assert_eq!(Ids::of(&many, 300).log2, 8);
        assert_eq!(Ids::of(&many, 10).log2, 6);
        assert_eq!(Ids::of(&many, MOST_CONTEXT_BITS).log2, 12);
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

    /// A RUN entry's body reads back as written, at the placeholder's
    /// length whatever it lists; its placeholder (zeros) and bodies that
    /// are cut, list stretches empty or past the run, or have
    /// filters of a size no writer gives, say no run.
    #[test]
    fn a_run_reads_back_as_written_and_its_placeholder_says_none() {
        let sites: Vec<u32> = (0..64).collect();
        let contexts: Vec<u32> = (1_000..1_064).collect();
        let mut r = row(
            Ids::of(&sites, MOST_RUN_BITS),
            Ids::of(&contexts, MOST_RUN_BITS),
        );
        r.len = 60_000;
        r.last_tick = u64::MAX - 1;
        r.first_tick = 0;
        r.records = 1 << 20;
        r.threads = u64::MAX;
        let kept: Vec<(u64, u64)> = (0..MOST_KEPT as u64)
            .map(|i| (4096 + i * 2_000, 4096 + i * 2_000 + 700))
            .collect();
        let run = Run {
            row: r,
            kept,
            blocks: RunBlocks {
                lz4: 3,
                deflate: 400,
                bytes: 60_000,
                raw: 1 << 20,
            },
        };
        let mut body = vec![7];
        put_run(&mut body, &run);
        let body = &body[1..];
        assert_eq!(body.len(), RUN_BODY, "the largest run fits the placeholder");
        assert_eq!(get_run(body, 4096, VERSION), Some(run.clone()));
        // A small one: padded to the placeholder's length.
        let mut small = run.clone();
        small.kept.truncate(1);
        small.row.sites = Ids::ANY;
        let mut b = Vec::new();
        put_run(&mut b, &small);
        assert_eq!(b.len(), RUN_BODY);
        assert_eq!(get_run(&b, 4096, VERSION), Some(small.clone()));
        // The placeholder, and a cut body: none.
        assert_eq!(get_run(&[0; RUN_BODY], 4096, VERSION), None);
        assert_eq!(get_run(&b[..20], 4096, VERSION), None);
        // (Stretches are said by the bytes between them: in order.) One
        // past the run's end, one empty.
        for kept in [vec![(60_000, 70_000)], vec![(5_000, 5_000)]] {
            let bad = Run {
                kept,
                ..small.clone()
            };
            let mut b = Vec::new();
            put_run(&mut b, &bad);
            assert_eq!(get_run(&b, 4096, VERSION), None, "{:?}", bad.kept);
        }
        // A filter of a size no writer gives: the run is not taken (its
        // stretches could not be found).
        let mut odd = small.clone();
        let many: Vec<u32> = (0..400).collect();
        odd.row.sites = Ids::of(&many, 1 << 12);
        let mut b = Vec::new();
        put_run(&mut b, &odd);
        assert_eq!(get_run(&b, 4096, VERSION), None);
    }
}
