//! The locality kind: the paper beside ours, claims and their verdicts.

use crate::support::{locality, sweep, LOCALITY};
use connlab_report::{render, Format};
use std::path::Path;

#[test]
fn html_puts_the_paper_beside_ours_with_verdicts() {
    let html = render(&locality(), Format::HTML).unwrap();
    // Kept for a look in a browser (scripts/screenshot_report.sh).
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-fixture.html"),
        &html,
    );
    // Paper select mean at 400 conns, 125 req/s: 1.13 ms = 1,130 µs; ours
    // the median of 280 and 308 µs = 294 µs; ours/paper 0.26x; the spread
    // below it. One time unit on the page: µs, as in the plots.
    assert!(
        html.contains("<td class=\"paper\">1,130</td>"),
        "paper value"
    );
    assert!(
        html.contains("294<span class=\"spread\">280–308</span>"),
        "ours, median and spread"
    );
    assert!(html.contains("0.26×"), "ours / paper");
    assert!(html.contains("service latency (µs)"), "unit stated");
    assert!(!html.contains("(ms)"), "no second time unit");
    // Claims: the shape from the paper's cells (5,650 / 1,130 = 5.0x).
    assert!(html.contains("400 → 2,000 conns at ratio 1 · 125 req/s"));
    assert!(html.contains("<td class=\"paper nowrap\">5.0×</td>"));
    assert!(html.contains("<td class=\"holds\">holds</td>"));
    assert!(html.contains("cannot be measured here: 10,000 conns not in this run"));
    assert!(html.contains("widest span measured instead"));
    // A setting only the paper has: named, never replaced by another.
    assert!(html.contains("cannot be measured here: ratio 1 · 2,000 req/s not in this run"));
    assert!(html.contains("cannot be measured here: needs 40,000 connections"));
    // Derived Table 5: the paper's 7.08 µs beside ours, and the point picked.
    assert!(html.contains("Table 5: send-timing deviation (µs)"));
    assert!(html.contains("<td class=\"paper\">7.08</td>"));
    assert!(
        html.contains("2,000 conns · ratio 1 · 125 req/s")
            || html.contains("400 conns · ratio 1 · 125 req/s")
    );
    // Environment: recorded placement, nothing unknown as "?".
    assert!(html.contains("CPU set 1"));
    assert!(!html.contains(" ?,") && !html.contains(" ?<"), "no '?'");
    // Each claim comparison states its verdict.
    let claims = &html[html.find("id=\"claims\"").unwrap()..];
    let claims = &claims[..claims.find("</table>").unwrap()];
    for row in claims.split("<tr").skip(2) {
        assert!(
            ["holds", "fails", "noisy", "unmeasurable", "unjudged"]
                .iter()
                .any(|k| row.contains(&format!("class=\"{k}\""))),
            "row without a verdict: {row}"
        );
    }
}

#[test]
fn a_failing_claim_says_so() {
    let dir = sweep(LOCALITY, |p| {
        // epoll doubles: "stays flat" fails.
        let base = if p.engine == "select" { 1.0 } else { 2.0 };
        (base * p.connections as f64, 300.0, 0.0)
    });
    let html = render(&dir, Format::HTML).unwrap();
    assert!(
        html.contains("<td class=\"fails\">does not hold</td>"),
        "{html}"
    );
}

#[test]
fn markdown_and_csv_carry_the_same_data() {
    let dir = locality();
    let md = render(&dir, Format::MARKDOWN).unwrap();
    assert!(md.contains("## The paper's claims against ours"));
    let csv = render(&dir, Format::CSV).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let width = headers.len();
    assert!(rows.iter().all(|r| r.len() == width), "rectangular");
    let cell = rows
        .iter()
        .find(|r| {
            &r[col("kind")] == "cell"
                && &r[col("engine")] == "select"
                && &r[col("statistic")] == "mean"
                && &r[col("connections")] == "400"
                && &r[col("rate_per_s")] == "125.0"
        })
        .expect("select mean at 400 conns, 125 req/s");
    assert_eq!(&cell[col("paper_us")], "1130.0");
    assert_eq!(&cell[col("ours_min_us")], "280.0");
    assert_eq!(&cell[col("n")], "2");
    let claims: Vec<&csv::StringRecord> =
        rows.iter().filter(|r| &r[col("kind")] == "claim").collect();
    assert!(claims.iter().any(|r| &r[col("verdict")] == "holds"));
    assert!(claims
        .iter()
        .any(|r| r[col("verdict")].starts_with("cannot be measured here")));
    assert!(rows.iter().any(|r| &r[col("kind")] == "derived"));
}

/// A point failing `steal` at one end of a comparison: the comparison and
/// its claim say "cannot be judged here", naming the gate and its figure;
/// the report lists the point with its gates; the index counts it.
#[test]
fn a_claim_on_invalid_points_cannot_be_judged_here() {
    use connlab_lab::validity::{Gate, Validity};
    let mut dir = locality();
    for p in dir.points.iter_mut().chain(dir.controls.iter_mut()) {
        let steal = if p.params.engine == "select" && p.params.connections == 2000 {
            0.073
        } else {
            0.001
        };
        p.checked.validity = Some(Validity::of(
            vec![Gate::at_most("steal", steal, 0.02, String::new())],
            3,
        ));
    }
    let table = connlab_report::PaperTable::of(&dir);
    let claims = connlab_report::check_claims(&dir, &table);
    let grows = claims
        .iter()
        .find(|c| c.text == "select grows with connections")
        .unwrap();
    let why = "steal 7.3 % > 2 % at 2 of 2 points";
    assert!(
        matches!(&grows.verdict, connlab_report::Verdict::CannotJudge(w) if w.contains(why)),
        "{:?}",
        grows.verdict
    );
    assert_eq!(grows.verdict.csv_key(), "cannot_judge_here");
    // Comparisons on valid points only are judged as before.
    let flat = claims
        .iter()
        .find(|c| c.text == "epoll stays flat")
        .unwrap();
    assert_eq!(flat.verdict, connlab_report::Verdict::Holds);
    let html = render(&dir, Format::HTML).unwrap();
    assert!(
        html.contains("id=\"invalid\""),
        "the invalid points are listed"
    );
    assert!(html.contains("select-c2000-a1-r125-rep1"));
    assert!(
        html.contains("4 failed (points per gate: steal 4)"),
        "{html}"
    );
    let csv = render(&dir, Format::CSV).unwrap();
    assert!(csv.contains("invalid_point,"), "{csv}");
}

/// Without invalid points but with a noisy A/A control, a comparison near
/// its bound cannot be judged, one far from it still can.
#[test]
fn the_a_a_noise_floor_decides_close_calls() {
    let mut dir = locality();
    // The control strays by 40 % from the engine's own measurement.
    for c in &mut dir.controls {
        c.load.service_latency_us.mean *= 1.4;
    }
    let floor = connlab_report::noise(&dir, connlab_lab::Metric::ServiceLatency, 0).unwrap();
    assert!((floor.factor - 1.4).abs() < 1e-9, "{floor:?}");
    let table = connlab_report::PaperTable::of(&dir);
    let claims = connlab_report::check_claims(&dir, &table);
    // epoll flat at 1.0x within 0.8-1.25x: 1.0 x 1.4 crosses 1.25.
    let flat = claims
        .iter()
        .find(|c| c.text == "epoll stays flat")
        .unwrap();
    assert!(
        matches!(&flat.verdict, connlab_report::Verdict::CannotJudge(w) if w.contains("±40 %")),
        "{:?}",
        flat.verdict
    );
    // select 7x slower than epoll against >= 2x: 7 / 1.4 = 5 still clears it.
    let slower = claims
        .iter()
        .find(|c| c.text == "select is slower than epoll at 2,000")
        .unwrap();
    assert_eq!(slower.verdict, connlab_report::Verdict::Holds);
}

/// A claim on how one engine's ratio against another changes between two
/// rows (`over = "change"`), and one on a metric against another of the
/// same point (`versus_metric`): both judged per repetition.
#[test]
fn a_change_of_a_ratio_and_a_metric_against_another_are_judged() {
    let toml = r#"
name = "fixture"
title = "Fixture: a ratio's change and latency against the cycle"
[topology]
client_hosts = 2
[server]
engines = ["poll", "rtsig"]
cpu = "1"
profile_poll = true
[matrix]
connections = [1000]
active_ratios = ["1/4", "1/64"]
rates = [500]
request_size = 128
response_size = "10KiB"
duration = "1s"
repetitions = 3
[paper]
table = "Figure 7"
source = "fixture"
metric = "service_latency"
vary = "connections"
[[paper.claims]]
text = "rtsig gains more against poll at a small ratio"
engines = ["rtsig"]
versus = "poll"
along = "active_ratio"
over = "change"
from = 0.25
to = 0.015625
expect_max = 0.9
[[paper.claims]]
text = "the gain does not change"
engines = ["rtsig"]
versus = "poll"
along = "active_ratio"
over = "change"
from = 0.25
to = 0.015625
expect_min = 0.9
[[paper.claims]]
text = "latency is about a cycle"
engines = ["poll", "rtsig"]
versus_metric = "cycle"
expect_min = 0.5
expect_max = 1.5
"#;
    // poll's latency is 400 µs at both ratios; rtsig's is 200 µs at 1/4
    // and 50 µs at 1/64, so rtsig / poll falls from 0.5 to 0.125: 0.25x.
    // The cycle (3x the poll-call figure) equals the latency.
    let dir = sweep(toml, |p| {
        let mean = match (p.engine.as_str(), p.active_ratio_label.as_str()) {
            ("rtsig", "1/4") => 200.0,
            ("rtsig", _) => 50.0,
            _ => 400.0,
        };
        (mean, 10.0, mean / 3.0)
    });
    let table = connlab_report::PaperTable::of(&dir);
    let claims = connlab_report::check_claims(&dir, &table);
    let by = |t: &str| claims.iter().find(|c| c.text == t).unwrap();
    let gains = by("rtsig gains more against poll at a small ratio");
    assert_eq!(gains.verdict, connlab_report::Verdict::Holds);
    let ours = gains.checks[0].ours.unwrap();
    assert!((ours - 0.25).abs() < 1e-9, "{ours}");
    assert_eq!(gains.checks[0].n, 3);
    assert!(gains.is_ratio);
    assert!(matches!(
        by("the gain does not change").verdict,
        connlab_report::Verdict::DoesNotHold { .. }
    ));
    let cycle = by("latency is about a cycle");
    assert_eq!(cycle.verdict, connlab_report::Verdict::Holds);
    // One check per engine and row, each 1.0x.
    assert_eq!(cycle.checks.len(), 4);
    for c in &cycle.checks {
        assert!((c.ours.unwrap() - 1.0).abs() < 1e-9, "{c:?}");
    }
}

/// Figure 2's shares are judged from each point's send-deviation shares;
/// results from before the shares existed cannot be measured.
#[test]
fn figure_2_shares_are_judged_from_every_send() {
    let toml = LOCALITY.to_string()
        + r#"
[[paper.claims]]
source = "Figure 2"
text = "few sends beyond 10 us"
engines = ["select"]
metric = "send_shares"
statistic = "over 10 us"
paper_value = 0.05
expect_max = 0.10
[[paper.claims]]
source = "Figure 2"
text = "most sends near the median"
engines = ["select"]
metric = "send_shares"
statistic = "near median"
paper_value = 0.9
expect_min = 0.9
"#;
    let old = sweep(&toml, |_| (100.0, 10.0, 1.0));
    let mut dir = sweep(&toml, |_| (100.0, 10.0, 1.0));
    for p in dir.points.iter_mut().chain(dir.controls.iter_mut()) {
        p.load.send_deviation_us.count = 1000;
        p.load.send_deviation_us.share_over_10us = 0.04;
        p.load.send_deviation_us.share_near_median = 0.93;
    }
    let verdict = |dir: &connlab_lab::SweepDir, text: &str| {
        let table = connlab_report::PaperTable::of(dir);
        connlab_report::check_claims(dir, &table)
            .into_iter()
            .find(|c| c.text == text)
            .unwrap()
            .verdict
    };
    for text in ["few sends beyond 10 us", "most sends near the median"] {
        assert_eq!(
            verdict(&dir, text),
            connlab_report::Verdict::Holds,
            "{text}"
        );
        assert!(
            matches!(
                verdict(&old, text),
                connlab_report::Verdict::CannotMeasure(_)
            ),
            "{text}"
        );
    }
}
