//! The peers experiment file: processes, contenders, workload, placement,
//! baselines, and the points of its sweep.

use super::PeersError;
use crate::sweep_file::{read_text, Bytes, Span, SweepFileError};
use crate::ClientIo;
use connlab_server::EngineKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// What a process is: which program, set up how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessKind {
    /// `connlab serve --protocol http --engine E` (server).
    ConnlabServe,
    /// nginx, one worker, answering from a `return 200 "..."` directive,
    /// its cheapest path (server).
    NginxReturn,
    /// nginx, one worker, serving a file with sendfile and open_file_cache (server).
    NginxStatic,
    /// `connlab gateway --mode proxy` (gateway).
    ConnlabGateway,
    /// HAProxy, mode tcp, one thread by default (gateway).
    Haproxy,
    /// The single-IP relay: `connlab singleip io-server` and one
    /// `connlab singleip app-node` forwarding to the server (gateway; the
    /// CPU of both counts).
    SingleipRelay,
    /// `connlab load --protocol http --rate max --depth 1`, its `--io` as
    /// the process says (client).
    ConnlabLoad,
    /// `wrk -t1` (client).
    Wrk,
}

impl ProcessKind {
    /// The role a process of this kind plays.
    pub fn role(self) -> Role {
        match self {
            ProcessKind::ConnlabServe | ProcessKind::NginxReturn | ProcessKind::NginxStatic => {
                Role::Server
            }
            ProcessKind::ConnlabGateway | ProcessKind::Haproxy | ProcessKind::SingleipRelay => {
                Role::Gateway
            }
            ProcessKind::ConnlabLoad | ProcessKind::Wrk => Role::Client,
        }
    }

    /// The name used in files (`nginx-return`).
    pub fn name(self) -> &'static str {
        match self {
            ProcessKind::ConnlabServe => "connlab-serve",
            ProcessKind::NginxReturn => "nginx-return",
            ProcessKind::NginxStatic => "nginx-static",
            ProcessKind::ConnlabGateway => "connlab-gateway",
            ProcessKind::Haproxy => "haproxy",
            ProcessKind::SingleipRelay => "singleip-relay",
            ProcessKind::ConnlabLoad => "connlab-load",
            ProcessKind::Wrk => "wrk",
        }
    }
}

/// The three roles of a peers experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Answers the requests.
    Server,
    /// Relays connections to the server.
    Gateway,
    /// Sends the requests.
    Client,
}

impl Role {
    /// `server`, `gateway` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Gateway => "gateway",
            Role::Client => "client",
        }
    }
}

/// One process set-up: a fixed role (`[server]`, `[gateway]`, `[client]`)
/// or, with its name, a contender.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// Which program, set up how.
    pub kind: ProcessKind,
    /// `connlab-serve`: the engine (required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
    /// `connlab-serve` with engine epoll: edge-triggered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edge_triggered: bool,
    /// `connlab-gateway`: relay with splice(2). `singleip-relay`: the app
    /// node splices the server's bytes to the I/O server (`--splice`).
    /// `haproxy`: `option splice-request` and `option splice-response`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub splice: bool,
    /// `wrk` (`-t`) and `haproxy` (`nbthread`): threads [default: 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// `connlab-load`: its `--io` [default: epoll]. `connlab-gateway`:
    /// `uring` runs the proxy with `--io uring`; `epoll` is its default
    /// epoll relay (user-space buffers, or pipes with `splice`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<ClientIo>,
    /// Extra command-line arguments appended to a connlab program's command
    /// (`connlab-serve`, `connlab-load`, `connlab-gateway`, and the I/O server
    /// of `singleip-relay`), e.g. `["--max-version", "1"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `singleip-relay`: extra arguments of its application node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_args: Vec<String>,
    /// `connlab-load` as the fixed client: run the load as this many
    /// processes (`--shard i/N`), shard i on the i-th CPU of the client's
    /// (cycled), their results merged (docs/shards.md) [default: 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
}

impl Process {
    /// Threads of wrk or HAProxy.
    pub fn thread_count(&self) -> u32 {
        self.threads.unwrap_or(1)
    }

    /// Checks the fields that belong to other kinds; `at` is the path of
    /// this table in the file (`contender[1]`, `server`).
    fn validate(&self, at: &str) -> Result<(), (String, String)> {
        let field = |f: &str| format!("{at}.{f}");
        let kind = self.kind;
        if kind == ProcessKind::ConnlabServe {
            match self.engine {
                None => return Err((field("engine"), "connlab-serve needs an engine".into())),
                Some(e) if self.edge_triggered && e != EngineKind::Epoll => {
                    return Err((
                        field("edge_triggered"),
                        format!("only with engine \"epoll\", not {:?}", e.name()),
                    ))
                }
                Some(_) => {}
            }
        } else {
            if self.engine.is_some() {
                return Err((
                    field("engine"),
                    format!("only for kind \"connlab-serve\", not {:?}", kind.name()),
                ));
            }
            if self.edge_triggered {
                return Err((
                    field("edge_triggered"),
                    format!("only for kind \"connlab-serve\", not {:?}", kind.name()),
                ));
            }
        }
        if self.io.is_some()
            && !matches!(kind, ProcessKind::ConnlabLoad | ProcessKind::ConnlabGateway)
        {
            return Err((
                field("io"),
                format!(
                    "only for kinds \"connlab-load\" and \"connlab-gateway\", not {:?}",
                    kind.name()
                ),
            ));
        }
        if self.splice && self.io == Some(ClientIo::Uring) {
            return Err((
                field("io"),
                "\"uring\" conflicts with splice = true (splice is an epoll relay)".into(),
            ));
        }
        if self.splice
            && !matches!(
                kind,
                ProcessKind::ConnlabGateway | ProcessKind::SingleipRelay | ProcessKind::Haproxy
            )
        {
            return Err((
                field("splice"),
                format!(
                    "only for kinds \"connlab-gateway\", \"singleip-relay\" and \"haproxy\", not {:?}",
                    kind.name()
                ),
            ));
        }
        if !self.args.is_empty()
            && !matches!(
                kind,
                ProcessKind::ConnlabServe
                    | ProcessKind::ConnlabLoad
                    | ProcessKind::ConnlabGateway
                    | ProcessKind::SingleipRelay
            )
        {
            return Err((
                field("args"),
                format!("only for connlab's own programs, not {:?}", kind.name()),
            ));
        }
        if !self.node_args.is_empty() && kind != ProcessKind::SingleipRelay {
            return Err((
                field("node_args"),
                format!("only for kind \"singleip-relay\", not {:?}", kind.name()),
            ));
        }
        for (key, list) in [("args", &self.args), ("node_args", &self.node_args)] {
            if let Some(i) = list.iter().position(|a| a.trim().is_empty()) {
                return Err((
                    format!("{at}.{key}[{i}]"),
                    "an empty argument (write each argument as one string)".into(),
                ));
            }
        }
        match self.shards {
            Some(_) if kind != ProcessKind::ConnlabLoad => {
                return Err((
                    field("shards"),
                    format!("only for kind \"connlab-load\", not {:?}", kind.name()),
                ))
            }
            Some(0) => return Err((field("shards"), "must be at least 1".into())),
            _ => {}
        }
        match self.threads {
            Some(_) if !matches!(kind, ProcessKind::Wrk | ProcessKind::Haproxy) => Err((
                field("threads"),
                format!(
                    "only for kinds \"wrk\" and \"haproxy\", not {:?}",
                    kind.name()
                ),
            )),
            Some(0) => Err((field("threads"), "must be at least 1".into())),
            _ => Ok(()),
        }
    }
}

/// One `[[contender]]`: a named process set-up in the role being compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contender {
    /// Short name: point ids, table rows, `baseline` (letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// Which program, set up how.
    pub kind: ProcessKind,
    /// See [`Process::engine`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
    /// See [`Process::edge_triggered`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edge_triggered: bool,
    /// See [`Process::splice`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub splice: bool,
    /// See [`Process::threads`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// See [`Process::io`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<ClientIo>,
    /// See [`Process::args`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// See [`Process::node_args`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_args: Vec<String>,
    /// Only these of the workload's body sizes (e.g. nginx `return` holds at
    /// most a few KiB in one configuration token) [default: all].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_sizes: Option<Vec<Bytes>>,
}

impl Contender {
    /// The process this contender runs.
    pub fn process(&self) -> Process {
        Process {
            kind: self.kind,
            engine: self.engine,
            edge_triggered: self.edge_triggered,
            splice: self.splice,
            threads: self.threads,
            io: self.io,
            args: self.args.clone(),
            node_args: self.node_args.clone(),
            shards: None,
        }
    }
}

/// `[workload]`: what the client asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Wire format; only `http` (every peer speaks it).
    #[serde(default = "http")]
    pub protocol: String,
    /// Keep-alive connections the client holds open.
    pub connections: u32,
    /// Response bodies (`GET /bytes/N`): one point per size.
    pub body_sizes: Vec<Bytes>,
    /// How long the client runs.
    pub duration: Span,
    /// Closed loop: one request outstanding per connection, the next sent
    /// when the response arrives (the only mode wrk has).
    #[serde(default = "yes")]
    pub closed_loop: bool,
}

fn http() -> String {
    "http".into()
}
fn yes() -> bool {
    true
}
fn five() -> u32 {
    5
}

/// `[placement]`: the CPU of each role (`sched_setaffinity` before exec, so
/// every thread and child stays there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// CPU of the server (nginx's master and worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
    /// CPU of the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_cpu: Option<usize>,
    /// CPU of the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<usize>,
    /// CPUs of the server, in the order its workers take them: a point
    /// with N workers pins the server to the first N (instead of
    /// `server_cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<Vec<usize>>,
    /// CPUs of the client (instead of `client_cpu`): wrk and connlab load
    /// run on all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpus: Option<Vec<usize>>,
}

impl Placement {
    /// The server's CPUs at `workers` workers (every listed CPU without a
    /// worker count); empty when not pinned.
    pub fn server_cpus_at(&self, workers: Option<u32>) -> Vec<usize> {
        match (&self.server_cpus, self.server_cpu) {
            (Some(list), _) => {
                let n = workers.map_or(list.len(), |w| w as usize);
                list.iter().copied().take(n).collect()
            }
            (None, Some(c)) => vec![c],
            (None, None) => Vec::new(),
        }
    }

    /// The client's CPUs; empty when not pinned.
    pub fn client_cpus(&self) -> Vec<usize> {
        match (&self.client_cpus, self.client_cpu) {
            (Some(list), _) => list.clone(),
            (None, Some(c)) => vec![c],
            (None, None) => Vec::new(),
        }
    }

    fn validate(&self, most_workers: Option<u32>) -> Result<(), (String, String)> {
        let bad = |f: &str, m: String| Err((format!("placement.{f}"), m));
        if self.server_cpus.is_some() && self.server_cpu.is_some() {
            return bad(
                "server_cpus",
                "give server_cpu or server_cpus, not both".into(),
            );
        }
        if self.client_cpus.is_some() && self.client_cpu.is_some() {
            return bad(
                "client_cpus",
                "give client_cpu or client_cpus, not both".into(),
            );
        }
        for (f, list) in [
            ("server_cpus", &self.server_cpus),
            ("client_cpus", &self.client_cpus),
        ] {
            let Some(list) = list else { continue };
            if list.is_empty() {
                return bad(f, "list at least one CPU".into());
            }
            let mut seen = BTreeSet::new();
            if let Some(c) = list.iter().find(|c| !seen.insert(**c)) {
                return bad(f, format!("CPU {c} is listed twice"));
            }
        }
        if let (Some(list), Some(n)) = (&self.server_cpus, most_workers) {
            if list.len() < n as usize {
                return bad(
                    "server_cpus",
                    format!(
                        "{} CPUs for up to {n} workers: list one CPU per worker",
                        list.len()
                    ),
                );
            }
        }
        Ok(())
    }
}

/// `[scaling]`: the workers axis. Every server contender runs at each
/// worker count (connlab serve `--workers N`, nginx `worker_processes N`),
/// pinned to the first N of `placement.server_cpus`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scaling {
    /// Worker counts, increasing; 1 should be among them (the fit's λ).
    pub workers: Vec<u32>,
    /// With it, after the closed-loop run a second, open-loop client run
    /// at this many requests per second (connlab load) measures the
    /// latency at a fixed offered load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_rate: Option<f64>,
    /// A point's client counts as its limit when it kept its CPUs busier
    /// than this share of the run [default: 0.9].
    #[serde(default = "client_busy_default")]
    pub client_busy: f64,
}

fn client_busy_default() -> f64 {
    0.9
}

impl Scaling {
    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |f: &str, m: String| Err((format!("scaling.{f}"), m));
        if self.workers.is_empty() {
            return bad("workers", "give at least one worker count".into());
        }
        if let Some(i) = self.workers.iter().position(|w| *w == 0 || *w > 1024) {
            return bad(
                &format!("workers[{i}]"),
                format!("{}: from 1 to 1024", self.workers[i]),
            );
        }
        if self.workers.windows(2).any(|w| w[0] >= w[1]) {
            return bad("workers", "list the counts once each, increasing".into());
        }
        if let Some(r) = self.latency_rate {
            if !(r.is_finite() && r > 0.0) {
                return bad("latency_rate", format!("{r}: a rate above 0 req/s"));
            }
        }
        if !(self.client_busy > 0.0 && self.client_busy <= 1.0) {
            return bad(
                "client_busy",
                format!("{}: a share above 0 and at most 1", self.client_busy),
            );
        }
        Ok(())
    }
}

/// `[quick]`: replacements for `connlab sweep --quick`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersQuick {
    /// Client run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Span>,
    /// Repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u32>,
    /// Body sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_sizes: Option<Vec<Bytes>>,
}

/// A peers experiment file (`kind = "peers"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersExperiment {
    /// Always `peers`.
    pub kind: PeersTag,
    /// Short name (results directory, report title).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// Longer description for the report.
    #[serde(default)]
    pub description: String,
    /// The role whose CPU time divides the completed requests.
    pub measure: Role,
    /// The contender every other is divided by: one name, or a list (each
    /// that runs at a body size gives a ratio there).
    pub baseline: Baseline,
    /// Repetitions of every point [default: 5]; contenders alternate within each.
    #[serde(default = "five")]
    pub repetitions: u32,
    /// What the client asks for.
    pub workload: Workload,
    /// CPUs of the roles.
    #[serde(default = "no_placement")]
    pub placement: Placement,
    /// The server when the contenders are not servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Process>,
    /// The gateway when the contenders are clients or servers behind one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Process>,
    /// The client when the contenders are not clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Process>,
    /// The contenders, in the order they run within a repetition.
    pub contender: Vec<Contender>,
    /// Replacements for `--quick`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick: Option<PeersQuick>,
    /// The workers axis, if any (server contenders only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
    /// Record a CPU profile of the measured role (`perf record -g`) per
    /// contender and body size, in one extra unmeasured run after the
    /// measured repetitions [default: false].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile: bool,
    /// `[validity]`: the gates every point must pass, the attempts, and the
    /// A/A control (`control`: a contender, by default the first baseline,
    /// or `"none"`).
    #[serde(default)]
    pub validity: crate::validity::ValidityLimits,
}

fn no_placement() -> Placement {
    Placement {
        server_cpu: None,
        gateway_cpu: None,
        client_cpu: None,
        server_cpus: None,
        client_cpus: None,
    }
}

/// `baseline = "nginx-return"` or `baseline = ["nginx-return", "nginx-static"]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Baseline {
    /// One contender.
    One(String),
    /// Contenders in order of preference.
    Many(Vec<String>),
}

impl Baseline {
    /// The names, in order of preference.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Baseline::One(n) => vec![n.as_str()],
            Baseline::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// The `kind = "peers"` tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeersTag {
    /// A peer comparison.
    Peers,
}

/// The processes of one point, role by role.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSetup {
    /// The server.
    pub server: Process,
    /// The gateway, if any.
    pub gateway: Option<Process>,
    /// The client.
    pub client: Process,
}

/// One point of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerParams {
    /// Contender name.
    pub contender: String,
    /// Response body bytes.
    pub body_bytes: u64,
    /// Repetition, from 1.
    pub repetition: u32,
    /// The server's workers, with a `[scaling]` axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The A/A control: the contender measured a second time in the same
    /// repetition and body size, as a point of its own (`-aa` ends its id).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control: bool,
}

impl PeerParams {
    /// `<contender>-<body>B-rep<k>` (`-aa` after it for the A/A control):
    /// the point's file name, stable across runs.
    /// With a workers axis, `-w<N>` follows the contender.
    pub fn id(&self) -> String {
        format!(
            "{}{}-{}B-rep{}{}",
            self.contender,
            self.workers.map_or(String::new(), |w| format!("-w{w}")),
            self.body_bytes,
            self.repetition,
            if self.control { "-aa" } else { "" }
        )
    }

    /// `<contender>-<body>B`: the file name of the profile of this
    /// contender at this body size ([`PeersExperiment::profile_plan`]).
    pub fn profile_id(&self) -> String {
        format!(
            "{}{}-{}B",
            self.contender,
            self.workers.map_or(String::new(), |w| format!("-w{w}")),
            self.body_bytes
        )
    }
}

impl PeersExperiment {
    /// Reads and validates an experiment file.
    pub fn from_file(path: &Path) -> Result<PeersExperiment, PeersError> {
        let text = read_text(path)?;
        PeersExperiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates experiment text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<PeersExperiment, PeersError> {
        crate::kind::expect(text, origin, &[crate::ExperimentKind::Peers])?;
        // Every error names the field and the line (crate::values::parse_toml).
        let exp: PeersExperiment = crate::values::parse_toml(text, origin)?;
        exp.validate().map_err(SweepFileError::in_field(origin))?;
        Ok(exp)
    }

    /// The role every contender plays.
    pub fn contender_role(&self) -> Role {
        self.contender
            .first()
            .map_or(Role::Server, |c| c.kind.role())
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |f: &str, m: String| Err((f.to_string(), m));
        if self.workload.protocol != "http" {
            return bad(
                "workload.protocol",
                format!(
                    "{:?}: only \"http\" (every peer speaks it)",
                    self.workload.protocol
                ),
            );
        }
        if !self.workload.closed_loop {
            return bad(
                "workload.closed_loop",
                "only closed loop is measured (wrk has no open loop)".into(),
            );
        }
        if self.workload.connections == 0 {
            return bad("workload.connections", "must be at least 1".into());
        }
        if self.workload.body_sizes.is_empty() {
            return bad("workload.body_sizes", "give at least one size".into());
        }
        if self.repetitions == 0 {
            return bad("repetitions", "must be at least 1".into());
        }
        if self.contender.len() < 2 {
            return bad("contender", "a comparison needs two or more".into());
        }
        let role = self.contender_role();
        let mut names = BTreeSet::new();
        for (i, c) in self.contender.iter().enumerate() {
            let at = format!("contender[{i}]");
            let ok_name = !c.name.is_empty()
                && c.name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch));
            if !ok_name {
                return bad(
                    &format!("{at}.name"),
                    format!("{:?}: use letters, digits, '_', '-' and '.'", c.name),
                );
            }
            if !names.insert(c.name.as_str()) {
                return bad(&format!("{at}.name"), format!("{:?} is used twice", c.name));
            }
            if c.kind.role() != role {
                return bad(
                    &format!("{at}.kind"),
                    format!(
                        "{:?} is a {}, but contender[0] is a {}: contenders fill one role",
                        c.kind.name(),
                        c.kind.role().name(),
                        role.name()
                    ),
                );
            }
            c.process().validate(&at)?;
            if let Some(sizes) = &c.body_sizes {
                if let Some(s) = sizes.iter().find(|s| !self.workload.body_sizes.contains(s)) {
                    return bad(
                        &format!("{at}.body_sizes"),
                        format!("{} B is not in workload.body_sizes", s.0),
                    );
                }
            }
        }
        let baselines = self.baseline.names();
        if baselines.is_empty() {
            return bad("baseline", "name at least one contender".into());
        }
        if let Some(b) = baselines.iter().find(|b| !names.contains(**b)) {
            return bad("baseline", format!("{b:?} names no contender"));
        }
        for (field, fixed, r) in [
            ("server", &self.server, Role::Server),
            ("gateway", &self.gateway, Role::Gateway),
            ("client", &self.client, Role::Client),
        ] {
            match fixed {
                Some(p) if r == role => {
                    return bad(
                        field,
                        format!("the contenders are {}s: give no fixed [{field}]", r.name()),
                    );
                }
                Some(p) if p.kind.role() != r => {
                    return bad(
                        &format!("{field}.kind"),
                        format!(
                            "{:?} is a {}, not a {field}",
                            p.kind.name(),
                            p.kind.role().name()
                        ),
                    );
                }
                Some(p) => p.validate(field)?,
                None if r != role && r != Role::Gateway => {
                    return bad(
                        field,
                        format!("missing: the contenders are {}s", role.name()),
                    );
                }
                None => {}
            }
        }
        if let Some(sc) = &self.scaling {
            sc.validate()?;
            if role != Role::Server {
                return bad(
                    "scaling",
                    format!(
                        "a workers axis needs server contenders, not {}s",
                        role.name()
                    ),
                );
            }
        }
        self.placement.validate(
            self.scaling
                .as_ref()
                .and_then(|s| s.workers.last().copied()),
        )?;
        self.validity.check()?;
        if let Some(Some(c)) = self.validity.control_choice() {
            if !names.contains(c) {
                let all: Vec<&str> = self.contender.iter().map(|c| c.name.as_str()).collect();
                return bad(
                    "validity.control",
                    format!(
                        "{c:?} names no contender ({}); name one of them, or \"none\"",
                        all.join(", ")
                    ),
                );
            }
        }
        if self.measure == Role::Gateway && role != Role::Gateway && self.gateway.is_none() {
            return bad("measure", "\"gateway\" but there is no gateway".into());
        }
        if let Some(q) = &self.quick {
            if q.repetitions == Some(0) {
                return bad("quick.repetitions", "must be at least 1".into());
            }
            if let Some(sizes) = &q.body_sizes {
                if sizes.is_empty() {
                    return bad("quick.body_sizes", "give at least one size".into());
                }
            }
        }
        Ok(())
    }

    /// The client run time (the `[quick]` one with `quick`).
    pub fn duration(&self, quick: bool) -> Duration {
        self.quick_field(quick, |q| q.duration)
            .unwrap_or(self.workload.duration)
            .0
    }

    fn quick_field<T>(&self, quick: bool, f: impl Fn(&PeersQuick) -> Option<T>) -> Option<T> {
        if quick {
            self.quick.as_ref().and_then(f)
        } else {
            None
        }
    }

    /// The contender measured twice per repetition as the A/A control, if
    /// any: the file's `validity.control`, else the first baseline.
    pub fn control_contender(&self) -> Option<&str> {
        match self.validity.control_choice() {
            Some(choice) => choice,
            None => self.baseline.names().first().copied(),
        }
    }

    /// Every point: repetitions outermost, then body sizes, then contenders
    /// in file order, so contenders alternate within a repetition. The A/A
    /// control ([`control_contender`](Self::control_contender)) runs last in
    /// each repetition and body size it runs at: its two measurements then
    /// lie as far apart as the first contender and the last, so its spread
    /// covers the drift between any two contenders of a repetition.
    pub fn plan(&self, quick: bool) -> Vec<PeerParams> {
        let reps = self
            .quick_field(quick, |q| q.repetitions)
            .unwrap_or(self.repetitions);
        let sizes = self
            .quick_field(quick, |q| q.body_sizes.clone())
            .unwrap_or_else(|| self.workload.body_sizes.clone());
        let control = self
            .control_contender()
            .and_then(|c| self.contender_named(c));
        let runs_at =
            |c: &Contender, size: &Bytes| c.body_sizes.as_ref().is_none_or(|s| s.contains(size));
        let workers: Vec<Option<u32>> = match &self.scaling {
            Some(s) => s.workers.iter().map(|w| Some(*w)).collect(),
            None => vec![None],
        };
        let mut plan = Vec::new();
        for repetition in 1..=reps {
            for size in &sizes {
                for &w in &workers {
                    let contenders = self.contender.iter().map(|c| (c, false));
                    for (c, control) in contenders.chain(control.map(|c| (c, true))) {
                        if !runs_at(c, size) {
                            continue;
                        }
                        plan.push(PeerParams {
                            contender: c.name.clone(),
                            body_bytes: size.0,
                            repetition,
                            workers: w,
                            control,
                        });
                    }
                }
            }
        }
        plan
    }

    /// The profile runs of `profile = true`: one per contender and body
    /// size, in plan order (the points of the first repetition, the A/A
    /// control's aside).
    pub fn profile_plan(&self, quick: bool) -> Vec<PeerParams> {
        self.plan(quick)
            .into_iter()
            .filter(|p| p.repetition == 1 && !p.control)
            .collect()
    }

    /// The baselines at a body size: those of [`PeersExperiment::baseline`]
    /// that run at that size, in the file's order.
    pub fn baselines_at(&self, body_bytes: u64) -> Vec<&str> {
        self.baseline
            .names()
            .into_iter()
            .filter(|b| {
                self.contender_named(b).is_some_and(|c| {
                    c.body_sizes
                        .as_ref()
                        .is_none_or(|s| s.contains(&Bytes(body_bytes)))
                })
            })
            .collect()
    }

    /// The contender named `name`.
    pub fn contender_named(&self, name: &str) -> Option<&Contender> {
        self.contender.iter().find(|c| c.name == name)
    }

    /// The processes of a point: the contender in its role, the fixed
    /// processes in the others.
    pub fn setup(&self, contender: &Contender) -> Option<PointSetup> {
        let own = contender.process();
        let pick = |role: Role, fixed: &Option<Process>| {
            if contender.kind.role() == role {
                Some(own.clone())
            } else {
                fixed.clone()
            }
        };
        Some(PointSetup {
            server: pick(Role::Server, &self.server)?,
            gateway: pick(Role::Gateway, &self.gateway),
            client: pick(Role::Client, &self.client)?,
        })
    }
}
