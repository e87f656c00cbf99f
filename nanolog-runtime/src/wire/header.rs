//! The 48-byte file header.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `NANOLOG\0` |
//! | 8 | 2 | format version (u16 LE) |
//! | 10 | 2 | flags, 0 |
//! | 12 | 4 | header length, 48 (u32 LE) |
//! | 16 | 8 | ticks per second (f64 LE) |
//! | 24 | 8 | base tick (u64 LE) |
//! | 32 | 8 | base time, ns since the Unix epoch (i64 LE) |
//! | 40 | 4 | process id (u32 LE) |
//! | 44 | 4 | CRC-32 of bytes 0..44 (u32 LE) |

use super::{HEADER_LEN, MAGIC, MIN_VERSION, VERSION};

/// The decoded file header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// The format version.
    pub version: u16,
    /// Clock ticks per second, as calibrated by the writer.
    pub ticks_per_second: f64,
    /// A tick and the wall-clock time it was read at.
    pub base_tick: u64,
    /// The wall-clock time at `base_tick`, in ns since the Unix epoch.
    pub base_unix_ns: i64,
    /// The id of the process that wrote the file.
    pub pid: u32,
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderError {
    /// Shorter than a header (including empty).
    TooShort(usize),
    /// The magic bytes are wrong: not a nanolog file.
    NotNanolog,
    /// A version this reader does not know.
    UnsupportedVersion(u16),
    /// The checksum or a field is wrong.
    Corrupt(&'static str),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::TooShort(n) => {
                write!(f, "{n} bytes, shorter than the {HEADER_LEN}-byte header")
            }
            HeaderError::NotNanolog => f.write_str("not a nanolog log (wrong magic bytes)"),
            HeaderError::UnsupportedVersion(v) => write!(f, "unsupported format version {v}"),
            HeaderError::Corrupt(r) => write!(f, "corrupt header: {r}"),
        }
    }
}

impl std::error::Error for HeaderError {}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.ticks_per_second.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_tick.to_le_bytes());
        b[32..40].copy_from_slice(&self.base_unix_ns.to_le_bytes());
        b[40..44].copy_from_slice(&self.pid.to_le_bytes());
        let crc = crc32fast::hash(&b[0..44]);
        b[44..48].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads a header from the start of a file.
    pub fn decode(b: &[u8]) -> Result<Header, HeaderError> {
        if b.len() < 8 || b[0..8] != MAGIC {
            if b.len() < 8 && MAGIC.starts_with(b) {
                return Err(HeaderError::TooShort(b.len()));
            }
            return Err(HeaderError::NotNanolog);
        }
        if b.len() < HEADER_LEN {
            return Err(HeaderError::TooShort(b.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let version = u16::from_le_bytes([b[8], b[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        if crc32fast::hash(&b[0..44]) != u32_at(44) {
            return Err(HeaderError::Corrupt("header checksum mismatch"));
        }
        if u32_at(12) as usize != HEADER_LEN {
            return Err(HeaderError::Corrupt("unexpected header length"));
        }
        let hz = f64::from_bits(u64_at(16));
        if !(hz.is_finite() && hz > 0.0) {
            return Err(HeaderError::Corrupt(
                "ticks per second is not a positive number",
            ));
        }
        Ok(Header {
            version,
            ticks_per_second: hz,
            base_tick: u64_at(24),
            base_unix_ns: u64_at(32) as i64,
            pid: u32_at(40),
        })
    }
}
