//! Running an experiment: the sweep every `connlab sweep` performs, kind by
//! kind, with what all kinds share (the results directory, the resume check,
//! progress, interruption). The CLI keeps the flags, draws [`Progress`] and
//! maps a [`SweepOutcome`] or [`RunError`] to its exit code; nothing here
//! prints.
//!
//! One runner per kind, each behind a public `sweep_<kind>` entry point that
//! the kind's registry entry (`connlab-kinds`) calls: `locality.rs` with
//! `web.rs` (child processes in network namespaces), `pipeline.rs` (in this
//! process), `singleip/` (namespaces and the user-space link emulator),
//! `peers/` and `loadgen.rs` (processes on loopback); `child.rs` starts,
//! signals and stops child processes. [`guarded`] is what every sweep does
//! around its runner.

pub mod child;
pub mod compare_run;
mod loadgen;
mod locality;
mod peers;
mod pipeline;
pub mod sessions;
mod singleip;
mod web;
pub(crate) mod window;

pub use loadgen::estimate as loadgen_estimate;
pub use locality::estimate;

use crate::{
    Experiment, LoadgenExperiment, PeersExperiment, PipelineExperiment, SingleIpExperiment,
};
use connlab_os::Shutdown;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long past its warm-up and duration a load client may run before it
/// is killed (the peers and loadgen runners).
pub(crate) const CLIENT_SLACK: Duration = Duration::from_secs(60);

/// What a sweep is asked to do.
#[derive(Clone, Debug)]
pub struct SweepRequest {
    /// The experiment file's text as read (copied into the results directory).
    pub text: String,
    /// The results directory (absolute: child processes resolve paths from
    /// their own directories).
    pub out: PathBuf,
    /// Run the `[quick]` matrix.
    pub quick: bool,
    /// Discard earlier results first.
    pub fresh: bool,
    /// Peers only: record CPU profiles as `profile = true` does, whatever
    /// the file says (`connlab sweep --profile`).
    pub profile: bool,
    /// The `connlab` binary the runners start as children (`serve`, `load`,
    /// `gateway`, `cap`).
    pub connlab: PathBuf,
    /// Attempts per point, the first included (`--attempts`): a point that
    /// fails a gate is measured again until one passes or these run out.
    /// `None`: the file's `validity.attempts`, else
    /// [`DEFAULT_ATTEMPTS`](crate::validity::DEFAULT_ATTEMPTS).
    pub attempts: Option<u32>,
    /// `--ci-target`: a point's p99 must have a 95 % interval no wider than
    /// this share of it, else it is measured again for twice as long.
    pub ci_target: Option<f64>,
    /// `--ci-max-duration`: the longest measured seconds `--ci-target` may
    /// extend a point to (default: four times the file's duration).
    pub ci_max_duration: Option<f64>,
    /// Locality and web: run this many rounds instead of the file's
    /// repetitions (`connlab sweep --max-repetitions` raises it one round at
    /// a time while claims cannot be judged).
    pub repetitions: Option<u32>,
}

/// How a sweep went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// The results directory.
    pub out: PathBuf,
    /// Points (or runs) in the plan.
    pub total: usize,
    /// Points finished by an earlier sweep and kept.
    pub kept: usize,
    /// Points measured now.
    pub measured: usize,
    /// Ids of the points that failed (or whose results did not verify).
    pub failed: Vec<String>,
    /// The sweep stopped on a termination signal; running it again resumes.
    pub interrupted: bool,
    /// Problems after the last point that cost no result (tearing down).
    pub warnings: Vec<String>,
}

/// Why a sweep could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The experiment, the request or the results directory is unusable
    /// (exit 2 in the CLI).
    #[error("{0}")]
    Input(String),
    /// Running failed outside any one point (exit 1 in the CLI).
    #[error("{0}")]
    Failed(String),
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> RunError {
        RunError::Failed(format!("{e:#}"))
    }
}

/// Where a sweep reports what it does; the CLI draws it (a bar on a
/// terminal, a line per point otherwise).
pub trait Progress {
    /// A line about the sweep as a whole (what runs, what was kept).
    fn note(&mut self, line: &str);
    /// The sweep starts: `total` points in the plan, `kept` of them done before.
    fn begin(&mut self, total: usize, kept: usize);
    /// A point starts; `eta` is the estimated time left, when the kind
    /// estimates one.
    fn start(&mut self, id: &str, eta: Option<Duration>);
    /// A point ended after `took`; `what` summarises its result or failure.
    fn finish(&mut self, id: &str, took: Duration, what: &str);
    /// The sweep ended (finished, failed or interrupted).
    fn end(&mut self);
}

/// Refuses a file that pins a process to a CPU this machine does not offer
/// (`server_cpu = 7` on two CPUs passed `--dry-run`, then failed every
/// point: issue 29). `pins` lists each pinned CPU with the field naming it.
pub fn check_pinned_cpus(pins: &[(&'static str, usize)]) -> Result<(), RunError> {
    let Ok(allowed) = connlab_os::current_affinity() else {
        return Ok(());
    };
    for (field, cpu) in pins {
        if !allowed.cpus().contains(cpu) {
            return Err(RunError::Input(format!(
                "{field}: CPU {cpu} is not one this process may run on here (CPUs {allowed}); \
                 pin to one of those"
            )));
        }
    }
    Ok(())
}

/// The CPUs named by a CPU-list field (`"0,1"`, `"0-3"`), each with the
/// field's name, for [`check_pinned_cpus`]; an unreadable list names none
/// (parsing reported it).
pub fn listed_cpus(field: &'static str, text: Option<&str>) -> Vec<(&'static str, usize)> {
    text.and_then(|t| connlab_os::CpuList::parse(t).ok())
        .map(|l| l.cpus().iter().map(|&c| (field, c)).collect())
        .unwrap_or_default()
}

/// Checks what parsing cannot for a locality or web file: the descriptors
/// its largest point needs. `connlab sweep --dry-run` calls it too.
pub fn check_locality(exp: &Experiment, quick: bool) -> Result<(), RunError> {
    locality::check_descriptors(exp, &exp.plan(quick))
}

/// Checks what parsing cannot for a pipeline file: that every run of the
/// plan can be set up.
pub fn check_pipeline(exp: &PipelineExperiment, quick: bool) -> Result<(), RunError> {
    for p in &exp.plan(quick) {
        pipeline::run_config(exp, p).map_err(RunError::Input)?;
    }
    Ok(())
}

/// Runs a locality or web sweep (see [`guarded`]).
pub fn sweep_locality(
    exp: &Experiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    guarded(req, Some(exp.validity.keep_awake), progress, |p| {
        locality::sweep(exp, req, p, shutdown)
    })
}

/// Runs a pipeline sweep (in this process).
pub fn sweep_pipeline(
    exp: &PipelineExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    guarded(req, None, progress, |p| {
        pipeline::sweep(exp, req, p, shutdown)
    })
}

/// Runs a single-IP sweep.
pub fn sweep_singleip(
    exp: &SingleIpExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    guarded(req, None, progress, |p| {
        singleip::sweep(exp, req, p, shutdown)
    })
}

/// Runs a peers sweep, its results directory made absolute.
pub fn sweep_peers(
    exp: &PeersExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let req = with_absolute_out(req)?;
    guarded(&req, Some(exp.validity.keep_awake), progress, |p| {
        peers::sweep(exp, &req, p, shutdown)
    })
}

/// Runs a loadgen sweep.
pub fn sweep_loadgen(
    exp: &LoadgenExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    guarded(req, Some(exp.validity.keep_awake), progress, |p| {
        loadgen::sweep(exp, req, p, shutdown)
    })
}

/// What every sweep does around its kind's runner: refuses a results
/// directory of another experiment, and keeps the CPUs from halting with
/// idle-priority spinners while the processes measured wait for work
/// (`keep_awake`: the file's mode, `None` for kinds that measure no
/// waiting process; docs/statistics.md).
pub fn guarded(
    req: &SweepRequest,
    keep_awake: Option<connlab_os::awake::KeepAwakeMode>,
    progress: &mut dyn Progress,
    runner: impl FnOnce(&mut dyn Progress) -> Result<SweepOutcome, RunError>,
) -> Result<SweepOutcome, RunError> {
    refuse_foreign_results(&req.out, &req.text, req.fresh)?;
    let started = (unix_now(), Instant::now());
    let awake = match keep_awake {
        Some(m) => window::keep_awake(m)?,
        None => None,
    };
    if let Some(a) = &awake {
        progress.note(&format!(
            "keep-awake: an idle-priority spinner on each of cpu {} (validity.keep_awake = \"off\" turns it off)",
            a.cpus
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    let outcome = runner(progress);
    if let Ok(o) = &outcome {
        if o.measured > 0 {
            if let Err(e) = sessions::record(&req.out, started, o, req.fresh) {
                progress.note(&format!("warning: {e}"));
            }
        }
    }
    outcome
}

/// Refuses a results directory whose `experiment.toml` is another
/// measurement than `text` (unless `fresh`), for every kind before it
/// writes anything: each kind recognised only its own record, so a
/// pipeline or loadgen sweep replaced a locality sweep's experiment file
/// and the locality sweep could no longer resume (issue 29).
pub(crate) fn refuse_foreign_results(out: &Path, text: &str, fresh: bool) -> Result<(), RunError> {
    if fresh {
        return Ok(());
    }
    let path = out.join("experiment.toml");
    let Ok(old) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    if crate::same_measurement(&old, text) {
        return Ok(());
    }
    let kind = old
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .map_or_else(
            || "another file".to_string(),
            |k| format!("a {k} experiment"),
        );
    Err(RunError::Input(format!(
        "{} holds results of a different experiment file ({kind}, see {}); use another \
         --out, or --fresh to discard them",
        out.display(),
        path.display()
    )))
}

/// `req` with its results directory made absolute: the peers' servers
/// (nginx above all) run with their own prefix directory and would resolve a
/// relative configuration path against it.
fn with_absolute_out(req: &SweepRequest) -> Result<SweepRequest, RunError> {
    let out = std::path::absolute(&req.out)
        .map_err(|e| RunError::Input(format!("resolving {}: {e}", req.out.display())))?;
    Ok(SweepRequest { out, ..req.clone() })
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A flag set once `shutdown` is requested, for code that polls a flag
/// (the pipeline's threads).
pub fn stop_flag(shutdown: &Shutdown) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let shutdown = shutdown.clone();
    std::thread::spawn(move || loop {
        if shutdown.wait(Duration::from_millis(100)) {
            flag.store(true, Relaxed);
            return;
        }
    });
    stop
}

/// Merges shard result files into one result.
pub fn merge_files(files: &[PathBuf]) -> anyhow::Result<connlab_loadgen::LoadResult> {
    use anyhow::Context as _;
    let mut parts = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let result: connlab_loadgen::LoadResult = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a connlab load result", path.display()))?;
        parts.push((path.display().to_string(), result));
    }
    Ok(connlab_loadgen::merge(&parts)?)
}

/// Says what a sweep will run (`name (N points, K kept from before),
/// results in DIR`), starts the progress and returns the outcome to fill in;
/// `unit` names what the plan counts ("points" or "runs").
pub(crate) fn announce(
    progress: &mut dyn Progress,
    name: &str,
    unit: &str,
    total: usize,
    kept: usize,
    quick: bool,
    out: &Path,
) -> SweepOutcome {
    progress.note(&format!(
        "{name} ({total} {unit}{}{}), results in {}",
        if quick { ", quick" } else { "" },
        if kept > 0 {
            format!(", {kept} kept from before")
        } else {
            String::new()
        },
        out.display()
    ));
    progress.begin(total, kept);
    SweepOutcome {
        out: out.to_path_buf(),
        total,
        kept,
        ..SweepOutcome::default()
    }
}

/// [`announce`] for a sweep of points: the kept ones are those `pending`
/// has no id for (their result file exists), the unit "points", the
/// directory and `--quick` from `req`.
pub(crate) fn announce_points<P>(
    progress: &mut dyn Progress,
    name: &str,
    plan: &[P],
    pending: impl Fn(&P) -> Option<String>,
    req: &SweepRequest,
) -> SweepOutcome {
    let kept = plan.iter().filter(|p| pending(p).is_none()).count();
    announce(
        progress,
        name,
        "points",
        plan.len(),
        kept,
        req.quick,
        &req.out,
    )
}

/// A measured point as [`each_point`] records it.
pub(crate) struct Kept {
    /// What the point's progress line says.
    pub summary: String,
    /// The point is kept but counts as failed (its results did not verify).
    pub failed: bool,
}

/// The loop of a point-by-point sweep: the points of `plan` that `pending`
/// names (those not kept from before), in order, until the plan ends or
/// `stopped` says so. `measure` runs one point (`Ok(None)`: interrupted, not
/// kept, the sweep stops; `Err`: the point failed, the sweep goes on) and
/// may note what it does on the progress it is given; `keep` writes a
/// measured point and sums it up (its error ends the sweep).
pub(crate) fn each_point<P, T>(
    plan: &[P],
    progress: &mut dyn Progress,
    outcome: &mut SweepOutcome,
    pending: impl Fn(&P) -> Option<String>,
    stopped: impl Fn() -> bool,
    mut measure: impl FnMut(&P, &str, &mut dyn Progress) -> anyhow::Result<Option<T>>,
    mut keep: impl FnMut(&str, T) -> Result<Kept, RunError>,
) -> Result<(), RunError> {
    for p in plan {
        let Some(id) = pending(p) else {
            continue;
        };
        if stopped() {
            break;
        }
        progress.start(&id, None);
        let began = Instant::now();
        match measure(p, &id, &mut *progress) {
            Ok(Some(result)) => {
                let kept = keep(&id, result)?;
                progress.finish(&id, began.elapsed(), &kept.summary);
                if kept.failed {
                    outcome.failed.push(id);
                }
                outcome.measured += 1;
            }
            Ok(None) => {
                progress.finish(&id, began.elapsed(), "interrupted (not kept)");
                break;
            }
            Err(e) => {
                progress.finish(&id, began.elapsed(), &format!("FAILED: {e:#}"));
                outcome.failed.push(id);
            }
        }
    }
    Ok(())
}

/// The machine a resumed sweep records: the one of its first session, so that
/// resuming (even with nothing left to measure) never rewrites where the
/// earlier points ran. Each point keeps its own environment; when this
/// session runs on another kernel or CPU count, a note says so.
pub(crate) fn sweep_environment(
    earlier: Option<&connlab_os::Environment>,
    progress: &mut dyn Progress,
) -> connlab_os::Environment {
    let now = connlab_os::Environment::capture();
    match earlier {
        None => now,
        Some(first) => {
            if first.kernel != now.kernel || first.cpu_count != now.cpu_count {
                progress.note(&format!(
                    "resuming on another machine: the sweep began on {} ({} CPUs), this session runs on {} ({} CPUs); each point records its own",
                    first.kernel, first.cpu_count, now.kernel, now.cpu_count
                ));
            }
            first.clone()
        }
    }
}

/// What a results directory keeps of a sweep's first session: when it
/// began and on which machine (this session's when it is the first).
pub(crate) struct Session {
    /// Unix seconds.
    pub(crate) started_unix_s: f64,
    /// See [`sweep_environment`].
    pub(crate) environment: connlab_os::Environment,
}

/// Opens `dir` for a point-by-point sweep that begins or resumes now, for
/// every kind whose info file records `quick`, `started_unix_s` and
/// `environment`: refuses an info file it cannot read or one of the other
/// quickness (unless `--fresh`), prepares the directory (see
/// [`ResultsDir::prepare`](crate::ResultsDir::prepare); `extra`: further
/// subdirectories `--fresh` clears) and returns the first session.
pub(crate) fn begin_session(
    dir: &crate::ResultsDir,
    req: &SweepRequest,
    extra: &[&str],
    progress: &mut dyn Progress,
) -> Result<Session, RunError> {
    /// The fields of every kind's info file that a new session keeps.
    #[derive(serde::Deserialize)]
    struct Earlier {
        quick: bool,
        #[serde(default)]
        started_unix_s: Option<f64>,
        #[serde(default)]
        environment: Option<connlab_os::Environment>,
    }
    let mut earlier = None;
    if !req.fresh && dir.info_path().exists() {
        let old: Earlier = dir.read_info().map_err(|e| {
            RunError::Input(format!("{e}: pass --fresh to start over, or another --out"))
        })?;
        if old.quick != req.quick {
            return Err(RunError::Input(format!(
                "{} holds a {} sweep: pass --fresh to start over, or another --out",
                dir.path().display(),
                if req.quick { "full" } else { "--quick" }
            )));
        }
        earlier = Some(old);
    }
    dir.prepare(&req.text, req.fresh, extra)
        .map_err(|e| RunError::Failed(e.to_string()))?;
    let earlier = earlier.as_ref();
    Ok(Session {
        started_unix_s: earlier
            .and_then(|e| e.started_unix_s)
            .unwrap_or_else(unix_now),
        environment: sweep_environment(earlier.and_then(|e| e.environment.as_ref()), progress),
    })
}

/// The id of each point of a plan still to measure: none when `dir` holds
/// its file and `done` accepts the record in it (`done` compares the
/// record's parameters with the plan's, so a point measured otherwise is
/// measured again).
pub(crate) fn pending<'a, P, R: serde::de::DeserializeOwned>(
    dir: &'a crate::ResultsDir,
    id: impl Fn(&P) -> String + 'a,
    done: impl Fn(&R, &P) -> bool + 'a,
) -> impl Fn(&P) -> Option<String> + 'a {
    move |p| {
        let id = id(p);
        let finished = dir.read_point::<R>(&id).is_ok_and(|r| done(&r, p));
        (!finished).then_some(id)
    }
}

/// The machine blocks of a sweep that begins or resumes now: the earlier
/// ones (a directory from before blocks counts as one block on its
/// recorded environment) and, when this machine's fingerprint differs from
/// the last block's, a new block. Returns the blocks and whether a new
/// block began on a directory that holds results (the caller sets the
/// earlier block's results aside, see [`set_aside`]).
pub(crate) fn machine_blocks(
    earlier: Option<(
        &[crate::validity::MachineBlock],
        &connlab_os::Environment,
        f64,
    )>,
    now: &connlab_os::Fingerprint,
) -> (Vec<crate::validity::MachineBlock>, bool) {
    use crate::validity::MachineBlock;
    let mut blocks: Vec<MachineBlock> = match earlier {
        None => Vec::new(),
        Some((b, _, _)) if !b.is_empty() => b.to_vec(),
        Some((_, env, started)) => vec![MachineBlock {
            index: 1,
            fingerprint: env.fingerprint(),
            started_unix_s: started,
            points_set_aside: 0,
        }],
    };
    let fresh = match blocks.last() {
        Some(last) if last.fingerprint == *now => false,
        last => {
            let had_results = last.is_some();
            blocks.push(MachineBlock {
                index: blocks.len() as u32 + 1,
                fingerprint: now.clone(),
                started_unix_s: unix_now(),
                points_set_aside: 0,
            });
            had_results
        }
    };
    (blocks, fresh)
}

/// Moves the `*.json` files of `dir` into `dir/block-N/` (an earlier
/// machine's results, kept but never pooled with the new block's); returns
/// how many moved.
pub(crate) fn set_aside(dir: &Path, block: u32) -> Result<usize, RunError> {
    let target = dir.join(format!("block-{block}"));
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(RunError::Failed(format!("reading {}: {e}", dir.display()))),
    };
    let mut moved = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        std::fs::create_dir_all(&target)
            .map_err(|e| RunError::Failed(format!("creating {}: {e}", target.display())))?;
        let to = target.join(entry.file_name());
        std::fs::rename(&path, &to).map_err(|e| {
            RunError::Failed(format!(
                "moving {} to {}: {e}",
                path.display(),
                to.display()
            ))
        })?;
        moved += 1;
    }
    Ok(moved)
}

/// Measures point `id` until it passes its gates or `attempts` run out:
/// `attempt` measures once and judges the result (`Ok(None)`: interrupted);
/// an attempt that fails a gate other than `machine` is measured again
/// (with a note saying why) unless `stopped`. Returns the last attempt with
/// its record (`attempts` = the tries made).
pub(crate) fn with_attempts<T>(
    id: &str,
    attempts: u32,
    progress: &mut dyn Progress,
    stopped: impl Fn() -> bool,
    mut attempt: impl FnMut() -> anyhow::Result<Option<(T, Vec<crate::validity::Gate>)>>,
) -> anyhow::Result<Option<(T, crate::validity::Validity)>> {
    let mut tries = 1;
    loop {
        let Some((measured, gates)) = attempt()? else {
            return Ok(None);
        };
        let v = crate::validity::Validity::of(gates, tries);
        if v.worth_retrying() && tries < attempts && !stopped() {
            progress.note(&format!(
                "{id}: attempt {tries} of {attempts} failed its gates ({}); measuring again",
                v.failure_text()
            ));
            tries += 1;
            continue;
        }
        return Ok(Some((measured, v)));
    }
}

/// What a point's progress line adds about its gates: `; INVALID after 3
/// attempts: steal 7.3 % > 2 %`, `; valid at attempt 2`, or nothing.
pub(crate) fn validity_words(v: Option<&crate::validity::Validity>) -> String {
    match v {
        Some(v) if !v.valid => format!(
            "; INVALID after {} attempt{}: {}",
            v.attempts,
            if v.attempts == 1 { "" } else { "s" },
            v.failure_text()
        ),
        Some(v) if v.attempts > 1 => format!("; valid at attempt {}", v.attempts),
        _ => String::new(),
    }
}

/// The attempts per point a sweep makes: `--attempts`, else the file's,
/// else [`DEFAULT_ATTEMPTS`](crate::validity::DEFAULT_ATTEMPTS).
pub(crate) fn attempts(req: &SweepRequest, file: &crate::validity::ValidityLimits) -> u32 {
    req.attempts
        .or(file.attempts)
        .unwrap_or(crate::validity::DEFAULT_ATTEMPTS)
        .max(1)
}

/// Writes the experiment text into `DIR/experiment.toml`.
pub(crate) fn write_experiment(out: &Path, text: &str) -> Result<(), RunError> {
    let path = out.join("experiment.toml");
    connlab_os::files::write_atomic(&path, text)
        .map_err(|e| RunError::Failed(format!("writing {}: {e}", path.display())))
}

/// Creates the results directory.
pub(crate) fn create_dir(dir: &Path) -> Result<(), RunError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| RunError::Failed(format!("creating {}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_another_experiment_is_refused() {
        let dir = std::env::temp_dir().join(format!("connlab-foreign-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let locality = "kind = \"locality\"\nname = \"a\"\n[matrix]\nconnections = [10]\n";
        let pipeline = "kind = \"pipeline\"\nname = \"b\"\n";
        // Empty: anything may start there.
        assert!(refuse_foreign_results(&dir, pipeline, false).is_ok());
        std::fs::write(dir.join("experiment.toml"), locality).unwrap();
        // The same measurement resumes; another is refused, naming its kind.
        assert!(refuse_foreign_results(&dir, locality, false).is_ok());
        let err = refuse_foreign_results(&dir, pipeline, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a locality experiment") && err.contains("--fresh"),
            "{err}"
        );
        // --fresh discards it on purpose.
        assert!(refuse_foreign_results(&dir, pipeline, true).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Records what a sweep reports.
    #[derive(Default)]
    struct Record {
        notes: Vec<String>,
        started: Vec<String>,
        finished: Vec<(String, String)>,
        begun: Option<(usize, usize)>,
        ended: bool,
    }

    impl Progress for Record {
        fn note(&mut self, line: &str) {
            self.notes.push(line.to_string());
        }
        fn begin(&mut self, total: usize, kept: usize) {
            self.begun = Some((total, kept));
        }
        fn start(&mut self, id: &str, _eta: Option<Duration>) {
            self.started.push(id.to_string());
        }
        fn finish(&mut self, id: &str, _took: Duration, what: &str) {
            self.finished.push((id.to_string(), what.to_string()));
        }
        fn end(&mut self) {
            self.ended = true;
        }
    }

    const TINY: &str = r#"kind = "pipeline"
name = "tiny"
title = "Tiny"
[pipeline]
layers = [1, 2]
message_sizes = [1024]
messages = 20
modes = ["layer-parallel"]
links = ["memory:unlimited"]
[validity]
attempts = 1
"#;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("connlab-lab-run-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_pipeline_sweep_reports_progress_and_resumes() {
        let exp = PipelineExperiment::from_toml(TINY, "tiny.toml").unwrap();
        let out = scratch("pipeline");
        let req = SweepRequest {
            text: TINY.into(),
            out: out.clone(),
            quick: false,
            fresh: false,
            profile: false,
            connlab: PathBuf::from("connlab"),
            attempts: None,
            ci_target: None,
            ci_max_duration: None,
            repetitions: None,
        };
        let ids: Vec<String> = exp.plan(false).iter().map(|p| p.id()).collect();
        assert_eq!(ids.len(), 2);
        let shutdown = Shutdown::new().unwrap();
        let mut rec = Record::default();
        let o = sweep_pipeline(&exp, &req, &mut rec, &shutdown).unwrap();
        assert_eq!((o.total, o.kept, o.measured), (2, 0, 2), "{o:?}");
        assert!(o.failed.is_empty() && !o.interrupted, "{o:?}");
        assert_eq!(rec.begun, Some((2, 0)));
        assert_eq!(rec.started, ids);
        assert_eq!(rec.finished.len(), 2);
        assert!(rec.finished[0].1.contains("Mbit/s"), "{:?}", rec.finished);
        assert!(rec.ended);
        assert!(out.join("experiment.toml").is_file());
        assert!(out.join("pipeline.json").is_file());
        // Every run records its gates (and the window it was measured in).
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("pipeline.json")).unwrap())
                .unwrap();
        for r in json["runs"].as_array().unwrap() {
            let v = &r["validity"];
            assert_eq!(v["attempts"], 1, "{r}");
            assert!(v["valid"].is_boolean(), "{v}");
            let names: Vec<&str> = v["gates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["name"].as_str().unwrap())
                .collect();
            assert_eq!(&names[..1], ["completion"], "{v}");
            assert!(names.contains(&"machine"), "{v}");
            assert!(r["window_cpu"]["role_cpu_s"]["runner"].is_number(), "{r}");
        }

        // Pretend the first session ran on another kernel: a resume must keep
        // that record rather than stamp this machine over it.
        let info = out.join("pipeline.json");
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&info).unwrap()).unwrap();
        json["environment"]["kernel"] = "Linux first-session".into();
        std::fs::write(&info, json.to_string()).unwrap();

        // Again, with only the title changed: everything is kept.
        let req = SweepRequest {
            text: TINY.replace("title = \"Tiny\"", "title = \"Tiny, retitled\""),
            ..req
        };
        let mut rec = Record::default();
        let o = sweep_pipeline(&exp, &req, &mut rec, &shutdown).unwrap();
        assert_eq!((o.kept, o.measured), (2, 0), "{o:?}");
        assert!(rec.started.is_empty());
        assert!(
            rec.notes.iter().any(|n| n.contains("2 kept from before")),
            "{:?}",
            rec.notes
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&info).unwrap()).unwrap();
        assert_eq!(json["environment"]["kernel"], "Linux first-session");
        assert!(
            rec.notes
                .iter()
                .any(|n| n.contains("resuming on another machine")),
            "{:?}",
            rec.notes
        );

        // The other way round: --quick on a full sweep's directory is refused.
        let err = sweep_pipeline(
            &exp,
            &SweepRequest { quick: true, ..req },
            &mut rec,
            &shutdown,
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Input(_)), "{err}");
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn a_point_is_measured_again_while_a_gate_other_than_machine_fails() {
        use crate::validity::Gate;
        let steal = |v: f64| Gate::at_most("steal", v, 0.02, String::new());
        // Steal too high, then fine: two tries, valid.
        // Popped from the end: 7 % first.
        let mut values = vec![0.01, 0.07];
        let mut rec = Record::default();
        let (n, v) = with_attempts(
            "p",
            3,
            &mut rec,
            || false,
            || {
                let x = values.pop().unwrap();
                Ok(Some((x, vec![steal(x)])))
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!((n, v.valid, v.attempts), (0.01, true, 2));
        assert!(
            rec.notes[0].contains("attempt 1 of 3 failed its gates (steal 7 % > 2 %)"),
            "{:?}",
            rec.notes
        );
        // Always too high: the last of the attempts is kept, invalid.
        let mut tries = 0;
        let (_, v) = with_attempts(
            "p",
            3,
            &mut rec,
            || false,
            || {
                tries += 1;
                Ok(Some(((), vec![steal(0.5)])))
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!((tries, v.valid, v.attempts), (3, false, 3));
        assert!(validity_words(Some(&v)).starts_with("; INVALID after 3 attempts: steal"));
        // Another machine does not change between attempts; a stop ends them.
        let machine = Gate {
            name: "machine".into(),
            value: crate::validity::GateValue::Text("a".into()),
            limit: crate::validity::GateValue::Text("b".into()),
            passed: false,
            detail: String::new(),
        };
        let mut tries = 0;
        with_attempts(
            "p",
            3,
            &mut rec,
            || false,
            || {
                tries += 1;
                Ok(Some(((), vec![machine.clone()])))
            },
        )
        .unwrap();
        assert_eq!(tries, 1);
        let mut tries = 0;
        with_attempts(
            "p",
            3,
            &mut rec,
            || true,
            || {
                tries += 1;
                Ok(Some(((), vec![steal(0.5)])))
            },
        )
        .unwrap();
        assert_eq!(tries, 1);
        // Interrupted: nothing.
        let none = with_attempts("p", 3, &mut rec, || false, || Ok(None::<((), Vec<Gate>)>));
        assert!(none.unwrap().is_none());
    }

    #[test]
    fn a_relative_results_directory_is_made_absolute() {
        let req = SweepRequest {
            text: String::new(),
            out: PathBuf::from("results/peers"),
            quick: false,
            fresh: false,
            profile: false,
            connlab: PathBuf::from("connlab"),
            attempts: None,
            ci_target: None,
            ci_max_duration: None,
            repetitions: None,
        };
        let abs = with_absolute_out(&req).unwrap();
        assert!(abs.out.is_absolute(), "{}", abs.out.display());
        assert!(abs.out.ends_with("results/peers"));
    }
}
