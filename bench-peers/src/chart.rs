//! Charts of `results.csv` as SVG: one per figure (throughput, p50 and
//! p99.9 latency), each message a cluster of bars, one bar per logger, on a
//! logarithmic axis.

use plotters::prelude::*;

use crate::{LOGGERS, MESSAGES};

struct Figure {
    file: &'static str,
    title: &'static str,
    axis: &'static str,
    mode: &'static str,
    column: usize,
}

const FIGURES: [Figure; 3] = [
    Figure {
        file: "peers-throughput.svg",
        title: "Throughput, one logging thread, until on the OS (higher is better)",
        axis: "M calls/s",
        mode: "throughput",
        column: 7,
    },
    Figure {
        file: "peers-latency-p50.svg",
        title: "Latency of a call, median (lower is better)",
        axis: "ns",
        mode: "latency",
        column: 4,
    },
    Figure {
        file: "peers-latency-p999.svg",
        title: "Latency of a call, 99.9th percentile (lower is better)",
        axis: "ns",
        mode: "latency",
        column: 6,
    },
];

/// Writes each message's name under its cluster of `bars` bars.
fn label_clusters<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    bars: usize,
    y: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let slot = (bars + 1) as f64;
    for (i, m) in MESSAGES.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 * slot + bars as f64 / 2.0, y));
        let style = TextStyle::from(("sans-serif", 14).into_font()).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ),
        );
        root.draw(&Text::new(m.to_string(), (px, py + 8), style))?;
    }
    Ok(())
}

const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

pub fn write_all(csv: &str, dir: &str) {
    let text = std::fs::read_to_string(csv).expect("read the results");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    std::fs::create_dir_all(dir).expect("chart directory");
    for f in &FIGURES {
        let value = |logger: &str, message: &str| -> Option<f64> {
            rows.iter()
                .find(|r| r[0] == logger && r[1] == message && r[2] == f.mode)
                .and_then(|r| r[f.column].parse::<f64>().ok())
                .map(|v| v.max(0.5))
        };
        let path = format!("{dir}/{}", f.file);
        draw(&path, f, &value).expect("draw chart");
        println!("wrote {path}");
    }
}

fn draw(
    path: &str,
    f: &Figure,
    value: &dyn Fn(&str, &str) -> Option<f64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let values: Vec<f64> = MESSAGES
        .iter()
        .flat_map(|m| LOGGERS.iter().filter_map(move |l| value(l, m)))
        .collect();
    // Room above the bars for the legend.
    let max = values.iter().copied().fold(1.0, f64::max) * 60.0;
    let min = values.iter().copied().fold(f64::MAX, f64::min).min(1.0) / 2.0;
    let slot = LOGGERS.len() + 1;
    let width = (MESSAGES.len() * slot) as f64;
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(f.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..width, (min..max).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(f.axis)
        .draw()?;
    label_clusters(&root, &chart, LOGGERS.len(), min)?;
    for (li, logger) in LOGGERS.iter().enumerate() {
        let color = COLORS[li % COLORS.len()];
        let bars: Vec<_> = MESSAGES
            .iter()
            .enumerate()
            .filter_map(|(mi, m)| {
                let v = value(logger, m)?;
                let x0 = (mi * slot + li) as f64;
                Some(Rectangle::new([(x0, min), (x0 + 0.9, v)], color.filled()))
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(*logger)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    legend_and_present(&mut chart, &root)
}

/// Draws the legend (top right) and writes the file.
fn legend_and_present<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// C++ NanoLog's throughput (M msg/s) on this machine type, from issue #9
/// (measured by the team with the same protocol; not rebuilt here).
const CPP: [(&str, f64); 6] = [
    ("staticString", 89.4),
    ("stringConcat", 11.6),
    ("singleInteger", 100.8),
    ("twoIntegers", 98.0),
    ("singleDouble", 61.1),
    ("complexFormat", 27.7),
];

/// A bar series: its label, its color, and its value per message.
pub type Series<'a> = (String, RGBColor, Box<dyn Fn(&str) -> Option<f64> + 'a>);

/// `table3-chart TABLE3_TXT DIR`: nanolog's Table 3 throughput (one and two
/// threads) beside C++ NanoLog's and the 1.2x target.
pub fn write_table3(txt: &str, dir: &str) {
    let text = std::fs::read_to_string(txt).expect("read the table3 output");
    // Rows: name p50 p99 p99.9 M/s 2thr-M/s B/rec
    let value = |name: &str, col: usize| -> Option<f64> {
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.first() == Some(&name) && w.len() >= 7)
            .and_then(|w| w[col].parse().ok())
    };
    let series: [Series<'_>; 4] = [
        (
            "C++ NanoLog (issue #9)".to_owned(),
            COLORS[7],
            Box::new(|m| CPP.iter().find(|c| c.0 == m).map(|c| c.1)),
        ),
        (
            "target: 1.2x C++".to_owned(),
            RGBColor(200, 200, 200),
            Box::new(|m| CPP.iter().find(|c| c.0 == m).map(|c| 1.2 * c.1)),
        ),
        (
            "nanolog, 1 thread".to_owned(),
            COLORS[0],
            Box::new(move |m| value(m, 4)),
        ),
        (
            "nanolog, 2 threads".to_owned(),
            COLORS[1],
            Box::new(move |m| value(m, 5)),
        ),
    ];
    std::fs::create_dir_all(dir).expect("chart directory");
    let path = format!("{dir}/table3-throughput.svg");
    // The floor (a TSC read and a 16-byte store per call, no logger): what
    // one thread can reach at most with a timestamp per record.
    let floor =
        value("floor", 4).map(|v| (format!("floor: TSC read + 16-byte store ({v:.0} M/s)"), v));
    grouped_bars(
        &path,
        "Table 3 messages: throughput until flush (M msg/s, higher is better)",
        &series,
        floor,
    )
    .expect("draw chart");
    println!("wrote {path}");
}

/// A chart of one cluster of bars per Table 3 message, one bar per series,
/// in M msg/s on a linear axis, with perhaps a labelled horizontal line.
pub fn grouped_bars(
    path: &str,
    title: &str,
    series: &[Series<'_>],
    line: Option<(String, f64)>,
) -> Result<(), Box<dyn std::error::Error>> {
    let slot = series.len() + 1;
    let width = (MESSAGES.len() * slot) as f64;
    let max = MESSAGES
        .iter()
        .flat_map(|m| series.iter().filter_map(move |s| (s.2)(m)))
        .chain(line.as_ref().map(|l| l.1))
        .fold(1.0, f64::max)
        * 1.45;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..width, 0f64..max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("M msg/s")
        .draw()?;
    label_clusters(&root, &chart, series.len(), 0.0)?;
    if let Some((label, v)) = line {
        chart
            .draw_series(LineSeries::new(
                [(0.0, v), (width, v)],
                BLACK.stroke_width(2),
            ))?
            .label(label)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.stroke_width(2)));
    }
    for (si, (label, color, f)) in series.iter().enumerate() {
        let color = *color;
        let bars: Vec<_> = MESSAGES
            .iter()
            .enumerate()
            .filter_map(|(mi, m)| {
                let v = f(m)?;
                let x0 = (mi * slot + si) as f64;
                Some(Rectangle::new([(x0, 0.0), (x0 + 0.9, v)], color.filled()))
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    legend_and_present(&mut chart, &root)
}
