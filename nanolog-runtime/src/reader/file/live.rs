//! A file still being written: what it gained since it was read, read
//! through the handle kept when the writer rolls it away, and the reading
//! of it as finished once its follower is done with it.

use super::*;

/// What [`LogFile::refresh`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Nothing new.
    Unchanged,
    /// The file grew; the new entries are indexed.
    Grew,
    /// The path now holds another file (a new run, a rename by another
    /// tool) or this one was cut below what was read: this `LogFile` stays
    /// as it was; open the path again to read the new content.
    Replaced,
}

impl LogFile {
    /// Indexes what a growing file (a live log) has gained since it was
    /// opened or last refreshed: the file is mapped again and only the new
    /// entries are read. A file replaced at the path (a new run) or cut
    /// below what was read is reported as [`Refresh::Replaced`], never read
    /// with this file's dictionary.
    ///
    /// A file opened with [`LogFile::open_live`] and renamed away from its
    /// path (nanolog rolling to a new file: the old one ends with a ROTATE
    /// entry) is first read to its end through the handle opened with it, so a follower misses none of its
    /// records: that is a [`Refresh::Grew`], and [`LogFile::rotated_to`]
    /// then says where the log goes on.
    ///
    /// A file opened so whose path is gone (retention deleted a finished
    /// file while it was read) is read to its end through that handle too;
    /// it then stays [`Refresh::Unchanged`].
    pub fn refresh(&mut self) -> Result<Refresh, ReadError> {
        // (A context's spans never change once read; a file read again
        // from its start, replaced, numbers its contexts anew.)
        self.traces
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let loaded = match load(&self.path) {
            Ok(l) => l,
            Err(e) => {
                if self.handle.is_none() || std::fs::symlink_metadata(&self.path).is_ok() {
                    return Err(e);
                }
                return Ok(if self.read_through_handle() {
                    Refresh::Grew
                } else {
                    Refresh::Unchanged
                });
            }
        };
        let data = loaded.data;
        // The parsed header, not the old map's bytes: a file rewritten in
        // place shows its new bytes through the old map too.
        let moved = loaded.identity != self.identity;
        let replaced =
            moved || data.len() < self.valid_len || Header::decode(&data).ok() != Some(self.header);
        // Checked after the path: what was written to the old file before
        // it was renamed away is visible through its handle now.
        if moved && self.read_through_handle() {
            return Ok(Refresh::Grew);
        }
        if replaced {
            return Ok(Refresh::Replaced);
        }
        if data.len() <= self.data.len() {
            return Ok(Refresh::Unchanged);
        }
        self.grow(std::sync::Arc::new(data));
        Ok(Refresh::Grew)
    }

    /// Indexes what the file opened with [`LogFile::open_live`] has gained,
    /// read through the handle kept from then (the path may name another
    /// file now, or none); whether it had grown.
    fn read_through_handle(&mut self) -> bool {
        let old = self
            .handle
            .as_ref()
            .and_then(|h| h.try_clone().ok())
            .and_then(|h| load_open(h, &self.path).ok());
        let Some(old) = old else { return false };
        let same = Header::decode(&old.data).ok() == Some(self.header);
        if same && old.data.len() > self.data.len() && !old.data.faulted() {
            self.grow(std::sync::Arc::new(old.data));
            return true;
        }
        false
    }

    /// Indexes the entries `data` (the same file, longer) has past what was read.
    fn grow(&mut self, data: std::sync::Arc<Data>) {
        self.data = data;
        let mut pairs = self.time.pairs().to_vec();
        // A torn tail seen before may be whole now: read from the last whole entry.
        self.warnings
            .retain(|w| !matches!(w, Warning::TornTail { .. }));
        self.scan(self.valid_len, &mut pairs, None);
        self.warn_if_shrank();
        self.time = TimeMap::new(self.header.ticks_per_second, pairs);
        self.derive();
    }

    /// Reads the file as a finished one from now on: a follower done with
    /// it (the writer rolled to the next file, or a new run took the path)
    /// calls this, so that an entry whose length was damaged, which a live
    /// reader waits behind, is skipped as damage and the whole entries
    /// after it are read. Whether that indexed anything more.
    pub fn settle(&mut self) -> bool {
        if !std::mem::replace(&mut self.live, false) {
            return false;
        }
        let torn = self
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::TornTail { .. }));
        if !torn {
            return false;
        }
        let before = (self.valid_len, self.order.len());
        self.grow(std::sync::Arc::clone(&self.data));
        (self.valid_len, self.order.len()) != before
    }

    pub(super) fn warn_if_shrank(&mut self) {
        if self.shrank() {
            self.warnings.push(Warning::Shrank {
                path: self.path.clone(),
            });
        }
    }

    /// Whether the file shrank while it was being read (another program
    /// truncated it): bytes past its new end read as zeros, and records
    /// in them are reported as errors instead of being decoded.
    #[inline]
    pub fn shrank(&self) -> bool {
        self.data.faulted()
    }
}
