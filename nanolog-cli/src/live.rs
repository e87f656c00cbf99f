//! The live edge of a followed set, which `decode -f` and `ship` share: how
//! far a follower takes a file now, and the clock it reads those records
//! by, so that a record printed or shipped live has the time `decode` of
//! the finished set gives it, to the nanosecond.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanolog_runtime::reader::{LogFile, SetListing, TimeMap};

/// How long records at the live edge wait for the writer's next clock pair
/// (it writes one at least every second while it runs) before the follower
/// asks whether the writer still runs: while it does, they wait on; once
/// it is gone (killed, or the file cut), or where that cannot be told,
/// they go with extrapolated times.
pub(crate) const HOLD: Duration = Duration::from_secs(2);

/// A follower's view of its set's clocks and of the live file's edge.
pub(crate) struct LiveEdge {
    /// The set's path (a link resolved: the set is beside its target).
    base: PathBuf,
    /// Since when records at the live edge wait for a clock pair, and the
    /// byte the last pair ended at then: a later pair restarts the wait.
    held_since: Option<(Instant, usize)>,
    /// The set's finished files as last listed.
    listing: SetListing,
    /// The clocks of the finished files the last file's clock took, by
    /// path (None: not a log).
    peers: HashMap<PathBuf, Option<Arc<Peer>>>,
    /// The file (path, start) the listing was last made again for.
    listed_for: Option<(PathBuf, i64)>,
}

impl LiveEdge {
    pub(crate) fn new(base: &Path) -> LiveEdge {
        let base = nanolog_runtime::reader::resolve_log_path(base);
        LiveEdge {
            listing: SetListing::new(&base),
            base,
            held_since: None,
            peers: HashMap::new(),
            listed_for: None,
        }
    }

    /// Whether records at the live edge are being held for a clock pair.
    #[cfg(feature = "ship")]
    pub(crate) fn holding(&self) -> bool {
        self.held_since.is_some()
    }

    /// How far `log` is taken now: all of it, except for the live file of
    /// a running writer, whose records after its last clock pair wait for
    /// the next pair: their times are then the ones `decode` of the
    /// finished set prints, never an extrapolation a later pair would
    /// change. A busy writer always has records past its last pair: each
    /// new pair lets go of those before it and restarts the wait. Only a
    /// writer that wrote no pair for [`HOLD`] and no longer runs (or whose
    /// state this system cannot tell) has its last records taken with
    /// extrapolated times.
    pub(crate) fn edge(&mut self, log: &LogFile) -> usize {
        let all = log.valid_len();
        let live = !log.is_complete() && log.path() == self.base;
        let clock_end = log.clock_end().min(all);
        if !live || clock_end >= all {
            self.held_since = None;
            return all;
        }
        let since = match self.held_since {
            Some((since, at)) if at == clock_end => since,
            // A new pair (or a new file): the wait starts again.
            _ => {
                let now = Instant::now();
                self.held_since = Some((now, clock_end));
                now
            }
        };
        if since.elapsed() >= HOLD
            && crate::inputs::writer_alive(log.path(), log.header().pid) != Some(true)
        {
            // No pair came and the writer is gone (killed, or stopped
            // without ending the file): what is there goes, its times
            // extrapolated.
            self.held_since = None;
            return all;
        }
        clock_end
    }

    /// The clock `log` is read by from byte `from` on, as `decode` of the
    /// whole set reads it (the union of the clock pairs of the set's files
    /// of the same process): the file's own pairs, and those of the
    /// writer's earlier files back to one with a pair at or before the
    /// earliest tick to take (a thread's ring can hold records from several
    /// rolls back). Later files add nothing: a finished file ends with a
    /// pair after its last record, and a later file's pairs are all later.
    /// The writer says each pair's time as the union makes it (never
    /// earlier than one it said before), so the pairs left out change none
    /// of these. A file costs the few files around it, whatever the set's
    /// size.
    pub(crate) fn clock(&mut self, log: &LogFile, from: usize) -> TimeMap {
        let h = log.header();
        let mut pairs = log.time_map().pairs().to_vec();
        let own_first = pairs.first().map(|p| p.0);
        let need = log.first_tick(from);
        let mut window = std::collections::HashSet::new();
        if let (Some(need), Some(own_first)) = (need, own_first) {
            if need < own_first {
                let at = self.position(log);
                for (_, path) in self.listing.files()[..at].iter().rev() {
                    // Deleted (retention): so are the ones before.
                    let Some(peer) = peer_of(&mut self.peers, path) else {
                        break;
                    };
                    window.insert(path.clone());
                    let Some(q) = peer else { continue };
                    if q.pid != h.pid || q.rate != h.ticks_per_second.to_bits() {
                        // Another run's: the writer's first file is after it.
                        break;
                    }
                    pairs.extend_from_slice(&q.pairs);
                    if q.pairs.first().is_some_and(|p| p.0 <= need) {
                        break;
                    }
                }
            }
        }
        self.peers.retain(|p, _| window.contains(p));
        TimeMap::new(h.ticks_per_second, pairs)
    }

    /// How many of the listed finished files come before `log`: its place
    /// in the listing, which is made again only when it lacks the file (a
    /// file finished since it was made), or once for each new live file.
    fn position(&mut self, log: &LogFile) -> usize {
        let placed = |set: &SetListing| match log.seq() {
            Some(s) => set.before_seq(s),
            None => set.position(log.path()),
        };
        if let Some(i) = placed(&self.listing) {
            return i;
        }
        let this = (log.path().to_path_buf(), log.header().base_unix_ns);
        if self.listed_for.as_ref() != Some(&this) {
            self.listing.refresh();
            self.listed_for = Some(this);
        }
        placed(&self.listing).unwrap_or(self.listing.files().len())
    }
}

/// The clock of the finished file at `path`, from `peers` or read from the
/// file (and kept there once the file has ended: one just rolled away may
/// not have its last entries yet); `Some(None)` for a file that is not a
/// log, `None` for one that is gone.
fn peer_of(
    peers: &mut HashMap<PathBuf, Option<Arc<Peer>>>,
    path: &Path,
) -> Option<Option<Arc<Peer>>> {
    if let Some(p) = peers.get(path) {
        return Some(p.clone());
    }
    match LogFile::open(path) {
        Ok(l) => {
            let p = Some(Arc::new(Peer::of(&l)));
            if l.is_complete() {
                peers.insert(path.to_path_buf(), p.clone());
            }
            Some(p)
        }
        Err(nanolog_runtime::reader::ReadError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            None
        }
        Err(_) => {
            peers.insert(path.to_path_buf(), None);
            Some(None)
        }
    }
}

/// What the clock of a finished file of the set contributes to the
/// others': its writer, its calibrated rate, and its clock pairs.
#[derive(Debug)]
struct Peer {
    pid: u32,
    rate: u64,
    pairs: Vec<(u64, i64)>,
}

impl Peer {
    fn of(l: &LogFile) -> Peer {
        let h = l.header();
        Peer {
            pid: h.pid,
            rate: h.ticks_per_second.to_bits(),
            pairs: l.time_map().pairs().to_vec(),
        }
    }
}
