//! UTC timestamps as text: `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` lines, RFC 3339,
//! and the stamps in finished files' names.

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
        let nanos = super::render::nine_digits(unix_ns.rem_euclid(1_000_000_000) as u32);
        self.write_with(out, unix_ns, sep, &nanos);
    }

    /// As [`UtcWriter::write`], with the nanosecond digits already made
    /// (`render::nine_digits` of `unix_ns`'s nanoseconds).
    #[inline]
    pub fn write_with(
        &mut self,
        out: &mut String,
        unix_ns: i64,
        sep: char,
        nanos: &super::render::NineDigits,
    ) {
        let secs = unix_ns.div_euclid(1_000_000_000);
        if self.sec != Some(secs) {
            self.prefix.clear();
            write_utc(&mut self.prefix, secs * 1_000_000_000, sep);
            self.prefix.truncate(self.prefix.len() - 9);
            self.sec = Some(secs);
        }
        out.push_str(&self.prefix);
        out.push_str(nanos.as_str());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        let ns = 1_795_345_323 * 1_000_000_000 + 123_456_789;
        assert_eq!(rfc3339(ns), "2026-11-22T11:02:03.123456789Z");
        let mut s = String::new();
        write_utc(&mut s, 0, ' ');
        assert_eq!(s, "1970-01-01 00:00:00.000000000");
        assert_eq!(
            rfc3339(951_782_400 * 1_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }
}
