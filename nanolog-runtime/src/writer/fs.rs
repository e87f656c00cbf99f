//! What the writer asks of the filesystem beyond writes: reopening, a
//! file's identity and names, the next file's path, hard links.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The lock file of the log at `path`: `app.nlog.lock`.
/// A handle on `file`'s file of its own, opened for writing without
/// `O_APPEND` (Linux: the process's link to its descriptor; the path may
/// name another file by now).
#[cfg(target_os = "linux")]
pub(super) fn reopen(file: &File) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn reopen(_: &File) -> io::Result<File> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(unix)]
pub(super) fn positioned_write(f: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, bytes, at)
}

#[cfg(not(unix))]
pub(super) fn positioned_write(_: &File, _: &[u8], _: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// A file's device and inode (Unix; zeros elsewhere).
pub(crate) fn file_identity(f: &File) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        f.metadata().map_or((0, 0), |m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = f;
        (0, 0)
    }
}

/// Whether the file `meta` describes has a name left (a link count).
#[cfg(unix)]
pub(super) fn has_name(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.nlink() > 0
}

#[cfg(not(unix))]
pub(super) fn has_name(_: &std::fs::Metadata) -> bool {
    true
}

/// Whether `path` names the file `meta` describes.
#[cfg(unix)]
pub(super) fn names(path: &Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|p| p.dev() == meta.dev() && p.ino() == meta.ino())
}

#[cfg(not(unix))]
pub(super) fn names(_: &Path, _: &std::fs::Metadata) -> bool {
    true
}

/// Where the next file is created before it is renamed over `path`.
pub(super) fn next_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".next");
    path.with_file_name(name)
}

/// Whether `link` failed because the filesystem has no hard links (so a
/// plain rename is the way to move the file).
pub(super) fn no_hard_links(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
    )
}
