//! The inputs of a command: the paths given expanded as a shell would,
//! the files opened (every one, or one at a time with their warnings),
//! their threads and the names `--thread` gives, and whether a file's
//! writer still runs.

use nanolog_runtime::reader::{LogFile, SiteEntry, Want};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The paths given, with each one that does not exist and holds `*`, `?`
/// or `[` expanded as the shell would (the shell passes a pattern that
/// matched nothing as it is: `app.*Z.nlog` before the first roll). A
/// pattern that matches nothing is skipped with one warning line.
pub(crate) fn expand(files: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    expand_saying(files, true)
}

/// [`expand`], saying nothing of a pattern that matches nothing (for a
/// look at the inputs before they are read, which says it).
pub(crate) fn expand_quietly(files: &[PathBuf]) -> Vec<PathBuf> {
    expand_saying(files, false).unwrap_or_default()
}

fn expand_saying(files: &[PathBuf], say: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let text = f.to_string_lossy();
        if f.exists() || !text.contains(['*', '?', '[']) {
            out.push(f.clone());
            continue;
        }
        let matched: Vec<PathBuf> = glob::glob(&text)
            .map_err(|e| anyhow::anyhow!("{text}: not a valid pattern: {e}"))?
            .filter_map(Result::ok)
            .collect();
        if matched.is_empty() && say {
            let _ = writeln!(
                io::stderr(),
                "nanolog: warning: {text}: no file matches; skipped"
            );
        }
        out.extend(matched);
    }
    if out.is_empty() {
        anyhow::bail!("no log file to read");
    }
    let out = each_once(out, say);
    if say {
        warn_of_holes(&out);
    }
    Ok(out)
}

/// `paths` with a file named twice (`app*.nlog app.nlog`, or through a
/// link) kept at its first naming only: read twice, each of its records
/// would be printed and counted twice. Told apart by device and inode
/// where the system has them, else by the canonical path; one warning a
/// file named again, when `say`.
fn each_once(paths: Vec<PathBuf>, say: bool) -> Vec<PathBuf> {
    let mut seen: Vec<(FileId, usize)> = Vec::with_capacity(paths.len());
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        // (What cannot be looked at is kept: its reading says why.)
        let Some(id) = file_id(&p) else {
            out.push(p);
            continue;
        };
        if let Some(&(_, first)) = seen.iter().find(|(s, _)| *s == id) {
            if say {
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: warning: {} is {}, named already: read once",
                    p.display(),
                    if p == out[first] {
                        "named twice".to_owned()
                    } else {
                        format!("the same file as {}", out[first].display())
                    }
                );
            }
            continue;
        }
        seen.push((id, out.len()));
        out.push(p);
    }
    out
}

/// What tells a file apart from every other on this system.
#[cfg(unix)]
type FileId = (u64, u64);
#[cfg(not(unix))]
type FileId = PathBuf;

#[cfg(unix)]
fn file_id(p: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(p: &Path) -> Option<FileId> {
    std::fs::canonicalize(p).ok()
}

/// Says which files of a numbered set are missing between the ones named
/// (`app.0000000003.<UTC>Z.nlog` and `app.0000000005.<UTC>Z.nlog` without
/// number 4): retention removes a set's oldest files, never one in the
/// middle, so a hole is a file deleted or moved by hand, or left out of the
/// command line, and what it held is in no answer.
fn warn_of_holes(paths: &[PathBuf]) {
    let mut sets: std::collections::BTreeMap<(PathBuf, String), Vec<u64>> = Default::default();
    for p in paths {
        let Some((set, seq)) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(numbered_name)
        else {
            continue;
        };
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        sets.entry((dir, set)).or_default().push(seq);
    }
    for ((dir, set), mut seqs) in sets {
        seqs.sort_unstable();
        seqs.dedup();
        for w in seqs.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b - a < 2 {
                continue;
            }
            let which = if b - a == 2 {
                format!("file number {}", a + 1)
            } else {
                format!("files number {} to {}", a + 1, b - 1)
            };
            let _ = writeln!(
                io::stderr(),
                "nanolog: warning: {}: {which} of the set, between the inputs numbered {a} and {b}, {} not among the inputs (removed, or not named): what {} held is not read",
                dir.join(&set).display(),
                if b - a == 2 { "is" } else { "are" },
                if b - a == 2 { "it" } else { "they" },
            );
        }
    }
}

/// The set (its live file's name) and number of a finished file's name of
/// the form `app.<number>.<UTC start>Z.nlog` (`app.0000000042.20261123T153100.123456789Z.nlog`,
/// the extension optional), as writers name them.
fn numbered_name(name: &str) -> Option<(String, u64)> {
    let mut parts: Vec<&str> = name.split('.').collect();
    let ext = match parts.last() {
        Some(l) if !l.ends_with('Z') => parts.pop(),
        _ => None,
    };
    let nanos = parts.pop()?.strip_suffix('Z')?;
    let date = parts.pop()?;
    let seq = parts.pop()?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let stamp = date.len() == 15
        && date.is_ascii()
        && date.as_bytes()[8] == b'T'
        && digits(&date[..8], 8)
        && digits(&date[9..], 6)
        && digits(nanos, 9);
    if !stamp || seq.len() < 10 || !seq.bytes().all(|b| b.is_ascii_digit()) || parts.is_empty() {
        return None;
    }
    let mut set = parts.join(".");
    if let Some(ext) = ext {
        set.push('.');
        set.push_str(ext);
    }
    Some((set, seq.parse().ok()?))
}

/// Every thread of `files`.
pub(crate) fn threads_of(
    files: &[nanolog_runtime::reader::LogFile],
) -> Vec<nanolog_runtime::reader::ThreadInfo> {
    files.iter().flat_map(|f| f.threads()).collect()
}

/// The thread ids `--thread` selects, in every file: the values that are
/// ids. `None` when no `--thread` was given, or only names (see
/// [`thread_names`]; a name is each file's own: a thread's id is its run's).
pub(crate) fn thread_ids(args: &[String]) -> Option<Vec<u32>> {
    let ids: Vec<u32> = args.iter().filter_map(|a| a.parse().ok()).collect();
    (!ids.is_empty()).then_some(ids)
}

/// The thread names `--thread` selects: the values that are not ids.
/// `None` when there are none.
pub(crate) fn thread_names(args: &[String]) -> Option<Vec<String>> {
    let names: Vec<String> = args
        .iter()
        .filter(|a| a.parse::<u32>().is_err())
        .cloned()
        .collect();
    (!names.is_empty()).then_some(names)
}

/// Says on stderr which `--thread` values name no thread among `threads` (a
/// typo, or a thread of another log): the output would be empty without a
/// word otherwise.
pub(crate) fn warn_unknown_threads(
    args: &[String],
    threads: &[nanolog_runtime::reader::ThreadInfo],
) {
    for a in args {
        let known = threads.iter().any(|t| match a.parse::<u32>() {
            Ok(id) => t.id == id,
            Err(_) => t.name == *a,
        });
        if !known {
            let mut names: Vec<String> = threads
                .iter()
                .map(|t| {
                    if t.name.is_empty() {
                        t.id.to_string()
                    } else {
                        format!("{}:{}", t.name, t.id)
                    }
                })
                .collect();
            names.sort_unstable();
            names.dedup();
            let _ =
                writeln!(
                io::stderr(),
                "nanolog: warning: --thread {a}: no thread of the input has that {} (threads: {})",
                if a.parse::<u32>().is_ok() { "id" } else { "name" },
                if names.is_empty() { "none".to_owned() } else { names.join(", ") }
            );
        }
    }
}

/// Opens every file (patterns expanded, see [`expand`]), printing each
/// file's warnings (torn tail, skipped corruption) to stderr.
pub(crate) fn open_all(
    files: &[PathBuf],
    warn: bool,
) -> anyhow::Result<Vec<nanolog_runtime::reader::LogFile>> {
    open_expanded(&expand(files)?, warn)
}

/// [`open_all`] of paths already expanded.
pub(crate) fn open_expanded(
    files: &[PathBuf],
    warn: bool,
) -> anyhow::Result<Vec<nanolog_runtime::reader::LogFile>> {
    let mut out = Vec::new();
    open_each(files, warn, |log| {
        out.push(log);
        Ok(())
    })?;
    Ok(out)
}

/// Opens each of the (expanded) paths `files` in turn and gives it to
/// `each`, as [`open_all`] takes them: what is not a log is skipped with a
/// warning among several inputs and is the error of a single one; the
/// file's warnings are said when `warn`. An error when none was a log.
pub(crate) fn open_each(
    files: &[PathBuf],
    warn: bool,
    mut each: impl FnMut(nanolog_runtime::reader::LogFile) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    open_each_in(
        files,
        warn,
        &mut (),
        |(), path| open_log(path),
        |(), log| each(log),
    )
}

/// [`open_each`] with the file opened by `open` (which may read it as it
/// is indexed: see `LogFile::open_streamed`), `state` lent to `open` and
/// then to `each`.
pub(crate) fn open_each_in<S>(
    files: &[PathBuf],
    warn: bool,
    state: &mut S,
    mut open: impl FnMut(
        &mut S,
        &Path,
    )
        -> Result<nanolog_runtime::reader::LogFile, nanolog_runtime::reader::ReadError>,
    mut each: impl FnMut(&mut S, nanolog_runtime::reader::LogFile) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let several = files.len() > 1;
    let mut opened = 0usize;
    let mut first_err = None;
    for f in files {
        // A writer's lock file, or a roll's or a cursor's file in the
        // making, matched by a pattern such as `logs/*`: not a log, and
        // not worth a word.
        if several && is_set_companion(f) {
            continue;
        }
        // Checked before opening: opening a FIFO waits for a writer.
        let log = match std::fs::metadata(f) {
            Ok(m) if m.is_dir() => Err(anyhow::anyhow!("{}: a directory, not a log", f.display())),
            Ok(m) if !m.is_file() => Err(anyhow::anyhow!(
                "{}: not a regular file (a FIFO, socket or device): not read",
                f.display()
            )),
            _ => open(state, f).map_err(anyhow::Error::from),
        };
        let log = match log {
            Ok(l) => l,
            // One input: its error is the command's (README "The `nanolog` command").
            Err(e) if !several => return Err(e),
            // Among several: a warning each, the rest read.
            Err(e) => {
                let _ = writeln!(io::stderr(), "nanolog: warning: {e}; skipped");
                first_err.get_or_insert(e);
                continue;
            }
        };
        if warn {
            tell_warnings(&log);
        }
        opened += 1;
        each(state, log)?;
    }
    if opened == 0 {
        return Err(match first_err {
            Some(e) => e.context(format!(
                "none of the {} files is a nanolog log",
                files.len()
            )),
            None => anyhow::anyhow!("no log file to read"),
        });
    }
    Ok(())
}

/// Says `log`'s warnings on stderr, as [`open_each`] does when asked to.
pub(crate) fn tell_warnings(log: &nanolog_runtime::reader::LogFile) {
    // A log its writer is appending to: its last entry may be half
    // written. The reader takes the entries before it (it never searches
    // inside a block cut short), and that end is the write in progress,
    // not damage: nothing is said of it.
    let live = !log.is_complete() && writer_alive(log.path(), log.header().pid) == Some(true);
    for w in log.warnings() {
        if live && matches!(w, nanolog_runtime::reader::Warning::TornTail { .. }) {
            continue;
        }
        let _ = writeln!(io::stderr(), "nanolog: warning: {w}");
    }
    warn_if_cut(log);
}

/// Whether the process `pid`, which wrote the file at `path`, still runs
/// and holds its lock (`PATH.lock` names it); `None` where this system
/// cannot say (no `/proc`). The lock file is only read: a lock taken to
/// test it could refuse a writer starting at that moment.
pub(crate) fn writer_alive(path: &std::path::Path, pid: u32) -> Option<bool> {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return None;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let holder = std::fs::read_to_string(path.with_file_name(name))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    Some(holder == Some(pid) && process_runs(proc, pid))
}

/// Whether the process `pid` exists and has not died: a zombie (killed
/// and not yet reaped by its parent, state `Z` in `/proc/PID/stat`) or one
/// being torn down (`X`) writes nothing more, though its pid is still
/// listed.
fn process_runs(proc: &std::path::Path, pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")) else {
        return false;
    };
    // `PID (COMM) STATE ...`: the command may hold spaces and parentheses,
    // so the state is the first field after the last `)`.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x"))
}

/// Says when `log` ends on a whole entry without its writer's END, and no
/// writer holds it: the writer was killed, or the file was cut there. (A
/// cut inside an entry is a torn tail, which the reader says.) Said only
/// where the system tells whether a writer runs (Linux's `/proc`).
fn warn_if_cut(log: &nanolog_runtime::reader::LogFile) {
    use nanolog_runtime::reader::Warning;
    if log.is_complete()
        || log
            .warnings()
            .iter()
            .any(|w| matches!(w, Warning::TornTail { .. }))
        // (Where it cannot be told whether a writer holds it, nothing is
        // said: it may be live.)
        || writer_alive(log.path(), log.header().pid) != Some(false)
    {
        return;
    }
    let _ = writeln!(
        io::stderr(),
        "nanolog: warning: {}: no END entry after byte {} (its last whole entry), and no writer holds it: its writer was killed, or the file was cut there; what was logged after that is not in it",
        log.path().display(),
        log.valid_len()
    );
}

/// Whether `f` is one of the files a writer or a follower keeps beside a
/// log: `app.nlog.lock`, `app.nlog.next` (a roll under way), a cursor's
/// `.tmp` (checked by its name and by the log it sits beside), the rings
/// of a crash-safe writer, `app.nlog.rings` (and one kept aside,
/// `app.nlog.rings.kept-<time>`, named so by the writer only).
fn is_set_companion(f: &Path) -> bool {
    let name = f
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    if name.contains(".rings.kept-") {
        return true;
    }
    ["lock", "next", "tmp", "rings"].iter().any(|ext| {
        name.strip_suffix(ext)
            .and_then(|n| n.strip_suffix('.'))
            .is_some_and(|log| f.with_file_name(log).exists() || *ext == "lock" || *ext == "rings")
    })
}

/// What this run wants of its inputs' records (a `decode` or `export` with
/// a time window or a level, a `decode -n`), set once before the inputs are
/// opened.
static WANT: std::sync::OnceLock<(Want, PerFile)> = std::sync::OnceLock::new();

/// Whether a call site's records may be wanted.
pub(crate) type SiteTest = Box<dyn Fn(&SiteEntry) -> bool + Send + Sync>;

/// What a run wants of its inputs that each file names in its own way:
/// looked up in each file's dictionary, read first, its records left out.
#[derive(Default)]
pub(crate) struct PerFile {
    /// Threads of these names (`--thread NAME`): their ids there are added
    /// to the want's `threads`.
    pub(crate) thread_names: Option<Vec<String>>,
    /// One trace's records (`--trace`): the contexts of that trace there
    /// are the want's `contexts` (a finished file's only: a live one may
    /// define more of them by the time its records are read).
    pub(crate) trace: Option<[u8; 16]>,
    /// Records of the call sites this says may match (`--grep`: see
    /// `grep.rs`): the ids of those there are the want's `sites`, when it
    /// refuses some (a finished file's only, as `trace`).
    pub(crate) sites: Option<SiteTest>,
}

/// Says what this run wants of its inputs' records: the files are then
/// opened with the writes their index says hold none of them left out
/// (`LogFile::open_for`), and what each file names in its own way looked up
/// in it first (`per_file`). The readers filter as before; this only saves
/// them work.
pub(crate) fn want(w: Want, per_file: PerFile) {
    let _ = WANT.set((w, per_file));
}

/// Opens a log as this run reads its inputs: whole, or leaving out what
/// [`want`] said it does not want.
pub(crate) fn open_log(path: &Path) -> Result<LogFile, nanolog_runtime::reader::ReadError> {
    let Some((w, per_file)) = WANT.get() else {
        return LogFile::open(path);
    };
    if per_file.thread_names.is_none() && per_file.trace.is_none() && per_file.sites.is_none() {
        return if w.all() {
            LogFile::open(path)
        } else {
            LogFile::open_for(path, w)
        };
    }
    // The file's dictionary, its records left out (a walk of its frames, as
    // `info` reads it). A live file may name another thread of those names
    // by the time it is read: then read again with its id too (a few times
    // at most, then whole).
    let names = per_file.thread_names.as_deref().unwrap_or_default();
    let named = |t: &nanolog_runtime::reader::ThreadInfo| names.contains(&t.name);
    let mut known = LogFile::open_for(path, &Want::nothing())?;
    for _ in 0..3 {
        let mut want = w.clone();
        let mut ids = w.threads.clone().unwrap_or_default();
        if per_file.thread_names.is_some() {
            ids.extend(known.threads().filter(named).map(|t| t.id));
            want.threads = Some(ids.clone());
        }
        if let Some(trace) = per_file.trace.filter(|_| known.is_complete()) {
            want.contexts = Some(known.contexts_in_trace(trace));
        }
        if let Some(may) = per_file.sites.as_ref().filter(|_| known.is_complete()) {
            let (ids, all) = known.sites().fold((Vec::new(), 0), |(mut ids, n), s| {
                if may(s) {
                    ids.push(s.id);
                }
                (ids, n + 1)
            });
            if ids.len() < all {
                want.sites = Some(ids);
            }
        }
        let log = if want.all() {
            LogFile::open(path)?
        } else {
            LogFile::open_for(path, &want)?
        };
        if log.threads().filter(named).all(|t| ids.contains(&t.id)) {
            return Ok(log);
        }
        known = log;
    }
    LogFile::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_files_name_says_its_set_and_number() {
        assert_eq!(
            numbered_name("app.0000000042.20261123T153100.123456789Z.nlog"),
            Some(("app.nlog".to_owned(), 42))
        );
        assert_eq!(
            numbered_name("my.app.0000000007.20261123T153100.123456789Z"),
            Some(("my.app".to_owned(), 7))
        );
        // The live file, a writer's older name (no number), other files.
        for name in [
            "app.nlog",
            "app.20261123T153100.123456789Z.nlog",
            "0000000042.20261123T153100.123456789Z.nlog",
            "app.42.20261123T153100.123456789Z.nlog",
            "app.0000000042.2026112éT15310.123456789Z.nlog",
            "",
        ] {
            assert_eq!(numbered_name(name), None, "{name}");
        }
    }

    #[test]
    fn a_file_named_twice_or_through_a_link_is_kept_once_in_its_first_place() {
        let dir = std::env::temp_dir().join(format!("nanolog-once-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.nlog"), dir.join("b.nlog"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let mut named = vec![a.clone(), b.clone(), a.clone()];
        #[cfg(unix)]
        {
            let link = dir.join("link.nlog");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&b, &link).unwrap();
            named.push(link);
        }
        let missing = dir.join("missing.nlog");
        named.push(missing.clone());
        assert_eq!(each_once(named, false), vec![a, b, missing]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
