//! A file begun: its header and SET entry, and the host it names.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::clock;
use crate::wire::frame::put_entry;
use crate::wire::header::Header;
use crate::wire::{self, dict, tag};

/// Creates `path` and writes a fresh header and its SET entry (file `seq`
/// of the set, written on `host`); returns the file, the header and the
/// bytes written. The file is opened for appending: a write after another
/// program cut it back lands at its new end, not past a hole where the
/// header was.
pub(crate) fn open(
    path: &Path,
    seq: u64,
    host: &str,
    before: u64,
) -> io::Result<(File, Header, u64)> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // (A FIFO or a device cannot be cut, nor has it anything to cut.)
    if file.metadata()?.is_file() {
        file.set_len(0)?;
    }
    let header = new_header();
    let start = start_bytes(&header, seq, host, before);
    file.write_all(&start)?;
    Ok((file, header, start.len() as u64))
}

/// A file's first bytes: its header and its SET entry.
pub(super) fn start_bytes(header: &Header, seq: u64, host: &str, before: u64) -> Vec<u8> {
    let mut b = header.encode().to_vec();
    put_entry(&mut b, tag::SET, |b| dict::put_set(b, seq, host, before));
    b
}

/// This machine's name (empty where it has none to give): what every file's
/// SET entry records of its writer.
pub fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes, the length
        // passed; gethostname writes at most that many and nothing else.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            return String::from_utf8_lossy(&buf[..end]).into_owned();
        }
        String::new()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_default()
    }
}

/// The header of a file begun now.
pub(super) fn new_header() -> Header {
    let (tick, unix_ns) = clock::pair();
    Header {
        version: wire::VERSION,
        ticks_per_second: clock::ticks_per_second(),
        base_tick: tick,
        base_unix_ns: unix_ns,
        pid: std::process::id(),
    }
}
