//! The log's lock: `app.nlog.lock`, held by the writing process and naming
//! it.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

pub(super) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// Takes the lock of the log at `path` (an exclusive `flock` on its lock
/// file, released by the kernel when the holder exits, however it exits)
/// and writes this process's id into it; a logger that holds it already is
/// [`Error::Locked`].
pub(crate) fn lock(path: &Path) -> Result<File, Error> {
    let lock = lock_path(path);
    let open_err = |source| Error::Open {
        path: lock.clone(),
        source,
    };
    // Not truncated on open: the holder's pid is read from it on refusal.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(open_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            // The holder writes its pid just after it takes the lock: a
            // file found empty is read again, briefly.
            let mut pid = None;
            for _ in 0..20 {
                let mut text = String::new();
                let _ = io::Read::read_to_string(&mut file, &mut text);
                pid = text.trim().parse().ok();
                if pid.is_some() {
                    break;
                }
                let _ = file.seek(SeekFrom::Start(0));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            return Err(Error::Locked {
                path: path.to_path_buf(),
                pid,
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(open_err(e)),
    }
    // Written over the previous holder's in place, at a fixed width, so a
    // reader never finds the file empty once a pid was written.
    file.write_all(format!("{:>10}\n", std::process::id()).as_bytes())
        .and_then(|()| file.set_len(11))
        .map_err(open_err)?;
    Ok(file)
}
