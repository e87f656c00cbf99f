//! Tick-to-wall-clock mapping, and UTC timestamps in and out.

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
    pub(crate) fn new(ticks_per_second: f64, mut pairs: Vec<(u64, i64)>) -> TimeMap {
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
    /// of one process).
    pub(crate) fn union<'a>(
        ticks_per_second: f64,
        maps: impl Iterator<Item = &'a TimeMap>,
    ) -> TimeMap {
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

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats UTC timestamps, remembering the date and time of the last whole
/// second (consecutive records mostly share it).
#[derive(Debug, Default)]
pub struct UtcWriter {
    sec: Option<i64>,
    prefix: String,
}

impl UtcWriter {
    /// Appends `YYYY-MM-DD<sep>HH:MM:SS.nnnnnnnnn` (UTC) to `out`.
    #[inline]
    pub fn write(&mut self, out: &mut String, unix_ns: i64, sep: char) {
        let secs = unix_ns.div_euclid(1_000_000_000);
        if self.sec != Some(secs) {
            self.prefix.clear();
            write_utc(&mut self.prefix, secs * 1_000_000_000, sep);
            self.prefix.truncate(self.prefix.len() - 9);
            self.sec = Some(secs);
        }
        out.push_str(&self.prefix);
        super::render::push_nine_digits(out, unix_ns.rem_euclid(1_000_000_000) as u32);
    }
}

/// Appends `YYYY-MM-DD<sep>HH:MM:SS.nnnnnnnnn` (UTC) to `out`.
pub fn write_utc(out: &mut String, unix_ns: i64, sep: char) {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let nanos = unix_ns.rem_euclid(1_000_000_000) as u32;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400) as u32;
    let (h, mi, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    let mut buf = [0u8; 29];
    let put = |buf: &mut [u8], v: u32, at: usize, n: usize| {
        let mut v = v;
        for i in (0..n).rev() {
            buf[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    if (0..=9999).contains(&y) {
        put(&mut buf, y as u32, 0, 4);
    } else {
        use std::fmt::Write;
        let _ = write!(out, "{y}");
        buf[..4].copy_from_slice(b"    ");
    }
    buf[4] = b'-';
    put(&mut buf, mo, 5, 2);
    buf[7] = b'-';
    put(&mut buf, d, 8, 2);
    buf[10] = sep as u8;
    put(&mut buf, h, 11, 2);
    buf[13] = b':';
    put(&mut buf, mi, 14, 2);
    buf[16] = b':';
    put(&mut buf, s, 17, 2);
    buf[19] = b'.';
    put(&mut buf, nanos, 20, 9);
    let start = if (0..=9999).contains(&y) { 0 } else { 4 };
    out.push_str(std::str::from_utf8(&buf[start..]).unwrap_or(""));
}

/// `2026-11-22T11:02:03.123456789Z`.
pub fn rfc3339(unix_ns: i64) -> String {
    let mut s = String::with_capacity(30);
    write_utc(&mut s, unix_ns, 'T');
    s.push('Z');
    s
}

/// Parses an RFC 3339 time (`2026-11-22T11:02:03Z`, with optional fraction
/// and `±HH:MM` offset; a space may replace the `T`; a bare date means its
/// midnight UTC) into Unix nanoseconds.
pub fn parse_rfc3339(s: &str) -> Result<i64, String> {
    let err = || format!("invalid time {s:?}: expected RFC 3339, like 2026-11-22T11:02:03Z");
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<u32, String> {
        let t = b.get(r).ok_or_else(err)?;
        if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
            return Err(err());
        }
        std::str::from_utf8(t)
            .map_err(|_| err())?
            .parse()
            .map_err(|_| err())
    };
    let y = num(0..4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return Err(err());
    }
    let (mo, d) = (num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return Err(err());
    }
    let days = days_from_civil(i64::from(y), mo, d);
    if b.len() == 10 {
        return Ok(days * 86_400 * 1_000_000_000);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return Err(err());
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || mi > 59 || sec > 60 {
        return Err(err());
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(err());
        }
        let mut scale = 100_000_000i64;
        for &c in &b[start..i.min(start + 9)] {
            nanos += i64::from(c - b'0') * scale;
            scale /= 10;
        }
    }
    let offset_s: i64 = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let v = i64::from(num(i + 1..i + 3)?) * 3600 + i64::from(num(i + 4..i + 6)?) * 60;
            if c == b'+' {
                v
            } else {
                -v
            }
        }
        None => 0,
        _ => return Err(err()),
    };
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(sec) - offset_s;
    Ok(secs * 1_000_000_000 + nanos)
}

/// Parses a duration like `1s`, `250ms`, `10us`, `5m`, `1h`, `100ns`.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        format!("invalid duration {s:?}: expected a number and a unit, like 1s or 250ms")
    })?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => {
            return Err(format!(
                "invalid duration {s:?}: unknown unit {unit:?} (ns, us, ms, s, m, h)"
            ))
        }
    };
    let ns = v * scale;
    if !(1.0..1e19).contains(&ns) {
        return Err(format!("invalid duration {s:?}: must be at least 1ns"));
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_round_trip() {
        let ns = parse_rfc3339("2026-11-22T11:02:03.123456789Z").unwrap();
        assert_eq!(rfc3339(ns), "2026-11-22T11:02:03.123456789Z");
        let mut s = String::new();
        write_utc(&mut s, 0, ' ');
        assert_eq!(s, "1970-01-01 00:00:00.000000000");
        assert_eq!(
            parse_rfc3339("2026-11-22T12:02:03+01:00").unwrap(),
            parse_rfc3339("2026-11-22T11:02:03Z").unwrap()
        );
        assert_eq!(
            parse_rfc3339("2000-02-29").unwrap(),
            951_782_400 * 1_000_000_000
        );
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(parse_rfc3339("2026-13-01T00:00:00Z").is_err());
    }

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

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_duration_ns("1s").unwrap(), 1_000_000_000);
        assert!(parse_duration_ns("0s").is_err());
        assert!(parse_duration_ns("1 fortnight").is_err());
    }
}
