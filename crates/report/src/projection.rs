//! Projections to settings of the paper this machine cannot run (the polling
//! paper's 40,000 connections against a 20,000 open-files limit): per engine
//! and setting of the other parameters, a least-squares line through our
//! medians along the projected parameter, evaluated at the paper's value.
//! A projection is only printed when the measurements support it: at least
//! two distinct measured values, a line that does not fall (a cost that
//! shrinks with more connections is not extrapolated), and a fit that
//! explains most of the variation when there are three or more points;
//! otherwise "no projection" and why.

use crate::export::{Block, Cell, Table};
use crate::table::{param_text, PaperTable};
use connlab_lab::{PaperProjection, SweepDir};

/// The least R² a fit through three or more points needs.
const MIN_R2: f64 = 0.8;

/// One engine at one setting of the other parameters, projected.
#[derive(Clone, Debug)]
pub struct Projection {
    /// The engine.
    pub engine: String,
    /// The other parameters, e.g. `ratio 1% · closed loop`.
    pub group: String,
    /// Our medians along the projected parameter: (value, median).
    pub measured: Vec<(f64, f64)>,
    /// The paper's value of the parameter projected to.
    pub target: f64,
    /// The projected statistic, or why there is none.
    pub projected: Result<f64, String>,
    /// R² of the fit (1 with two points).
    pub r2: Option<f64>,
}

/// Least squares y = a + b x; returns (a, b, R²).
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let r2 = if syy > 0.0 {
        (sxy * sxy) / (sxx * syy)
    } else {
        1.0
    };
    Some((a, b, r2))
}

/// Projects one series of medians to `target`.
pub fn project(measured: &[(f64, f64)], target: f64) -> (Result<f64, String>, Option<f64>) {
    let mut xs: Vec<f64> = measured.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() < 2 {
        return (
            Err("fewer than two measured values to draw a line through".into()),
            None,
        );
    }
    let Some((a, b, r2)) = fit(measured) else {
        return (Err("the measured values do not vary".into()), None);
    };
    if b < 0.0 {
        return (
            Err("our values fall along the parameter: no line to extend".into()),
            Some(r2),
        );
    }
    if measured.len() >= 3 && r2 < MIN_R2 {
        return (
            Err(format!(
                "a line explains too little of the variation (R² {r2:.2} < {MIN_R2})"
            )),
            Some(r2),
        );
    }
    (Ok(a + b * target), Some(r2))
}

/// Every projection the experiment's `[paper.projection]` asks for.
pub fn projections(dir: &SweepDir, t: &PaperTable) -> Vec<Projection> {
    let Some(spec) = dir
        .experiment
        .paper
        .as_ref()
        .and_then(|p| p.projection.as_ref())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (col, engine) in t.engines.iter().enumerate() {
        let mut groups: Vec<String> = Vec::new();
        for r in &t.rows {
            let g = group_text(spec, r);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for group in groups {
            let measured: Vec<(f64, f64)> = t
                .rows
                .iter()
                .filter(|r| group_text(spec, r) == group)
                .filter_map(|r| {
                    let s = r.cells[col].ours[0].as_ref()?;
                    Some((r.value(spec.along), s.median()))
                })
                .collect();
            for &target in &spec.to {
                let (projected, r2) = project(&measured, target);
                out.push(Projection {
                    engine: engine.clone(),
                    group: group.clone(),
                    measured: measured.clone(),
                    target,
                    projected,
                    r2,
                });
            }
        }
    }
    out
}

fn group_text(spec: &PaperProjection, r: &crate::table::Row) -> String {
    use connlab_lab::Vary;
    [Vary::Connections, Vary::ActiveRatio, Vary::Rate]
        .into_iter()
        .filter(|v| *v != spec.along)
        .map(|v| param_text(v, r.value(v)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The experiment's `[paper.projection]`, if it asks for one.
pub(crate) fn spec(dir: &SweepDir) -> Option<&PaperProjection> {
    dir.experiment
        .paper
        .as_ref()
        .and_then(|p| p.projection.as_ref())
}

/// The parameter projected along, in words.
pub(crate) fn along_words(along: connlab_lab::Vary) -> &'static str {
    match along {
        connlab_lab::Vary::Connections => "the connection count",
        connlab_lab::Vary::ActiveRatio => "the active ratio",
        connlab_lab::Vary::Rate => "the rate",
    }
}

/// The section's heading: `Projection to the paper's 40,000 conns`.
fn heading(spec: &PaperProjection) -> String {
    let targets: Vec<String> = spec.to.iter().map(|v| param_text(spec.along, *v)).collect();
    format!("Projection to the paper's {}", targets.join(", "))
}

/// Why the projection is needed and how it is made.
fn note(spec: &PaperProjection, t: &PaperTable) -> String {
    format!(
        "{} Each line is a least-squares fit of our medians ({} of {}) along {}; it is printed only when it does not fall and, with three or more points, explains at least {:.0}% of their variation. Projected values are ours extended, not measured.",
        spec.why.trim().replace('\n', " "),
        crate::table::stat_names(t.metric)[0],
        crate::table::metric_name(t.metric),
        along_words(spec.along),
        MIN_R2 * 100.0
    )
}

/// One projection as table cells: engine, setting, measured, projected, R².
fn cells(spec: &PaperProjection, t: &PaperTable, p: &Projection) -> [String; 5] {
    let (unit, scale) = crate::table::unit(t.metric);
    let measured: Vec<String> = p
        .measured
        .iter()
        .map(|(x, y)| {
            format!(
                "{}: {} {unit}",
                param_text(spec.along, *x),
                crate::claims::trimmed(y / scale)
            )
        })
        .collect();
    let projected = match &p.projected {
        Ok(v) => format!(
            "{}: {} {unit}",
            param_text(spec.along, p.target),
            crate::claims::trimmed(v / scale)
        ),
        Err(why) => format!("no projection: {why}"),
    };
    [
        p.engine.clone(),
        p.group.clone(),
        if measured.is_empty() {
            "nothing measured".into()
        } else {
            measured.join("; ")
        },
        projected,
        p.r2.map_or("—".into(), |r| format!("{r:.2}")),
    ]
}

/// The projection section's blocks (none when none is asked for): the
/// heading, why and how, and a row per engine and setting.
pub(crate) fn blocks(dir: &SweepDir, t: &PaperTable) -> Vec<Block> {
    let Some(spec) = spec(dir) else {
        return Vec::new();
    };
    vec![
        Block::Heading(heading(spec)),
        Block::Note(note(spec, t)),
        Block::Table(Table {
            id: Some("projection".into()),
            class: Some("projection"),
            head: ["engine", "setting", "measured", "projected", "R²"]
                .map(String::from)
                .to_vec(),
            rows: projections(dir, t)
                .iter()
                .map(|p| cells(spec, t, p).map(Cell::from).to_vec())
                .collect(),
            labels: 4,
            ..Table::default()
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::project;

    #[test]
    fn a_line_through_growing_costs_is_extended() {
        let (p, r2) = project(
            &[(5000.0, 100.0), (10000.0, 200.0), (19900.0, 398.0)],
            40000.0,
        );
        let p = p.unwrap();
        assert!((p - 800.0).abs() < 5.0, "{p}");
        assert!(r2.unwrap() > 0.99);
    }

    #[test]
    fn unsupported_projections_say_why() {
        assert!(project(&[(5000.0, 100.0)], 40000.0)
            .0
            .unwrap_err()
            .contains("fewer than two"));
        assert!(project(&[(5000.0, 100.0), (19900.0, 50.0)], 40000.0)
            .0
            .unwrap_err()
            .contains("fall"));
        let noisy = [
            (5000.0, 100.0),
            (10000.0, 400.0),
            (15000.0, 90.0),
            (19900.0, 420.0),
        ];
        assert!(project(&noisy, 40000.0).0.unwrap_err().contains("R²"));
    }
}
