//! The loadgen report's tables, CSV columns and page.

use crate::support::{loadgen, loadgen_with_an_invalid_point};
use connlab_report::{render_loadgen, Format};

#[test]
fn markdown_has_every_table_with_medians_and_spread() {
    let md = render_loadgen(&loadgen(), Format::MARKDOWN).unwrap();
    for s in [
        "## Service latency",
        "## Memory per connection",
        "## Shards against one process",
        "## Pacing",
        "| connections | client processes | reps | service mean (µs) |",
        "send lag p99.9 (µs)",
        // Send lag p99 is 20 and 40 over the two repetitions.
        "| 30 (20–40) |",
        "| 100 → 1,100 | 2 | 1 |",
        "2,048",
        "2 against 1",
        "| 2.00× |",
        "1 s measured after 1 s warm-up",
        "7 of 8, 2 repetitions",
        "server CPU 1, client writer CPU 0, client reader CPU 0",
        "Not measured yet: epoll-1100c-1of4-2000rps-2sh-rep2",
    ] {
        assert!(md.contains(s), "missing {s:?} in\n{md}");
    }
    assert!(!md.contains('?'), "{md}");
}

#[test]
fn csv_is_long_form_with_every_column() {
    let text = render_loadgen(&loadgen(), Format::CSV).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(
        head,
        [
            "table",
            "engine",
            "connections",
            "active_ratio",
            "rate",
            "source_addrs",
            "shards",
            "io",
            "metric",
            "unit",
            "repetitions",
            "median",
            "min",
            "max",
            "invalid",
            "id",
            "attempts",
            "gates_failed"
        ]
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let slope = rows
        .iter()
        .find(|r| &r[8] == "server_bytes_per_connection" && &r[6] == "1")
        .unwrap();
    assert_eq!(slope[11].parse::<f64>().unwrap(), 1024.0);
    assert!(rows.iter().all(|r| &r[7] == "epoll"));
    assert!(rows
        .iter()
        .any(|r| &r[8] == "service_p50_us_ratio" && r[11].parse::<f64>().unwrap() == 2.0));
}

#[test]
fn html_is_a_page_of_tables() {
    let page = render_loadgen(&loadgen(), Format::HTML).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Six tables, the commands and the points not measured.
    assert_eq!(page.matches("<h2>").count(), 8);
    assert!(page.contains("<th>send lag p50 (µs)</th>"));
}

#[test]
fn csv_axes_are_plain_numbers() {
    let text = render_loadgen(&loadgen(), Format::CSV).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    // No thousands separators, in a setting or in a span of settings.
    assert!(rows.iter().any(|r| &r[2] == "1100" && &r[4] == "2000"));
    assert!(rows.iter().any(|r| &r[2] == "100 → 1100"));
    assert!(rows
        .iter()
        .all(|r| !r[2].contains(',') && !r[4].contains(',')));
}

#[test]
fn the_clients_io_path_is_a_column_when_it_varies() {
    let one = render_loadgen(&loadgen(), Format::MARKDOWN).unwrap();
    assert!(one.contains("client I/O epoll"), "{one}");
    let md = render_loadgen(&crate::support::loadgen_with_io(), Format::MARKDOWN).unwrap();
    assert!(md.contains("| client I/O |"), "{md}");
    assert!(md.contains("| uring |"), "{md}");
    let text = render_loadgen(&crate::support::loadgen_with_io(), Format::CSV).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert!(rows.iter().any(|r| &r[7] == "uring"));
    assert!(rows.iter().any(|r| &r[7] == "epoll"));
}

#[test]
fn an_invalid_point_is_left_out_of_the_tables_and_listed() {
    let dir = loadgen_with_an_invalid_point();
    let md = render_loadgen(&dir, Format::MARKDOWN).unwrap();
    // Send lag p99 was 20 and 40 over the two repetitions; the second is
    // invalid, so the row rests on the first alone.
    assert!(
        md.contains("| 100 | 1 | 1 (+1 invalid, left out) |"),
        "{md}"
    );
    assert!(md.contains("| 20 | 30 | 50 | 3 | 9 |"), "{md}");
    assert!(md.contains("7 of 8, 2 repetitions, 1 invalid (left out of every table)"));
    assert!(md.contains("## Validity of the points"), "{md}");
    assert!(md.contains("6 of 7 points passed every gate"), "{md}");
    assert!(
        md.contains("| epoll-100c-1of4-2000rps-1sh-rep2 | 3 | steal 7.3 % > 2 % |"),
        "{md}"
    );
    assert!(!md.contains("A/A"), "a loadgen sweep has no control: {md}");
    // The shard ratio of repetition 2 lost its one-process point.
    assert!(md.contains("| 100 | 2 against 1 | 1 |"), "{md}");

    let text = render_loadgen(&dir, Format::CSV).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let invalid: Vec<&csv::StringRecord> =
        rows.iter().filter(|r| &r[0] == "invalid_point").collect();
    assert_eq!(invalid.len(), 1);
    assert_eq!(&invalid[0][2], "100");
    assert_eq!(&invalid[0][15], "epoll-100c-1of4-2000rps-1sh-rep2");
    assert_eq!(&invalid[0][16], "3");
    assert_eq!(&invalid[0][17], "steal 7.3 % > 2 %");
    let lag = rows
        .iter()
        .find(|r| &r[8] == "send_lag_p99_us" && &r[2] == "100" && &r[6] == "1")
        .unwrap();
    assert_eq!((&lag[10], &lag[11], &lag[14]), ("1", "20.0", "1"));
}
