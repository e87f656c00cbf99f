//! The log file: header on creation, appends, rotation, and recovery from
//! failed writes.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::clock;
use crate::error::Error;
use crate::wire::frame::put_entry;
use crate::wire::header::Header;
use crate::wire::{self, dict, tag};

pub(crate) struct Writer {
    base: PathBuf,
    path: PathBuf,
    file: File,
    /// Bytes known to be in the file.
    len: u64,
    index: u32,
    rotate_bytes: Option<u64>,
}

/// The path of the `index`-th file of a rotated set: `app.nlog`, `app.1.nlog`, ...
pub fn rotated_path(base: &Path, index: u32) -> PathBuf {
    if index == 0 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.{index}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{index}"),
    };
    base.with_file_name(name)
}

/// The name an earlier run's file at `base` is kept under when a new run
/// starts there: `app.20261123T153100.123456789Z.nlog`, from the UTC time
/// its own header records, so finished files sort in time order.
pub fn finished_path(base: &Path, start_unix_ns: i64) -> PathBuf {
    finished_path_n(base, start_unix_ns, 0)
}

/// [`finished_path`] with a suffix `n` (`...Z.n.nlog`) when `n > 0`.
fn finished_path_n(base: &Path, start_unix_ns: i64, n: u32) -> PathBuf {
    let mut t = String::new();
    crate::reader::time::write_utc(&mut t, start_unix_ns, 'T');
    let stamp: String = t.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = if n > 0 {
        format!(".{n}")
    } else {
        String::new()
    };
    let name = match base.extension() {
        Some(ext) => format!("{stem}.{stamp}Z{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{stamp}Z{suffix}"),
    };
    base.with_file_name(name)
}

/// Moves an earlier run's non-empty file at `path` aside (see
/// [`finished_path`]), so a new run never destroys it. Its start time comes
/// from its header, or from its modification time if it has none.
fn keep_previous(path: &Path) -> Result<(), Error> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let mut head = [0u8; wire::HEADER_LEN];
    let from_header = File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .ok()
        .and_then(|()| Header::decode(&head).ok())
        .map(|h| h.base_unix_ns);
    let start = from_header.unwrap_or_else(|| {
        meta.modified()
            .ok()
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64)
    });
    // Two runs that started in the same nanosecond (or a copy): a suffix.
    let target = (0..)
        .map(|n| finished_path_n(path, start, n))
        .find(|t| !t.exists())
        .unwrap_or_else(|| finished_path(path, start));
    std::fs::rename(path, &target).map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source: io::Error::new(
            source.kind(),
            format!(
                "cannot keep the previous log as {}: {source}",
                target.display()
            ),
        ),
    })
}

fn open(path: &Path) -> Result<(File, u64), Error> {
    let open_err = |source| Error::Open {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::create(path).map_err(open_err)?;
    let (tick, unix_ns) = clock::pair();
    let header = Header {
        version: wire::VERSION,
        ticks_per_second: clock::ticks_per_second(),
        base_tick: tick,
        base_unix_ns: unix_ns,
        pid: std::process::id(),
    };
    file.write_all(&header.encode()).map_err(open_err)?;
    Ok((file, wire::HEADER_LEN as u64))
}

impl Writer {
    pub(crate) fn create(path: &Path, rotate_bytes: Option<u64>) -> Result<Writer, Error> {
        keep_previous(path)?;
        let (file, len) = open(path)?;
        Ok(Writer {
            base: path.to_path_buf(),
            path: path.to_path_buf(),
            file,
            len,
            index: 0,
            rotate_bytes,
        })
    }

    /// Appends `buf`. On failure the file is cut back to its last good length,
    /// so it stays decodable, and the error is returned.
    pub(crate) fn write(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.file.write_all(buf) {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                let _ = self.file.seek(SeekFrom::Start(self.len));
                Err(e)
            }
        }
    }

    pub(crate) fn should_rotate(&self) -> bool {
        self.rotate_bytes.is_some_and(|max| self.len >= max)
    }

    /// Opens the next file and ends this one with a ROTATE entry. Returns
    /// the header bytes of the new file.
    pub(crate) fn rotate(&mut self) -> Result<u64, Error> {
        let next = rotated_path(&self.base, self.index + 1);
        let mut out = Vec::new();
        let name = next
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Open the next file first: if that fails, this file carries on
        // unchanged (and rotation is tried again after the next write).
        keep_previous(&next)?;
        let (file, len) = open(&next)?;
        put_entry(&mut out, tag::ROTATE, |b| wire::put_str(b, &name));
        self.close_entries(&mut out);
        // If the old file cannot take its last entries, it still ends at a
        // whole entry (see `write`); the log goes on in the new file.
        let _ = self.write(&out);
        self.file = file;
        self.path = next;
        self.len = len;
        self.index += 1;
        Ok(len)
    }

    /// Appends a final clock pair and the END entry.
    pub(crate) fn close_entries(&self, out: &mut Vec<u8>) {
        let (tick, ns) = clock::pair();
        dict::put_clock_entry(out, tick, ns);
        put_entry(out, tag::END, |_| {});
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        // Under loom the file is scenery: the models check the handshakes,
        // and an fdatasync per explored interleaving would only cost minutes.
        if cfg!(loom) {
            return Ok(());
        }
        self.file.sync_data()
    }
}
