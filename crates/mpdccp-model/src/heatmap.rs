//! A heat map: a table of values as coloured cells, each value printed in
//! its cell. Colours are judged against a goal: below it from dark red
//! (0) to pale yellow (just short), at or above it from pale green to green,
//! so a failing cell stands out however close it is.

use std::io;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{ensure_font, plot_err, FONT};

/// What to draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeatMap {
    pub title: String,
    /// A line under the title (what the colour and the numbers mean).
    pub subtitle: String,
    pub row_labels: Vec<String>,
    pub col_labels: Vec<String>,
    /// `values[row][col]`; `None` draws a grey cell with "n/a".
    pub values: Vec<Vec<Option<f64>>>,
    /// A second, smaller line per cell (e.g. the goodput), or empty.
    pub notes: Vec<Vec<String>>,
    /// `marked[row][col]`: a black corner on the cell (e.g. it misses
    /// another goal than the one the colour shows).
    pub marked: Vec<Vec<bool>>,
    /// Values at or above this are good.
    pub goal: f64,
    /// The value drawn in full green (and beyond).
    pub best: f64,
}

/// Colour of value `v` against `goal`, saturating at `best`.
pub fn color(v: Option<f64>, goal: f64, best: f64) -> RGBColor {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return RGBColor(200, 200, 200);
    };
    let lerp = |a: (f64, f64, f64), b: (f64, f64, f64), t: f64| {
        let t = t.clamp(0.0, 1.0);
        RGBColor(
            (a.0 + (b.0 - a.0) * t).round() as u8,
            (a.1 + (b.1 - a.1) * t).round() as u8,
            (a.2 + (b.2 - a.2) * t).round() as u8,
        )
    };
    if v < goal {
        // Dark red at 0, orange half-way, pale yellow just short of the goal.
        let t = v / goal.max(1e-9);
        if t < 0.5 {
            lerp((165.0, 0.0, 38.0), (244.0, 109.0, 67.0), t / 0.5)
        } else {
            lerp((244.0, 109.0, 67.0), (254.0, 224.0, 139.0), (t - 0.5) / 0.5)
        }
    } else {
        lerp(
            (217.0, 239.0, 139.0),
            (26.0, 152.0, 80.0),
            (v - goal) / (best - goal).max(1e-9),
        )
    }
}

/// A value with two decimals, rounded down below the goal so a cell that
/// misses it never reads as meeting it (0.9496 shows 0.94, not 0.95).
pub fn label(v: f64, goal: f64) -> String {
    if v < goal {
        format!("{:.2}", (v * 100.0).floor() / 100.0)
    } else {
        format!("{v:.2}")
    }
}

const CELL_W: i32 = 96;
const CELL_H: i32 = 34;
const LABEL_W: i32 = 230;
const TOP: i32 = 96;
const BOTTOM: i32 = 70;

/// Writes the heat map as a PNG.
pub fn plot_heatmap(file: &Path, map: &HeatMap) -> io::Result<()> {
    ensure_font()?;
    let rows = map.row_labels.len() as i32;
    let cols = map.col_labels.len() as i32;
    let width = (LABEL_W + CELL_W * cols.max(4) + 20) as u32;
    let height = (TOP + CELL_H * rows.max(1) + BOTTOM) as u32;
    let root = BitMapBackend::new(file, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    root.draw(&text(&map.title, 10, 8, 20, (HPos::Left, VPos::Top)))
        .map_err(plot_err)?;
    root.draw(&text(&map.subtitle, 10, 36, 13, (HPos::Left, VPos::Top)))
        .map_err(plot_err)?;
    for (c, label) in map.col_labels.iter().enumerate() {
        let x = LABEL_W + CELL_W * c as i32 + CELL_W / 2;
        root.draw(&text(label, x, TOP - 8, 14, (HPos::Center, VPos::Bottom)))
            .map_err(plot_err)?;
    }
    for (r, row_label) in map.row_labels.iter().enumerate() {
        let y0 = TOP + CELL_H * r as i32;
        root.draw(&text(
            row_label,
            LABEL_W - 8,
            y0 + CELL_H / 2,
            13,
            (HPos::Right, VPos::Center),
        ))
        .map_err(plot_err)?;
        for c in 0..cols as usize {
            draw_cell(&root, map, r, c, y0)?;
        }
    }
    draw_scale(&root, map, rows, cols)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// `s` at pixel `(x, y)`, black, `size` points, anchored at `anchor`.
fn text(
    s: &str,
    x: i32,
    y: i32,
    size: u32,
    anchor: (HPos, VPos),
) -> Text<'static, (i32, i32), String> {
    Text::new(
        s.to_owned(),
        (x, y),
        (FONT, size)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(anchor.0, anchor.1)),
    )
}

/// Cell `(r, c)` of the row whose top is at `y0`: its colour, a corner
/// mark when marked, its value and note.
fn draw_cell<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    map: &HeatMap,
    r: usize,
    c: usize,
    y0: i32,
) -> io::Result<()> {
    let v = map
        .values
        .get(r)
        .and_then(|row| row.get(c))
        .copied()
        .flatten();
    let x0 = LABEL_W + CELL_W * c as i32;
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + CELL_W - 1, y0 + CELL_H - 1)],
        color(v, map.goal, map.best).filled(),
    ))
    .map_err(plot_err)?;
    if map
        .marked
        .get(r)
        .and_then(|row| row.get(c))
        .copied()
        .unwrap_or(false)
    {
        let x1 = x0 + CELL_W - 1;
        root.draw(&Polygon::new(
            vec![(x1 - 11, y0), (x1, y0), (x1, y0 + 11)],
            BLACK.filled(),
        ))
        .map_err(plot_err)?;
    }
    let note = map
        .notes
        .get(r)
        .and_then(|row| row.get(c))
        .map_or("", String::as_str);
    let main = v
        .filter(|v| v.is_finite())
        .map_or("n/a".into(), |v| label(v, map.goal));
    let (cx, cy) = (x0 + CELL_W / 2, y0 + CELL_H / 2);
    if note.is_empty() {
        root.draw(&text(&main, cx, cy, 14, (HPos::Center, VPos::Center)))
            .map_err(plot_err)?;
    } else {
        root.draw(&text(&main, cx, cy - 7, 14, (HPos::Center, VPos::Center)))
            .map_err(plot_err)?;
        root.draw(&text(note, cx, cy + 9, 11, (HPos::Center, VPos::Center)))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// The scale below the cells: 0 .. best in 24 steps, the goal marked.
fn draw_scale<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    map: &HeatMap,
    rows: i32,
    cols: i32,
) -> io::Result<()> {
    let y0 = TOP + CELL_H * rows.max(1) + 22;
    let steps = 24;
    let step_w = (CELL_W * cols.max(4)) / steps;
    for i in 0..steps {
        let v = map.best * (i as f64 + 0.5) / steps as f64;
        let x0 = LABEL_W + step_w * i;
        root.draw(&Rectangle::new(
            [(x0, y0), (x0 + step_w, y0 + 14)],
            color(Some(v), map.goal, map.best).filled(),
        ))
        .map_err(plot_err)?;
    }
    root.draw(&text(
        "scale",
        LABEL_W - 8,
        y0 + 7,
        13,
        (HPos::Right, VPos::Center),
    ))
    .map_err(plot_err)?;
    let scale_w = step_w * steps;
    for (v, label) in [
        (0.0, "0".to_owned()),
        (map.goal, format!("{:.2} (goal)", map.goal)),
        (map.best, format!("≥ {:.2}", map.best)),
    ] {
        let x = LABEL_W + (scale_w as f64 * v / map.best.max(1e-9)).round() as i32;
        root.draw(&text(&label, x, y0 + 18, 12, (HPos::Center, VPos::Top)))
            .map_err(plot_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_below_the_goal_are_warm_and_above_are_green() {
        let below = color(Some(0.9), 0.95, 1.2);
        let above = color(Some(0.96), 0.95, 1.2);
        assert!(below.0 > below.1 / 2 && below.2 < 150, "{below:?}");
        assert!(above.1 > above.0, "{above:?}");
        assert_eq!(color(Some(5.0), 0.95, 1.2), RGBColor(26, 152, 80));
        assert_eq!(color(None, 0.95, 1.2), RGBColor(200, 200, 200));
        assert_eq!(label(0.9496, 0.95), "0.94");
        assert_eq!(label(0.9504, 0.95), "0.95");
        assert_eq!(label(1.806, 0.95), "1.81");
    }
}
