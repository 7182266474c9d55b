//! The peers report on valid points: ratios paired by repetition from valid
//! points only, a ratio without a valid round that cannot be judged here,
//! the invalid points listed, and the A/A control's noise.

use crate::support::{passed, peers, stolen};
use connlab_report::{render_peers, summarize_peers, Format};

/// The CSV rows of `kind`.
fn csv_rows(text: &str, kind: &str) -> Vec<csv::StringRecord> {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    r.records()
        .map(Result::unwrap)
        .filter(|r| &r[0] == kind)
        .collect()
}

fn column(text: &str, name: &str) -> usize {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head = r.headers().unwrap().clone();
    head.iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

#[test]
fn a_ratio_whose_rounds_are_all_invalid_cannot_be_judged() {
    let dir = peers();
    let rows = summarize_peers(&dir);
    // epoll at 10 KiB ran in repetition 1 only, where nginx-static failed.
    let epoll = rows
        .iter()
        .find(|r| r.body_bytes == 10240 && r.contender == "epoll")
        .unwrap();
    let (base, ratio) = &epoll.ratios[0];
    assert_eq!(base, "nginx-static");
    let ratio = ratio.as_ref().unwrap();
    assert!(ratio.spread.is_none(), "{ratio:?}");
    let standing = ratio.standing.as_ref().unwrap();
    assert_eq!(standing.csv_key(), "cannot_judge_here");
    assert_eq!(standing.reason(), "steal 7.3 % > 2 % at 1 of 2 points");
    // nginx-static's own figures rest on its valid repetition alone.
    let stat = rows
        .iter()
        .find(|r| r.body_bytes == 10240 && r.contender == "nginx-static")
        .unwrap();
    assert_eq!((stat.repetitions, stat.invalid), (1, 1));
    assert_eq!(stat.per_rep.len(), 1);

    let md = render_peers(&dir, Format::MARKDOWN).unwrap();
    assert!(
        md.contains("| cannot be judged here: steal 7.3 % > 2 % at 1 of 2 points |"),
        "{md}"
    );
    assert!(md.contains("| 1 (+1 invalid) |"), "{md}");
    let csv = render_peers(&dir, Format::CSV).unwrap();
    let verdict = column(&csv, "verdict");
    let detail = column(&csv, "detail");
    let row = csv_rows(&csv, "contender")
        .into_iter()
        .find(|r| &r[1] == "10240" && &r[2] == "epoll")
        .unwrap();
    assert_eq!(&row[verdict], "cannot_judge_here");
    assert_eq!(&row[detail], "steal 7.3 % > 2 % at 1 of 2 points");
}

#[test]
fn the_invalid_points_are_listed_with_their_gates() {
    let dir = peers();
    let md = render_peers(&dir, Format::MARKDOWN).unwrap();
    assert!(md.contains("## Validity of the points"), "{md}");
    assert!(md.contains("10 of 11 points passed every gate"), "{md}");
    assert!(
        md.contains("| nginx-static-10240B-rep1 | 3 | steal 7.3 % > 2 % |"),
        "{md}"
    );
    let html = render_peers(&dir, Format::HTML).unwrap();
    assert!(
        html.contains("<h2 id=\"validity\">"),
        "the page has the section"
    );
    assert!(html.contains("<td class=\"label\">nginx-static-10240B-rep1</td><td>3</td>"));
    let csv = render_peers(&dir, Format::CSV).unwrap();
    let invalid = csv_rows(&csv, "invalid_point");
    assert_eq!(invalid.len(), 1);
    let (id, attempts, detail) = (
        column(&csv, "id"),
        column(&csv, "attempts"),
        column(&csv, "detail"),
    );
    assert_eq!(&invalid[0][id], "nginx-static-10240B-rep1");
    assert_eq!(&invalid[0][attempts], "3");
    assert_eq!(&invalid[0][detail], "steal 7.3 % > 2 %");
}

#[test]
fn the_control_is_no_row_but_gives_the_noise() {
    let dir = peers();
    assert!(dir.points.iter().any(|p| p.params.control));
    let rows = summarize_peers(&dir);
    // nginx-return at 128 B: its two repetitions, not the control's.
    let ret = rows
        .iter()
        .find(|r| r.body_bytes == 128 && r.contender == "nginx-return")
        .unwrap();
    assert_eq!(ret.repetitions, 2);
    assert_eq!(ret.requests_per_cpu_s.min, 40_000.0);
    let csv = render_peers(&dir, Format::CSV).unwrap();
    let noise = csv_rows(&csv, "noise_floor");
    assert_eq!(noise.len(), 1);
    assert_eq!(&noise[0][2], "nginx-return");
    assert_eq!(&noise[0][column(&csv, "noise_factor")], "1.04");
    assert_eq!(&noise[0][column(&csv, "ratio_min")], "0.98");
    let md = render_peers(&dir, Format::MARKDOWN).unwrap();
    assert!(md.contains("**A/A control**: noise ±4 % (nginx-return twice per round, 2 pairs)"));
    assert!(md.contains("128 B: rep 1 1.040, rep 2 0.980"), "{md}");
    // Outside the noise: epoll is higher, nginx-static lower.
    assert!(md.contains("| 1.50× (1.50–1.50) higher |"), "{md}");
    assert!(md.contains("| 0.90× (0.90–0.90) lower |"), "{md}");
}

#[test]
fn a_ratio_within_the_noise_of_parity_cannot_be_judged() {
    let mut dir = peers();
    // A control 30 % off its original: nginx-static's 0.9 is within it.
    for p in dir.points.iter_mut().filter(|p| p.params.control) {
        p.requests_per_cpu_s *= 1.3 / 1.04;
    }
    let md = render_peers(&dir, Format::MARKDOWN).unwrap();
    assert!(
        md.contains("| 0.90× (0.90–0.90) cannot be judged here |"),
        "{md}"
    );
    assert!(md.contains("| 1.50× (1.50–1.50) higher |"), "{md}");
    let csv = render_peers(&dir, Format::CSV).unwrap();
    let detail = column(&csv, "detail");
    let row = csv_rows(&csv, "contender")
        .into_iter()
        .find(|r| &r[1] == "128" && &r[2] == "nginx-static" && &r[13] == "nginx-return")
        .unwrap();
    assert!(row[detail].contains("A/A noise (±30 %) of 1"), "{row:?}");
}

#[test]
fn points_without_records_count_as_valid_and_invalid_ones_are_shown_marked() {
    // Results from before gates and controls: judged as measured.
    let mut old = peers();
    old.points.retain(|p| !p.params.control);
    for p in &mut old.points {
        p.checked.validity = None;
    }
    let md = render_peers(&old, Format::MARKDOWN).unwrap();
    assert!(md.contains("No point recorded validity gates"), "{md}");
    assert!(md.contains("No A/A control was measured"), "{md}");
    assert!(md.contains("| 1.67× (1.67–1.67) higher |"), "{md}");
    // Every point of a contender invalid: its figures are shown, marked,
    // and no ratio rests on them.
    let mut bad = peers();
    for p in bad
        .points
        .iter_mut()
        .filter(|p| p.params.contender == "epoll")
    {
        p.checked.validity = Some(stolen());
    }
    let md = render_peers(&bad, Format::MARKDOWN).unwrap();
    assert!(md.contains("| none valid (2 invalid shown) |"), "{md}");
    assert!(
        md.contains("| cannot be judged here: steal 7.3 % > 2 % at 2 of 4 points |"),
        "{md}"
    );
    assert_eq!(passed().attempts, 1);
}

/// Issue 33: a scaling sweep's page fits the Universal Scalability Law to
/// each contender's curve (recovering the parameters its points were made
/// from), judges the 2-worker goal on rounds the client did not limit,
/// and marks the points the client may have limited.
#[test]
fn a_scaling_sweep_fits_each_curve_and_judges_the_goal() {
    use crate::support::{scaling, SCALING_CURVES};
    let dir = scaling();
    let html = render_peers(&dir, Format::HTML).unwrap();
    assert!(
        html.contains("Scaling with the server&#x27;s workers")
            || html.contains("Scaling with the server's workers")
    );
    // The fit table: one row per contender with σ and κ near the truth.
    let md = render_peers(&dir, Format::MARKDOWN).unwrap();
    for (name, _, sigma, kappa) in SCALING_CURVES {
        let row = md
            .lines()
            .rfind(|l| l.starts_with(&format!("| 128 B | {name} | ")))
            .unwrap_or_else(|| panic!("no fit row for {name} in\n{md}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let s: f64 = cells[5].parse().unwrap();
        let k: f64 = cells[6].parse().unwrap();
        assert!((s - sigma).abs() < 0.005, "{name}: σ {s} against {sigma}");
        assert!((k - kappa).abs() < 0.0003, "{name}: κ {k} against {kappa}");
    }
    // The goal at two workers: epoll 2 / (1 + 0.05 + 0.004) = 1.90x, held.
    assert!(html.contains("epoll at 2 workers gives ≥ 1.8× its 1-worker requests per second"));
    assert!(html.contains("1.90×"), "epoll's speedup");
    // uring's 16-worker points are marked, named and counted.
    assert!(md.contains("The client may have limited 3 points"), "{md}");
    assert!(md.contains("uring-w16-128B-rep1"));
    // The workers axis reaches the main table and the CSV.
    let csv = render_peers(&dir, Format::CSV).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains(",workers,speedup_median,"));
    assert!(csv.lines().any(|l| l.starts_with("usl_fit,128,epoll,")));
}
