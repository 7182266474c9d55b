//! Warnings counted instead of repeated: every run's failed gates and
//! load-generator warnings, grouped by kind, each said once with how many
//! runs it hit, the threshold it crossed and the range of the values
//! (`client missed its send schedule (send-lag p99 > 50 us) in 12 of 12
//! runs: 62-4,700 us`). Pure: the runners add what each run recorded.

use crate::validity::{GateValue, Validity};
use crate::warning_text::shape;
use std::collections::BTreeMap;

/// Runs and what went wrong in them, by kind.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    runs: usize,
    /// Failed gates by name (in [`crate::validity::GATE_NAMES`] order when
    /// listed): the runs they failed in, their values and the limit.
    gates: BTreeMap<usize, GateCount>,
    /// Warnings by their text with numbers blanked: the first one seen and
    /// how many runs had one like it.
    warnings: Vec<(String, String, usize)>,
}

#[derive(Clone, Debug)]
struct GateCount {
    name: String,
    runs: usize,
    values: Vec<f64>,
    limit: GateValue,
}

impl Tally {
    /// Counts one run: its gates (if checked) and its warnings.
    pub fn add(&mut self, validity: Option<&Validity>, warnings: &[String]) {
        self.runs += 1;
        for g in validity
            .into_iter()
            .flat_map(|v| v.gates.iter())
            .filter(|g| !g.passed)
        {
            let order = crate::validity::GATE_NAMES
                .iter()
                .position(|n| *n == g.name)
                .unwrap_or(usize::MAX);
            let c = self.gates.entry(order).or_insert_with(|| GateCount {
                name: g.name.clone(),
                runs: 0,
                values: Vec::new(),
                limit: g.limit.clone(),
            });
            c.runs += 1;
            if let GateValue::Number(v) = g.value {
                c.values.push(v);
            }
        }
        let mut seen: Vec<String> = Vec::new();
        for w in warnings {
            let shape = shape(w);
            // A run counts once per kind of warning.
            if seen.contains(&shape) {
                continue;
            }
            match self.warnings.iter_mut().find(|(s, _, _)| *s == shape) {
                Some(entry) => entry.2 += 1,
                None => self.warnings.push((shape.clone(), w.clone(), 1)),
            }
            seen.push(shape);
        }
    }

    /// Runs counted.
    pub fn runs(&self) -> usize {
        self.runs
    }

    /// Runs whose client missed its send schedule (`schedule` failed).
    pub fn schedule_misses(&self) -> usize {
        self.gates
            .values()
            .find(|g| g.name == "schedule")
            .map_or(0, |g| g.runs)
    }

    /// One line per kind: the failed gates first, in gate order, then the
    /// warnings in the order first seen.
    pub fn lines(&self) -> Vec<String> {
        let n = self.runs;
        let mut out: Vec<String> = self
            .gates
            .values()
            .map(|g| {
                let (what, unit, scale) = gate_words(&g.name);
                let limit = match &g.limit {
                    GateValue::Number(l) => format!("{}{unit}", number(l * scale)),
                    t => t.to_string(),
                };
                let range = range_text(&g.values, unit, scale);
                format!(
                    "{what} ({} {} {limit}) in {} of {n} runs{range}",
                    g.name,
                    if g.name == "completion" { "<" } else { ">" },
                    g.runs
                )
            })
            .collect();
        out.extend(self.warnings.iter().map(|(_, first, k)| {
            if *k > 1 || n > 1 {
                format!("{first} (in {k} of {n} runs; the first shown)")
            } else {
                first.clone()
            }
        }));
        out
    }
}

/// What a failed gate means in words, and the unit and scale of its values.
fn gate_words(name: &str) -> (&'static str, &'static str, f64) {
    match name {
        "schedule" => ("client missed its send schedule", " us", 1.0),
        "foreign_cpu" => ("other processes used the measured CPUs", " %", 100.0),
        "steal" => ("the hypervisor stole CPU time", " %", 100.0),
        "completion" => ("requests did not complete", " %", 100.0),
        "stationary" => ("latency drifted over the run", "", 1.0),
        "arrivals" => ("sends strayed from their arrival process", "", 1.0),
        "machine" => ("measured on another machine", "", 1.0),
        "precision" => ("the p99 is not as precise as --ci-target asks", "", 1.0),
        _ => ("a gate failed", "", 1.0),
    }
}

/// `: 62-4,700 us`, `: 15 %` or nothing without values.
fn range_text(values: &[f64], unit: &str, scale: f64) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        String::new()
    } else if number(lo * scale) == number(hi * scale) {
        format!(": {}{unit}", number(lo * scale))
    } else {
        format!(": {}-{}{unit}", number(lo * scale), number(hi * scale))
    }
}

/// Three significant figures, thousands separated.
fn number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validity::Gate;

    fn schedule(us: f64) -> Validity {
        Validity::of(
            vec![
                Gate::at_least("completion", 1.0, 0.99, String::new()),
                Gate {
                    name: "schedule".into(),
                    value: GateValue::Number(us),
                    limit: GateValue::Number(50.0),
                    passed: us <= 50.0,
                    detail: String::new(),
                },
            ],
            1,
        )
    }

    #[test]
    fn gates_and_warnings_are_counted_once_per_kind() {
        let mut t = Tally::default();
        let lag = |us: f64| {
            format!("send lag p99 {us} us is above a tenth of the send interval (500.0 us)")
        };
        t.add(Some(&schedule(62.0)), &[lag(62.0), lag(70.5)]);
        t.add(Some(&schedule(4700.0)), &[lag(4700.0)]);
        t.add(Some(&schedule(20.0)), &[]);
        assert_eq!(t.runs(), 3);
        assert_eq!(t.schedule_misses(), 2);
        assert_eq!(
            t.lines(),
            vec![
                "client missed its send schedule (schedule > 50.0 us) in 2 of 3 runs: 62.0-4,700 us".to_string(),
                "send lag p99 62 us is above a tenth of the send interval (500.0 us) (in 2 of 3 runs; the first shown)".to_string(),
            ]
        );
    }

    #[test]
    fn shares_are_shown_in_percent() {
        let mut t = Tally::default();
        let v = Validity::of(
            vec![Gate {
                name: "foreign_cpu".into(),
                value: GateValue::Number(0.154),
                limit: GateValue::Number(0.05),
                passed: false,
                detail: String::new(),
            }],
            1,
        );
        t.add(Some(&v), &[]);
        assert_eq!(
            t.lines(),
            vec!["other processes used the measured CPUs (foreign_cpu > 5.00 %) in 1 of 1 runs: 15.4 %".to_string()]
        );
    }
}
