//! Recovery: the records a dead process's area still held (what its
//! flusher had compacted and not yet written, in OUT, and what its rings
//! held past their heads), appended to its log, exactly once.
//!
//! The steps, each stated in the area's header before the next, so a
//! recovery killed at any point and run again ends the same way:
//! 1. judge the flusher's write under way (whole in the file or not) and
//!    find where the recovery's bytes go: where a write cut short began,
//!    else after the log's last whole entry ([`REC_JUDGED`]);
//! 2. make the bytes (dictionary, threads, clock, OUT's entries unless the
//!    write under way was whole, then each ring's records from its head)
//!    and say how long ([`REC_WRITING`]);
//! 3. cut the log back to its last whole entry, append, `fdatasync`;
//! 4. remove the area.
//!
//! A run that finds step 3 done (the log holds the bytes) goes to step 4.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::crash::area_path;
use crate::crash::layout::*;
use crate::ring::{self, DropMarker};
use crate::wire::format::{ArgKind, Role};
use crate::wire::frame::{begin_entry, end_entry, frame_at, put_entry, Entries, Frame};
use crate::wire::{self, dict, put_varint, tag};

/// Close a recovered extent once its body passes this size (as the
/// flusher's).
const EXTENT_MAX: usize = 64 << 10;

/// Appends to the log at `log` the records its dead writer's rings held
/// (`nanolog recover`): refused while a process still writes the log (it
/// holds the rings). `Ok(None)` when there was nothing to recover.
pub fn recover(log: &Path) -> Result<Option<Recovery>, crate::error::Error> {
    let log = &crate::set::resolve_log_path(log);
    let _lock = crate::writer::lock(log)?;
    recover_at(log).map_err(|e| crate::error::Error::Recover(e.to_string()))
}

/// At a start on `log` (its lock held): recovers what a killed writer's
/// rings held, and says so on stderr; a failure is said too, and does not
/// stop the logger (the area is left, or kept aside, for `nanolog recover`).
pub(crate) fn recover_at_start(log: &Path) {
    use std::io::Write;
    let msg = match recover_at(log) {
        Ok(None) => return,
        Ok(Some(r)) => format!(
            "nanolog: recovered {} records of process {} (killed) from {} into {}",
            r.records,
            r.pid,
            area_path(log).display(),
            log.display()
        ),
        Err(e) => format!("nanolog: cannot recover the rings of a killed writer: {e}"),
    };
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// What a recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// Records written into the log.
    pub records: u64,
    /// Records the dead process had counted as dropped (`OnFull::Drop`),
    /// reported in the log as gaps.
    pub dropped: u64,
    /// Records that could not be read (damage in a ring), reported as gaps.
    pub unreadable: u64,
    /// The rings they came from.
    pub rings: usize,
    /// The process whose rings they were.
    pub pid: u32,
    /// The log they went into.
    pub log: PathBuf,
}

/// Why a recovery did not happen; the area is left (or kept aside) as it
/// was, and nothing in the log changed.
#[derive(Debug)]
pub struct RecoverError {
    /// The area.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
    /// Where the area was moved so that the next start does not meet it
    /// again (an area of another layout, or a damaged one).
    pub kept_as: Option<PathBuf>,
}

impl std::fmt::Display for RecoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)?;
        if let Some(k) = &self.kept_as {
            write!(f, " (kept as {})", k.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for RecoverError {}

/// A ring region as the area holds it.
struct RingRegion {
    offset: usize,
    thread: u32,
    name: String,
    head: u64,
    head_ctx: u64,
    tail: u64,
    /// Drops no marker reported: (count, first tick, last tick).
    drops: (u64, u64, u64),
}

/// Recovers the area of the log at `log`, if there is one (the caller holds
/// the log's lock). `Ok(None)`: no area, or one with nothing left to write
/// (removed either way).
pub(crate) fn recover_at(log: &Path) -> Result<Option<Recovery>, RecoverError> {
    let path = area_path(log);
    let fail = |reason: String| RecoverError {
        path: path.clone(),
        reason,
        kept_as: None,
    };
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        // Not a rings' file (a directory, a link): no writer made it.
        return Ok(None);
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(format!("cannot open: {e}"))),
    };
    let len = file.metadata().map_err(|e| fail(e.to_string()))?.len();
    if len < PAGE as u64 {
        // Died while making it: nothing was logged into it.
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    // SAFETY: the area's writer is dead (the caller holds the log's lock,
    // which it held while alive), so the file does not change under the
    // map; a change by another program only makes the bytes read wrong,
    // which every read below checks.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| fail(e.to_string()))?;
    let area: &[u8] = &map;
    if area[..8] == [0; 8] {
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    if area[..8] != MAGIC {
        return Err(keep_aside(&path, "not a nanolog ring area".into()));
    }
    let version = u32_at(area, H_VERSION);
    if version != VERSION {
        return Err(keep_aside(
            &path,
            format!("a ring area of layout {version}; this build reads layout {VERSION}"),
        ));
    }
    let pid = u32_at(area, H_PID);
    let capacity = u64_at(area, H_CAPACITY) as usize;
    if !capacity.is_power_of_two() || capacity < 64 {
        return Err(keep_aside(
            &path,
            format!("damaged: ring capacity {capacity}"),
        ));
    }
    let (dictionary, (out_body, mut used), mut rings) = regions(area, capacity);
    if u64_at(area, H_COMMIT) == 1 {
        // Killed mid-commit: its record says where OUT and the ring stand
        // once it is done (see `Area::stage`).
        used = u64_at(area, H_COMMIT_OUT) as usize;
        let slot = u64_at(area, H_COMMIT_SLOT);
        if let Some(r) = rings.iter_mut().find(|r| r.offset as u64 == slot) {
            r.head = u64_at(area, H_COMMIT_HEAD);
            r.head_ctx = u64_at(area, H_COMMIT_CTX);
        }
    }

    let mut log_file = open_log(log).map_err(|e| fail(e.to_string()))?;
    let mut rec_state = u64_at(area, H_REC);
    let identity = crate::writer::file_identity(&log_file);
    if rec_state != 0 && (u64_at(area, H_REC_DEV), u64_at(area, H_REC_INO)) != identity {
        // The log was replaced since the recovery began: begin again.
        rec_state = 0;
    }
    let (whole, at) = if rec_state == 0 {
        let under_way = u64_at(area, H_WRITE) == 1
            && (u64_at(area, H_WRITE_DEV), u64_at(area, H_WRITE_INO)) == identity;
        let (write_at, len) = (u64_at(area, H_WRITE_AT), file_len(&log_file));
        let whole = under_way && len >= write_at + u64_at(area, H_WRITE_LEN);
        // A write the kill cut short goes whole, from where it began: the
        // entries of it that did reach the file are among the records the
        // rings hold from their heads (kept, they would be there twice).
        // Otherwise from the last whole entry (a torn checkpoint after a
        // whole write, or nothing torn).
        let at = if under_way && !whole {
            write_at.min(len)
        } else {
            last_whole_entry(&log_file).map_err(|e| fail(e.to_string()))?
        };
        let mut h = Vec::new();
        h.extend_from_slice(&u64::from(whole).to_le_bytes());
        h.extend_from_slice(&identity.0.to_le_bytes());
        h.extend_from_slice(&identity.1.to_le_bytes());
        h.extend_from_slice(&at.to_le_bytes());
        file.write_all_at(&h, H_REC_WHOLE as u64)
            .and_then(|()| file.write_all_at(&REC_JUDGED.to_le_bytes(), H_REC as u64))
            .and_then(|()| file.sync_data())
            .map_err(|e| fail(e.to_string()))?;
        (whole, at)
    } else {
        (u64_at(area, H_REC_WHOLE) == 1, u64_at(area, H_REC_AT))
    };

    if rec_state == REC_WRITING {
        let want = u64_at(area, H_REC_AT) + u64_at(area, H_REC_LEN);
        if file_len(&log_file) >= want {
            // Killed after its bytes were in the log: they count once.
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
    }

    let sites = parse_sites(&dictionary);
    let mut out = Vec::new();
    let mut summary = Recovery {
        pid,
        log: log.to_path_buf(),
        ..Recovery::default()
    };
    for entry in &dictionary {
        out.extend_from_slice(entry);
    }
    for r in &rings {
        put_entry(&mut out, tag::THREAD, |b| {
            dict::put_thread(b, r.thread, &r.name)
        });
    }
    let seq = u64_at(area, H_CLOCK_SEQ);
    if seq > 0 {
        let at = H_PAIRS + 16 * (seq % 2) as usize;
        dict::put_clock_entry(&mut out, u64_at(area, at), u64_at(area, at + 8) as i64);
    }
    // The same boot's counter runs on across processes: a pair read now
    // maps the rings' last ticks as well as the dead process's own did.
    let hardware = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
    let hz = f64::from_bits(u64_at(area, H_HZ));
    if hardware
        && boot_id()[..] == area[H_BOOT..H_BOOT + BOOT_LEN]
        && boot_id()[0] != 0
        && (hz - crate::clock::ticks_per_second()).abs() < hz * 1e-3
    {
        let (tick, ns) = crate::clock::pair();
        dict::put_clock_entry(&mut out, tick, ns);
    }
    let head_len = out.len();
    if !whole {
        // What the flusher took from the rings and compacted, which no
        // whole write carried.
        let staged = &out_body[..used.min(out_body.len())];
        staged_records(staged, &sites, &mut out, &mut summary);
    }
    for r in &rings {
        let (start, ctx) = (r.head, r.head_ctx);
        let bytes = &area[r.offset + PAGE..r.offset + PAGE + capacity];
        if start > r.tail || r.tail - start > capacity as u64 {
            // Positions no ring can have: its bytes are not trusted.
            summary.unreadable += 1;
            continue;
        }
        if start < r.tail {
            summary.rings += 1;
        }
        ring_records(
            bytes,
            start,
            r.tail,
            r.thread,
            ctx,
            &sites,
            &mut out,
            &mut summary,
        );
        let (count, first, last) = r.drops;
        if count > 0 {
            summary.dropped += count;
            put_entry(&mut out, tag::DROP, |o| {
                dict::put_drop(o, r.thread, count, first, last)
            });
        }
    }
    if out.len() == head_len {
        // Nothing was left in the rings: every record is in the log.
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    file.write_all_at(&(out.len() as u64).to_le_bytes(), H_REC_LEN as u64)
        .and_then(|()| file.write_all_at(&REC_WRITING.to_le_bytes(), H_REC as u64))
        .and_then(|()| file.sync_data())
        .map_err(|e| fail(e.to_string()))?;
    log_file
        .set_len(at)
        .and_then(|()| log_file.write_all_at(&out, at))
        .and_then(|()| log_file.sync_data())
        .map_err(|e| fail(format!("cannot write into {}: {e}", log.display())))?;
    drop(map);
    let _ = std::fs::remove_file(&path);
    let _ = &mut log_file;
    Ok(Some(summary))
}

/// Moves an area this build cannot read out of the way, so the logger
/// starts (and the next start does not meet it again).
fn keep_aside(path: &Path, reason: String) -> RecoverError {
    let kept = crate::crash::kept_path(path);
    let kept_as = std::fs::rename(path, &kept).ok().map(|()| kept);
    RecoverError {
        path: path.to_path_buf(),
        reason,
        kept_as,
    }
}

/// OUT's region: its body, and how many bytes of it are used.
type Staged<'a> = (&'a [u8], usize);

/// The dictionary's entries, OUT's region and the rings in use, by a walk
/// of the regions.
fn regions(area: &[u8], capacity: usize) -> (Vec<&[u8]>, Staged<'_>, Vec<RingRegion>) {
    let (mut entries, mut rings) = (Vec::new(), Vec::new());
    let mut staged: Staged<'_> = (&[], 0);
    let mut at = PAGE;
    while at + PAGE <= area.len() {
        let kind = u32_at(area, at + R_KIND);
        let len = u64_at(area, at + R_LEN) as usize;
        if len < PAGE || !len.is_multiple_of(PAGE) || at + len > area.len() {
            break;
        }
        let page = &area[at..at + PAGE];
        if kind == KIND_OUT {
            staged = (&area[at + PAGE..at + len], u64_at(page, D_USED) as usize);
        } else if kind == KIND_DICT {
            let used = (u64_at(page, D_USED) as usize).min(len - PAGE);
            let body = &area[at + PAGE..at + PAGE + used];
            let mut e = Entries::new(body, 0);
            for (start, _, b) in e.by_ref() {
                entries.push(&body[start - wire::FRAME_LEN..start + b.len()]);
            }
        } else if kind == KIND_RING {
            if len == PAGE + capacity && u32_at(page, R_STATE) == RING_IN_USE {
                let n = (u32_at(page, R_NAME_LEN) as usize).min(NAME_MAX);
                rings.push(RingRegion {
                    offset: at,
                    thread: u32_at(page, R_THREAD),
                    name: String::from_utf8_lossy(&page[R_NAME..R_NAME + n]).into_owned(),
                    head: u64_at(page, R_HEAD),
                    head_ctx: u64_at(page, R_HEAD_CTX),
                    tail: u64_at(page, R_TAIL),
                    drops: (
                        u64_at(page, R_DROPS),
                        u64_at(page, R_DROPS_FIRST),
                        u64_at(page, R_DROPS_LAST),
                    ),
                });
            }
        } else {
            break;
        }
        at += len;
    }
    (entries, staged, rings)
}

/// OUT's entries (`staged`: the records the flusher compacted, with the
/// dictionary entries they need) as recovered ones: each record in the
/// recovered contexts (in no span, or in spans whose definitions went with
/// the process: `<spans lost>`), every other entry as it is.
fn staged_records(
    staged: &[u8],
    sites: &HashMap<u32, SiteInfo>,
    out: &mut Vec<u8>,
    summary: &mut Recovery,
) {
    for (start, t, body) in Entries::new(staged, 0) {
        if t != tag::EXTENT {
            out.extend_from_slice(&staged[start - wire::FRAME_LEN..start + body.len()]);
            continue;
        }
        let (Some(thread), Some((tick, mut pos))) = wire::extent::get_header(body) else {
            summary.unreadable += 1;
            continue;
        };
        let e = begin_entry(out, tag::EXTENT);
        wire::extent::put_header(out, thread, tick);
        // The context the records are in (the file's id), and the one the
        // recovered extent last said.
        let (mut ctx, mut said) = (0i64, 0u32);
        while pos < body.len() {
            let Some(v) = wire::get_varint(body, &mut pos) else {
                summary.unreadable += 1;
                break;
            };
            if v == u64::from(wire::CONTEXT_SWITCH) {
                let Some(d) = wire::get_varint(body, &mut pos) else {
                    summary.unreadable += 1;
                    break;
                };
                ctx = ctx.saturating_add(wire::unzigzag(d));
                continue;
            }
            let from = pos;
            let args = wire::get_varint(body, &mut pos).and_then(|_| {
                let info = sites.get(&u32::try_from(v).ok()?)?;
                wire::record::skip_args(
                    &info.kinds,
                    body,
                    &mut pos,
                    &wire::record::Strings::of_version(wire::VERSION),
                )
            });
            if args.is_none() {
                // Damage, or a site the area does not know: the rest of
                // the extent cannot be told apart.
                summary.unreadable += 1;
                break;
            }
            let want = if ctx == 0 {
                wire::RECOVERED_CONTEXT
            } else {
                wire::RECOVERED_LOST_CONTEXT
            };
            if want != said {
                put_varint(out, u64::from(wire::CONTEXT_SWITCH));
                put_varint(out, wire::zigzag(i64::from(want) - i64::from(said)));
                said = want;
            }
            put_varint(out, v);
            out.extend_from_slice(&body[from..pos]);
            summary.records += 1;
        }
        end_entry(out, e);
    }
}

/// What a recovered record needs of its site.
struct SiteInfo {
    kinds: Vec<ArgKind>,
    role: Role,
}

fn parse_sites(entries: &[&[u8]]) -> HashMap<u32, SiteInfo> {
    let mut sites = HashMap::new();
    for (_, t, body) in entries.iter().flat_map(|e| Entries::new(e, 0)) {
        if t != tag::SITE {
            continue;
        }
        if let Some(s) = dict::get_site(body) {
            sites.insert(
                s.id,
                SiteInfo {
                    kinds: s.kinds,
                    role: s.role,
                },
            );
        }
    }
    sites
}

/// The extent being filled with one ring's records.
struct Extent {
    start: usize,
    prev_tick: u64,
    ctx: u32,
}

/// Appends the records of a ring's bytes from `start` to `tail` (its
/// thread's span context at `start` is `ctx`) to `out`, as EXTENT and DROP
/// entries.
#[allow(clippy::too_many_arguments)]
fn ring_records(
    bytes: &[u8],
    start: u64,
    tail: u64,
    thread: u32,
    mut ctx: u64,
    sites: &HashMap<u32, SiteInfo>,
    out: &mut Vec<u8>,
    summary: &mut Recovery,
) {
    let cap = bytes.len();
    let mut pos = start;
    let mut open: Option<Extent> = None;
    let close = |out: &mut Vec<u8>, open: &mut Option<Extent>| {
        if let Some(e) = open.take() {
            end_entry(out, e.start);
        }
    };
    while pos < tail {
        let off = pos as usize & (cap - 1);
        let left = ((tail - pos) as usize).min(cap - off);
        let b = &bytes[off..off + left];
        if b.len() >= 4 && b[..4] == ring::PAD.to_le_bytes() {
            pos += (cap - off) as u64;
            continue;
        }
        let Some((site, len, tick)) = ring::parse_header(b) else {
            summary.unreadable += 1;
            break;
        };
        if len < ring::HEADER || len > b.len() || !len.is_multiple_of(ring::ALIGN) {
            // Damage: the rest of this ring cannot be told apart.
            summary.unreadable += 1;
            break;
        }
        let mut args = &b[ring::HEADER..len];
        pos += len as u64;
        if site == ring::DROPS {
            let d = DropMarker::parse(args);
            summary.dropped += d.count;
            close(out, &mut open);
            put_entry(out, tag::DROP, |o| {
                dict::put_drop(o, thread, d.count, d.first, d.last)
            });
            continue;
        }
        let mut id = site;
        if site & ring::WITH_CONTEXT != 0 {
            id &= !ring::WITH_CONTEXT;
            let Some((key, rest)) = args.split_first_chunk::<8>() else {
                summary.unreadable += 1;
                continue;
            };
            ctx = u64::from_le_bytes(*key);
            args = rest;
        }
        let Some(info) = sites.get(&id) else {
            unreadable(out, &mut open, thread, tick, summary);
            continue;
        };
        let word = |i: usize| {
            args.get(i * 8..i * 8 + 8)
                .and_then(|w| w.try_into().ok())
                .map(u64::from_le_bytes)
        };
        match info.role {
            Role::Record => {}
            // A span entered: the records after it are in a span whose
            // definition went with the process.
            Role::Span => {
                ctx = u64::MAX;
                continue;
            }
            // A switch (the span current now), or an exit (the span
            // exited, the span current again).
            _ => {
                ctx = match (word(0), word(1)) {
                    (Some(_), Some(now)) => now,
                    (Some(now), None) => now,
                    _ => ctx,
                };
                continue;
            }
        }
        let e = open.get_or_insert_with(|| {
            let start = begin_entry(out, tag::EXTENT);
            wire::extent::put_header(out, thread, tick);
            Extent {
                start,
                prev_tick: tick,
                ctx: 0,
            }
        });
        let want = if ctx == 0 {
            wire::RECOVERED_CONTEXT
        } else {
            wire::RECOVERED_LOST_CONTEXT
        };
        let rollback = out.len();
        if want != e.ctx {
            put_varint(out, u64::from(wire::CONTEXT_SWITCH));
            put_varint(out, wire::zigzag(i64::from(want) - i64::from(e.ctx)));
        }
        let delta = tick.saturating_sub(e.prev_tick);
        put_varint(out, u64::from(id));
        put_varint(out, delta);
        if wire::record::compact(&info.kinds, args, out).is_none() {
            out.truncate(rollback);
            unreadable(out, &mut open, thread, tick, summary);
            continue;
        }
        e.prev_tick += delta;
        e.ctx = want;
        summary.records += 1;
        if out.len() - e.start > EXTENT_MAX {
            close(out, &mut open);
        }
    }
    close(out, &mut open);
}

/// A record whose bytes do not read (its site unknown, its arguments not
/// its site's): a one-record gap, as the flusher reports one.
fn unreadable(
    out: &mut Vec<u8>,
    open: &mut Option<Extent>,
    thread: u32,
    tick: u64,
    summary: &mut Recovery,
) {
    if let Some(e) = open.take() {
        end_entry(out, e.start);
    }
    summary.unreadable += 1;
    put_entry(out, tag::DROP, |o| dict::put_drop(o, thread, 1, tick, tick));
}

/// The log at `log`, opened for positioned writes; a fresh file with a
/// header if there is none (the records go into the set all the same).
fn open_log(log: &Path) -> io::Result<File> {
    // (A few hundred bytes read: the log may be gigabytes.)
    let usable = crate::set::read_start(log);
    if usable.is_none() {
        let seq = crate::set::next_seq(log);
        let before = crate::set::records_through_last(log);
        if std::fs::metadata(log).is_ok_and(|m| m.len() > 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a nanolog log", log.display()),
            ));
        }
        drop(crate::writer::open(
            log,
            seq,
            &crate::writer::host_name(),
            before,
        )?);
    }
    std::fs::OpenOptions::new().read(true).write(true).open(log)
}

fn file_len(f: &File) -> u64 {
    f.metadata().map_or(0, |m| m.len())
}

/// Where the log's bytes to keep end: after its last whole entry when a
/// torn one follows it (a process killed in a write), which the
/// recovery's bytes replace; at its end when damage follows instead (the
/// entries after damage are kept, and readers step over it).
fn last_whole_entry(f: &File) -> io::Result<u64> {
    // SAFETY: the log's writer is dead (the caller holds its lock); a
    // change by another program only makes the walk stop early.
    let map = unsafe { memmap2::Mmap::map(f)? };
    let mut pos = wire::HEADER_LEN.min(map.len());
    loop {
        match frame_at(&map, pos) {
            Frame::Ok { body, .. } => pos += wire::FRAME_LEN + body.len(),
            Frame::Truncated => return Ok(pos as u64),
            Frame::Bad => return Ok(map.len() as u64),
        }
    }
}
