//! Nothing lost at `kill -9`: a logger that writes a file keeps its
//! threads' rings in pages of a file mapped shared beside the log
//! (`app.nlog.rings`, the "area"), which the kernel keeps when the process
//! dies however it dies (`SIGKILL`, the OOM killer). A ring's space goes
//! back to its thread only once the bytes taken from it are in the log
//! (`flusher::drain`), so the area holds every record the log lacks, and
//! says where the log's bytes end. The next `start()` on the path, or
//! `nanolog recover`, appends those records to the log, exactly once
//! (`crate::recovery`).
//!
//! What a recovery needs besides the rings goes into the area as it comes
//! into being, off the logging call's path: each call site's SITE entry as
//! it registers (`crate::site`), each ring's thread and name as it
//! attaches, the clock's pairs as the flusher takes them. Span
//! definitions do not: recovered records inside spans say `<spans lost>`.
//!
//! Unix only (memory-mapped files and `posix_fallocate`); elsewhere, and
//! under loom, loggers keep ordinary rings.

#[cfg(all(unix, not(loom)))]
pub(crate) mod layout;

#[cfg(all(unix, not(loom)))]
mod area;

#[cfg(all(unix, not(loom)))]
pub(crate) use area::{Area, Slot};

use std::path::{Path, PathBuf};

/// The area beside the log at `log`: `app.nlog.rings`.
pub fn area_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".rings");
    log.with_file_name(name)
}

/// The area the sites' entries go into as they register: the running
/// logger's.
#[cfg(all(unix, not(loom)))]
static DICTIONARY: std::sync::Mutex<Option<std::sync::Arc<Area>>> = std::sync::Mutex::new(None);

/// Makes `area` the one sites' entries go into: every site registered so
/// far now, each later one as it registers.
#[cfg(all(unix, not(loom)))]
pub(crate) fn attach_dictionary(area: &std::sync::Arc<Area>) -> bool {
    crate::site::under_table(|table| {
        let mut entry = Vec::new();
        for (id, reg) in table.iter().enumerate() {
            if let Some(r) = reg {
                entry.clear();
                crate::site::put_entry(&mut entry, id as u32, r);
                if !area.add_entry(&entry) {
                    return false;
                }
            }
        }
        *lock_dictionary() = Some(std::sync::Arc::clone(area));
        true
    })
}

/// Sites registered from now on go into no area.
#[cfg(all(unix, not(loom)))]
pub(crate) fn detach_dictionary() {
    *lock_dictionary() = None;
}

#[cfg(all(unix, not(loom)))]
fn lock_dictionary() -> std::sync::MutexGuard<'static, Option<std::sync::Arc<Area>>> {
    DICTIONARY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A site registered (under the site table's lock): its entry into the
/// running logger's area, if any, before a record of it can be in a ring.
#[cfg(all(unix, not(loom)))]
pub(crate) fn site_registered(id: u32, reg: &crate::site::Registration) {
    let area = lock_dictionary().clone();
    if let Some(area) = area {
        let mut entry = Vec::new();
        crate::site::put_entry(&mut entry, id, reg);
        // A full disk: the site's records are recovered as unreadable gaps.
        let _ = area.add_entry(&entry);
    }
}

/// Gives a starting logger its area, or says once on stderr why it keeps
/// ordinary rings.
#[cfg(all(unix, not(loom)))]
pub(crate) fn open_area(shared: &crate::channel::Shared, log: &Path, capacity: usize) {
    use std::io::Write;
    let made = Area::create(log, capacity).and_then(|a| {
        if attach_dictionary(&a) {
            Ok(a)
        } else {
            detach_dictionary();
            a.remove();
            Err(std::io::Error::other("no room for the call sites' entries"))
        }
    });
    match made {
        Ok(a) => {
            let _ = shared.area.set(a);
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "nanolog: cannot keep the rings in {} ({e}): logging with ordinary rings, which a kill -9 loses",
                area_path(log).display()
            );
        }
    }
}

/// A logger stopped cleanly: its area goes.
#[cfg(all(unix, not(loom)))]
pub(crate) fn close_area(shared: &crate::channel::Shared) {
    if let Some(a) = shared.area.get() {
        detach_dictionary();
        a.remove();
    }
}
