//! Reports of peers sweeps (`DIR/peers.json`): per body size and contender,
//! the median and spread (min–max across repetitions) of requests per second
//! and of requests per CPU second of the measured role, and each contender's
//! ratio to the baseline, taken repetition by repetition (the baseline of the
//! same repetition ran minutes apart at most) so its spread is the ratio's own;
//! a dot plot per body size; the command lines; the points not measured.

use crate::export::{self, Block, Cell, Page, Report};
use crate::summary;
use crate::summary::whole;
pub use crate::summary::Spread;
use crate::{Format, ReportError};
use connlab_lab::{PeerPoint, PeersDir, ProcessKind, Role};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Renders the report of a peers sweep.
pub fn render_peers(dir: &PeersDir, format: Format) -> Result<String, ReportError> {
    export::export(&Peers { dir }, format)
}

/// One contender at one body size.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRow {
    /// Response body bytes.
    pub body_bytes: u64,
    /// Contender name.
    pub contender: String,
    /// What it runs (`nginx-return`, `connlab-serve epoll`).
    pub what: String,
    /// Repetitions measured.
    pub repetitions: usize,
    /// Requests per second.
    pub requests_per_s: Spread,
    /// Requests per CPU second of the measured role.
    pub requests_per_cpu_s: Spread,
    /// Each repetition's requests per CPU second, in repetition order.
    pub per_rep: Vec<f64>,
    /// Per baseline at this body size: the ratio to it, repetition by
    /// repetition; `None` without pairs.
    pub ratios: Vec<(String, Option<Spread>)>,
    /// Client-reported errors, summed.
    pub errors: u64,
}

fn what(dir: &PeersDir, contender: &str) -> String {
    let exp = &dir.info.experiment;
    exp.contender_named(contender).map_or(String::new(), |c| {
        let mut s = c.kind.name().to_string();
        if let Some(e) = c.engine {
            let _ = write!(s, " {}", e.name());
        }
        if c.edge_triggered {
            s.push_str(" (edge-triggered)");
        }
        if c.kind == ProcessKind::SingleipRelay {
            // Two programs: say whose flags are whose.
            if !c.args.is_empty() {
                let _ = write!(s, " io-server {}", c.args.join(" "));
            }
            if c.splice || !c.node_args.is_empty() {
                s.push_str(" app-node");
                if c.splice {
                    s.push_str(" --splice");
                }
                for a in &c.node_args {
                    let _ = write!(s, " {a}");
                }
            }
            return s;
        }
        if c.splice && c.kind == ProcessKind::Haproxy {
            s.push_str(" splice-request/-response");
        } else if c.splice {
            s.push_str(" --splice");
        }
        if let Some(io) = c.io {
            let _ = write!(s, " --io {}", io.name());
        }
        for a in &c.args {
            let _ = write!(s, " {a}");
        }
        if matches!(c.kind, ProcessKind::Wrk | ProcessKind::Haproxy) {
            let _ = write!(s, " ({} thread)", c.threads.unwrap_or(1));
        }
        s
    })
}

/// The summary rows, body sizes in plan order, contenders in file order.
pub fn summarize(dir: &PeersDir) -> Vec<PeerRow> {
    let exp = &dir.info.experiment;
    let mut by: BTreeMap<(u64, &str), Vec<&PeerPoint>> = BTreeMap::new();
    for p in &dir.points {
        by.entry((p.params.body_bytes, p.params.contender.as_str()))
            .or_default()
            .push(p);
    }
    let mut sizes: Vec<u64> = dir.points.iter().map(|p| p.params.body_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut rows = Vec::new();
    for size in sizes {
        let bases: Vec<(&str, BTreeMap<u32, f64>)> = exp
            .baselines_at(size)
            .into_iter()
            .map(|b| {
                let per_rep = by.get(&(size, b)).map_or_else(BTreeMap::new, |ps| {
                    ps.iter()
                        .map(|p| (p.params.repetition, p.requests_per_cpu_s))
                        .collect()
                });
                (b, per_rep)
            })
            .collect();
        for c in &exp.contender {
            let Some(points) = by.get(&(size, c.name.as_str())) else {
                continue;
            };
            let mut points = points.clone();
            points.sort_by_key(|p| p.params.repetition);
            let rps: Vec<f64> = points.iter().map(|p| p.requests_per_s).collect();
            let rpc: Vec<f64> = points.iter().map(|p| p.requests_per_cpu_s).collect();
            let ratios = bases
                .iter()
                .map(|(name, base)| {
                    let r: Vec<f64> = points
                        .iter()
                        .filter_map(|p| {
                            base.get(&p.params.repetition)
                                .filter(|b| **b > 0.0)
                                .map(|b| p.requests_per_cpu_s / b)
                        })
                        .collect();
                    (name.to_string(), Spread::of(&r))
                })
                .collect();
            let (Some(requests_per_s), Some(requests_per_cpu_s)) =
                (Spread::of(&rps), Spread::of(&rpc))
            else {
                continue;
            };
            rows.push(PeerRow {
                body_bytes: size,
                contender: c.name.clone(),
                what: what(dir, &c.name),
                repetitions: points.len(),
                requests_per_s,
                requests_per_cpu_s,
                per_rep: rpc,
                ratios,
                errors: points.iter().map(|p| p.errors).sum(),
            });
        }
    }
    rows
}

fn whole_spread(s: &Spread) -> String {
    format!("{} ({}–{})", whole(s.median), whole(s.min), whole(s.max))
}

fn ratio_spread(s: Option<Spread>) -> String {
    s.map_or("—".into(), |s| {
        format!("{:.2}× ({:.2}–{:.2})", s.median, s.min, s.max)
    })
}

fn size_text(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn measure_text(role: Role) -> String {
    format!("requests per {} CPU s", role.name())
}

/// Column headings of the summary table at one body size.
fn headings(dir: &PeersDir, body_bytes: u64) -> Vec<String> {
    let m = dir.info.experiment.measure;
    let mut h: Vec<String> = vec![
        "body".into(),
        "contender".into(),
        "program".into(),
        "reps".into(),
        "req/s median (min–max)".into(),
        format!("{} median (min–max)", measure_text(m)),
        format!("{} CPU µs per request", m.name()),
    ];
    for b in dir.info.experiment.baselines_at(body_bytes) {
        h.push(format!("ratio to {b} (min–max)"));
    }
    h.push("errors".into());
    h
}

fn cells(r: &PeerRow) -> Vec<String> {
    let mut c = vec![
        size_text(r.body_bytes),
        r.contender.clone(),
        r.what.clone(),
        r.repetitions.to_string(),
        whole_spread(&r.requests_per_s),
        whole_spread(&r.requests_per_cpu_s),
        format!("{:.1}", 1e6 / r.requests_per_cpu_s.median),
    ];
    c.extend(r.ratios.iter().map(|(_, s)| ratio_spread(*s)));
    c.push(r.errors.to_string());
    c
}

/// (name, value) facts about the sweep.
fn facts(dir: &PeersDir) -> Vec<(String, String)> {
    let i = &dir.info;
    let e = &i.experiment;
    let w = &e.workload;
    let fixed = |role: &str, p: &Option<connlab_lab::Process>| {
        p.as_ref().map(|p| {
            let mut s = p.kind.name().to_string();
            if let Some(engine) = p.engine {
                let _ = write!(s, " {}", engine.name());
            }
            (role.to_string(), s)
        })
    };
    let cpu = summary::cpu_text;
    let mut out = vec![
        ("compared".into(), format!("{}s", e.contender_role().name())),
        ("measure".into(), measure_text(e.measure)),
        ("baselines".into(), e.baseline.names().join(", ")),
        (
            "workload".into(),
            format!(
                "HTTP/1.1 keep-alive, closed loop, {} connections, GET /bytes/N, {:.0} s per point",
                w.connections,
                e.duration(i.quick).as_secs_f64()
            ),
        ),
        (
            "placement".into(),
            if e.gateway.is_some() || e.contender_role() == Role::Gateway {
                format!(
                    "server {}, gateway {}, client {}",
                    cpu(e.placement.server_cpu),
                    cpu(e.placement.gateway_cpu),
                    cpu(e.placement.client_cpu)
                )
            } else {
                format!(
                    "server {}, client {}",
                    cpu(e.placement.server_cpu),
                    cpu(e.placement.client_cpu)
                )
            },
        ),
        (
            "points".into(),
            format!(
                "{} of {}{}",
                dir.points.len(),
                i.points_total,
                if i.quick { " (--quick)" } else { "" }
            ),
        ),
        summary::machine(i.environment.cpu_count, &i.environment.kernel),
    ];
    out.extend(fixed("server", &e.server));
    out.extend(fixed("gateway", &e.gateway));
    out.extend(fixed("client", &e.client));
    for (program, version) in &i.peer_versions {
        out.push((program.clone(), version.clone()));
    }
    out.push((
        "CPU accounting".into(),
        "server and gateway: utime + stime of the process tree from /proc/PID/stat \
         (nginx: master and worker) over the client's run; client: its rusage"
            .into(),
    ));
    out
}

/// Plan points with no result yet.
fn missing(dir: &PeersDir) -> Vec<String> {
    summary::missing(
        dir.info
            .experiment
            .plan(dir.info.quick)
            .iter()
            .map(connlab_lab::PeerParams::id),
        dir.points.iter().map(|p| p.id.as_str()),
    )
}

/// The command line of each contender's first point, role by role.
fn commands(dir: &PeersDir) -> Vec<(String, Vec<(Role, String)>)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for p in &dir.points {
        if seen.insert(p.params.contender.clone()) {
            out.push((
                p.id.clone(),
                p.commands.iter().map(|(r, c)| (*r, c.join(" "))).collect(),
            ));
        }
    }
    out
}

/// One CSV row: the summary of a contender at a body size, against one
/// baseline.
#[derive(serde::Serialize)]
pub(crate) struct CsvRow {
    body_bytes: u64,
    contender: String,
    program: String,
    repetitions: usize,
    requests_per_s_median: f64,
    requests_per_s_min: f64,
    requests_per_s_max: f64,
    measure: &'static str,
    requests_per_cpu_s_median: f64,
    requests_per_cpu_s_min: f64,
    requests_per_cpu_s_max: f64,
    baseline: String,
    ratio_median: Option<f64>,
    ratio_min: Option<f64>,
    ratio_max: Option<f64>,
    errors: u64,
}

/// The peers report kind.
struct Peers<'a> {
    dir: &'a PeersDir,
}

impl Report for Peers<'_> {
    type Row = CsvRow;

    /// HTML adds the reading note, a heading and a plot per body size and
    /// the command lines; Markdown has the tables alone.
    fn page(&self, format: Format) -> Result<Page, ReportError> {
        let dir = self.dir;
        let e = &dir.info.experiment;
        let html = format == Format::Html;
        let rows = summarize(dir);
        let mut blocks = vec![Block::Facts(facts(dir))];
        if html {
            blocks.push(Block::Note(format!(
                "Medians across repetitions with the smallest and largest in brackets. \
                 The ratio divides a contender's {} by the baseline's of the same repetition and body, \
                 then takes the median and range of those quotients. Contenders alternate within a \
                 repetition, so slow drifts of a shared machine fall on all of them.",
                measure_text(e.measure)
            )));
        }
        let mut sizes: Vec<u64> = rows.iter().map(|r| r.body_bytes).collect();
        sizes.dedup();
        for size in sizes {
            let at: Vec<&PeerRow> = rows.iter().filter(|r| r.body_bytes == size).collect();
            if html {
                blocks.push(Block::Heading(format!("{} body", size_text(size))));
            }
            blocks.push(Block::Table(export::Table {
                head: headings(dir, size),
                rows: at
                    .iter()
                    .map(|r| {
                        cells(r)
                            .into_iter()
                            .enumerate()
                            .map(|(i, text)| Cell {
                                text,
                                // A ratio to another contender's baseline.
                                strong: i >= 7
                                    && i < 7 + r.ratios.len()
                                    && r.ratios[i - 7].0 != r.contender,
                            })
                            .collect()
                    })
                    .collect(),
                labels: 2,
                // The heading says the body size.
                html_skip: 1,
                empty: None,
            }));
            if html {
                blocks.push(Block::Figure {
                    svg: dot_plot(
                        &format!("{}, {} body", measure_text(e.measure), size_text(size)),
                        &measure_text(e.measure),
                        &at,
                    )?,
                    caption: "Bars: median; dots: each repetition; whiskers: smallest to largest."
                        .into(),
                });
            }
        }
        if html {
            blocks.push(Block::Heading("Commands".into()));
            for (id, cmds) in commands(dir) {
                blocks.push(Block::Commands {
                    label: Some(id),
                    lines: cmds
                        .into_iter()
                        .map(|(role, c)| (Some(role.name().to_string()), c))
                        .collect(),
                });
            }
        }
        blocks.push(Block::Missing(missing(dir)));
        Ok(summary::page(
            &e.title,
            &e.description,
            summary::FIGURE_STYLE,
            blocks,
        ))
    }

    fn rows(&self) -> Result<Vec<CsvRow>, ReportError> {
        let measure = self.dir.info.experiment.measure;
        let mut out = Vec::new();
        for r in summarize(self.dir) {
            let none = [(String::new(), None)];
            let ratios: &[(String, Option<Spread>)] = if r.ratios.is_empty() {
                &none
            } else {
                &r.ratios
            };
            let (rps, rpc) = (r.requests_per_s.rounded(), r.requests_per_cpu_s.rounded());
            for (baseline, ratio) in ratios {
                let ratio = ratio.map(Spread::rounded);
                out.push(CsvRow {
                    body_bytes: r.body_bytes,
                    contender: r.contender.clone(),
                    program: r.what.clone(),
                    repetitions: r.repetitions,
                    requests_per_s_median: rps.median,
                    requests_per_s_min: rps.min,
                    requests_per_s_max: rps.max,
                    measure: measure.name(),
                    requests_per_cpu_s_median: rpc.median,
                    requests_per_cpu_s_min: rpc.min,
                    requests_per_cpu_s_max: rpc.max,
                    baseline: baseline.clone(),
                    ratio_median: ratio.map(|s| s.median),
                    ratio_min: ratio.map(|s| s.min),
                    ratio_max: ratio.map(|s| s.max),
                    errors: r.errors,
                });
            }
        }
        Ok(out)
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

/// Axis numbers: whole, with a `k` for thousands (20k, 125k, 1.5k), never a
/// trailing `.0`.
fn axis_number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let k = v / 1000.0;
        if (k - k.round()).abs() < 1e-9 {
            format!("{}k", k.round() as i64)
        } else {
            format!("{}k", (k * 10.0).round() / 10.0)
        }
    } else {
        format!("{}", v.round() as i64)
    }
}

/// A bar per contender (its median), whiskers from smallest to largest, a
/// dot per repetition; the y axis starts at zero.
fn dot_plot(title: &str, y_desc: &str, rows: &[&PeerRow]) -> Result<String, ReportError> {
    let n = rows.len().max(1);
    let top = rows
        .iter()
        .flat_map(|r| r.per_rep.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.15;
    let names: Vec<String> = rows.iter().map(|r| r.contender.clone()).collect();
    let mut svg = String::new();
    {
        // Room for the longest name under each bar (about 7 px a
        // character at 12 px), so long contender names do not run into
        // each other; wider than the page is scaled down with the labels.
        let longest = names.iter().map(|s| s.chars().count()).max().unwrap_or(0) as u32;
        let slot = (7 * longest + 16).max(110);
        let width = (160 + slot * n as u32).clamp(480, 1300);
        let root = SVGBackend::with_string(&mut svg, (width, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..top)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    names.get(*i).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .y_label_formatter(&|v| axis_number(*v))
            .x_desc("contender")
            .y_desc(y_desc)
            .label_style(("sans-serif", 13))
            .x_label_style(("sans-serif", 12))
            .light_line_style(WHITE)
            .draw()
            .map_err(plot_err)?;
        let bar = RGBColor(120, 160, 210);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let mut rect = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), r.requests_per_cpu_s.median),
                    ],
                    bar.filled(),
                );
                rect.set_margin(0, 0, 18, 18);
                rect
            }))
            .map_err(plot_err)?;
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                PathElement::new(
                    vec![
                        (SegmentValue::CenterOf(i), r.requests_per_cpu_s.min),
                        (SegmentValue::CenterOf(i), r.requests_per_cpu_s.max),
                    ],
                    BLACK.stroke_width(2),
                )
            }))
            .map_err(plot_err)?;
        chart
            .draw_series(rows.iter().enumerate().flat_map(|(i, r)| {
                r.per_rep
                    .iter()
                    .map(move |v| Circle::new((SegmentValue::CenterOf(i), *v), 4, BLACK.filled()))
            }))
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(whole(1234567.4), "1,234,567");
        assert_eq!(axis_number(20000.0), "20k");
        assert_eq!(axis_number(1500.0), "1.5k");
        assert_eq!(axis_number(500.0), "500");
        assert_eq!(size_text(10240), "10 KiB");
        assert_eq!(size_text(128), "128 B");
    }

    /// The results directory of experiment `text` before any point.
    fn dir_without_points(text: &str) -> PeersDir {
        let experiment = connlab_lab::PeersExperiment::from_toml(text, "t.toml").unwrap();
        PeersDir {
            info: connlab_lab::PeersInfo {
                schema: connlab_lab::PEERS_SWEEP_SCHEMA.into(),
                experiment,
                quick: false,
                environment: connlab_os::Environment::capture(),
                peer_versions: Vec::new(),
                started_unix_s: 0.0,
                points_total: 0,
            },
            points: Vec::new(),
        }
    }

    #[test]
    fn a_connlab_load_contender_names_its_io_path() {
        let text = "kind = \"peers\"\nname = \"t\"\ntitle = \"t\"\nmeasure = \"client\"\n\
                    baseline = \"a\"\n[workload]\nconnections = 10\nbody_sizes = [128]\n\
                    duration = \"1s\"\n[server]\nkind = \"nginx-return\"\n\
                    [[contender]]\nname = \"a\"\nkind = \"connlab-load\"\n\
                    [[contender]]\nname = \"b\"\nkind = \"connlab-load\"\nio = \"uring\"\n";
        let dir = dir_without_points(text);
        assert_eq!(what(&dir, "a"), "connlab-load");
        assert_eq!(what(&dir, "b"), "connlab-load --io uring");
    }

    /// HAProxy has no `--splice` flag: its contender names the options.
    #[test]
    fn a_splicing_haproxy_names_its_options() {
        let text = include_str!("../../../experiments/peers-gateway-vs-haproxy.toml");
        let dir = dir_without_points(text);
        assert_eq!(
            what(&dir, "haproxy-splice"),
            "haproxy splice-request/-response (1 thread)"
        );
        assert_eq!(what(&dir, "proxy-splice"), "connlab-gateway --splice");
    }

    /// A relay contender's flags are named with the program they go to.
    #[test]
    fn a_relay_contender_names_each_programs_flags() {
        let text = include_str!("../../../experiments/peers-relay-vs-haproxy.toml");
        let dir = dir_without_points(text);
        assert_eq!(what(&dir, "relay"), "singleip-relay");
        assert_eq!(
            what(&dir, "relay-splice"),
            "singleip-relay app-node --splice"
        );
        assert_eq!(
            what(&dir, "relay-iosplice-nolimit"),
            "singleip-relay io-server --send-limit off --splice"
        );
        assert_eq!(
            what(&dir, "relay-splice-v1"),
            "singleip-relay io-server --max-version 1 app-node --splice"
        );
    }
}
