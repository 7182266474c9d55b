//! Running one point of each experiment (rtt, bandwidth, contention) and
//! recording it.

use super::lab::Tbf;
use super::procs::Proc;
use super::qdisc::Sampler;
use super::{read_json, Ctx, LinkSpecArgs, PointDone, PORT, TIMELINE_EVERY, TIMELINE_PACKETS, VIP};
use crate::run::unix_now;
use crate::run::window::{edge, gated, Roles};
use crate::validity::{self, Evidence, Gate, Validity, WindowCpu};
use crate::{
    analyse_contention, apply_host_queue, bytes_label, summarise_host_queue, summarise_rtt,
    transfer_result, Bottleneck, ContentionSetup, CpuUse, ExpKind, LinkInfo, ProbeRtt,
    ProbeTransfer, SingleIpPoint, SingleIpRecord, System, FAIR_JAIN, FAIR_WINDOW_S, LINK_QUEUE,
    SINGLEIP_POINT_SCHEMA,
};
use anyhow::{anyhow, bail, Context};
use connlab_os::window::WindowSnapshot;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

impl Ctx<'_> {
    /// The link of a group's points (the NAT switch's queue for `nat`'s
    /// contention points only).
    pub(super) fn link_of(&self, kind: ExpKind, system: System) -> LinkInfo {
        let e = self.exp;
        let plain = |delay: Option<Duration>, rate: Option<u64>| LinkInfo {
            delay_us: delay.map_or(0, |d| d.as_micros() as u64),
            rate_bps: rate,
            queue_packets: rate.map(|_| LINK_QUEUE),
            bottleneck: None,
            switch_queue_packets: None,
        };
        match kind {
            ExpKind::Rtt => {
                let r = e.rtt.as_ref();
                plain(r.map(|r| r.delay.0), r.and_then(|r| r.link_rate_bps()))
            }
            ExpKind::Bandwidth => {
                let b = e.bandwidth.as_ref();
                plain(b.map(|b| b.delay.0), b.and_then(|b| b.link_rate_bps()))
            }
            ExpKind::Contention => {
                let c = e.contention.as_ref();
                LinkInfo {
                    delay_us: c.map_or(0, |c| c.delay.0.as_micros() as u64),
                    rate_bps: c.map(|c| c.rate.0),
                    queue_packets: c.map(|c| c.queue),
                    bottleneck: c.map(|c| c.bottleneck),
                    switch_queue_packets: c
                        .and_then(|c| c.nat_switch_queue)
                        .filter(|_| system == System::Nat),
                }
            }
        }
    }

    /// Runs the points of one (repetition, experiment, system) group and
    /// hands each result to `done` as it finishes.
    pub(super) fn run_group(
        &self,
        system: System,
        kind: ExpKind,
        points: &[&SingleIpPoint],
        logs: &Path,
        done: &mut PointDone<'_>,
    ) -> anyhow::Result<()> {
        let link = self.link_of(kind, system);
        let shared_linkem = match kind {
            ExpKind::Contention => None,
            _ => Some(self.linkem(
                &LinkSpecArgs {
                    delay: Duration::from_micros(link.delay_us),
                    rate: link.rate_bps.zip(link.queue_packets),
                    log: None,
                    per_packet: false,
                },
                logs,
                "group",
            )?),
        };
        let procs = self.start_system(system, logs)?;
        // Every process of the group by role; the probes each point starts
        // end inside its window and count with the runner once reaped.
        let roles = Roles::default()
            .with("front", procs.first().map(|p| p.child.pid()))
            .with("nodes", procs.iter().skip(1).map(|p| p.child.pid()))
            .with("servers", self.node_servers.iter().copied())
            .with("linkem", shared_linkem.iter().map(|p| p.child.pid()));
        for p in points {
            if self.shutdown.requested() {
                bail!("interrupted");
            }
            let began = Instant::now();
            let r = self.measure_with_attempts(kind, p, logs, &procs, &roles, &link);
            done(p, r, began.elapsed())?;
        }
        drop(procs);
        drop(shared_linkem);
        Ok(())
    }

    /// Measures a point until it passes its gates or the attempts run out
    /// (a failed `machine` gate alone is not measured again); the last
    /// attempt is kept, with its gates.
    fn measure_with_attempts(
        &self,
        kind: ExpKind,
        p: &SingleIpPoint,
        logs: &Path,
        procs: &[Proc],
        roles: &Roles,
        link: &LinkInfo,
    ) -> anyhow::Result<SingleIpRecord> {
        let mut tries = 1;
        loop {
            let mut rec = match kind {
                ExpKind::Rtt => self.rtt_point(p, logs, roles),
                ExpKind::Bandwidth => self.bandwidth_point(p, logs, procs, roles),
                ExpKind::Contention => self.contention_point(p, logs, roles, link),
            }?;
            rec.link = link.clone();
            let evidence = Evidence {
                cpu: gated(rec.checked.window_cpu.as_ref()),
                machine: rec
                    .checked
                    .machine
                    .clone()
                    .map(|m| (m, self.machine.clone())),
                ..Evidence::default()
            };
            let mut gates = Vec::new();
            if let (Some(limit), Some((done, asked, what))) =
                (self.exp.validity.completion.0, self.completion(p, &rec))
            {
                let share = if asked > 0 {
                    done as f64 / asked as f64
                } else {
                    0.0
                };
                gates.push(Gate::at_least(
                    "completion",
                    share,
                    limit,
                    format!("{done} of {asked} {what}"),
                ));
            }
            gates.extend(validity::gates(&self.exp.validity, &evidence));
            let v = Validity::of(gates, tries);
            let again = v.worth_retrying() && tries < self.attempts && !self.shutdown.requested();
            rec.checked.validity = Some(v);
            if !again {
                return Ok(rec);
            }
            tries += 1;
        }
    }

    /// What a point completed of what it attempted: round trips measured
    /// of those asked (rtt), transfers received whole of those asked
    /// (bandwidth), streams received whole of those meant to finish
    /// (contention: the foreground, and the backgrounds unless they are
    /// stopped after a smaller foreground).
    fn completion(
        &self,
        p: &SingleIpPoint,
        rec: &SingleIpRecord,
    ) -> Option<(u64, u64, &'static str)> {
        match p.experiment {
            ExpKind::Rtt => {
                let asked = self.exp.rtt.as_ref()?.round_trips;
                let got = rec.rtt.as_ref().map_or(0, |r| r.count as u64);
                Some((got, u64::from(asked), "round trips measured"))
            }
            ExpKind::Bandwidth => {
                let asked = self.exp.bandwidth.as_ref()?.transfers_of(p.param);
                let whole = rec.transfers.iter().filter(|t| t.got == t.size).count() as u64;
                Some((whole, u64::from(asked), "transfers received whole"))
            }
            ExpKind::Contention => {
                let bg = self.exp.contention.as_ref()?.background.0;
                let c = rec.contention.as_ref()?;
                let meant: Vec<&crate::StreamResult> = c
                    .streams
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i == 0 || p.param >= bg)
                    .map(|(_, s)| s)
                    .collect();
                let whole = meant.iter().filter(|s| s.got >= s.size).count() as u64;
                Some((
                    whole,
                    meant.len() as u64,
                    "streams meant to finish received whole",
                ))
            }
        }
    }

    /// Opens a point's window: the edge before its probes start.
    fn window_open(&self, roles: &Roles) -> WindowSnapshot {
        edge(roles)
    }

    /// Closes a point's window after its probes ended (and were reaped).
    fn window_close(&self, roles: &Roles, before: &WindowSnapshot) -> WindowCpu {
        WindowCpu::between(before, &edge(roles), &self.watched)
    }

    pub(super) fn record(&self, p: &SingleIpPoint) -> SingleIpRecord {
        SingleIpRecord {
            schema: SINGLEIP_POINT_SCHEMA.into(),
            id: p.id(),
            point: p.clone(),
            placement: self.placement.clone(),
            link: LinkInfo {
                delay_us: 0,
                rate_bps: None,
                queue_packets: None,
                bottleneck: None,
                switch_queue_packets: None,
            },
            congestion_control: self.exp.congestion_control.clone(),
            rtt: None,
            transfers: Vec::new(),
            contention: None,
            cpu: None,
            warnings: Vec::new(),
            finished_unix_s: 0.0,
            checked: validity::Checked {
                validity: None,
                machine: Some(connlab_os::Environment::capture().fingerprint()),
                window_cpu: None,
            },
        }
    }

    pub(super) fn client(&self, i: usize, args: &[String], log: &Path) -> anyhow::Result<Proc> {
        let mut all: Vec<String> = vec!["singleip".into(), "probe".into()];
        all.extend(args.iter().cloned());
        self.connlab(
            &self.lab.clients[i],
            self.placement.clients,
            &all,
            log,
            None,
        )
    }

    pub(super) fn rtt_point(
        &self,
        p: &SingleIpPoint,
        logs: &Path,
        roles: &Roles,
    ) -> anyhow::Result<SingleIpRecord> {
        let r = self.exp.rtt.as_ref().context("no [rtt] section")?;
        let json = logs.join(format!("{}.rtt.json", p.id()));
        let before = self.window_open(roles);
        let mut c = self.client(
            0,
            &[
                "rtt".into(),
                "--target".into(),
                format!("{VIP}:{PORT}"),
                "--count".into(),
                r.round_trips.to_string(),
                "--warmup".into(),
                r.warmup.to_string(),
                "--json".into(),
                json.display().to_string(),
            ],
            &logs.join(format!("{}.client.log", p.id())),
        )?;
        let secs = 60 + u64::from(r.round_trips + r.warmup) / 100;
        c.wait(Instant::now() + Duration::from_secs(secs), self.shutdown)?;
        let window = self.window_close(roles, &before);
        let probe: ProbeRtt = read_json(&json)?;
        let mut rec = self.record(p);
        rec.checked.window_cpu = Some(window);
        rec.rtt = Some(summarise_rtt(&probe.samples_us).context("no round trips measured")?);
        rec.finished_unix_s = unix_now();
        let _ = std::fs::remove_file(&json);
        Ok(rec)
    }

    pub(super) fn bandwidth_point(
        &self,
        p: &SingleIpPoint,
        logs: &Path,
        procs: &[Proc],
        roles: &Roles,
    ) -> anyhow::Result<SingleIpRecord> {
        let b = self
            .exp
            .bandwidth
            .as_ref()
            .context("no [bandwidth] section")?;
        let count = b.transfers_of(p.param);
        let json = logs.join(format!("{}.get.json", p.id()));
        let before = self.window_open(roles);
        let mut c = self.client(
            0,
            &[
                "get".into(),
                "--target".into(),
                format!("{VIP}:{PORT}"),
                "--size".into(),
                p.param.to_string(),
                "--count".into(),
                count.to_string(),
                "--json".into(),
                json.display().to_string(),
            ],
            &logs.join(format!("{}.client.log", p.id())),
        )?;
        // CPU of the front process (first) and of the app-nodes (the rest
        // of an I/O server system's processes) while the transfers run.
        let cpu_of = |ps: &[Proc]| -> Option<f64> {
            ps.iter()
                .map(|p| connlab_os::cgroup::process_cpu_s(p.child.pid()))
                .sum()
        };
        let (front, nodes) = procs.split_at(procs.len().min(1));
        let began = Instant::now();
        let (f0, n0) = (cpu_of(front), cpu_of(nodes));
        let secs = 60 + p.param.saturating_mul(u64::from(count)) * 8 / 20_000_000;
        c.wait(Instant::now() + Duration::from_secs(secs), self.shutdown)?;
        let (f1, n1) = (cpu_of(front), cpu_of(nodes));
        let elapsed_s = began.elapsed().as_secs_f64();
        let window = self.window_close(roles, &before);
        let probe: Vec<ProbeTransfer> = read_json(&json)?;
        let mut rec = self.record(p);
        rec.checked.window_cpu = Some(window);
        rec.transfers = probe.iter().map(transfer_result).collect();
        rec.cpu = Some(CpuUse {
            front_cpu_s: f0.zip(f1).map(|(a, b)| b - a),
            nodes_cpu_s: n0.zip(n1).filter(|_| !nodes.is_empty()).map(|(a, b)| b - a),
            bytes: probe.iter().map(|t| t.got).sum(),
            elapsed_s,
        });
        let short = rec.transfers.iter().filter(|t| t.got != t.size).count();
        if short > 0 {
            rec.warnings
                .push(format!("{short} transfers ended before their last byte"));
        }
        rec.finished_unix_s = unix_now();
        let _ = std::fs::remove_file(&json);
        Ok(rec)
    }

    pub(super) fn contention_point(
        &self,
        p: &SingleIpPoint,
        logs: &Path,
        roles: &Roles,
        info: &LinkInfo,
    ) -> anyhow::Result<SingleIpRecord> {
        let c = self
            .exp
            .contention
            .as_ref()
            .context("no [contention] section")?;
        let id = p.id();
        let pkts = logs.join(format!("{id}.pkts.csv"));
        let front = c.bottleneck == Bottleneck::Front;
        let link = LinkSpecArgs {
            delay: c.delay.0,
            rate: (!front).then_some((c.rate.0, c.queue)),
            log: Some(pkts.clone()),
            per_packet: true,
        };
        // The host queues, in the order a packet toward the clients
        // crosses them: the NAT switch's port, then the front's interface.
        let mut tbfs = Vec::new();
        let mut queues: Vec<(String, String, String)> = Vec::new();
        if let Some(n) = info.switch_queue_packets {
            tbfs.push(Tbf::install(&self.lab.switch, "front", c.rate.0, n)?);
            queues.push((
                "switch port".into(),
                self.lab.switch.clone(),
                "front".into(),
            ));
        }
        if front {
            tbfs.push(Tbf::install(&self.lab.front, "eth0", c.rate.0, c.queue)?);
            queues.push(("front eth0".into(), self.lab.front.clone(), "eth0".into()));
        }
        let mut lk = self.linkem(&link, logs, &id)?;
        std::thread::sleep(Duration::from_millis(300));
        let epoch = unix_now() + 1.0;
        let fg_at = epoch + c.foreground_delay.0.as_secs_f64();
        let bg = c.background.0;
        let stop = (p.param < bg).then_some(fg_at + c.background_after_small.0.as_secs_f64());
        let target = format!("{VIP}:{PORT}");
        let bin = c.bin.0.as_secs_f64();
        let get = |size: u64, start: f64, json: &Path| {
            let mut a: Vec<String> = vec![
                "get".into(),
                "--target".into(),
                target.clone(),
                "--size".into(),
                size.to_string(),
                "--start-at".into(),
                format!("{start:.6}"),
                "--epoch".into(),
                format!("{epoch:.6}"),
                "--bin".into(),
                format!("{bin}"),
                "--json".into(),
                json.display().to_string(),
            ];
            if let (Some(s), true) = (stop, size >= bg) {
                a.push("--stop-at".into());
                a.push(format!("{s:.6}"));
            }
            a
        };
        let roles = roles.clone().with("linkem", [lk.child.pid()]);
        let targets: Vec<(String, String)> = queues
            .iter()
            .map(|(_, n, d)| (n.clone(), d.clone()))
            .collect();
        let sampler = if targets.is_empty() {
            None
        } else {
            Some(Sampler::start(&targets)?)
        };
        // The sampler's tc processes are the experiment's own work.
        let roles = match &sampler {
            Some(s) => roles.with("sampler", s.pids().iter().copied()),
            None => roles,
        };
        let before = self.window_open(&roles);
        let names = ["fg", "bg1", "bg2"];
        let jsons: Vec<PathBuf> = names
            .iter()
            .map(|n| logs.join(format!("{id}.{n}.json")))
            .collect();
        let mut clients = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let (size, start) = if i == 0 {
                (p.param, fg_at)
            } else {
                (bg, epoch)
            };
            clients.push(self.client(
                i,
                &get(size, start, &jsons[i]),
                &logs.join(format!("{id}.{name}.log")),
            )?);
        }
        let secs = c.foreground_delay.0.as_secs_f64()
            + (bg.max(p.param) as f64 * 8.0 * 3.0 / c.rate.0 as f64) * 2.0
            + 60.0;
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        for cl in &mut clients {
            cl.wait(deadline, self.shutdown)?;
        }
        let window = self.window_close(&roles, &before);
        let samples = sampler.map(Sampler::finish).transpose();
        lk.stop(Duration::from_secs(30));
        drop(lk);
        drop(tbfs);
        let mut streams = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let t: Vec<ProbeTransfer> = read_json(&jsons[i])?;
            let t = t.into_iter().next().context("a client wrote no transfer")?;
            streams.push((name.to_string(), t));
            let _ = std::fs::remove_file(&jsons[i]);
        }
        let setup = ContentionSetup {
            background: bg,
            bin_s: bin,
            early_window_s: c.early_window.0.as_secs_f64(),
            rate_bps: c.rate.0,
            delay_ms: c.delay.0.as_secs_f64() * 1e3,
            client_addrs: [
                "198.18.1.1".into(),
                "198.18.1.2".into(),
                "198.18.1.3".into(),
            ],
            timeline_every: u32::try_from(bg.max(p.param) / 1448 / TIMELINE_PACKETS)
                .unwrap_or(u32::MAX)
                .max(TIMELINE_EVERY),
            fair_window_s: FAIR_WINDOW_S,
            fair_jain: FAIR_JAIN,
        };
        let mut rec = self.record(p);
        rec.checked.window_cpu = Some(window);
        let mut reader = File::open(&pkts)
            .map(std::io::BufReader::new)
            .with_context(|| format!("opening linkem's log {}", pkts.display()))?;
        let mut result = analyse_contention(&setup, epoch, &streams, Some(&mut reader))
            .map_err(|e| anyhow!("{}: {e}", pkts.display()))?;
        let _ = std::fs::remove_file(&pkts);
        match samples {
            Ok(Some(samples)) => {
                let names: Vec<String> = queues.iter().map(|(n, _, _)| n.clone()).collect();
                let fg = &streams[0].1;
                let fg_run = fg.t_last.map(|l| (fg.t0, l));
                match summarise_host_queue(&names, &samples, c.rate.0, fg_run) {
                    Some(q) => apply_host_queue(&mut result, q, front),
                    None => rec.warnings.push("no sample of the host queues".into()),
                }
            }
            Ok(None) => {}
            Err(e) => rec
                .warnings
                .push(format!("sampling the host queues: {e:#}")),
        }
        for s in &result.streams {
            if s.got < s.size && s.size < bg.max(p.param) {
                rec.warnings.push(format!(
                    "{} received {} of {}",
                    s.name,
                    s.got,
                    bytes_label(s.size)
                ));
            }
        }
        rec.contention = Some(result);
        rec.finished_unix_s = unix_now();
        Ok(rec)
    }
}
