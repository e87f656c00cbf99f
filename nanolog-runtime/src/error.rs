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
    /// The flusher thread has died or stopped, or is stuck: records since
    /// then are not written.
    Flusher(String),
    /// A thread the logger needs (the flusher, the text mirror's writer)
    /// could not be started.
    Spawn {
        /// Which thread.
        thread: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// Another logger is already installed for the `log` crate
    /// ([`capture_log`](crate::capture_log) can install nanolog's only once,
    /// and not beside another one).
    LogLoggerInstalled,
    /// The fatal-signal handlers of `Builder::flush_on_signals` could not
    /// be installed.
    Signals(io::Error),
    /// A dead writer's rings could not be recovered into the log (see
    /// `nanolog recover`): what is wrong, and where the rings were kept.
    Recover(String),
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
            Error::Spawn { thread, source } => {
                write!(f, "cannot start the {thread} thread: {source}")
            }
            Error::LogLoggerInstalled => {
                f.write_str("another logger is already installed for the `log` crate")
            }
            Error::Signals(e) => write!(f, "cannot install the signal handlers: {e}"),
            Error::Recover(m) => write!(f, "cannot recover the rings of a killed writer: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open { source, .. } => Some(source),
            Error::Write(e) | Error::Signals(e) => Some(e),
            Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}
