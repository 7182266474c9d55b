//! Balancing policies: which backend a new client connection goes to.
//! Pure state, no I/O, so the proxy, the NAT rule generator and the tests
//! share one definition. Hand-written on purpose: the paper's `ip-mod`
//! policy and the comparison with today's policies are the research.

use connlab_measure::splitmix64;
use std::net::{IpAddr, SocketAddr};

/// A balancing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// The paper: the low 8 bits of the client's address pick one of 256
    /// slots, slot `b` going to backend `b mod N` (by weight when weighted).
    IpMod,
    /// A hash of the client's address, modulo the backends (by weight).
    SourceHash,
    /// Smooth weighted round robin (nginx's).
    RoundRobin,
    /// The backend with the fewest open connections per unit of weight.
    LeastConnections,
    /// Maglev consistent hashing on the client's address: removing one of N
    /// backends moves only about 1/N of the clients.
    Maglev,
}

impl PolicyKind {
    /// Every policy.
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::IpMod,
        PolicyKind::SourceHash,
        PolicyKind::RoundRobin,
        PolicyKind::LeastConnections,
        PolicyKind::Maglev,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::IpMod => "ip-mod",
            PolicyKind::SourceHash => "source-hash",
            PolicyKind::RoundRobin => "round-robin",
            PolicyKind::LeastConnections => "least-connections",
            PolicyKind::Maglev => "maglev",
        }
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<PolicyKind, String> {
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown policy {s:?}: expected ip-mod, source-hash, round-robin, \
                     least-connections or maglev"
                )
            })
    }
}

/// A backend and its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backend {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Relative share of clients (at least 1).
    pub weight: u32,
}

impl std::str::FromStr for Backend {
    type Err = String;
    /// `ADDR:PORT` or `ADDR:PORT,WEIGHT`.
    fn from_str(s: &str) -> Result<Backend, String> {
        let (addr, weight) = match s.split_once(',') {
            Some((a, w)) => {
                let w: u32 = w
                    .trim()
                    .parse()
                    .map_err(|_| format!("{s:?}: weight {w:?} is not a whole number"))?;
                (a, w)
            }
            None => (s, 1),
        };
        if !(1..=1000).contains(&weight) {
            return Err(format!("{s:?}: weight {weight} must be between 1 and 1000"));
        }
        let addr: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: {addr:?} is not IP:PORT"))?;
        if addr.port() == 0 {
            return Err(format!("{s:?}: port 0"));
        }
        Ok(Backend { addr, weight })
    }
}

/// Why a balancer could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BalancerError {
    /// No backend given.
    #[error("no backends: give at least one --backend")]
    NoBackends,
    /// More backends than the policy can address.
    #[error("{count} backends: ip-mod maps 256 address slots, so at most 256")]
    TooMany {
        /// Backends given.
        count: usize,
    },
    /// The same address twice.
    #[error("backend {0} is listed twice")]
    Duplicate(SocketAddr),
}

/// Entries of a Maglev lookup table: a prime well above backends x 100.
const MAGLEV_SIZE: usize = 65_537;

/// The balancer: a policy over a backend list, with the state it needs
/// (round-robin position, open connections, health).
#[derive(Clone, Debug)]
pub struct Balancer {
    kind: PolicyKind,
    backends: Vec<Backend>,
    healthy: Vec<bool>,
    open: Vec<u64>,
    /// Smooth weighted round robin's current weights.
    rr_current: Vec<i64>,
    /// ip-mod and source-hash: slot -> backend, weighted, over healthy backends.
    slots: Vec<usize>,
    /// Maglev: entry -> backend, over healthy backends.
    maglev: Vec<usize>,
}

impl Balancer {
    /// A balancer with every backend healthy.
    pub fn new(kind: PolicyKind, backends: Vec<Backend>) -> Result<Balancer, BalancerError> {
        if backends.is_empty() {
            return Err(BalancerError::NoBackends);
        }
        if backends.len() > 256 {
            return Err(BalancerError::TooMany {
                count: backends.len(),
            });
        }
        for (i, b) in backends.iter().enumerate() {
            if backends[..i].iter().any(|o| o.addr == b.addr) {
                return Err(BalancerError::Duplicate(b.addr));
            }
        }
        let n = backends.len();
        let mut b = Balancer {
            kind,
            backends,
            healthy: vec![true; n],
            open: vec![0; n],
            rr_current: vec![0; n],
            slots: Vec::new(),
            maglev: Vec::new(),
        };
        b.rebuild();
        Ok(b)
    }

    /// The policy.
    pub fn kind(&self) -> PolicyKind {
        self.kind
    }

    /// The backends, in the order given.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    /// Whether backend `i` is in rotation.
    pub fn is_healthy(&self, i: usize) -> bool {
        self.healthy.get(i).copied().unwrap_or(false)
    }

    /// Takes backend `i` out of rotation or puts it back.
    pub fn set_healthy(&mut self, i: usize, healthy: bool) {
        if i < self.healthy.len() && self.healthy[i] != healthy {
            self.healthy[i] = healthy;
            self.rebuild();
        }
    }

    /// A connection to backend `i` was opened (least-connections counts them).
    pub fn opened(&mut self, i: usize) {
        if let Some(o) = self.open.get_mut(i) {
            *o += 1;
        }
    }

    /// A connection to backend `i` was closed.
    pub fn closed(&mut self, i: usize) {
        if let Some(o) = self.open.get_mut(i) {
            *o = o.saturating_sub(1);
        }
    }

    /// The 256-slot table of ip-mod (slot = the address's low byte), over
    /// every backend regardless of health: what NAT mode installs as a map.
    /// With equal weights slot `b` goes to backend `b mod N`, the paper's rule.
    pub fn ip_mod_table(&self) -> Vec<usize> {
        weighted_slots(&self.backends, &vec![true; self.backends.len()], 256)
    }

    /// The backend for a new connection from `client`; None when every
    /// backend is out of rotation.
    pub fn pick(&mut self, client: IpAddr) -> Option<usize> {
        if !self.healthy.iter().any(|h| *h) {
            return None;
        }
        match self.kind {
            PolicyKind::IpMod => Some(self.slots[usize::from(low_byte(client))]),
            PolicyKind::SourceHash => {
                Some(self.slots[(address_hash(client) % self.slots.len() as u64) as usize])
            }
            PolicyKind::Maglev => {
                Some(self.maglev[(address_hash(client) % MAGLEV_SIZE as u64) as usize])
            }
            PolicyKind::RoundRobin => {
                swrr_step(&self.backends, &self.healthy, &mut self.rr_current)
            }
            PolicyKind::LeastConnections => (0..self.backends.len())
                .filter(|i| self.healthy[*i])
                .min_by(|&a, &b| {
                    // open/weight compared without division.
                    let lhs = u128::from(self.open[a]) * u128::from(self.backends[b].weight);
                    let rhs = u128::from(self.open[b]) * u128::from(self.backends[a].weight);
                    lhs.cmp(&rhs).then(a.cmp(&b))
                }),
        }
    }

    fn rebuild(&mut self) {
        match self.kind {
            PolicyKind::IpMod => {
                // Healthy backends keep their slots; a dead backend's slots
                // go to the next healthy backend in order.
                let table = self.ip_mod_table();
                self.slots = table
                    .iter()
                    .map(|&b| self.next_healthy(b).unwrap_or(b))
                    .collect();
            }
            PolicyKind::SourceHash => {
                self.slots = weighted_slots(&self.backends, &self.healthy, 4096);
            }
            PolicyKind::Maglev => {
                self.maglev = maglev_table(&self.backends, &self.healthy);
            }
            PolicyKind::RoundRobin | PolicyKind::LeastConnections => {}
        }
    }

    fn next_healthy(&self, from: usize) -> Option<usize> {
        let n = self.backends.len();
        (0..n).map(|k| (from + k) % n).find(|&i| self.healthy[i])
    }
}

/// The client address's low byte (IPv4: last octet; IPv6: last byte).
fn low_byte(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    }
}

/// FNV-1a over the address bytes, then splitmix64 so
/// neighbouring addresses spread.
fn address_hash(ip: IpAddr) -> u64 {
    let bytes: Vec<u8> = match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    splitmix64(fnv1a(&bytes, 0xcbf2_9ce4_8422_2325))
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One step of smooth weighted round robin (nginx's): every healthy
/// backend's current weight grows by its weight, the largest is chosen and
/// loses the total. Ties go to the first, so equal weights cycle in order.
fn swrr_step(backends: &[Backend], healthy: &[bool], current: &mut [i64]) -> Option<usize> {
    let mut total = 0i64;
    let mut best: Option<usize> = None;
    for (i, b) in backends.iter().enumerate() {
        if !healthy[i] {
            continue;
        }
        current[i] += i64::from(b.weight);
        total += i64::from(b.weight);
        if best.is_none_or(|k| current[i] > current[k]) {
            best = Some(i);
        }
    }
    let b = best?;
    current[b] -= total;
    Some(b)
}

/// `size` slots dealt to the healthy backends in proportion to their
/// weights, interleaved by [`swrr_step`] (slot `s` to backend `s mod N`
/// when weights are equal and all are healthy).
fn weighted_slots(backends: &[Backend], healthy: &[bool], size: usize) -> Vec<usize> {
    let mut current = vec![0i64; backends.len()];
    (0..size)
        .map(|_| swrr_step(backends, healthy, &mut current).unwrap_or(0))
        .collect()
}

/// The Maglev lookup table (Eisenbud et al., NSDI 2016, Pseudocode 1): each
/// healthy backend walks its own permutation of the entries (offset and
/// skip from two hashes of its address) and takes the next free entry in
/// turn; a weight-w backend takes w turns per round.
fn maglev_table(backends: &[Backend], healthy: &[bool]) -> Vec<usize> {
    let m = MAGLEV_SIZE as u64;
    let live: Vec<usize> = (0..backends.len()).filter(|&i| healthy[i]).collect();
    let mut table = vec![usize::MAX; MAGLEV_SIZE];
    if live.is_empty() {
        return vec![0; MAGLEV_SIZE];
    }
    let perm: Vec<(u64, u64)> = live
        .iter()
        .map(|&i| {
            let name = backends[i].addr.to_string();
            let offset = splitmix64(fnv1a(name.as_bytes(), 0xcbf2_9ce4_8422_2325)) % m;
            let skip = splitmix64(fnv1a(name.as_bytes(), 0x8422_2325_cbf2_9ce4)) % (m - 1) + 1;
            (offset, skip)
        })
        .collect();
    let mut next = vec![0u64; live.len()];
    let mut filled = 0;
    'fill: loop {
        for (k, &i) in live.iter().enumerate() {
            for _ in 0..backends[i].weight {
                let (offset, skip) = perm[k];
                let mut c = (offset + next[k] * skip) % m;
                while table[c as usize] != usize::MAX {
                    next[k] += 1;
                    c = (offset + next[k] * skip) % m;
                }
                table[c as usize] = i;
                next[k] += 1;
                filled += 1;
                if filled == MAGLEV_SIZE {
                    break 'fill;
                }
            }
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn backends(n: usize) -> Vec<Backend> {
        (0..n)
            .map(|i| Backend {
                addr: SocketAddr::from(([198, 18, 1, i as u8 + 1], 80)),
                weight: 1,
            })
            .collect()
    }

    fn client(i: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i))
    }

    #[test]
    fn ip_mod_is_the_papers_rule() {
        let mut b = Balancer::new(PolicyKind::IpMod, backends(3)).unwrap();
        for low in 0..=255u32 {
            assert_eq!(b.pick(client(low)), Some(low as usize % 3));
        }
        assert_eq!(b.ip_mod_table()[7], 1);
        // A dead backend's clients go to the next healthy one; the others stay.
        b.set_healthy(1, false);
        assert_eq!(b.pick(client(4)), Some(2));
        assert_eq!(b.pick(client(3)), Some(0));
        assert_eq!(b.pick(client(5)), Some(2));
    }

    #[test]
    fn weights_share_the_slots() {
        let mut bs = backends(2);
        bs[0].weight = 3;
        let b = Balancer::new(PolicyKind::IpMod, bs).unwrap();
        let t = b.ip_mod_table();
        assert_eq!(t.iter().filter(|&&i| i == 0).count(), 192);
    }

    #[test]
    fn round_robin_is_smooth_and_weighted() {
        let mut bs = backends(3);
        bs[0].weight = 5;
        let mut b = Balancer::new(PolicyKind::RoundRobin, bs).unwrap();
        let picks: Vec<usize> = (0..7).map(|_| b.pick(client(0)).unwrap()).collect();
        assert_eq!(picks, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn least_connections_follows_the_counts() {
        let mut b = Balancer::new(PolicyKind::LeastConnections, backends(3)).unwrap();
        b.opened(0);
        b.opened(0);
        b.opened(1);
        assert_eq!(b.pick(client(0)), Some(2));
        b.opened(2);
        b.opened(2);
        assert_eq!(b.pick(client(0)), Some(1));
        b.closed(0);
        b.closed(0);
        assert_eq!(b.pick(client(0)), Some(0));
        b.set_healthy(0, false);
        assert_eq!(b.pick(client(0)), Some(1));
    }

    #[test]
    fn address_policies_are_sticky_and_spread() {
        for kind in [PolicyKind::SourceHash, PolicyKind::Maglev] {
            let mut b = Balancer::new(kind, backends(4)).unwrap();
            let mut counts = [0usize; 4];
            for i in 0..40_000 {
                let first = b.pick(client(i)).unwrap();
                assert_eq!(b.pick(client(i)), Some(first), "{kind:?} is sticky");
                counts[first] += 1;
            }
            for c in counts {
                assert!((8_000..12_000).contains(&c), "{kind:?}: {counts:?}");
            }
        }
    }

    #[test]
    fn maglev_moves_about_one_nth_when_a_backend_goes() {
        let n = 5;
        let mut b = Balancer::new(PolicyKind::Maglev, backends(n)).unwrap();
        let before: Vec<usize> = (0..50_000).map(|i| b.pick(client(i)).unwrap()).collect();
        b.set_healthy(2, false);
        let after: Vec<usize> = (0..50_000).map(|i| b.pick(client(i)).unwrap()).collect();
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        let of_dead = before.iter().filter(|&&x| x == 2).count();
        // Every client of the dead backend moves, and few others do.
        assert!(after.iter().all(|&x| x != 2));
        assert!(moved >= of_dead);
        let others_moved = moved - of_dead;
        assert!(
            (others_moved as f64) < 0.03 * 50_000.0,
            "{others_moved} clients of live backends moved"
        );
        let share = moved as f64 / 50_000.0;
        assert!((0.15..0.25).contains(&share), "moved {share}");
        // Source hashing, by contrast, moves most clients.
        let mut h = Balancer::new(PolicyKind::SourceHash, backends(n)).unwrap();
        let hb: Vec<usize> = (0..50_000).map(|i| h.pick(client(i)).unwrap()).collect();
        h.set_healthy(2, false);
        let ha: Vec<usize> = (0..50_000).map(|i| h.pick(client(i)).unwrap()).collect();
        let hmoved = hb.iter().zip(&ha).filter(|(a, b)| a != b).count();
        assert!(hmoved as f64 > 0.5 * 50_000.0, "source-hash moved {hmoved}");
    }

    #[test]
    fn bad_backends_and_lists_are_refused() {
        assert!("198.18.0.1:80,0".parse::<Backend>().is_err());
        assert!("198.18.0.1".parse::<Backend>().is_err());
        assert!("198.18.0.1:80,x".parse::<Backend>().is_err());
        assert_eq!("198.18.0.1:80,3".parse::<Backend>().unwrap().weight, 3);
        assert_eq!(
            Balancer::new(PolicyKind::IpMod, vec![]).unwrap_err(),
            BalancerError::NoBackends
        );
        let mut two = backends(1);
        two.push(two[0]);
        assert!(matches!(
            Balancer::new(PolicyKind::Maglev, two),
            Err(BalancerError::Duplicate(_))
        ));
        let mut none = Balancer::new(PolicyKind::RoundRobin, backends(2)).unwrap();
        none.set_healthy(0, false);
        none.set_healthy(1, false);
        assert_eq!(none.pick(client(0)), None);
    }

    proptest::proptest! {
        #[test]
        fn backend_parsing_never_panics(s in ".{0,40}") {
            let _ = s.parse::<Backend>();
        }

        #[test]
        fn picks_are_always_healthy(kind in 0usize..5, dead in proptest::collection::vec(proptest::bool::ANY, 4), ip in proptest::num::u32::ANY) {
            let mut b = Balancer::new(PolicyKind::ALL[kind], backends(4)).unwrap();
            for (i, d) in dead.iter().enumerate() {
                b.set_healthy(i, !d);
            }
            match b.pick(IpAddr::V4(Ipv4Addr::from(ip))) {
                Some(i) => proptest::prop_assert!(b.is_healthy(i)),
                None => proptest::prop_assert!(dead.iter().all(|d| *d)),
            }
        }
    }
}
