//! Reading and checking an experiment file, and the points of its sweep.

use super::file::{web_config, Experiment, ExperimentError, MatrixOverride, RatioValue, SizeValue};
use crate::values::{parse_toml, ActivePolicy, LinkRate};
use connlab_measure::units::parse_size_u32;
use connlab_measure::ActiveRatio;
use connlab_server::EngineKind;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// One measurement of a sweep: one engine at one cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointParams {
    /// Server engine.
    pub engine: String,
    /// Total connections.
    pub connections: u64,
    /// Active ratio as a number.
    pub active_ratio: f64,
    /// Active ratio as written in the experiment (`1/16`).
    pub active_ratio_label: String,
    /// Requests per second in total; 0 means closed loop (`max`).
    pub rate_per_s: f64,
    /// Request size in bytes.
    pub request_size_bytes: u32,
    /// Response size in bytes.
    pub response_size_bytes: u32,
    /// Measured seconds.
    pub duration_s: f64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Repetition, from 1.
    pub repetition: u32,
    /// The A/A control: the same engine measured a second time in the same
    /// round, as a row of its own (`-aa` ends its id).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control: bool,
}

impl PointParams {
    /// A stable identifier, usable as a file name:
    /// `epoll-c400-a1_16-r2000-rep1`.
    pub fn id(&self) -> String {
        let ratio: String = self
            .active_ratio_label
            .chars()
            .map(|c| match c {
                '/' => '_',
                '%' => 'p',
                c if c.is_ascii_alphanumeric() || c == '.' => c,
                _ => '-',
            })
            .collect();
        format!(
            "{}-c{}-a{}-r{}-rep{}{}",
            self.engine.replace(':', "-b"),
            self.connections,
            ratio,
            self.rate_label(),
            self.repetition,
            if self.control { "-aa" } else { "" }
        )
    }

    /// Whether the point runs closed loop (`--rate max`).
    pub fn closed_loop(&self) -> bool {
        self.rate_per_s == 0.0
    }

    /// The rate as `--rate` takes it: a number, or `max`.
    pub fn rate_label(&self) -> String {
        rate_label(self.rate_per_s)
    }
}

/// A rate for display and `--rate`: the number, or `max` for closed loop (0).
pub fn rate_label(rate_per_s: f64) -> String {
    if rate_per_s == 0.0 {
        "max".into()
    } else {
        rate_per_s.to_string()
    }
}

impl Experiment {
    /// Reads and validates an experiment file.
    pub fn from_file(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Experiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates experiment text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Experiment, ExperimentError> {
        crate::kind::expect(
            text,
            origin,
            &[crate::ExperimentKind::Locality, crate::ExperimentKind::Web],
        )?;
        let mut exp: Experiment = parse_toml(text, origin)?;
        if let Some(p) = &mut exp.paper {
            for c in &mut p.claims {
                if c.source.trim().is_empty() {
                    c.source = p.table.clone();
                }
            }
        }
        exp.validate(origin)?;
        Ok(exp)
    }

    /// The paper table this reproduces (`Table 3`), if any.
    pub fn reproduces(&self) -> Option<&str> {
        self.paper.as_ref().map(|p| p.table.as_str())
    }

    /// Backend host names of a web experiment: `web1` .. `webN`.
    pub fn backend_hosts(&self) -> Vec<String> {
        let n = self.web.as_ref().map_or(0, |w| w.backends);
        (1..=n).map(|i| format!("web{i}")).collect()
    }

    /// The backend hosts a web engine uses: the first N for `config:N`, one
    /// for `direct`, all of them otherwise.
    pub fn backend_hosts_of(&self, engine: &str) -> Vec<String> {
        let mut hosts = self.backend_hosts();
        match web_config(engine) {
            Ok(("direct", _)) => hosts.truncate(1),
            Ok((_, Some(n))) => hosts.truncate(n as usize),
            _ => {}
        }
        hosts
    }

    /// Client host names: `client1` .. `clientK`.
    pub fn client_hosts(&self) -> Vec<String> {
        (1..=self.topology.client_hosts)
            .map(|i| format!("client{i}"))
            .collect()
    }

    /// The link rate in bits per second, `None` for unlimited.
    pub fn link_rate_bps(&self) -> Option<u64> {
        self.topology.link_rate.as_ref().and_then(LinkRate::bps)
    }

    /// The lead between launching the shards and their common start for a
    /// point with `connections` in total.
    pub fn start_lead(&self, connections: u64) -> Duration {
        match &self.client.start_lead {
            Some(d) => d.get(),
            None => Duration::from_secs(2) + Duration::from_secs_f64(connections as f64 / 2000.0),
        }
    }

    /// The engine measured twice per round as the A/A control, if any: the
    /// file's `validity.control`, else epoll where the file measures it
    /// (the locality paper's reference), else the first engine.
    pub fn control_engine(&self) -> Option<&str> {
        match self.validity.control_choice() {
            Some(choice) => choice,
            None => self
                .server
                .engines
                .iter()
                .find(|e| *e == "epoll")
                .or(self.server.engines.first())
                .map(String::as_str),
        }
    }

    /// Every point of the sweep, repetitions outermost and engines innermost
    /// (so engines compared in one row run close together in time). Each
    /// cell starts with the A/A control's point (see [`control_engine`]),
    /// so that its two measurements are as far apart as the cell allows.
    ///
    /// [`control_engine`]: Experiment::control_engine
    pub fn plan(&self, quick: bool) -> Vec<PointParams> {
        self.plan_with(quick, None)
    }

    /// Repetitions the plan runs: the `[quick]` override's or the matrix's.
    pub fn repetitions(&self, quick: bool) -> u32 {
        let q = if quick {
            self.quick.clone().unwrap_or_default()
        } else {
            MatrixOverride::default()
        };
        q.repetitions.unwrap_or(self.matrix.repetitions)
    }

    /// [`plan`](Experiment::plan) with `repetitions` rounds instead of the
    /// file's (`connlab sweep --max-repetitions` adds rounds this way; the
    /// first rounds are the same points).
    pub fn plan_with(&self, quick: bool, repetitions: Option<u32>) -> Vec<PointParams> {
        let q = if quick {
            self.quick.clone().unwrap_or_default()
        } else {
            MatrixOverride::default()
        };
        let m = &self.matrix;
        let connections = q.connections.as_ref().unwrap_or(&m.connections);
        let ratios = q.active_ratios.as_ref().unwrap_or(&m.active_ratios);
        let rates = q.rates.as_ref().unwrap_or(&m.rates);
        let duration = q.duration.as_ref().unwrap_or(&m.duration);
        let warmup = q.warmup.as_ref().unwrap_or(&m.warmup);
        let repetitions = repetitions.unwrap_or(q.repetitions.unwrap_or(m.repetitions));
        let (duration_s, warmup_s) = (duration.secs(), warmup.secs());
        let request = size_bytes(&m.request_size).unwrap_or(0);
        let response = size_bytes(&m.response_size).unwrap_or(0);
        let mut points = Vec::new();
        for repetition in 1..=repetitions {
            for &c in connections {
                for ratio in ratios {
                    let (active_ratio, label) = ratio_value(ratio).unwrap_or((1.0, "1".into()));
                    for rate in rates {
                        let rate = rate.per_second().unwrap_or(0.0);
                        let control = self.control_engine().map(|e| (e, true));
                        let engines = self.server.engines.iter().map(|e| (e.as_str(), false));
                        for (engine, control) in control.into_iter().chain(engines) {
                            points.push(PointParams {
                                engine: engine.to_string(),
                                connections: c,
                                active_ratio,
                                active_ratio_label: label.clone(),
                                rate_per_s: rate,
                                request_size_bytes: request,
                                response_size_bytes: response,
                                duration_s,
                                warmup_s,
                                repetition,
                                control,
                            });
                        }
                    }
                }
            }
        }
        points
    }

    fn validate(&self, origin: &str) -> Result<(), ExperimentError> {
        let bad = |field: &str, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(
                "name",
                format!("{:?}: use letters, digits, - and _", self.name),
            ));
        }
        let host_ok = |h: &str| {
            !h.is_empty()
                && h.len() <= 12
                && h.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        };
        if !host_ok(&self.topology.server_host) || self.topology.server_host.starts_with("client") {
            return Err(bad(
                "topology.server_host",
                format!(
                    "{:?}: 1-12 lowercase letters and digits, not starting with \"client\"",
                    self.topology.server_host
                ),
            ));
        }
        if !(1..=32).contains(&self.topology.client_hosts) {
            return Err(bad(
                "topology.client_hosts",
                format!("{}: between 1 and 32", self.topology.client_hosts),
            ));
        }
        if self.server.engines.is_empty() {
            return Err(bad("server.engines", "name at least one engine".into()));
        }
        for (i, e) in self.server.engines.iter().enumerate() {
            if let Some(w) = &self.web {
                let (_, count) =
                    web_config(e).map_err(|m| bad(&format!("server.engines[{i}]"), m))?;
                if count.is_some_and(|n| n > w.backends) {
                    return Err(bad(
                        &format!("server.engines[{i}]"),
                        format!("{e:?}: more backends than web.backends = {}", w.backends),
                    ));
                }
            } else {
                e.parse::<EngineKind>()
                    .map_err(|m| bad(&format!("server.engines[{i}]"), m))?;
            }
            if self.server.engines[..i].contains(e) {
                return Err(bad(&format!("server.engines[{i}]"), format!("{e:?} twice")));
            }
        }
        self.validity
            .check()
            .map_err(|(field, message)| bad(&field, message))?;
        if let Some(Some(c)) = self.validity.control_choice() {
            if !self.server.engines.iter().any(|e| e == c) {
                return Err(bad(
                    "validity.control",
                    format!(
                        "{c:?} is not among server.engines ({}); name one of them, or \"none\"",
                        self.server.engines.join(", ")
                    ),
                ));
            }
        }
        if let Some(w) = &self.web {
            if self.server.protocol != "http" {
                return Err(bad(
                    "server.protocol",
                    "a web experiment speaks http".into(),
                ));
            }
            if !(1..=8).contains(&w.backends) {
                return Err(bad(
                    "web.backends",
                    format!("{}: between 1 and 8", w.backends),
                ));
            }
        }
        if let Some(p) = self.client.writer_priority {
            if !(1..=99).contains(&p) {
                return Err(bad(
                    "client.writer_priority",
                    format!("{p}: between 1 and 99"),
                ));
            }
        }
        let rotating = self.client.active_policy == Some(ActivePolicy::Rotating);
        if let Some(d) = self.client.depth {
            if d == 0 || (rotating && d != 1) {
                return Err(bad(
                    "client.depth",
                    format!(
                        "{d}: at least 1{}",
                        if rotating {
                            ", and exactly 1 with the rotating policy"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        let m = &self.matrix;
        size_bytes(&m.request_size).map_err(|e| bad("matrix.request_size", e))?;
        size_bytes(&m.response_size).map_err(|e| bad("matrix.response_size", e))?;
        let q = self.quick.clone().unwrap_or_default();
        for (section, over) in [("matrix", MatrixOverride::default()), ("quick", q)] {
            let conns = over.connections.as_ref().unwrap_or(&m.connections);
            let ratios = over.active_ratios.as_ref().unwrap_or(&m.active_ratios);
            let rates = over.rates.as_ref().unwrap_or(&m.rates);
            let duration = over.duration.as_ref().unwrap_or(&m.duration);
            let reps = over.repetitions.unwrap_or(m.repetitions);
            check_list(conns, &format!("{section}.connections"), origin, |c| {
                if *c >= u64::from(self.topology.client_hosts) {
                    Ok(())
                } else {
                    Err(format!(
                        "{c}: at least one connection per client host ({})",
                        self.topology.client_hosts
                    ))
                }
            })?;
            let mut labels = Vec::new();
            for (i, r) in ratios.iter().enumerate() {
                let (_, label) =
                    ratio_value(r).map_err(|e| bad(&format!("{section}.active_ratios[{i}]"), e))?;
                labels.push(label);
            }
            check_list(&labels, &format!("{section}.active_ratios"), origin, |_| {
                Ok(())
            })?;
            check_list(rates, &format!("{section}.rates"), origin, |r| {
                r.per_second().map(|_| ())
            })?;
            if rotating {
                if let Some(i) = rates.iter().position(|r| r.per_second() != Ok(0.0)) {
                    return Err(bad(
                        &format!("{section}.rates[{i}]"),
                        "the rotating active policy runs closed loop: use \"max\"".into(),
                    ));
                }
            }
            if duration.get().is_zero() {
                return Err(bad(
                    &format!("{section}.duration"),
                    "must be positive".into(),
                ));
            }
            if reps == 0 {
                return Err(bad(&format!("{section}.repetitions"), "at least 1".into()));
            }
        }
        if let Some(p) = &self.paper {
            self.validate_paper(p, origin)?;
        }
        Ok(())
    }
}

/// A unit enum's name as written in the file (`send_deviation`).
pub(super) fn serde_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Checks every element and refuses duplicates, naming the index.
fn check_list<T: PartialEq + std::fmt::Debug>(
    items: &[T],
    field: &str,
    origin: &str,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<(), ExperimentError> {
    let bad = |i: usize, message: String| ExperimentError::Invalid {
        origin: origin.to_string(),
        field: format!("{field}[{i}]"),
        message,
    };
    if items.is_empty() {
        return Err(ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message: "give at least one value".into(),
        });
    }
    for (i, item) in items.iter().enumerate() {
        check(item).map_err(|m| bad(i, m))?;
        if items[..i].contains(item) {
            return Err(bad(i, format!("{item:?} twice")));
        }
    }
    Ok(())
}

fn size_bytes(v: &SizeValue) -> Result<u32, String> {
    match v {
        SizeValue::Bytes(b) => {
            u32::try_from(*b).map_err(|_| format!("{b} bytes is over the 4 GiB limit"))
        }
        SizeValue::Text(t) => parse_size_u32(t),
    }
}

/// The ratio and its label as written.
pub(crate) fn ratio_value(v: &RatioValue) -> Result<(f64, String), String> {
    let (parsed, label) = match v {
        RatioValue::Number(n) => (ActiveRatio::new(*n), n.to_string()),
        RatioValue::Text(t) => (t.parse::<ActiveRatio>(), t.trim().to_string()),
    };
    parsed.map(|r| (r.get(), label)).map_err(|e| e.to_string())
}

/// Parses a link rate as `tc` writes it: `1gbit`, `100mbit`, `512kbit`,
/// `1000000bit`; `none` means unlimited (`Ok(None)`).
pub fn parse_link_rate(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "none" || t == "unlimited" {
        return Ok(None);
    }
    let bps = connlab_measure::units::parse_rate(text).map_err(|e| format!("{e}, or none"))?;
    if bps > 100_000_000_000 {
        return Err(format!("{text:?}: between 8kbit and 100gbit"));
    }
    Ok(Some(bps))
}
