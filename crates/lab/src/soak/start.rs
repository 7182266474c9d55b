//! Starting the soak's components in their fixed order.

use super::{banner_addr, Class, Component, Soak, Targets};
use anyhow::{anyhow, Context};
use std::fs::File;
use std::net::SocketAddr;

impl Soak<'_> {
    /// Starts every component; returns the HTTP front ends and the raw
    /// (non-HTTP) ports for the hostile clients.
    pub(super) fn start_components(&mut self) -> anyhow::Result<(Targets, Targets)> {
        let serve = |listen: &str| -> Vec<String> {
            [
                "serve",
                "--protocol",
                "http",
                "--listen",
                listen,
                "--header-timeout",
                "2s",
                "--idle-timeout",
                "5s",
            ]
            .map(String::from)
            .to_vec()
        };
        let mut backends = Vec::new();
        for name in ["gw-backend-1", "gw-backend-2", "si-backend"] {
            let mut c = Component::new(name, "backend", serve("127.0.0.1:0"), "listening on ");
            let line = c.start(self.env)?;
            let addr = banner_addr(&line, "listening on ")?;
            // Restarts come back on the same port.
            c.args = serve(&addr.to_string());
            backends.push(addr);
            self.components.push(c);
        }
        let mut gw_args: Vec<String> = [
            "gateway",
            "--mode",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--policy",
            "round-robin",
            "--health-interval",
            "200ms",
            "--health-timeout",
            "200ms",
            "--idle-timeout",
            "5s",
            "--io",
            self.plan.gateway_io,
        ]
        .map(String::from)
        .to_vec();
        for b in &backends[..2] {
            gw_args.push("--backend".into());
            gw_args.push(b.to_string());
        }
        let mut gw = Component::new("gateway", "gateway", gw_args, "gateway: ");
        let line = gw.start(self.env)?;
        // "gateway: proxy mode, ADDR -> 2 backends, ..."
        let gw_addr = line
            .split(", ")
            .nth(1)
            .and_then(|s| s.split(" -> ").next())
            .and_then(|s| s.parse::<SocketAddr>().ok())
            .ok_or_else(|| anyhow!("no address in the gateway's ready line {line:?}"))?;
        self.components.push(gw);

        let key = self.env.work.join("cluster.key");
        let mut bytes = [0u8; 32];
        File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .context("reading /dev/urandom for the cluster key")?;
        connlab_os::files::write_atomic(&key, bytes)
            .with_context(|| format!("writing {}", key.display()))?;
        let key_s = key.display().to_string();
        let io_args: Vec<String> = [
            "singleip",
            "io-server",
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            "127.0.0.1:0",
            "--key",
            &key_s,
        ]
        .map(String::from)
        .to_vec();
        let mut io = Component::new(
            "io-server",
            "io-server",
            io_args,
            "singleip: io-server ready",
        );
        let line = io.start(self.env)?;
        let field = |name: &str| -> anyhow::Result<SocketAddr> {
            line.split(name)
                .nth(1)
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| anyhow!("no {name}address in the io-server's ready line {line:?}"))
        };
        let (cluster, nodes) = (field("cluster ")?, field("nodes ")?);
        self.components.push(io);
        for id in 1..=2u32 {
            let args: Vec<String> = vec![
                "singleip".into(),
                "app-node".into(),
                "--io-server".into(),
                nodes.to_string(),
                "--key".into(),
                key_s.clone(),
                "--forward".into(),
                backends[2].to_string(),
                "--port".into(),
                cluster.port().to_string(),
                "--node-id".into(),
                id.to_string(),
            ];
            let mut node = Component::new(
                &format!("app-node-{id}"),
                "app-node",
                args,
                "singleip: app-node ready",
            );
            node.start(self.env)?;
            self.components.push(node);
        }
        self.classes = vec![
            Class {
                name: "gateway",
                target: gw_addr,
                path: "/bytes/1024",
                response_size: "1024",
            },
            Class {
                name: "singleip",
                target: cluster,
                path: "/bytes/16384",
                response_size: "16384",
            },
        ];
        for c in &self.classes {
            let path = self.env.work.join(format!("load-{}.log", c.name));
            self.load_logs
                .push(File::create(&path).with_context(|| format!("creating {}", path.display()))?);
        }
        (self.note)(&format!(
            "gateway {gw_addr} -> {} + {}; cluster {cluster} (nodes {nodes}) -> {}",
            backends[0], backends[1], backends[2]
        ));
        Ok((
            vec![("gateway".into(), gw_addr), ("singleip".into(), cluster)],
            vec![("singleip-nodes".into(), nodes)],
        ))
    }
}
