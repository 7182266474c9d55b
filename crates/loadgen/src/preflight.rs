//! Checks made before any connection is opened: does the run fit the
//! open-files limit and the ephemeral port range of its source addresses?

use std::net::IpAddr;

/// Descriptors a run needs beyond its connections (epoll, pipes, files, stdio).
const SPARE_FDS: u64 = 32;

/// What this process can open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Soft open-files limit in force.
    pub nofile: u64,
    /// Ephemeral ports per source address (`ip_local_port_range`).
    pub ephemeral_ports: u64,
}

impl Capacity {
    /// Reads the limits now in force.
    pub fn current() -> Capacity {
        let nofile = {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: valid, writable rlimit.
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
            lim.rlim_cur
        };
        let ephemeral_ports = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| {
                let mut it = s.split_whitespace().map(|x| x.parse::<u64>().ok());
                Some((it.next()??, it.next()??))
            })
            .map_or(28_232, |(lo, hi)| hi.saturating_sub(lo) + 1);
        Capacity {
            nofile,
            ephemeral_ports,
        }
    }
}

/// Refuses, with a message saying what to change, a run of `connections`
/// that cannot fit. `source_addrs` empty means one (kernel-chosen) address.
pub fn check_capacity(
    connections: usize,
    source_addrs: &[IpAddr],
    cap: Capacity,
) -> Result<(), String> {
    let n = connections as u64;
    if n + SPARE_FDS > cap.nofile {
        return Err(format!(
            "{n} connections need {} descriptors but the open-files limit is {}; \
             use at most {} connections per process, or split the run into shards",
            n + SPARE_FDS,
            cap.nofile,
            cap.nofile.saturating_sub(SPARE_FDS)
        ));
    }
    let addrs = source_addrs.len().max(1) as u64;
    if n > cap.ephemeral_ports * addrs {
        return Err(format!(
            "{n} connections to one server need more than the {} ephemeral ports of {addrs} \
             source address(es); add addresses with --source-addrs (e.g. 127.0.0.2-127.0.0.5)",
            cap.ephemeral_ports
        ));
    }
    Ok(())
}

/// Seconds a closed connection's local port stays in TIME_WAIT (Linux).
const TIME_WAIT_S: f64 = 60.0;

/// A warning when a connection-per-request run at `rate_per_s` for `run_s`
/// seconds would need more local ports than its source addresses have: each
/// request's connection leaves its port in TIME_WAIT for 60 s. An estimate
/// (the server may close first and keep the TIME_WAIT itself), so it warns
/// instead of refusing.
pub fn per_request_port_warning(
    rate_per_s: f64,
    run_s: f64,
    source_addrs: &[IpAddr],
    cap: Capacity,
) -> Option<String> {
    let addrs = source_addrs.len().max(1) as u64;
    let ports = cap.ephemeral_ports * addrs;
    let needed = rate_per_s * run_s.min(TIME_WAIT_S);
    (needed > ports as f64).then(|| {
        format!(
            "{rate_per_s} new connections/s for {run_s:.0} s may need {needed:.0} local ports \
             (each stays in TIME_WAIT for 60 s) but {addrs} source address(es) have {ports}; \
             connects may fail with no_local_port: lower the rate to {:.0}/s or add \
             --source-addrs",
            ports as f64 / run_s.min(TIME_WAIT_S)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: Capacity = Capacity {
        nofile: 20_000,
        ephemeral_ports: 28_232,
    };

    #[test]
    fn warns_when_time_wait_would_exhaust_the_ports() {
        assert!(per_request_port_warning(400.0, 30.0, &[], CAP).is_none());
        let w = per_request_port_warning(1_000.0, 30.0, &[], CAP).unwrap();
        assert!(w.contains("941/s"), "{w}");
        let four: Vec<IpAddr> = (2..6)
            .map(|i| format!("127.0.0.{i}").parse().unwrap())
            .collect();
        assert!(per_request_port_warning(1_000.0, 30.0, &four, CAP).is_none());
    }

    #[test]
    fn accepts_runs_that_fit() {
        assert!(check_capacity(19_000, &[], CAP).is_ok());
    }

    #[test]
    fn refuses_more_connections_than_descriptors() {
        let e = check_capacity(19_990, &[], CAP).unwrap_err();
        assert!(e.contains("open-files limit is 20000"), "{e}");
    }

    #[test]
    fn refuses_more_connections_than_ports() {
        let big = Capacity {
            nofile: 1_000_000,
            ephemeral_ports: 28_232,
        };
        let e = check_capacity(30_000, &[], big).unwrap_err();
        assert!(e.contains("--source-addrs"), "{e}");
        let two: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
        assert!(check_capacity(30_000, &two, big).is_ok());
    }
}
