use super::experiment::{LinkSpec, PipelineExperiment, PipelineRunParams};
use super::paper::ClaimStatistic;
use super::sweep::{capacity, projected_capacity, PipelineRunRecord, PipelineSweep, Spread};
use super::PIPELINE_SWEEP_SCHEMA;
use connlab_os::Environment;

use crate::Verdict;

const FILE: &str = r#"
name = "p"
title = "P"
[pipeline]
layers = [3, 5]
message_sizes = ["1KiB", 8192]
messages = 500
modes = ["layer-parallel", "run-to-completion"]
links = ["memory:800mbit", "memory:unlimited"]
[quick]
layers = [3]
messages = 50
[paper]
citation = "the paper"
link = "memory:800mbit"
messages = 500
[[paper.cells]]
table = "Table 2"
message_size = "8KiB"
layers = 5
mbit_s = 28.8
relative_capacity = 4.34
efficiency = 0.87
[[paper.line]]
source = "Section 3"
message_size = 8192
mbit_s = 35.8
[[paper.claims]]
id = "e5"
source = "Section 4"
text = "about 90% at 5 layers"
statistic = "efficiency"
layers = [5]
expect_min = 0.85
"#;

#[test]
fn plans_layers_innermost_with_the_one_layer_baseline() {
    let e = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
    assert_eq!(
        crate::ExperimentKind::of_text(FILE, "p.toml").unwrap(),
        crate::ExperimentKind::Pipeline
    );
    let plan = e.plan(false);
    assert_eq!(plan.len(), 2 * 2 * 2 * 3);
    assert_eq!(
        plan.iter().take(3).map(|p| p.layers).collect::<Vec<_>>(),
        [1, 3, 5]
    );
    assert_eq!(
        plan[0].id(),
        "layer-parallel-memory-800mbit-s1024-m500-l1-rep1"
    );
    assert_eq!(plan[1].baseline(), plan[0]);
    let quick = e.plan(true);
    assert_eq!(quick.len(), 2 * 2 * 2 * 2);
    assert!(quick.iter().all(|p| p.messages == 50));
    assert_eq!(e.paper_cell(8192, 5).map(|c| c.efficiency), Some(0.87));
    assert!(e.paper_cell(8192, 3).is_none());
    assert_eq!(e.paper_line(8192).map(|l| l.mbit_s), Some(35.8));
    assert_eq!(e.paper_sizes(), [8192]);
}

#[test]
fn bad_values_name_their_field() {
    for (from, to, field) in [
        ("layers = [3, 5]", "layers = [0]", "pipeline.layers"),
        ("layers = [3, 5]", "layers = []", "pipeline.layers"),
        ("\"1KiB\", 8192", "\"1KiB\", 4", "pipeline.message_sizes[1]"),
        ("messages = 500", "messages = 0", "pipeline.messages"),
        ("messages = 500", "messages = [500, 0]", "pipeline.messages"),
        ("\"run-to-completion\"]", "\"rtc\"]", "pipeline.modes[1]"),
        (
            "\"memory:800mbit\",",
            "\"memory:fast\",",
            "pipeline.links[0]",
        ),
        (
            "layers = 5\nmbit_s",
            "layers = 0\nmbit_s",
            "paper.cells[0].layers",
        ),
        ("mbit_s = 28.8", "mbit_s = -1", "paper.cells[0].mbit_s"),
        (
            "message_size = \"8KiB\"",
            "message_size = \"8 parsecs\"",
            "paper.cells[0].message_size",
        ),
        ("mbit_s = 35.8", "mbit_s = 0", "paper.line[0].mbit_s"),
        ("expect_min = 0.85", "", "paper.claims[0].expect_min"),
        (
            "statistic = \"efficiency\"",
            "statistic = \"not-measured\"",
            "paper.claims[0].unmeasurable",
        ),
        // Issue 30's two claims: two layer counts to compare; two sizes.
        (
            "statistic = \"efficiency\"",
            "statistic = \"capacity-rises\"",
            "paper.claims[0].layers",
        ),
        (
            "statistic = \"efficiency\"",
            "statistic = \"efficiency-by-size\"\nmessage_sizes = [\"8KiB\"]",
            "paper.claims[0].message_sizes",
        ),
        (
            "link = \"memory:800mbit\"\nmessages",
            "link = \"tcp\"\nmessages",
            "paper.link",
        ),
    ] {
        let text = FILE.replacen(from, to, 1);
        let err = PipelineExperiment::from_toml(&text, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{to}: {err}");
    }
    // Unknown fields and the old list shape are refused, naming the key.
    let err = PipelineExperiment::from_toml(
        &FILE.replace("efficiency = 0.87", "efficiency = 0.87\nefficency = 1"),
        "p.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("efficency"), "{err}");
    let err = PipelineExperiment::from_toml("[pipeline]\nlayers = 3\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("x.toml"), "{err}");
}

#[test]
fn links_parse_and_label() {
    assert_eq!(
        LinkSpec::parse("memory:800mbit"),
        Ok(LinkSpec::Memory(Some(800_000_000)))
    );
    assert_eq!(LinkSpec::parse("memory"), Ok(LinkSpec::Memory(None)));
    assert_eq!(LinkSpec::parse("udp"), Ok(LinkSpec::Udp));
    assert!(LinkSpec::parse("tcp").is_err());
    assert_eq!(
        LinkSpec::Memory(Some(800_000_000)).label(),
        "memory-800mbit"
    );
    assert_eq!(capacity(50.0, 5, Some(100.0)), (Some(2.5), Some(0.5)));
    assert_eq!(capacity(50.0, 5, None), (None, None));
}

#[test]
fn the_experiment_files_parse_into_typed_values() {
    let paper = PipelineExperiment::from_toml(
        include_str!("../../../../experiments/pipeline-tables.toml"),
        "pipeline-tables.toml",
    )
    .unwrap();
    let p = paper.paper.as_ref().unwrap();
    assert_eq!(p.cells.len(), 18, "Tables 1-3, six layer counts each");
    assert_eq!(paper.paper_sizes(), [1024, 8192, 32768]);
    assert_eq!(paper.paper_cell(8192, 5).map(|c| c.mbit_s), Some(28.8));
    assert_eq!(
        paper.paper_cell(32768, 11).map(|c| c.efficiency),
        Some(0.74)
    );
    assert_eq!(paper.paper_line(1024).map(|l| l.mbit_s), Some(4.7));
    assert_eq!(paper.paper_line(32768).map(|l| l.mbit_s), Some(98.2));
    // Section 4 (3) is measured on the workers sharing layer state.
    let rtc = p.claims.iter().find(|c| c.id == "rtc-locking").unwrap();
    assert_eq!(rtc.statistic, ClaimStatistic::LockContention);
    assert_eq!(rtc.mode, "run-to-completion-shared");
    assert_eq!(paper.pipeline.shared_workers, 2);
    assert_eq!(
        paper.library_mode("run-to-completion-shared"),
        connlab_pipeline::Mode::RunToCompletion { threads: 2 }
    );
    assert_eq!(paper.threads_of("run-to-completion-shared", 11), 6);
    // The paper's matrix: 6 layer counts x 3 sizes x 3 modes x 3
    // repetitions, and the line alone at each size and repetition.
    let plan = paper.plan(false);
    assert_eq!(plan.len(), 6 * 3 * 3 * 3 + 3 * 3);
    assert_eq!(plan.iter().filter(|r| r.layers == 0).count(), 9);
    assert!(plan
        .iter()
        .filter(|r| r.layers == 0)
        .all(|r| r.mode == "layer-parallel"));
    assert!(plan
        .iter()
        .all(|r| r.messages == 500 && r.link == LinkSpec::MemoryPerSize));
    // The line paced at the paper's line-alone rate at each size.
    for (size, line) in [(1024, 4_700_000), (8192, 35_800_000), (32768, 98_200_000)] {
        assert_eq!(paper.line_rate(LinkSpec::MemoryPerSize, size), Some(line));
        let paper_line = paper.paper_line(size).map(|l| l.mbit_s * 1e6);
        assert_eq!(paper_line, Some(line as f64));
    }
    assert_eq!(paper.plan(true).len(), 3 * 3 * 3 + 3);
    let ext = PipelineExperiment::from_toml(
        include_str!("../../../../experiments/pipeline-extended.toml"),
        "pipeline-extended.toml",
    )
    .unwrap();
    assert!(ext.paper.is_none());
    assert!(ext.plan(false).iter().all(|r| r.messages == 5000));
}

fn projection(mbit_s: Option<f64>, bound: &str) -> connlab_pipeline::Projection {
    connlab_pipeline::Projection {
        mbit_s,
        bound: bound.into(),
        unsupported: mbit_s.is_none().then(|| "too few busy samples".to_string()),
        ..Default::default()
    }
}

/// Two repetitions at 1 and 5 layers, 8 KiB, over the paper's line.
fn sweep(measured_5: [f64; 2], projected_5: [Option<f64>; 2]) -> PipelineSweep {
    let exp = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
    let mut runs = Vec::new();
    for rep in 0..2 {
        for (layers, measured, projected) in [
            (1, 100.0, Some(700.0)),
            (5, measured_5[rep], projected_5[rep]),
        ] {
            let params = PipelineRunParams {
                link: LinkSpec::Memory(Some(800_000_000)),
                mode: "layer-parallel".into(),
                message_size: 8192,
                layers,
                messages: 500,
                repetition: rep as u32 + 1,
            };
            runs.push(PipelineRunRecord {
                id: params.id(),
                params,
                result: connlab_pipeline::PipelineResult::synthetic(
                    layers as usize,
                    8192,
                    connlab_pipeline::Mode::LayerParallel,
                    measured,
                    projection(projected, "line"),
                ),
                relative_capacity: None,
                efficiency: None,
                projected_relative_capacity: None,
                projected_efficiency: None,
                finished_unix_s: 0.0,
                checked: crate::validity::Checked {
                    validity: None,
                    machine: None,
                    window_cpu: None,
                },
            });
        }
    }
    PipelineSweep {
        schema: PIPELINE_SWEEP_SCHEMA.into(),
        experiment: exp,
        quick: false,
        environment: Environment::capture(),
        started_unix_s: 0.0,
        runs_total: 4,
        runs,
        // Enough CPUs for every run here to be judged on measured figures.
        cpus: Some(64),
    }
}

#[test]
fn cells_give_medians_spreads_and_why_no_projection() {
    let s = sweep([90.0, 80.0], [Some(690.0), None]);
    let c = s.cell("layer-parallel", "memory-800mbit", 8192, 500, 5);
    assert_eq!(c.runs, 2);
    let eff = Spread::of(&c.measured[2]).unwrap();
    assert!((eff.median - 0.85).abs() < 1e-9 && (eff.min - 0.8).abs() < 1e-9);
    assert_eq!(eff.text(2), "0.85 (0.80–0.90)");
    assert_eq!(c.projected[0], [690.0]);
    assert_eq!(c.bounds, ["line"]);
    assert!(c.no_projection[0].contains("too few busy samples"));
    assert!(c.no_projected_capacity[0].starts_with("no projection"));
    assert_eq!(Spread::of(&[]), None);
}

#[test]
fn a_claim_holds_only_across_the_spread() {
    // Efficiencies 0.9 and 0.8 (claim: at least 0.85): does not hold.
    let s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    let c = &s.claims()[0];
    assert_eq!(c.paper.verdict, Verdict::Holds, "{}", c.paper.detail);
    assert_eq!(c.measured.verdict, Verdict::FAILS, "{}", c.measured.detail);
    assert!(
        c.measured.detail.contains("0.80–0.90"),
        "{}",
        c.measured.detail
    );
    // The projection: values within the bounds, no verdict.
    assert_eq!(
        c.projection, "8 KiB 5 layers: 0.97–0.99",
        "{}",
        c.projection
    );
    assert_eq!(c.cpus, 64);
    // Both repetitions at 0.9 or more: holds.
    let s = sweep([95.0, 90.0], [None, None]);
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::Holds);
    assert!(c.projection.contains("no projection"), "{}", c.projection);
}

#[test]
fn projected_efficiency_above_one_is_no_projection() {
    let base = connlab_pipeline::PipelineResult::synthetic(
        1,
        8192,
        connlab_pipeline::Mode::LayerParallel,
        100.0,
        projection(Some(100.0), "CPU share"),
    );
    let run = connlab_pipeline::PipelineResult::synthetic(
        5,
        8192,
        connlab_pipeline::Mode::LayerParallel,
        100.0,
        projection(Some(150.0), "receiver sink"),
    );
    let err = projected_capacity(&run, 5, Some(&base)).unwrap_err();
    assert!(err.contains("above 1"), "{err}");
    let unsupported = connlab_pipeline::PipelineResult::synthetic(
        1,
        8192,
        connlab_pipeline::Mode::LayerParallel,
        100.0,
        projection(None, ""),
    );
    let err = projected_capacity(&run, 5, Some(&unsupported)).unwrap_err();
    assert!(err.contains("one-layer run has none"), "{err}");
    let (rc, eff) = projected_capacity(&base, 5, Some(&base)).unwrap();
    assert!((rc - 5.0).abs() < 1e-9 && (eff - 1.0).abs() < 1e-9);
}

#[test]
fn line_share_uses_the_measured_line_alone() {
    let mut s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    if let Some(p) = s.experiment.paper.as_mut() {
        p.claims[0].statistic = ClaimStatistic::LineShare;
        p.claims[0].layers = vec![1];
        p.claims[0].expect_min = Some(0.9);
    }
    // Without zero-layer runs the configured 800 Mbit/s stands in:
    // 100 / 800.
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::FAILS);
    assert!(c.measured.detail.contains("0.12"), "{}", c.measured.detail);
    // The paper: 35.8 line alone, no 1-layer cell in this file.
    assert!(matches!(c.paper.verdict, Verdict::CannotMeasure(_)));
    for rep in 1..=2 {
        let params = PipelineRunParams {
            link: LinkSpec::Memory(Some(800_000_000)),
            mode: "layer-parallel".into(),
            message_size: 8192,
            layers: 0,
            messages: 500,
            repetition: rep,
        };
        s.runs.push(PipelineRunRecord {
            id: params.id(),
            params,
            result: connlab_pipeline::PipelineResult::synthetic(
                0,
                8192,
                connlab_pipeline::Mode::LayerParallel,
                105.0,
                projection(Some(105.0), "line"),
            ),
            relative_capacity: None,
            efficiency: None,
            projected_relative_capacity: None,
            projected_efficiency: None,
            finished_unix_s: 0.0,
            checked: crate::validity::Checked {
                validity: None,
                machine: None,
                window_cpu: None,
            },
        });
    }
    assert_eq!(s.line_alone_runs("memory-800mbit", 8192, 500).len(), 2);
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::Holds, "{}", c.measured.detail);
    assert!(c.measured.detail.contains("0.95"), "{}", c.measured.detail);
    // The line alone has no relative capacity.
    assert_eq!(capacity(105.0, 0, Some(100.0)), (None, None));
}

#[test]
fn runs_csv_reads_back_into_its_rows() {
    // A reason with a comma and a quote must stay one field, unaltered.
    let mut s = sweep([90.0, 80.0], [Some(690.0), None]);
    s.runs[3].result.projection.unsupported = Some("few \"busy\" samples, 2 of 3".into());
    let text = s.csv().unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let back: Vec<super::PipelineRunRow> = reader.deserialize().map(Result::unwrap).collect();
    assert_eq!(back, s.rows());
    assert_eq!(back.len(), 4);
    assert!(back[3].no_projection.contains("\"busy\" samples, 2 of 3"));
    assert_eq!(back[1].efficiency, Some(0.9));
}

fn failed(gate: &str, value: f64, limit: f64) -> Option<crate::validity::Validity> {
    let g = if gate == "completion" {
        crate::validity::Gate::at_least(gate, value, limit, String::new())
    } else {
        crate::validity::Gate::at_most(gate, value, limit, String::new())
    };
    Some(crate::validity::Validity::of(vec![g], 3))
}

#[test]
fn validity_limits_are_read_and_a_bad_value_names_its_field() {
    let e = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
    assert_eq!(e.validity, crate::validity::ValidityLimits::default());
    let with = |section: &str| FILE.replace("[quick]", &format!("[validity]\n{section}\n[quick]"));
    let e = PipelineExperiment::from_toml(&with("attempts = 1"), "p.toml").unwrap();
    assert_eq!(e.validity.attempts, Some(1));
    for (text, field) in [
        ("foreign_cpu = 1.5", "validity.foreign_cpu"),
        ("attempts = 21", "validity.attempts"),
        ("control = \"layer-parallel\"", "validity.control"),
        ("completion = \"most\"", "completion"),
    ] {
        let err = PipelineExperiment::from_toml(&with(text), "p.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(field) && err.contains("p.toml"),
            "{text}: {err}"
        );
    }
}

#[test]
fn a_claim_on_invalid_runs_cannot_be_judged_and_says_why() {
    // Both 5-layer runs failed completion: the measured verdict cannot be
    // judged; the paper's own values still hold.
    let mut s = sweep([95.0, 90.0], [Some(690.0), Some(680.0)]);
    for r in s.runs.iter_mut().filter(|r| r.params.layers == 5) {
        r.checked.validity = failed("completion", 0.0, 1.0);
    }
    let c = &s.claims()[0];
    assert_eq!(c.paper.verdict, Verdict::Holds);
    assert_eq!(
        c.measured.verdict,
        Verdict::CannotJudge(
            "8 KiB 5 layers: no valid run: completion 0 % < 100 % at 2 of 2 runs".into()
        ),
        "{}",
        c.measured.detail
    );
    assert!(c.projection.contains("no valid run"), "{}", c.projection);
    assert_eq!(
        s.cell("layer-parallel", "memory-800mbit", 8192, 500, 5)
            .runs,
        0
    );
    // The one-layer runs failed instead: no relative capacity rests on them.
    let mut s = sweep([95.0, 90.0], [Some(690.0), Some(680.0)]);
    for r in s.runs.iter_mut().filter(|r| r.params.layers == 1) {
        r.checked.validity = failed("steal", 0.073, 0.02);
    }
    let c = &s.claims()[0];
    assert_eq!(
        c.measured.verdict,
        Verdict::CannotJudge(
            "8 KiB 5 layers: no valid one-layer run: steal 7.3 % > 2 % at 2 of 2 runs".into()
        ),
        "{}",
        c.measured.detail
    );
}

#[test]
fn claims_rest_on_the_valid_runs_and_note_those_left_out() {
    // Repetition 2 (efficiency 0.8) ran on a busy machine: left out, the
    // claim (at least 0.85) holds on repetition 1.
    let mut s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    let bad = s
        .runs
        .iter_mut()
        .find(|r| r.params.layers == 5 && r.params.repetition == 2)
        .unwrap();
    bad.checked.validity = failed("foreign_cpu", 0.3, 0.05);
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::Holds, "{}", c.measured.detail);
    assert!(
        c.measured.detail.contains("(1 invalid run left out)"),
        "{}",
        c.measured.detail
    );
    let rows = s.rows();
    let row = rows.iter().find(|r| r.id == s.runs[3].id).unwrap();
    assert_eq!(
        (row.valid, row.attempts, row.failed_gates.as_str()),
        (Some(false), Some(3), "foreign_cpu 30 % > 5 %")
    );
    assert_eq!(rows[0].valid, None);
}

#[test]
fn results_written_before_validity_existed_still_read() {
    let s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    let mut json = serde_json::to_value(&s).unwrap();
    json["experiment"]
        .as_object_mut()
        .unwrap()
        .remove("validity");
    for r in json["runs"].as_array_mut().unwrap() {
        for key in ["validity", "machine", "window_cpu"] {
            r.as_object_mut().unwrap().remove(key);
        }
    }
    let dir = std::env::temp_dir().join(format!("connlab-lab-pipeline-old-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pipeline.json"), json.to_string()).unwrap();
    let old = PipelineSweep::open(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let old = old.unwrap();
    assert!(old
        .runs
        .iter()
        .all(|r| r.checked.validity.is_none() && r.checked.is_valid()));
    assert_eq!(old.claims()[0].measured.verdict, Verdict::FAILS);
}

/// `FILE` with its lines replaced by the line paced per message size.
fn per_size_file(table: &str) -> String {
    FILE.replacen(
        "links = [\"memory:800mbit\", \"memory:unlimited\"]",
        &format!("links = [\"memory:per-size\"]\n{table}"),
        1,
    )
    .replacen("link = \"memory:800mbit\"", "link = \"memory:per-size\"", 1)
}

const PER_SIZE: &str = "[pipeline.line_per_size]\n1024 = \"4.7mbit\"\n\"8KiB\" = \"35.8mbit\"";

#[test]
fn the_line_is_paced_per_message_size() {
    let e = PipelineExperiment::from_toml(&per_size_file(PER_SIZE), "p.toml").unwrap();
    assert_eq!(
        LinkSpec::parse("memory:per-size"),
        Ok(LinkSpec::MemoryPerSize)
    );
    assert_eq!(LinkSpec::MemoryPerSize.label(), "memory-per-size");
    assert_eq!(e.line_rate(LinkSpec::MemoryPerSize, 1024), Some(4_700_000));
    assert_eq!(e.line_rate(LinkSpec::MemoryPerSize, 8192), Some(35_800_000));
    assert_eq!(e.line_rate(LinkSpec::MemoryPerSize, 4096), None);
    assert_eq!(
        e.line_rate(LinkSpec::Memory(Some(800_000_000)), 1024),
        Some(800_000_000)
    );
    let plan = e.plan(false);
    assert!(plan.iter().all(|p| p.link == LinkSpec::MemoryPerSize));
    assert_eq!(
        plan[0].id(),
        "layer-parallel-memory-per-size-s1024-m500-l1-rep1"
    );
    // The line-alone stand-in of the paper's line is per size too.
    let s = PipelineSweep {
        schema: PIPELINE_SWEEP_SCHEMA.into(),
        experiment: e,
        quick: false,
        environment: Environment::capture(),
        started_unix_s: 0.0,
        runs_total: 0,
        runs: Vec::new(),
        cpus: None,
    };
    assert_eq!(s.line_alone_mbit_s(1024), Some(4.7));
    assert_eq!(s.line_alone_mbit_s(8192), Some(35.8));
}

#[test]
fn line_per_size_errors_name_the_field_and_value() {
    for (text, field, value) in [
        // The per-size line without its table, and the table unused.
        (per_size_file(""), "pipeline.links[0]", "line_per_size"),
        (
            FILE.replacen("[quick]", &format!("{PER_SIZE}\n[quick]"), 1),
            "pipeline.line_per_size",
            "memory:per-size",
        ),
        // A key that is no size, a rate that is no rate or unlimited.
        (
            per_size_file(&PER_SIZE.replace("1024 =", "\"big\" =")),
            "pipeline.line_per_size.\"big\"",
            "message size",
        ),
        (
            per_size_file(&PER_SIZE.replace("4.7mbit", "fast")),
            "pipeline.line_per_size.\"1024\"",
            "\"fast\"",
        ),
        (
            per_size_file(&PER_SIZE.replace("4.7mbit", "unlimited")),
            "pipeline.line_per_size.\"1024\"",
            "\"unlimited\"",
        ),
        // The same size twice, a size of the matrix or of [quick] missing.
        (
            per_size_file(&format!("{PER_SIZE}\n\"1KiB\" = \"5mbit\"")),
            "pipeline.line_per_size.",
            "a second rate for 1024 B",
        ),
        (
            per_size_file(&PER_SIZE.replace("\"8KiB\" = \"35.8mbit\"", "")),
            "pipeline.line_per_size",
            "no rate for 8192 B (pipeline.message_sizes[1])",
        ),
        (
            per_size_file(PER_SIZE).replacen(
                "layers = [3]\nmessages = 50",
                "layers = [3]\nmessage_sizes = [2048]\nmessages = 50",
                1,
            ),
            "pipeline.line_per_size",
            "no rate for 2048 B (quick.message_sizes[0])",
        ),
    ] {
        let err = PipelineExperiment::from_toml(&text, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(field) && err.contains(value), "{err}");
    }
}

#[test]
fn measured_efficiency_is_judged_only_where_the_threads_fit() {
    // 5 layers start 14 threads, their one-layer runs 6: with 2 CPUs
    // neither fits, so the measured efficiency (0.80-0.90, outside the
    // claim) is not judged and the projection stands beside it, unjudged.
    let mut s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    assert_eq!(s.experiment.threads_of("layer-parallel", 5), 14);
    assert_eq!(s.experiment.threads_of("layer-parallel", 1), 6);
    assert_eq!(s.experiment.threads_of("run-to-completion", 11), 4);
    s.cpus = Some(2);
    assert_eq!(
        s.beyond_cpus("layer-parallel", &[5]).as_deref(),
        Some("14 threads for 2 CPUs")
    );
    let c = &s.claims()[0];
    assert_eq!(c.cpus, 2);
    assert!(
        matches!(&c.measured.verdict, Verdict::CannotMeasure(why) if why.contains("fit the 2 CPUs")),
        "{:?}",
        c.measured.verdict
    );
    assert!(
        c.measured
            .detail
            .contains("8 KiB 5 layers: not judged (14 threads for 2 CPUs), projected 0.97–0.99"),
        "{}",
        c.measured.detail
    );
    // The paper's own values are judged as before.
    assert_eq!(c.paper.verdict, Verdict::Holds);
    // With 6 CPUs the one-layer runs fit but the 5-layer ones do not.
    s.cpus = Some(6);
    assert_eq!(
        s.beyond_cpus("layer-parallel", &[1]),
        None,
        "one layer: 6 threads"
    );
    assert!(s.beyond_cpus("layer-parallel", &[5]).is_some());
    // With 14 the whole claim is judged on measured figures: 0.80 fails.
    s.cpus = Some(14);
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::FAILS, "{}", c.measured.detail);
    // Results written before the count was recorded: the machine's CPUs.
    s.cpus = None;
    assert_eq!(s.judging_cpus(), s.environment.cpu_count.max(1));
}

#[test]
fn a_claim_over_several_layer_counts_is_judged_at_those_that_fit() {
    // At 1 and 5 layers: with 6 CPUs, 1 layer (6 threads) is judged on
    // its measured efficiency (1.0, within), 5 layers shown as projection.
    let text = FILE.replace("layers = [5]\nexpect_min", "layers = [1, 5]\nexpect_min");
    let mut s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
    s.experiment = PipelineExperiment::from_toml(&text, "p.toml").unwrap();
    s.cpus = Some(6);
    let c = &s.claims()[0];
    assert_eq!(c.measured.verdict, Verdict::Holds, "{}", c.measured.detail);
    assert!(
        c.measured.detail.contains("8 KiB 1 layer: 1.00"),
        "{}",
        c.measured.detail
    );
    assert!(
        c.measured
            .detail
            .contains("8 KiB 5 layers: not judged (14 threads for 6 CPUs)"),
        "{}",
        c.measured.detail
    );
}

#[test]
fn shared_workers_and_lock_contention_are_checked_on_load() {
    for (from, to, field, value) in [
        (
            "modes = [\"layer-parallel\", \"run-to-completion\"]",
            "modes = [\"run-to-completion-shared\"]\nshared_workers = 1",
            "pipeline.shared_workers",
            "1: between 2 and 16",
        ),
        (
            "modes = [\"layer-parallel\", \"run-to-completion\"]",
            "modes = [\"run-to-completion-shared\"]\nshared_workers = 17",
            "pipeline.shared_workers",
            "17",
        ),
        (
            "statistic = \"efficiency\"",
            "statistic = \"lock-contention\"",
            "paper.claims[0].mode",
            "\"layer-parallel\"",
        ),
        (
            "statistic = \"efficiency\"",
            "statistic = \"efficiency\"\nmode = \"rtc-shared\"",
            "paper.claims[0].mode",
            "run-to-completion-shared",
        ),
    ] {
        let text = FILE.replacen(from, to, 1);
        let err = PipelineExperiment::from_toml(&text, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(field) && err.contains(value), "{err}");
    }
    let text = FILE.replacen(
        "modes = [\"layer-parallel\", \"run-to-completion\"]",
        "modes = [\"run-to-completion-shared\"]\nshared_workers = 3",
        1,
    );
    let e = PipelineExperiment::from_toml(&text, "p.toml").unwrap();
    assert!(e
        .plan(false)
        .iter()
        .all(|p| p.mode == "run-to-completion-shared"));
    assert_eq!(
        e.library_mode("run-to-completion-shared"),
        connlab_pipeline::Mode::RunToCompletion { threads: 3 }
    );
    assert_eq!(e.threads_of("run-to-completion-shared", 5), 8);
}

/// A run-to-completion-shared result whose layers took `acquired` locks,
/// `contended` of them waiting.
fn locked(layers: usize, acquired: u64, contended: u64) -> connlab_pipeline::PipelineResult {
    let mut r = connlab_pipeline::PipelineResult::synthetic(
        layers,
        8192,
        connlab_pipeline::Mode::RunToCompletion { threads: 2 },
        30.0,
        projection(Some(35.0), "line"),
    );
    let layer: connlab_pipeline::LayerStats = serde_json::from_value(serde_json::json!({
        "side": "sender", "layer": 1, "cpu_s": 0.1, "messages": 500,
        "cpu_ns_per_message": 1.0, "retransmissions": 0,
        "queue_occupancy_mean": 0.0, "queue_occupancy_max": 0, "cpu": null,
        "busy_s": 0.1, "busy_ns_per_message": 1.0, "timeouts": 0,
        "duplicates": 0, "out_of_order": 0, "rejected": 0,
        "max_outstanding": 8, "retransmit_copies": 0,
        "lock_acquisitions": acquired, "lock_contended": contended, "lock_wait_s": 0.001,
    }))
    .unwrap();
    r.per_layer = vec![layer.clone(), layer];
    r
}

#[test]
fn lock_contention_is_judged_on_the_shared_workers_runs() {
    let text = FILE.replacen(
        "modes = [\"layer-parallel\", \"run-to-completion\"]",
        "modes = [\"layer-parallel\", \"run-to-completion-shared\"]",
        1,
    ) + "[[paper.claims]]\nid = \"rtc-locking\"\nsource = \"Section 4 (3)\"\ntext = \"locks\"\nstatistic = \"lock-contention\"\nmode = \"run-to-completion-shared\"\nlayers = [5]\nexpect_min = 0.01\n";
    let mut s = sweep([95.0, 90.0], [Some(690.0), Some(680.0)]);
    s.experiment = PipelineExperiment::from_toml(&text, "p.toml").unwrap();
    // Two shared-state runs at 5 layers: 4 % and 10 % contended.
    for (rep, contended) in [(1, 20), (2, 50)] {
        let params = PipelineRunParams {
            link: LinkSpec::Memory(Some(800_000_000)),
            mode: "run-to-completion-shared".into(),
            message_size: 8192,
            layers: 5,
            messages: 500,
            repetition: rep,
        };
        s.runs.push(PipelineRunRecord {
            id: params.id(),
            params,
            result: locked(5, 500, contended),
            relative_capacity: None,
            efficiency: None,
            projected_relative_capacity: None,
            projected_efficiency: None,
            finished_unix_s: 0.0,
            checked: crate::validity::Checked {
                validity: None,
                machine: None,
                window_cpu: None,
            },
        });
    }
    // Even on 2 CPUs: contention is not a ratio to a one-layer run.
    s.cpus = Some(2);
    let claims = s.claims();
    let c = claims.iter().find(|c| c.claim.id == "rtc-locking").unwrap();
    assert_eq!(c.measured.verdict, Verdict::Holds, "{}", c.measured.detail);
    assert_eq!(c.measured.detail, "8 KiB 5 layers: 4.0 %–10.0 %");
    assert!(matches!(c.paper.verdict, Verdict::CannotMeasure(_)));
    assert!(
        c.projection.contains("no projection models lock waits"),
        "{}",
        c.projection
    );
    let cell = s.cell("run-to-completion-shared", "memory-800mbit", 8192, 500, 5);
    assert_eq!(cell.lock_contention, [0.04, 0.1]);
    // Below the floor in one repetition: does not hold.
    s.runs.last_mut().unwrap().result = locked(5, 500, 2);
    let claims = s.claims();
    let c = claims.iter().find(|c| c.claim.id == "rtc-locking").unwrap();
    assert_eq!(c.measured.verdict, Verdict::FAILS, "{}", c.measured.detail);
    // Layer-parallel runs take no layer lock.
    assert!(s
        .cell("layer-parallel", "memory-800mbit", 8192, 500, 5)
        .lock_contention
        .is_empty());
}
