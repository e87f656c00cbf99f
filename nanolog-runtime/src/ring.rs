//! The per-thread staging ring: a single-producer, single-consumer byte queue.
//!
//! Positions are byte counts since the ring was created (`u64`, never wrap in
//! practice); the offset in the buffer is `pos & mask`. A record is contiguous:
//! when it does not fit before the end of the buffer, the producer publishes a
//! [`PAD`] word there and the record starts again at offset 0.
//!
//! Every record starts on an 8-byte boundary ([`ALIGN`]) with a 16-byte header:
//! `site id: u32`, `length: u32` (the whole record, padded to 8), `tick: u64`,
//! then the raw argument bytes written by the call site's encoder.
//!
//! Producer and consumer positions sit on their own cache lines, and each side
//! keeps a private copy of the other's position, rereading the shared one only
//! when its copy says the ring is full (producer) or empty (consumer) —
//! as the NanoLog paper's staging buffers do.

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64};
use std::sync::atomic::Ordering;

/// Site id of the word that tells the consumer to skip to offset 0.
pub(crate) const PAD: u32 = u32::MAX;
/// Site id of a dropped-records marker (`OnFull::Drop`, or oversize records):
/// `count: u64, first tick: u64, last tick: u64` after the header.
pub(crate) const DROPS: u32 = u32::MAX - 1;
/// Set in a record's site id: the record begins with the key (a `u64`) of
/// the span context its thread is in from it on, then its arguments. A
/// thread whose context changed since its last record (a tokio worker
/// polls another request's task) states it so, in the record itself, not
/// in a switch record of its own ahead of it. Site ids stay below it.
pub(crate) const WITH_CONTEXT: u32 = 1 << 30;
/// Bytes of a record header.
pub(crate) const HEADER: usize = 16;
/// Records start and end on this boundary, so the header's tick (and a
/// record's first 8-byte argument) never straddles a cache line. 4 would
/// suffice for the PAD word and pack a singleInteger record in 20 bytes
/// instead of 24, but measured slower on that message (BENCHMARKS.md,
/// "Records on 8-byte boundaries").
pub(crate) const ALIGN: usize = 8;
/// The largest record any ring takes, whatever its capacity: its compacted
/// form must fit one file entry ([`MAX_BODY`](crate::wire::MAX_BODY), which
/// readers enforce) with an extent's other records. Larger ones are dropped
/// and counted as oversize.
pub(crate) const MAX_RECORD: usize = crate::wire::MAX_BODY / 2;
/// Bytes of a drop marker record.
pub(crate) const DROPS_LEN: usize = HEADER + 24;
/// How far ahead of its tail the producer asks for the ring's cache lines
/// for writing (see [`Producer::reserve`]).
///
/// The flusher reads every line the producer writes, so when the producer
/// comes round to a line again, the flusher's core holds a copy of it, and
/// the producer's store must first take it back. With the two cores far
/// apart the stores queue behind those transfers. Asked for 4 KiB ahead (a
/// few microseconds of logging), the lines are the producer's again before
/// it writes them (BENCHMARKS.md, "Prefetch for writing 4 KiB ahead", has
/// the figures and the distances tried).
const WRITE_AHEAD: usize = 4096;

/// The header at the start of `b`: site id, record length, tick; `None`
/// if `b` is shorter than a header.
#[inline(always)]
pub(crate) fn parse_header(b: &[u8]) -> Option<(u32, usize, u64)> {
    let h: &[u8; HEADER] = b.get(..HEADER)?.try_into().ok()?;
    let [s0, s1, s2, s3, l0, l1, l2, l3, t @ ..] = *h;
    Some((
        u32::from_le_bytes([s0, s1, s2, s3]),
        u32::from_le_bytes([l0, l1, l2, l3]) as usize,
        u64::from_le_bytes(t),
    ))
}

/// A drop marker's payload, as [`Producer::commit_drops`] writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DropMarker {
    /// Records dropped.
    pub(crate) count: u64,
    /// The tick of the first.
    pub(crate) first: u64,
    /// The tick of the last.
    pub(crate) last: u64,
}

impl DropMarker {
    /// Reads the payload after a `DROPS` record header.
    pub(crate) fn parse(args: &[u8]) -> DropMarker {
        let field = |k: usize| {
            args.get(k * 8..k * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .unwrap_or(0)
        };
        DropMarker {
            count: field(0),
            first: field(1),
            last: field(2),
        }
    }
}

/// A ring's two positions where they live apart from it: on cache lines
/// of their own on the heap (an ordinary ring), or at fixed offsets of its
/// slot's first page in the crash-safe area (`crate::crash`), where a
/// recovery finds them after the process died.
#[derive(Debug)]
struct Positions {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
}

/// What holds a ring's bytes and positions, freed when the ring is.
#[derive(Debug)]
enum Backing {
    /// `Ring::buf` came from `Box::leak` of a boxed slice of `cap` bytes;
    /// the positions are this box's.
    Heap(#[allow(dead_code)] Box<Positions>),
    /// A slot of the crash-safe area, mapped shared: bytes and positions.
    #[cfg(all(unix, not(loom)))]
    Mapped(#[allow(dead_code)] crate::crash::Slot),
}

/// The shared part of a ring.
#[derive(Debug)]
pub(crate) struct Ring {
    /// Consumer position: bytes the flusher has finished with (in a
    /// crash-safe logger, bytes the file holds: see `flusher::drain`).
    head: NonNull<AtomicU64>,
    /// Producer position: bytes published to the flusher.
    tail: NonNull<AtomicU64>,
    buf: NonNull<u8>,
    cap: usize,
    backing: Backing,
    /// Set by the producer's thread when it exits; the flusher frees the ring
    /// once it is set and the ring is empty.
    closed: AtomicBool,
    /// The logger-assigned thread id.
    pub(crate) thread: u32,
    pub(crate) name: std::sync::Mutex<String>,
    /// Bumped when the thread's name changes, so the flusher records it again.
    pub(crate) name_version: std::sync::atomic::AtomicU32,
    /// Loom's view of the bytes (zero-sized outside loom; see `sync::Shadow`).
    shadow: crate::sync::Shadow,
}

// SAFETY: the buffer is shared by exactly one producer and one consumer, which
// touch disjoint byte ranges: the producer writes only in [tail, head + cap) and
// the consumer reads only in [head, tail), and the Release/Acquire pairs on
// `head` and `tail` order every hand-over of a range between them. `head`
// and `tail` point into `backing`, which the ring owns.
unsafe impl Send for Ring {}
// SAFETY: as for `Send`; all other fields are atomics or mutexes.
unsafe impl Sync for Ring {}

impl Ring {
    /// A ring of `cap` bytes on the heap; `cap` is a power of two and at
    /// least 64.
    pub(crate) fn new(cap: usize, thread: u32, name: String) -> Ring {
        assert!(cap.is_power_of_two() && cap >= 64);
        let buf: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        // Zeroed allocation: pages the thread never writes are never touched.
        let buf = NonNull::from(Box::leak(buf)).cast::<u8>();
        let positions = Box::new(Positions {
            head: CachePadded::new(AtomicU64::new(0)),
            tail: CachePadded::new(AtomicU64::new(0)),
        });
        Ring {
            head: NonNull::from(&*positions.head),
            tail: NonNull::from(&*positions.tail),
            buf,
            cap,
            backing: Backing::Heap(positions),
            closed: AtomicBool::new(false),
            thread,
            name: std::sync::Mutex::new(name),
            name_version: std::sync::atomic::AtomicU32::new(0),
            shadow: crate::sync::Shadow::new(cap, ALIGN),
        }
    }

    /// A ring in a slot of the crash-safe area: its bytes and positions are
    /// the slot's (both zero: a new slot, or one given back empty).
    #[cfg(all(unix, not(loom)))]
    pub(crate) fn mapped(slot: crate::crash::Slot, thread: u32, name: String) -> Ring {
        let cap = slot.capacity();
        assert!(cap.is_power_of_two() && cap >= 64);
        let (head, tail, buf) = (slot.head(), slot.tail(), slot.bytes());
        Ring {
            head,
            tail,
            buf,
            cap,
            backing: Backing::Mapped(slot),
            closed: AtomicBool::new(false),
            thread,
            name: std::sync::Mutex::new(name),
            name_version: std::sync::atomic::AtomicU32::new(0),
            shadow: crate::sync::Shadow::new(cap, ALIGN),
        }
    }

    #[inline(always)]
    fn head(&self) -> &AtomicU64 {
        // SAFETY: `head` points into `backing` (the heap box, or the slot's
        // mapped page), which lives as long as the ring and is not moved.
        unsafe { self.head.as_ref() }
    }

    #[inline(always)]
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`.
        unsafe { self.tail.as_ref() }
    }

    /// The crash-safe area's slot that holds this ring, if it has one.
    #[cfg(all(unix, not(loom)))]
    pub(crate) fn slot(&self) -> Option<&crate::crash::Slot> {
        match &self.backing {
            Backing::Mapped(s) => Some(s),
            Backing::Heap(_) => None,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Called once by the producer's thread when it exits.
    pub(crate) fn close(&self) {
        // Release: the flusher that sees `closed` also sees every record
        // committed before it (their `tail` stores precede this in program order).
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the producer has gone and everything it wrote is consumed.
    pub(crate) fn is_finished(&self, head: u64) -> bool {
        // Acquire pairs with `close`: after it, `tail` is final.
        self.closed.load(Ordering::Acquire) && self.tail().load(Ordering::Acquire) == head
    }

    /// Hands the bytes before `head` back to the producer (see
    /// [`Consumer::release`]; a crash-safe flusher's once what it took
    /// from them is committed to the area, see `flusher::stage`).
    fn release_to(&self, head: u64) {
        // Release pairs with the producer's Acquire load of `head`: our reads
        // of the freed bytes happen before it overwrites them.
        self.head().store(head, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if matches!(self.backing, Backing::Heap(_)) {
            let slice = std::ptr::slice_from_raw_parts_mut(self.buf.as_ptr(), self.cap);
            // SAFETY: a heap ring's `buf` came from `Box::leak` of a boxed
            // slice of `cap` bytes in `new`, and nothing else frees it.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

/// The producer's side of a ring, owned by the logging thread.
pub(crate) struct Producer {
    ring: std::sync::Arc<Ring>,
    tail: u64,
    cached_head: u64,
    /// How far ahead to prefetch: [`WRITE_AHEAD`], or a quarter of a smaller
    /// ring, or 0 where the CPU cannot prefetch for writing.
    ahead: usize,
    /// The largest record this ring takes: its capacity, or [`MAX_RECORD`].
    max_record: usize,
}

/// Bytes reserved by [`Producer::try_reserve`], to be written and published
/// by [`commit_record`](Self::commit_record) or
/// [`commit_drops`](Self::commit_drops). It holds its producer mutably, so
/// nothing else is reserved or committed while it lives, and a commit
/// consumes it; one dropped instead publishes nothing. It lives in registers
/// across the call, not in the producer: a logging call's only stores to
/// memory are then its record and the tail.
#[must_use]
pub(crate) struct Reservation<'p> {
    producer: &'p mut Producer,
    ptr: NonNull<u8>,
    len: usize,
}

impl Reservation<'_> {
    /// Writes a record into the reserved bytes, its arguments by `enc`, and
    /// publishes it.
    #[inline(always)]
    pub(crate) fn commit_record(
        self,
        site: u32,
        tick: u64,
        enc: impl for<'a> FnOnce(SlotWriter<'a>),
    ) {
        let Reservation { producer, ptr, len } = self;
        // SAFETY: `reserve` returned `len` >= HEADER writable bytes at `ptr`
        // that the consumer does not read before `commit`, and nothing was
        // reserved or committed since (the reservation borrows the producer).
        let args = unsafe {
            let h = ptr.as_ptr();
            h.cast::<u32>().write_unaligned(site);
            h.add(4).cast::<u32>().write_unaligned(len as u32);
            h.add(8).cast::<u64>().write_unaligned(tick);
            ptr.add(HEADER)
        };
        enc(SlotWriter {
            ptr: args,
            remaining: len - HEADER,
            _slot: std::marker::PhantomData,
        });
        producer.commit(len);
    }

    /// Writes a drop marker (`count` records dropped between the ticks) into
    /// the reserved bytes and publishes it; a reservation of another size
    /// publishes nothing.
    pub(crate) fn commit_drops(self, count: u64, first: u64, last: u64) {
        let Reservation { producer, ptr, len } = self;
        debug_assert_eq!(len, DROPS_LEN);
        if len != DROPS_LEN {
            return;
        }
        // SAFETY: DROPS_LEN bytes are reserved at `ptr` (checked above), as
        // for `commit_record`: a header whose tick is `last`, then three u64
        // fields.
        unsafe {
            let h = ptr.as_ptr();
            h.cast::<u32>().write_unaligned(DROPS);
            h.add(4).cast::<u32>().write_unaligned(DROPS_LEN as u32);
            for (i, f) in [last, count, first, last].iter().enumerate() {
                h.add(8 + 8 * i).cast::<u64>().write_unaligned(*f);
            }
        }
        producer.commit(DROPS_LEN);
    }
}

/// Where an encoder writes a record's arguments: the reserved bytes after
/// the header. Only the ring creates one, over exactly the reserved bytes;
/// its lifetime ends before the record is published, and every write checks
/// the room left.
pub struct SlotWriter<'a> {
    ptr: NonNull<u8>,
    remaining: usize,
    _slot: std::marker::PhantomData<&'a mut [u8]>,
}

impl<'a> SlotWriter<'a> {
    /// Writes `bytes` and returns the cursor past them.
    #[inline(always)]
    pub(crate) fn put(self, bytes: &[u8]) -> SlotWriter<'a> {
        if bytes.len() > self.remaining {
            // Unreachable from the macros (the record size is computed from
            // the same values); refuse rather than write out of bounds.
            return SlotWriter {
                remaining: 0,
                ..self
            };
        }
        // SAFETY: a cursor covers `remaining` reserved bytes at `ptr` that
        // nothing else reads or writes until the record is published, after
        // the cursor's lifetime; bytes.len() <= remaining.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr(), bytes.len());
            SlotWriter {
                ptr: self.ptr.add(bytes.len()),
                remaining: self.remaining - bytes.len(),
                _slot: std::marker::PhantomData,
            }
        }
    }
}

impl Producer {
    pub(crate) fn new(ring: std::sync::Arc<Ring>) -> Producer {
        // At most a quarter of a small ring ahead: while the ring is less
        // than three quarters full the line asked for is one the flusher has
        // finished with. Fuller than that, the hint may take a line the
        // flusher has yet to read; it then reads it back from this core,
        // slower but correct (a prefetch changes no data).
        let ahead = if prefetch::for_write_supported() {
            WRITE_AHEAD.min(ring.cap / 4)
        } else {
            0
        };
        Producer {
            max_record: ring.cap.min(MAX_RECORD),
            ring,
            tail: 0,
            cached_head: 0,
            ahead,
        }
    }

    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Bytes of the largest record [`try_reserve`](Self::try_reserve) takes.
    #[inline(always)]
    pub(crate) fn max_record(&self) -> usize {
        self.max_record
    }

    /// Reserves `len` contiguous bytes (a multiple of [`ALIGN`], at least a header,
    /// at most the capacity) for one record or drop marker; `None` if the
    /// ring has no room now.
    #[inline(always)]
    pub(crate) fn try_reserve(&mut self, len: usize) -> Option<Reservation<'_>> {
        let ptr = self.reserve(len)?;
        Some(Reservation {
            producer: self,
            ptr,
            len,
        })
    }

    /// Whether `len` bytes can be reserved now (for a caller that waits
    /// for room before it reserves). Like `try_reserve`, it may publish the
    /// PAD word that skips the end of the buffer; the reservation that
    /// follows then starts at offset 0.
    #[inline(always)]
    pub(crate) fn has_room(&mut self, len: usize) -> bool {
        self.reserve(len).is_some()
    }

    #[inline(always)]
    fn reserve(&mut self, len: usize) -> Option<NonNull<u8>> {
        debug_assert!(len.is_multiple_of(ALIGN) && len <= self.ring.cap && len >= HEADER);
        let cap = self.ring.cap;
        let off = self.tail as usize & (cap - 1);
        if off + len > cap {
            return self.wrap_and_reserve(len);
        }
        if self.tail + len as u64 - self.cached_head > cap as u64 {
            // Acquire pairs with the consumer's Release store of `head`: its reads
            // of the bytes we are about to overwrite are finished.
            self.cached_head = self.ring.head().load(Ordering::Acquire);
            if self.tail + len as u64 - self.cached_head > cap as u64 {
                return None;
            }
        }
        if self.ahead != 0 {
            // The line WRITE_AHEAD bytes on (wrapping round the buffer): a
            // hint, so nothing is read or written there.
            let line = (off + self.ahead) & (cap - 1);
            prefetch::for_write(self.ring.buf.as_ptr().wrapping_add(line));
        }
        // SAFETY: off + len <= cap, so the pointer stays inside the buffer.
        Some(unsafe { self.ring.buf.add(off) })
    }

    /// The record does not fit before the end of the buffer: publish a PAD
    /// word there (on its own, so the consumer can free the tail end even if
    /// the record needs the whole ring), then reserve from offset 0.
    #[cold]
    fn wrap_and_reserve(&mut self, len: usize) -> Option<NonNull<u8>> {
        let cap = self.ring.cap;
        let off = self.tail as usize & (cap - 1);
        let to_end = cap - off;
        if self.tail + to_end as u64 - self.cached_head > cap as u64 {
            self.cached_head = self.ring.head().load(Ordering::Acquire);
            if self.tail + to_end as u64 - self.cached_head > cap as u64 {
                return None;
            }
        }
        // SAFETY: [off, cap) is between tail and head + cap (checked above), so
        // the consumer does not read it; off and cap are multiples of ALIGN, so to_end >= 8.
        unsafe {
            self.ring
                .buf
                .add(off)
                .cast::<u32>()
                .as_ptr()
                .write_unaligned(PAD)
        };
        self.ring.shadow.write(off, 4);
        self.tail += to_end as u64;
        // Release: publishes the PAD word (see `commit`).
        self.ring.tail().store(self.tail, Ordering::Release);
        self.reserve(len)
    }

    /// Publishes the `len` bytes reserved last.
    #[inline(always)]
    fn commit(&mut self, len: usize) {
        self.ring
            .shadow
            .write(self.tail as usize & (self.ring.cap - 1), len);
        self.tail += len as u64;
        // Release pairs with the consumer's Acquire load of `tail`: the record's
        // bytes, written before this store, are visible to it before it reads them.
        self.ring.tail().store(self.tail, Ordering::Release);
    }
}

/// The consumer's side of a ring, owned by the flusher.
pub(crate) struct Consumer {
    pub(crate) ring: std::sync::Arc<Ring>,
    head: u64,
}

/// One record read from a ring, valid until the consumer releases it.
pub(crate) struct RawRecord<'a> {
    pub(crate) site: u32,
    pub(crate) tick: u64,
    /// The argument bytes (or the drop marker's payload).
    pub(crate) args: &'a [u8],
    /// Bytes the record occupies in the ring.
    len: usize,
}

impl Consumer {
    pub(crate) fn new(ring: std::sync::Arc<Ring>) -> Consumer {
        Consumer { ring, head: 0 }
    }

    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// The producer's published position; records before it may be read.
    pub(crate) fn available(&self) -> u64 {
        // Acquire pairs with the producer's Release store in `commit`.
        self.ring.tail().load(Ordering::Acquire)
    }

    /// The record at the head, given the `tail` returned by `available`.
    pub(crate) fn peek(&mut self, tail: u64) -> Option<RawRecord<'_>> {
        let cap = self.ring.cap;
        if self.head >= tail {
            return None;
        }
        let word = self.contiguous(tail, 4);
        if word == PAD.to_le_bytes() {
            // Skip to offset 0; a PAD is never followed by another (the
            // record after it fits the whole buffer from offset 0).
            self.head += (cap - (self.head as usize & (cap - 1))) as u64;
            if self.head >= tail {
                return None;
            }
        }
        let bytes = self.contiguous(tail, usize::MAX);
        let (site, len, tick) = parse_header(bytes)?;
        debug_assert!(len >= HEADER && len <= bytes.len());
        let len = len.clamp(HEADER, bytes.len());
        Some(RawRecord {
            site,
            tick,
            args: &bytes[HEADER..len],
            len,
        })
    }

    /// The published bytes from the head on, up to `tail`, the end of the
    /// buffer or `max` bytes, whichever comes first: whole records (the
    /// last perhaps cut short by `max`) and perhaps a PAD word, for a caller
    /// that parses a run of records itself ([`parse_header`]) and then
    /// advances past those it took.
    pub(crate) fn contiguous(&self, tail: u64, max: usize) -> &[u8] {
        let cap = self.ring.cap;
        let off = self.head as usize & (cap - 1);
        let n = (tail.saturating_sub(self.head) as usize)
            .min(cap - off)
            .min(max);
        self.ring.shadow.read(off, n);
        // SAFETY: [head, head + n) lies in [head, tail), published by the
        // producer (Acquire in `available`), and inside the buffer
        // (n <= cap - off). The producer does not rewrite it before
        // `release` hands it back, and `release` hands back only bytes
        // before the head, which moves only by `advance` (`&mut self`, so
        // not while this borrow lives).
        unsafe { std::slice::from_raw_parts(self.ring.buf.add(off).as_ptr(), n) }
    }

    /// Moves past the record `peek` returned (locally; see `release`).
    pub(crate) fn advance(&mut self, len: usize) {
        self.head += len as u64;
    }

    /// Hands the consumed bytes back to the producer.
    pub(crate) fn release(&self) {
        self.ring.release_to(self.head);
    }
}

impl RawRecord<'_> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Prefetching a cache line for writing: taking it into this core's cache
/// in a state that a store can complete in, before the store comes.
mod prefetch {
    /// Whether [`for_write`] does anything on this CPU.
    pub(super) fn for_write_supported() -> bool {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::arch::x86_64::__cpuid;
            // SAFETY: CPUID exists on every x86_64 CPU, and leaf 0x8000_0000
            // says which extended leaves exist. (Newer compilers call
            // `__cpuid` safe; older ones need the block.)
            #[allow(unused_unsafe)]
            let max = unsafe { __cpuid(0x8000_0000) }.eax;
            // SAFETY: as above; leaf 0x8000_0001 exists (checked).
            #[allow(unused_unsafe)]
            let prefetchw =
                max >= 0x8000_0001 && unsafe { __cpuid(0x8000_0001) }.ecx & (1 << 8) != 0;
            prefetchw
        }
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        {
            true
        }
        #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri))))]
        {
            false
        }
    }

    /// Asks for the cache line holding `p` for writing. Only a hint: it
    /// never faults, and reads and writes no memory.
    #[inline(always)]
    pub(super) fn for_write(p: *const u8) {
        // SAFETY: PREFETCHW (x86-64, present where `for_write_supported`
        // says: CPUID.80000001H:ECX.PRFCHW) and PRFM PSTL1KEEP (every
        // AArch64 CPU) are hints that do not fault on any address and do
        // not change memory, registers or flags (`readonly`: the compiler
        // may treat them as reads, which they are not, but that is harmless).
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) p, options(readonly, nostack, preserves_flags));
        }
        // SAFETY: as above.
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        unsafe {
            std::arch::asm!("prfm pstl1keep, [{}]", in(reg) p, options(readonly, nostack, preserves_flags));
        }
        let _ = p;
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use std::sync::Arc;

    /// A producer thread writes records of `sizes` into a 64-byte ring (record
    /// `i`: site `i + 1`, tick `100 + i`, argument bytes all `i`); the
    /// consumer must see each once, intact and in order.
    fn produce_and_check(sizes: &'static [usize]) {
        let ring = Arc::new(Ring::new(64, 1, String::new()));
        let mut prod = Producer::new(Arc::clone(&ring));
        let mut cons = Consumer::new(Arc::clone(&ring));
        let t = loom::thread::spawn(move || {
            for (i, &len) in sizes.iter().enumerate() {
                let r = loop {
                    match prod.try_reserve(len) {
                        Some(r) => break r,
                        None => loom::thread::yield_now(),
                    }
                };
                let fill = [i as u8; 64];
                r.commit_record(i as u32 + 1, 100 + i as u64, |c| {
                    let _ = c.put(&fill[..len - HEADER]);
                });
            }
        });
        let mut seen = 0;
        while seen < sizes.len() {
            let tail = cons.available();
            match cons.peek(tail) {
                Some(r) => {
                    assert_eq!(r.site, seen as u32 + 1);
                    assert_eq!(r.tick, 100 + seen as u64);
                    assert_eq!(r.len(), sizes[seen]);
                    assert!(
                        r.args.iter().all(|&b| b == seen as u8),
                        "argument bytes intact"
                    );
                    let len = r.len();
                    cons.advance(len);
                    cons.release();
                    seen += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        t.join().unwrap();
    }

    /// Push/pop/wrap: records of varying sizes into a ring small enough to
    /// wrap and fill, under every interleaving loom explores.
    #[test]
    fn loom_push_pop_wrap() {
        loom::model(|| produce_and_check(&[24, 32, 16, 40]));
    }

    /// A second lap that wraps: its PAD word lands on bytes the consumer
    /// read in the first lap, so the producer's reload of `head` before
    /// writing it must see those reads finished (Acquire on the wrap path).
    /// Lap 1 fills 64 bytes; lap 2 puts 16 + 24 at 0..40, then a 32-byte
    /// record does not fit at 40: PAD at 40, record at 0.
    #[test]
    fn loom_wrap_over_bytes_read_in_the_first_lap() {
        loom::model(|| produce_and_check(&[24, 24, 16, 16, 24, 32]));
    }

    /// The thread-exit handshake: the producer commits its last records and
    /// closes the ring; the flusher frees a ring only when it sees it closed
    /// and drained, so it never frees one with records left in it.
    #[test]
    fn loom_close_after_last_record_loses_nothing() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(64, 1, String::new()));
            let mut prod = Producer::new(Arc::clone(&ring));
            let mut cons = Consumer::new(Arc::clone(&ring));
            let t = loom::thread::spawn(move || {
                for i in 0..2u32 {
                    let r = loop {
                        match prod.try_reserve(24) {
                            Some(r) => break r,
                            None => loom::thread::yield_now(),
                        }
                    };
                    r.commit_record(i + 1, u64::from(i), |c| {
                        let _ = c.put(&[7; 8]);
                    });
                }
                prod.ring().close();
            });
            let mut seen = 0;
            loop {
                // The flusher's order: drain, then free the ring if it is
                // closed and nothing is left.
                let tail = cons.available();
                while let Some(r) = cons.peek(tail) {
                    let len = r.len();
                    cons.advance(len);
                    seen += 1;
                }
                cons.release();
                if cons.ring.is_finished(cons.head()) {
                    break;
                }
                loom::thread::yield_now();
            }
            assert_eq!(seen, 2, "the ring was freed with records in it");
            t.join().unwrap();
        });
    }
}
