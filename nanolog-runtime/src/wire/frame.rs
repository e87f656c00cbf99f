//! Entry framing: `tag: u8 | body length: u32 | crc: u32 | body`, written
//! and read here only.

use super::{entry_crc, FRAME_LEN, MAX_BODY};

/// Starts an entry of tag `t` in `out`; returns where it starts, for
/// [`end_entry`], which fills in the length and checksum.
#[inline]
pub(crate) fn begin_entry(out: &mut Vec<u8>, t: u8) -> usize {
    let start = out.len();
    out.push(t);
    out.extend_from_slice(&[0; FRAME_LEN - 1]);
    start
}

/// Fills in the length and checksum of the entry begun at `start`.
#[inline]
pub(crate) fn end_entry(out: &mut [u8], start: usize) {
    let body_len = (out.len() - start - FRAME_LEN) as u32;
    out[start + 1..start + 5].copy_from_slice(&body_len.to_le_bytes());
    let crc = entry_crc(out[start], &out[start + FRAME_LEN..]);
    out[start + 5..start + 9].copy_from_slice(&crc.to_le_bytes());
}

/// Appends a whole entry whose body `body` writes.
#[inline]
pub(crate) fn put_entry(out: &mut Vec<u8>, t: u8, body: impl FnOnce(&mut Vec<u8>)) {
    let start = begin_entry(out, t);
    body(out);
    end_entry(out, start);
}

/// What is at an offset of a file.
pub(crate) enum Frame<'a> {
    /// A whole entry with a matching checksum.
    Ok {
        /// Its tag.
        tag: u8,
        /// Its body.
        body: &'a [u8],
    },
    /// Not enough bytes left for the entry the frame announces.
    Truncated,
    /// A tag never written (0, or above 32), a length over the limit, or a
    /// bad checksum. Tags 8 to 32 are reserved for later revisions: framed
    /// like any other, and skipped by readers that do not know them.
    Bad,
}

/// The entry at `pos` of `data`.
pub(crate) fn frame_at(data: &[u8], pos: usize) -> Frame<'_> {
    frame_within(data, pos, MAX_BODY)
}

/// [`frame_at`] for a reader looking for entries among damaged bytes: a
/// body stated longer than `max_body` is [`Frame::Bad`] without being
/// checksummed (so the search costs at most what its caller allows).
pub(crate) fn frame_within(data: &[u8], pos: usize, max_body: usize) -> Frame<'_> {
    let frame = frame_unchecked(data, pos, max_body);
    if let Frame::Ok { tag, body } = frame {
        let f = &data[pos..pos + FRAME_LEN];
        if entry_crc(tag, body) != u32::from_le_bytes([f[5], f[6], f[7], f[8]]) {
            return Frame::Bad;
        }
    }
    frame
}

/// [`frame_within`] without the checksum: the entry at `pos` if its tag is
/// one a writer writes and its length fits.
fn frame_unchecked(data: &[u8], pos: usize, max_body: usize) -> Frame<'_> {
    let Some(f) = data.get(pos..pos + FRAME_LEN) else {
        return Frame::Truncated;
    };
    let t = f[0];
    if t == 0 || t > 32 {
        return Frame::Bad;
    }
    let len = u32::from_le_bytes([f[1], f[2], f[3], f[4]]) as usize;
    if len > MAX_BODY.min(max_body) {
        return Frame::Bad;
    }
    match data.get(pos + FRAME_LEN..pos + FRAME_LEN + len) {
        Some(body) => Frame::Ok { tag: t, body },
        None => Frame::Truncated,
    }
}

/// Writes the frame of an entry of tag `t` with a body of `len` bytes into
/// `head` ([`FRAME_LEN`] bytes), its checksum left 0: an entry inside an
/// inflated block, which no reader checks on its own.
pub(crate) fn put_unchecked_head(head: &mut [u8], t: u8, len: u32) {
    head[0] = t;
    head[1..5].copy_from_slice(&len.to_le_bytes());
    head[5..9].fill(0);
}

/// The whole entries of `data` from `pos` on, as (where the body starts,
/// tag, body), up to the first that is not whole ([`Entries::pos`] says
/// where that is: `data.len()` when every entry was whole).
pub(crate) struct Entries<'a> {
    data: &'a [u8],
    /// Where the next entry starts.
    pub(crate) pos: usize,
    /// Whether each entry's checksum is checked.
    checked: bool,
}

impl<'a> Entries<'a> {
    /// The entries of a file's bytes: each checked against its checksum.
    pub(crate) fn new(data: &'a [u8], pos: usize) -> Entries<'a> {
        Entries {
            data,
            pos,
            checked: true,
        }
    }

    /// The entries of an inflated block, whose checksum covered them all:
    /// their own checksums are not checked (codec 2 expands its entries
    /// with none), only their tags and lengths.
    pub(crate) fn inflated(data: &'a [u8], pos: usize) -> Entries<'a> {
        Entries {
            data,
            pos,
            checked: false,
        }
    }
}

/// `entries` (whole ones) as codec 2 inflates them: their checksums 0.
#[cfg(test)]
pub(crate) fn unchecked(entries: &[u8]) -> Vec<u8> {
    let mut out = entries.to_vec();
    let mut pos = 0;
    while let Some(f) = out.get_mut(pos..pos + FRAME_LEN) {
        let len = u32::from_le_bytes([f[1], f[2], f[3], f[4]]) as usize;
        f[5..9].fill(0);
        pos += FRAME_LEN + len;
    }
    out
}

impl<'a> Iterator for Entries<'a> {
    type Item = (usize, u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let frame = if self.checked {
            frame_at(self.data, self.pos)
        } else {
            frame_unchecked(self.data, self.pos, MAX_BODY)
        };
        let Frame::Ok { tag, body } = frame else {
            return None;
        };
        let start = self.pos + FRAME_LEN;
        self.pos = start + body.len();
        Some((start, tag, body))
    }
}
