//! Reading the client's summary: wrk's text or connlab load's JSON.

use anyhow::{anyhow, bail, Context};
use connlab_loadgen::LoadResult;
use std::path::Path;

/// What the client reports.
pub(super) struct Outcome {
    pub(super) requests: u64,
    pub(super) requests_per_s: f64,
    pub(super) errors: u64,
}

/// Reads wrk's summary: requests, Requests/sec, non-2xx and socket errors.
pub(super) fn parse_wrk(text: &str) -> anyhow::Result<Outcome> {
    let mut requests = None;
    let mut rate = None;
    let mut errors = 0u64;
    for line in text.lines().map(str::trim) {
        if let Some((n, _)) = line.split_once(" requests in ") {
            requests = n.trim().parse::<u64>().ok();
        } else if let Some(r) = line.strip_prefix("Requests/sec:") {
            rate = r.trim().parse::<f64>().ok();
        } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            errors += n.trim().parse::<u64>().unwrap_or(0);
        } else if let Some(list) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            errors += list
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    match (requests, rate) {
        (Some(requests), Some(requests_per_s)) => Ok(Outcome {
            requests,
            requests_per_s,
            errors,
        }),
        _ => bail!("wrk's output has no summary: {:?}", text.lines().last()),
    }
}

/// Reads `connlab load --json`: its summary, and the whole result when it
/// reads as one (for its own checks of the run).
pub(super) fn parse_load(path: &Path) -> anyhow::Result<(Outcome, Option<LoadResult>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let requests = v["requests"]["completed"]
        .as_u64()
        .ok_or_else(|| anyhow!("{}: no requests.completed", path.display()))?;
    let errors = v["requests"]["errors"].as_object().map_or(0, |m| {
        m.values().filter_map(serde_json::Value::as_u64).sum()
    });
    let outcome = Outcome {
        requests,
        requests_per_s: v["achieved_rate_per_s"].as_f64().unwrap_or(0.0),
        errors,
    };
    Ok((outcome, serde_json::from_value(v).ok()))
}
