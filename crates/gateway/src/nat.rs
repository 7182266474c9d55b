//! `--mode nat`: the kernel balances. The gateway installs an nftables table
//! `connlab_gw_<pid>` in its network namespace that DNATs new connections to
//! the virtual address to a backend chosen per flow (conntrack keeps the
//! choice for the flow's life):
//! - `ip-mod`: a 256-entry map on the client address's low byte (the paper);
//! - `source-hash`: `jhash ip saddr mod 256` into a weighted 256-entry map;
//! - `round-robin`: `numgen inc mod 256` into the same map.
//!
//! Counters per backend (new connections, packets and bytes each way) are
//! read back from the table. They match a flow by its conntrack tuples (the
//! VIP in the original direction, the backend in the reply direction), so
//! they hold whatever the packets' headers say at the hook, and they count
//! in `postrouting` (forwarded and locally sent packets) and `input`
//! (locally delivered ones that did not come over loopback), so every
//! packet of a balanced flow is counted once, in either direction, whether
//! clients and backends are remote or on the gateway host. (Regression,
//! issue 17: the reply counter sat in `prerouting` and a backend on the
//! gateway host was never counted: "bytes from 0".) The table is deleted on drop; [`sweep_stale`]
//! deletes tables whose process died. Requires the `nft` binary and
//! CAP_NET_ADMIN; IPv4 only.

use crate::policy::{Balancer, PolicyKind};
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};

/// Prefix of every table the gateway installs.
pub const TABLE_PREFIX: &str = "connlab_gw_";

/// Why NAT mode could not start or report.
#[derive(Debug, thiserror::Error)]
pub enum NatError {
    /// The policy needs per-connection state the kernel rule cannot keep.
    #[error("policy {0} is not available in nat mode (the kernel picks statelessly per flow): use ip-mod, source-hash or round-robin, or --mode proxy")]
    Policy(&'static str),
    /// An IPv6 address was given.
    #[error("nat mode supports IPv4 only: {0}")]
    Ipv6(SocketAddr),
    /// `nft` is not installed.
    #[error("nft not found: install nftables (apt-get install nftables)")]
    NftMissing,
    /// `nft` refused (often: not root, or no CAP_NET_ADMIN).
    #[error("`nft {args}` failed: {stderr}")]
    Nft {
        /// Its arguments.
        args: String,
        /// What it printed.
        stderr: String,
    },
    /// `nft -j` printed something unexpected.
    #[error("reading nft's JSON output: {0}")]
    Json(String),
}

/// Counters of one backend, from the installed table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendCounters {
    /// New connections DNATed to it.
    pub connections: u64,
    /// Packets toward it.
    pub packets_to: u64,
    /// Bytes toward it (IP packets).
    pub bytes_to: u64,
    /// Packets from it.
    pub packets_from: u64,
    /// Bytes from it (IP packets).
    pub bytes_from: u64,
}

fn v4(addr: SocketAddr) -> Result<SocketAddrV4, NatError> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(NatError::Ipv6(addr)),
    }
}

/// The ruleset text for `nft -f -`: one table named `table`.
///
/// `masquerade` adds source NAT toward the backends, for topologies where
/// the backends' replies would not otherwise come back through the gateway
/// (one shared subnet); without it the backends must route the clients'
/// addresses via the gateway, as in the paper.
pub fn ruleset(
    table: &str,
    vip: SocketAddr,
    balancer: &Balancer,
    masquerade: bool,
) -> Result<String, NatError> {
    let vip = v4(vip)?;
    let backends: Vec<SocketAddrV4> = balancer
        .backends()
        .iter()
        .map(|b| v4(b.addr))
        .collect::<Result<_, _>>()?;
    let key = match balancer.kind() {
        PolicyKind::IpMod => "ip saddr & 0.0.0.255",
        PolicyKind::SourceHash => "jhash ip saddr mod 256",
        PolicyKind::RoundRobin => "numgen inc mod 256",
        other => return Err(NatError::Policy(other.name())),
    };
    let slots = balancer.ip_mod_table();
    let entries: Vec<String> = slots
        .iter()
        .enumerate()
        .map(|(slot, &b)| {
            let k = if balancer.kind() == PolicyKind::IpMod {
                format!("0.0.0.{slot}")
            } else {
                slot.to_string()
            };
            format!("{k} : {} . {}", backends[b].ip(), backends[b].port())
        })
        .collect();
    let dnat = format!(
        "ip daddr {} tcp dport {} ct state new dnat ip to {key} map {{ {} }}",
        vip.ip(),
        vip.port(),
        entries.join(", ")
    );
    let mut t = String::new();
    let _ = writeln!(t, "table ip {table} {{");
    let _ = writeln!(t, "\tchain prerouting {{\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\t{dnat}\n\t}}");
    // Connections the gateway host itself opens to the virtual address.
    let _ = writeln!(t, "\tchain output {{\n\t\ttype nat hook output priority -100; policy accept;\n\t\t{dnat}\n\t}}");
    let _ = writeln!(
        t,
        "\tchain postrouting {{\n\t\ttype nat hook postrouting priority srcnat; policy accept;"
    );
    if masquerade {
        for b in &backends {
            let _ = writeln!(
                t,
                "\t\tct status dnat ip daddr {} tcp dport {} masquerade",
                b.ip(),
                b.port()
            );
        }
    }
    let _ = writeln!(t, "\t}}");
    // Counters: by the flow's conntrack tuples, at the two hooks that
    // between them see every packet once.
    let mut rules = String::new();
    for (i, b) in backends.iter().enumerate() {
        let flow = format!(
            "meta l4proto tcp ct original ip daddr {} ct original proto-dst {} ct reply ip saddr {} ct reply proto-src {}",
            vip.ip(),
            vip.port(),
            b.ip(),
            b.port()
        );
        let _ = write!(
            rules,
            "\t\t{flow} ct direction original ct state new counter comment \"b{i} new\"\n\t\t{flow} ct direction original counter comment \"b{i} to\"\n\t\t{flow} ct direction reply counter comment \"b{i} from\"\n"
        );
    }
    let _ = writeln!(
        t,
        "\tchain count_out {{\n\t\ttype filter hook postrouting priority 0; policy accept;\n{rules}\t}}"
    );
    let _ = writeln!(
        t,
        "\tchain count_in {{\n\t\ttype filter hook input priority 0; policy accept;\n\t\tiifname \"lo\" accept\n{rules}\t}}"
    );
    let _ = writeln!(t, "}}");
    Ok(t)
}

fn nft(args: &[&str], stdin: Option<&str>) -> Result<String, NatError> {
    let mut cmd = Command::new("nft");
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NatError::NftMissing,
        _ => NatError::Nft {
            args: args.join(" "),
            stderr: e.to_string(),
        },
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| NatError::Nft {
        args: args.join(" "),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(NatError::Nft {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An installed NAT table; deleted on drop.
#[derive(Debug)]
pub struct NatRules {
    table: String,
    backends: usize,
    installed: bool,
}

impl NatRules {
    /// Sweeps stale tables, then installs this process's table. Returns the
    /// rules and the ruleset text installed.
    pub fn install(
        vip: SocketAddr,
        balancer: &Balancer,
        masquerade: bool,
    ) -> Result<(NatRules, String), NatError> {
        sweep_stale()?;
        let table = format!("{TABLE_PREFIX}{}", std::process::id());
        let text = ruleset(&table, vip, balancer, masquerade)?;
        nft(&["-f", "-"], Some(&text))?;
        Ok((
            NatRules {
                table,
                backends: balancer.backends().len(),
                installed: true,
            },
            text,
        ))
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Per-backend counters, in backend order.
    pub fn counters(&self) -> Result<Vec<BackendCounters>, NatError> {
        let json = nft(&["-j", "list", "table", "ip", &self.table], None)?;
        parse_counters(&json, self.backends)
    }

    /// Deletes the table now.
    pub fn remove(mut self) -> Result<(), NatError> {
        self.installed = false;
        nft(&["delete", "table", "ip", &self.table], None).map(|_| ())
    }
}

impl Drop for NatRules {
    fn drop(&mut self) {
        if self.installed {
            let _ = nft(&["delete", "table", "ip", &self.table], None);
        }
    }
}

/// Reads the `b<i> new|to|from` counters out of `nft -j list table` output.
/// Hand-rolled on the few fields needed: each counter rule is one JSON
/// object with a `"comment"` and a `"counter": {"packets": P, "bytes": B}`.
pub fn parse_counters(json: &str, backends: usize) -> Result<Vec<BackendCounters>, NatError> {
    let mut out = vec![BackendCounters::default(); backends];
    let mut rest = json;
    while let Some(at) = rest.find("\"comment\":") {
        rest = &rest[at + 10..];
        let comment = quoted(rest).ok_or_else(|| NatError::Json("comment".into()))?;
        let Some(c) = rest.find("\"counter\":") else {
            break;
        };
        let body = &rest[c..];
        let packets = number_after(body, "\"packets\":")
            .ok_or_else(|| NatError::Json(format!("packets of {comment:?}")))?;
        let bytes = number_after(body, "\"bytes\":")
            .ok_or_else(|| NatError::Json(format!("bytes of {comment:?}")))?;
        let Some((b, what)) = comment
            .strip_prefix('b')
            .and_then(|s| s.split_once(' '))
            .and_then(|(i, w)| i.parse::<usize>().ok().map(|i| (i, w)))
        else {
            continue;
        };
        let Some(slot) = out.get_mut(b) else { continue };
        // Each counter appears once per counting chain: sum them.
        match what {
            "new" => slot.connections += packets,
            "to" => {
                slot.packets_to += packets;
                slot.bytes_to += bytes;
            }
            "from" => {
                slot.packets_from += packets;
                slot.bytes_from += bytes;
            }
            _ => {}
        }
    }
    Ok(out)
}

fn quoted(s: &str) -> Option<String> {
    let s = s.trim_start().strip_prefix('"')?;
    Some(s[..s.find('"')?].to_string())
}

fn number_after(s: &str, key: &str) -> Option<u64> {
    let s = s[s.find(key)? + key.len()..].trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// Deletes the `connlab_gw_<pid>` tables of this namespace whose process is
/// gone (a gateway that was killed); returns their names.
pub fn sweep_stale() -> Result<Vec<String>, NatError> {
    let list = nft(&["list", "tables", "ip"], None)?;
    let mut removed = Vec::new();
    for line in list.lines() {
        let Some(name) = line.trim().strip_prefix("table ip ") else {
            continue;
        };
        let Some(pid) = name.strip_prefix(TABLE_PREFIX) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            nft(&["delete", "table", "ip", name], None)?;
            removed.push(name.to_string());
        }
    }
    Ok(removed)
}

/// Whether `addr` is IPv4 (nat mode's requirement), for early flag checks.
pub fn is_ipv4(addr: IpAddr) -> bool {
    addr.is_ipv4()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Backend;

    fn balancer(kind: PolicyKind) -> Balancer {
        Balancer::new(
            kind,
            vec![
                "198.18.0.2:8080".parse::<Backend>().unwrap(),
                "198.18.0.3:8081".parse::<Backend>().unwrap(),
            ],
        )
        .unwrap()
    }

    #[test]
    fn ip_mod_is_a_256_entry_map_on_the_low_byte() {
        let vip = "198.18.0.1:80".parse().unwrap();
        let t = ruleset("connlab_gw_1", vip, &balancer(PolicyKind::IpMod), false).unwrap();
        assert!(t.contains(
            "ip daddr 198.18.0.1 tcp dport 80 ct state new dnat ip to ip saddr & 0.0.0.255 map {"
        ));
        assert!(t.contains("0.0.0.0 : 198.18.0.2 . 8080, 0.0.0.1 : 198.18.0.3 . 8081"));
        assert!(t.contains("0.0.0.255 : 198.18.0.3 . 8081 }"));
        assert!(!t.contains("masquerade"));
        assert!(t.contains("comment \"b1 from\""));
    }

    #[test]
    fn both_directions_are_counted_by_flow_at_postrouting_and_input() {
        let vip = "198.18.0.1:80".parse().unwrap();
        let t = ruleset("x", vip, &balancer(PolicyKind::IpMod), false).unwrap();
        let flow = "ct original ip daddr 198.18.0.1 ct original proto-dst 80 ct reply ip saddr 198.18.0.3 ct reply proto-src 8081";
        for dir in [
            "original counter comment \"b1 to\"",
            "reply counter comment \"b1 from\"",
        ] {
            assert_eq!(
                t.matches(&format!("{flow} ct direction {dir}")).count(),
                2,
                "{t}"
            );
        }
        assert!(t.contains("type filter hook postrouting priority 0"));
        assert!(t.contains("type filter hook input priority 0"));
        assert_eq!(t.matches('{').count(), t.matches('}').count(), "{t}");
        // A reply counter in prerouting missed backends on the gateway host.
        assert!(!t.contains("hook prerouting priority -150"));
    }

    #[test]
    fn counters_of_both_chains_are_summed() {
        let json = r#"{"nftables": [{"rule": {"comment": "b0 from", "expr": [{"counter": {"packets": 2, "bytes": 1100}}]}}, {"rule": {"comment": "b0 from", "expr": [{"counter": {"packets": 1, "bytes": 60}}]}}]}"#;
        let c = parse_counters(json, 1).unwrap();
        assert_eq!((c[0].packets_from, c[0].bytes_from), (3, 1160));
    }

    #[test]
    fn other_policies_and_refusals() {
        let vip: SocketAddr = "198.18.0.1:80".parse().unwrap();
        let t = ruleset("x", vip, &balancer(PolicyKind::SourceHash), true).unwrap();
        assert!(t.contains("jhash ip saddr mod 256 map { 0 : 198.18.0.2 . 8080, 1 :"));
        assert!(t.contains("ct status dnat ip daddr 198.18.0.3 tcp dport 8081 masquerade"));
        let t = ruleset("x", vip, &balancer(PolicyKind::RoundRobin), false).unwrap();
        assert!(t.contains("numgen inc mod 256 map"));
        for kind in [PolicyKind::Maglev, PolicyKind::LeastConnections] {
            let e = ruleset("x", vip, &balancer(kind), false).unwrap_err();
            assert!(e.to_string().contains("--mode proxy"), "{e}");
        }
        let e = ruleset(
            "x",
            "[::1]:80".parse().unwrap(),
            &balancer(PolicyKind::IpMod),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("IPv4 only"));
    }

    #[test]
    fn counters_parse_from_nft_json() {
        let json = r#"{"nftables": [{"rule": {"family": "ip", "table": "t", "chain": "count_to", "handle": 5, "comment": "b0 new", "expr": [{"counter": {"packets": 3, "bytes": 180}}]}}, {"rule": {"comment": "b0 to", "expr": [{"match": {}}, {"counter": {"packets": 40, "bytes": 5000}}]}}, {"rule": {"comment": "b1 from", "expr": [{"counter": {"packets": 7, "bytes": 900}}]}}]}"#;
        let c = parse_counters(json, 2).unwrap();
        assert_eq!(c[0].connections, 3);
        assert_eq!((c[0].packets_to, c[0].bytes_to), (40, 5000));
        assert_eq!((c[1].packets_from, c[1].bytes_from), (7, 900));
    }
}
