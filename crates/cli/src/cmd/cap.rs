//! `connlab cap`: runs a command (a backend: nginx, `connlab serve`, ...)
//! under a CPU quota, so that it, not the machine's shared cores, is the
//! bottleneck of an experiment.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_os::cgroup::{parse_share, CgroupVersion, CpuQuota};
use connlab_os::{CpuTimes, Shutdown};
use serde::Serialize;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Flags of `connlab cap`.
#[derive(Args, Debug)]
#[command(after_help = "\
The command and every process it starts run in a new cgroup limited to --cpu of one
CPU (cgroup v1 cpu.cfs_quota_us, or v2 cpu.max; needs root). SIGINT/SIGTERM are passed
to the command; when it ends the group is removed and --stats gets its CPU time (user,
system, of the command and its reaped children) and how often the quota throttled it.

Example:
  connlab cap --cpu 25% --stats b1.json -- nginx -c /etc/connlab/b1.conf")]
pub(crate) struct CapArgs {
    /// Share of one CPU: 0.25 or 25% (up to 6400%).
    #[arg(long, value_parser = parse_share)]
    cpu: f64,
    /// Name of the group (`connlab-<pid>-NAME`).
    #[arg(long, default_value = "cap")]
    name: String,
    /// Write the quota and the command's CPU use as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    command: Vec<std::ffi::OsString>,
}

#[derive(Serialize)]
struct CapStats {
    schema: &'static str,
    command: Vec<String>,
    cpu_share: f64,
    cgroup_version: u8,
    cgroup: String,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    wall_s: f64,
    throttled_periods: Option<u64>,
    throttled_s: Option<f64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
}

/// Runs the command under the quota until it ends.
pub(crate) fn run(args: CapArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    if !args
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        || args.name.is_empty()
    {
        return Err(Exit::usage(anyhow!(
            "--name {:?}: use letters, digits and _",
            args.name
        )));
    }
    let quota = CpuQuota::create(&args.name, args.cpu).map_err(|e| anyhow!("{e}"))?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let procs = CString::new(quota.procs_file().as_os_str().as_bytes())
        .map_err(|_| anyhow!("cgroup path holds a NUL byte"))?;
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    // SAFETY: open/write/close are async-signal-safe; writing "0" to
    // cgroup.procs moves the writing process (the child, before exec).
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
            Ok(())
        });
    }
    let cpu0 = CpuTimes::self_and_children();
    let started = Instant::now();
    let mut child = connlab_os::child::Child::spawn(&mut cmd).map_err(|e| {
        Exit::usage(anyhow!(
            "starting {}: {e}",
            args.command[0].to_string_lossy()
        ))
    })?;
    eprintln!(
        "connlab cap: {} under {:.0}% of a CPU ({})",
        args.command[0].to_string_lossy(),
        args.cpu * 100.0,
        quota.path().display()
    );
    let mut forwarded = false;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for the command")? {
            break status;
        }
        if shutdown.wait(Duration::from_millis(100)) && !forwarded {
            let _ = child.signal(shutdown.signal().unwrap_or(libc::SIGTERM));
            forwarded = true;
        }
    };
    let cpu = CpuTimes::self_and_children().since(&cpu0);
    let throttling = quota.throttling();
    if let Some(path) = &args.stats {
        let stats = CapStats {
            schema: "connlab.cap.stats/1",
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cpu_share: args.cpu,
            cgroup_version: match quota.version() {
                CgroupVersion::V1 => 1,
                CgroupVersion::V2 => 2,
            },
            cgroup: quota.path().display().to_string(),
            cpu_user_s: cpu.user_s,
            cpu_sys_s: cpu.sys_s,
            wall_s: started.elapsed().as_secs_f64(),
            throttled_periods: throttling.map(|t| t.0),
            throttled_s: throttling.map(|t| t.1),
            exit_code: status.code(),
            signal: status.signal(),
        };
        crate::cmd::write_json("--stats", path, &stats)?;
    }
    drop(quota);
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        // Ended by the signal we passed on: a normal stop.
        None if forwarded => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}
