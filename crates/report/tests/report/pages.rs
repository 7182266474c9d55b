//! Fixtures of the page kinds the other test files do not build: a
//! pipeline sweep, a single-IP sweep, a `connlab run` page, a reproduce
//! index and a soak summary; and every page kind rendered as HTML, for
//! the snapshots and the plots' geometry check.

use crate::gateway::gateway;
use crate::support::{environment, loadgen, locality, peers};
use connlab_lab::compare::{compare, Better, RowSamples, CONFIDENCE};
use connlab_lab::soak::SoakSummary;
use connlab_lab::validity::{Gate, Validity};
use connlab_lab::{
    summarise_rtt, LinkInfo, LinkSpec, PipelineExperiment, PipelineRunParams, PipelineRunRecord,
    PipelineSweep, PlacementInfo, SingleIpPoint, SingleIpRecord, SingleIpSweep, SingleIpSweepInfo,
    System, PIPELINE_SWEEP_SCHEMA, SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA,
};
use connlab_pipeline::{Mode, PipelineResult, Projection};
use connlab_report::run::{render_run, RunPage, RunPageRow, RunPageRun};
use connlab_report::{
    render, render_loadgen, render_peers, render_pipeline, render_singleip, render_soak, ClaimRow,
    Format, Index, IndexExperiment, IndexPaper, Verdict,
};
use std::path::PathBuf;

const PIPELINE: &str = r#"
name = "p"
title = "Pipeline fixture"
[pipeline]
layers = [1, 3, 5]
message_sizes = [8192]
messages = 500
modes = ["layer-parallel", "run-to-completion"]
links = ["memory:800mbit"]
repetitions = 2
[paper]
citation = "the paper"
link = "memory:800mbit"
messages = 500
carries_over = "Shapes, not Mbit/s."
[[paper.cells]]
table = "Table 2"
message_size = 8192
layers = 1
mbit_s = 33.2
relative_capacity = 1.0
efficiency = 1.0
[[paper.cells]]
table = "Table 2"
message_size = 8192
layers = 3
mbit_s = 31.0
relative_capacity = 2.8
efficiency = 0.93
[[paper.cells]]
table = "Table 2"
message_size = 8192
layers = 5
mbit_s = 28.8
relative_capacity = 4.34
efficiency = 0.87
[[paper.claims]]
id = "efficiency-5"
source = "Section 4 (2)"
text = "about 90% at 5 layers"
statistic = "efficiency"
layers = [5]
expect_min = 0.85
"#;

/// Two modes at 1, 3 and 5 layers, measured ten times the paper's
/// Mbit/s (a log axis) with identical projections (drawn over each other).
pub(crate) fn pipeline() -> PipelineSweep {
    let experiment = PipelineExperiment::from_toml(PIPELINE, "fixture.toml").unwrap();
    let mut runs = Vec::new();
    for rep in 1..=2u32 {
        for (mode, m) in [
            ("layer-parallel", Mode::LayerParallel),
            ("run-to-completion", Mode::RunToCompletion { threads: 2 }),
        ] {
            for layers in [1u32, 3, 5] {
                let slow = if mode == "layer-parallel" { 1.0 } else { 0.9 };
                let measured = (330.0 - 10.0 * f64::from(layers)) * slow + f64::from(rep);
                let params = PipelineRunParams {
                    link: LinkSpec::Memory(Some(800_000_000)),
                    mode: mode.into(),
                    message_size: 8192,
                    layers,
                    messages: 500,
                    repetition: rep,
                };
                runs.push(PipelineRunRecord {
                    id: params.id(),
                    params,
                    result: PipelineResult::synthetic(
                        layers as usize,
                        8192,
                        m,
                        measured,
                        Projection {
                            mbit_s: Some(780.0 - f64::from(layers)),
                            bound: "line".into(),
                            layers_only_mbit_s: Some(90_000.0),
                            threads: 4 + 2 * layers as usize,
                            cpus: 2,
                            ..Projection::default()
                        },
                    ),
                    relative_capacity: None,
                    efficiency: None,
                    projected_relative_capacity: None,
                    projected_efficiency: None,
                    finished_unix_s: 0.0,
                    checked: connlab_lab::validity::Checked {
                        validity: None,
                        machine: None,
                        window_cpu: None,
                    },
                });
            }
        }
    }
    PipelineSweep {
        schema: PIPELINE_SWEEP_SCHEMA.into(),
        experiment,
        quick: false,
        environment: environment(),
        started_unix_s: 0.0,
        runs_total: runs.len(),
        runs,
        cpus: Some(64),
    }
}

const SINGLEIP: &str = r#"kind = "singleip"
name = "t"
title = "Single-IP fixture"
repetitions = 2
[rtt]
systems = ["io16k", "nat"]
round_trips = 3
[[paper.claims]]
id = "order"
source = "Table 3"
claim = "SAPS has a lower mean round trip than NAT"
check = { kind = "order", metric = "rtt_mean_us", lower = "io16k", higher = "nat" }
"#;

fn singleip_point(system: System, rep: u32, mean: f64) -> SingleIpRecord {
    let point = SingleIpPoint {
        experiment: connlab_lab::ExpKind::Rtt,
        system,
        param: 4,
        repetition: rep,
    };
    // Round trips around the mean with one far outlier: the CDF shows the
    // bulk and notes the tail.
    let mut samples: Vec<f64> = (0..200).map(|i| mean + f64::from(i % 20)).collect();
    samples.push(mean * 400.0);
    SingleIpRecord {
        schema: SINGLEIP_POINT_SCHEMA.into(),
        id: point.id(),
        point,
        placement: PlacementInfo {
            clients: 0,
            linkem: 0,
            front: 1,
            nodes: 1,
            front_rps: 1,
        },
        link: LinkInfo {
            delay_us: 0,
            rate_bps: None,
            queue_packets: None,
            bottleneck: None,
            switch_queue_packets: None,
        },
        congestion_control: "reno".into(),
        rtt: summarise_rtt(&samples),
        transfers: Vec::new(),
        contention: None,
        cpu: None,
        warnings: Vec::new(),
        finished_unix_s: 0.0,
        checked: connlab_lab::validity::Checked {
            validity: Some(Validity::of(
                vec![Gate::at_most("steal", 0.0, 0.02, String::new())],
                1,
            )),
            ..Default::default()
        },
    }
}

/// A single-IP results directory (removed when dropped).
pub(crate) struct SingleIpFixture(PathBuf);

impl SingleIpFixture {
    pub(crate) fn new(name: &str) -> SingleIpFixture {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "connlab-report-pages-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("experiment.toml"), SINGLEIP).unwrap();
        let points = [
            singleip_point(System::Io16k, 1, 100.0),
            singleip_point(System::Nat, 1, 130.0),
            singleip_point(System::Io16k, 2, 104.0),
            singleip_point(System::Nat, 2, 135.0),
        ];
        let info = SingleIpSweepInfo {
            schema: SINGLEIP_SWEEP_SCHEMA.into(),
            name: "t".into(),
            quick: false,
            started_unix_s: 0.0,
            points_total: 4,
            connlab_version: "test".into(),
            environment: environment(),
            placement: points[0].placement.clone(),
        };
        SingleIpSweep::write_info(&dir, &info).unwrap();
        for p in &points {
            SingleIpSweep::write_point(&dir, p).unwrap();
        }
        SingleIpFixture(dir)
    }

    pub(crate) fn html(&self) -> String {
        render_singleip(&SingleIpSweep::open(&self.0).unwrap(), Format::HTML).unwrap()
    }
}

impl Drop for SingleIpFixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `connlab run` page of two rows whose CDFs run to the 100th
/// percentile, one with a far tail.
pub(crate) fn run_page() -> RunPage {
    let rows = [("epoll", [50.0, 52.0]), ("select", [90.0, 95.0])];
    let samples: Vec<RowSamples> = rows
        .iter()
        .map(|(l, v)| RowSamples {
            label: (*l).into(),
            primary: v.iter().map(|x| Some(*x)).collect(),
            cpu_us_per_request: vec![Some(10.0); 2],
            wakeups_per_request: vec![Some(0.5); 2],
            memory_per_connection_bytes: vec![Some(512.0); 2],
        })
        .collect();
    RunPage {
        title: "connlab run".into(),
        command: "connlab run --engines epoll,select".into(),
        workload: "100 connections".into(),
        placement: "server on cpu 1, client on cpu 0".into(),
        environment: vec![("kernel".into(), "Linux 6".into())],
        comparison: compare(
            "median service latency",
            Better::Lower,
            &samples,
            CONFIDENCE,
        ),
        rows: rows
            .iter()
            .map(|(l, v)| RunPageRow {
                label: (*l).into(),
                kind: "connlab serve engine".into(),
                cdf_round: Some(1),
                cdf: (0..=200)
                    .map(|k| {
                        let f = f64::from(k) / 200.0;
                        let x = if k == 200 {
                            v[1] * 80.0
                        } else {
                            v[0] * (0.5 + f)
                        };
                        (x, f)
                    })
                    .collect(),
                runs: vec![RunPageRun {
                    round: 1,
                    file: Some(format!("runs/r1-{l}.json")),
                    p50_us: v[0],
                    p99_us: v[1],
                    achieved_per_s: 1000.0,
                    errors: 0,
                    cpu_us_per_request: Some(10.0),
                    wakeups_per_request: Some(0.5),
                    memory_per_connection_bytes: Some(512.0),
                    warnings: vec![],
                    invalid: None,
                }],
            })
            .collect(),
    }
}

/// A reproduce index of one paper and experiment.
pub(crate) fn index() -> Index {
    let row = |verdict, reason: &str| ClaimRow {
        source: "Table 3".into(),
        text: "select grows faster".into(),
        paper: "18.0x".into(),
        ours: "19.1x [17-21x]".into(),
        verdict,
        reason: reason.into(),
        table: false,
    };
    Index {
        title: "Reproduction".into(),
        description: "Every paper's tables and claims.".into(),
        facts: vec![("matrix".into(), "quick".into())],
        papers: vec![IndexPaper {
            id: "locality".into(),
            title: "Locality".into(),
            source: "000".into(),
            system: "serve".into(),
            experiments: vec![IndexExperiment {
                name: "locality-table3".into(),
                title: "Table 3".into(),
                report: "locality-table3/report.html".into(),
                status: "15 of 15 points".into(),
                ok: true,
                rows: vec![
                    row(Verdict::Holds, "≥ 5×"),
                    row(Verdict::CannotMeasure("not in this run".into()), ""),
                ],
                invalid_by_gate: vec![("steal".into(), 4)],
                invalid_points: (4, 15),
                noise_floor: Some("±4.1 %".into()),
            }],
        }],
    }
}

/// A soak summary that passed.
pub(crate) fn soak() -> SoakSummary {
    SoakSummary {
        setup: "2 fault-free and 4 fault segments of 4 s, 100 req/s per class.".into(),
        phases: vec![["gateway", "fault-free", "400", "399", "1", "100", "250"].map(String::from)],
        factors: vec![("gateway".into(), "3.00".into())],
        facts: vec![("faults fired".into(), "kill 2".into())],
        checks: "Checks: no crash true, p99 reported only.".into(),
        passed: true,
        failures: Vec::new(),
    }
}

/// Every page kind as HTML: (kind, page).
pub(crate) fn every_page() -> Vec<(&'static str, String)> {
    let singleip = SingleIpFixture::new("every");
    vec![
        ("locality", render(&locality(), Format::HTML).unwrap()),
        ("gateway", render(&gateway(), Format::HTML).unwrap()),
        ("peers", render_peers(&peers(), Format::HTML).unwrap()),
        (
            "scaling",
            render_peers(&crate::support::scaling(), Format::HTML).unwrap(),
        ),
        ("loadgen", render_loadgen(&loadgen(), Format::HTML).unwrap()),
        (
            "pipeline",
            render_pipeline(&pipeline(), Format::HTML).unwrap(),
        ),
        ("singleip", singleip.html()),
        ("index", index().render(Format::HTML)),
        ("run", render_run(&run_page()).unwrap()),
        ("soak", render_soak(&soak(), Format::HTML).unwrap()),
    ]
}

/// Writes every page kind as `KIND.html` into `$CONNLAB_PAGES_DIR` when it
/// is set (scripts/check_pages.sh measures them in a browser); does
/// nothing otherwise.
#[test]
fn write_every_page_where_asked() {
    let Some(dir) = std::env::var_os("CONNLAB_PAGES_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (kind, html) in every_page() {
        std::fs::write(dir.join(format!("{kind}.html")), html).unwrap();
    }
}
