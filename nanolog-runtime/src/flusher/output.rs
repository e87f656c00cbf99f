//! The flusher's output: a batch written as it is or as a compressed
//! block (the codec policy), the clock pairs, rolling to a new file,
//! syncing, and what a failed write loses.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::Duration;

use super::dict::emit_site;
use super::index;
use super::{Compression, State};
use crate::clock;
use crate::wire::frame::put_entry;
use crate::wire::{dict, tag};
use crate::writer::{FileState, Lost, Writer};

/// Write the buffer out once it passes this size. While the rings keep
/// the flusher busy it is written only when full or [`WRITE_EVERY`] old:
/// fewer, larger writes cost the flusher less per record than 64 KiB
/// writes (BENCHMARKS.md, "1 MiB writes").
pub(super) const OUT_MAX: usize = 1 << 20;
/// Write a buffer that is this old even if the rings still hold records.
pub(super) const WRITE_EVERY: Duration = Duration::from_millis(1);

/// A batch smaller than this is written as it is (a block of it would
/// save a few bytes at most).
const MIN_BLOCK: usize = 256;
/// A batch larger than this is written as it is: a flusher that finds this
/// much at once is busy, and compressing it (0.16 ms for 128 KiB of
/// extents here) would be time the rings wait for.
const MAX_BLOCK: usize = 128 << 10;
/// Batches are compressed while the flusher works less than this share of
/// its time (in 1/1024ths): half.
const DUTY_COMPRESS: u64 = 512;
/// Below this share (an eighth) they are compressed with deflate (codec 3,
/// about 17% smaller than LZ4 on a service's entries, and 3 to 6 times its
/// work: BENCHMARKS.md, "The codec policy"); above it, with LZ4. The
/// deflating is counted in the flusher's work, so a flusher it keeps busy
/// turns to LZ4.
const DUTY_DEFLATE: u64 = 128;

impl State {
    /// `fdatasync` of the current file; a failure is reported like a
    /// failed write, by the next flush.
    pub(super) fn sync(&mut self) {
        if let Err(e) = self.writer.sync() {
            self.report(e);
        }
    }

    pub(super) fn clock_pair(&mut self) {
        let (tick, ns) = clock::pair();
        dict::put_clock_entry(&mut self.clocks, tick, ns);
        self.last_clock = tick;
        self.stage.clock(tick, ns);
        if let Some(m) = &mut self.mirror {
            m.clock_pair(tick, ns);
        }
    }

    /// Writes the buffer (end of batch, or buffer full) and rolls the file
    /// if it is due (by size, or a time boundary passed even with nothing
    /// to write).
    pub(super) fn write_out(&mut self) {
        if let Some(m) = &mut self.mirror {
            m.end_batch();
        }
        // The process is exiting (`exit`, a return from `main`): each write
        // ends the file cleanly, in case it is the last. Calls made later
        // (other exit hooks) add their records and another END.
        let exiting = crate::channel::exiting();
        if exiting && !self.closing && (!self.out.is_empty() || !self.ended_at_exit) {
            self.close_out();
            self.ended_at_exit = true;
        }
        if !self.out.is_empty()
            || !self.defs.is_empty()
            || !self.spans_out.is_empty()
            || !self.clocks.is_empty()
        {
            self.check_file();
            self.write_buffer();
        }
        if !self.closing && !exiting && self.writer.should_roll() {
            self.roll();
        }
        self.out_limit = out_limit(&self.writer);
    }

    /// Before a write: is the live file still at its path, whole? (It is
    /// cut back when an `fstat` says so, each write; the path is looked at
    /// once per clock interval.) If not, start a fresh file there, which
    /// begins with the dictionary `out` relies on.
    fn check_file(&mut self) {
        let now = clock::now();
        let look = now.wrapping_sub(self.last_path_check) > self.clock_every;
        if look {
            self.last_path_check = now;
        }
        let state = self.writer.check(look);
        if state == FileState::Ours {
            return;
        }
        match self.writer.restart(state) {
            Ok((header_len, lost)) => {
                self.shared.counters.files.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(header_len, Ordering::Relaxed);
                self.add_lost(lost);
                // The new file must read on its own: a clock pair and every
                // dictionary entry `out` refers to, ahead of the batch's own
                // (`defs`: sites new to the file, which SPAN entries may
                // use as well as the sites written before).
                let mut head = Vec::new();
                let (tick, ns) = clock::pair();
                dict::put_clock_entry(&mut self.clocks, tick, ns);
                for ix in 0..self.sites.len() {
                    if self.site_emitted[ix] {
                        emit_site(&mut head, &self.sites, ix);
                    }
                }
                for (&id, name) in &self.thread_names {
                    put_entry(&mut head, tag::THREAD, |b| dict::put_thread(b, id, name));
                }
                self.defs.splice(0..0, head);
                // Strings defined in the file that was replaced: all again.
                self.strings.rewrite_all();
                self.restate.clear();
                self.respan();
            }
            Err(e) => self.file_error(e),
        }
    }

    /// After the live file began again in place: every SPAN entry of this
    /// file once more, with the contexts it had, in the order they were
    /// made (a parent's before its children's). `out` and the records to
    /// come refer to them by those contexts; the entries themselves went
    /// with the file's old bytes.
    fn respan(&mut self) {
        self.spans_out.clear();
        let (book, mut file) = self.split();
        book.respan(&mut file);
    }

    /// Counts `lost` records (already counted as logged) as lost, to be
    /// reported in the file by the next write.
    fn add_lost(&mut self, lost: Lost) {
        if lost.records == 0 {
            return;
        }
        self.shared
            .counters
            .lost
            .fetch_add(lost.records, Ordering::Relaxed);
        self.pending_lost = Some(match self.pending_lost {
            Some(p) => Lost {
                records: p.records + lost.records,
                first_tick: p.first_tick.min(lost.first_tick),
                last_tick: p.last_tick.max(lost.last_tick),
            },
            None => lost,
        });
    }

    fn write_buffer(&mut self) {
        // Ahead of `out`: a gap of lost records, then the dictionary
        // entries `out` needs (sites, strings, then spans, which use both).
        let mut head = std::mem::take(&mut self.defs);
        self.strings.put_pending(&mut head);
        // This write's sites and strings, with the names of the threads it
        // names, kept to be written again; ahead of them, the last write's.
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.clear();
        fresh.extend_from_slice(&head);
        self.spans_out.put_entry(&mut head);
        let restated = std::mem::replace(&mut self.restate, fresh);
        head.splice(0..0, restated.iter().copied());
        self.fresh = restated;
        if let Some(l) = self.pending_lost {
            self.tally.lost += l.records;
            let mut gap = Vec::new();
            put_entry(&mut gap, tag::DROP, |b| {
                dict::put_drop(b, dict::WRITER_THREAD, l.records, l.first_tick, l.last_tick)
            });
            head.splice(0..0, gap);
        }
        // The write is two regions: first what the records need (the
        // dictionary entries, in a block of their own when large enough,
        // then the clock pairs as they are, then the records' INDEX entry),
        // then the records (a block of their own, or their entries): a
        // reader may step over them and still read every name, span and
        // time (see `index`).
        // (Not under loom: the duty cycle is measured by the clock.)
        let codec = |len| codec_for(self.compression, self.duty, len).filter(|_| !cfg!(loom));
        let (head_codec, out_codec) = (codec(head.len()), codec(self.out.len()));
        let mut lead = std::mem::take(&mut self.lead);
        lead.clear();
        match head_codec.and_then(|c| self.packer.pack(&head, c)) {
            Some(block) => lead.extend_from_slice(block),
            None => lead.extend_from_slice(&head),
        }
        lead.extend_from_slice(&self.clocks);
        // The run of the thread drained last into its tallies (see
        // `Totals::count`): the file's totals take the write's as they are.
        self.tally.settle();
        let raw = self.out.len();
        let (out, block): (&[u8], _) =
            match out_codec.and_then(|c| Some((self.packer.pack(&self.out, c)?, c))) {
                Some((block, c)) => (block, Some((c, raw))),
                None => (&self.out, None),
            };
        index::put(
            &mut lead,
            &mut self.sum,
            &self.tally,
            out.len(),
            self.out_records,
        );
        // A small write joins the run of small writes being made, or
        // starts one with its RUN entry's placeholder; another write ends
        // it first (see `index::OpenRun`).
        let (at, generation) = self.writer.at();
        let (first_region, records_len) = (lead.len(), out.len());
        let runs = self.writer.fills() && index::runs(&self.sum, first_region, records_len);
        if self
            .run
            .as_ref()
            .is_some_and(|r| !runs || !r.takes(generation, first_region, records_len))
        {
            end_run(&mut self.writer, self.run.take());
        }
        let opens = runs && self.run.is_none();
        if opens {
            lead.splice(0..0, index::placeholder());
        }
        let checkpoints = self.writer.checkpoints();
        if self.stage.active() {
            let len = (lead.len() + out.len()) as u64;
            self.stage
                .before_write(self.writer.identity(), self.writer.at().0, len);
        }
        let result = self.writer.write(&lead, out, self.out_records, &self.tally);
        let written = lead.len() + out.len();
        if runs && result.is_ok() {
            let run = self
                .run
                .get_or_insert_with(|| index::OpenRun::new(generation, at));
            let at = at + (lead.len() - first_region) as u64;
            run.add(
                at,
                first_region,
                records_len,
                self.out_records,
                block,
                &self.sum,
                &self.tally,
            );
        }
        // (A checkpoint after the write: the run ends before it, so a
        // reader's walk lands on it.)
        if self.writer.checkpoints() != checkpoints {
            end_run(&mut self.writer, self.run.take());
        }
        self.lead = lead;
        head.clear();
        self.defs = head;
        match result {
            Ok(()) => {
                self.clocks.clear();
                self.strings.written();
                self.pending_lost = None;
                self.logged += self.out_records;
                self.shared
                    .counters
                    .logged
                    .store(self.logged, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(written as u64, Ordering::Relaxed);
            }
            Err(e) => {
                // (A pending gap's marker was in the failed batch: it stays
                // pending, with this batch's records added.)
                self.add_lost(Lost {
                    records: self.out_records,
                    first_tick: self.last_write,
                    last_tick: clock::now(),
                });
                self.report(e);
                // The lost batch may have held dictionary entries: write them again.
                self.forget_emitted();
                self.strings.unwritten();
            }
        }
        // (Before a roll: a recovery judges the write by the file it went to.)
        self.stage.after_write(&self.strings);
        self.out.clear();
        self.out_records = 0;
        self.sum.clear();
        // (Records of a failed write are counted again as lost.)
        self.tally.clear();
    }

    /// Ends the run of small writes being made, if any (its RUN entry
    /// filled in): before a roll, or the file's end.
    pub(super) fn end_run(&mut self) {
        end_run(&mut self.writer, self.run.take());
    }

    /// Starts the next file; a failure leaves the live file in use.
    fn roll(&mut self) {
        self.end_run();
        match self.writer.roll() {
            Ok((header_len, retention)) => {
                self.shared.counters.files.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .counters
                    .bytes_written
                    .fetch_add(header_len, Ordering::Relaxed);
                // The new file is complete on its own: dictionary and clock again.
                self.forget_emitted();
                self.strings.reset();
                // (No string is defined in it: the next commit's from the first.)
                self.stage.after_write(&self.strings);
                self.clock_pair();
                if let Err(e) = retention {
                    self.file_error(e);
                }
            }
            Err(e) => self.file_error(e),
        }
    }

    /// A failed roll or deletion: counted, and reported by the next flush.
    fn file_error(&mut self, e: std::io::Error) {
        self.shared
            .counters
            .file_errors
            .fetch_add(1, Ordering::Relaxed);
        self.report(e);
    }

    /// Keeps the first error since the last flush, for it to report.
    fn report(&self, e: std::io::Error) {
        self.shared
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    }

    fn forget_emitted(&mut self) {
        // (The whole dictionary goes to the file again as records need it.)
        self.restate.clear();
        self.site_emitted.iter_mut().for_each(|e| *e = false);
        self.thread_names.clear();
        self.file_generation += 1;
    }

    /// Ends the file after the records in `out`: a clock pair (with the
    /// others, outside the records), the TOTALS entry of the file with
    /// them and the gap this write reports, and the END entry counting
    /// them. The write's records get no INDEX entry: a reader always reads
    /// a file's end.
    pub(super) fn close_out(&mut self) {
        let (tick, ns) = clock::pair();
        dict::put_clock_entry(&mut self.clocks, tick, ns);
        self.tally.settle();
        let mut pending = self.tally.clone();
        pending.lost += self.pending_lost.map_or(0, |l| l.records);
        self.writer
            .put_end(&mut self.out, self.out_records, Some(&pending));
        self.sum.ends = true;
    }
}

/// Fills in the RUN entry of `run`, if it is still in the live file. A
/// failure leaves its placeholder, which says no run: a reader reads the
/// run's entries one by one, as without it; nothing is lost, so it is not
/// reported.
fn end_run(writer: &mut Writer, run: Option<index::OpenRun>) {
    let Some(run) = run else { return };
    let (generation, at) = run.place();
    if let Some(entry) = run.entry() {
        let _ = writer.fill(generation, at, &entry);
    }
}

/// The codec of a batch of `len` bytes written by a flusher that works
/// `duty` (1/1024ths of its time) under `compression`; `None`: written as
/// it is (too small for a block to save anything, too large for the time
/// compressing it would take, or the flusher too busy). See
/// [`DUTY_COMPRESS`] and [`DUTY_DEFLATE`].
fn codec_for(compression: Compression, duty: u64, len: usize) -> Option<u8> {
    if compression == Compression::None
        || duty >= DUTY_COMPRESS
        || !(MIN_BLOCK..=MAX_BLOCK).contains(&len)
    {
        return None;
    }
    Some(
        if compression == Compression::Small && duty < DUTY_DEFLATE {
            crate::wire::block::DEFLATE_COMPACT
        } else {
            crate::wire::block::LZ4_COMPACT
        },
    )
}

/// How much `out` may hold before it is written: [`OUT_MAX`], or less when
/// the file is that close to its size limit, so files end near the limit;
/// at least 4 KiB, so a small limit does not mean a write per record.
pub(super) fn out_limit(w: &Writer) -> usize {
    w.room().clamp(4 << 10, OUT_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::block::{DEFLATE_COMPACT, LZ4_COMPACT};

    /// The codec policy: deflate while the flusher idles, LZ4 while it
    /// works up to half its time, nothing above that; `Fast` never
    /// deflates, `None` never compresses; a batch too small or too large
    /// is written as it is.
    #[test]
    fn a_batch_is_deflated_while_the_flusher_idles_and_written_as_it_is_when_busy() {
        let len = 32 << 10;
        let idle = DUTY_DEFLATE - 1;
        let working = DUTY_DEFLATE;
        let busy = DUTY_COMPRESS;
        assert_eq!(codec_for(Compression::Small, 0, len), Some(DEFLATE_COMPACT));
        assert_eq!(
            codec_for(Compression::Small, idle, len),
            Some(DEFLATE_COMPACT)
        );
        assert_eq!(
            codec_for(Compression::Small, working, len),
            Some(LZ4_COMPACT)
        );
        assert_eq!(
            codec_for(Compression::Small, busy - 1, len),
            Some(LZ4_COMPACT)
        );
        assert_eq!(codec_for(Compression::Small, busy, len), None);
        assert_eq!(codec_for(Compression::Fast, 0, len), Some(LZ4_COMPACT));
        assert_eq!(codec_for(Compression::Fast, busy, len), None);
        assert_eq!(codec_for(Compression::None, 0, len), None);
        // Sizes: a block of a few bytes saves nothing; one past the largest
        // would be time the rings wait for.
        assert_eq!(codec_for(Compression::Small, 0, MIN_BLOCK - 1), None);
        assert_eq!(
            codec_for(Compression::Small, 0, MIN_BLOCK),
            Some(DEFLATE_COMPACT)
        );
        assert_eq!(
            codec_for(Compression::Small, 0, MAX_BLOCK),
            Some(DEFLATE_COMPACT)
        );
        assert_eq!(codec_for(Compression::Small, 0, MAX_BLOCK + 1), None);
    }
}
