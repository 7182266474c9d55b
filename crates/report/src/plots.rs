//! SVG plots with plotters' SVG backend (no fonts needed: text is emitted as
//! SVG `<text>`, sized by plotters' built-in estimate).
//!
//! Every axis gets explicit tick positions and labels: log axes tick on
//! 1-2-5 values (or on the measured parameter values when they are few and
//! far enough apart), axes whose data are whole numbers tick on whole numbers,
//! and labels carry no trailing `.0`.

use crate::ReportError;
use plotters::coord::ranged1d::{
    AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter,
};
use plotters::prelude::*;

/// One line of a plot (the older, plain form; see [`Line`]).
pub(crate) struct Series {
    /// Legend entry (the engine).
    pub(crate) name: String,
    /// Points in x order.
    pub(crate) points: Vec<(f64, f64)>,
}

/// One line of a plot with its spread and style.
#[derive(Clone, Debug, Default)]
pub(crate) struct Line {
    /// Legend entry.
    pub(crate) name: String,
    /// Picks the colour: the engine, shared by our line and the paper's.
    pub(crate) colour_key: String,
    /// Points in x order (medians).
    pub(crate) points: Vec<(f64, f64)>,
    /// Vertical bars (x, lowest, highest): the spread over repetitions.
    pub(crate) spread: Vec<(f64, f64, f64)>,
    /// The paper's values: dashed, hollow markers.
    pub(crate) paper: bool,
}

impl From<&Series> for Line {
    fn from(s: &Series) -> Line {
        Line {
            name: s.name.clone(),
            colour_key: s.name.clone(),
            points: s.points.clone(),
            ..Line::default()
        }
    }
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

/// Plot size in pixels.
const SIZE: (u32, u32) = (720, 420);
/// Roughly the pixels along each axis inside the frame.
const X_PIXELS: f64 = 600.0;
const Y_PIXELS: f64 = 320.0;
/// Least pixels between neighbouring tick labels: x labels sit side by side
/// (`10,000` is ~45 px wide), y labels one above the other.
const X_GAP: f64 = 55.0;
const Y_GAP: f64 = 24.0;

/// Extent of the data, padded; for a log axis kept positive.
fn extent(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.3, hi * 1.3)
    } else if hi - lo < 1e-12 {
        (lo - 1.0, hi + 1.0)
    } else {
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    }
}

fn is_whole(v: f64) -> bool {
    (v - v.round()).abs() <= 1e-9 * v.abs().max(1.0)
}

/// A tick label: whole numbers with thousands separators and no `.0`,
/// others to three significant figures without trailing zeros.
pub(crate) fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if is_whole(v) && v.abs() < 1e15 {
        return crate::table::grouped(v.round());
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s.contains('.') {
        s
    } else {
        crate::table::grouped(s.parse().unwrap_or(v))
    }
}

/// Tick positions on a log axis over `[lo, hi]` spanning `pixels`: the data's
/// own values when `prefer` holds few enough, far enough apart; else 1-2-5
/// (thinned to powers of ten on a crowded axis, refined to every digit on a
/// short one), labels at least `gap` pixels apart; never fewer than two.
fn log_ticks(lo: f64, hi: f64, pixels: f64, gap: f64, prefer: &[f64]) -> Vec<f64> {
    let decades = (hi / lo).log10().max(1e-9);
    let per_decade = pixels / decades;
    let mut own: Vec<f64> = prefer
        .iter()
        .copied()
        .filter(|v| *v > 0.0 && *v >= lo && *v <= hi)
        .collect();
    own.sort_by(f64::total_cmp);
    own.dedup_by(|a, b| (*a / *b - 1.0).abs() < 1e-9);
    if (2..=8).contains(&own.len())
        && own
            .windows(2)
            .all(|w| (w[1] / w[0]).log10() * per_decade >= gap)
    {
        return own;
    }
    // The closest neighbours: 1-2-5 are log10(2) apart, every digit log10(10/9).
    let steps: &[f64] = if per_decade * 2f64.log10() < gap {
        &[1.0]
    } else if per_decade * (10.0f64 / 9.0).log10() < gap {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    };
    let mut ticks = Vec::new();
    let mut p = 10f64.powf(lo.log10().floor());
    while p <= hi * 1.000001 {
        for s in steps {
            let v = s * p;
            if v >= lo * 0.999999 && v <= hi * 1.000001 {
                ticks.push(v);
            }
        }
        p *= 10.0;
    }
    if ticks.len() < 2 {
        // Less than a step of 1-2-5: even ticks across the range.
        return linear_ticks(lo, hi, pixels, false);
    }
    // Keep labels at least `gap` pixels apart.
    let mut kept: Vec<f64> = Vec::new();
    for t in ticks {
        if kept
            .last()
            .is_none_or(|k| (t / k).log10() * per_decade >= gap)
        {
            kept.push(t);
        }
    }
    kept
}

/// Tick positions on a linear axis: steps of 1, 2 or 5 times a power of ten,
/// whole steps only on a whole-number axis.
fn linear_ticks(lo: f64, hi: f64, pixels: f64, whole: bool) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let target = (pixels / 60.0).clamp(2.0, 10.0);
    let raw = span / target;
    let mag = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    if whole {
        // Every whole number while they stay ~40 px apart (layers 1-11).
        step = if span <= pixels / 40.0 {
            1.0
        } else {
            step.max(1.0).round()
        };
    }
    let mut ticks = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 {
        // Snap away float noise (0.30000000000000004).
        ticks.push((v / step).round() * step);
        v += step;
    }
    ticks
}

/// A linear axis with our own tick positions (plotters' `with_key_points`
/// drops the default formatting a `f64` range needs).
struct Ticked(Axis);

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let Axis { lo, hi, .. } = self.0;
        let share = (value - lo) / (hi - lo);
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.0.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.0.lo..self.0.hi
    }
}

/// An axis: its range and ticks.
#[derive(Clone, Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

fn log_axis(values: &[f64], pixels: f64, gap: f64, own_ticks: bool) -> Axis {
    let (lo, hi) = extent(values.iter().copied(), true);
    let ticks = log_ticks(lo, hi, pixels, gap, if own_ticks { values } else { &[] });
    Axis { lo, hi, ticks }
}

fn linear_axis(values: &[f64], pixels: f64, range: Option<(f64, f64)>) -> Axis {
    let whole = !values.is_empty() && values.iter().all(|v| is_whole(*v));
    let (mut lo, mut hi) = range.unwrap_or_else(|| extent(values.iter().copied(), false));
    if whole && range.is_none() {
        // Whole numbers (layers, backends): a half step of margin.
        let (a, b) = extent(values.iter().copied(), false);
        let (a, b) = (a.ceil(), b.floor());
        let (a, b) = if b >= a {
            (a, b)
        } else {
            (lo.round(), hi.round())
        };
        let pad = ((b - a) * 0.04).max(0.3);
        lo = a - pad;
        hi = b + pad;
    }
    let ticks = linear_ticks(lo, hi, pixels, whole);
    Axis { lo, hi, ticks }
}

fn all_x(lines: &[Line]) -> Vec<f64> {
    lines
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect()
}

fn all_y(lines: &[Line]) -> Vec<f64> {
    lines
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.spread.iter().flat_map(|b| [b.1, b.2]))
        })
        .collect()
}

/// Lines with markers on log-log axes (a figure against a parameter),
/// with spreads and paper lines; the x axis ticks on the measured
/// parameter values when they are few.
pub(crate) fn log_log_lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<String, ReportError> {
    log_log_labelled(title, x_desc, y_desc, lines, tick_label)
}

/// [`log_log_lines`] with the x axis's labels written by `x_label` (active
/// ratios as `1/16`).
pub(crate) fn log_log_labelled(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    x_label: fn(f64) -> String,
) -> Result<String, ReportError> {
    let x = log_axis(&all_x(lines), X_PIXELS, X_GAP, true);
    let y = log_axis(&all_y(lines), Y_PIXELS, Y_GAP, false);
    draw(
        title,
        (x_desc, x_label),
        y_desc,
        lines,
        (
            (x.lo..x.hi).log_scale().with_key_points(x.ticks),
            (y.lo..y.hi).log_scale().with_key_points(y.ticks),
        ),
        true,
        SeriesLabelPosition::UpperLeft,
    )
}

/// Lines on linear axes (a CDF; quantities against layers or backends).
/// Axes whose data are all whole numbers tick on whole numbers.
pub(crate) fn linear(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    y_range: Option<(f64, f64)>,
) -> Result<String, ReportError> {
    let lines: Vec<Line> = series.iter().map(Line::from).collect();
    linear_lines(title, x_desc, y_desc, &lines, y_range, false)
}

/// [`linear`] with spreads and paper lines, and markers if asked.
pub(crate) fn linear_lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    y_range: Option<(f64, f64)>,
    markers: bool,
) -> Result<String, ReportError> {
    let x = linear_axis(&all_x(lines), X_PIXELS, None);
    let y_values = all_y(lines);
    // A y axis is whole only if its range is wide enough to need it.
    let y = linear_axis(&y_values, Y_PIXELS, y_range);
    draw(
        title,
        (x_desc, tick_label),
        y_desc,
        lines,
        (Ticked(x), Ticked(y)),
        markers,
        SeriesLabelPosition::UpperLeft,
    )
}

/// Cumulative distributions on linear axes, the fraction from 0 to 1; the
/// legend sits lower right, where rising CDF lines leave room.
pub(crate) fn cdf(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let lines: Vec<Line> = series.iter().map(Line::from).collect();
    let x = linear_axis(&all_x(&lines), X_PIXELS, None);
    let y = linear_axis(&all_y(&lines), Y_PIXELS, Some((0.0, 1.0)));
    draw(
        title,
        (x_desc, tick_label),
        y_desc,
        &lines,
        (Ticked(x), Ticked(y)),
        false,
        SeriesLabelPosition::LowerRight,
    )
}

fn draw<X, Y>(
    title: &str,
    (x_desc, x_label): (&str, fn(f64) -> String),
    y_desc: &str,
    lines: &[Line],
    (x, y): (X, Y),
    markers: bool,
    legend: SeriesLabelPosition,
) -> Result<String, ReportError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(72)
            .build_cartesian_2d(x, y)
            .map_err(plot_err)?;
        let fmt = |v: &f64| tick_label(*v);
        let x_fmt = |v: &f64| x_label(*v);
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&fmt)
            .label_style(("sans-serif", 13))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(245, 245, 245))
            .draw()
            .map_err(plot_err)?;
        for (i, s) in lines.iter().enumerate() {
            let c = colour(&s.colour_key, i);
            let paper = s.paper;
            for (bx, lo, hi) in &s.spread {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(*bx, *lo), (*bx, *hi)],
                        c.mix(0.8).stroke_width(2),
                    )))
                    .map_err(plot_err)?;
            }
            let anno = if paper {
                chart
                    .draw_series(DashedLineSeries::new(
                        s.points.clone(),
                        6,
                        4,
                        c.stroke_width(2),
                    ))
                    .map_err(plot_err)?
            } else {
                chart
                    .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(2)))
                    .map_err(plot_err)?
            };
            anno.label(s.name.clone()).legend(move |(x, y)| {
                if paper {
                    PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(2))
                } else {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                }
            });
            if markers || paper {
                let style = if paper { c.stroke_width(2) } else { c.filled() };
                chart
                    .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, style)))
                    .map_err(plot_err)?;
            }
        }
        chart
            .configure_series_labels()
            .position(legend)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_have_no_trailing_zero() {
        assert_eq!(tick_label(1000.0), "1,000");
        assert_eq!(tick_label(5.0), "5");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(1.5), "1.5");
        assert_eq!(tick_label(12.34), "12.3");
    }

    #[test]
    fn log_ticks_are_1_2_5_or_the_data() {
        assert_eq!(
            log_ticks(300.0, 13000.0, 600.0, X_GAP, &[400.0, 2000.0, 10000.0]),
            vec![400.0, 2000.0, 10000.0]
        );
        // Too close together for their own labels: 1-2-5.
        let t = log_ticks(3000.0, 7000.0, 600.0, X_GAP, &[4000.0, 5000.0, 6000.0]);
        assert!(t.len() >= 2, "{t:?}");
        let t = log_ticks(50.0, 20000.0, 600.0, X_GAP, &[]);
        assert_eq!(
            t,
            vec![50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0]
        );
        // Inside one step of 1-2-5: even ticks.
        assert!(log_ticks(1100.0, 1400.0, 320.0, Y_GAP, &[]).len() >= 2);
    }

    #[test]
    fn whole_axes_tick_on_whole_numbers() {
        let a = linear_axis(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 11.0], 600.0, None);
        assert!(a.ticks.iter().all(|t| is_whole(*t)), "{:?}", a.ticks);
        assert!(a.ticks.contains(&5.0), "{:?}", a.ticks);
        let a = linear_axis(&[3.0, 5.0], 600.0, None);
        assert_eq!(a.ticks, vec![3.0, 4.0, 5.0]);
    }

    /// Numeric `<text>` labels sharing one y (x axis) and one x (y axis).
    fn ticks(svg: &str) -> (usize, usize) {
        let mut labels: Vec<(String, String)> = Vec::new();
        for part in svg.split("<text").skip(1) {
            let attr = |k: &str| {
                let key = format!(" {k}=\"");
                let rest = &part[part.find(&key).unwrap() + key.len()..];
                rest[..rest.find('"').unwrap()].to_string()
            };
            let body = part[part.find('>').unwrap() + 1..part.find("</text>").unwrap()].trim();
            if !body.is_empty()
                && body
                    .chars()
                    .all(|c| c.is_ascii_digit() || ",.-".contains(c))
            {
                labels.push((attr("x"), attr("y")));
            }
        }
        let most = |f: fn(&(String, String)) -> &String| {
            labels
                .iter()
                .map(|l| labels.iter().filter(|m| f(m) == f(l)).count())
                .max()
                .unwrap_or(0)
        };
        (most(|l| &l.1), most(|l| &l.0))
    }

    #[test]
    fn every_drawing_kind_labels_both_axes() {
        let layers = Series {
            name: "stages 1,024 B".into(),
            points: (1..=11)
                .map(|l| (f64::from(l), 900.0 / f64::from(l)))
                .collect(),
        };
        let svg = linear("t", "layers per side", "Mbit/s", &[layers], None).unwrap();
        assert_eq!(ticks(&svg).0, 11, "layers 1 to 11 each labelled");
        assert!(
            svg.contains(">\n5\n</text>") || svg.contains(">5</text>"),
            "5 labelled"
        );
        assert!(!svg.contains("4.8"), "no fractional layers");
        let deviation = Series {
            name: "epoll".into(),
            points: vec![(-3.5, 0.0), (0.2, 0.5), (7.9, 1.0)],
        };
        let svg = cdf("t", "deviation (µs)", "fraction", &[deviation]).unwrap();
        let (x, y) = ticks(&svg);
        assert!(x >= 3 && y >= 3, "{x} {y}");
        let lat = Line {
            name: "poll".into(),
            colour_key: "poll".into(),
            points: vec![(1000.0, 4100.0), (5000.0, 4300.0), (10000.0, 4600.0)],
            spread: vec![(5000.0, 4200.0, 4500.0)],
            paper: false,
        };
        let paper = Line {
            paper: true,
            name: "poll (paper)".into(),
            ..lat.clone()
        };
        let svg = log_log_lines("t", "connections", "µs", &[lat, paper]).unwrap();
        let (x, y) = ticks(&svg);
        assert!(x >= 3 && y >= 2, "{x} {y}: {svg}");
        assert!(svg.contains("10,000"), "{svg}");
        assert!(!svg.contains("4000.0"), "{svg}");
    }
}
