//! SVG plots with plotters' SVG backend (no fonts needed: text is emitted as
//! SVG `<text>`, sized by plotters' built-in estimate).

use crate::ReportError;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// One line of a plot.
pub(crate) struct Series {
    /// Legend entry (the engine).
    pub(crate) name: String,
    /// Points in x order.
    pub(crate) points: Vec<(f64, f64)>,
}

/// A stable colour per engine, so every plot uses the same key.
fn colour(name: &str, i: usize) -> RGBColor {
    match name {
        "processes" => RGBColor(31, 119, 180),
        "threads" => RGBColor(255, 127, 14),
        "select" => RGBColor(44, 160, 44),
        "poll" => RGBColor(214, 39, 40),
        "epoll" => RGBColor(148, 103, 189),
        _ => [
            RGBColor(140, 86, 75),
            RGBColor(227, 119, 194),
            RGBColor(127, 127, 127),
            RGBColor(188, 189, 34),
            RGBColor(23, 190, 207),
        ][i % 5],
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

/// Extent of the data, padded; for a log axis kept positive.
fn extent(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.3, hi * 1.3)
    } else {
        let pad = ((hi - lo) * 0.05).max(1e-9);
        (lo - pad, hi + pad)
    }
}

/// Lines with markers on log-log axes (latency against a parameter).
pub(crate) fn log_log(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let (x0, x1) = extent(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        true,
    );
    let (y0, y1) = extent(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        true,
    );
    draw(
        title,
        x_desc,
        y_desc,
        series,
        (x0..x1).log_scale(),
        (y0..y1).log_scale(),
        true,
    )
}

/// Lines on linear axes (a CDF).
pub(crate) fn linear(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    y_range: Option<(f64, f64)>,
) -> Result<String, ReportError> {
    let (x0, x1) = extent(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        false,
    );
    let (y0, y1) = y_range.unwrap_or_else(|| {
        extent(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            false,
        )
    });
    draw(title, x_desc, y_desc, series, x0..x1, y0..y1, false)
}

fn draw<X, Y>(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x: X,
    y: Y,
    markers: bool,
) -> Result<String, ReportError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(x, y)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plot_err)?;
        for (i, s) in series.iter().enumerate() {
            let c = colour(&s.name, i);
            chart
                .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(2)))
                .map_err(plot_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            if markers {
                chart
                    .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, c.filled())))
                    .map_err(plot_err)?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}
