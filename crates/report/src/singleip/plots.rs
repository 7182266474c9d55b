//! The plots of a single-IP sweep: lines on linear or log axes, packet
//! timelines and the round-trip CDF.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Axis {
    Linear,
    /// Decades, plain numbers.
    Log,
    /// Decades, labelled as sizes (1KB, 1MB).
    LogSize,
}

pub(super) fn plot_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

pub(super) fn colour(name: &str, i: usize) -> RGBColor {
    match name {
        "io16k" | "bg1" => RGBColor(31, 119, 180),
        "iooff" | "fg" => RGBColor(214, 39, 40),
        "nat" | "bg2" => RGBColor(44, 160, 44),
        "haproxy" => RGBColor(148, 103, 189),
        _ => [RGBColor(255, 127, 14), RGBColor(140, 86, 75)][i % 2],
    }
}

/// A number for an axis tick: integers without `.0`.
pub(super) fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(super) fn log_tick(v: f64, sizes: bool) -> String {
    if (v - v.round()).abs() > 1e-6 {
        return String::new();
    }
    let x = 10f64.powi(v.round() as i32);
    if sizes {
        bytes_label(x.round() as u64)
    } else if x >= 1.0 {
        tick(x)
    } else {
        format!("{x}")
    }
}

pub(super) fn range(values: impl Iterator<Item = f64>, axis: Axis) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (axis == Axis::Linear || *v > 0.0)) {
        let v = if axis == Axis::Linear { v } else { v.log10() };
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    match axis {
        Axis::Linear => {
            let lo = lo.min(0.0);
            (lo, if hi > lo { hi * 1.05 } else { lo + 1.0 })
        }
        _ => {
            let (a, b) = (lo.floor(), hi.ceil());
            (a, if b > a { b } else { a + 1.0 })
        }
    }
}

pub(super) fn tx(v: f64, axis: Axis) -> f64 {
    if axis == Axis::Linear {
        v
    } else {
        v.max(1e-12).log10()
    }
}

/// Lines with markers; log axes are drawn as decades.
pub(super) fn line_plot(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    x_axis: Axis,
    y_axis: Axis,
) -> Result<String, ReportError> {
    line_plot_noted(title, x_desc, y_desc, series, (x_axis, y_axis), &[])
}

/// [`line_plot`] with notes under the legend.
pub(super) fn line_plot_noted(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    (x_axis, y_axis): (Axis, Axis),
    notes: &[String],
) -> Result<String, ReportError> {
    let (x0, x1) = range(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)), x_axis);
    let (y0, y1) = range(series.iter().flat_map(|s| s.1.iter().map(|p| p.1)), y_axis);
    let mut svg = String::new();
    {
        let names: Vec<String> = series.iter().map(|s| s.0.clone()).collect();
        let plot_w = crate::plots::WIDTH - crate::plots::side_legend_width(&names, notes);
        let root =
            SVGBackend::with_string(&mut svg, (crate::plots::WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, _) = root.split_horizontally(plot_w);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                title,
                ("sans-serif", crate::plots::title_font(title, plot_w)),
            )
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(plot_err)?;
        let xf = move |v: &f64| match x_axis {
            Axis::Linear => tick(*v),
            Axis::Log => log_tick(*v, false),
            Axis::LogSize => log_tick(*v, true),
        };
        let yf = move |v: &f64| match y_axis {
            Axis::Linear => tick(*v),
            Axis::Log => log_tick(*v, false),
            Axis::LogSize => log_tick(*v, true),
        };
        let xn = if x_axis == Axis::Linear {
            8
        } else {
            (x1 - x0) as usize + 1
        };
        let yn = if y_axis == Axis::Linear {
            6
        } else {
            (y1 - y0) as usize + 1
        };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(xn)
            .y_labels(yn)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .label_style(("sans-serif", crate::plots::LABEL_FONT))
            .axis_desc_style(("sans-serif", crate::plots::DESC_FONT))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(plot_err)?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let c = colour(name, i);
            let pts: Vec<(f64, f64)> = pts
                .iter()
                .map(|(x, y)| (tx(*x, x_axis), tx(*y, y_axis)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(plot_err)?;
            if pts.len() <= 30 {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                    .map_err(plot_err)?;
            }
        }
        let entries: Vec<(String, RGBColor)> = series
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), colour(name, i)))
            .collect();
        crate::plots::side_legend(
            &root,
            plot_w as i32,
            &entries,
            crate::plots::Sample::Line,
            notes,
        )?;
        root.present().map_err(plot_err)?;
    }
    Ok(crate::plots::full_width(svg))
}

/// The single-IP plots' height.
const HEIGHT: u32 = 440;

/// Time against sequence (MB, or KB in a close-up) per stream, drops as crosses.
pub(super) fn timeline_plot(
    title: &str,
    r: &SingleIpRecord,
    window: Option<(f64, f64)>,
) -> Result<String, ReportError> {
    let Some(c) = &r.contention else {
        return Ok(String::new());
    };
    let names: Vec<&str> = c.streams.iter().map(|s| s.name.as_str()).collect();
    let pts: Vec<_> = c
        .timeline
        .iter()
        .filter(|p| window.is_none_or(|(a, b)| p.t_s >= a && p.t_s <= b))
        .filter(|p| window.is_none() || p.stream == 0)
        .collect();
    let (unit, scale) = if window.is_some() {
        ("KB", 1e3)
    } else {
        ("MB", 1e6)
    };
    let (x0, x1) = match window {
        Some(w) => w,
        None => range(pts.iter().map(|p| p.t_s), Axis::Linear),
    };
    let (y0, y1) = range(pts.iter().map(|p| p.seq as f64 / scale), Axis::Linear);
    let mut svg = String::new();
    {
        let legend_names: Vec<String> = names
            .iter()
            .map(|n| n.to_string())
            .chain(std::iter::once("× dropped".to_string()))
            .collect();
        let plot_w = crate::plots::WIDTH - crate::plots::side_legend_width(&legend_names, &[]);
        let root =
            SVGBackend::with_string(&mut svg, (crate::plots::WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, _) = root.split_horizontally(plot_w);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                title,
                ("sans-serif", crate::plots::title_font(title, plot_w)),
            )
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1.max(x0 + 1e-3), y0..y1.max(y0 + 1e-3))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("time since the background started (s)")
            .y_desc(format!("sequence ({unit})"))
            .x_labels(7)
            .y_labels(6)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .label_style(("sans-serif", crate::plots::LABEL_FONT))
            .axis_desc_style(("sans-serif", crate::plots::DESC_FONT))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(plot_err)?;
        let mut drawn: Vec<(String, RGBColor)> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let c = colour(name, i);
            let sent: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| usize::from(p.stream) == i && !p.dropped)
                .map(|p| (p.t_s, p.seq as f64 / scale))
                .collect();
            if sent.is_empty() && window.is_some() {
                continue;
            }
            chart
                .draw_series(sent.iter().map(|p| Circle::new(*p, 1, c.filled())))
                .map_err(plot_err)?;
            drawn.push((name.to_string(), c));
            let drops: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| usize::from(p.stream) == i && p.dropped)
                .map(|p| (p.t_s, p.seq as f64 / scale))
                .collect();
            chart
                .draw_series(drops.iter().map(|p| Cross::new(*p, 3, c.stroke_width(1))))
                .map_err(plot_err)?;
        }
        crate::plots::side_legend(
            &root,
            plot_w as i32,
            &drawn,
            crate::plots::Sample::Dot,
            &["× a dropped packet".to_string()],
        )?;
        root.present().map_err(plot_err)?;
    }
    Ok(crate::plots::full_width(svg))
}

/// CDF of the round trips of every system (all repetitions pooled).
pub(super) fn rtt_cdf_plot(sweep: &SingleIpSweep) -> Result<Option<String>, ReportError> {
    let mut series = Vec::new();
    for s in systems_of(sweep, ExpKind::Rtt) {
        let mut v: Vec<f64> = sweep
            .select(ExpKind::Rtt, s, connlab_lab::RTT_BYTES)
            .iter()
            .filter_map(|r| r.rtt.as_ref())
            .flat_map(|r| r.samples_us.iter().copied())
            .collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        // Every half percent, then clipped to the bulk below.
        let n = v.len();
        let pts = (0..=200)
            .map(|k| {
                let f = f64::from(k) / 200.0;
                let i = (f * (n - 1) as f64).round() as usize;
                (v[i], f)
            })
            .collect();
        series.push(crate::plots::Series {
            name: s.name().to_string(),
            points: pts,
        });
    }
    if series.is_empty() {
        return Ok(None);
    }
    // The tail is scheduling noise on a shared machine: it would squeeze
    // the rest, so the plot shows the bulk and notes the tail.
    let (series, clipped) = crate::plots::bulk(series, 0.0, 0.99);
    let series: Vec<(String, Vec<(f64, f64)>)> =
        series.into_iter().map(|s| (s.name, s.points)).collect();
    line_plot_noted(
        "4-byte round trips: distribution",
        "round trip (µs)",
        "fraction of round trips",
        &series,
        (Axis::Linear, Axis::Linear),
        &clipped.legend_notes(),
    )
    .map(Some)
}
