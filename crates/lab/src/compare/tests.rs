use super::*;

fn row(label: &str, primary: &[f64], cpu: f64, wake: f64, mem: f64) -> RowSamples {
    let n = primary.len();
    RowSamples {
        label: label.into(),
        primary: primary.iter().map(|v| Some(*v)).collect(),
        cpu_us_per_request: vec![Some(cpu); n],
        wakeups_per_request: vec![Some(wake); n],
        memory_per_connection_bytes: vec![Some(mem); n],
    }
}

fn by_label<'c>(c: &'c Comparison, label: &str) -> &'c RowComparison {
    c.rows
        .iter()
        .find(|r| r.label == label)
        .expect("row exists")
}

#[test]
fn figure_takes_median_and_range_skipping_missing_rounds() {
    let f = Figure::of(&[Some(3.0), None, Some(1.0), Some(2.0), Some(10.0)]).expect("values");
    assert_eq!((f.median, f.min, f.max, f.n), (2.5, 1.0, 10.0, 4));
    assert!(Figure::of(&[None, Some(f64::NAN)]).is_none());
}

#[test]
fn a_ratio_interval_including_one_is_a_tie() {
    let rows = [
        row("epoll", &[50.0, 54.0, 52.0], 10.0, 0.5, 500.0),
        row("poll", &[51.0, 53.0, 52.0], 10.5, 0.5, 500.0),
    ];
    let c = compare(
        "median service latency (us)",
        Better::Lower,
        &rows,
        CONFIDENCE,
    );
    assert_eq!(c.best, Some(0));
    assert_eq!(by_label(&c, "epoll").standing, Standing::Best);
    assert_eq!(by_label(&c, "poll").standing, Standing::TiesBest);
    assert!(
        c.verdict[0].starts_with("epoll and poll tie for the lowest"),
        "{:?}",
        c.verdict
    );
    assert!(
        !c.verdict.iter().any(|l| l.contains("differ")),
        "{:?}",
        c.verdict
    );
    let (lo, hi) = by_label(&c, "poll").ratio_ci.unwrap();
    assert!(lo <= 1.0 && 1.0 <= hi, "{lo} {hi}");
}

/// Spreads that overlap can still differ: poll is slower in every round,
/// and the per-round ratio's interval lies clear of 1.
#[test]
fn slower_in_every_round_differs_though_the_spreads_overlap() {
    let rows = [
        row("epoll", &[50.0, 54.0, 52.0], 10.0, 0.5, 500.0),
        row("poll", &[53.0, 57.0, 55.0], 10.5, 0.5, 500.0),
    ];
    let c = compare(
        "median service latency (us)",
        Better::Lower,
        &rows,
        CONFIDENCE,
    );
    let poll = by_label(&c, "poll");
    assert_eq!(poll.standing, Standing::Differs);
    let (lo, hi) = poll.ratio_ci.unwrap();
    assert!(lo > 1.0, "{lo} {hi}");
    assert_eq!(poll.paired_rounds, 3);
    assert_eq!(poll.ratio_ci_coverage, Some(0.75));
    assert!(
        c.verdict.iter().any(|l| l.contains("75% interval")),
        "{:?}",
        c.verdict
    );
}

#[test]
fn separated_spreads_differ_and_the_interval_excludes_one() {
    let rows = [
        row("select", &[104.0, 108.0, 100.0], 40.0, 0.5, 500.0),
        row("epoll", &[50.0, 54.0, 52.0], 10.0, 0.5, 500.0),
    ];
    let c = compare(
        "median service latency (us)",
        Better::Lower,
        &rows,
        CONFIDENCE,
    );
    assert_eq!(c.best, Some(1));
    let s = by_label(&c, "select");
    assert_eq!(s.standing, Standing::Differs);
    let ratio = s.ratio_to_best.expect("ratio");
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
    let (lo, hi) = s.ratio_ci.expect("interval");
    assert!(lo > 1.0 && lo <= ratio && ratio <= hi, "{lo} {hi}");
    assert!(
        c.verdict.iter().any(
            |l| l.contains("differ (their ratio intervals lie clear of 1)")
                && l.contains("select at 2.00x epoll's")
        ),
        "{:?}",
        c.verdict
    );
    // Four times the CPU at the same wake-ups: the scan.
    assert!(
        matches!(s.causes[..], [Cause::ScanCost { .. }]),
        "{:?}",
        s.causes
    );
    assert!(
        c.verdict
            .iter()
            .any(|l| l.starts_with("what dominates for select: scan cost")),
        "{:?}",
        c.verdict
    );
}

#[test]
fn names_wakeups_and_memory_when_they_dominate() {
    let rows = [
        row("epoll", &[50.0, 51.0, 52.0], 10.0, 0.4, 600.0),
        row("threads", &[80.0, 82.0, 81.0], 25.0, 1.2, 20_000.0),
    ];
    let c = compare(
        "median service latency (us)",
        Better::Lower,
        &rows,
        CONFIDENCE,
    );
    let t = by_label(&c, "threads");
    assert!(
        matches!(t.causes[..], [Cause::WakeUps { .. }, Cause::Memory { .. }]),
        "{:?}",
        t.causes
    );
    let line = c
        .verdict
        .iter()
        .find(|l| l.starts_with("what dominates for threads"))
        .expect("cause line");
    assert!(
        line.contains("wake-ups") && line.contains("memory per connection"),
        "{line}"
    );
}

#[test]
fn a_best_that_ties_names_its_extra_cost() {
    let rows = [
        row("threads", &[50.0, 52.0, 51.0], 20.0, 1.2, 26_000.0),
        row("epoll", &[51.0, 51.0, 52.0], 10.0, 0.4, 300.0),
    ];
    let c = compare("m", Better::Lower, &rows, CONFIDENCE);
    assert_eq!(by_label(&c, "epoll").standing, Standing::TiesBest);
    assert!(
        c.verdict.iter().any(
            |l| l.starts_with("threads is best, but at a cost against epoll")
                && l.contains("memory per connection: 25.4 KiB against 0.3 KiB")
        ),
        "{:?}",
        c.verdict
    );
}

#[test]
fn higher_is_better_for_throughput() {
    let rows = [
        row("a", &[900.0, 950.0], 10.0, 0.5, 0.0),
        row("b", &[2000.0, 2100.0], 10.0, 0.5, 0.0),
    ];
    let c = compare("achieved rate (req/s)", Better::Higher, &rows, CONFIDENCE);
    assert_eq!(c.best, Some(1));
    let a = by_label(&c, "a");
    assert_eq!(a.standing, Standing::Differs);
    assert!(a.ratio_to_best.expect("ratio") < 1.0);
    assert_eq!(a.causes, vec![Cause::NotServerWork]);
}

#[test]
fn one_repetition_is_not_judged_and_missing_rows_are_named() {
    let mut gone = row("gone", &[], 0.0, 0.0, 0.0);
    gone.primary = vec![None];
    let rows = [
        row("a", &[10.0], 1.0, 1.0, 0.0),
        row("b", &[20.0], 1.0, 1.0, 0.0),
        gone,
    ];
    let c = compare(
        "median service latency (us)",
        Better::Lower,
        &rows,
        CONFIDENCE,
    );
    assert_eq!(by_label(&c, "b").standing, Standing::Unjudged);
    assert_eq!(by_label(&c, "gone").standing, Standing::NotMeasured);
    assert!(
        c.verdict.iter().any(|l| l.contains("b cannot be judged")),
        "{:?}",
        c.verdict
    );
    assert!(
        c.verdict.iter().any(|l| l == "gone gave no result"),
        "{:?}",
        c.verdict
    );
}

#[test]
fn the_interval_is_the_same_for_the_same_samples() {
    let rows = [
        row("x", &[10.0, 12.0, 11.0, 13.0], 1.0, 1.0, 0.0),
        row("y", &[20.0, 22.0, 26.0, 21.0], 1.0, 1.0, 0.0),
    ];
    let a = compare("m", Better::Lower, &rows, CONFIDENCE);
    let b = compare("m", Better::Lower, &rows, CONFIDENCE);
    assert_eq!(a, b);
}

#[test]
fn nothing_measured_says_so() {
    let c = compare("m", Better::Lower, &[], CONFIDENCE);
    assert_eq!(c.best, None);
    assert_eq!(c.verdict.len(), 1);
}

/// Four rows given out of order: ranked best first, one line each against
/// the best, and a recommendation whose confidence three repetitions and a
/// missed schedule bring down to low.
#[test]
fn rows_are_ranked_and_each_gets_a_line_and_a_recommendation() {
    let rows = [
        row("select", &[270.0, 260.0, 275.0], 440.0, 0.93, 300.0),
        row("threads", &[78.0, 82.0, 86.0], 72.0, 1.1, 27_000.0),
        row("epoll", &[79.0, 80.0, 86.0], 57.0, 1.1, 300.0),
        RowSamples {
            label: "rtsig".into(),
            primary: vec![None; 3],
            ..RowSamples::default()
        },
    ];
    let c = compare("median service latency", Better::Lower, &rows, CONFIDENCE);
    assert_eq!(c.ranking, vec![2, 1, 0, 3]);
    assert_eq!(c.lines.len(), 3, "{:?}", c.lines);
    assert!(
        c.lines[0].starts_with("threads ties epoll: 1.00x [0.99-1.02]"),
        "{:?}",
        c.lines
    );
    assert!(
        c.lines[1].starts_with("epoll answered 3.25x [3.20-3.42] faster than select"),
        "{:?}",
        c.lines
    );
    assert!(c.lines[1].ends_with("(75% interval: 3 paired rounds)"));
    assert_eq!(c.lines[2], "rtsig: no valid run, nothing to compare");
    let caveats = Caveats {
        repetitions: 3,
        runs: 10,
        schedule_misses: 2,
        left_out: 0,
    };
    let r = recommend(&c, &caveats);
    assert_eq!(r.confidence, Confidence::Low);
    assert!(
        r.text.starts_with("epoll or threads (they tie for the lowest median service latency); epoll uses the least server CPU"),
        "{}",
        r.text
    );
    assert_eq!(r.reasons.len(), 2, "{:?}", r.reasons);
    assert!(r
        .line()
        .contains("missed its send schedule in 2 of 10 runs"));
    // Enough clean repetitions: high.
    let clean = Caveats {
        repetitions: 5,
        runs: 20,
        ..Caveats::default()
    };
    assert_eq!(recommend(&c, &clean).confidence, Confidence::High);
    assert!(recommend(&c, &clean).reasons.is_empty());
}

/// In closed loop the best serves more: its line says how many times more.
#[test]
fn a_higher_is_better_line_turns_the_ratio_around() {
    let rows = [
        row("poll", &[1000.0, 1010.0, 990.0], 10.0, 1.0, 300.0),
        row("epoll", &[2000.0, 2020.0, 1980.0], 5.0, 1.0, 300.0),
    ];
    let c = compare("achieved rate (req/s)", Better::Higher, &rows, CONFIDENCE);
    assert_eq!(c.ranking, vec![1, 0]);
    assert_eq!(
        c.lines,
        vec!["epoll served 2.00x [2.00-2.00] more requests per second than poll (75% interval: 3 paired rounds)".to_string()]
    );
    let r = recommend(
        &c,
        &Caveats {
            repetitions: 5,
            runs: 10,
            ..Caveats::default()
        },
    );
    assert!(
        r.text.starts_with(
            "epoll: the highest achieved rate (req/s), 2.00x better than the next, poll"
        ),
        "{}",
        r.text
    );
}

/// Only select and poll scan their descriptors: the processes engine's
/// dearer wake-ups are not called a scan cost.
#[test]
fn only_polling_engines_have_a_scan_cost() {
    let rows = [
        row("epoll", &[50.0, 52.0, 51.0], 10.0, 1.0, 300.0),
        row("processes", &[90.0, 95.0, 92.0], 40.0, 1.0, 300.0),
        row("poll", &[150.0, 155.0, 152.0], 40.0, 1.0, 300.0),
    ];
    let c = compare("median service latency", Better::Lower, &rows, CONFIDENCE);
    let text = c.verdict.join("\n");
    assert!(
        text.contains("what dominates for processes: CPU per wake-up"),
        "{text}"
    );
    assert!(
        text.contains("what dominates for poll: scan cost"),
        "{text}"
    );
}
