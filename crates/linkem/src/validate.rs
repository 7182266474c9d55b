//! The validation of the emulator on a demo topology (one left host, the
//! router, one right host), in phases:
//!
//! 1. `kernel`: UDP echo RTT with the router forwarding in the kernel (the
//!    unemulated baseline);
//! 2. `zero`: the same through the emulator with no delay (its own cost);
//! 3. `emulated`: the same with the configured links, then a one-way UDP
//!    loss run (left to right) against the configured loss;
//! 4. `bulk`: a TCP bulk transfer left to right with the configured links
//!    (by default 1 ms each way: a 2 ms RTT).
//!
//! The per-packet log, if asked for, covers phase 3.

use crate::emulator::{self, EmulatorOptions, Report};
use crate::lab::{in_namespace, Lab, LabSpec, LEFT_IF, RIGHT_IF};
use crate::probe::{self, BulkRun, LossRun, RttSummary};
use crate::router::{Router, RouterSpec};
use crate::{LinkConfig, LinkemError};
use connlab_os::Shutdown;
use serde::Serialize;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What to validate.
#[derive(Clone, Debug)]
pub struct ValidationSpec {
    /// Left to right, right to left.
    pub links: [LinkConfig; 2],
    /// Emulator options (the log applies to the `emulated` phase).
    pub options: EmulatorOptions,
    /// Use GSO offload on the TUN devices.
    pub offload: bool,
    /// UDP echo probes per RTT phase.
    pub rtt_probes: u64,
    /// Datagrams of the one-way loss run (0: skip).
    pub loss_datagrams: u64,
    /// Links for the bulk phase (`None`: skip it).
    pub bulk_links: Option<[LinkConfig; 2]>,
    /// Measured length of the bulk transfer (after 0.5 s of warm-up).
    pub bulk_duration: Duration,
}

/// One emulated phase: the measurement and the emulator's statistics.
#[derive(Clone, Debug, Serialize)]
pub struct Phase<T> {
    /// The measurement.
    pub result: T,
    /// What the emulator saw.
    pub emulator: Report,
}

/// The results.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// RTT with kernel forwarding only.
    pub kernel_rtt: RttSummary,
    /// RTT through the emulator with zero delay.
    pub zero_rtt: Option<Phase<RttSummary>>,
    /// RTT through the configured links.
    pub emulated_rtt: Option<Phase<RttSummary>>,
    /// Configured round-trip delay (both one-way delays), microseconds.
    pub configured_rtt_us: f64,
    /// Median emulated RTT minus the kernel baseline's median, minus the
    /// configured RTT, relative to the configured RTT, percent.
    pub rtt_error_vs_kernel_pct: Option<f64>,
    /// The same against the zero-delay emulator baseline.
    pub rtt_error_vs_zero_pct: Option<f64>,
    /// One-way loss (left to right) with its emulator statistics.
    pub loss: Option<Phase<LossRun>>,
    /// Configured mean loss left to right.
    pub configured_loss: f64,
    /// Half-width of the 99% interval of the loss estimate.
    pub loss_bound_99: f64,
    /// TCP bulk transfer left to right.
    pub bulk: Option<Phase<BulkRun>>,
    /// The bulk phase's configured round-trip delay, microseconds.
    pub bulk_rtt_us: Option<f64>,
    /// True when a Ctrl-C cut the validation short.
    pub interrupted: bool,
}

/// Builds the topology, runs the phases, removes the topology.
pub fn run(spec: &ValidationSpec, interrupt: &Shutdown) -> Result<Validation, LinkemError> {
    let lab = Lab::build(&LabSpec::default())?;
    let result = run_in_lab(&lab, spec, interrupt);
    lab.teardown()?;
    result
}

fn udp_in(ns: &str, addr: SocketAddr) -> Result<UdpSocket, LinkemError> {
    in_namespace(ns, || UdpSocket::bind(addr))?.map_err(|e| LinkemError::io("binding UDP", e))
}

fn run_in_lab(
    lab: &Lab,
    spec: &ValidationSpec,
    interrupt: &Shutdown,
) -> Result<Validation, LinkemError> {
    let (left, right) = (&lab.left_ns()[0], &lab.right_ns()[0]);
    let (la, ra) = (lab.left_addr(0), lab.right_addr(0));
    let echo = udp_in(right, SocketAddr::from((ra, 0)))?;
    let echo_addr = echo
        .local_addr()
        .map_err(|e| LinkemError::io("echo address", e))?;
    let client = udp_in(left, SocketAddr::from((la, 0)))?;
    let delay_rtt: f64 = spec
        .links
        .iter()
        .map(|c| c.delay.as_nanos() as f64 / 1000.0)
        .sum();
    let interval = Duration::from_micros((delay_rtt as u64 * 2).max(2_000));
    let rtt = || {
        probe::udp_rtt(
            &client,
            echo_addr,
            spec.rtt_probes,
            64,
            interval,
            Duration::from_secs(1),
        )
    };
    let stop_echo = AtomicBool::new(false);
    std::thread::scope(|s| {
        let echo_thread = s.spawn(|| probe::udp_echo(&echo, &stop_echo));
        let r = (|| {
            let kernel_rtt = rtt()?;
            let router = in_namespace(lab.router_ns(), || {
                let mut rs = RouterSpec::new(LEFT_IF, RIGHT_IF);
                rs.offload = spec.offload;
                Router::setup(&rs)
            })??;
            let quiet = EmulatorOptions {
                log: None,
                ..spec.options.clone()
            };
            let mut v = Validation {
                kernel_rtt,
                zero_rtt: None,
                emulated_rtt: None,
                configured_rtt_us: delay_rtt,
                rtt_error_vs_kernel_pct: None,
                rtt_error_vs_zero_pct: None,
                loss: None,
                configured_loss: spec.links[0].loss.mean(),
                loss_bound_99: 0.0,
                bulk: None,
                bulk_rtt_us: None,
                interrupted: false,
            };
            let zero = [LinkConfig::default(), LinkConfig::default()];
            v.zero_rtt = Some(phase(&router, zero, &quiet, rtt)?);
            if interrupt.requested() {
                v.interrupted = true;
                return Ok(v);
            }
            let emulated = phase(&router, spec.links.clone(), &spec.options, || {
                let r = rtt()?;
                let loss = if spec.loss_datagrams > 0 {
                    let rx = udp_in(right, SocketAddr::from((ra, 0)))?;
                    let to = rx.local_addr().map_err(|e| LinkemError::io("address", e))?;
                    Some(probe::udp_loss(&client, &rx, to, spec.loss_datagrams, 20)?)
                } else {
                    None
                };
                Ok((r, loss))
            })?;
            let (r, loss) = emulated.result;
            let err = |base: f64| (r.p50_us - base - delay_rtt) / delay_rtt * 100.0;
            if r.answered > 0 && delay_rtt > 0.0 {
                v.rtt_error_vs_kernel_pct = Some(err(v.kernel_rtt.p50_us));
                v.rtt_error_vs_zero_pct = v.zero_rtt.as_ref().map(|z| err(z.result.p50_us));
            }
            v.emulated_rtt = Some(Phase {
                result: r,
                emulator: emulated.emulator.clone(),
            });
            if let Some(l) = loss {
                let n = l.sent.max(1) as f64;
                let p = v.configured_loss;
                v.loss_bound_99 = 2.576 * (p * (1.0 - p) / n).sqrt();
                v.loss = Some(Phase {
                    result: l,
                    emulator: emulated.emulator,
                });
            }
            if interrupt.requested() {
                v.interrupted = true;
                return Ok(v);
            }
            if let Some(links) = &spec.bulk_links {
                v.bulk_rtt_us = Some(
                    links
                        .iter()
                        .map(|c| c.delay.as_nanos() as f64 / 1000.0)
                        .sum(),
                );
                let listener = in_namespace(right, || TcpListener::bind((ra, 0)))?
                    .map_err(|e| LinkemError::io("binding the bulk listener", e))?;
                let to = listener
                    .local_addr()
                    .map_err(|e| LinkemError::io("address", e))?;
                v.bulk = Some(phase(&router, links.clone(), &quiet, || {
                    let tx = in_namespace(left, || TcpStream::connect(to))?
                        .map_err(|e| LinkemError::io("connecting the bulk transfer", e))?;
                    probe::tcp_bulk(
                        tx,
                        &listener,
                        Duration::from_millis(500),
                        spec.bulk_duration,
                    )
                })?);
            }
            v.interrupted = interrupt.requested();
            Ok(v)
        })();
        stop_echo.store(true, Ordering::Relaxed);
        let _ = echo_thread.join();
        r
    })
}

/// Runs the emulator while `measure` runs.
fn phase<T: Send>(
    router: &Router,
    links: [LinkConfig; 2],
    options: &EmulatorOptions,
    measure: impl FnOnce() -> Result<T, LinkemError> + Send,
) -> Result<Phase<T>, LinkemError> {
    let stop = Shutdown::new()
        .map_err(|e| LinkemError::io("shutdown latch", std::io::Error::other(e.to_string())))?;
    std::thread::scope(|s| {
        let em = s.spawn(|| emulator::run(router.tuns(), links, options, &stop));
        // Let the forwarding threads start before measuring.
        std::thread::sleep(Duration::from_millis(50));
        let result = measure();
        stop.trigger();
        let emulator = em.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        Ok(Phase {
            result: result?,
            emulator,
        })
    })
}
