//! The logger's error type.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// What can go wrong when starting, flushing or stopping a logger.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A logger is already running in this process; drop it first.
    AlreadyRunning,
    /// The log file could not be created or opened.
    Open {
        /// The file that was being opened.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Another logger, in this process or another, writes the log at this
    /// path: two writers in one file would corrupt it, so the second is
    /// refused and changes nothing on disk. The lock is the kernel's
    /// (`flock` on `PATH.lock`), so a crashed holder releases it.
    Locked {
        /// The log file's path.
        path: PathBuf,
        /// The process that holds it, as it wrote in the lock file.
        pid: Option<u32>,
    },
    /// Writing the log failed (for example, the disk is full). Records of the
    /// failed batch are lost and counted in `Stats::lost`; the file keeps
    /// everything written before.
    Write(io::Error),
    /// A builder setting is out of range.
    Config(String),
    /// The flusher thread could not be spawned or has died.
    Flusher(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::AlreadyRunning => {
                f.write_str("a nanolog logger is already running in this process")
            }
            Error::Open { path, source } => {
                write!(f, "cannot open log file {}: {source}", path.display())
            }
            Error::Locked { path, pid } => {
                write!(f, "log file {} is in use by another logger", path.display())?;
                match pid {
                    Some(pid) => write!(f, " (process {pid})"),
                    None => Ok(()),
                }
            }
            Error::Write(e) => write!(f, "cannot write the log: {e}"),
            Error::Config(m) => write!(f, "invalid configuration: {m}"),
            Error::Flusher(m) => write!(f, "flusher thread failed: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open { source, .. } => Some(source),
            Error::Write(e) => Some(e),
            _ => None,
        }
    }
}
