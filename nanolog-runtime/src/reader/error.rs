//! Why a file could not be read.

use std::fmt;
use std::path::PathBuf;

use crate::wire;

/// Why a file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or mapped.
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is empty.
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a nanolog log.
    NotNanolog {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a format version this reader does not know.
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in its header.
        version: u16,
    },
    /// The header is damaged.
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An extent refers to a call site missing from the dictionary, or its
    /// records are malformed though its checksum matched.
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where in the file.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ReadError::Empty { path } => {
                write!(f, "{}: empty file, not a nanolog log", path.display())
            }
            ReadError::NotNanolog { path } => {
                write!(f, "{}: not a nanolog log (bad magic bytes)", path.display())
            }
            ReadError::UnsupportedVersion { path, version } => write!(
                f,
                "{}: unsupported nanolog format version {version} (this reader knows versions {} to {})",
                path.display(),
                wire::MIN_VERSION,
                wire::VERSION
            ),
            ReadError::BadHeader { path, reason } => {
                write!(f, "{}: damaged header: {reason}", path.display())
            }
            ReadError::Malformed {
                path,
                offset,
                reason,
            } => {
                write!(
                    f,
                    "{}: malformed extent at byte {offset}: {reason}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
