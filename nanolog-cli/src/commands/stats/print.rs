//! Printing the groups, the series and an argument's summary, as text
//! or JSON.

use std::collections::HashMap;
use std::fmt::Write as _;

use nanolog_runtime::reader::Value;
use nanolog_runtime::text::utc::rfc3339;

use super::percentile;
use super::*;
use crate::cli::{Format, GroupBy, StatsArgs};
use crate::output::json_string;

/// The column heading of `--by`'s groups.
pub(super) fn group_name(by: GroupBy) -> &'static str {
    match by {
        GroupBy::Site => "site",
        GroupBy::Thread => "thread",
        GroupBy::Level => "level",
    }
}

pub(super) fn kind_name(v: &Value<'_>) -> &'static str {
    match v {
        Value::Bool(_) => "a bool",
        Value::Char(_) => "a char",
        Value::Str(_) | Value::Hex(_) | Value::Numbered(_) => "a string",
        Value::Rendered(_) => "a value formatted at the call site",
        _ => "a number",
    }
}

pub(super) fn level_name(l: u8) -> &'static str {
    nanolog_runtime::Level::from_u8(l)
        .map(|l| l.as_str())
        .unwrap_or("?")
}

pub(super) fn key_label(plan: &StatsPlan, k: &Key) -> (String, String) {
    // (short label, long description)
    match k {
        Key::Site {
            level,
            file,
            line,
            format,
        } => (
            format!("{file}:{line}"),
            format!("{} {format:?}", level_name(*level)),
        ),
        Key::Thread { source, id } => {
            let name = plan.files[*source].thread_name(*id).unwrap_or("");
            // The files of one process (a rolled set) share their ids:
            // a thread is one row; threads of several processes are told
            // apart by pid.
            let processes = plan
                .thread_source
                .iter()
                .enumerate()
                .filter(|(i, s)| i == *s)
                .count();
            let label = if processes > 1 {
                format!("{}#{id}", plan.files[*source].pid)
            } else {
                id.to_string()
            };
            (label, name.to_owned())
        }
        Key::Level(l) => (level_name(*l).to_owned(), String::new()),
    }
}

pub(super) fn write_groups(
    format: Format,
    plan: &StatsPlan,
    groups: &HashMap<Key, Row>,
    out: &mut String,
) {
    let mut rows: Vec<(&Key, &Row)> = groups.iter().collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
    let total: u64 = rows.iter().map(|r| r.1.count).sum();
    // "Share" is of the files' entries, uncompressed: what each group
    // costs of the log (its records' own bytes against all the entries').
    let file_bytes: u64 = plan.files.iter().map(|f| f.raw_len).sum();
    match format {
        Format::Text => {
            let what = group_name(plan.by);
            let _ = writeln!(
                out,
                "{:>12} {:>7} {:>12} {:>7}  {:<30} {:<30}  {:<24}",
                "count", "count%", "bytes", "bytes%", "first", "last", what
            );
            for (k, r) in rows {
                let (label, desc) = key_label(plan, k);
                let _ = writeln!(
                    out,
                    "{:>12} {:>6.2}% {:>12} {:>6.2}%  {:<30} {:<30}  {:<24} {}",
                    r.count,
                    100.0 * r.count as f64 / total.max(1) as f64,
                    r.bytes,
                    100.0 * r.bytes as f64 / file_bytes.max(1) as f64,
                    rfc3339(r.first),
                    rfc3339(r.last),
                    label,
                    desc
                );
            }
        }
        Format::Json => {
            for (k, r) in rows {
                out.push('{');
                match k {
                    Key::Site {
                        level,
                        file,
                        line,
                        format,
                    } => {
                        out.push_str("\"level\":\"");
                        out.push_str(level_name(*level));
                        out.push_str("\",\"file\":");
                        json_string(file, out);
                        let _ = write!(out, ",\"line\":{line},\"fmt\":");
                        json_string(format, out);
                    }
                    Key::Thread { source, id } => {
                        let _ = write!(out, "\"thread\":{id},\"thread_name\":");
                        json_string(plan.files[*source].thread_name(*id).unwrap_or(""), out);
                        out.push_str(",\"source\":");
                        json_string(&plan.files[*source].path.to_string_lossy(), out);
                    }
                    Key::Level(l) => {
                        let _ = write!(out, "\"level\":\"{}\"", level_name(*l));
                    }
                }
                let _ = writeln!(
                    out,
                    ",\"count\":{},\"count_share\":{},\"bytes\":{},\"share\":{},\"first_ts_ns\":{},\"last_ts_ns\":{}}}",
                    r.count,
                    r.count as f64 / total.max(1) as f64,
                    r.bytes,
                    r.bytes as f64 / file_bytes.max(1) as f64,
                    r.first,
                    r.last
                );
            }
        }
    }
}

pub(super) fn write_series(
    format: Format,
    plan: &StatsPlan,
    series: &HashMap<(i64, Key), u64>,
    out: &mut String,
) {
    let mut rows: Vec<(&(i64, Key), &u64)> = series.iter().collect();
    rows.sort_by(|a, b| {
        a.0 .0
            .cmp(&b.0 .0)
            .then_with(|| b.1.cmp(a.1))
            .then_with(|| a.0 .1.cmp(&b.0 .1))
    });
    if format == Format::Text {
        let what = group_name(plan.by);
        let _ = writeln!(
            out,
            "{:<30}  {:>10}  {:<24}",
            "interval start", "count", what
        );
    }
    for ((t, k), c) in rows {
        let (label, desc) = key_label(plan, k);
        match format {
            Format::Text => {
                let _ = writeln!(out, "{}  {:>10}  {:<24} {}", rfc3339(*t), c, label, desc);
            }
            Format::Json => {
                let _ = write!(
                    out,
                    "{{\"ts_ns\":{t},\"ts\":\"{}\",\"count\":{c},\"group\":",
                    rfc3339(*t)
                );
                json_string(&label, out);
                out.push_str(",\"detail\":");
                json_string(&desc, out);
                out.push_str("}\n");
            }
        }
    }
}

/// `values`: per worker; `sum`: theirs, added in a fixed order.
pub(super) fn write_arg_summary(
    a: &StatsArgs,
    n: &str,
    values: &[percentile::Values],
    sum: f64,
    out: &mut String,
) -> std::io::Result<()> {
    let count = values.iter().map(percentile::Values::len).sum::<usize>();
    let (min, max) = percentile::min_max(values);
    let [p50, p90, p99] = percentile::percentiles(values, [50.0, 90.0, 99.0])?;
    let mean = (count > 0).then(|| sum / count as f64);
    let fields = [
        ("min", min),
        ("max", max),
        ("mean", mean),
        ("p50", p50),
        ("p90", p90),
        ("p99", p99),
    ];
    let buckets = if a.histogram {
        histogram(values)?
    } else {
        Vec::new()
    };
    match a.format {
        Format::Text => {
            let _ = writeln!(
                out,
                "site:  {}",
                a.site.as_deref().or(a.fmt.as_deref()).unwrap_or("")
            );
            let _ = writeln!(out, "arg:   {n}");
            let _ = writeln!(out, "count: {count}");
            for (name, v) in fields {
                match v {
                    // The mean is no value of the log: to 6 significant
                    // digits (JSON keeps it whole).
                    Some(v) if name == "mean" => {
                        let _ = writeln!(out, "{name:<6} {}", significant(v, 6));
                    }
                    Some(v) => {
                        let _ = writeln!(out, "{name:<6} {}", number(v));
                    }
                    None => {
                        let _ = writeln!(out, "{name:<6} -");
                    }
                }
            }
            if a.histogram {
                draw_histogram(&buckets, out);
            }
        }
        Format::Json => {
            out.push_str("{\"arg\":");
            match n.parse::<usize>() {
                Ok(i) => out.push_str(&i.to_string()),
                Err(_) => json_string(n, out),
            }
            let _ = write!(out, ",\"count\":{count}");
            for (name, v) in fields {
                match v {
                    Some(v) if v.is_finite() => {
                        let _ = write!(out, ",\"{name}\":{}", number(v));
                    }
                    Some(v) => {
                        let _ = write!(out, ",\"{name}\":\"{v}\"");
                    }
                    None => {
                        let _ = write!(out, ",\"{name}\":null");
                    }
                }
            }
            if a.histogram {
                out.push_str(",\"histogram\":[");
                for (i, b) in buckets.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let edge = |v: f64| {
                        if v.is_finite() {
                            number(v)
                        } else {
                            "null".into()
                        }
                    };
                    let _ = write!(
                        out,
                        "{{\"from\":{},\"to\":{},\"count\":{}}}",
                        edge(b.from),
                        edge(b.to),
                        b.count
                    );
                }
                out.push(']');
            }
            out.push_str("}\n");
        }
    }
    Ok(())
}

/// A value as text: integral values (exact below 2^53) without a fraction.
pub(super) fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:?}")
    }
}

/// `v` to `digits` significant digits, without trailing zeros
/// (46.80936454849498 -> 46.8094); integral values as [`number`] gives them.
pub(super) fn significant(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 || (v.fract() == 0.0 && v.abs() < 9.0e15) {
        return number(v);
    }
    let decimals = (digits - 1 - v.abs().log10().floor() as i32).clamp(0, 17) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn a_mean_is_shown_to_six_significant_digits() {
        assert_eq!(significant(46.80936454849498, 6), "46.8094");
        assert_eq!(significant(0.000123456789, 6), "0.000123457");
        assert_eq!(significant(1234567.891, 6), "1234568");
        assert_eq!(significant(2.5, 6), "2.5");
        assert_eq!(significant(-3.0, 6), "-3");
        assert_eq!(significant(f64::NAN, 6), "NaN");
    }
}
