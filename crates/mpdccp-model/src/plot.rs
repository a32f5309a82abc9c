//! PNG plots of a run's time series (like the CCID5 paper's figures 5–7) and
//! comparison plots across runs (for `mpdccp reproduce`).
//!
//! Text is drawn with the DejaVu Sans font embedded in the binary (crate
//! `dejavu`, Bitstream Vera licence), registered with plotters' `ab_glyph`
//! backend, so no system font library or font file is needed.
//!
//! Files written by [`plot_time_series`]:
//! * `delay.png` — two panels: per-path RTT, and per-flow application
//!   one-way delay (means per 100 ms), each on its own y scale (the send-queue
//!   wait in the OWD would squash the RTT difference of two paths);
//! * `throughput.png` — per-path throughput and per-flow goodput;
//! * `cwnd.png` — per-path congestion window;
//! * `queue.png` — per-path queueing delay (mean per 100 ms);
//! * `owd_cdf.png` — the distribution of each flow's one-way delay.
//!
//! Long series (more points than the panel has pixel columns, e.g. 10 000
//! bins of a 1000 s run) are decimated per pixel column: a light min/max
//! band (one filled polygon, so no stripes between columns) and the column
//! mean as a line, so nothing is drawn outside the data's range (a wide
//! stroke over jumpy points overshoots the frame).
//!
//! Conventions a reader of a paper expects: tick labels without
//! a trailing ".0", a major grid only, 2-pixel lines, no line across a span
//! without data (an outage), a series that never has a non-zero value is
//! neither drawn nor named in the legend, a CDF's axis ends at 1, events
//! (rate changes, outages) as dashed vertical markers, and a series may
//! carry a spread band (`--seeds`: min–max over the seeds).

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

pub use crate::labels::{tick_label, Marker};
use crate::results::{TimeSeries, TsKind, TsRow};

/// The family name plots use for the embedded font.
pub(crate) const FONT: &str = "sans-serif";

/// One line of a plot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub label: String,
    /// `(x, y)` points, x increasing.
    pub points: Vec<(f64, f64)>,
    /// A spread drawn as a light band under the line: `(x, lo, hi)`, x
    /// increasing (e.g. min and max over seeds); empty: none.
    pub band: Vec<(f64, f64, f64)>,
}

/// Whether a series is drawn and named: it has a finite non-zero value
/// (an unused path's all-zero throughput, or a series without samples, is
/// absent, not a line on the axis).
pub fn is_present(s: &Series) -> bool {
    s.points.iter().any(|p| finite(p) && p.1 != 0.0) || !s.band.is_empty()
}

/// The legend entries of a panel, in drawing order.
pub fn legend_entries(panel: &Panel) -> Vec<&str> {
    panel
        .series
        .iter()
        .filter(|s| is_present(s) && !s.label.is_empty())
        .map(|s| s.label.as_str())
        .collect()
}

/// Splits `points` (x increasing) into the runs a line may join: a
/// non-finite point, or a step in x over 3 × the series' median step, ends
/// a run, so no line crosses a span without data (an outage).
pub fn segments(points: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut steps: Vec<f64> = points
        .windows(2)
        .filter(|w| finite(&w[0]) && finite(&w[1]))
        .map(|w| w[1].0 - w[0].0)
        .filter(|d| *d > 0.0)
        .collect();
    steps.sort_by(f64::total_cmp);
    let limit = steps
        .get(steps.len() / 2)
        .map_or(f64::INFINITY, |m| 3.0 * m);
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for p in points {
        let gap = cur.last().is_some_and(|l| p.0 - l.0 > limit);
        if !finite(p) || gap {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !finite(p) {
                continue;
            }
        }
        cur.push(*p);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Plot size in pixels.
pub const WIDTH: u32 = 1000;
pub const HEIGHT: u32 = 500;

pub(crate) fn ensure_font() -> io::Result<()> {
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

pub(crate) fn plot_err<E: std::fmt::Display>(e: E) -> io::Error {
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

/// A per-row value of the time series drawn as one line.
type Field = fn(&TsRow) -> Option<f64>;

/// One panel of a per-run plot: y-axis label and the lines, in legend order
/// — each `(kind, label, field)` draws one line per flow or path of that
/// kind (in `TimeSeries` order), labelled "`name label`".
type PanelSpec = (&'static str, &'static [(TsKind, &'static str, Field)]);

/// The plots of [`plot_time_series`] (listed in the module doc): file,
/// caption suffix, and panels stacked top to bottom on a shared time axis.
const RUN_PLOTS: &[(&str, &str, &[PanelSpec])] = &[
    (
        "delay.png",
        "path RTT (top) and application one-way delay (bottom)",
        &[
            ("path RTT (ms)", &[(TsKind::Path, "RTT", |r| r.rtt_ms)]),
            ("one-way delay (ms)", &[(TsKind::Flow, "OWD", |r| r.owd_ms)]),
        ],
    ),
    (
        "throughput.png",
        "throughput",
        &[(
            "Mbit/s",
            &[
                (TsKind::Path, "throughput", |r| Some(r.throughput_mbps)),
                (TsKind::Flow, "goodput", |r| Some(r.throughput_mbps)),
            ],
        )],
    ),
    (
        "cwnd.png",
        "congestion window",
        &[("cwnd (packets)", &[(TsKind::Path, "cwnd", |r| r.cwnd_pkts)])],
    ),
    (
        "queue.png",
        "bottleneck queueing delay",
        &[(
            "delay (ms)",
            &[(TsKind::Path, "queueing delay", |r| r.queue_delay_ms)],
        )],
    ),
];

/// Writes the per-run plots (see the module doc) into `dir`.
pub fn plot_time_series(dir: &Path, title: &str, ts: &TimeSeries) -> io::Result<()> {
    for &(file, caption, panels) in RUN_PLOTS {
        let panels: Vec<Panel> = panels
            .iter()
            .map(|&(y_label, lines)| {
                let mut series = Vec::new();
                for &(kind, label, field) in lines {
                    let names = match kind {
                        TsKind::Flow => &ts.flows,
                        TsKind::Path => &ts.paths,
                    };
                    series.extend(names.iter().map(|name| Series {
                        label: format!("{name} {label}"),
                        points: ts.series(kind, name, field),
                        ..Series::default()
                    }));
                }
                Panel {
                    y_label: y_label.to_owned(),
                    series,
                    markers: ts.markers.clone(),
                    ..Panel::default()
                }
            })
            .collect();
        plot_grid(
            &dir.join(file),
            &format!("{title}: {caption}"),
            "time (s)",
            &panels.into_iter().map(|p| vec![p]).collect::<Vec<_>>(),
        )?;
    }
    let cdf: Vec<Series> = ts
        .flows
        .iter()
        .zip(&ts.owd_cdf)
        .map(|(name, points)| Series {
            label: format!("{name} OWD"),
            points: points.clone(),
            ..Series::default()
        })
        .collect();
    let panel = Panel {
        y_label: "fraction of packets".into(),
        series: cdf,
        y_range: Some((0.0, 1.0)),
        legend_lower_right: true,
        ..Panel::default()
    };
    plot_grid(
        &dir.join("owd_cdf.png"),
        &format!("{title}: application one-way delay, CDF"),
        "one-way delay (ms)",
        &[vec![panel]],
    )?;
    Ok(())
}

/// One chart of a figure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Caption above the chart (empty: none).
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A fixed y range (a CDF's 0–1) instead of one from the data.
    pub y_range: Option<(f64, f64)>,
    /// The legend in the lower right (a CDF rises to the upper right).
    pub legend_lower_right: bool,
    /// Events drawn as dashed vertical lines.
    pub markers: Vec<Marker>,
}

/// Where a chart drew its data: pixel x of the x range's ends, and pixel y
/// of the smallest and largest finite y value plotted (the data's band).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPixels {
    pub x: (i32, i32),
    /// `(y of the data maximum, y of the data minimum)`: top, bottom.
    pub y: (i32, i32),
}

fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

/// `[lo, hi]` of the finite x or y values of `series`, bands included
/// (`None`: no point).
fn extent<'a>(series: impl Iterator<Item = &'a Series>, y: bool) -> Option<(f64, f64)> {
    series
        .flat_map(|s| {
            let band = s
                .band
                .iter()
                .flat_map(move |b| if y { [b.1, b.2] } else { [b.0, b.0] });
            s.points
                .iter()
                .filter(|p| finite(p))
                .map(move |p| if y { p.1 } else { p.0 })
                .chain(band)
        })
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
        })
}

/// The x axis: from 0 (or the first x if negative) to the last x.
fn x_axis(ext: Option<(f64, f64)>) -> Range<f64> {
    match ext {
        Some((lo, hi)) if lo < hi => lo.min(0.0)..hi,
        Some((lo, _)) => lo - 0.5..lo + 0.5,
        None => 0.0..1.0,
    }
}

/// The y axis of one row of panels: a panel's fixed range (a CDF ends at
/// 1, with 3 % room for the line), else `y_axis` of the row's data.
pub fn row_y_axis(row: &[Panel]) -> Range<f64> {
    match row.iter().find_map(|p| p.y_range) {
        Some((lo, hi)) => lo..hi + (hi - lo) * 0.03,
        None => y_axis(extent(row.iter().flat_map(|p| &p.series), true)),
    }
}

/// The y axis: from 0 (or the minimum if negative) with 25 % headroom so
/// the legend in the upper right does not hide the top of the lines.
fn y_axis(ext: Option<(f64, f64)>) -> Range<f64> {
    match ext {
        Some((lo, hi)) if hi > 0.0 || lo < 0.0 => {
            let lo = lo.min(0.0);
            lo..hi.max(0.0) + (hi.max(0.0) - lo).max(1e-9) * 0.25
        }
        _ => 0.0..1.0,
    }
}

/// One pixel column of a decimated series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Column {
    pub x: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

/// Reduces `points` (x increasing) to at most `columns` buckets of equal
/// x width over `x`: each keeps the min, max and mean of its points, at the
/// mean x. Non-finite points are skipped; empty buckets leave no column.
pub fn decimate(points: &[(f64, f64)], x: Range<f64>, columns: usize) -> Vec<Column> {
    let columns = columns.max(1);
    let width = (x.end - x.start) / columns as f64;
    let mut out: Vec<Column> = Vec::with_capacity(columns);
    let (mut bucket, mut n, mut sx, mut sy) = (usize::MAX, 0usize, 0.0, 0.0);
    let mut cur = Column {
        x: 0.0,
        min: 0.0,
        max: 0.0,
        mean: 0.0,
    };
    let flush = |n: usize, sx: f64, sy: f64, cur: &mut Column, out: &mut Vec<Column>| {
        if n > 0 {
            cur.x = sx / n as f64;
            cur.mean = sy / n as f64;
            out.push(*cur);
        }
    };
    for &(px, py) in points.iter().filter(|p| finite(p)) {
        let b = if width > 0.0 {
            (((px - x.start) / width).floor().max(0.0) as usize).min(columns - 1)
        } else {
            0
        };
        if b != bucket {
            flush(n, sx, sy, &mut cur, &mut out);
            bucket = b;
            (n, sx, sy) = (0, 0.0, 0.0);
            cur.min = py;
            cur.max = py;
        }
        n += 1;
        sx += px;
        sy += py;
        cur.min = cur.min.min(py);
        cur.max = cur.max.max(py);
    }
    flush(n, sx, sy, &mut cur, &mut out);
    out
}

/// Draws one chart into `area` with the given axes; returns where its data
/// went. Series longer than the chart's pixel width are decimated.
fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_label: &str,
    x: Range<f64>,
    y: Range<f64>,
) -> io::Result<DataPixels> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(65);
    if !panel.title.is_empty() {
        builder.caption(&panel.title, (FONT, 18).into_font());
    }
    let mut chart = builder
        .build_cartesian_2d(x.clone(), y.clone())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(panel.y_label.as_str())
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .bold_line_style(RGBColor(225, 225, 225))
        .max_light_lines(0)
        .draw()
        .map_err(plot_err)?;
    draw_markers(&mut chart, panel, &x, &y)?;
    let columns = chart.plotting_area().get_pixel_range().0.len().max(1);
    for (i, s) in panel.series.iter().enumerate() {
        if is_present(s) {
            draw_one_series(&mut chart, i, s, &x, columns)?;
        }
    }
    if !legend_entries(panel).is_empty() {
        chart
            .configure_series_labels()
            .position(if panel.legend_lower_right {
                SeriesLabelPosition::LowerRight
            } else {
                SeriesLabelPosition::UpperRight
            })
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
    }
    let (lo, hi) = extent(panel.series.iter(), true).unwrap_or((y.start, y.start));
    let px = |p: (f64, f64)| chart.backend_coord(&p);
    Ok(DataPixels {
        x: (px((x.start, lo)).0, px((x.end, lo)).0),
        y: (px((x.start, hi)).1, px((x.start, lo)).1),
    })
}

/// The chart [`draw_chart`] draws into: linear axes of `f64`.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The panel's markers within `x`: a dashed line each, labelled at the top.
fn draw_markers<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    panel: &Panel,
    x: &Range<f64>,
    y: &Range<f64>,
) -> io::Result<()> {
    let near = (x.end - x.start) * 0.08;
    for (k, m) in panel
        .markers
        .iter()
        .enumerate()
        .filter(|(_, m)| x.contains(&m.at_s))
    {
        let grey = RGBColor(110, 110, 110);
        // Labels of events close together stack downwards instead of
        // overprinting each other.
        let stacked = panel.markers[..k]
            .iter()
            .filter(|o| (o.at_s - m.at_s).abs() < near)
            .count() as f64;
        chart
            .draw_series([DashedPathElement::new(
                [(m.at_s, y.start), (m.at_s, y.end)],
                6,
                4,
                grey.stroke_width(1),
            )])
            .map_err(plot_err)?;
        chart
            .draw_series([Text::new(
                format!(" {}", m.label),
                (m.at_s, y.end - (y.end - y.start) * (0.02 + 0.06 * stacked)),
                (FONT, 12).into_font().color(&grey),
            )])
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Series `i`: its band, its line (decimated, with a min-max band, when
/// longer than the chart's `columns`), and its legend entry.
fn draw_one_series<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    i: usize,
    s: &Series,
    x: &Range<f64>,
    columns: usize,
) -> io::Result<()> {
    // The colour follows the series' index, so a path keeps its colour
    // in every panel whether or not another path is absent.
    let color = COLORS[i % COLORS.len()];
    for run in segments(&s.band.iter().map(|b| (b.0, b.1)).collect::<Vec<_>>()) {
        let (from, to) = (run[0].0, run[run.len() - 1].0);
        let upper = s.band.iter().filter(|b| b.0 >= from && b.0 <= to);
        let poly: Vec<(f64, f64)> = run
            .iter()
            .copied()
            .chain(upper.rev().map(|b| (b.0, b.2)))
            .collect();
        chart
            .draw_series([Polygon::new(poly, color.mix(0.2).filled())])
            .map_err(plot_err)?;
    }
    let points: Vec<(f64, f64)> = s.points.iter().filter(|p| finite(p)).copied().collect();
    let line: Vec<(f64, f64)> = if points.len() > columns {
        let cols = decimate(&points, x.clone(), columns);
        for run in segments(&cols.iter().map(|c| (c.x, c.min)).collect::<Vec<_>>()) {
            let (from, to) = (run[0].0, run[run.len() - 1].0);
            let upper = cols.iter().filter(|c| c.x >= from && c.x <= to);
            let poly: Vec<(f64, f64)> = run
                .iter()
                .copied()
                .chain(upper.rev().map(|c| (c.x, c.max)))
                .collect();
            chart
                .draw_series([Polygon::new(poly, color.mix(0.25).filled())])
                .map_err(plot_err)?;
        }
        cols.iter().map(|c| (c.x, c.mean)).collect()
    } else {
        points
    };
    let mut labelled = s.label.is_empty();
    for run in segments(&line) {
        // Segment by segment: a 2-pixel polyline's mitre joins spike far
        // outside the data where a jumpy series turns sharply. A run of
        // one point (a sparse sample) is a dot.
        let drawn = if run.len() == 1 {
            chart
                .draw_series([Circle::new(run[0], 2, color.filled())])
                .map_err(plot_err)?
        } else {
            chart
                .draw_series(
                    run.windows(2)
                        .map(|w| PathElement::new(vec![w[0], w[1]], color.stroke_width(2))),
                )
                .map_err(plot_err)?
        };
        if !labelled {
            labelled = true;
            drawn.label(s.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        }
    }
    Ok(())
}

/// A line plot of several series on shared axes (y from 0), with a legend
/// (series with an empty label get none). Returns where the data went.
pub fn plot_lines(
    file: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> io::Result<DataPixels> {
    let panel = Panel {
        y_label: y_label.to_owned(),
        series: series.to_vec(),
        ..Panel::default()
    };
    let px = plot_grid(file, title, x_label, &[vec![panel]])?;
    Ok(px[0][0])
}

/// A figure of `rows` × columns charts: one shared x axis for the whole
/// figure, one shared y axis per row (as the CCID5 paper's figures 5–7 put
/// CCID2 and CCID5 side by side). Returns each chart's data pixels.
pub fn plot_grid(
    file: &Path,
    title: &str,
    x_label: &str,
    rows: &[Vec<Panel>],
) -> io::Result<Vec<Vec<DataPixels>>> {
    ensure_font()?;
    let n_rows = rows.len().max(1);
    let n_cols = rows.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let width = if n_cols == 1 {
        WIDTH
    } else {
        640 * n_cols as u32
    };
    let height = if n_rows == 1 {
        HEIGHT
    } else {
        330 * n_rows as u32 + 40
    };
    let x = x_axis(extent(rows.iter().flatten().flat_map(|p| &p.series), false));
    let root = BitMapBackend::new(file, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let root = root
        .titled(title, (FONT, 22).into_font())
        .map_err(plot_err)?;
    let cells = root.split_evenly((n_rows, n_cols));
    let mut out = Vec::with_capacity(n_rows);
    for (r, row) in rows.iter().enumerate() {
        let y = row_y_axis(row);
        let mut px = Vec::with_capacity(row.len());
        for (c, panel) in row.iter().enumerate() {
            px.push(draw_chart(
                &cells[r * n_cols + c],
                panel,
                x_label,
                x.clone(),
                y.clone(),
            )?);
        }
        out.push(px);
    }
    root.present().map_err(plot_err)?;
    Ok(out)
}

/// Grouped bars: one group per label, one bar per entry of `legend` in each
/// group (e.g. "ours" and "published" per subflow), value printed centred on
/// top. A non-finite value draws no bar and prints "n/a".
pub fn plot_grouped_bars(
    file: &Path,
    title: &str,
    y_label: &str,
    legend: &[&str],
    groups: &[(String, Vec<f64>)],
) -> io::Result<()> {
    plot_grouped_bars_with_ranges(file, title, y_label, legend, groups, &[])
}

/// [`plot_grouped_bars`] with error bars: `ranges[g][j]` is the `(lo, hi)`
/// of bar `j` in group `g` (a published range, or a 95 % interval over
/// seeds); missing or `None`: no error bar.
pub fn plot_grouped_bars_with_ranges(
    file: &Path,
    title: &str,
    y_label: &str,
    legend: &[&str],
    groups: &[(String, Vec<f64>)],
    ranges: &[Vec<Option<(f64, f64)>>],
) -> io::Result<()> {
    ensure_font()?;
    let k = legend.len().max(1);
    let bars = BarLayout {
        ranges,
        bar_w: 0.8 / k as f64,
    };
    let y_max = bars.y_max(groups, if legend.len() > 1 { legend.len() } else { 0 });
    let n = groups.len().max(1);
    let root = BitMapBackend::new(file, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = frame(&root, title)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(plot_err)?;
    let labels: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            // Label only group centres (g + 0.5).
            let g = x - 0.5;
            if (g - g.round()).abs() < 1e-6 && g >= 0.0 {
                labels.get(g.round() as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| tick_label(*v))
        .y_desc(y_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .bold_line_style(RGBColor(225, 225, 225))
        .max_light_lines(0)
        .draw()
        .map_err(plot_err)?;
    for (j, name) in legend.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let rects = groups.iter().enumerate().filter_map(|(g, (_, vals))| {
            let v = *vals.get(j)?;
            let x0 = bars.left(g, j);
            v.is_finite()
                .then(|| Rectangle::new([(x0, 0.0), (x0 + bars.bar_w * 0.9, v)], color.filled()))
        });
        chart
            .draw_series(rects)
            .map_err(plot_err)?
            .label(name.to_string())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    draw_error_bars(&mut chart, &bars, groups.len(), k)?;
    draw_bar_values(&mut chart, &bars, groups, y_max)?;
    if legend.len() > 1 {
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

/// Where the bars of [`plot_grouped_bars_with_ranges`] go: bar `j` of
/// group `g` spans `[left, left + 0.9 bar_w]`; its centre carries the value
/// and the error bar.
struct BarLayout<'a> {
    ranges: &'a [Vec<Option<(f64, f64)>>],
    bar_w: f64,
}

impl BarLayout<'_> {
    /// The y axis' top: the highest bar or range plus room for the legend
    /// box in the upper right (`legend_rows` rows), which would otherwise
    /// cover the last group's bars.
    fn y_max(&self, groups: &[(String, Vec<f64>)], legend_rows: usize) -> f64 {
        let top = groups
            .iter()
            .enumerate()
            .flat_map(|(g, (_, vals))| {
                vals.iter()
                    .enumerate()
                    .map(move |(j, v)| self.range_of(g, j).map_or(*v, |r| r.1.max(*v)))
            })
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        if top > 0.0 {
            // About 6 % of the plot's height per legend row.
            top * (1.15 + 0.06 * legend_rows as f64)
        } else {
            1.0
        }
    }

    fn range_of(&self, g: usize, j: usize) -> Option<(f64, f64)> {
        self.ranges.get(g).and_then(|r| r.get(j).copied().flatten())
    }

    fn left(&self, g: usize, j: usize) -> f64 {
        g as f64 + 0.1 + j as f64 * self.bar_w
    }

    fn centre(&self, g: usize, j: usize) -> f64 {
        self.left(g, j) + self.bar_w * 0.45
    }
}

/// An error bar with whiskers for each bar that has a finite range.
fn draw_error_bars<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    bars: &BarLayout,
    groups: usize,
    k: usize,
) -> io::Result<()> {
    let whisker = bars.bar_w * 0.15;
    for g in 0..groups {
        for j in 0..k {
            let Some((lo, hi)) = bars
                .range_of(g, j)
                .filter(|r| r.0.is_finite() && r.1.is_finite())
            else {
                continue;
            };
            let c = bars.centre(g, j);
            chart
                .draw_series([
                    PathElement::new(vec![(c, lo), (c, hi)], BLACK.stroke_width(2)),
                    PathElement::new(
                        vec![(c - whisker, lo), (c + whisker, lo)],
                        BLACK.stroke_width(2),
                    ),
                    PathElement::new(
                        vec![(c - whisker, hi), (c + whisker, hi)],
                        BLACK.stroke_width(2),
                    ),
                ])
                .map_err(plot_err)?;
        }
    }
    Ok(())
}

/// Each bar's value centred above it (and above its error bar); "n/a" for
/// a non-finite one.
fn draw_bar_values<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    bars: &BarLayout,
    groups: &[(String, Vec<f64>)],
    y_max: f64,
) -> io::Result<()> {
    let text_style =
        TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    chart
        .draw_series(groups.iter().enumerate().flat_map(|(g, (_, vals))| {
            let text_style = text_style.clone();
            vals.iter().enumerate().map(move |(j, v)| {
                let (text, y) = if v.is_finite() {
                    (tick_label((v * 10.0).round() / 10.0), *v)
                } else {
                    ("n/a".to_owned(), 0.0)
                };
                let top = bars.range_of(g, j).map_or(y, |r| r.1.max(y));
                Text::new(
                    text,
                    (bars.centre(g, j), top + y_max * 0.01),
                    text_style.clone(),
                )
            })
        }))
        .map_err(plot_err)?;
    Ok(())
}

/// A bar chart of one scalar per run (e.g. goodput per configuration).
pub fn plot_bars(
    file: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> io::Result<()> {
    let groups: Vec<(String, Vec<f64>)> = bars.iter().map(|(l, v)| (l.clone(), vec![*v])).collect();
    plot_grouped_bars(file, title, y_label, &[""], &groups)
}

/// The frame of single-chart plots: title, margin and axis-label areas.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'static, DB> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, (FONT, 22).into_font())
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65);
    builder
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

    /// `(width, height, RGB pixels)` of a PNG file.
    fn decode(path: &std::path::Path) -> (usize, usize, Vec<[u8; 3]>) {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let (w, h) = (info.width as usize, info.height as usize);
        let bpp = info.line_size / w;
        assert!(bpp >= 3, "8-bit RGB(A) expected, got {info:?}");
        let px = (0..w * h)
            .map(|i| [buf[i * bpp], buf[i * bpp + 1], buf[i * bpp + 2]])
            .collect();
        (w, h, px)
    }

    /// The E4/E6 bug: 10 000 jumpy points in 0–580 Mbit/s drawn with a wide
    /// stroke left the frame (below zero, above the top). Every pixel of the
    /// series colour (blue; nothing else in the plot is) must lie inside the
    /// plot's x extent and within the pixel band of the data's y range.
    #[test]
    fn every_plotted_pixel_of_a_long_jumpy_series_lies_in_the_data_range() {
        let d = tmp("range");
        // 1 000 points (E4 --quick, E6) and 10 000 (E4's 1000 s), jumping
        // across 0–580 Mbit/s as E4's goodput does.
        for n in [1_000u64, 10_000] {
            let points: Vec<(f64, f64)> = (0..n)
                .map(|i| {
                    let v = match i % 7 {
                        0 => 0.0,
                        1 => 580.0,
                        _ => ((i * 7919) % 581) as f64,
                    };
                    (i as f64 * 0.1, v)
                })
                .collect();
            let series = [Series {
                label: String::new(),
                points,
                ..Series::default()
            }];
            let file = d.join(format!("jumpy-{n}.png"));
            let px = plot_lines(&file, "jumpy", "time (s)", "Mbit/s", &series).unwrap();
            let (w, h, pixels) = decode(&file);
            let mut blue = 0;
            for (i, p) in pixels.iter().enumerate() {
                let (x, y) = ((i % w) as i32, (i / w) as i32);
                if i32::from(p[2]) - i32::from(p[0]) < 30 {
                    continue;
                }
                blue += 1;
                assert!(
                    x >= px.x.0 - 1 && x <= px.x.1 + 1 && y >= px.y.0 - 1 && y <= px.y.1 + 1,
                    "{n} points: series pixel ({x}, {y}) outside the data band x {:?}, y {:?} ({w}×{h})",
                    px.x,
                    px.y
                );
            }
            // The band spans the plot (0 and 580 both occur) and was drawn.
            assert!(blue > 1000, "{n} points: {blue} series pixels");
            assert!(px.y.1 - px.y.0 > 300, "{px:?}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The figure defects a review found, one assertion per class.
    #[test]
    fn ticks_gaps_legends_and_cdf_axes_follow_paper_conventions() {
        // Tick labels: no ".0".
        assert_eq!(
            [0.0, 10.0, 0.5, 2.25, -0.0001, 1e3].map(tick_label),
            ["0", "10", "0.5", "2.25", "0", "1000"]
        );
        // A span without data (an outage) and a NaN both end a line.
        let mut pts: Vec<(f64, f64)> = (0..200).map(|i| (i as f64 * 0.1, 20.0)).collect();
        pts.extend((350..600).map(|i| (i as f64 * 0.1, 20.0)));
        let runs = segments(&pts);
        assert_eq!(runs.len(), 2);
        assert!((runs[0].last().unwrap().0 - 19.9).abs() < 1e-9);
        assert!((runs[1][0].0 - 35.0).abs() < 1e-9);
        assert_eq!(
            segments(&[(0.0, 1.0), (0.1, f64::NAN), (0.2, 1.0)]).len(),
            2
        );
        // Absent series (all zero, or no sample) are not in the legend.
        let panel = Panel {
            series: vec![
                Series {
                    label: "p1".into(),
                    points: vec![(0.0, 0.0), (1.0, 3.0)],
                    ..Series::default()
                },
                Series {
                    label: "p2 (unused)".into(),
                    points: vec![(0.0, 0.0), (1.0, 0.0)],
                    ..Series::default()
                },
                Series {
                    label: "p3 (no samples)".into(),
                    ..Series::default()
                },
            ],
            ..Panel::default()
        };
        assert_eq!(legend_entries(&panel), ["p1"]);
        // A CDF's axis ends at 1 (plus room for the line), not 1.25.
        let cdf = Panel {
            series: vec![Series {
                label: "owd".into(),
                points: vec![(10.0, 0.0), (20.0, 1.0)],
                ..Series::default()
            }],
            y_range: Some((0.0, 1.0)),
            ..Panel::default()
        };
        let y = row_y_axis(&[cdf]);
        assert!(y.start == 0.0 && y.end <= 1.05, "{y:?}");
        // Other panels keep headroom for the legend.
        assert_eq!(row_y_axis(&[panel]).end, 3.75);
    }

    /// No pixel of a line is drawn inside a span without data.
    #[test]
    fn nothing_is_drawn_across_a_span_without_data() {
        let d = tmp("gap");
        let mut pts: Vec<(f64, f64)> = (0..200).map(|i| (i as f64 * 0.1, 20.0)).collect();
        pts.extend((350..600).map(|i| (i as f64 * 0.1, 20.0)));
        let file = d.join("gap.png");
        let series = [Series {
            label: String::new(),
            points: pts,
            ..Series::default()
        }];
        let px = plot_lines(&file, "gap", "time (s)", "ms", &series).unwrap();
        let (w, _h, pixels) = decode(&file);
        // Pixel column of time t.
        let col = |t: f64| px.x.0 as f64 + (px.x.1 - px.x.0) as f64 * t / 59.9;
        let (from, to) = (col(21.0) as usize, col(34.0) as usize);
        let blue_in_gap = pixels
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                let x = i % w;
                x > from && x < to && i32::from(p[2]) - i32::from(p[0]) > 60
            })
            .count();
        let blue_before = pixels
            .iter()
            .enumerate()
            .filter(|(i, p)| i % w < from && i32::from(p[2]) - i32::from(p[0]) > 60)
            .count();
        assert!(
            blue_before > 200,
            "the line is drawn before the gap: {blue_before}"
        );
        assert_eq!(blue_in_gap, 0, "pixels drawn in the gap");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn decimation_keeps_each_columns_min_max_and_mean() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, (i % 10) as f64)).collect();
        let cols = decimate(&pts, 0.0..1000.0, 100);
        assert_eq!(cols.len(), 100);
        for c in &cols {
            assert_eq!((c.min, c.max, c.mean), (0.0, 9.0, 4.5), "{c:?}");
        }
        assert_eq!(cols[0].x, 4.5);
        // Fewer points than columns: one column per point, values kept.
        let few = decimate(&pts[..5], 0.0..1000.0, 100);
        assert_eq!(few.len(), 1, "five points in the first column");
        assert!(decimate(&[(0.0, f64::NAN)], 0.0..1.0, 10).is_empty());
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
                ..Series::default()
            },
            Series {
                label: "ccid5".into(),
                points: vec![],
                ..Series::default()
            },
        ];
        plot_lines(&d.join("c.png"), "RTT", "time (s)", "ms", &s).unwrap();
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
