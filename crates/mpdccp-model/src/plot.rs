//! PNG plots of a run's time series (like the CCID5 paper's figures 5–7) and
//! comparison plots across runs (for `mpdccp reproduce`).
//!
//! Text is drawn with the DejaVu Sans font embedded in the binary (crate
//! `dejavu`, Bitstream Vera licence), registered with plotters' `ab_glyph`
//! backend, so no system font library or font file is needed.
//!
//! Files written by [`plot_time_series`]:
//! * `latency.png` — per-flow one-way delay (mean per 100 ms) and per-path RTT;
//! * `throughput.png` — per-path throughput and per-flow goodput;
//! * `cwnd.png` — per-path congestion window;
//! * `queue.png` — per-path queueing delay (mean per 100 ms).

use std::io;
use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::results::{TimeSeries, TsKind};

/// The family name plots use for the embedded font.
const FONT: &str = "sans-serif";

/// One line of a plot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub label: String,
    /// `(x, y)` points, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// Plot size in pixels.
pub const WIDTH: u32 = 1000;
pub const HEIGHT: u32 = 500;

fn ensure_font() -> io::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(io::Error::other(
            "the embedded DejaVu font could not be loaded",
        ))
    }
}

fn plot_err<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(format!("plot: {e}"))
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes the per-run plots (see the module doc) into `dir`.
pub fn plot_time_series(dir: &Path, title: &str, ts: &TimeSeries) -> io::Result<()> {
    let flow = |name: &String, label: &str, f: fn(&crate::results::TsRow) -> Option<f64>| Series {
        label: format!("{name} {label}"),
        points: ts.series(TsKind::Flow, name, f),
    };
    let path = |name: &String, label: &str, f: fn(&crate::results::TsRow) -> Option<f64>| Series {
        label: format!("{name} {label}"),
        points: ts.series(TsKind::Path, name, f),
    };
    let mut latency: Vec<Series> = ts
        .flows
        .iter()
        .map(|n| flow(n, "OWD", |r| r.owd_ms))
        .collect();
    latency.extend(ts.paths.iter().map(|n| path(n, "RTT", |r| r.rtt_ms)));
    plot_lines(
        &dir.join("latency.png"),
        &format!("{title}: latency"),
        "time (s)",
        "delay (ms)",
        &latency,
    )?;

    let mut tput: Vec<Series> = ts
        .paths
        .iter()
        .map(|n| path(n, "throughput", |r| Some(r.throughput_mbps)))
        .collect();
    tput.extend(
        ts.flows
            .iter()
            .map(|n| flow(n, "goodput", |r| Some(r.throughput_mbps))),
    );
    plot_lines(
        &dir.join("throughput.png"),
        &format!("{title}: throughput"),
        "time (s)",
        "Mbit/s",
        &tput,
    )?;

    let cwnd: Vec<Series> = ts
        .paths
        .iter()
        .map(|n| path(n, "cwnd", |r| r.cwnd_pkts))
        .collect();
    plot_lines(
        &dir.join("cwnd.png"),
        &format!("{title}: congestion window"),
        "time (s)",
        "cwnd (packets)",
        &cwnd,
    )?;

    let queue: Vec<Series> = ts
        .paths
        .iter()
        .map(|n| path(n, "queueing delay", |r| r.queue_delay_ms))
        .collect();
    plot_lines(
        &dir.join("queue.png"),
        &format!("{title}: queueing delay"),
        "time (s)",
        "delay (ms)",
        &queue,
    )?;
    Ok(())
}

/// A line plot of several series on shared axes (y from 0), with a legend.
/// Empty series still get a legend entry; an all-empty plot gets unit axes.
pub fn plot_lines(
    file: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> io::Result<()> {
    ensure_font()?;
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let pts = || series.iter().flat_map(|s| s.points.iter().filter(finite));
    let x_min = pts().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = pts().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_max = pts().map(|p| p.1).fold(0.0f64, f64::max);
    let (x_min, x_max) = if x_min < x_max {
        (x_min.min(0.0), x_max)
    } else if x_min.is_finite() {
        (x_min - 0.5, x_min + 0.5)
    } else {
        (0.0, 1.0)
    };
    // Headroom so the legend (upper right) does not hide the top of the lines.
    let y_max = if y_max > 0.0 { y_max * 1.25 } else { 1.0 };

    let root = BitMapBackend::new(file, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22).into_font())
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(plot_err)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = s.points.iter().filter(finite).copied().collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(plot_err)?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Compares runs: the same metric over time from several runs on one plot
/// (e.g. path-1 RTT with CCID2 and with CCID5), as in the paper's figures.
pub fn plot_comparison(
    file: &Path,
    title: &str,
    y_label: &str,
    series: &[Series],
) -> io::Result<()> {
    plot_lines(file, title, "time (s)", y_label, series)
}

/// A bar chart of one scalar per run (e.g. goodput per configuration).
pub fn plot_bars(
    file: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> io::Result<()> {
    ensure_font()?;
    let y_max = bars
        .iter()
        .map(|b| b.1)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let n = bars.len().max(1);
    let root = BitMapBackend::new(file, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22).into_font())
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(plot_err)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            // Label only bar centres (k + 0.5).
            let k = x - 0.5;
            if (k - k.round()).abs() < 1e-6 && k >= 0.0 {
                labels.get(k.round() as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let v = if v.is_finite() { *v } else { 0.0 };
            let color = COLORS[i % COLORS.len()];
            Rectangle::new(
                [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, v)],
                color.filled(),
            )
        }))
        .map_err(plot_err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let v = if v.is_finite() { *v } else { 0.0 };
            Text::new(
                format!("{v:.2}"),
                (i as f64 + 0.35, v + y_max * 0.03),
                (FONT, 14).into_font(),
            )
        }))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("mpdccp-model-plot-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn is_png(bytes: &[u8]) -> bool {
        bytes.starts_with(b"\x89PNG\r\n\x1a\n")
    }

    #[test]
    fn line_and_bar_plots_are_pngs_with_text() {
        let d = tmp("lines");
        let s = vec![
            Series {
                label: "ccid2".into(),
                points: (0..100)
                    .map(|i| (i as f64 * 0.1, (i % 17) as f64))
                    .collect(),
            },
            Series {
                label: "ccid5".into(),
                points: vec![],
            },
        ];
        plot_comparison(&d.join("c.png"), "RTT", "ms", &s).unwrap();
        plot_bars(
            &d.join("b.png"),
            "goodput",
            "Mbit/s",
            &[("a".into(), 9.5), ("b".into(), f64::NAN)],
        )
        .unwrap();
        plot_lines(&d.join("e.png"), "empty", "x", "y", &[]).unwrap();
        for f in ["c.png", "b.png", "e.png"] {
            let bytes = std::fs::read(d.join(f)).unwrap();
            assert!(is_png(&bytes), "{f}");
        }
        // Text was rendered: a plot with a caption differs from one without.
        plot_lines(&d.join("t1.png"), "A", "x", "y", &[]).unwrap();
        plot_lines(&d.join("t2.png"), "BBBBBBBB", "x", "y", &[]).unwrap();
        assert_ne!(
            std::fs::read(d.join("t1.png")).unwrap(),
            std::fs::read(d.join("t2.png")).unwrap()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
