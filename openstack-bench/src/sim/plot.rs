//! The figures, drawn with plotters into PNG and SVG side by side, in the embedded font.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart: `x` on a log axis when `log_x`.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub series: &'a [Series],
}

/// Writes `<stem>.png` and `<stem>.svg` in `dir`.
pub fn write(dir: &Path, stem: &str, chart: &Chart) -> anyhow::Result<()> {
    crate::fonts::register()?;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = BitMapBackend::new(&png, (900, 560)).into_drawing_area();
        draw(&root, chart)?;
        root.present()
            .map_err(|e| anyhow::anyhow!("{png:?}: {e}"))?;
    }
    let root = SVGBackend::new(&svg, (900, 560)).into_drawing_area();
    draw(&root, chart)?;
    root.present()
        .map_err(|e| anyhow::anyhow!("{svg:?}: {e}"))?;
    Ok(())
}

fn bounds(chart: &Chart) -> (f64, f64, f64) {
    let pts = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        return (0.0, 1.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    (x0, x1, if y1 > 0.0 { y1 * 1.08 } else { 1.0 })
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err =
        |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plot {}: {e:?}", chart.title);
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1, y1) = bounds(chart);
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(chart.title, (crate::fonts::FAMILY, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    if chart.log_x {
        let mut ctx = builder
            .build_cartesian_2d((x0.max(1e-3)..x1).log_scale(), 0.0..y1)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .draw()
            .map_err(err)?;
        for (i, s) in chart.series.iter().enumerate() {
            let color = Palette99::pick(i).stroke_width(2);
            ctx.draw_series(LineSeries::new(s.points.iter().copied(), color))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], Palette99::pick(i))
                });
        }
        legend(&mut ctx).map_err(err)?;
    } else {
        let mut ctx = builder.build_cartesian_2d(x0..x1, 0.0..y1).map_err(err)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .draw()
            .map_err(err)?;
        for (i, s) in chart.series.iter().enumerate() {
            let color = Palette99::pick(i).stroke_width(2);
            ctx.draw_series(LineSeries::new(s.points.iter().copied(), color))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], Palette99::pick(i))
                });
        }
        legend(&mut ctx).map_err(err)?;
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    ctx: &mut ChartContext<'a, DB, CT>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}
