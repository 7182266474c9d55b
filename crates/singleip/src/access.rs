//! What a node may ask the I/O server to do with the cluster's sockets:
//! where it may CONNECT (`--allow-connect`) and which ports it may LISTEN on
//! (`--allow-listen`). Pure: the server supplies whether an address is one
//! of its own.
//!
//! A node holds the shared key, but the I/O server is the host's front end:
//! without a rule a node could reach services bound to the I/O server's own
//! loopback or addresses (an SSRF), or take over ports of other programs. So
//! the I/O server's own addresses are denied unless a rule names them with a
//! prefix longer than 0 (`127.0.0.1:6379` allows that one service;
//! `0.0.0.0/0` means "anywhere else").

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// An inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

impl PortRange {
    /// Every port, 1-65535.
    pub const ALL: PortRange = PortRange {
        first: 1,
        last: u16::MAX,
    };

    /// Whether `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

impl FromStr for PortRange {
    type Err = String;

    /// `*`, `P` or `P-Q` (1 ..= 65535).
    fn from_str(text: &str) -> Result<PortRange, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(PortRange::ALL);
        }
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("port {t:?} is not in 1..=65535"))
        };
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => (port(text)?, port(text)?),
        };
        if first > last {
            return Err(format!("port range {text:?} runs backwards"));
        }
        Ok(PortRange { first, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.first, self.last) {
            (1, u16::MAX) => write!(f, "*"),
            (a, b) if a == b => write!(f, "{a}"),
            (a, b) => write!(f, "{a}-{b}"),
        }
    }
}

/// One `--allow-connect` rule: a network and a port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectRule {
    /// The network's address (host bits are ignored).
    pub net: IpAddr,
    /// Prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub prefix: u8,
    /// Ports allowed.
    pub ports: PortRange,
}

impl ConnectRule {
    /// Whether `addr` is in the rule's network and port range.
    pub fn matches(&self, addr: SocketAddr) -> bool {
        self.ports.contains(addr.port()) && in_net(addr.ip(), self.net, self.prefix)
    }
}

fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

impl FromStr for ConnectRule {
    type Err = String;

    /// `ADDR[/PREFIX][:PORTS]`, IPv6 in brackets when ports follow:
    /// `10.0.0.0/8:80`, `203.0.113.7`, `[2001:db8::/32]:443-444`, `0.0.0.0/0:*`.
    fn from_str(text: &str) -> Result<ConnectRule, String> {
        let t = text.trim();
        let (net, ports) = if let Some(rest) = t.strip_prefix('[') {
            let (net, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: '[' without ']'"))?;
            match after {
                "" => (net, None),
                _ => (
                    net,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| format!("{text:?}: expected ':PORTS' after ']'"))?,
                    ),
                ),
            }
        } else if t.matches(':').count() == 1 {
            let (a, p) = t.split_once(':').unwrap_or((t, ""));
            (a, Some(p))
        } else {
            // No colon (IPv4, no ports) or several (bare IPv6, no ports).
            (t, None)
        };
        let ports = match ports {
            Some(p) => p.parse().map_err(|e| format!("{text:?}: {e}"))?,
            None => PortRange::ALL,
        };
        let (addr, prefix) = match net.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (net, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{text:?}: {addr:?} is not an IP address"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("{text:?}: prefix /{p} is not in 0..={max}"))?,
            None => max,
        };
        Ok(ConnectRule { net, prefix, ports })
    }
}

impl fmt::Display for ConnectRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.net {
            IpAddr::V4(a) => write!(f, "{a}/{}:{}", self.prefix, self.ports),
            IpAddr::V6(a) => write!(f, "[{a}/{}]:{}", self.prefix, self.ports),
        }
    }
}

/// Where nodes may CONNECT and which ports they may LISTEN on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// `--allow-connect`; empty: anywhere except the I/O server's own
    /// addresses.
    pub connect: Vec<ConnectRule>,
    /// `--allow-listen`; empty: any port but the node port.
    pub listen: Vec<PortRange>,
}

impl Access {
    /// Whether a CONNECT to `dest` is allowed. `own` says whether `dest`'s
    /// address is one of the I/O server's (loopback, unspecified, or bound
    /// on this host): those need a rule with a prefix longer than 0 that
    /// matches.
    pub fn may_connect(&self, dest: SocketAddr, own: bool) -> bool {
        if dest.port() == 0 {
            return false;
        }
        if self.connect.is_empty() {
            return !own;
        }
        self.connect
            .iter()
            .any(|r| r.matches(dest) && (!own || r.prefix > 0))
    }

    /// Whether a LISTEN on `port` is allowed; `node_port` (where nodes
    /// connect) never is.
    pub fn may_listen(&self, port: u16, node_port: u16) -> bool {
        if port == node_port {
            return false;
        }
        self.listen.is_empty() || self.listen.iter().any(|r| r.contains(port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(t: &str) -> ConnectRule {
        t.parse().unwrap()
    }

    fn sa(t: &str) -> SocketAddr {
        t.parse().unwrap()
    }

    #[test]
    fn parses_networks_ports_and_ipv6_in_brackets() {
        let r = rule("10.0.0.0/8:80-90");
        assert!(r.matches(sa("10.1.2.3:85")));
        assert!(!r.matches(sa("10.1.2.3:91")));
        assert!(!r.matches(sa("11.0.0.1:85")));
        let r = rule("203.0.113.7");
        assert_eq!((r.prefix, r.ports), (32, PortRange::ALL));
        assert!(r.matches(sa("203.0.113.7:1")));
        assert!(!r.matches(sa("203.0.113.8:1")));
        let r = rule("[2001:db8::/32]:443");
        assert!(r.matches(sa("[2001:db8:1::9]:443")));
        assert!(!r.matches(sa("[2001:db9::1]:443")));
        assert_eq!(rule("2001:db8::1").prefix, 128);
        assert!(rule("0.0.0.0/0:*").matches(sa("198.51.100.1:65535")));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, says) in [
            ("10.0.0.0/33", "prefix"),
            ("10.0.0.x", "not an IP"),
            ("10.0.0.1:0", "port"),
            ("10.0.0.1:90-80", "backwards"),
            ("[::1", "']'"),
        ] {
            let err = text.parse::<ConnectRule>().err().unwrap();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn own_addresses_are_denied_by_default() {
        let open = Access::default();
        assert!(!open.may_connect(sa("127.0.0.1:6379"), true));
        assert!(open.may_connect(sa("198.51.100.1:80"), false));
        assert!(!open.may_connect(sa("198.51.100.1:0"), false));
        // "anywhere" still keeps the I/O server's own addresses out ...
        let any = Access {
            connect: vec![rule("0.0.0.0/0")],
            ..Access::default()
        };
        assert!(!any.may_connect(sa("127.0.0.1:6379"), true));
        assert!(any.may_connect(sa("198.51.100.1:80"), false));
        // ... a rule naming one lets that one in.
        let named = Access {
            connect: vec![rule("127.0.0.1:6379")],
            ..Access::default()
        };
        assert!(named.may_connect(sa("127.0.0.1:6379"), true));
        assert!(!named.may_connect(sa("127.0.0.1:22"), true));
        assert!(!named.may_connect(sa("198.51.100.1:80"), false));
    }

    #[test]
    fn listen_is_limited_to_the_allowed_ports_and_never_the_node_port() {
        let open = Access::default();
        assert!(open.may_listen(80, 7000));
        assert!(!open.may_listen(7000, 7000));
        let some = Access {
            listen: vec!["8000-8999".parse().unwrap()],
            ..Access::default()
        };
        assert!(some.may_listen(8080, 7000));
        assert!(!some.may_listen(22, 7000));
    }

    proptest::proptest! {
        #[test]
        fn rule_parsing_never_panics(text in "\\PC{0,40}") {
            let _ = text.parse::<ConnectRule>();
            let _ = text.parse::<PortRange>();
        }

        #[test]
        fn printed_rules_parse_back(a: u32, prefix in 0u8..=32, p in 1u16.., q in 1u16..) {
            let rule = ConnectRule {
                net: IpAddr::V4(a.into()),
                prefix,
                ports: PortRange { first: p.min(q), last: p.max(q) },
            };
            proptest::prop_assert_eq!(rule.to_string().parse::<ConnectRule>(), Ok(rule));
        }
    }

    #[test]
    fn ipv4_mapped_destinations_match_ipv4_rules() {
        assert!(rule("10.0.0.0/8").matches(sa("[::ffff:10.0.0.1]:80")));
    }
}
