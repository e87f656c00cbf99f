//! Tick-to-wall-clock mapping.

/// Maps ticks to Unix nanoseconds by the file's clock pairs: linear
/// interpolation between pairs, extrapolation at the calibrated rate beyond
/// them. The pairs are made non-decreasing first, so the mapping never goes
/// backwards.
#[derive(Debug, Clone)]
pub struct TimeMap {
    pairs: Vec<(u64, i64)>,
    /// Per segment between pairs `i` and `i + 1`: ns per tick as a 32.32
    /// fixed-point number, so mapping a tick is a multiply and a shift.
    slopes: Vec<u64>,
    ns_per_tick: f64,
}

impl TimeMap {
    /// The map of a clock calibrated at `ticks_per_second` with these
    /// (tick, Unix ns) pairs, in any order.
    pub fn new(ticks_per_second: f64, mut pairs: Vec<(u64, i64)>) -> TimeMap {
        pairs.sort_by_key(|p| p.0);
        pairs.dedup_by_key(|p| p.0);
        let mut max = i64::MIN;
        for p in &mut pairs {
            max = max.max(p.1);
            p.1 = max;
        }
        let slopes = pairs
            .windows(2)
            .map(|w| {
                let (dt, dn) = (w[1].0 - w[0].0, (w[1].1 - w[0].1) as u128);
                u64::try_from((dn << 32) / u128::from(dt)).unwrap_or(u64::MAX)
            })
            .collect();
        TimeMap {
            pairs,
            slopes,
            ns_per_tick: 1e9 / ticks_per_second,
        }
    }

    /// One map from the pairs of several maps of the same clock (the files
    /// of one process): what [`Merge`](super::Merge) reads a set's files by.
    pub fn union<'a>(ticks_per_second: f64, maps: impl Iterator<Item = &'a TimeMap>) -> TimeMap {
        let pairs = maps.flat_map(|m| m.pairs.iter().copied()).collect();
        TimeMap::new(ticks_per_second, pairs)
    }

    /// The clock pairs, sorted by tick.
    pub fn pairs(&self) -> &[(u64, i64)] {
        &self.pairs
    }

    /// Unix nanoseconds at `tick`.
    #[inline]
    pub fn unix_ns(&self, tick: u64) -> i64 {
        let p = &self.pairs;
        let i = p.partition_point(|q| q.0 <= tick);
        if i == 0 {
            let Some(&(t0, n0)) = p.first() else { return 0 };
            return n0 - ((t0 - tick) as f64 * self.ns_per_tick) as i64;
        }
        let (ta, na) = p[i - 1];
        match self.slopes.get(i - 1) {
            Some(&slope) => na + ((u128::from(tick - ta) * u128::from(slope)) >> 32) as i64,
            None => na.saturating_add(((tick - ta) as f64 * self.ns_per_tick) as i64),
        }
    }
}

/// Files grouped by the clock that stamped them: the files of one process
/// (a rolled set, [`LogFile::clock_domain`](super::LogFile::clock_domain))
/// share one map built from all their clock pairs, so records on both
/// sides of a roll keep their order. What [`Merge`](super::Merge) reads
/// its files by, and what a reader of a set a window at a time groups its
/// files by (it adds each file as it opens it, then lets it go).
#[derive(Debug, Default)]
pub struct ClockGroups {
    /// Per group: its clock's key, its tick rate, its files' maps.
    groups: Vec<((u32, u64), f64, Vec<TimeMap>)>,
}

impl ClockGroups {
    /// Adds `file`'s clock: returns its group, groups numbered in the
    /// order they were first met.
    pub fn add(&mut self, file: &super::LogFile) -> usize {
        let key = file.clock_domain();
        let g = match self.groups.iter().position(|g| g.0 == key) {
            Some(g) => g,
            None => {
                let hz = file.header().ticks_per_second;
                self.groups.push((key, hz, Vec::new()));
                self.groups.len() - 1
            }
        };
        self.groups[g].2.push(file.time_map().clone());
        g
    }

    /// One map a group, in order: the union of its files' maps (a group
    /// of one file, that file's map).
    pub fn maps(&self) -> Vec<std::sync::Arc<TimeMap>> {
        self.groups
            .iter()
            .map(|(_, hz, maps)| {
                std::sync::Arc::new(match &maps[..] {
                    [one] => one.clone(),
                    _ => TimeMap::union(*hz, maps.iter()),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_map_is_monotonic_across_pairs() {
        let m = TimeMap::new(1e9, vec![(1000, 5000), (2000, 5900), (3000, 7100)]);
        let mut last = i64::MIN;
        for t in (0..4000).step_by(7) {
            let ns = m.unix_ns(t);
            assert!(ns >= last, "went backwards at {t}");
            last = ns;
        }
        // 32.32 fixed point: within a nanosecond.
        assert!((m.unix_ns(1500) - 5450).abs() <= 1);
        assert_eq!(m.unix_ns(3500), 7600);
    }
}
