//! Inflating a file's BLOCK entries while it is indexed, a wave of blocks
//! at once into one buffer sized for them all, on as many cores as the
//! bytes pay for: the blocks a file keeps (up to its resident budget, see
//! `file::resident`) in one wave, or waves of 64 MiB; past the budget,
//! waves of a few MiB into one buffer used again for each.
//!
//! A reader that inflated block by block into a growing buffer spent as
//! long again on the buffer (regrowth copies, and the page faults of
//! touching each new page on one thread) as on LZ4 itself. Here the sizes
//! are known from the blocks' headers before any is inflated: the buffer
//! is taken once, zeroed by the kernel as its pages are first touched, and
//! split into one disjoint slice per block, so threads fill their own
//! slices with no locks and no ordering between them.

use std::ops::Range;

use crate::wire::block::{block_parts, inflate, BlockError, Parts};

/// A block to inflate: its parts, and the raw size they say.
struct Job<'a> {
    parts: Parts<'a>,
    raw: usize,
}

/// Raw bytes a thread takes on before another one pays for its start
/// (LZ4 inflated 72 MB in 14-20 ms on two threads here, page faults aside:
/// 2 MiB is about a millisecond; a thread's start and join is far less,
/// though not measured here).
const PER_THREAD: usize = 2 << 20;

/// The most threads a scan uses.
pub(super) const MAX_THREADS: usize = 8;

/// Raw bytes the blocks of one wave may say they hold. A file whose blocks
/// say more (a large log, or a damaged one whose sizes lie) is inflated a
/// wave at a time, each wave's memory taken when it starts; the blocks of a
/// wave that did not inflate, or whose bytes are not whole entries, give
/// theirs back before the next. (64 MiB, the largest block the format
/// allows: a wave of the writer's 128 KiB blocks is 512 of them, plenty for
/// every core; blocks that lie cost at most a wave of memory.)
pub(super) const WAVE: usize = 64 << 20;

/// Inflates the BLOCK bodies `bodies` into `into` from `at` on (what it
/// held there is written over: a buffer used again is not zeroed again),
/// one after another, on at most `threads` threads; per body, where its
/// entries are in `into`, or why it has none (a codec not known, a size it
/// cannot hold, bytes that do not inflate). `into` ends where they do.
pub(super) fn inflate_blocks<'a>(
    bodies: impl Iterator<Item = &'a [u8]>,
    into: &mut Vec<u8>,
    at: usize,
    threads: usize,
) -> Vec<Result<Range<usize>, BlockError>> {
    let parts: Vec<_> = bodies.map(block_parts).collect();
    let jobs: Vec<Job> = parts
        .iter()
        .flatten()
        .map(|&parts| Job {
            parts,
            raw: parts.raw,
        })
        .collect();
    let mut inflated = inflate_all(&jobs, into, at, threads).into_iter();
    parts
        .into_iter()
        .map(|p| p.and_then(|_| inflated.next().unwrap_or(Err(BlockError::Damaged))))
        .collect()
}

/// Inflates `jobs` into `into` from `at` on, one after another, on at most
/// `threads` threads; per job, where its bytes are in `into`, or why it
/// did not inflate. The blocks that inflated stand in `into` in their
/// order with nothing between them, and `into` ends with them.
fn inflate_all(
    jobs: &[Job<'_>],
    into: &mut Vec<u8>,
    mut at: usize,
    threads: usize,
) -> Vec<Result<Range<usize>, BlockError>> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut left = jobs;
    while !left.is_empty() {
        let mut bytes = 0;
        let n = left
            .iter()
            .take_while(|j| {
                bytes += j.raw;
                bytes <= WAVE
            })
            .count()
            .max(1);
        let (wave, after) = left.split_at(n);
        let (results, end) = inflate_wave(wave, into, at, threads);
        out.extend(results);
        at = end;
        left = after;
    }
    into.truncate(at);
    out
}

/// [`inflate_all`] of jobs whose raw sizes together are at most about
/// [`WAVE`] (or one job), into `into` from `at`; and where their bytes end.
fn inflate_wave(
    jobs: &[Job<'_>],
    into: &mut Vec<u8>,
    at: usize,
    threads: usize,
) -> (Vec<Result<Range<usize>, BlockError>>, usize) {
    let total: usize = jobs.iter().map(|j| j.raw).sum();
    if at == 0 && into.capacity() < total {
        // Zeroed pages straight from the allocator (calloc: no writes of
        // our own), touched first by the thread that inflates into them.
        *into = vec![0; total];
        huge_pages(into.as_mut_ptr(), total);
    } else if into.len() < at + total {
        // Bytes already there (a buffer used again) are written over, not
        // zeroed first: only what it grows by is.
        into.truncate(at);
        into.reserve_exact(total);
        huge_pages(into.spare_capacity_mut().as_mut_ptr().cast(), total);
        into.resize(at + total, 0);
    }
    let mut results = inflate_slices(jobs, &mut into[at..at + total], total, threads);
    // A block whose bytes are not whole entries one after another (a block
    // whose LZ4 is valid but whose content was damaged before it was
    // compressed, or made up: 64 MiB of zeros from 260 KB) is damage too,
    // dropped now rather than held while the file is open.
    let mut from = at;
    for (j, r) in jobs.iter().zip(results.iter_mut()) {
        if r.is_ok() && !whole_entries(&into[from..from + j.raw]) {
            *r = Err(BlockError::Damaged);
        }
        from += j.raw;
    }
    // Close the gaps the blocks that failed left.
    let (mut read, mut write) = (at, at);
    let mut ranges = Vec::with_capacity(jobs.len());
    for (j, r) in jobs.iter().zip(results) {
        ranges.push(r.map(|()| {
            if read != write {
                into.copy_within(read..read + j.raw, write);
            }
            write += j.raw;
            write - j.raw..write
        }));
        read += j.raw;
    }
    if write < read {
        into.truncate(write);
        into.shrink_to(write);
    }
    (ranges, write)
}

/// Asks the kernel to back `buf` with huge pages where it is aligned for
/// them (Linux, where transparent huge pages are commonly given only to
/// memory that asks: `madvise` mode). The inflated entries of a large file
/// are tens of MB touched once each: in 4 KiB pages, a fault for each
/// (16,000 for 72 MB of entries, measured), which cost the compressed
/// `stats` more than LZ4 did. Advice only: nothing changes if the kernel
/// declines, and smaller buffers are left alone.
///
/// `buf` and `len`: memory of a `Vec` the caller holds uniquely (its bytes,
/// or its spare capacity before they are written).
fn huge_pages(buf: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 4 * HUGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = (buf as usize).next_multiple_of(HUGE);
        let end = (buf as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside the `len` bytes at `buf`,
            // memory this process owns and the caller holds uniquely;
            // MADV_HUGEPAGE is advice about how to back it, and leaves
            // its contents and its mapping as they are (the call's result
            // is only whether the advice was taken).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Whether `raw` is entries with their frames, one after another to its
/// last byte, as a block holds them (the block's checksum covered them).
fn whole_entries(raw: &[u8]) -> bool {
    let mut entries = crate::wire::frame::Entries::inflated(raw, 0);
    entries.by_ref().for_each(drop);
    entries.pos == raw.len()
}

/// Inflates each job into its slice of `buf` (`total` bytes, the jobs'
/// raw sizes one after another), on as many threads as pay.
fn inflate_slices(
    jobs: &[Job<'_>],
    buf: &mut [u8],
    total: usize,
    threads: usize,
) -> Vec<Result<(), BlockError>> {
    let mut work: Vec<(Parts<'_>, &mut [u8])> = Vec::with_capacity(jobs.len());
    let mut rest = buf;
    for j in jobs {
        let (out, after) = std::mem::take(&mut rest).split_at_mut(j.raw);
        work.push((j.parts, out));
        rest = after;
    }
    let threads = threads_for(total).min(threads);
    if threads <= 1 {
        return run(&mut work);
    }
    // Cut the jobs into `threads` runs of about equal raw bytes.
    let share = total.div_ceil(threads);
    let mut runs: Vec<&mut [(Parts<'_>, &mut [u8])]> = Vec::with_capacity(threads);
    let mut left = &mut work[..];
    while !left.is_empty() {
        let mut bytes = 0;
        let n = left
            .iter()
            .take_while(|(_, out)| {
                let more = bytes < share;
                bytes += out.len();
                more
            })
            .count()
            .max(1);
        let (run, after) = std::mem::take(&mut left).split_at_mut(n);
        runs.push(run);
        left = after;
    }
    let mut runs = runs.into_iter();
    let first = runs.next().unwrap_or_default();
    std::thread::scope(|s| {
        let others: Vec<_> = runs.map(|r| s.spawn(move || run(r))).collect();
        let mut results = run(first);
        for h in others {
            match h.join() {
                Ok(r) => results.extend(r),
                // LZ4 on a slice of our own does not panic; should it, the
                // panic goes on as the caller's own.
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        results
    })
}

fn run(work: &mut [(Parts<'_>, &mut [u8])]) -> Vec<Result<(), BlockError>> {
    work.iter_mut()
        .map(|(parts, out)| inflate(parts, out))
        .collect()
}

/// How many threads `total` raw bytes are worth.
fn threads_for(total: usize) -> usize {
    let wanted = (total / PER_THREAD).min(MAX_THREADS);
    if wanted <= 1 {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::block::{block_parts, put_block};
    use crate::wire::frame::{frame_at, put_entry, Frame};
    use crate::wire::tag;

    /// A block of `n` THREAD entries naming thread `id`, and its raw bytes.
    fn block(id: u8, n: usize) -> (Vec<u8>, Vec<u8>) {
        let mut raw = Vec::new();
        for i in 0..n {
            put_entry(&mut raw, tag::THREAD, |b| {
                b.extend_from_slice(&[id, 8]);
                b.extend_from_slice(format!("t{:07}", i % 1000).as_bytes());
            });
        }
        let mut entry = Vec::new();
        assert!(put_block(&mut entry, &raw));
        // Inflated, its entries' checksums are 0 (codec 2).
        (entry, crate::wire::frame::unchecked(&raw))
    }

    fn body(entry: &[u8]) -> &[u8] {
        match frame_at(entry, 0) {
            Frame::Ok { body, .. } => body,
            _ => panic!("not a whole entry"),
        }
    }

    #[test]
    fn blocks_inflate_in_order_on_one_thread_or_several() {
        // 40 blocks of about 200 KB: 8 MB, past what one thread takes on.
        let blocks: Vec<_> = (0..40u8).map(|i| block(i, 10_000 + i as usize)).collect();
        let jobs: Vec<Job> = blocks
            .iter()
            .map(|(e, _)| {
                let parts = block_parts(body(e)).unwrap();
                Job {
                    parts,
                    raw: parts.raw,
                }
            })
            .collect();
        let want: Vec<u8> = blocks.iter().flat_map(|(_, r)| r.clone()).collect();
        assert!(threads_for(want.len()) == 1 || want.len() > 2 * PER_THREAD);
        let mut into = Vec::new();
        let results = inflate_all(&jobs, &mut into, 0, MAX_THREADS);
        assert!(into == want, "the blocks' bytes, in their order");
        let mut at = 0;
        for ((_, raw), r) in blocks.iter().zip(results) {
            assert_eq!(r, Ok(at..at + raw.len()));
            at += raw.len();
        }
        // Appended after what was there, one job on its own.
        let results = inflate_all(&jobs[3..4], &mut into, want.len(), MAX_THREADS);
        assert_eq!(results, [Ok(want.len()..want.len() + blocks[3].1.len())]);
        assert!(into[want.len()..] == blocks[3].1[..]);
    }

    #[test]
    fn a_damaged_block_fails_alone_and_leaves_its_neighbours_whole() {
        let blocks: Vec<_> = (0..30u8).map(|i| block(i, 12_000)).collect();
        // Block 17's LZ4 bytes cut in half.
        let whole = block_parts(body(&blocks[17].0)).unwrap();
        let cut = &whole.packed()[..whole.packed().len() / 2];
        let jobs: Vec<Job> = blocks
            .iter()
            .enumerate()
            .map(|(i, (e, raw))| {
                let parts = block_parts(body(e)).unwrap();
                Job {
                    parts: if i == 17 {
                        whole.with_packed(cut)
                    } else {
                        parts
                    },
                    raw: raw.len(),
                }
            })
            .collect();
        let mut into = Vec::new();
        let results = inflate_all(&jobs, &mut into, 0, MAX_THREADS);
        let mut at = 0;
        for (i, ((_, raw), r)) in blocks.iter().zip(results).enumerate() {
            if i == 17 {
                assert_eq!(r, Err(BlockError::Damaged));
            } else {
                // The ones after it close up behind it.
                assert_eq!(r, Ok(at..at + raw.len()), "block {i}");
                assert!(into[at..at + raw.len()] == raw[..], "block {i}");
                at += raw.len();
            }
        }
        assert_eq!(into.len(), at);
    }

    /// Inflates `n` jobs of `bad` bytes saying `raw` each, with four good
    /// blocks among them; checks that only the good blocks' bytes are kept,
    /// in their order, in less than a wave of memory; returns the results.
    fn bad_among_good(n: usize, bad: &[u8], raw: usize) -> Vec<Result<Range<usize>, BlockError>> {
        let good: Vec<_> = (0..4u8).map(|i| block(i, 3_000)).collect();
        let mut jobs = Vec::new();
        for i in 0..n {
            jobs.push(Job {
                parts: Parts::lz4(bad, raw),
                raw,
            });
            if i % (n / 4) == 0 {
                let (e, raw) = &good[i / (n / 4)];
                jobs.push(Job {
                    parts: block_parts(body(e)).unwrap(),
                    raw: raw.len(),
                });
            }
        }
        let mut into = Vec::new();
        let results = inflate_all(&jobs, &mut into, 0, MAX_THREADS);
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 4);
        let want: Vec<u8> = good.iter().flat_map(|(_, r)| r.clone()).collect();
        assert!(into == want, "only the good blocks' bytes, in their order");
        assert!(into.capacity() < WAVE, "{} bytes kept", into.capacity());
        results
    }

    #[test]
    fn blocks_that_lie_about_their_size_take_memory_a_wave_at_a_time_and_give_it_back() {
        // 80 blocks that say 8 MiB each (640 MiB: three waves) but hold
        // bytes that do not inflate, among good ones.
        bad_among_good(80, &[0xF0u8; 64], 8 << 20);
    }

    #[test]
    fn blocks_that_inflate_250_times_to_no_entries_give_their_memory_back() {
        // Valid LZ4 that inflates to what the block says, 8 MiB of zeros
        // from about 33 KB (a bomb, or content damaged before it was
        // compressed), 40 of them (320 MiB, five waves), among good blocks:
        // each one damage.
        let zeros = vec![0u8; 8 << 20];
        let bomb = lz4_flex::block::compress(&zeros);
        assert!(zeros.len() / bomb.len() >= 250, "{} bytes", bomb.len());
        let results = bad_among_good(40, &bomb, zeros.len());
        let bad = results
            .iter()
            .filter(|r| **r == Err(BlockError::Damaged))
            .count();
        assert_eq!(bad, 40);
    }
}
