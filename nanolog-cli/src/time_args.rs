//! The times and durations given on the command line, parsed with `jiff`.
//!
//! A time (`--since`, `--until`) is one of:
//! - RFC 3339: `2026-11-22T11:02:03Z`, `2026-11-22 11:02:03.5+01:00`;
//! - a date and time without offset, taken as UTC: `2026-11-22T11:02:03`;
//! - a date, meaning its midnight UTC: `2026-11-22`;
//! - a time ago: `2h`, `-2h`, `90s`, `1h 30m`, `2 hours ago` (all in the
//!   past, counted back from now).
//!
//! A duration (`--every`) is `1s`, `250ms`, `1h 30m`, `1.5s`, or a bare
//! number of seconds.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Parses a time into Unix nanoseconds; relative times count back from `now`.
pub fn parse_time(s: &str, now: Timestamp) -> Result<i64, String> {
    let t = s.trim();
    let absolute = match t.parse::<Timestamp>() {
        Ok(ts) => return to_ns(ts),
        Err(e) => e,
    };
    // Without an offset (none after the date): UTC.
    if !t
        .get(10..)
        .is_some_and(|rest| rest.contains(['Z', 'z', '+', '-']))
    {
        if let Ok(dt) = t.parse::<DateTime>() {
            return to_zoned_ns(dt);
        }
        if let Ok(d) = t.parse::<Date>() {
            return to_zoned_ns(d.to_datetime(jiff::civil::Time::midnight()));
        }
    }
    if let Ok(ago) = parse_signed_duration(t) {
        let back = ago.unsigned_abs();
        let ts = now.checked_sub(back).map_err(|_| out_of_range(s))?;
        return to_ns(ts);
    }
    Err(format!(
        "invalid time {s:?}: {absolute} (expected RFC 3339 like 2026-11-22T11:02:03Z, \
         a date like 2026-11-22, or a time ago like 2h, -90s or '2 hours ago')"
    ))
}

/// Parses a positive duration into nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let d = parse_signed_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (expected e.g. 1s, 250ms, 1h 30m)"))?;
    if d.is_negative() || d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be at least 1ns"));
    }
    u64::try_from(d.as_nanos()).map_err(|_| format!("invalid duration {s:?}: too long"))
}

/// jiff's friendly format (`1h 30m`, `250ms`, `2 hours ago`) or ISO 8601
/// (`PT1H`); a bare number is seconds.
fn parse_signed_duration(t: &str) -> Result<SignedDuration, jiff::Error> {
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return format!("{t}s").parse();
    }
    t.parse()
}

fn to_zoned_ns(dt: DateTime) -> Result<i64, String> {
    let ts = dt
        .to_zoned_datetime(TimeZone::UTC)
        .map_err(|e| e.to_string())?
        .timestamp();
    to_ns(ts)
}

fn to_ns(ts: Timestamp) -> Result<i64, String> {
    i64::try_from(ts.as_nanosecond()).map_err(|_| "time out of range".to_owned())
}

fn out_of_range(s: &str) -> String {
    format!("invalid time {s:?}: out of range")
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn now() -> Timestamp {
        "2026-11-22T12:00:00Z".parse().unwrap()
    }

    fn at(s: &str) -> Result<i64, String> {
        parse_time(s, now())
    }

    #[test]
    fn absolute_times() {
        let base = at("2026-11-22T11:02:03Z").unwrap();
        assert_eq!(base, 1_795_345_323 * S);
        assert_eq!(
            at("2026-11-22T11:02:03.123456789Z").unwrap(),
            base + 123_456_789
        );
        assert_eq!(at("2026-11-22T12:02:03+01:00").unwrap(), base);
        assert_eq!(at("2026-11-22 11:02:03Z").unwrap(), base);
        assert_eq!(at("2026-11-22T11:02:03").unwrap(), base, "no offset: UTC");
        assert_eq!(
            at("2026-11-22").unwrap(),
            base - (11 * 3600 + 2 * 60 + 3) * S
        );
        assert!(at("2000-02-29").is_ok());
    }

    #[test]
    fn impossible_times_are_errors() {
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-02-30",
            "2025-02-29",
            "2026-13-01T00:00:00Z",
            "2026-11-22T24:00:01Z",
            "2026-11-22T11:02:03+99:00",
            "yesterday",
            "",
        ] {
            assert!(at(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn relative_times_count_back_from_now() {
        let now_ns = at("2026-11-22T12:00:00Z").unwrap();
        for (s, back) in [
            ("2h", 7200),
            ("-2h", 7200),
            ("2 hours ago", 7200),
            ("1h 30m", 5400),
            ("90s", 90),
            ("-90s", 90),
        ] {
            assert_eq!(at(s).unwrap(), now_ns - back * S, "{s}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_duration_ns("1s").unwrap(), S as u64);
        assert_eq!(parse_duration_ns("5").unwrap(), 5 * S as u64);
        assert_eq!(parse_duration_ns("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration_ns("1h 30m").unwrap(), 5400 * S as u64);
        assert_eq!(parse_duration_ns("100ns").unwrap(), 100);
        assert_eq!(parse_duration_ns("10us").unwrap(), 10_000);
        assert!(parse_duration_ns("0s").is_err());
        assert!(parse_duration_ns("-1s").is_err());
        assert!(parse_duration_ns("fast").is_err());
    }
}
