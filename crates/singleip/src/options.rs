//! The front end's configurations built from command-line values
//! (`connlab singleip io-server` and `app-node`): every range check and
//! combination rule, so any front end of this crate refuses the same
//! values with the same words. Errors are [`Error::Config`] naming the flag.

use crate::access::{Access, ConnectRule, PortRange};
use crate::node::{NodeConfig, Outbound};
use crate::server::{SendBuffer, SendLimit, ServerConfig};
use crate::sizing::ShareSizing;
use crate::stats::ServerStats;
use crate::{load_key, Error};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What `connlab singleip io-server` was given, before checking.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Cluster addresses (`--listen`).
    pub listen: Vec<SocketAddr>,
    /// Where nodes connect (`--nodes`).
    pub nodes: SocketAddr,
    /// The key file (`--key`).
    pub key: PathBuf,
    /// `--send-limit`, bytes; `None` for `off`.
    pub send_limit: Option<u64>,
    /// `--send-buffer`.
    pub send_buffer: SendBufferChoice,
    /// `--quantum`, bytes.
    pub quantum: u64,
    /// `--window`, bytes.
    pub window: u64,
    /// `--max-pending-nodes`.
    pub max_pending_nodes: u32,
    /// `--max-pending-per-source`.
    pub max_pending_per_source: u32,
    /// `--max-listens-per-node`.
    pub max_listens_per_node: u32,
    /// `--auth-timeout`.
    pub auth_timeout: Duration,
    /// `--node-read-budget`, bytes.
    pub node_read_budget: u64,
    /// `--max-node-queue`, bytes.
    pub max_node_queue: u64,
    /// `--max-frames-per-window`.
    pub max_frames_per_window: u32,
    /// `--allow-connect`.
    pub allow_connect: Vec<ConnectRule>,
    /// `--allow-listen`.
    pub allow_listen: Vec<PortRange>,
    /// `--max-version`.
    pub max_version: u16,
    /// `--splice`.
    pub splice: bool,
}

impl ServerOptions {
    /// The checked configuration (the key file read last but one check).
    pub fn config(&self) -> Result<ServerConfig, Error> {
        check_listeners(&self.listen, self.nodes)?;
        let send_limit = send_limit(self.send_limit, self.send_buffer)?;
        if !(512..=(16 << 20)).contains(&self.quantum) {
            return Err(config(format!(
                "--quantum {}: between 512 B and 16 MiB",
                self.quantum
            )));
        }
        let mut c = ServerConfig::new(self.listen.clone(), self.nodes, key(&self.key)?);
        c.send_limit = send_limit;
        c.quantum = self.quantum;
        c.initial_window = window(self.window)?;
        c.max_pending_nodes = self.max_pending_nodes as usize;
        c.max_pending_per_source = self.max_pending_per_source as usize;
        c.max_listens_per_node = self.max_listens_per_node as usize;
        if self.auth_timeout.is_zero() {
            return Err(config("--auth-timeout must be above 0".into()));
        }
        c.handshake_timeout = self.auth_timeout;
        c.node_read_budget = bounded("--node-read-budget", self.node_read_budget, 1024, 1 << 30)?;
        // At least a window's worth of DATA plus room for control frames.
        c.max_node_queue = bounded("--max-node-queue", self.max_node_queue, 64 * 1024, 1 << 40)?;
        c.max_frames_per_window = self.max_frames_per_window as usize;
        c.max_version = self.max_version;
        c.splice = self.splice;
        c.access = Access {
            connect: self.allow_connect.clone(),
            listen: self.allow_listen.clone(),
        };
        Ok(c)
    }
}

/// What `connlab singleip app-node` was given, before checking.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The I/O server's node address (`--io-server`).
    pub io_server: SocketAddr,
    /// The key file (`--key`).
    pub key: PathBuf,
    /// The local server (`--forward`).
    pub forward: SocketAddr,
    /// Cluster ports (`--port`); none: the port of `forward`.
    pub ports: Vec<u16>,
    /// `--node-id`.
    pub node_id: u32,
    /// `--max-streams`.
    pub max_streams: u32,
    /// `--window`, bytes.
    pub window: u64,
    /// `--connect`.
    pub outbound: Vec<Outbound>,
    /// `--splice`.
    pub splice: bool,
    /// `--max-version`.
    pub max_version: u16,
    /// `--retries`.
    pub retries: u32,
}

impl NodeOptions {
    /// The checked configuration.
    pub fn config(&self) -> Result<NodeConfig, Error> {
        let ports = if self.ports.is_empty() {
            vec![self.forward.port()]
        } else {
            self.ports.clone()
        };
        let mut c = NodeConfig::new(self.io_server, key(&self.key)?, ports, self.forward);
        c.node_id = self.node_id;
        c.max_streams = self.max_streams;
        c.initial_window = window(self.window)?;
        c.outbound = self.outbound.clone();
        c.splice = self.splice;
        c.max_version = self.max_version;
        c.refused_retries = self.retries;
        Ok(c)
    }

    /// `e` with a hint for a refused cluster port, naming the flag that
    /// chooses it: `--port` (default: the port of `--forward`, which is
    /// often what is taken when the local server and the I/O server share
    /// an address). Other errors are returned as they are.
    pub fn port_hint(&self, e: Error) -> Result<String, Error> {
        let Error::PortRefused { port, source, .. } = &e else {
            return Err(e);
        };
        let why = if source.raw_os_error() == Some(libc::EADDRINUSE) {
            format!("port {port} is already in use on the cluster address")
        } else {
            format!("the I/O server may not serve port {port} (its --allow-listen)")
        };
        let default = if self.ports.is_empty() {
            " (without --port the cluster port is the port of --forward)"
        } else {
            ""
        };
        Ok(format!(
            "{e}\nhint: {why}; --port P chooses the cluster port this node serves{default}"
        ))
    }
}

fn config(text: String) -> Error {
    Error::Config(text)
}

/// The key file; a problem with it names `--key`.
fn key(path: &std::path::Path) -> Result<connlab_proto::xfer::AuthKey, Error> {
    load_key(path).map_err(|e| config(format!("--key: {e}")))
}

/// `--window`: between 1 KiB and the protocol's largest window.
fn window(bytes: u64) -> Result<u32, Error> {
    u32::try_from(bytes)
        .ok()
        .filter(|w| (1024..=connlab_proto::xfer::MAX_WINDOW).contains(w))
        .ok_or_else(|| config(format!("--window {bytes}: between 1 KiB and 2 GiB - 1")))
}

/// A size flag within `min..=max` bytes.
fn bounded(flag: &str, bytes: u64, min: u64, max: u64) -> Result<usize, Error> {
    if !(min..=max).contains(&bytes) {
        return Err(config(format!(
            "{flag} {bytes}: between {min} B and {max} B"
        )));
    }
    usize::try_from(bytes).map_err(|_| config(format!("{flag} {bytes}: too large here")))
}

/// Two listeners on one address: the second bind would fail with "Address
/// already in use", which reads like another program's fault (issue 29).
/// Port 0 (any free port) never collides.
pub fn check_listeners(listen: &[SocketAddr], nodes: SocketAddr) -> Result<(), Error> {
    let overlaps = |a: SocketAddr, b: SocketAddr| {
        a.port() != 0
            && a.port() == b.port()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    for (i, &a) in listen.iter().enumerate() {
        if overlaps(a, nodes) {
            return Err(config(format!(
                "--listen {a} and --nodes {nodes} are the same address: clients and nodes need \
                 a listener each"
            )));
        }
        if let Some(&b) = listen[..i].iter().find(|&&b| overlaps(a, b)) {
            return Err(config(format!(
                "--listen {a} is given twice (or overlaps --listen {b})"
            )));
        }
    }
    Ok(())
}

/// `--send-buffer`, read: how a limited socket's send buffer is sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SendBufferChoice {
    /// `share` or `share:H`: rate share, with headroom H (1.05 to 16).
    Share(Option<f64>),
    /// `4x`: four times the unsent limit, fixed.
    FourX,
    /// `auto`: kernel autotuning.
    Auto,
    /// BYTES, fixed (4 KiB to 256 MiB).
    Bytes(u64),
}

/// The send limit of `--send-limit` (bytes, `None` for `off`) with
/// `--send-buffer` applied.
pub fn send_limit(
    limit: Option<u64>,
    buffer: SendBufferChoice,
) -> Result<Option<SendLimit>, Error> {
    let Some(bytes) = limit else {
        if buffer != SendBufferChoice::Share(None) {
            return Err(config(
                "--send-buffer applies with a --send-limit, not with --send-limit off".into(),
            ));
        }
        return Ok(None);
    };
    let bytes = u32::try_from(bytes)
        .ok()
        .filter(|b| (1..=(64 << 20)).contains(b))
        .ok_or_else(|| {
            config(format!(
                "--send-limit {bytes}: between 1 B and 64 MiB, or 'off'"
            ))
        })?;
    let mut limit = SendLimit::from_bytes(bytes);
    limit.sndbuf = match buffer {
        SendBufferChoice::Share(None) => limit.sndbuf,
        SendBufferChoice::Share(Some(headroom)) => {
            if !(1.05..=16.0).contains(&headroom) {
                return Err(config(format!(
                    "--send-buffer \"share:{headroom}\": share:H takes a headroom H between 1.05 and 16"
                )));
            }
            let mut rules = ShareSizing::for_unsent_limit(bytes);
            rules.headroom = headroom;
            SendBuffer::Share(rules)
        }
        SendBufferChoice::FourX => SendLimit::fixed_4x(bytes).sndbuf,
        SendBufferChoice::Auto => SendBuffer::Auto,
        SendBufferChoice::Bytes(b) => SendBuffer::Fixed(
            usize::try_from(b)
                .ok()
                .filter(|b| (4096..=(256 << 20)).contains(b))
                .ok_or_else(|| config(format!("--send-buffer {b}: between 4 KiB and 256 MiB")))?,
        ),
    };
    Ok(Some(limit))
}

/// How `--send-buffer` came out, for the ready line.
impl fmt::Display for SendBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendBuffer::Auto => f.write_str("auto"),
            SendBuffer::Fixed(bytes) => write!(f, "{bytes} B"),
            SendBuffer::Share(r) => write!(
                f,
                "share ({}x the fastest rate x RTT + {} B, {}-{} B, every {:?})",
                r.headroom, r.unsent, r.floor, r.ceiling, r.period
            ),
        }
    }
}

/// `--connect LOCAL=DEST`: two socket addresses.
impl std::str::FromStr for Outbound {
    type Err = String;

    fn from_str(text: &str) -> Result<Outbound, String> {
        let (listen, connect) = text.split_once('=').ok_or_else(|| {
            format!("{text:?}: expected LOCAL=DEST, e.g. 127.0.0.1:9000=203.0.113.7:443")
        })?;
        let addr = |what: &str, t: &str| {
            t.trim()
                .parse::<SocketAddr>()
                .map_err(|e| format!("{what} {t:?}: {e} (an IP:PORT)"))
        };
        Ok(Outbound {
            listen: addr("LOCAL", listen)?,
            connect: addr("DEST", connect)?,
        })
    }
}

impl ServerStats {
    /// The limits the run hit, each as `N what` naming its flag: nodes
    /// over the pending caps or past the auth timeout, reads stopped at
    /// the budget, denied CONNECTs and LISTENs, merged payloads, shed
    /// clients. Empty when none was hit.
    pub fn limits_hit(&self) -> Vec<String> {
        [
            (self.nodes_over_pending_cap, "over --max-pending-nodes"),
            (self.nodes_over_source_cap, "over --max-pending-per-source"),
            (self.nodes_auth_timeout, "past --auth-timeout"),
            (
                self.node_read_budget_hits,
                "reads stopped at --node-read-budget",
            ),
            (self.nodes_dropped_queue, "nodes over --max-node-queue"),
            (self.connects_denied, "CONNECTs denied (--allow-connect)"),
            (self.listens_denied, "LISTENs denied (--allow-listen)"),
            (
                self.frames_merged,
                "payloads merged (--max-frames-per-window)",
            ),
            (self.shed, "connections reset at once: out of descriptors"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn listeners_on_one_address_are_refused_by_flag() {
        let nodes = addr("127.0.0.1:7000");
        let e = check_listeners(&[addr("0.0.0.0:7000")], nodes).unwrap_err();
        assert!(e.to_string().contains("same address"), "{e}");
        let twice = [addr("127.0.0.1:80"), addr("127.0.0.1:80")];
        let e = check_listeners(&twice, nodes).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let any = [addr("127.0.0.1:0"), addr("127.0.0.1:0")];
        assert!(check_listeners(&any, addr("127.0.0.1:0")).is_ok());
    }

    #[test]
    fn send_buffer_applies_to_the_send_limit() {
        use SendBufferChoice::*;
        const KIB16: Option<u64> = Some(16 * 1024);
        assert_eq!(send_limit(None, Share(None)).unwrap(), None);
        assert!(send_limit(None, Auto).is_err());
        let l = send_limit(KIB16, Auto).unwrap().unwrap();
        assert_eq!((l.notsent_lowat, l.sndbuf), (16 * 1024, SendBuffer::Auto));
        let l = send_limit(KIB16, FourX).unwrap().unwrap();
        assert_eq!(l.sndbuf, SendBuffer::Fixed(64 * 1024));
        let l = send_limit(KIB16, Share(Some(2.0))).unwrap().unwrap();
        assert!(matches!(l.sndbuf, SendBuffer::Share(r) if r.headroom == 2.0));
        assert!(send_limit(KIB16, Share(Some(99.0))).is_err());
        assert!(send_limit(KIB16, Bytes(1024)).is_err());
        assert!(send_limit(Some(65 << 20), Share(None)).is_err());
        assert_eq!(SendBuffer::Fixed(4096).to_string(), "4096 B");
    }

    #[test]
    fn outbound_reads_local_equals_dest() {
        let o: Outbound = "127.0.0.1:9000=203.0.113.7:443".parse().unwrap();
        assert_eq!(o.connect, addr("203.0.113.7:443"));
        assert!("127.0.0.1:9000".parse::<Outbound>().is_err());
        assert!("x=203.0.113.7:443".parse::<Outbound>().is_err());
    }
}
