//! Every kind of experiment file behind one trait, and the registry that
//! knows them all.
//!
//! A kind ([`Kind`]) reads its files into a [`Sweep`] (plan, checks,
//! dry-run listing, the runner, the wording of its ending) and opens its
//! results directories as [`Results`] (the report in each format, the rows
//! of the `connlab reproduce` index). `connlab sweep`, `connlab report`,
//! `connlab reproduce` and `connlab doctor` ask the [`Registry`] and never
//! name a kind.
//!
//! The built-in kinds live one module each (`locality.rs` with the web
//! kind, `pipeline.rs`, `singleip.rs`, `peers.rs`, `loadgen.rs`,
//! `suite.rs`) and delegate to their experiment and runner in `connlab-lab`
//! and their pages in `connlab-report`. A new kind is a module (or folder)
//! here that implements the three traits, plus one line in
//! [`Registry::builtin`] (CONTRIBUTING.md has the recipe).

pub mod doctor;
mod ending;
mod loadgen;
mod locality;
mod peers;
mod pipeline;
pub mod reproduce_index;
mod singleip;
mod suite;

pub use connlab_lab::run::{Progress, RunError, SweepOutcome, SweepRequest};
pub use connlab_report::{ExperimentClaims, Format, ReportError};
pub use ending::Ending;

use connlab_lab::ExperimentError;
use connlab_os::Shutdown;
use std::path::Path;
use std::time::Duration;

/// One kind of experiment file: how to read it and how to open what its
/// sweeps leave behind.
pub trait Kind: Send + Sync {
    /// The `kind` tag as written in files (`locality`, `pipeline`, ...).
    fn name(&self) -> &'static str;
    /// Whether the sections of an untagged file mark it as this kind (files
    /// written before the tag existed).
    fn fits(&self, file: &toml::Table) -> bool;
    /// Parses and validates a file of this kind; `origin` names it in errors.
    fn load(&self, text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError>;
    /// Whether `dir` holds the results of a sweep of this kind.
    fn holds(&self, dir: &Path) -> bool;
    /// Opens a results directory of this kind for its report.
    fn open(&self, dir: &Path, options: &ReportOptions) -> Result<Box<dyn Results>, String>;
    /// The file a results directory of this kind holds once a point is
    /// done (`sweep.json`), named when it is missing; empty for a kind that
    /// writes no results of its own (a suite).
    fn results_file(&self) -> &'static str {
        "its results file"
    }
}

/// A parsed experiment file: what `connlab sweep` plans, checks, lists and
/// runs.
pub trait Sweep {
    /// The experiment's short name (the default results directory).
    fn name(&self) -> &str;
    /// The ids of the plan's points (or runs), in run order.
    fn plan(&self, quick: bool) -> Vec<String>;
    /// How the sweep runs: what the CLI prepares and how it draws progress.
    fn traits(&self) -> SweepTraits;
    /// Every CPU the file pins a process to, with the field naming it.
    fn pinned_cpus(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
    /// Checks what parsing cannot (that the plan can be set up here).
    fn check(&self, _quick: bool) -> Result<(), RunError> {
        Ok(())
    }
    /// What `--dry-run` prints; `profile` is `--profile`.
    fn listing(&self, quick: bool, profile: bool, out: &Path) -> Result<Listing, RunError>;
    /// Runs the sweep into `req.out`, resuming what an earlier one finished.
    fn run(
        &self,
        req: &SweepRequest,
        progress: &mut dyn Progress,
        shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError>;
    /// Kinds that repeat rounds: the rounds the file asks for.
    fn rounds(&self, _quick: bool) -> Option<u32> {
        None
    }
    /// Kinds that repeat rounds: the claims of the results in `out` that
    /// cannot be judged yet, each as `SOURCE: TEXT`.
    fn undecided(&self, _out: &Path) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
    /// What the sweep's end says and its exit code.
    fn ending(&self, outcome: &SweepOutcome, took: Duration) -> Ending;
    /// Whether it can run and be judged on the machine `here` describes.
    fn assess(&self, here: &Here) -> Assessment {
        let _ = here;
        Assessment::default()
    }
}

/// How a kind's sweep runs, for what the CLI prepares around it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepTraits {
    /// It starts child processes: the results directory is made absolute
    /// (they resolve paths from their own directories) and the open-files
    /// limit is raised first.
    pub children: bool,
    /// It accepts `--profile`.
    pub profiles: bool,
    /// How its progress is drawn when standard error is no terminal.
    pub lines: Lines,
}

/// The lines a sweep prints per point when standard error is no terminal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lines {
    /// `[i/n] id ... what` (pipeline, peers, loadgen).
    #[default]
    Runs,
    /// `[i/n] id  (eta ...)`, then `  id: what (t s)` (locality, web).
    Points,
    /// `[i/n] id: what` when a point ends (single-IP: points run in groups).
    Results,
}

/// What `connlab sweep --dry-run` prints: a line about the whole plan, then
/// one id per line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// `NAME: N points, about T (results in DIR)`.
    pub head: String,
    /// The ids, in run order.
    pub ids: Vec<String>,
    /// About how long the whole plan takes, where the kind can say.
    pub estimate: Option<Duration>,
}

/// Options of `connlab report` that some kinds read.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// `--baseline`: the contenders to divide by (peers).
    pub baseline: Vec<String>,
}

impl ReportOptions {
    /// Refuses options that a kind without any reads: every kind but those
    /// that take them calls this in [`Kind::open`].
    pub fn none_for(&self, dir: &Path) -> Result<(), String> {
        if self.baseline.is_empty() {
            return Ok(());
        }
        Err(format!(
            "--baseline: only for the results of a peers experiment (kind = \"peers\"); {} is not one",
            dir.display()
        ))
    }
}

/// An opened results directory: its report and its index rows.
pub trait Results {
    /// The experiment's name.
    fn name(&self) -> &str;
    /// How far it ran, e.g. `12 of 45 points`.
    fn done(&self) -> String;
    /// The report in `format`.
    fn render(&self, format: Format) -> Result<String, ReportError>;
    /// Its rows on the `connlab reproduce` index.
    fn claims(&self) -> ExperimentClaims;
}

/// The machine an experiment would run on, for [`Sweep::assess`]
/// (`connlab doctor`).
#[derive(Clone, Debug)]
pub struct Here {
    /// CPUs, kernel and clock.
    pub environment: connlab_os::Environment,
    /// The open-files hard limit.
    pub nofile_hard: u64,
    /// Running as root.
    pub root: bool,
    /// Peer programs and whether each is installed.
    pub programs: Vec<(String, bool)>,
    /// The machine's A/A noise as a ratio (1.05: ±5 %), when measured.
    pub noise: Option<f64>,
    /// The machine was not quiet while it was looked at.
    pub noisy: bool,
    /// Most calibration runs failed their gates.
    pub schedule_fails: bool,
}

impl Here {
    /// Whether `program` is installed.
    pub fn has(&self, program: &str) -> bool {
        self.programs.iter().any(|(p, ok)| p == program && *ok)
    }
}

/// Why an experiment could not run here, or could run but hardly be judged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assessment {
    /// What stops it from running.
    pub blockers: Vec<String>,
    /// What makes its verdicts doubtful here.
    pub doubts: Vec<String>,
}

/// The kinds connlab knows, in the order their names are listed.
pub struct Registry {
    kinds: Vec<Box<dyn Kind>>,
}

impl Registry {
    /// No kinds: build one with [`Registry::with`].
    pub fn empty() -> Registry {
        Registry { kinds: Vec::new() }
    }

    /// The built-in kinds: one line each. An untagged file that fits none
    /// is read as the first.
    pub fn builtin() -> Registry {
        Registry::empty()
            .with(locality::LOCALITY)
            .with(locality::WEB)
            .with(pipeline::KIND)
            .with(singleip::KIND)
            .with(peers::Peers)
            .with(loadgen::KIND)
            .with(suite::KIND)
    }

    /// This registry and `kind` after it.
    pub fn with(mut self, kind: impl Kind + 'static) -> Registry {
        self.kinds.push(Box::new(kind));
        self
    }

    /// The kinds' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name()).collect()
    }

    /// The kind named `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Kind> {
        self.kinds.iter().find(|k| k.name() == name).map(|k| &**k)
    }

    /// The kind of a file's text: its `kind` tag, or without one the first
    /// kind whose sections it has (else the first kind). The kind's own
    /// parser checks that a tag agrees with the sections.
    pub fn kind_of(&self, text: &str, origin: &str) -> Result<&dyn Kind, ExperimentError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ExperimentError::Parse {
                    origin: origin.to_string(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let bad = |message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: "kind".into(),
            message,
        };
        match table.get("kind") {
            Some(toml::Value::String(tag)) => self.get(tag).ok_or_else(|| {
                bad(format!(
                    "{tag:?}: expected one of {}",
                    self.names().join(", ")
                ))
            }),
            Some(other) => Err(bad(format!(
                "{other}: expected a string, one of {}",
                self.names().join(", ")
            ))),
            None => self
                .kinds
                .iter()
                .find(|k| k.fits(&table))
                .or(self.kinds.first())
                .map(|k| &**k)
                .ok_or_else(|| bad("no kinds are registered".into())),
        }
    }

    /// Reads a file of any registered kind.
    pub fn load(&self, text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError> {
        self.kind_of(text, origin)?.load(text, origin)
    }

    /// The kind whose results `dir` holds.
    pub fn kind_of_dir(&self, dir: &Path) -> Option<&dyn Kind> {
        self.kinds.iter().find(|k| k.holds(dir)).map(|k| &**k)
    }

    /// Opens a results directory of any registered kind, or the index a
    /// `connlab reproduce` wrote. Where there is none, the error says what
    /// was expected: the results file of the kind its `experiment.toml`
    /// names, or else what each kind writes.
    pub fn open(&self, dir: &Path, options: &ReportOptions) -> Result<Box<dyn Results>, String> {
        if let Some(kind) = self.kind_of_dir(dir) {
            return kind.open(dir, options);
        }
        if reproduce_index::holds(dir) {
            return reproduce_index::open(dir);
        }
        let experiment = dir.join("experiment.toml");
        let named = std::fs::read_to_string(&experiment)
            .ok()
            .and_then(|text| self.kind_of(&text, &experiment.display().to_string()).ok());
        Err(match named {
            Some(kind) => format!(
                "{}: a {} experiment (experiment.toml) without its {}: no point has finished \
                 yet; run `connlab sweep {} --out {}` first",
                dir.display(),
                kind.name(),
                kind.results_file(),
                experiment.display(),
                dir.display()
            ),
            None => {
                let mut expected: Vec<String> = Vec::new();
                // A suite has no results of its own (its empty file name).
                for k in self.kinds.iter().filter(|k| !k.results_file().is_empty()) {
                    let file = k.results_file();
                    match expected
                        .iter_mut()
                        .find(|e| e.starts_with(&format!("{file} (")))
                    {
                        Some(e) => {
                            e.pop();
                            e.push_str(&format!(", {})", k.name()));
                        }
                        None => expected.push(format!("{file} ({})", k.name())),
                    }
                }
                expected.push(format!(
                    "{} (connlab reproduce)",
                    reproduce_index::INDEX_FILE
                ));
                format!(
                    "{}: no results here; give a directory `connlab sweep --out DIR` or \
                     `connlab reproduce --out DIR` wrote, which holds one of: {}",
                    dir.display(),
                    expected.join(", ")
                )
            }
        })
    }
}

/// A duration in words: `42s`, `3m05s`, `1h02m`.
pub fn duration_words(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Reads the text of a file (and names its origin in errors).
pub(crate) type LoadFn = fn(&str, &str) -> Result<Box<dyn Sweep>, ExperimentError>;

/// A kind of connlab's own whose report takes no options: a lab
/// [`ExperimentKind`](connlab_lab::ExperimentKind) (its tag, and the
/// sections that mark an untagged file), how its file is read, and how its
/// results directory is recognised and opened.
pub(crate) struct Builtin {
    /// The tag and shape.
    pub(crate) kind: connlab_lab::ExperimentKind,
    /// Reads a file of the kind.
    pub(crate) load: LoadFn,
    /// Whether a directory holds its results.
    pub(crate) holds: fn(&Path) -> bool,
    /// Opens its results.
    pub(crate) open: fn(&Path) -> Result<Box<dyn Results>, String>,
    /// See [`Kind::results_file`].
    pub(crate) results: &'static str,
}

impl Kind for Builtin {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn fits(&self, file: &toml::Table) -> bool {
        connlab_lab::shape_of(file) == Some(self.kind)
    }

    fn load(&self, text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError> {
        (self.load)(text, origin)
    }

    fn holds(&self, dir: &Path) -> bool {
        (self.holds)(dir)
    }

    fn open(&self, dir: &Path, options: &ReportOptions) -> Result<Box<dyn Results>, String> {
        options.none_for(dir)?;
        (self.open)(dir)
    }

    fn results_file(&self) -> &'static str {
        self.results
    }
}

/// Whether `dir`'s copied experiment file is of a kind other than `kind`
/// (an unreadable one is not: its own reader reports why).
pub(crate) fn other_kind(dir: &Path, kind: connlab_lab::ExperimentKind) -> bool {
    connlab_lab::ExperimentKind::of_dir(dir).is_ok_and(|k| k != kind)
}
