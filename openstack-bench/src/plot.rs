//! Every figure of the simulator and the service benchmark, drawn with plotters into PNG and
//! SVG side by side in the embedded font ([`crate::fonts`]).
//!
//! Readable by construction: the Okabe–Ito colour-blind-safe palette with a distinct marker per
//! series (so lines that coincide still show), the papers' policies always in the same colour
//! and marker, ticks where the data are (scheduler counts 1, 5, 10, 20, 50; host counts on a
//! log axis), integer labels wherever the step allows, and figures of several panels when two
//! quantities need two axes.

use plotters::coord::ranged1d::Ranged;
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters_backend::{BackendCoord, DrawingErrorKind};
use std::path::Path;

/// The Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), black last but one and
/// yellow last: yellow is the weakest on white and is drawn with a dark outline.
pub const OKABE_ITO: [RGBColor; 8] = [
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 114, 178),   // blue
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];

/// A neutral grey for reference points (APSR beside the policies it is compared with).
pub const GREY: RGBColor = RGBColor(110, 110, 110);

/// A marker shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
    HollowCircle,
    HollowSquare,
    HollowTriangle,
    Plus,
    HollowDiamond,
}

/// Markers in the order series take them when they have no fixed style.
pub const MARKERS: [Marker; 10] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
    Marker::Cross,
    Marker::HollowCircle,
    Marker::HollowSquare,
    Marker::HollowTriangle,
    Marker::Plus,
    Marker::HollowDiamond,
];

/// Colour, marker and line of one series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    pub colour: RGBColor,
    pub marker: Marker,
    /// A line through the points (false: markers only).
    pub line: bool,
}

impl Style {
    /// The `i`-th style of a chart whose series have no fixed style.
    pub fn nth(i: usize) -> Style {
        Style {
            colour: OKABE_ITO[i % OKABE_ITO.len()],
            marker: MARKERS[i % MARKERS.len()],
            line: true,
        }
    }

    /// The fixed style of a policy or backend of the papers, the same in every chart.
    pub fn named(name: &str) -> Option<Style> {
        let (c, marker) = match name {
            // Experiment A's seven use neither orange nor grey, so no two of them (nor APSR,
            // grey) are near in colour; best_fit (experiment B only) takes orange.
            "random" => (0, Marker::Circle),
            "first_fit" => (1, Marker::Square),
            "worst_fit" => (2, Marker::Triangle),
            "dist_from_diag" => (3, Marker::Diamond),
            "adaptive" => (6, Marker::Cross),
            "ffr" => (5, Marker::HollowSquare),
            "wfr" => (7, Marker::HollowTriangle),
            "best_fit" => (4, Marker::HollowCircle),
            "filter" => (1, Marker::Square),
            "caching" => (6, Marker::Cross),
            "asc" => (2, Marker::Triangle),
            "apsr" => (0, Marker::Circle),
            _ => return None,
        };
        Some(Style {
            colour: OKABE_ITO[c],
            marker,
            line: true,
        })
    }
}

/// One series of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// `None`: the policy's own style when the label names one, else the next free one.
    pub style: Option<Style>,
}

impl Series {
    /// A line with markers, styled by its label when that names a policy.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            points,
            style: None,
        }
    }

    /// The same series in `style`.
    pub fn styled(self, style: Style) -> Self {
        Series {
            style: Some(style),
            ..self
        }
    }
}

/// How the x axis is scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// Where the legend goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    UpperLeft,
    UpperRight,
    LowerRight,
    None,
}

/// One panel: axes, ticks and series.
#[derive(Clone, Debug)]
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// A log x axis (host counts, refresh intervals, scheduler counts).
    pub log_x: bool,
    pub series: &'a [Series],
    /// Ticks on a log x axis with their labels (default: 1, 2, 5 × 10^k); a linear axis takes
    /// round values of its own, labelled as integers when they are.
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// The top of the y axis (default: the data's maximum with a margin).
    pub y_max: Option<f64>,
    pub legend: Legend,
}

impl<'a> Chart<'a> {
    /// A chart with default ticks, the y axis from 0, the legend upper left.
    pub fn new(title: &'a str, x_label: &'a str, y_label: &'a str, series: &'a [Series]) -> Self {
        Chart {
            title,
            x_label,
            y_label,
            log_x: false,
            series,
            x_ticks: None,
            y_max: None,
            legend: Legend::UpperLeft,
        }
    }
}

/// Series whose points are all equal to an earlier one's are folded into it, the label
/// naming both ("worst_fit = adaptive"), so no line hides under another.
pub fn merge_equal(series: Vec<Series>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for s in series {
        match out
            .iter_mut()
            .find(|o| o.points == s.points && !s.points.is_empty())
        {
            Some(o) => {
                let style = o.style.or_else(|| Style::named(&o.label));
                o.label = format!("{} = {}", o.label, s.label);
                o.style = style;
            }
            None => out.push(s),
        }
    }
    out
}

/// Ticks labelled with the integer they are at.
pub fn integer_ticks(values: &[f64]) -> Vec<(f64, String)> {
    values.iter().map(|v| (*v, format!("{v:.0}"))).collect()
}

/// Panels side by side (`columns` > 1) or one above the other, under one title.
pub struct Figure<'a> {
    pub title: &'a str,
    pub panels: Vec<Chart<'a>>,
    pub columns: usize,
    pub size: (u32, u32),
}

/// Writes a one-panel chart as `<stem>.png` and `<stem>.svg` in `dir`.
pub fn write(dir: &Path, stem: &str, chart: &Chart) -> anyhow::Result<()> {
    write_figure(
        dir,
        stem,
        &Figure {
            title: "",
            panels: vec![chart.clone()],
            columns: 1,
            size: (900, 560),
        },
    )
}

/// Writes a figure as `<stem>.png` and `<stem>.svg` in `dir`.
pub fn write_figure(dir: &Path, stem: &str, figure: &Figure) -> anyhow::Result<()> {
    crate::fonts::register()?;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = BitMapBackend::new(&png, figure.size).into_drawing_area();
        draw_figure(&root, figure)?;
        root.present()
            .map_err(|e| anyhow::anyhow!("{png:?}: {e}"))?;
    }
    let root = SVGBackend::new(&svg, figure.size).into_drawing_area();
    draw_figure(&root, figure)?;
    root.present()
        .map_err(|e| anyhow::anyhow!("{svg:?}: {e}"))?;
    Ok(())
}

fn draw_figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &Figure,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plot: {e:?}");
    root.fill(&WHITE).map_err(err)?;
    let body = if figure.title.is_empty() {
        root.clone()
    } else {
        root.titled(figure.title, (crate::fonts::FAMILY, 24))
            .map_err(err)?
    };
    let columns = figure.columns.clamp(1, figure.panels.len().max(1));
    let rows = figure.panels.len().div_ceil(columns).max(1);
    let areas = body.split_evenly((rows, columns));
    for (area, chart) in areas.iter().zip(&figure.panels) {
        draw_panel(area, chart)?;
    }
    Ok(())
}

/// x range, y top.
fn bounds(chart: &Chart) -> (f64, f64, f64) {
    let pts = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in pts {
        if !x.is_finite() || !y.is_finite() {
            continue;
        }
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if let Some(ticks) = &chart.x_ticks {
        for (t, _) in ticks {
            x0 = x0.min(*t);
            x1 = x1.max(*t);
        }
    }
    if !x0.is_finite() {
        return (0.0, 1.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y_top = chart
        .y_max
        .unwrap_or(if y1 > 0.0 { y1 * 1.08 } else { 1.0 });
    (x0, x1, y_top)
}

/// 1, 2, 5 × 10^k ticks from `lo` to `hi`, or powers of ten alone when they are many.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let lo = lo.max(1e-9);
    let (k0, k1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mults: &[f64] = if k1 - k0 > 4 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let mut out = Vec::new();
    for k in k0..=k1 {
        for m in mults {
            let v = m * 10f64.powi(k);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                let label = if v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v}")
                };
                out.push((v, label));
            }
        }
    }
    out
}

fn label_of(ticks: &[(f64, String)], v: f64) -> String {
    ticks
        .iter()
        .min_by(|a, b| (a.0 - v).abs().total_cmp(&(b.0 - v).abs()))
        .map(|t| t.1.clone())
        .unwrap_or_default()
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err =
        |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plot {}: {e:?}", chart.title);
    let (x0, x1, y1) = bounds(chart);
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(64);
    if !chart.title.is_empty() {
        builder.caption(chart.title, (crate::fonts::FAMILY, 20));
    }
    if chart.log_x {
        let (lo, hi) = (x0.max(1e-6) / 1.15, x1 * 1.15);
        let ticks = chart.x_ticks.clone().unwrap_or_else(|| log_ticks(lo, hi));
        let x_range = (lo..hi)
            .log_scale()
            .with_key_points(ticks.iter().map(|t| t.0).collect());
        let ctx = builder.build_cartesian_2d(x_range, 0.0..y1).map_err(err)?;
        let x_fmt = |v: &f64| label_of(&ticks, *v);
        fill(ctx, chart, &x_fmt).map_err(err)
    } else {
        let pad = (x1 - x0) * 0.03;
        let ctx = builder
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0.0..y1)
            .map_err(err)?;
        let x_fmt = |v: &f64| short(*v);
        fill(ctx, chart, &x_fmt).map_err(err)
    }
}

/// A tick label: an integer when the value is one, else the fewest decimals (up to 3).
pub fn short(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

type Ctx<'a, DB, X, Y> = ChartContext<'a, DB, Cartesian2d<X, Y>>;

fn fill<'a, DB, X>(
    mut ctx: Ctx<'a, DB, X, plotters::coord::types::RangedCoordf64>,
    chart: &Chart,
    x_fmt: &dyn Fn(&f64) -> String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let y_fmt = |v: &f64| short(*v);
    ctx.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .x_labels(12)
        .y_labels(9)
        .x_label_formatter(x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((crate::fonts::FAMILY, 15))
        .axis_desc_style((crate::fonts::FAMILY, 17))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    let styles = styles_of(chart.series);
    for (s, style) in chart.series.iter().zip(styles) {
        let colour = style.colour;
        let weak = colour == OKABE_ITO[7];
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        let width = if weak { 3 } else { 2 };
        if style.line && points.len() > 1 {
            if weak {
                // A thin dark edge under the yellow line.
                ctx.draw_series(LineSeries::new(
                    points.clone(),
                    RGBColor(120, 110, 0).stroke_width(width + 2),
                ))?;
            }
            ctx.draw_series(LineSeries::new(points.clone(), colour.stroke_width(width)))?;
        }
        let marker = style.marker;
        let anno = ctx.draw_series(points.iter().map(|p| marker_at(marker, *p, colour, 0)))?;
        let half = if style.line { 12 } else { 0 };
        anno.label(s.label.as_str())
            .legend(move |(x, y)| marker_at(marker, (x + 12, y), colour, half));
    }
    let position = match chart.legend {
        Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
        Legend::UpperRight => SeriesLabelPosition::UpperRight,
        Legend::LowerRight => SeriesLabelPosition::LowerRight,
        Legend::None => return Ok(()),
    };
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((crate::fonts::FAMILY, 15))
        .legend_area_size(30)
        .position(position)
        .draw()
}

/// A marker of `kind` at `at`, in `colour` (yellow with a dark edge), on a horizontal line
/// of `half` pixels each side (the legend's sample; 0 for none).
pub fn marker_at<C>(kind: Marker, at: C, colour: RGBColor, half: i32) -> MarkerElement<C> {
    MarkerElement {
        at,
        kind,
        colour,
        half,
    }
}

/// One marker, drawn in pixels around its point.
pub struct MarkerElement<C> {
    at: C,
    kind: Marker,
    colour: RGBColor,
    half: i32,
}

impl<'b, C> PointCollection<'b, C> for &'b MarkerElement<C> {
    type Point = &'b C;
    type IntoIter = std::iter::Once<&'b C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for MarkerElement<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = points.next() else {
            return Ok(());
        };
        let r = 5;
        let colour = self.colour;
        let fill = colour.filled();
        let edge = if colour == OKABE_ITO[7] {
            RGBColor(150, 135, 0).stroke_width(2)
        } else {
            colour.stroke_width(2)
        };
        let thick = colour.stroke_width(3);
        if self.half > 0 {
            backend.draw_line(
                (x - self.half, y),
                (x + self.half, y),
                &colour.stroke_width(2),
            )?;
        }
        let at = |dx: i32, dy: i32| (x + dx, y + dy);
        let triangle = [at(0, -r - 1), at(r + 1, r), at(-r - 1, r)];
        let diamond = [at(0, -r - 1), at(r + 1, 0), at(0, r + 1), at(-r - 1, 0)];
        let outline = |backend: &mut DB, pts: &[BackendCoord]| {
            let mut closed = pts.to_vec();
            closed.push(pts[0]);
            backend.draw_path(closed, &edge)
        };
        let (ul, br) = (at(-r + 1, -r + 1), at(r - 1, r - 1));
        match self.kind {
            Marker::Circle => {
                backend.draw_circle((x, y), r as u32, &fill, true)?;
                backend.draw_circle((x, y), r as u32, &edge, false)
            }
            Marker::HollowCircle => backend.draw_circle((x, y), r as u32, &edge, false),
            Marker::Square => {
                backend.draw_rect(ul, br, &fill, true)?;
                backend.draw_rect(ul, br, &edge, false)
            }
            Marker::HollowSquare => backend.draw_rect(ul, br, &edge, false),
            Marker::Triangle => {
                backend.fill_polygon(triangle, &fill)?;
                outline(backend, &triangle)
            }
            Marker::HollowTriangle => outline(backend, &triangle),
            Marker::Diamond => {
                backend.fill_polygon(diamond, &fill)?;
                outline(backend, &diamond)
            }
            Marker::HollowDiamond => outline(backend, &diamond),
            Marker::Cross => {
                backend.draw_line(at(-r, -r), at(r, r), &thick)?;
                backend.draw_line(at(-r, r), at(r, -r), &thick)
            }
            Marker::Plus => {
                backend.draw_line(at(-r - 1, 0), at(r + 1, 0), &thick)?;
                backend.draw_line(at(0, -r - 1), at(0, r + 1), &thick)
            }
        }
    }
}

/// Each series' style: its own, its policy's, or the next palette slot no other series of the
/// chart uses.
pub fn styles_of(series: &[Series]) -> Vec<Style> {
    let fixed: Vec<Option<Style>> = series
        .iter()
        .map(|s| s.style.or_else(|| Style::named(&s.label)))
        .collect();
    let taken: Vec<RGBColor> = fixed.iter().flatten().map(|s| s.colour).collect();
    let mut free = (0..OKABE_ITO.len() * 2)
        .map(Style::nth)
        .filter(|s| !taken.contains(&s.colour));
    fixed
        .into_iter()
        .enumerate()
        .map(|(i, f)| f.unwrap_or_else(|| free.next().unwrap_or_else(|| Style::nth(i))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_integers_when_the_value_is_one() {
        let cases = [
            (5.0, "5"),
            (0.0, "0"),
            (2.5, "2.5"),
            (0.125, "0.125"),
            (10000.0, "10000"),
        ];
        for (v, want) in cases {
            assert_eq!(short(v), want);
        }
    }

    #[test]
    fn log_ticks_cover_host_counts_with_integers() {
        let t = log_ticks(90.0, 11_000.0);
        let labels: Vec<&str> = t.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["100", "200", "500", "1000", "2000", "5000", "10000"]
        );
    }

    #[test]
    fn policies_keep_their_style_and_no_two_share_colour_and_marker() {
        let names = [
            "random",
            "first_fit",
            "worst_fit",
            "dist_from_diag",
            "adaptive",
            "ffr",
            "wfr",
            "best_fit",
        ];
        let styles: Vec<Style> = names.iter().map(|n| Style::named(n).unwrap()).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a.colour, b.colour);
                assert_ne!(a.marker, b.marker);
            }
        }
    }
}
