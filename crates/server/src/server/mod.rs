//! [`Server`]: bind, then serve with the chosen engine until shutdown, then
//! report [`ServerStats`].

use crate::config::{AcceptMode, EngineKind, ServerConfig};
use crate::connection::SessionTemplate;
use crate::counters::Counters;
use crate::deadline::Limits;
use crate::engine::{self, RunContext};
use crate::listener::{Listener, Reserves};
use crate::stats::{RunFacts, ServerStats};
use connlab_os::{CpuTimes, NofileLimit, OsError, SharedMem, Shutdown};
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

mod workers;

/// Why a server could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is inconsistent (for example edge-triggered without epoll).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The listening socket could not be set up.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        source: io::Error,
    },
    /// An OS facility (limits, pinning, shared memory) failed.
    #[error(transparent)]
    Os(#[from] OsError),
    /// The engine's event loop failed as a whole (not one connection).
    #[error("{engine} engine failed: {source}")]
    Engine {
        /// The engine.
        engine: EngineKind,
        /// The error.
        source: io::Error,
    },
}

/// A bound server, ready to run.
pub struct Server {
    config: ServerConfig,
    /// One listener, or one per worker (`SO_REUSEPORT`).
    listeners: Vec<Listener>,
    local_addr: SocketAddr,
    counters: SharedMem<Counters>,
    nofile: NofileLimit,
}

impl Server {
    /// Raises the open-files limit, pins the process if asked, and binds.
    pub fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        if config.edge_triggered && config.engine != EngineKind::Epoll {
            return Err(ServerError::Config(format!(
                "edge-triggered readiness needs the epoll engine, not {}",
                config.engine
            )));
        }
        if config.workers == 0 {
            return Err(ServerError::Config("--workers must be at least 1".into()));
        }
        if config.workers > 1 && !config.engine.has_workers() {
            return Err(ServerError::Config(format!(
                "--workers applies to the event engines (select, poll, epoll, uring, rtsig); {} \
                 already uses a thread or process per connection",
                config.engine
            )));
        }
        let nofile = connlab_os::raise_nofile_limit()?;
        // With several workers each loop is pinned to its own CPU of the
        // list when it starts; the process keeps the whole list.
        if let Some(cpus) = &config.cpus {
            connlab_os::pin_current_process(cpus)?;
        }
        let bind_err = |source| ServerError::Bind {
            addr: config.listen,
            source,
        };
        let reuse_port = config.workers > 1 && config.accept == AcceptMode::Reuseport;
        // One reserve descriptor per loop, in one pool (see `listener`).
        let reserves = Reserves::new(config.workers);
        let first = Listener::bind(config.listen, config.backlog, reuse_port, &reserves)
            .map_err(bind_err)?;
        let local_addr = first.local_addr().map_err(bind_err)?;
        let mut listeners = vec![first];
        if reuse_port {
            // The others bind the port the first resolved.
            for _ in 1..config.workers {
                listeners.push(
                    Listener::bind(local_addr, config.backlog, true, &reserves)
                        .map_err(bind_err)?,
                );
            }
        }
        Ok(Server {
            listeners,
            local_addr,
            counters: SharedMem::new(Counters::default())?,
            nofile,
            config,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The open-files limit found and set at bind time.
    pub fn nofile(&self) -> NofileLimit {
        self.nofile
    }

    /// Serves until `shutdown` trips, closes every connection and returns the statistics.
    pub fn run(self, shutdown: &Shutdown) -> Result<ServerStats, ServerError> {
        let Server {
            config,
            listeners,
            local_addr,
            counters,
            nofile,
        } = self;
        let started = Instant::now();
        let cpu_before = CpuTimes::self_and_children();
        // The affinity `bind` pinned (or inherited), which every thread and
        // child starts from; empty if the kernel does not say.
        let cpus_allowed = connlab_os::current_affinity()
            .map(|l| l.cpus().to_vec())
            .unwrap_or_default();
        let profile = config
            .profile_poll
            .then(|| std::sync::Mutex::new(crate::profile::PollProfile::new()));
        let template = SessionTemplate {
            protocol: config.protocol,
            config: connlab_proto::ServerConfig {
                max_message: config.max_message,
                files: config.files,
            },
            limits: Limits {
                header: config.header_timeout.filter(|d| !d.is_zero()),
                idle: config.idle_timeout.filter(|d| !d.is_zero()),
            },
        };
        let engine_err = |source| ServerError::Engine {
            engine: config.engine,
            source,
        };
        let per_worker = if config.workers == 1 {
            let listener = listeners
                .into_iter()
                .next()
                .ok_or_else(|| engine_err(io::Error::other("no listener was bound")))?;
            let ctx = RunContext {
                listener,
                counters: &counters,
                shutdown,
                profile: profile.as_ref(),
                template,
                exclusive_accept: false,
                start: None,
            };
            engine::build(&config).serve(ctx).map_err(engine_err)?;
            Vec::new()
        } else {
            let per_worker =
                workers::serve(&config, listeners, shutdown, profile.as_ref(), template)
                    .map_err(engine_err)?;
            for (_, c) in &per_worker {
                counters.absorb(c);
            }
            per_worker.into_iter().map(|(w, _)| w).collect()
        };
        let facts = RunFacts {
            engine: config.engine.name().to_string(),
            edge_triggered: config.edge_triggered,
            protocol: config.protocol.name().to_string(),
            listen: local_addr.to_string(),
            cpu: CpuTimes::self_and_children().since(&cpu_before),
            wall_s: started.elapsed().as_secs_f64(),
            nofile,
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            cpus_allowed,
        };
        let mut stats = ServerStats::collect(&counters, facts);
        if !per_worker.is_empty() {
            stats.workers = per_worker.len();
            stats.accept = Some(config.accept.name());
            stats.imbalance = crate::stats::imbalance(&per_worker);
            stats.per_worker = per_worker;
        }
        if let Some(p) = profile {
            let p = p.into_inner().unwrap_or_else(|e| e.into_inner());
            stats.profile_poll = Some(p.summaries().is_some());
            if let Some(t) = p.summaries() {
                stats.poll_call_us = Some(t.call);
                stats.poll_call_cpu_us = Some(t.call_cpu);
                stats.cycle_us = Some(t.cycle);
            }
        }
        Ok(stats)
    }
}
