//! An argument's distribution as a histogram of logarithmic buckets.

use std::fmt::Write as _;

use super::percentile;
use super::*;

/// One bar of a histogram: values in `[from, to)`.
pub(super) struct Bucket {
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) count: u64,
}

/// The edge at or below `v > 0` on the 1-2-5 log scale (..., 0.5, 1, 2,
/// 5, 10, 20, ...), and the next one up.
pub(super) fn log_edges(v: f64) -> (f64, f64) {
    let decade = 10f64.powi(v.log10().floor() as i32);
    let m = v / decade;
    // (m is in [1, 10); rounding may put it a hair outside.)
    if m < 2.0 {
        (decade, 2.0 * decade)
    } else if m < 5.0 {
        (2.0 * decade, 5.0 * decade)
    } else {
        (5.0 * decade, 10.0 * decade)
    }
}

/// Log-scaled buckets of `values` (1-2-5 per decade) from the lowest to
/// the highest non-empty one, empty ones between kept (a gap in the
/// distribution is worth seeing); values at or below zero, and those not
/// finite, in buckets of their own.
pub(super) fn histogram(values: &[percentile::Values]) -> std::io::Result<Vec<Bucket>> {
    let mut by_edge: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    let (mut non_positive, mut non_finite) = (0u64, 0u64);
    let mut each = |v: f64| {
        if !v.is_finite() {
            non_finite += 1;
        } else if v <= 0.0 {
            non_positive += 1;
        } else {
            // Keyed by the bucket's index on the scale: 3 per decade.
            let (lo, _) = log_edges(v);
            let decade = lo.log10().floor() as i64;
            let step = match (lo / 10f64.powi(decade as i32)).round() as i64 {
                1 => 0,
                2 => 1,
                _ => 2,
            };
            *by_edge.entry(decade * 3 + step).or_default() += 1;
        }
    };
    for part in values {
        part.for_each(&mut each)?;
    }
    let mut out = Vec::new();
    if non_positive > 0 {
        out.push(Bucket {
            from: f64::NEG_INFINITY,
            to: 0.0,
            count: non_positive,
        });
    }
    if let (Some(&lo), Some(&hi)) = (by_edge.keys().next(), by_edge.keys().last()) {
        for k in lo..=hi {
            let decade = 10f64.powi(k.div_euclid(3) as i32);
            let from = decade * [1.0, 2.0, 5.0][k.rem_euclid(3) as usize];
            let to = decade * [2.0, 5.0, 10.0][k.rem_euclid(3) as usize];
            out.push(Bucket {
                from,
                to,
                count: by_edge.get(&k).copied().unwrap_or(0),
            });
        }
    }
    if non_finite > 0 {
        out.push(Bucket {
            from: f64::NAN,
            to: f64::NAN,
            count: non_finite,
        });
    }
    Ok(out)
}

/// The histogram as text: one line a bucket, a bar of up to 50 cells.
pub(super) fn draw_histogram(buckets: &[Bucket], out: &mut String) {
    let max = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let total: u64 = buckets.iter().map(|b| b.count).sum::<u64>().max(1);
    out.push_str("histogram (log-scaled buckets):\n");
    for b in buckets {
        let range = if b.from.is_nan() {
            "not finite".to_owned()
        } else if b.from == f64::NEG_INFINITY {
            "<= 0".to_owned()
        } else {
            format!("[{}, {})", number(b.from), number(b.to))
        };
        let cells = (b.count as f64 / max as f64 * 50.0).ceil() as usize;
        let _ = writeln!(
            out,
            "  {range:>22} {:>10} {:>6.2}% {}",
            b.count,
            b.count as f64 * 100.0 / total as f64,
            "#".repeat(if b.count > 0 { cells.max(1) } else { 0 })
        );
    }
}
