//! One run from start to end: the pool, the sockets, the mode's driver
//! ([`crate::parallel::run_parallel`] or [`crate::rtc::run_rtc`]) and the
//! result. What the drivers share (spawning, the coordinator, what it
//! collects) is in [`crate::runtime`]; the line threads both build are
//! [`crate::line::line_threads`].

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use crate::bench::measure_handoff;
use crate::config::{LinkConfig, Mode, PipelineConfig};
use crate::pool::BufferPool;
use crate::results::{assemble, PipelineResult};
use crate::runtime::{thread_error, Ctx, PipelineError};
use crate::{parallel, rtc};

fn udp_pair(
    sender: SocketAddr,
    receiver: SocketAddr,
) -> Result<(UdpSocket, UdpSocket), PipelineError> {
    let open = |addr: SocketAddr, what: &str| -> Result<UdpSocket, PipelineError> {
        let domain = socket2::Domain::for_address(addr);
        let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None)
            .map_err(|e| thread_error(what, e))?;
        // Large buffers: a burst of 32 KiB frames must not overflow at once.
        let _ = s.set_recv_buffer_size(8 << 20);
        let _ = s.set_send_buffer_size(8 << 20);
        s.bind(&addr.into()).map_err(|e| thread_error(what, e))?;
        s.set_nonblocking(true).map_err(|e| thread_error(what, e))?;
        Ok(s.into())
    };
    let a = open(sender, &format!("binding the sender socket to {sender}"))?;
    let b = open(
        receiver,
        &format!("binding the receiver socket to {receiver}"),
    )?;
    let a_addr = a
        .local_addr()
        .map_err(|e| thread_error("sender address", e))?;
    let b_addr = b
        .local_addr()
        .map_err(|e| thread_error("receiver address", e))?;
    a.connect(b_addr)
        .map_err(|e| thread_error(&format!("connecting to {b_addr}"), e))?;
    b.connect(a_addr)
        .map_err(|e| thread_error(&format!("connecting to {a_addr}"), e))?;
    Ok((a, b))
}

/// Runs the pipeline once. `stop` set to true (e.g. by Ctrl-C) ends the run
/// promptly with partial results and `interrupted: true`; so does the time
/// limit. Every thread has exited when this returns.
pub fn run(config: &PipelineConfig, stop: &AtomicBool) -> Result<PipelineResult, PipelineError> {
    config.validate()?;
    let handoff = measure_handoff(config.handoff_items);
    let buffers = config
        .pool_buffers
        .unwrap_or_else(|| config.default_pool_buffers());
    let pool = BufferPool::new(config.pool, buffers, config.buffer_size())?;
    let udp = match &config.link {
        LinkConfig::Udp {
            sender_addr,
            receiver_addr,
            ..
        } => Some(udp_pair(*sender_addr, *receiver_addr)?),
        LinkConfig::Memory { .. } => None,
    };
    let threads = config.thread_count();
    let ctx = Ctx::new(config, &pool, threads);
    let wall_start = Instant::now();
    let mut timed_out = false;
    let mut interrupted = false;
    let collected = match config.mode {
        Mode::LayerParallel => {
            parallel::run_parallel(&ctx, udp, stop, &mut timed_out, &mut interrupted)?
        }
        Mode::RunToCompletion { threads } => {
            rtc::run_rtc(&ctx, threads, udp, stop, &mut timed_out, &mut interrupted)?
        }
    };
    let _ = wall_start;
    if let Some(f) = ctx.failure() {
        return Err(PipelineError::Thread(f));
    }
    if !collected.panicked.is_empty() {
        return Err(PipelineError::Thread(format!(
            "panicked: {}",
            collected.panicked.join(", ")
        )));
    }
    let result = assemble(
        &ctx,
        &collected,
        handoff.ns_per_item,
        timed_out,
        interrupted,
    );
    drop(ctx);
    Ok(result)
}

#[cfg(test)]
mod line_alone_tests {
    use super::*;
    use crate::config::ConfigError;
    use std::time::Duration;

    #[test]
    fn the_line_alone_carries_every_message() {
        for size in [1024, 32 * 1024] {
            let cfg = PipelineConfig {
                layers: 0,
                message_size: size,
                messages: 300,
                ..PipelineConfig::default()
            };
            assert!(cfg.is_line_alone());
            let r = run(&cfg, &AtomicBool::new(false)).expect("run");
            assert!(r.verified, "{size}: {:?}", r.errors);
            assert_eq!(r.messages_delivered, 300);
            assert!(r.per_layer.is_empty());
            assert_eq!(r.stages.len(), 4, "source, two lines, sink");
            assert!(r.projection.layers_only_mbit_s.is_none());
        }
    }

    #[test]
    fn no_layers_needs_a_lossless_memory_line_and_layer_parallel() {
        let lossy = PipelineConfig {
            layers: 0,
            link: LinkConfig::Memory {
                bandwidth_bit_s: None,
                latency: Duration::ZERO,
                loss: 0.01,
                reorder: 0.0,
                duplicate: 0.0,
            },
            ..PipelineConfig::default()
        };
        assert_eq!(lossy.validate(), Err(ConfigError::Layers(0)));
        let rtc = PipelineConfig {
            layers: 0,
            mode: Mode::RunToCompletion { threads: 1 },
            ..PipelineConfig::default()
        };
        assert_eq!(rtc.validate(), Err(ConfigError::Layers(0)));
    }
}
