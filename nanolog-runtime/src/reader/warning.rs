//! What the reader found wrong in a file without refusing it.

use std::fmt;
use std::path::PathBuf;

/// Damaged regions one reading of a file lists one by one (as
/// [`Warning::SkippedCorrupt`]); the rest it counts in one
/// [`Warning::MoreSkipped`].
pub const LISTED_DAMAGE: usize = 1_000;

/// A problem found while indexing a file: the file is still read, around it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The file ends inside an entry: the writer died mid-write (or is
    /// still writing). Records up to the last whole entry are read.
    TornTail {
        /// The file.
        path: PathBuf,
        /// Where the partial entry starts.
        offset: usize,
        /// Bytes from there to the end of the file.
        len: usize,
    },
    /// Bytes that are not a whole entry with a matching checksum were
    /// skipped; reading resumed at the next whole entry.
    SkippedCorrupt {
        /// The file.
        path: PathBuf,
        /// Where the damage starts.
        offset: usize,
        /// Bytes skipped.
        len: usize,
        /// The damage runs to the end of the file.
        to_end: bool,
    },
    /// Damaged regions past the first [`LISTED_DAMAGE`] of one reading of
    /// the file, skipped as [`Warning::SkippedCorrupt`]'s are, counted
    /// here rather than listed one by one (a crafted file can make every
    /// few bytes one: 655,360 warnings for 20 MB held 160 MB).
    MoreSkipped {
        /// The file.
        path: PathBuf,
        /// Regions not listed.
        regions: usize,
        /// Their bytes, in all.
        bytes: usize,
    },
    /// The file shrank while being read (truncated by another program).
    Shrank {
        /// The file.
        path: PathBuf,
    },
    /// A call-site entry with an id beyond any the logger assigns.
    SiteIdOutOfRange {
        /// The file.
        path: PathBuf,
        /// The id.
        id: usize,
    },
    /// A call-site entry whose body does not parse.
    MalformedSite {
        /// The file.
        path: PathBuf,
        /// Where the entry's body starts.
        offset: usize,
    },
    /// A compressed BLOCK entry that could not be inflated (a codec this
    /// reader does not know, or bytes that do not inflate though their
    /// checksum matched): the entries it holds are skipped.
    BadBlock {
        /// The file.
        path: PathBuf,
        /// Where the entry's body starts.
        offset: usize,
        /// Its bytes, skipped.
        len: usize,
        /// The codec it names, when this reader does not know it.
        codec: Option<u8>,
    },
    /// An INDEX or RUN entry whose checksum holds but whose claims cannot
    /// be true of the file (records without a level, more records than its
    /// bytes hold, ticks wholly outside the file's clock, more entries than a
    /// reader keeps): the file's index is not trusted, and every record is
    /// read, as a file without an index is. Answers stay the whole file's.
    IndexRefused {
        /// The file.
        path: PathBuf,
        /// Where the entry starts.
        offset: usize,
        /// What it claims that cannot be.
        why: &'static str,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::TornTail { path, offset, len } => write!(
                f,
                "{}: torn tail: {len} bytes after offset {offset} are not a whole entry \
                 (decoded up to the last whole record)",
                path.display()
            ),
            Warning::SkippedCorrupt {
                path,
                offset,
                len,
                to_end,
            } => write!(
                f,
                "{}: skipped {len} corrupt bytes at offset {offset}{}",
                path.display(),
                if *to_end { " up to the end" } else { "" }
            ),
            Warning::MoreSkipped {
                path,
                regions,
                bytes,
            } => write!(
                f,
                "{}: skipped {regions} more corrupt regions, {bytes} bytes in all (not listed \
                 one by one)",
                path.display()
            ),
            Warning::Shrank { path } => write!(
                f,
                "{}: the file shrank while being read (truncated by another program); \
                 entries past its new end were skipped",
                path.display()
            ),
            Warning::SiteIdOutOfRange { path, id } => {
                write!(f, "{}: site id {id} out of range", path.display())
            }
            Warning::MalformedSite { path, offset } => write!(
                f,
                "{}: malformed call-site entry at {offset}",
                path.display()
            ),
            Warning::BadBlock {
                path,
                offset,
                len,
                codec: Some(c),
            } => write!(
                f,
                "{}: skipped {len} bytes at offset {offset}: a block compressed with codec {c}, \
                 which this reader does not know (a newer nanolog reads it)",
                path.display()
            ),
            Warning::IndexRefused { path, offset, why } => write!(
                f,
                "{}: the index entry at offset {offset} {why}: the file's index is not \
                 trusted, and every record of it is read",
                path.display()
            ),
            Warning::BadBlock {
                path,
                offset,
                len,
                codec: None,
            } => write!(
                f,
                "{}: skipped {len} corrupt bytes at offset {offset}: a compressed block that \
                 does not inflate to whole entries",
                path.display()
            ),
        }
    }
}
