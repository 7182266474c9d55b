//! Plots: tick labels on both axes, and CDFs that pool every repetition.

use crate::projection::polling_toml;
use crate::support::{axis_ticks, locality, svgs, sweep, LOCALITY};
use connlab_report::{render, Format};

#[test]
fn every_plot_has_tick_labels_on_both_axes() {
    let html = render(&locality(), Format::HTML).unwrap();
    let plots = svgs(&html);
    assert!(plots.len() >= 3, "connections plots and CDFs");
    let cdfs = html.matches("id=\"plot-cdf-").count();
    assert!(cdfs >= 2, "{cdfs} send-deviation CDFs");
    for svg in &plots {
        let (x, y) = axis_ticks(svg);
        assert!(x >= 2 && y >= 2, "x {x}, y {y} tick labels in {svg}");
        assert!(!svg.contains(".0<"), "no trailing .0 labels");
    }
    // The paper's values drawn on the same axes.
    assert!(html.contains("select (paper)"));

    // The polling-cost kind: server timings and throughput against
    // connections, closed loop.
    let dir = sweep(&polling_toml(), |p| {
        (
            100.0,
            0.0,
            if p.engine == "select" {
                p.connections as f64 / 100.0
            } else {
                2.0
            },
        )
    });
    let html = render(&dir, Format::HTML).unwrap();
    assert!(
        html.contains("id=\"projection\""),
        "the projection is rendered"
    );
    let plots = svgs(&html);
    assert!(plots.len() >= 5, "{} polling plots", plots.len());
    for svg in plots {
        let (x, y) = axis_ticks(svg);
        assert!(x >= 2 && y >= 2, "x {x}, y {y} tick labels in {svg}");
        assert!(
            svg.contains("5,000\n</text>"),
            "connection counts label the x axis: {svg}"
        );
    }
}

#[test]
fn active_ratio_and_web_plots_have_tick_labels() {
    // Table 4's kind: one connection count, the active ratio varies.
    let table4 = LOCALITY
        .replace("connections = [400, 2000]", "connections = [10000]")
        .replace(
            "active_ratios = [\"1\"]",
            "active_ratios = [\"1/4\", \"1/16\", \"1/64\"]",
        )
        .replace("vary = \"connections\"", "vary = \"active_ratio\"");
    let table4 = table4[..table4.find("[[paper.cells]]").unwrap()].to_string();
    let dir = sweep(&table4, |p| (100.0 + 1000.0 * p.active_ratio, 200.0, 0.0));
    let html = render(&dir, Format::HTML).unwrap();
    let plots = svgs(&html);
    assert!(html.contains("against active ratio"));
    assert!(
        html.contains("1/64\n</text>"),
        "ratios labelled as fractions"
    );
    for svg in &plots {
        let (x, y) = axis_ticks(svg);
        assert!(x >= 2 && y >= 2, "x {x}, y {y} tick labels in {svg}");
    }

    // The gateway kind: rates on the x axis, and backend counts.
    let web = r#"
name = "web"
title = "Web fixture"
[topology]
client_hosts = 2
[server]
engines = ["proxy:1", "proxy:2", "proxy:3"]
protocol = "http"
cpu = "1"
[matrix]
connections = [100]
active_ratios = ["1"]
rates = [500, 1000, 2000]
request_size = 128
response_size = "10KiB"
duration = "1s"
repetitions = 2
[web]
backends = 3
"#;
    let mut dir = sweep(web, |p| (1000.0 + p.rate_per_s, 0.0, 0.0));
    for p in dir.points.iter_mut().chain(dir.controls.iter_mut()) {
        let n = p.params.engine[6..].parse::<usize>().unwrap();
        p.backend_cpu_share = vec![0.2 * p.params.rate_per_s / 1000.0; n];
        p.gateway_cpu_share = Some(0.1 * n as f64);
        p.cpu_busy_share = vec![0.3, 0.05 * n as f64];
    }
    let html = render(&dir, Format::HTML).unwrap();
    let plots = svgs(&html);
    assert!(html.contains("against backends"), "backend-count plots");
    assert!(plots.len() >= 6, "{} web plots", plots.len());
    for svg in &plots {
        let (x, y) = axis_ticks(svg);
        assert!(x >= 2 && y >= 2, "x {x}, y {y} tick labels in {svg}");
        assert!(!svg.contains(".0\n</text>"), "no trailing .0 labels");
    }
}

/// Deviations evenly spread over `lo..hi` µs, as a result stores them.
fn deviations(lo: f64, hi: f64) -> connlab_measure::DeviationHistogramParts {
    let mut h = connlab_measure::DeviationHistogram::new();
    for i in 0..=100 {
        h.record_us(lo + (hi - lo) * f64::from(i) / 100.0);
    }
    h.to_parts()
}

#[test]
fn send_deviation_cdfs_pool_every_repetition() {
    // Repetition 1 sent early (-20 to 0 µs), repetition 2 late (+30 to
    // +50 µs): only the pooled CDF reaches past +30 µs.
    let mut dir = locality();
    for p in dir.points.iter_mut().chain(dir.controls.iter_mut()) {
        p.load.histograms.send_deviation = Some(if p.params.repetition == 1 {
            deviations(-20.0, 0.0)
        } else {
            deviations(30.0, 50.0)
        });
    }
    let html = render(&dir, Format::HTML).unwrap();
    let figures: Vec<&str> = html
        .split("<figure class=\"plot\" id=\"plot-cdf-")
        .skip(1)
        .map(|f| &f[..f.find("</figure>").unwrap()])
        .collect();
    assert!(figures.len() >= 2, "{} CDFs", figures.len());
    for f in figures {
        assert!(
            f.contains("all 2 repetitions of each point pooled"),
            "caption says so: {f}"
        );
        assert!(!f.contains("first repetition"));
        // The x axis reaches the second repetition's deviations.
        let xs: Vec<f64> = f
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = &t[t.find('>')? + 1..t.find("</text>")?];
                body.trim().replace('−', "-").parse::<f64>().ok()
            })
            .collect();
        assert!(xs.iter().any(|x| *x >= 30.0), "x ticks {xs:?}");
        assert!(xs.iter().any(|x| *x < 0.0), "x ticks {xs:?}");
        let (x, y) = axis_ticks(f);
        assert!(x >= 2 && y >= 2, "x {x}, y {y} tick labels");
    }
}

#[test]
fn paper_values_projections_and_tails_are_marked() {
    use crate::pages::{pipeline, run_page};
    use connlab_report::render_pipeline;
    // The pipeline: ours ten times the paper's Mbit/s, so a log axis.
    let html = render_pipeline(&pipeline(), Format::HTML).unwrap();
    assert!(html.contains("the y axis is logarithmic"), "log axis");
    assert!(
        html.contains("stroke=\"#000000\" stroke-width=\"2\""),
        "black paper markers"
    );
    // The run page: the caption and the plot agree on where it stops.
    let html = connlab_report::run::render_run(&run_page()).unwrap();
    assert!(html.contains("at most its 99.5th percentile"));
    assert!(html.contains("The axis shows the bulk"), "tail noted");
    assert!(html.contains("beyond the axis:"), "tail noted in the plot");
}
