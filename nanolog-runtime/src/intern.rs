//! The flusher's table of repeated string values (format version 3): a
//! string argument seen again is defined once in the file (a STRINGS
//! entry) and written after that as a reference to its id, so a method
//! name, a route, a table or a user name costs a record one or two bytes.
//!
//! All of it runs on the flusher thread; the call is untouched. A string
//! is interned on its third sighting (a filter of hashes seen keeps
//! unique values, request ids, out of the file's dictionary), between
//! [`MIN_LEN`] and [`MAX_LEN`] bytes. The table is direct-mapped: a
//! lookup is a hash, one slot and a comparison; a string whose slot
//! another took is defined again under a new id if it comes back (both
//! ids stay valid in the file). Each file starts afresh ([`Interner::reset`]),
//! and holds at most [`MAX_BYTES`] of definitions, then writes new
//! strings inline.
//!
//! Definitions reach the file in the write that first uses them, ahead of
//! that write's extents ([`Interner::put_pending`]); a failed write puts
//! its definitions back in the queue, and a file begun again in place
//! (replaced under the writer) gets every definition again.

use crate::wire::record::{StringRefs, Strings};
use crate::wire::{frame, put_varint, tag};

/// Shorter strings are written inline: a reference saves nothing.
pub(crate) const MIN_LEN: usize = 4;
/// Longer strings are written inline: hashing them costs the flusher more
/// than repeats of them are likely to save.
pub(crate) const MAX_LEN: usize = 1024;
/// Bytes of string definitions a file holds at most.
pub(crate) const MAX_BYTES: usize = 1 << 20;
/// The sighting of a string that defines it (2 to 5). The third: a value
/// seen twice (a request id in a request's first and last records) costs
/// less inline twice than defined (measured: the `log`-heavy service's
/// file 0.99x -> 0.85x the JSON through zstd -3, the tracing service's
/// 0.78x -> 0.76x; a fourth sighting gained nothing more).
const SIGHTINGS: u64 = 3;
/// Slots of the table and of the seen-once filter (powers of two).
const SLOTS: usize = 1 << 13;

#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    id: u32,
}

/// A file's interned strings, on the flusher thread: what a
/// [`CompactFn`](crate::compact::CompactFn) writes repeated strings against.
pub struct Interner {
    on: bool,
    slots: Box<[Slot]>,
    /// Hashes of strings seen once, by the same index as `slots`.
    seen: Box<[u64]>,
    /// Every definition's bytes, in id order ...
    arena: Vec<u8>,
    /// ... and where each lies in `arena`, id `i` at `i - 1`.
    spans: Vec<(usize, usize)>,
    /// Ids below this are in a buffer handed to the writer ...
    queued: u32,
    /// ... and ids below this are in the file.
    written: u32,
}

impl Default for Interner {
    fn default() -> Self {
        Interner::new()
    }
}

impl Interner {
    /// An empty table, for a file's flusher.
    pub fn new() -> Interner {
        Interner {
            on: true,
            slots: vec![Slot::default(); SLOTS].into_boxed_slice(),
            seen: vec![0; SLOTS].into_boxed_slice(),
            arena: Vec::new(),
            spans: Vec::new(),
            queued: 1,
            written: 1,
        }
    }

    /// A table that interns nothing (every string is written inline), and
    /// holds no memory.
    pub fn off() -> Interner {
        Interner {
            on: false,
            slots: Box::new([]),
            seen: Box::new([]),
            arena: Vec::new(),
            spans: Vec::new(),
            queued: 1,
            written: 1,
        }
    }

    /// The id of `s` in this file, if it is (or now becomes) interned.
    #[inline]
    pub(crate) fn lookup(&mut self, s: &[u8]) -> Option<u32> {
        if !self.on || s.len() < MIN_LEN || s.len() > MAX_LEN {
            return None;
        }
        let h = hash(s);
        let ix = slot_of(h);
        let slot = self.slots[ix];
        if slot.hash == h && slot.id != 0 {
            let (start, len) = self.spans[slot.id as usize - 1];
            if self.arena[start..start + len] == *s {
                return Some(slot.id);
            }
        }
        // The filter keeps the hash with its low two bits taken by how
        // often it was seen.
        let mark = h & !3;
        let seen = self.seen[ix];
        if seen & !3 != mark {
            self.seen[ix] = mark;
            return None;
        }
        if seen & 3 < SIGHTINGS - 2 {
            self.seen[ix] = seen + 1;
            return None;
        }
        if self.arena.len() + s.len() > MAX_BYTES {
            return None;
        }
        let id = u32::try_from(self.spans.len() + 1).ok()?;
        self.spans.push((self.arena.len(), s.len()));
        self.arena.extend_from_slice(s);
        self.slots[ix] = Slot { hash: h, id };
        Some(id)
    }

    /// Appends a STRINGS entry of the definitions no buffer has taken yet
    /// (nothing if there are none), and counts them as taken.
    pub(crate) fn put_pending(&mut self, out: &mut Vec<u8>) {
        self.queued = self.put_since(out, self.queued);
    }

    /// Appends a STRINGS entry of the definitions from id `from` on
    /// (nothing if there are none), whatever buffer took them; returns the
    /// id after them (where the next call starts). A crash-safe flusher's
    /// area takes them so (see `flusher::stage`).
    pub(crate) fn put_since(&self, out: &mut Vec<u8>, from: u32) -> u32 {
        let next = self.spans.len() as u32 + 1;
        if from >= next {
            return next;
        }
        let start = frame::begin_entry(out, tag::STRINGS);
        put_varint(out, u64::from(next - from));
        for id in from..next {
            let (at, len) = self.spans[id as usize - 1];
            put_varint(out, u64::from(id));
            put_varint(out, len as u64);
            out.extend_from_slice(&self.arena[at..at + len]);
        }
        frame::end_entry(out, start);
        next
    }

    /// The first definition no buffer has taken.
    pub(crate) fn queued(&self) -> u32 {
        self.queued
    }

    /// The buffer that took the queued definitions was written.
    pub(crate) fn written(&mut self) {
        self.written = self.queued;
    }

    /// The buffer was lost (a failed write): its definitions are queued
    /// again for the next.
    pub(crate) fn unwritten(&mut self) {
        self.queued = self.written;
    }

    /// The file was begun again in place: every definition is queued again.
    pub(crate) fn rewrite_all(&mut self) {
        self.queued = 1;
        self.written = 1;
    }

    /// A new file: no string is defined in it.
    pub(crate) fn reset(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        self.slots.fill(Slot::default());
        self.seen.fill(0);
        self.arena.clear();
        self.spans.clear();
        self.queued = 1;
        self.written = 1;
    }

    /// The table as a reader sees it, to decode what was compacted with it.
    pub(crate) fn strings(&self) -> Strings<'_> {
        Strings::tagged(crate::wire::VERSION, &self.arena, &[], &self.spans)
    }
}

/// The flusher compacts records against its table: a string it has given
/// an id is written as a reference to it.
impl StringRefs for Interner {
    #[inline(always)]
    fn lookup(&mut self, s: &[u8]) -> Option<u32> {
        Interner::lookup(self, s)
    }
}

/// A 64-bit hash of `s` (4 to 1024 bytes) from at most three 8-byte words:
/// the first, the last and (past 16 bytes) the middle one, so a lookup costs
/// the same whatever the string's length. Strings up to 24 bytes are hashed
/// whole; longer ones that differ only elsewhere share a hash, and the
/// comparison in [`Interner::lookup`] tells them apart (the later one takes
/// the slot). Never 0.
#[inline(always)]
fn hash(s: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xbf58_476d_1ce4_e5b9;
    let n = s.len();
    let word = |at: usize| {
        s.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let half = |at: usize| {
        s.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    let (a, b) = if n >= 8 {
        (word(0), word(n - 8))
    } else {
        (half(0), half(n.saturating_sub(4)))
    };
    let c = if n > 16 { word(n / 2 - 4) } else { 0 };
    let mut h = (a ^ n as u64).wrapping_mul(K) ^ b.rotate_left(29);
    h = (h ^ c).wrapping_mul(K2);
    // The slot is taken from the high bits, which the multiplications mix.
    h ^= h >> 29;
    h.max(1)
}

/// The slot of hash `h`: its top bits.
#[inline(always)]
fn slot_of(h: u64) -> usize {
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_interned_at_its_third_sighting() {
        let mut t = Interner::new();
        assert_eq!(t.lookup(b"GET /orders"), None);
        assert_eq!(t.lookup(b"GET /orders"), None);
        assert_eq!(t.lookup(b"GET /orders"), Some(1));
        assert_eq!(t.lookup(b"GET /orders"), Some(1));
        // Short and long strings stay inline.
        let long = vec![b'x'; MAX_LEN + 1];
        for _ in 0..4 {
            assert_eq!(t.lookup(b"abc"), None);
            assert_eq!(t.lookup(&long), None);
        }
        // Seen twice in turn with another of its slot's: each stays
        // inline, its count begun again.
        let other = (0u32..)
            .map(|i| format!("other {i}"))
            .find(|o| slot_of(hash(o.as_bytes())) == slot_of(hash(b"POST /fills")))
            .expect("a string of the same slot");
        for _ in 0..2 {
            assert_eq!(t.lookup(b"POST /fills"), None);
            assert_eq!(t.lookup(other.as_bytes()), None);
        }
        assert_eq!(t.lookup(b"POST /fills"), None);
        assert_eq!(t.lookup(b"POST /fills"), None);
        assert_eq!(t.lookup(b"POST /fills"), Some(2));
        assert_eq!(t.strings().get(1), Some("GET /orders"));
        assert_eq!(t.strings().get(2), Some("POST /fills"));
        assert_eq!(t.strings().get(3), None);
    }

    #[test]
    fn definitions_are_queued_once_and_again_after_a_lost_write() {
        let mut t = Interner::new();
        for _ in 0..SIGHTINGS {
            t.lookup(b"orders");
            t.lookup(b"accounts");
        }
        let mut a = Vec::new();
        t.put_pending(&mut a);
        assert!(!a.is_empty());
        let mut b = Vec::new();
        t.put_pending(&mut b);
        assert!(b.is_empty(), "taken once");
        // The write failed: the same definitions again.
        t.unwritten();
        t.put_pending(&mut b);
        assert_eq!(a, b);
        t.written();
        for _ in 0..SIGHTINGS {
            t.lookup(b"positions");
        }
        let mut c = Vec::new();
        t.put_pending(&mut c);
        assert!(c.len() < a.len(), "only the new one");
        // The file begun again: all three.
        t.rewrite_all();
        let mut d = Vec::new();
        t.put_pending(&mut d);
        assert!(d.len() > a.len());
        // A new file: nothing is defined; the strings are new again.
        t.reset();
        assert_eq!(t.lookup(b"orders"), None);
        assert_eq!(t.lookup(b"orders"), None);
        assert_eq!(t.lookup(b"orders"), Some(1));
    }

    #[test]
    fn the_table_holds_a_bounded_number_of_bytes() {
        let mut t = Interner::new();
        let mut defined = 0usize;
        for i in 0..100_000u32 {
            let s = format!("{i:0>1000}");
            t.lookup(s.as_bytes());
            t.lookup(s.as_bytes());
            if t.lookup(s.as_bytes()).is_some() {
                defined += s.len();
            }
        }
        assert!(defined <= MAX_BYTES);
        assert!(defined > MAX_BYTES / 2);
    }

    #[test]
    fn an_interner_that_is_off_interns_nothing() {
        let mut t = Interner::off();
        assert_eq!(t.lookup(b"orders"), None);
        assert_eq!(t.lookup(b"orders"), None);
    }

    #[test]
    fn repeated_strings_are_references_and_decode_as_written() {
        use crate::wire::format::ArgKind;
        use crate::wire::record::{compact_with, decode_args, raw_strs, skip_args, Value};
        let kinds = [ArgKind::Str, ArgKind::Str, ArgKind::U32];
        let mut table = Interner::new();
        let mut raw = raw_strs(&["/api/v1/orders", "é"]);
        raw.extend_from_slice(&7u32.to_le_bytes());
        let mut first = Vec::new();
        compact_with(&kinds, &raw, &mut first, &mut table).unwrap();
        let mut again = Vec::new();
        compact_with(&kinds, &raw, &mut again, &mut table).unwrap();
        assert_eq!(again, first, "seen twice: still inline");
        let mut second = Vec::new();
        compact_with(&kinds, &raw, &mut second, &mut table).unwrap();
        // The third sighting defines the route; "é" is too short to.
        assert!(second.len() + 12 < first.len(), "{first:?} {second:?}");
        for out in [&first, &second] {
            let mut got = Vec::new();
            decode_args(&kinds, out, &mut 0, table.strings(), |v| got.push(v)).unwrap();
            assert_eq!(
                got,
                [
                    Value::Str("/api/v1/orders"),
                    Value::Str("é"),
                    Value::Uint(7)
                ]
            );
            let mut end = 0;
            skip_args(&kinds, out, &mut end, &table.strings()).unwrap();
            assert_eq!(end, out.len());
        }
        // A reference to a string the file does not define: an error.
        assert!(decode_args(&kinds, &second, &mut 0, Strings::NUMBERED, |_| {}).is_none());
    }

    #[test]
    fn strings_that_end_in_digits_after_a_defined_prefix_are_packed_and_read_as_written() {
        use crate::wire::format::ArgKind;
        use crate::wire::record::{compact_with, decode_args, raw_strs, skip_args, Value};
        let kinds = [ArgKind::Str];
        let mut table = Interner::new();
        let one = |table: &mut Interner, s: &str| {
            let mut out = Vec::new();
            compact_with(&kinds, &raw_strs(&[s]), &mut out, table).unwrap();
            let mut got = Vec::new();
            decode_args(&kinds, &out, &mut 0, table.strings(), |v| got.push(v)).unwrap();
            assert_eq!(got.len(), 1);
            let text = match got[0] {
                Value::Str(t) => t.to_string(),
                Value::Numbered(n) => n.to_string(),
                Value::Hex(h) => h.to_string(),
                v => panic!("{v:?}"),
            };
            assert_eq!(text, s, "{out:?}");
            let mut end = 0;
            skip_args(&kinds, &out, &mut end, &table.strings()).unwrap();
            assert_eq!(end, out.len(), "{s}");
            let packed = matches!(got[0], Value::Numbered(_));
            (out, packed)
        };
        // Each key is new; their prefix is defined at its third sighting
        // (the prefix of a string is looked up once the string is not).
        let keys = ["orders:48213", "orders:7", "orders:100000", "orders:0"];
        let (first, packed) = one(&mut table, keys[0]);
        assert!(!packed);
        assert!(!one(&mut table, keys[1]).1);
        let (third, packed) = one(&mut table, keys[2]);
        assert!(packed, "{third:?}");
        assert!(third.len() + 6 < first.len(), "{first:?} {third:?}");
        assert!(one(&mut table, keys[3]).1);
        // Zeros before the number, and digits that are all zeros, come back.
        for s in ["orders:007", "orders:000", "orders:00000000000000001"] {
            let (_, packed) = one(&mut table, s);
            assert_eq!(packed, s.len() - "orders:".len() <= 17, "{s}");
        }
        // Not numbered: all digits, no digits, a prefix too short to define,
        // a tail longer than 17 digits, hex digits (packed as such).
        for s in [
            "48213",
            "orders:",
            "a1",
            "orders:123456789012345678",
            "0123456789abcdef",
        ] {
            for _ in 0..3 {
                assert!(!one(&mut table, s).1, "{s}");
            }
        }
        // A prefix the file does not define: an error, not a wrong string.
        let mut out = Vec::new();
        compact_with(&kinds, &raw_strs(&["orders:5"]), &mut out, &mut table).unwrap();
        assert!(decode_args(&kinds, &out, &mut 0, Strings::NUMBERED, |_| {}).is_none());
        // Cut anywhere: an error, never a panic.
        for n in 0..out.len() {
            assert!(decode_args(&kinds, &out[..n], &mut 0, table.strings(), |_| {}).is_none());
        }
    }
}
