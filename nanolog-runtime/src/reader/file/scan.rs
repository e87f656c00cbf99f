//! The frame scan: the file's top-level entries found (resynchronising past
//! damage, a torn tail told from a damaged length), its blocks inflated a
//! wave at a time, and every entry indexed into the [`LogFile`]: the
//! dictionary, threads, extents, drops, clock pairs and span contexts.

use super::*;

/// Raw bytes of the blocks past the resident budget inflated together
/// while a file is indexed (two threads' worth; see `inflate`): what
/// indexing a file of any size holds of its blocks at a time.
const LAZY_WAVE: usize = 4 << 20;

/// The first tops of `tops` whose blocks together say at most `wave` raw
/// bytes (at least one block, or all that is left), and those bytes.
fn next_wave<'t>(data: &[u8], tops: &'t [Top], wave: usize) -> (&'t [Top], usize) {
    let mut raw = 0;
    let mut n = 0;
    for t in tops {
        if let Top::Block { start, end } = *t {
            let r = crate::wire::block::block_parts(&data[start..end]).map_or(0, |p| p.raw);
            if raw > 0 && raw + r > wave {
                break;
            }
            raw += r;
        }
        n += 1;
    }
    (&tops[..n], raw)
}

/// A run of a file's records as [`LogFile::open_streamed`] indexes it:
/// the extents the index reached since the last run, with the bytes of the
/// blocks it inflated for them, held only while the run is read.
///
/// The file it gives is indexed up to the run's end: every site, string
/// and span its records use is there (the format writes them before their
/// first use). Their wall-clock times are of the clock pairs read so far:
/// a record past the last one is placed by the clock's rate until the next
/// pair is read; a reader that needs the file's exact times reads the
/// opened file.
pub struct Wave<'w> {
    pub(in crate::reader) file: &'w LogFile,
    /// The run's blocks' entries, one block after another (empty when
    /// none was inflated).
    pub(in crate::reader) bytes: &'w [u8],
    /// The position of `bytes[0]`.
    pub(in crate::reader) base: usize,
    /// Its extents and drops: these of the file's `order`.
    pub(in crate::reader) items: std::ops::Range<usize>,
}

/// A wave's blocks inflated ahead, while the wave before it was read (see
/// `LogFile::scan`): how many tops the wave is, and per BLOCK where its
/// entries are in the spare buffer, or why not.
struct Prefetched {
    tops: usize,
    blocks: Vec<Result<std::ops::Range<usize>, BlockError>>,
}

/// The bodies of the BLOCKs among `tops`.
fn block_bodies<'d, 't>(data: &'d [u8], tops: &'t [Top]) -> impl Iterator<Item = &'d [u8]> + 't
where
    'd: 't,
{
    tops.iter().filter_map(move |t| match *t {
        Top::Block { start, end } => Some(&data[start..end]),
        _ => None,
    })
}

/// The most clock pairs a file's index holds: a writer writes one a second
/// (`Builder::clock_interval`), so a file of 12 days; past it every other
/// pair is let go (times between them interpolated over twice the span),
/// and so on, so that 40 blocks of 64 MiB of CLOCK entries (from a 2.6 MB
/// file) cost 16 MiB, not 1.7 GB.
const MAX_PAIRS: usize = 1 << 20;

/// Adds clock pair `p` to `pairs`: not when it repeats the last one's tick
/// (the map keeps the first of a tick anyway), and past [`MAX_PAIRS`]
/// after every other pair is let go.
fn push_pair(pairs: &mut Vec<(u64, i64)>, p: (u64, i64)) {
    if pairs.last().is_some_and(|l| l.0 == p.0) {
        return;
    }
    if pairs.len() >= MAX_PAIRS {
        let mut i = 0usize;
        pairs.retain(|_| {
            i += 1;
            i % 2 == 1
        });
    }
    pairs.push(p);
}

/// What the first pass of a scan finds at the top level of a file.
enum Top {
    /// A whole entry of tag `tag`, its body `[start, end)`.
    Entry { tag: u8, start: usize, end: usize },
    /// A whole BLOCK entry, its body `[start, end)`.
    Block { start: usize, end: usize },
    /// Damage skipped, or a torn tail (boxed: a crafted file can make
    /// every few bytes one, and the other tops are 24 bytes).
    Warn(Box<Warning>),
}

/// What a search for whole entries among damaged bytes may checksum: 8
/// bytes for each byte searched, and 4 MiB to begin with. An entry found
/// there is checksummed whole, so without a bound every offset stating a
/// length of megabytes cost megabytes (17 MB of `0x01` bytes took minutes);
/// with it, the search is linear. An entry longer than the bound right
/// after damage (the writer's are at most 128 KiB, a record's extent at
/// most its 32 MiB) is skipped with the damage.
#[derive(Default)]
struct Budget {
    /// Bytes checksummed so far.
    spent: usize,
}

impl Budget {
    const START: usize = 4 << 20;
    const PER_BYTE: usize = 8;

    /// The entry at `pos`, searched for from `from` on.
    fn frame<'d>(&mut self, data: &'d [u8], from: usize, pos: usize) -> Frame<'d> {
        let allowed = (pos - from)
            .saturating_mul(Self::PER_BYTE)
            .saturating_add(Self::START)
            .saturating_sub(self.spent);
        let f = frame_within(data, pos, allowed);
        if let Frame::Ok { body, .. } = f {
            self.spent += body.len();
        } else if let Some(len) = stated_len(data, pos).filter(|&l| l <= allowed) {
            // A checksum that did not match (or a cut frame: not counted).
            if pos + wire::FRAME_LEN + len <= data.len() {
                self.spent += len;
            }
        }
        f
    }
}

/// The first offset after `pos` and before `end` where a whole entry
/// starts that another whole entry follows (or the end of the file): where
/// the damage of an entry at `pos` whose stated length leads to `end` ends,
/// if that length was damaged too. The checksums computed are bounded by 8
/// bytes for each byte of `[pos, end)`, so a search costs what it spans.
fn first_whole_within(data: &[u8], pos: usize, end: usize) -> Option<usize> {
    let cap = (end - pos).saturating_mul(8);
    let mut spent = 0usize;
    let whole = |at: usize, spent: &mut usize| {
        let allowed = cap.saturating_sub(*spent);
        let f = frame_within(data, at, allowed);
        match f {
            Frame::Ok { body, .. } => *spent += body.len(),
            _ => {
                if let Some(len) = stated_len(data, at).filter(|&l| l <= allowed) {
                    *spent += len.min(data.len().saturating_sub(at));
                }
            }
        }
        match f {
            Frame::Ok { body, .. } => Some(at + wire::FRAME_LEN + body.len()),
            _ => None,
        }
    };
    (pos + 1..end).find(|&q| {
        whole(q, &mut spent)
            .is_some_and(|after| after == data.len() || whole(after, &mut spent).is_some())
    })
}

/// The body length the frame at `pos` states, if a frame header with a
/// tag that is ever written is there.
fn stated_len(data: &[u8], pos: usize) -> Option<usize> {
    let f = data.get(pos..pos + wire::FRAME_LEN)?;
    (1..=32)
        .contains(&f[0])
        .then(|| u32::from_le_bytes([f[1], f[2], f[3], f[4]]) as usize)
}

impl LogFile {
    /// Indexes the file's entries from `from` on: the whole entries at its
    /// top level (resynchronising past damage), then, a wave of blocks at a
    /// time, the inflation of the wave's BLOCKs at once (see `inflate`) and
    /// its entries in file order, a block's in its place. The blocks that
    /// fit the [`resident`] budget stay inflated; past it, a wave is
    /// inflated into one buffer, indexed, and let go, but for its
    /// dictionary entries.
    ///
    /// With `on_wave` (see [`LogFile::open_streamed`]) no block stays: each
    /// wave's records are given to it before the wave is let go.
    pub(super) fn scan(
        &mut self,
        from: usize,
        pairs: &mut Vec<(u64, i64)>,
        mut on_wave: Option<&mut dyn FnMut(&Wave<'_>)>,
    ) {
        // Held apart from `self` while indexing, so `entry` can update it.
        let owned = std::sync::Arc::clone(&self.data);
        let data = &owned[..];
        let tops = self.frames(data, from);
        let budget = if on_wave.is_some() { 0 } else { resident() };
        // The resident blocks' buffer, out of `self` while blocks are
        // inflated into it; once they stop fitting it is back in `self`,
        // where the lazy blocks' dictionary entries are copied.
        let mut resident = match self.blocks.spilled {
            None => Some(std::mem::take(&mut self.blocks.inflated)),
            Some(_) => None,
        };
        let mut scratch = Vec::new();
        // Read with `on_wave`: the next wave past the budget, inflated into
        // `spare` while `on_wave` reads this one (see `Prefetched`).
        let mut spare = Vec::new();
        let mut prefetched: Option<Prefetched> = None;
        // The clock pairs the map a wave's records see was made of (how
        // many, and the last).
        let mut mapped_pairs = (usize::MAX, None);
        let mut rest = &tops[..];
        let mut behind = Behind::at(from);
        while !rest.is_empty() {
            // While blocks stay, a wave is what is left of the budget (at
            // least a block); past it, waves of a few MiB, let go in turn.
            let room = resident.as_ref().map(|b| budget.saturating_sub(b.len()));
            let (mut wave, raw) =
                next_wave(data, rest, room.unwrap_or(LAZY_WAVE).min(inflate::WAVE));
            if let Some(buf) = resident.take_if(|_| room.is_some_and(|r| raw > r)) {
                self.blocks.spilled = Some(buf.len());
                self.blocks.lazy_from = self.blocks.at.len();
                self.blocks.inflated = buf;
                wave = next_wave(data, rest, LAZY_WAVE).0;
            }
            rest = &rest[wave.len()..];
            // Per BLOCK, in file order: where its entries are, or why not.
            let mut blocks = match (resident.as_mut(), prefetched.take()) {
                (Some(buf), _) => {
                    let at = buf.len();
                    inflate::inflate_blocks(block_bodies(data, wave), buf, at, inflate::MAX_THREADS)
                }
                (None, Some(p)) if p.tops == wave.len() => {
                    std::mem::swap(&mut scratch, &mut spare);
                    p.blocks
                }
                (None, _) => inflate::inflate_blocks(
                    block_bodies(data, wave),
                    &mut scratch,
                    0,
                    inflate::MAX_THREADS,
                ),
            }
            .into_iter();
            let kept = resident.is_some();
            // What the wave adds: its extents and drops, and (past the
            // budget) its blocks' entries, from position `LAZY + lazy_at`.
            let (items_at, lazy_at) = (self.order.len(), self.blocks.lazy_len);
            for top in wave {
                match *top {
                    Top::Warn(ref w) => self.warnings.push(Warning::clone(w)),
                    Top::Entry { tag: t, start, end } => {
                        // (A wave of a plain file is all of it.)
                        behind.passed(&owned, start);
                        self.entry(t, &data[start..end], start, end, pairs)
                    }
                    Top::Block { start, end } => {
                        behind.passed(&owned, start);
                        // Its entries say whether the file ended cleanly.
                        self.clean_end = false;
                        match blocks.next().unwrap_or(Err(BlockError::Damaged)) {
                            Ok(range) => {
                                let raw = match resident.as_ref() {
                                    Some(b) => &b[range.clone()],
                                    None => &scratch[range.clone()],
                                };
                                let at = kept.then_some(range.start);
                                self.block(raw, at, start, end, pairs)
                            }
                            Err(e) => self.warnings.push(Warning::BadBlock {
                                path: self.path.clone(),
                                offset: start,
                                len: end - start,
                                codec: match e {
                                    BlockError::Codec(c) => Some(c),
                                    BlockError::Damaged => None,
                                },
                            }),
                        }
                    }
                }
            }
            if let Some(on_wave) = on_wave.as_mut() {
                // The file as indexed so far, whole for the wave's records
                // (a dictionary entry comes before its first use).
                if let Some(buf) = resident.as_mut() {
                    self.blocks.inflated = std::mem::take(buf);
                }
                // (Pairs are added, and thinned past MAX_PAIRS: a map
                // rebuilt only when they changed.)
                if (pairs.len(), pairs.last().copied()) != mapped_pairs {
                    self.time = TimeMap::new(self.header.ticks_per_second, pairs.clone());
                    mapped_pairs = (pairs.len(), pairs.last().copied());
                }
                self.derive();
                let (next, next_raw) = next_wave(data, rest, LAZY_WAVE);
                let this = &*self;
                let wave = Wave {
                    file: this,
                    bytes: if kept { &[] } else { &scratch },
                    base: LAZY + lazy_at,
                    items: items_at..this.order.len(),
                };
                // (A wave over LAZY_WAVE is one block larger than the
                // writer makes, up to 64 MiB: inflated after this one is
                // read, into the same buffer, not beside it into another:
                // four such blocks took `stats` 293 MB.)
                if resident.is_some() || next.is_empty() || next_raw > LAZY_WAVE {
                    on_wave(&wave);
                } else {
                    // The reader keeps the cores busy: the next wave is
                    // inflated on one thread beside it, not on every core
                    // between its waves (the index of a wave, between
                    // them, is the only work done alone).
                    let spare = &mut spare;
                    prefetched = std::thread::scope(|s| {
                        let inflating = s.spawn(move || Prefetched {
                            tops: next.len(),
                            blocks: inflate::inflate_blocks(block_bodies(data, next), spare, 0, 1),
                        });
                        on_wave(&wave);
                        match inflating.join() {
                            Ok(p) => Some(p),
                            // LZ4 on a slice of our own does not panic;
                            // should it, the panic goes on as ours.
                            Err(p) => std::panic::resume_unwind(p),
                        }
                    });
                }
                if let Some(buf) = resident.as_mut() {
                    *buf = std::mem::take(&mut self.blocks.inflated);
                }
            }
        }
        // (What is read next, the merge's or a worker's, maps its pages
        // again as it goes.)
        behind.done(&owned, usize::MAX);
        if let Some(buf) = resident {
            self.blocks.inflated = buf;
        }
        // (A live file's next write may yet bring the site.)
        if !self.live {
            self.warn_pending_spans();
        }
    }

    /// The whole entries of `data` from `from` on at the top level of the
    /// file, with the damage skipped between them; sets `valid_len`.
    fn frames(&mut self, data: &[u8], from: usize) -> Vec<Top> {
        let mut tops = Vec::new();
        let mut pos = from;
        // The regions left out (`skip.rs`): whole entries, stepped over.
        let skip = std::mem::take(&mut self.skip);
        let mut next_skip = skip.partition_point(|r| r.0 < from);
        let mut skipped_from: Option<usize> = None;
        // Among damaged bytes, every offset may state a length to
        // checksum: what the search may checksum is bounded by the bytes
        // searched (see `Budget`), so it costs O(bytes) whatever they state.
        let mut budget = Budget::default();
        // A BLOCK's body read by its own structure (`walk`) may run on to
        // the end of the file, and a crafted file may make every 32 bytes
        // such a frame (each walk inflating the rest: 2 MB took 51 s): the
        // walks may read and make 4 MiB and 8 bytes for each byte scanned,
        // in all; past that a body is not walked (its frame is damage if a
        // whole entry follows, a torn tail if none does).
        let mut walked = 0usize;
        let mut walk = |body: &[u8], pos: usize| {
            let allowed = (4usize << 20)
                .saturating_add((pos - from).saturating_mul(8))
                .saturating_sub(walked);
            walked = walked.saturating_add(body.len().min(allowed));
            wire::block::walk_within(body, allowed).unwrap_or(wire::block::Walk::Bad)
        };
        // The damage being searched past began at a BLOCK's frame (its
        // length damaged): its compressed bytes may hold entries byte for
        // byte, so an entry found there counts only if another whole entry
        // (or the end of a finished file) follows it, as one after the
        // block does and one inside it, among compressed bytes, seldom does.
        let mut in_block = false;
        // The file's last entry runs from `at` past its end.
        let torn_tail = |at: usize| {
            Top::Warn(Box::new(Warning::TornTail {
                path: self.path.clone(),
                offset: at,
                len: data.len() - at,
            }))
        };
        // Whether a whole entry starts at `next` (or the file ends there,
        // finished): where an entry skipped as damage is taken to end.
        let lands = |next: usize| {
            if next == data.len() {
                !self.live
            } else {
                matches!(frame_at(data, next), Frame::Ok { .. })
            }
        };
        // The bytes `[from, to)` are damage, skipped: listed, up to
        // LISTED_DAMAGE regions, then counted (see `Warning::MoreSkipped`).
        let mut listed = 0usize;
        let (mut more, mut more_bytes) = (0usize, 0usize);
        let mut skipped = |tops: &mut Vec<Top>, from: usize, to: usize| {
            if listed < super::super::warning::LISTED_DAMAGE {
                listed += 1;
                tops.push(Top::Warn(Box::new(Warning::SkippedCorrupt {
                    path: self.path.clone(),
                    offset: from,
                    len: to - from,
                    to_end: false,
                })));
            } else {
                more += 1;
                more_bytes += to - from;
            }
        };
        // (Every byte is read for its checksum: the pages passed go back.)
        let mut behind = Behind::at(from);
        while pos < data.len() {
            behind.passed(&self.data, pos);
            if skipped_from.is_none() && skip.get(next_skip).is_some_and(|r| r.0 == pos) {
                pos = skip[next_skip].1;
                next_skip += 1;
                continue;
            }
            let frame = match skipped_from {
                None => frame_at(data, pos),
                Some(from) => budget.frame(data, from, pos),
            };
            match frame {
                Frame::Ok { body, .. }
                    if in_block && skipped_from.is_some() && {
                        let next = pos + wire::FRAME_LEN + body.len();
                        let follows = if next == data.len() {
                            !self.live
                        } else {
                            matches!(frame_at(data, next), Frame::Ok { .. })
                                || self.live && matches!(frame_at(data, next), Frame::Truncated)
                        };
                        !follows
                    } =>
                {
                    pos += 1;
                }
                Frame::Ok { tag: t, body } => {
                    budget = Budget::default();
                    in_block = false;
                    if let Some(from) = skipped_from.take() {
                        skipped(&mut tops, from, pos);
                    }
                    let start = pos + wire::FRAME_LEN;
                    let end = start + body.len();
                    tops.push(if t == tag::BLOCK && self.header.version >= 4 {
                        Top::Block { start, end }
                    } else {
                        Top::Entry { tag: t, start, end }
                    });
                    pos = end;
                    self.valid_len = end;
                }
                Frame::Truncated if skipped_from.is_some() => pos += 1,
                // A live file: the writer's entry seen half written. The
                // bytes after its frame are its own (a block's compressed
                // bytes can hold whole entries, kept byte for byte): wait
                // for the rest, never search inside them.
                Frame::Truncated if self.live => {
                    tops.push(torn_tail(pos));
                    break;
                }
                Frame::Truncated => {
                    // A BLOCK read by its own structure: bytes that are
                    // all the start of one are a torn tail (the writer
                    // died in the middle of the block: the whole entries
                    // LZ4 keeps byte for byte in it are not the file's); a
                    // whole block whose length was damaged is skipped
                    // alone.
                    if self.header.version >= 4 && data[pos] == tag::BLOCK {
                        let body = data.get(pos + wire::FRAME_LEN..).unwrap_or(&[]);
                        match walk(body, pos) {
                            wire::block::Walk::Cut => {
                                tops.push(torn_tail(pos));
                                break;
                            }
                            wire::block::Walk::Whole(len) => {
                                let next = pos + wire::FRAME_LEN + len;
                                if lands(next) {
                                    skipped(&mut tops, pos, next);
                                    pos = next;
                                    continue;
                                }
                            }
                            wire::block::Walk::Bad => {}
                        }
                    }
                    // Either a torn tail (the writer died mid-entry) or a
                    // damaged length: it is damage if a whole entry follows.
                    let mut ahead = Budget::default();
                    if (pos + 1..data.len())
                        .any(|p| matches!(ahead.frame(data, pos, p), Frame::Ok { .. }))
                    {
                        skipped_from = Some(pos);
                        pos += 1;
                        continue;
                    }
                    tops.push(torn_tail(pos));
                    break;
                }
                // A RUN entry whose checksum fails: read while its writer
                // filled it in, or its body damaged. It holds no record and
                // nothing a record needs (its run is read entry by entry):
                // stepped over, not reported, when its length is the one
                // writers give it (a length damaged is damage) and lands
                // on a whole entry.
                Frame::Bad
                    if skipped_from.is_none()
                        && data[pos] == tag::RUN
                        && stated_len(data, pos) == Some(wire::index::RUN_BODY)
                        && lands(pos + wire::FRAME_LEN + wire::index::RUN_BODY) =>
                {
                    pos += wire::FRAME_LEN + wire::index::RUN_BODY;
                }
                Frame::Bad => {
                    // An entry whose body is damaged but whose length is
                    // not: the length leads to the next whole entry (or to
                    // the end of a finished file). Only that entry is
                    // skipped; a search inside it could take for the
                    // file's an entry a BLOCK holds byte for byte.
                    // (A BLOCK whose length is what was damaged: its body's
                    // own structure says where it ends.)
                    let block_body = || {
                        let body = data.get(pos + wire::FRAME_LEN..)?;
                        if self.header.version < 4 || data[pos] != tag::BLOCK {
                            return None;
                        }
                        match walk(body, pos) {
                            wire::block::Walk::Whole(len) => Some(len),
                            _ => None,
                        }
                    };
                    // (The block's body walked only when its stated length
                    // does not land, and never while searching past damage:
                    // a deflate body is walked by inflating it.)
                    let next = skipped_from.is_none().then(|| {
                        stated_len(data, pos)
                            .into_iter()
                            .chain(std::iter::once_with(block_body).flatten())
                            .map(|len| pos + wire::FRAME_LEN + len)
                            .find(|&next| lands(next))
                    });
                    // A length that lands may itself be the damage (a bit
                    // of it flipped): then whole entries start before it,
                    // and trusting it would skip them as well (a SPAN or
                    // CLOCK entry the records after need, which a reader
                    // that left the damaged entry out reads). So the bytes
                    // it spans are searched for a whole entry that another
                    // follows, as after any damage (not a BLOCK's: its
                    // compressed bytes may hold entries verbatim).
                    let next = next.flatten().map(|next| match data[pos] {
                        tag::BLOCK => next,
                        _ => first_whole_within(data, pos, next).unwrap_or(next),
                    });
                    let next = Some(next);
                    if let Some(next) = next.flatten() {
                        skipped(&mut tops, pos, next);
                        pos = next;
                        continue;
                    }
                    // Resynchronise: look for the next position where a whole
                    // entry with a matching checksum starts.
                    if skipped_from.is_none() {
                        in_block = self.header.version >= 4 && data[pos] == tag::BLOCK;
                    }
                    skipped_from.get_or_insert(pos);
                    pos += 1;
                }
            }
        }
        if more > 0 {
            tops.push(Top::Warn(Box::new(Warning::MoreSkipped {
                path: self.path.clone(),
                regions: more,
                bytes: more_bytes,
            })));
        }
        if let Some(from) = skipped_from {
            tops.push(Top::Warn(Box::new(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: from,
                len: data.len() - from,
                to_end: true,
            })));
        }
        self.skip = skip;
        tops
    }

    fn entry(&mut self, t: u8, body: &[u8], start: usize, end: usize, pairs: &mut Vec<(u64, i64)>) {
        // The file ended cleanly if its last entry is an END: a process that
        // exits writes one, and calls made after that (other exit hooks)
        // add their records and another END.
        self.clean_end = t == tag::END;
        match t {
            tag::TOTALS => self.totals_next = totals::get_totals(body).map(|t| (end, t)),
            tag::SITE => match dict::get_site(body) {
                Some(s) => {
                    let id = s.id as usize;
                    if id > 1 << 24 {
                        self.warnings.push(Warning::SiteIdOutOfRange {
                            path: self.path.clone(),
                            id,
                        });
                        return;
                    }
                    if self.sites.len() <= id {
                        self.sites.resize(id + 1, None);
                    }
                    self.sites[id] = Some(s);
                    if self.spans.has_waiting() {
                        self.retry_spans();
                    }
                }
                None => self.warnings.push(Warning::MalformedSite {
                    path: self.path.clone(),
                    offset: start,
                }),
            },
            tag::THREAD => {
                if let Some((id, name)) = dict::get_thread(body) {
                    self.threads.insert(id, name.to_owned());
                }
            }
            tag::EXTENT => {
                if let (Some(thread), _) = wire::extent::get_header(body) {
                    let ctx = self.thread_ctx.get(&thread).copied().unwrap_or(0);
                    let it = Item::Extent { start, end, ctx };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::CLOCK => {
                if let Some(p) = dict::get_clock(body) {
                    push_pair(pairs, p);
                    self.clock_end = end;
                }
            }
            tag::DROP => {
                if let Some((thread, count, first, last)) = dict::get_drop(body) {
                    let ix = self.drops.len() as u32;
                    self.drops.push(DropInfo { count, first, last });
                    let it = Item::Drop { ix, offset: start };
                    self.streams.entry(thread).or_default().push(it);
                    self.order.push((thread, it));
                }
            }
            tag::ROTATE => {
                let mut p = 0;
                self.rotated_to = wire::get_str(body, &mut p).map(str::to_owned);
            }
            tag::END => {
                self.end_records = dict::get_end(body);
                // A TOTALS entry counts for the END right after it only
                // (`start` and `end` are an entry's body's).
                self.totals = self
                    .totals_next
                    .take()
                    .filter(|(e, _)| *e + wire::FRAME_LEN == start)
                    .map(|(_, t)| t);
            }
            tag::SET => {
                if let Some(e) = dict::get_set(body) {
                    self.set = Some(e);
                }
            }
            tag::SPAN if self.header.version >= 3 => self.span_entry(body, start),
            tag::SPAN => match dict::get_span(body) {
                Some(e) if e.ctx != 0 => self.spans.add(&e, end - e.args.len()),
                _ => self.warnings.push(Warning::MalformedSite {
                    path: self.path.clone(),
                    offset: start,
                }),
            },
            tag::STRINGS => {
                let ok = dict::get_strings(body, |id, at, len| {
                    // Ids are dense from 1 in the writer's files, and a file
                    // holds at most 1 MiB of strings of 4 bytes or more: an
                    // id past 2^20 is damage, not a reason for memory.
                    let Some(i) = usize::try_from(id)
                        .ok()
                        .and_then(|id| id.checked_sub(1))
                        .filter(|&i| i < MAX_STRING_IDS)
                    else {
                        return;
                    };
                    if self.strs.len() <= i {
                        self.strs.resize(i + 1, (0, usize::MAX));
                    }
                    // The first copy stands: the writer gives a string again
                    // (the next write restates each write's strings) with
                    // the same bytes, and the first is nearer the records
                    // that use it (a file cut back keeps it).
                    if self.strs[i].1 == usize::MAX {
                        self.strs[i] = (start + at, len);
                    }
                });
                if ok.is_none() {
                    self.warnings.push(Warning::MalformedSite {
                        path: self.path.clone(),
                        offset: start,
                    });
                }
            }
            tag::CONTEXT => {
                if let Some((thread, ctx)) = dict::get_context(body) {
                    let ix = self.spans.index_of(ctx).unwrap_or(0);
                    self.thread_ctx.insert(thread, ix);
                }
            }
            // An entry of a later minor revision: checksummed, so skip it.
            _ => {}
        }
    }

    /// Indexes the entries of the BLOCK whose body is `[start, end)` of
    /// the file, inflated to `raw`: resident at `at` of the file's
    /// inflated bytes, or (`None`) past the budget, to be inflated again
    /// when read.
    fn block(
        &mut self,
        raw: &[u8],
        at: Option<usize>,
        start: usize,
        end: usize,
        pairs: &mut Vec<(u64, i64)>,
    ) {
        let base = match at {
            Some(at) => INFLATED + at,
            None => {
                self.blocks.lazy.push(std::sync::OnceLock::new());
                self.blocks.lazy_len += raw.len();
                LAZY + self.blocks.lazy_len - raw.len()
            }
        };
        self.blocks.at.push(BlockAt {
            base,
            start,
            end,
            min_tick: u64::MAX,
        });
        self.blocks.bytes += wire::FRAME_LEN + (end - start);
        self.blocks.raw += raw.len();
        let (clock_end, warned) = (self.clock_end, self.warnings.len());
        // How many extents and drops the index held after the block's last
        // CLOCK entry.
        let mut at_last_pair = None;
        let mut entries = Entries::inflated(raw, 0);
        for (at, t, body) in entries.by_ref() {
            if at_lazy(base) && matches!(t, tag::STRINGS | tag::SPAN) {
                // The dictionary stays: its bytes are copied out of a
                // block that is let go.
                let copy = INFLATED + self.blocks.inflated.len();
                self.blocks.inflated.extend_from_slice(body);
                self.blocks.copies.push((copy, start));
                self.entry(t, body, copy, copy + body.len(), pairs);
                continue;
            }
            self.entry(t, body, base + at, base + at + body.len(), pairs);
            if t == tag::CLOCK && self.clock_end != clock_end {
                at_last_pair = Some(self.order.len());
            }
            if t == tag::EXTENT {
                if let (_, Some((tick, _))) = wire::extent::get_header(body) {
                    let b = self.blocks.at.last_mut().expect("pushed above");
                    b.min_tick = b.min_tick.min(tick);
                }
            }
        }
        if entries.pos < raw.len() {
            // Checksummed as a whole, yet not whole entries inside: the
            // rest of the block is skipped.
            self.warnings.push(Warning::SkippedCorrupt {
                path: self.path.clone(),
                offset: start,
                len: end - start,
                to_end: false,
            });
        }
        // Said of the block's place in the file: its end, or its start when
        // records follow the pair inside it (a new file's block begins with
        // its first pair): a position is never inside a block, and those
        // records wait for a later pair.
        if let Some(n) = at_last_pair {
            self.clock_end = if self.order.len() > n {
                start.saturating_sub(wire::FRAME_LEN).max(clock_end)
            } else {
                end
            };
        }
        for w in &mut self.warnings[warned..] {
            if let Warning::MalformedSite { offset, .. } = w {
                *offset = start;
            }
        }
    }

    /// A SPAN entry (version 3 on): its spans, or, when a span of it is of
    /// a site whose first SITE entry was lost, kept until the writer's next
    /// write restates the site.
    fn span_entry(&mut self, body: &[u8], start: usize) {
        if !self.span_batch(body, start) {
            self.spans.wait(start, body.to_vec());
        }
    }

    /// Adds the spans of a SPAN entry (version 3 on) whose body, at `start`
    /// of the file, is `body`; false (nothing added) when a span of it is
    /// of a site not known yet.
    fn span_batch(&mut self, body: &[u8], start: usize) -> bool {
        let sites = &self.sites;
        let unknown = std::cell::Cell::new(false);
        let kinds_of = |site: u32| {
            let kinds = sites
                .get(site as usize)
                .and_then(Option::as_ref)
                .map(|s| &s.kinds[..]);
            unknown.set(unknown.get() || kinds.is_none());
            kinds
        };
        let mut whole = true;
        let mut defs = Vec::new();
        let all = dict::get_spans(
            body,
            dict::SpanForm::of(self.header.version, self.header.ticks_per_second),
            &Strings::of_version(self.header.version),
            kinds_of,
            |e| defs.push(e),
        );
        if all.is_none() && unknown.get() {
            return false;
        }
        for e in defs {
            if e.ctx == 0 {
                whole = false;
                continue;
            }
            self.spans.add(
                &e,
                start + (e.args.as_ptr() as usize - body.as_ptr() as usize),
            );
        }
        if all.is_none() || !whole {
            self.warnings.push(Warning::MalformedSite {
                path: self.path.clone(),
                offset: start,
            });
        }
        true
    }

    /// The SPAN entries waiting for a site, read again now that another
    /// site is known.
    fn retry_spans(&mut self) {
        for (start, body) in self.spans.take_waiting() {
            if !self.span_batch(&body, start) {
                self.spans.wait(start, body);
            }
        }
    }

    /// SPAN entries still waiting for a site once the file is read whole:
    /// damage (their site is nowhere in the file).
    fn warn_pending_spans(&mut self) {
        for (start, _) in self.spans.take_waiting() {
            self.warnings.push(Warning::MalformedSite {
                path: self.path.clone(),
                offset: start,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs repeating a tick are one; past the cap every other one goes,
    /// the first and the newest stay, and the memory stays at the cap.
    #[test]
    fn clock_pairs_are_held_to_their_cap() {
        let mut pairs = Vec::new();
        for _ in 0..10 {
            push_pair(&mut pairs, (7, 70));
        }
        assert_eq!(pairs, [(7, 70)]);
        for t in 8..(3 * MAX_PAIRS as u64) {
            push_pair(&mut pairs, (t, 10 * t as i64));
        }
        assert!(pairs.len() <= MAX_PAIRS);
        assert!(pairs.len() > MAX_PAIRS / 2);
        assert_eq!(pairs[0], (7, 70));
        let last = 3 * MAX_PAIRS as u64 - 1;
        assert_eq!(pairs.last(), Some(&(last, 10 * last as i64)));
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(pairs.capacity() <= 2 * MAX_PAIRS);
    }
}
