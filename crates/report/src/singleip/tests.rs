//! The single-IP report on a small sweep written in code: valid points
//! carry the tables and claims, invalid ones are listed with their gates.

use super::*;
use connlab_lab::validity::{Gate, Validity};
use connlab_lab::{
    summarise_rtt, LinkInfo, PlacementInfo, SingleIpPoint, SingleIpRecord, SingleIpSweepInfo,
    Verdict, SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA,
};
use std::path::{Path, PathBuf};

const FILE: &str = r#"kind = "singleip"
name = "t"
title = "Single-IP fixture"
repetitions = 2
[rtt]
systems = ["io16k", "nat"]
round_trips = 3
[[paper.values]]
source = "Table 3"
quantity = "mean, SAPS over NAT"
system = "io16k"
metric = "rtt_mean_us"
value = 0.85
unit = "×"
relative_to = "nat"
[[paper.claims]]
id = "order"
source = "Table 3"
claim = "SAPS has a lower mean round trip than NAT"
check = { kind = "order", metric = "rtt_mean_us", lower = "io16k", higher = "nat" }
"#;

fn point(system: System, rep: u32, mean: f64, steal: f64) -> SingleIpRecord {
    let point = SingleIpPoint {
        experiment: ExpKind::Rtt,
        system,
        param: 4,
        repetition: rep,
    };
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
        rtt: summarise_rtt(&[mean - 1.0, mean, mean + 1.0]),
        transfers: Vec::new(),
        contention: None,
        cpu: None,
        warnings: Vec::new(),
        finished_unix_s: 0.0,
        checked: connlab_lab::validity::Checked {
            validity: Some(Validity::of(
                vec![Gate::at_most("steal", steal, 0.02, String::new())],
                if steal > 0.02 { 3 } else { 1 },
            )),
            ..Default::default()
        },
    }
}

/// A results directory of `points` (removed when dropped).
struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str, points: &[SingleIpRecord]) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "connlab-report-singleip-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("experiment.toml"), FILE).unwrap();
        let info = SingleIpSweepInfo {
            schema: SINGLEIP_SWEEP_SCHEMA.into(),
            name: "t".into(),
            quick: false,
            started_unix_s: 0.0,
            points_total: 4,
            connlab_version: "test".into(),
            environment: connlab_os::Environment::capture(),
            placement: points[0].placement.clone(),
        };
        SingleIpSweep::write_info(&dir, &info).unwrap();
        for p in points {
            SingleIpSweep::write_point(&dir, p).unwrap();
        }
        Fixture(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn invalid_points_are_listed_and_left_out_of_tables_and_claims() {
    // nat's first repetition measured 50 µs with 7.3 % steal: left out.
    let f = Fixture::new(
        "some",
        &[
            point(System::Io16k, 1, 100.0, 0.0),
            point(System::Nat, 1, 50.0, 0.073),
            point(System::Io16k, 2, 110.0, 0.0),
            point(System::Nat, 2, 200.0, 0.0),
        ],
    );
    let sweep = SingleIpSweep::open(f.path()).unwrap();
    let html = render_singleip(&sweep, Format::HTML).unwrap();
    assert!(html.contains("Validity of the points"), "section");
    assert!(html.contains("3 of 4 points passed every gate (steal)"));
    assert!(html.contains(
        "<td class=\"label\">rtt-nat-4B-rep1</td><td>3</td><td class=\"label\">steal 7.3 % &gt; 2 %</td>"
    ));
    assert!(html.contains("measures no A/A control"));
    // The claim holds on the valid points, saying what it left out.
    assert!(
        html.contains("<td class=\"label holds\">holds</td>"),
        "verdict"
    );
    assert!(html.contains("(1 invalid point left out)"));
    // The ratio pairs repetitions where both points are valid: the
    // second's 110 / 200 (not the first io16k's 100 beside it).
    assert!(html.contains("<td>0.55</td>"), "paired ratio");
    let md = render_singleip(&sweep, Format::MARKDOWN).unwrap();
    assert!(
        md.contains("| rtt-nat-4B-rep1 | 3 | steal 7.3 % > 2 % |"),
        "{md}"
    );
    let csv = render_singleip(&sweep, Format::CSV).unwrap();
    let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
    let head = reader.headers().unwrap().clone();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<::csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert!(rows.iter().all(|r| r.len() == head.len()), "rectangular");
    let bad: Vec<&::csv::StringRecord> = rows
        .iter()
        .filter(|r| &r[col("point")] == "rtt-nat-4B-rep1")
        .collect();
    assert!(!bad.is_empty());
    assert!(bad
        .iter()
        .all(|r| &r[col("valid")] == "false" && &r[col("failed_gates")] == "steal 7.3 % > 2 %"));
    let e = crate::verdicts::singleip_claims(&SingleIpSweep::open(f.path()).unwrap());
    assert_eq!(e.invalid_by_gate, vec![("steal".to_string(), 1)]);
    assert_eq!(e.invalid_points, (1, 4));
    assert_eq!(e.rows[0].verdict, Verdict::Holds, "{:?}", e.rows[0]);
}

#[test]
fn a_claim_whose_system_has_no_valid_point_cannot_be_judged() {
    let f = Fixture::new(
        "none",
        &[
            point(System::Io16k, 1, 100.0, 0.0),
            point(System::Nat, 1, 200.0, 0.05),
            point(System::Io16k, 2, 110.0, 0.0),
            point(System::Nat, 2, 50.0, 0.073),
        ],
    );
    let e = crate::verdicts::singleip_claims(&SingleIpSweep::open(f.path()).unwrap());
    assert_eq!(e.invalid_points, (2, 4));
    assert_eq!(
        e.rows[0].verdict,
        Verdict::CannotJudge(
            "no valid point of nat for RTT mean (µs): steal 7.3 % > 2 % at 2 of 2 points".into()
        )
    );
    let sweep = SingleIpSweep::open(f.path()).unwrap();
    let html = render_singleip(&sweep, Format::HTML).unwrap();
    assert!(html.contains(
        "<td class=\"label noisy\">cannot be judged here<br><small>no valid point of nat"
    ));
}
