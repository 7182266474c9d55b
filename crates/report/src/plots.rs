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

/// What a line is: ours (solid, filled circles), the paper's (black
/// diamonds, dotted) or a projection of ours (dashed, hollow circles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Our measurements.
    #[default]
    Ours,
    /// The paper's values.
    Paper,
    /// Ours extended beyond what was measured.
    Projected,
}

/// One line of a plot with its spread and style.
#[derive(Clone, Debug, Default)]
pub(crate) struct Line {
    /// Legend entry.
    pub(crate) name: String,
    /// Picks the colour: the engine, shared by our line, the paper's and
    /// the projection (`paper` draws the paper's own line in black).
    pub(crate) colour_key: String,
    /// Points in x order (medians).
    pub(crate) points: Vec<(f64, f64)>,
    /// Vertical bars (x, lowest, highest): the spread over repetitions.
    pub(crate) spread: Vec<(f64, f64, f64)>,
    /// Ours, the paper's or projected.
    pub(crate) kind: Kind,
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

/// The paper's own colour (a line keyed `paper`), and every paper
/// marker's outline.
const PAPER: RGBColor = RGBColor(0, 0, 0);
/// The legend box's border: the geometry test finds legends by it.
pub(crate) const LEGEND_BORDER: RGBColor = RGBColor(170, 170, 170);

/// A stable colour per engine, so every plot uses the same key.
pub(crate) fn colour(name: &str, i: usize) -> RGBColor {
    match name {
        "paper" => PAPER,
        "processes" => RGBColor(31, 119, 180),
        "threads" => RGBColor(255, 127, 14),
        "select" => RGBColor(44, 160, 44),
        "poll" => RGBColor(214, 39, 40),
        "epoll" => RGBColor(148, 103, 189),
        // Others (gateway configurations, pipeline modes, further
        // engines) in colours the engines above do not use.
        _ => [
            RGBColor(23, 190, 207),
            RGBColor(227, 119, 194),
            RGBColor(140, 86, 75),
            RGBColor(188, 189, 34),
            RGBColor(127, 127, 127),
            RGBColor(0, 90, 160),
        ][i % 6],
    }
}

pub(crate) fn plot_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

/// Every figure's width in pixels: about a page's text column, so a
/// figure drawn at full width keeps its fonts at their size.
pub(crate) const WIDTH: u32 = 960;
/// The line plots' height.
const HEIGHT: u32 = 500;
/// Font sizes as plotters takes them: title, axis descriptions, tick
/// labels and legend, notes. Its SVG backend writes `size / 1.24` px, so
/// 15 is the least that gives 12 px (the notes: 12.1 px; labels 12.9).
pub(crate) const TITLE_FONT: u32 = 22;
pub(crate) const DESC_FONT: u32 = 17;
pub(crate) const LABEL_FONT: u32 = 16;
pub(crate) const NOTE_FONT: u32 = 15;

/// The title's font size for a plot `width` pixels wide: [`TITLE_FONT`],
/// smaller for a title that would run past the plot's edges (plotters
/// centres it and cuts what does not fit), never under [`NOTE_FONT`]
/// (12 px). A character of sans-serif is taken as 0.55 of the font's
/// pixel size wide.
pub(crate) fn title_font(title: &str, width: u32) -> u32 {
    let chars = title.chars().count().max(1) as f64;
    // Room left by the chart's margins; the SVG writes size / 1.24 px.
    let fits = (f64::from(width) - 24.0) * 1.24 / (0.55 * chars);
    (fits.floor() as u32).clamp(NOTE_FONT, TITLE_FONT)
}

/// The SVG as a page shows it: as wide as the text column, scaled with
/// it (the exported file keeps its own size: see [`crate::figures_of`]).
pub(crate) fn full_width(svg: String) -> String {
    svg.replacen("<svg ", &format!("<svg {FULL_WIDTH} "), 1)
}

/// The style attribute [`full_width`] adds.
pub(crate) const FULL_WIDTH: &str = "style=\"width:100%;height:auto;max-width:100%\"";

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
    let frame = Frame::of(lines, &[]);
    let x = log_axis(&all_x(lines), frame.x_pixels(), X_GAP, true);
    let y = log_axis(&all_y(lines), frame.y_pixels(), Y_GAP, false);
    draw(
        title,
        (x_desc, x_label),
        y_desc,
        &frame,
        (
            (x.lo..x.hi).log_scale().with_key_points(x.ticks),
            (y.lo..y.hi).log_scale().with_key_points(y.ticks),
        ),
        true,
    )
}

/// Whether the paper's values and ours lie more than ten times apart
/// somewhere: then a linear axis would flatten one of them onto zero, and
/// [`linear_lines`] draws its y axis logarithmic.
pub(crate) fn paper_far_apart(lines: &[Line]) -> bool {
    let ys = |paper: bool| -> Vec<f64> {
        lines
            .iter()
            .filter(|l| (l.kind == Kind::Paper) == paper)
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .collect()
    };
    let (paper, ours) = (ys(true), ys(false));
    let (Some(p_lo), Some(p_hi), Some(o_lo), Some(o_hi)) = (
        paper.iter().copied().reduce(f64::min),
        paper.iter().copied().reduce(f64::max),
        ours.iter().copied().reduce(f64::min),
        ours.iter().copied().reduce(f64::max),
    ) else {
        return false;
    };
    p_lo > 0.0 && o_lo > 0.0 && (o_hi / p_lo > 10.0 || p_hi / o_lo > 10.0)
}

/// [`linear`] with spreads, paper lines and projections, and markers if
/// asked; the y axis is logarithmic where [`paper_far_apart`] (then
/// `y_range` is ignored).
pub(crate) fn linear_lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    y_range: Option<(f64, f64)>,
    markers: bool,
) -> Result<String, ReportError> {
    let frame = Frame::of(lines, &[]);
    let x = linear_axis(&all_x(lines), frame.x_pixels(), None);
    let y_values = all_y(lines);
    if paper_far_apart(lines) {
        let y = log_axis(&y_values, frame.y_pixels(), Y_GAP, false);
        return draw(
            title,
            (x_desc, tick_label),
            y_desc,
            &frame,
            (Ticked(x), (y.lo..y.hi).log_scale().with_key_points(y.ticks)),
            markers,
        );
    }
    // A y axis is whole only if its range is wide enough to need it.
    let y = linear_axis(&y_values, frame.y_pixels(), y_range);
    draw(
        title,
        (x_desc, tick_label),
        y_desc,
        &frame,
        (Ticked(x), Ticked(y)),
        markers,
    )
}

/// What [`bulk`] kept of a set of CDFs: the axis range and, per line, what
/// lies beyond it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clipped {
    /// The x range shown.
    pub(crate) range: Option<(f64, f64)>,
    /// Per line beyond the range: (name, fraction below, lowest value,
    /// fraction above, highest value).
    pub(crate) tails: Vec<(String, f64, f64, f64, f64)>,
}

impl Clipped {
    /// The tails in words for a caption, values in `unit`: `The axis shows
    /// the bulk, -52 to 31 µs; beyond it: select 1.5% of sends down to
    /// -4,012 µs; poll 0.5% up to 812 µs.` Empty when nothing is clipped.
    pub(crate) fn sentence(&self, unit: &str, what: &str) -> String {
        let Some((lo, hi)) = self.range else {
            return String::new();
        };
        if self.tails.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = self
            .tails
            .iter()
            .map(|(name, below, min, above, max)| {
                let mut side = Vec::new();
                if *below > 0.0 {
                    side.push(format!(
                        "{} of {what} below, down to {} {unit}",
                        percent(*below),
                        tick_label(sig3(*min))
                    ));
                }
                if *above > 0.0 {
                    side.push(format!(
                        "{} above, up to {} {unit}",
                        percent(*above),
                        tick_label(sig3(*max))
                    ));
                }
                format!("{name} {}", side.join(", "))
            })
            .collect();
        format!(
            " The axis shows the bulk, {} to {} {unit}; the tails beyond it are left out of the plot: {}.",
            tick_label(sig3(lo)),
            tick_label(sig3(hi)),
            parts.join("; ")
        )
    }

    /// Short lines for the plot's legend panel: `select 1.5% < -52`.
    pub(crate) fn legend_notes(&self) -> Vec<String> {
        let Some((lo, hi)) = self.range else {
            return Vec::new();
        };
        if self.tails.is_empty() {
            return Vec::new();
        }
        let mut out = vec!["beyond the axis:".to_string()];
        for (name, below, _, above, _) in &self.tails {
            if *below > 0.0 {
                out.push(format!(
                    "{name} {} < {}",
                    percent(*below),
                    tick_label(sig3(lo))
                ));
            }
            if *above > 0.0 {
                out.push(format!(
                    "{name} {} > {}",
                    percent(*above),
                    tick_label(sig3(hi))
                ));
            }
        }
        out
    }
}

/// A value to three significant figures.
fn sig3(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let p = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * p).round() / p
}

/// A fraction as a percentage: `1.5%`, `0.3%`.
fn percent(f: f64) -> String {
    let p = f * 100.0;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{}%", tick_label((p * 10.0).round().max(1.0) / 10.0))
    }
}

/// The x where a CDF (points in x order, fractions rising) reaches `f`.
fn quantile(points: &[(f64, f64)], f: f64) -> Option<f64> {
    points
        .iter()
        .find(|p| p.1 >= f)
        .map(|p| p.0)
        .or(points.last().map(|p| p.0))
}

/// How far, in widths of the core, a CDF's axis reaches beyond it.
const BULK_REACH: f64 = 6.0;

/// CDFs clipped to their bulk. The core runs from the median over the
/// lines of their 10th percentiles to the median of their 90th; the axis
/// reaches out to every line's `lo_q` and `hi_q` quantiles, but at most
/// [`BULK_REACH`] core widths beyond the core. So one line's tail (or one
/// line far from the rest) cannot squeeze the others into one pixel
/// column. Lines are cut at the axis; [`Clipped`] says what each leaves
/// out.
pub(crate) fn bulk(series: Vec<Series>, lo_q: f64, hi_q: f64) -> (Vec<Series>, Clipped) {
    let series: Vec<Series> = series.into_iter().filter(|s| s.points.len() >= 2).collect();
    let qs = |f: f64| -> Vec<f64> {
        let mut v: Vec<f64> = series
            .iter()
            .filter_map(|s| quantile(&s.points, f))
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let median = |v: &[f64]| -> Option<f64> {
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    };
    let (q10, q90, t_lo, t_hi) = (qs(0.10), qs(0.90), qs(lo_q), qs(hi_q));
    let (Some(c_lo), Some(c_hi), Some(t_lo), Some(t_hi)) = (
        median(&q10),
        median(&q90),
        t_lo.first().copied(),
        t_hi.last().copied(),
    ) else {
        return (series, Clipped::default());
    };
    let width = (c_hi - c_lo).max(1e-9 * c_hi.abs().max(1.0));
    let (lo, hi) = (
        (c_lo - BULK_REACH * width).max(t_lo),
        (c_hi + BULK_REACH * width).min(t_hi),
    );
    if hi <= lo {
        return (series, Clipped::default());
    }
    let mut clipped = Clipped {
        range: Some((lo, hi)),
        tails: Vec::new(),
    };
    let out = series
        .into_iter()
        .map(|s| {
            let first = s.points.first().map_or(lo, |p| p.0);
            let last = s.points.last().map_or(hi, |p| p.0);
            // The fraction at lo and at hi, read along the line as drawn.
            let below = fraction_at(&s.points, lo);
            let at_hi = fraction_at(&s.points, hi);
            let above = if last > hi { 1.0 - at_hi } else { 0.0 };
            if below > 0.0 || above > 0.0 {
                clipped
                    .tails
                    .push((s.name.clone(), below, first, above, last));
            }
            Series {
                name: s.name,
                points: cut(&s.points, lo, hi),
            }
        })
        .collect();
    (out, clipped)
}

/// A CDF's fraction at `x`, interpolated between its points as the line is
/// drawn (0 before its first point, its last fraction after its last).
fn fraction_at(points: &[(f64, f64)], x: f64) -> f64 {
    match points.iter().position(|p| p.0 > x) {
        None => points.last().map_or(0.0, |p| p.1),
        Some(0) => 0.0,
        Some(i) => {
            let (a, b) = (points[i - 1], points[i]);
            if (b.0 - a.0).abs() < 1e-300 {
                b.1
            } else {
                a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)
            }
        }
    }
}

/// A line's points within [lo, hi] along x, with points interpolated
/// where it crosses either end.
fn cut(points: &[(f64, f64)], lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let at = |x: f64| {
            if (b.0 - a.0).abs() < 1e-300 {
                (x, b.1)
            } else {
                (x, a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
            }
        };
        if a.0 < lo && b.0 >= lo {
            out.push(at(lo));
        }
        if b.0 >= lo && b.0 <= hi && (a.0 >= lo || out.last() != Some(&b)) {
            if out.is_empty() && a.0 >= lo && a.0 <= hi {
                out.push(a);
            }
            out.push(b);
        }
        if a.0 <= hi && b.0 > hi {
            if out.is_empty() && a.0 >= lo {
                out.push(a);
            }
            out.push(at(hi));
            break;
        }
    }
    if out.is_empty() {
        if let Some(p) = points.first().filter(|p| p.0 >= lo && p.0 <= hi) {
            out.push(*p);
        }
    }
    out
}

/// Cumulative distributions on linear axes, the fraction from 0 to 1;
/// `notes` go under the legend (what [`bulk`] left out).
pub(crate) fn cdf(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    notes: &[String],
) -> Result<String, ReportError> {
    let lines: Vec<Line> = series.iter().map(Line::from).collect();
    let frame = Frame::of(&lines, notes);
    let x = linear_axis(&all_x(&lines), frame.x_pixels(), None);
    let y = linear_axis(&all_y(&lines), frame.y_pixels(), Some((0.0, 1.0)));
    draw(
        title,
        (x_desc, tick_label),
        y_desc,
        &frame,
        (Ticked(x), Ticked(y)),
        false,
    )
}

/// One legend entry: the line it stands for and its text lines.
struct Entry<'a> {
    line: &'a Line,
    colour: RGBColor,
    /// The label, wrapped to the legend's width.
    text: Vec<String>,
    /// Its dash pattern (on, off) and phase in pixels; solid if none.
    dash: Option<((f64, f64), f64)>,
}

/// The plot's lines with their colours and legend text, and the legend's
/// width.
struct Frame<'a> {
    entries: Vec<Entry<'a>>,
    notes: Vec<String>,
    legend_width: u32,
}

/// Characters per legend line, and about how wide one is at
/// [`LABEL_FONT`].
const LEGEND_CHARS: usize = 34;
const CHAR_PX: f64 = 7.4;

/// `text` wrapped at word boundaries to `width` characters.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match out.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => out.push(word.to_string()),
        }
    }
    out
}

/// Whether two lines are drawn on the same pixels: the same x values and
/// y values within one percent.
fn same_points(a: &Line, b: &Line) -> bool {
    a.points.len() == b.points.len()
        && !a.points.is_empty()
        && a.points.iter().zip(&b.points).all(|(p, q)| {
            p.0 == q.0 && (p.1 - q.1).abs() <= 0.01 * p.1.abs().max(q.1.abs()).max(1e-12)
        })
}

impl<'a> Frame<'a> {
    fn of(lines: &'a [Line], notes: &[String]) -> Frame<'a> {
        let mut keys: Vec<&str> = Vec::new();
        let mut entries: Vec<Entry<'a>> = Vec::new();
        // Per entry: the first entry with the same points, if another.
        let mut twin_of: Vec<Option<usize>> = Vec::new();
        let mut projected = 0;
        for line in lines.iter().filter(|l| !l.points.is_empty()) {
            let key = line.colour_key.as_str();
            if key != "paper" && !keys.contains(&key) {
                keys.push(key);
            }
            let i = keys.iter().position(|k| *k == key).unwrap_or(0);
            let twin = entries.iter().position(|e| same_points(e.line, line));
            let twin = twin.map(|t| twin_of[t].unwrap_or(t));
            let mut label = line.name.clone();
            if let Some(t) = twin {
                label.push_str(&format!(
                    " (the same values as {}: drawn dashed over it)",
                    entries[t].line.name
                ));
            }
            let dash = match line.kind {
                Kind::Paper => Some((DOT, 0.0)),
                Kind::Projected => {
                    // Projections alternate their phase, so two that
                    // coincide show both colours.
                    projected += 1;
                    Some((DASH, if projected % 2 == 0 { DASH.0 } else { 0.0 }))
                }
                Kind::Ours => None,
            };
            twin_of.push(twin);
            entries.push(Entry {
                line,
                colour: colour(key, i),
                text: wrap(&label, LEGEND_CHARS),
                dash,
            });
        }
        // Lines on the same pixels as an earlier one: the k-th of a group
        // of g draws a dash of 9 px every 9·g px, at phase 9·(k-1), so the
        // first line shows in the gaps and every colour in turn.
        for (i, twin) in twin_of.iter().enumerate() {
            let Some(t) = twin else { continue };
            let group = twin_of.iter().filter(|x| **x == Some(*t)).count() + 1;
            let k = twin_of[..=i].iter().filter(|x| **x == Some(*t)).count();
            let on = DASH.0;
            // Past the first line's own dash, if it has one.
            let first = if entries[*t].dash.is_some() { on } else { 0.0 };
            entries[i].dash = Some((
                (on, on * (group as f64 - 1.0)),
                first + on * (k as f64 - 1.0),
            ));
        }
        let widest = entries
            .iter()
            .flat_map(|e| e.text.iter())
            .chain(notes)
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0) as f64;
        let legend_width = (widest * CHAR_PX + 58.0).clamp(150.0, 320.0) as u32;
        Frame {
            entries,
            notes: notes
                .iter()
                .flat_map(|n| wrap(n, LEGEND_CHARS + 4))
                .collect(),
            legend_width,
        }
    }

    /// The plot's width: the figure less the legend panel.
    fn plot_width(&self) -> u32 {
        WIDTH - self.legend_width
    }

    /// Roughly the pixels along the x axis inside the frame.
    fn x_pixels(&self) -> f64 {
        f64::from(self.plot_width()) - 110.0
    }

    /// Roughly the pixels along the y axis inside the frame.
    fn y_pixels(&self) -> f64 {
        f64::from(HEIGHT) - 120.0
    }
}

/// Projections' dashes (on, off) in pixels; the paper's lines are dotted.
const DASH: (f64, f64) = (9.0, 9.0);
const DOT: (f64, f64) = (3.0, 4.0);

/// A polyline in pixels cut into dashes of `on` pixels every `on + off`,
/// the pattern starting `phase` pixels in.
fn dashes(pts: &[(i32, i32)], (on, off): (f64, f64), phase: f64) -> Vec<Vec<(i32, i32)>> {
    let period = on + off;
    let mut out: Vec<Vec<(i32, i32)>> = Vec::new();
    let mut pos = phase.rem_euclid(period);
    let mut current: Vec<(i32, i32)> = Vec::new();
    let px = |x: f64, y: f64| (x.round() as i32, y.round() as i32);
    for w in pts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (ax, ay) = (f64::from(a.0), f64::from(a.1));
        let (dx, dy) = (f64::from(b.0) - ax, f64::from(b.1) - ay);
        let len = dx.hypot(dy);
        let mut t = 0.0;
        while t < len {
            let in_on = pos < on;
            let left = if in_on { on - pos } else { period - pos };
            let step = left.min(len - t);
            let (x0, y0) = (ax + dx * t / len, ay + dy * t / len);
            let (x1, y1) = (ax + dx * (t + step) / len, ay + dy * (t + step) / len);
            if in_on {
                if current.is_empty() {
                    current.push(px(x0, y0));
                }
                current.push(px(x1, y1));
            } else if current.len() >= 2 {
                out.push(std::mem::take(&mut current));
            } else {
                current.clear();
            }
            t += step;
            pos = (pos + step) % period;
            if pos < 1e-9 && current.len() >= 2 {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if current.len() >= 2 {
        out.push(current);
    }
    out
}

/// A paper marker: a diamond outlined in black, filled with the engine's
/// colour (white on the paper's own black line).
fn diamond(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    (x, y): (i32, i32),
    fill: RGBColor,
) -> Result<(), ReportError> {
    let r = 6;
    let pts = vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y), (x, y - r)];
    area.draw(&Polygon::new(pts.clone(), fill.filled()))
        .map_err(plot_err)?;
    area.draw(&PathElement::new(pts, PAPER.stroke_width(2)))
        .map_err(plot_err)
}

/// Draws one line's stroke in pixels: solid, or dashed as `dash` says.
fn stroke(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    pts: &[(i32, i32)],
    dash: Option<((f64, f64), f64)>,
    c: RGBColor,
) -> Result<(), ReportError> {
    match dash {
        None => area
            .draw(&PathElement::new(pts.to_vec(), c.stroke_width(2)))
            .map_err(plot_err),
        Some((p, phase)) => {
            for d in dashes(pts, p, phase) {
                area.draw(&PathElement::new(d, c.stroke_width(2)))
                    .map_err(plot_err)?;
            }
            Ok(())
        }
    }
}

/// A line's marker at a point.
fn marker(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    p: (i32, i32),
    e: &Entry<'_>,
    markers: bool,
) -> Result<(), ReportError> {
    match e.line.kind {
        Kind::Paper => diamond(
            area,
            p,
            if e.line.colour_key == "paper" {
                WHITE
            } else {
                e.colour
            },
        ),
        Kind::Projected => {
            area.draw(&Circle::new(p, 4, WHITE.filled()))
                .map_err(plot_err)?;
            area.draw(&Circle::new(p, 4, e.colour.stroke_width(2)))
                .map_err(plot_err)
        }
        Kind::Ours if markers => area
            .draw(&Circle::new(p, 4, e.colour.filled()))
            .map_err(plot_err),
        Kind::Ours => Ok(()),
    }
}

fn draw<X, Y>(
    title: &str,
    (x_desc, x_label): (&str, fn(f64) -> String),
    y_desc: &str,
    frame: &Frame<'_>,
    (x, y): (X, Y),
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
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, _) = root.split_horizontally(frame.plot_width());
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", title_font(title, frame.plot_width())))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(78)
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
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", DESC_FONT))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(245, 245, 245))
            .draw()
            .map_err(plot_err)?;
        let px = |p: &(f64, f64)| chart.backend_coord(p);
        for e in &frame.entries {
            let c = e.colour;
            for (bx, lo, hi) in &e.line.spread {
                root.draw(&PathElement::new(
                    vec![px(&(*bx, *lo)), px(&(*bx, *hi))],
                    c.mix(0.8).stroke_width(2),
                ))
                .map_err(plot_err)?;
            }
            let pts: Vec<(i32, i32)> = e.line.points.iter().map(px).collect();
            stroke(&root, &pts, e.dash, c)?;
        }
        // Markers over every line, ours last so they stay visible.
        for e in frame.entries.iter().rev() {
            for p in &e.line.points {
                marker(&root, px(p), e, markers)?;
            }
        }
        legend(&root, frame, markers, false)?;
        root.present().map_err(plot_err)?;
    }
    Ok(full_width(svg))
}

/// How a [`side_legend`] entry shows its series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sample {
    /// A line with a filled circle.
    Line,
    /// A dot (points, no line).
    Dot,
}

/// The width a [`side_legend`] of these names and notes needs.
pub(crate) fn side_legend_width(names: &[String], notes: &[String]) -> u32 {
    let widest = names
        .iter()
        .chain(notes)
        .map(|t| t.chars().count().min(LEGEND_CHARS + 4))
        .max()
        .unwrap_or(0) as f64;
    (widest * CHAR_PX + 58.0).clamp(130.0, 320.0) as u32
}

/// A legend right of the plot for the plots drawn without [`Line`]s (the
/// single-IP kind's): a box of (name, colour) entries from `left` to the
/// figure's right edge, notes under it.
pub(crate) fn side_legend(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    left: i32,
    entries: &[(String, RGBColor)],
    sample: Sample,
    notes: &[String],
) -> Result<(), ReportError> {
    let lines: Vec<Line> = entries
        .iter()
        .map(|(name, _)| Line {
            name: name.clone(),
            colour_key: name.clone(),
            points: vec![(0.0, 0.0)],
            ..Line::default()
        })
        .collect();
    let mut frame = Frame::of(&lines, notes);
    for (e, (_, c)) in frame.entries.iter_mut().zip(entries) {
        e.colour = *c;
    }
    frame.legend_width = (WIDTH as i32 - left).max(0) as u32;
    legend(root, &frame, true, sample == Sample::Dot)
}

/// The legend in its own panel right of the plot: a box of entries (a
/// sample of the line and its marker, then the name), the notes under it.
fn legend(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    frame: &Frame<'_>,
    markers: bool,
    dots: bool,
) -> Result<(), ReportError> {
    let line_h = 19;
    let left = frame.plot_width() as i32 + 4;
    let right = WIDTH as i32 - 8;
    let top = 44;
    let rows: i32 = frame.entries.iter().map(|e| e.text.len() as i32).sum();
    if rows > 0 {
        let bottom = top + 10 + rows * line_h + (frame.entries.len() as i32 - 1) * 4;
        root.draw(&Rectangle::new(
            [(left, top), (right, bottom)],
            LEGEND_BORDER.stroke_width(1),
        ))
        .map_err(plot_err)?;
        let mut y = top + 5 + line_h / 2;
        for e in &frame.entries {
            let sample = [(left + 8, y), (left + 40, y)];
            if !dots {
                stroke(root, &sample, e.dash.map(|(p, _)| (p, 0.0)), e.colour)?;
            }
            if e.line.kind != Kind::Ours || markers {
                marker(root, (left + 24, y), e, markers)?;
            }
            for (k, t) in e.text.iter().enumerate() {
                root.draw(&Text::new(
                    t.clone(),
                    (left + 48, y - 7 + k as i32 * line_h),
                    ("sans-serif", LABEL_FONT).into_font().color(&BLACK),
                ))
                .map_err(plot_err)?;
            }
            y += e.text.len() as i32 * line_h + 4;
        }
        let mut y = bottom + 12;
        for n in &frame.notes {
            root.draw(&Text::new(
                n.clone(),
                (left + 4, y),
                ("sans-serif", NOTE_FONT)
                    .into_font()
                    .color(&RGBColor(60, 60, 60)),
            ))
            .map_err(plot_err)?;
            y += 17;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail beyond the axis is read along the line as drawn: a CDF of
    /// 5 % steps whose p99 sits far below its maximum leaves well under
    /// 5 % beyond an axis cut between p99 and p99.9.
    #[test]
    fn a_tail_is_read_between_the_points_around_the_cut() {
        let mut points: Vec<(f64, f64)> = (0..20)
            .map(|i| (50.0 + i as f64, i as f64 * 0.05))
            .collect();
        points.extend([(120.0, 0.99), (700.0, 0.999), (1400.0, 1.0)]);
        assert!((fraction_at(&points, 410.0) - 0.9945).abs() < 1e-9);
        assert_eq!(fraction_at(&points, 10.0), 0.0);
        assert_eq!(fraction_at(&points, 2000.0), 1.0);
        let (_, clipped) = bulk(
            vec![Series {
                name: "epoll".into(),
                points,
            }],
            0.0,
            0.995,
        );
        let (_, _, _, above, _) = clipped.tails[0].clone();
        assert!(above > 0.0 && above < 0.01, "{above}");
    }

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
        let svg = linear_lines(
            "t",
            "layers per side",
            "Mbit/s",
            &[Line::from(&layers)],
            None,
            false,
        )
        .unwrap();
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
        let svg = cdf("t", "deviation (µs)", "fraction", &[deviation], &[]).unwrap();
        let (x, y) = ticks(&svg);
        assert!(x >= 3 && y >= 3, "{x} {y}");
        let lat = Line {
            name: "poll".into(),
            colour_key: "poll".into(),
            points: vec![(1000.0, 4100.0), (5000.0, 4300.0), (10000.0, 4600.0)],
            spread: vec![(5000.0, 4200.0, 4500.0)],
            kind: Kind::Ours,
        };
        let paper = Line {
            kind: Kind::Paper,
            name: "poll (paper)".into(),
            ..lat.clone()
        };
        let svg = log_log_lines("t", "connections", "µs", &[lat, paper]).unwrap();
        let (x, y) = ticks(&svg);
        assert!(x >= 3 && y >= 2, "{x} {y}: {svg}");
        assert!(svg.contains("10,000"), "{svg}");
        assert!(!svg.contains("4000.0"), "{svg}");
    }

    #[test]
    fn identical_lines_are_named_and_drawn_over_each_other() {
        let a = Line {
            name: "layer-parallel projected".into(),
            colour_key: "layer-parallel".into(),
            points: vec![(1.0, 780.0), (5.0, 770.0)],
            kind: Kind::Projected,
            ..Line::default()
        };
        let b = Line {
            name: "run-to-completion projected".into(),
            colour_key: "run-to-completion".into(),
            ..a.clone()
        };
        let paper = Line {
            name: "paper".into(),
            colour_key: "paper".into(),
            points: vec![(1.0, 33.0), (5.0, 29.0)],
            kind: Kind::Paper,
            ..Line::default()
        };
        let lines = [a, b, paper];
        assert!(paper_far_apart(&lines));
        let svg = linear_lines("t", "layers", "Mbit/s", &lines, None, true).unwrap();
        assert!(svg.contains("drawn dashed over it"), "{svg}");
        let frame = Frame::of(&lines, &[]);
        assert!(frame.entries[1]
            .text
            .join(" ")
            .contains("the same values as layer-parallel projected"));
        let (first, second) = (frame.entries[0].dash, frame.entries[1].dash);
        assert_ne!(
            first, second,
            "the second line's dashes fall in the first's gaps"
        );
    }
}
