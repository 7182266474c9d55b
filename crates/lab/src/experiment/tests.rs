use super::file::{Compare, Experiment, Metric, Vary};
use super::paper::{ClaimShape, DerivedPick};
use super::plan::{parse_link_rate, PointParams};
use crate::values::WebPolicy;

const MINIMAL: &str = r#"
name = "t"
title = "T"
[topology]
client_hosts = 2
link_rate = "1gbit"
[server]
engines = ["select", "epoll"]
[matrix]
connections = [10, 40]
active_ratios = ["1", 0.5, "1/16"]
rates = [100]
request_size = 128
response_size = "10KiB"
duration = "2s"
[quick]
connections = [10]
duration = "1s"
"#;

#[test]
fn plans_every_combination_engines_innermost() {
    let e = Experiment::from_toml(MINIMAL, "t.toml").unwrap();
    let p = e.plan(false);
    // Each cell: the A/A control (epoll, measured first), then the engines.
    assert_eq!(p.len(), 2 * 3 * 3);
    assert_eq!(e.control_engine(), Some("epoll"));
    assert!(p[0].control && p[0].engine == "epoll");
    assert_eq!(p[0].id(), "epoll-c10-a1-r100-rep1-aa");
    assert_eq!(p[1].engine, "select");
    assert_eq!(p[2].engine, "epoll");
    assert!(!p[1].control && !p[2].control);
    assert_eq!(p[1].id(), "select-c10-a1-r100-rep1");
    assert_eq!(p[7].id(), "select-c10-a1_16-r100-rep1");
    assert_eq!(p[7].active_ratio, 1.0 / 16.0);
    assert_eq!(p[0].response_size_bytes, 10240);
    let ids: std::collections::HashSet<_> = p.iter().map(PointParams::id).collect();
    assert_eq!(ids.len(), p.len(), "ids are unique");
    let q = e.plan(true);
    assert_eq!(q.len(), 3 * 3);
    assert_eq!(q[0].duration_s, 1.0);
    // No control, or another one, as the file says.
    let none = MINIMAL.replace("[matrix]", "[validity]\ncontrol = \"none\"\n[matrix]");
    let e = Experiment::from_toml(&none, "t.toml").unwrap();
    assert_eq!(e.plan(false).len(), 2 * 3 * 2);
    assert!(e.plan(false).iter().all(|p| !p.control));
    let select = none.replace("\"none\"", "\"select\"");
    let e = Experiment::from_toml(&select, "t.toml").unwrap();
    assert_eq!(e.plan(false)[0].id(), "select-c10-a1-r100-rep1-aa");
    let err = Experiment::from_toml(&none.replace("\"none\"", "\"poll\""), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("validity.control") && err.contains("\"poll\""),
        "{err}"
    );
    assert_eq!(e.link_rate_bps(), Some(1_000_000_000));
}

#[test]
fn errors_name_the_file_and_field() {
    for (from, to, says) in [
        ("rates = [100]", "rates = [0]", "matrix.rates[0]"),
        ("rates = [100]", "rates = [\"fast\"]", "matrix.rates[0]"),
        ("\"1/16\"]", "\"2/1\"]", "matrix.active_ratios[2]"),
        (
            "\"select\", \"epoll\"",
            "\"select\", \"kqueue\"",
            "server.engines[1]",
        ),
        ("[10, 40]", "[10, 10]", "matrix.connections[1]"),
        ("[10, 40]", "[1, 40]", "matrix.connections[0]"),
        ("\"1gbit\"", "\"fast\"", "topology.link_rate"),
        ("duration = \"1s\"", "duration = \"x\"", "quick.duration"),
        (
            "client_hosts = 2",
            "client_hosts = 0",
            "topology.client_hosts",
        ),
    ] {
        let text = MINIMAL.replacen(from, to, 1);
        let err = Experiment::from_toml(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.toml: "), "{err}");
        assert!(err.contains(says), "{to}: {err}");
    }
    let err = Experiment::from_toml(&MINIMAL.replace("rates", "rate"), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line"), "TOML errors carry the line: {err}");
}

#[test]
fn closed_loop_rotating_points() {
    let text = MINIMAL
        .replace("rates = [100]", "rates = [\"max\"]")
        .replace(
            "[matrix]",
            "[client]\nactive_policy = \"rotating\"\ndepth = 1\n[matrix]",
        );
    let e = Experiment::from_toml(&text, "t.toml").unwrap();
    let p = e.plan(false);
    assert!(p[0].closed_loop());
    assert_eq!(p[0].rate_label(), "max");
    assert_eq!(p[1].id(), "select-c10-a1-rmax-rep1");
    // Rotating needs closed loop and depth 1.
    let open = MINIMAL.replace(
        "[matrix]",
        "[client]\nactive_policy = \"rotating\"\n[matrix]",
    );
    let err = Experiment::from_toml(&open, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("matrix.rates[0]") && err.contains("max"),
        "{err}"
    );
    let deep = text.replace("depth = 1", "depth = 4");
    let err = Experiment::from_toml(&deep, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("client.depth"), "{err}");
    let bad = text.replace("\"rotating\"", "\"random\"");
    let err = Experiment::from_toml(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("client.active_policy"), "{err}");
}

#[test]
fn web_experiments_name_gateway_configurations() {
    let web = MINIMAL.replace(
        "engines = [\"select\", \"epoll\"]",
        "engines = [\"direct\", \"nat\"]\nprotocol = \"http\"",
    ) + "[web]\nbackends = 2\nbackend_cpu = \"25%\"\n";
    let e = Experiment::from_toml(&web, "w.toml").unwrap();
    assert_eq!(e.backend_hosts(), vec!["web1", "web2"]);
    assert_eq!(e.web.as_ref().unwrap().policy, WebPolicy::IpMod);
    for (from, to, says) in [
        ("\"nat\"]", "\"kqueue\"]", "server.engines[1]"),
        ("backends = 2", "backends = 0", "web.backends"),
        ("\"25%\"", "\"lots\"", "web.backend_cpu"),
        (
            "protocol = \"http\"",
            "protocol = \"clb1\"",
            "server.protocol",
        ),
    ] {
        let err = Experiment::from_toml(&web.replacen(from, to, 1), "w.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{to}: {err}");
    }
}

const PAPER: &str = r#"
[paper]
table = "Table 3"
source = "test"
metric = "service_latency"
vary = "connections"
[[paper.cells]]
engine = "select"
connections = 10
rate_per_s = 100
mean_us = 1130.0
[[paper.derived]]
table = "Table 5"
metric = "send_deviation"
pick = "largest_first_stat"
[[paper.derived.cells]]
engine = "select"
stddev_us = 7.08
[[paper.derived.cells]]
engine = "epoll"
max_us = 337.0
[[paper.claims]]
text = "select grows"
engines = ["select"]
from = 10
to = 40
paper_ratio = 4.0
expect_min = 2.0
[[paper.claims]]
source = "Figure 2"
text = "send deviation stays below 1 ms"
engines = ["select", "epoll"]
metric = "send_deviation"
statistic = "max"
expect_max = 1000.0
[[paper.claims]]
source = "Table 3"
text = "select slower than epoll"
engines = ["select"]
versus = "epoll"
statistic = "median"
along = "rate"
from = 100
to = 100
expect_min = 1.0
"#;

#[test]
fn paper_sections_parse_into_typed_values() {
    let e = Experiment::from_toml(&(MINIMAL.to_string() + PAPER), "t.toml").unwrap();
    let p = e.paper.as_ref().unwrap();
    assert_eq!(p.derived[0].pick, DerivedPick::LargestFirstStat);
    assert_eq!(
        p.derived[0].cells[0].stats(Metric::SendDeviation)[0],
        Some(7.08)
    );
    let c = &p.claims;
    assert_eq!(
        c[0].source, "Table 3",
        "source defaults to the paper's table"
    );
    assert_eq!(
        c[0].shape(),
        ClaimShape::Along {
            from: 10.0,
            to: 40.0
        }
    );
    assert_eq!(c[1].source, "Figure 2");
    assert_eq!(c[1].metric_in(p), Metric::SendDeviation);
    assert_eq!(c[1].statistic_index(p), 2);
    assert_eq!(c[1].shape(), ClaimShape::Value);
    assert_eq!(c[2].along_in(p), Vary::Rate);
    assert_eq!(c[2].statistic_index(p), 1);
    assert_eq!(
        c[2].shape(),
        ClaimShape::Versus {
            engine: "epoll",
            range: Some((100.0, 100.0))
        }
    );
}

#[test]
fn a_claim_with_rates_covers_only_those_rates() {
    let text =
        MINIMAL.to_string() + &PAPER.replace("to = 40\n", "to = 40\nrates = [100.0, 2000.0]\n");
    let e = Experiment::from_toml(&text, "t.toml").unwrap();
    let claim = &e.paper.as_ref().unwrap().claims[0];
    assert!(claim.covers_rate(100.0) && claim.covers_rate(2000.0));
    assert!(!claim.covers_rate(500.0));
    // Without rates every rate is covered.
    assert!(e.paper.as_ref().unwrap().claims[1].covers_rate(500.0));
}

/// Issue 30: the polling paper's two new claim shapes.
#[test]
fn a_change_claim_and_a_metric_claim_have_their_shapes() {
    let text = MINIMAL.to_string()
        + &PAPER
            .replace(
                "to = 40\n",
                "to = 40\nversus = \"epoll\"\nover = \"change\"\n",
            )
            .replace(
                "statistic = \"max\"",
                "statistic = \"max\"\nversus_metric = \"cycle\"",
            );
    let e = Experiment::from_toml(&text, "t.toml").unwrap();
    let p = e.paper.as_ref().unwrap();
    assert_eq!(
        p.claims[0].shape(),
        ClaimShape::Change {
            versus: "epoll",
            from: 10.0,
            to: 40.0
        }
    );
    assert_eq!(
        p.claims[1].shape(),
        ClaimShape::Metrics {
            other: Metric::Cycle,
            range: None
        }
    );
    // The cycle has no "max": the claim's max is divided by its first, the mean.
    assert_eq!(p.claims[1].versus_statistic_index(p), 0);
}

#[test]
fn bad_paper_fields_are_named() {
    let text = MINIMAL.to_string() + PAPER;
    for (from, to, says) in [
        (
            "statistic = \"max\"",
            "statistic = \"mean\"",
            "paper.claims[1].statistic",
        ),
        (
            "expect_max = 1000.0",
            "expect_max = 1000.0\nexpect_min = 2000.0",
            "paper.claims[1].expect_min",
        ),
        (
            "engine = \"epoll\"\nmax_us",
            "engine = \"kqueue\"\nmax_us",
            "paper.derived[0].cells[1].engine",
        ),
        ("to = 40\n", "", "paper.claims[0].to"),
        // Issue 30: a tolerance per rate, on a claim from one row to another.
        (
            "to = 40\n",
            "to = 40\nrates = []\n",
            "paper.claims[0].rates",
        ),
        (
            "to = 40\n",
            "to = 40\nrates = [-5.0]\n",
            "paper.claims[0].rates",
        ),
        (
            "versus = \"epoll\"",
            "versus = \"epoll\"\nrates = [100.0]",
            "paper.claims[2].rates",
        ),
        ("expect_max = 1000.0", "", "paper.claims[1].expect_max"),
        (
            "versus = \"epoll\"",
            "versus = \"select\"",
            "paper.claims[2].versus",
        ),
        ("pick = \"largest_first_stat\"", "pick = \"first\"", "pick"),
        (
            "metric = \"send_deviation\"\nstatistic",
            "metric = \"speed\"\nstatistic",
            "metric",
        ),
        (
            "engine = \"select\"\nconnections",
            "engine = \"poll\"\nconnections",
            "paper.cells[0].engine",
        ),
        // Issue 30: a ratio's change needs versus; a metric against another
        // is not against itself, nor with versus.
        (
            "to = 40\n",
            "to = 40\nover = \"change\"\n",
            "paper.claims[0].over",
        ),
        // A divisor only for a single value; and a positive one.
        (
            "to = 40\n",
            "to = 40\ndivide_by = 6.0\n",
            "paper.claims[0].divide_by",
        ),
        (
            "statistic = \"max\"",
            "statistic = \"max\"\ndivide_by = 0.0",
            "paper.claims[1].divide_by",
        ),
        (
            "statistic = \"max\"",
            "statistic = \"max\"\nversus_metric = \"send_deviation\"",
            "paper.claims[1].versus_metric",
        ),
        (
            "versus = \"epoll\"",
            "versus = \"epoll\"\nversus_metric = \"cycle\"",
            "paper.claims[2].versus_metric",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let err = Experiment::from_toml(&text.replacen(from, to, 1), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.toml: ") && err.contains(says),
            "{to}: {err}"
        );
    }
}

/// A web experiment with the load-balancing paper's claim forms.
fn web_paper() -> String {
    MINIMAL.replace(
        "engines = [\"select\", \"epoll\"]",
        "engines = [\"direct\", \"nat\", \"nat:2\"]\nprotocol = \"http\"",
    ) + r#"[web]
backends = 2
[paper]
table = "Table 2"
source = "test"
metric = "throughput"
vary = "rate"
[[paper.cells]]
engine = "nat:2"
req_per_s = 1826.42
mbit_per_s = 143.5617
[[paper.derived]]
table = "Table 2 (gateway CPU)"
metric = "gateway_cpu"
pick = "highest_rate"
[[paper.derived.cells]]
engine = "nat:2"
gateway_cpu_share = 0.78
[[paper.claims]]
label = "peak"
text = "the peak doubles"
engines = ["nat"]
versus = "direct"
statistic = "rate"
over = "peak"
peak_within_us = 10000.0
paper_ratio = 1.9
expect_min = 1.6
[[paper.claims]]
text = "the gateway adds response time"
engines = ["nat"]
versus = "direct"
compare = "difference"
metric = "service_latency"
from = 100
to = 100
paper_value = 20000.0
expect_min = 0.0
[[paper.claims]]
text = "each backend about half"
engines = ["nat"]
versus = "direct"
metric = "backend_cpu"
paper_range = [0.46, 0.47]
percent = true
expect_min = 0.4
"#
}

#[test]
fn web_claims_parse_into_typed_values() {
    let e = Experiment::from_toml(&web_paper(), "w.toml").unwrap();
    let p = e.paper.as_ref().unwrap();
    assert_eq!(p.metric, Metric::Throughput);
    assert_eq!(p.cells[0].stats(Metric::Throughput)[0], Some(1826.42));
    assert_eq!(p.derived[0].pick, DerivedPick::HighestRate);
    assert_eq!(
        p.derived[0].cells[0].stats(Metric::GatewayCpu)[0],
        Some(0.78)
    );
    let c = &p.claims;
    assert_eq!(
        c[0].shape(),
        ClaimShape::Peak {
            versus: Some("direct"),
            range: None
        }
    );
    assert_eq!(c[0].label.as_deref(), Some("peak"));
    assert_eq!(c[1].compare, Compare::Difference);
    assert_eq!(c[1].paper_stated(), Some(20000.0));
    assert_eq!(c[2].metric_in(p), Metric::BackendCpu);
    assert!((c[2].paper_stated().unwrap() - 0.465).abs() < 1e-12);
    assert!(c[2].percent);
}

#[test]
fn bad_web_claim_fields_are_named() {
    let text = web_paper();
    for (from, to, says) in [
        ("over = \"peak\"", "over = \"top\"", "over"),
        (
            "compare = \"difference\"",
            "compare = \"minus\"",
            "compare",
        ),
        (
            "peak_within_us = 10000.0",
            "peak_within_us = -1.0",
            "paper.claims[0].peak_within_us",
        ),
        (
            "over = \"peak\"\n",
            "",
            "paper.claims[0].peak_within_us",
        ),
        (
            "paper_value = 20000.0",
            "paper_ratio = 20000.0",
            "paper.claims[1].paper_ratio",
        ),
        (
            "paper_ratio = 1.9",
            "paper_value = 1.9",
            "paper.claims[0].paper_value",
        ),
        (
            "paper_range = [0.46, 0.47]",
            "paper_range = [0.47, 0.46]",
            "paper.claims[2].paper_range",
        ),
        (
            "versus = \"direct\"\ncompare = \"difference\"\nmetric = \"service_latency\"\nfrom = 100\nto = 100\n",
            "compare = \"difference\"\nmetric = \"service_latency\"\n",
            "paper.claims[1].compare",
        ),
        (
            "req_per_s = 1826.42",
            "req_per_s = -1.0",
            "paper.cells[0].req_per_s",
        ),
        (
            "gateway_cpu_share = 0.78",
            "gateway_share = 0.78",
            "gateway_share",
        ),
        (
            "statistic = \"rate\"",
            "statistic = \"mean\"",
            "paper.claims[0].statistic",
        ),
        ("label = \"peak\"", "label = \" \"", "paper.claims[0].label"),
        (
            "metric = \"backend_cpu\"\npaper_range",
            "metric = \"backend_cpu\"\nexpect_max = 1.0\npaper_range",
            "",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let result = Experiment::from_toml(&text.replacen(from, to, 1), "w.toml");
        if says.is_empty() {
            assert!(result.is_ok(), "{to}: {:?}", result.err());
            continue;
        }
        let err = result.unwrap_err().to_string();
        assert!(
            err.starts_with("w.toml: ") && err.contains(says),
            "{to}: {err}"
        );
    }
    // A web metric needs a [web] section.
    let locality = MINIMAL.to_string()
        + "[paper]\ntable = \"T\"\nsource = \"s\"\nmetric = \"backend_cpu\"\nvary = \"rate\"\n";
    let err = Experiment::from_toml(&locality, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("paper.metric") && err.contains("[web]"),
        "{err}"
    );
}

#[test]
fn link_rates_parse_like_tc() {
    assert_eq!(parse_link_rate("100mbit"), Ok(Some(100_000_000)));
    assert_eq!(parse_link_rate("1.5Gbit"), Ok(Some(1_500_000_000)));
    assert_eq!(parse_link_rate("none"), Ok(None));
    assert!(parse_link_rate("1gb").is_err());
    assert!(parse_link_rate("1bit").is_err());
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let _ = Experiment::from_toml(&text, "p.toml");
    }
}
