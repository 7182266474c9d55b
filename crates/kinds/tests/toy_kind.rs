//! A kind defined outside connlab's crates: registered with one line, it is
//! read, planned, swept (resuming) and reported through the same traits as
//! the built-in kinds.

use connlab_kinds::{
    Ending, ExperimentClaims, Format, Kind, Lines, Listing, Progress, Registry, ReportError,
    ReportOptions, Results, RunError, Sweep, SweepOutcome, SweepRequest, SweepTraits,
};
use connlab_lab::{ExperimentError, ResultsDir};
use connlab_os::Shutdown;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `kind = "toy"`: counts to `n`, one point per number.
struct Toy;

#[derive(Clone, Debug, Deserialize, Serialize)]
struct ToyFile {
    name: String,
    n: u32,
}

#[derive(Debug, Deserialize, Serialize)]
struct ToyPoint {
    id: String,
    square: u32,
}

#[derive(Debug, Deserialize, Serialize)]
struct ToyInfo {
    name: String,
    total: usize,
}

struct ToyResults {
    info: ToyInfo,
    points: Vec<ToyPoint>,
}

fn layout(dir: &Path) -> ResultsDir {
    ResultsDir::new(dir, "toy.json")
}

impl Kind for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn fits(&self, file: &toml::Table) -> bool {
        file.contains_key("n")
    }

    fn load(&self, text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError> {
        let mut table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ExperimentError::Parse {
                    origin: origin.into(),
                    message: e.to_string(),
                })?;
        table.remove("kind");
        let file: ToyFile =
            table
                .try_into()
                .map_err(|e: toml::de::Error| ExperimentError::Invalid {
                    origin: origin.into(),
                    field: "n".into(),
                    message: e.to_string(),
                })?;
        Ok(Box::new(file))
    }

    fn holds(&self, dir: &Path) -> bool {
        layout(dir).info_path().exists()
    }

    fn open(&self, dir: &Path, options: &ReportOptions) -> Result<Box<dyn Results>, String> {
        options.none_for(dir)?;
        let layout = layout(dir);
        let info: ToyInfo = layout.read_info().map_err(|e| e.to_string())?;
        let ids = (1..=info.total).map(|i| format!("t{i}"));
        let points = layout.read_points(ids).map_err(|e| e.to_string())?;
        Ok(Box::new(ToyResults { info, points }))
    }
}

impl Sweep for ToyFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, _quick: bool) -> Vec<String> {
        (1..=self.n).map(|i| format!("t{i}")).collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            lines: Lines::Runs,
            ..SweepTraits::default()
        }
    }

    fn listing(&self, quick: bool, _profile: bool, out: &Path) -> Result<Listing, RunError> {
        Ok(Listing {
            head: format!(
                "{}: {} toys (results in {})",
                self.name,
                self.n,
                out.display()
            ),
            ids: self.plan(quick),
            estimate: None,
        })
    }

    fn run(
        &self,
        req: &SweepRequest,
        progress: &mut dyn Progress,
        shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError> {
        connlab_lab::run::guarded(req, None, progress, |progress| {
            let dir = layout(&req.out);
            let fail = |e: connlab_lab::ResultsError| RunError::Failed(e.to_string());
            dir.prepare(&req.text, req.fresh, &[]).map_err(fail)?;
            let plan = self.plan(req.quick);
            dir.write_info(&ToyInfo {
                name: self.name.clone(),
                total: plan.len(),
            })
            .map_err(fail)?;
            let kept = plan.iter().filter(|id| dir.has_point(id)).count();
            progress.begin(plan.len(), kept);
            let mut outcome = SweepOutcome {
                out: req.out.clone(),
                total: plan.len(),
                kept,
                ..SweepOutcome::default()
            };
            for (i, id) in plan.iter().enumerate() {
                if dir.has_point(id) || shutdown.requested() {
                    continue;
                }
                progress.start(id, None);
                let n = i as u32 + 1;
                dir.write_point(
                    id,
                    &ToyPoint {
                        id: id.clone(),
                        square: n * n,
                    },
                    false,
                )
                .map_err(fail)?;
                progress.finish(id, Duration::ZERO, &format!("{}", n * n));
                outcome.measured += 1;
            }
            progress.end();
            Ok(outcome)
        })
    }

    fn ending(&self, outcome: &SweepOutcome, took: Duration) -> Ending {
        Ending::runs(outcome, took, "toys", "failed", "toys failed", false)
    }
}

impl Results for ToyResults {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn done(&self) -> String {
        format!("{} of {} toys", self.points.len(), self.info.total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        let rows: Vec<String> = self
            .points
            .iter()
            .map(|p| format!("| {} | {} |", p.id, p.square))
            .collect();
        Ok(if format == Format::CSV {
            self.points
                .iter()
                .map(|p| format!("{},{}\n", p.id, p.square))
                .collect()
        } else {
            format!(
                "# {}\n\n| id | square |\n|---|---|\n{}\n",
                self.info.name,
                rows.join("\n")
            )
        })
    }

    fn claims(&self) -> ExperimentClaims {
        ExperimentClaims {
            title: self.info.name.clone(),
            progress: self.done(),
            ..ExperimentClaims::default()
        }
    }
}

#[derive(Default)]
struct Record {
    started: Vec<String>,
}

impl Progress for Record {
    fn note(&mut self, _line: &str) {}
    fn begin(&mut self, _total: usize, _kept: usize) {}
    fn start(&mut self, id: &str, _eta: Option<Duration>) {
        self.started.push(id.to_string());
    }
    fn finish(&mut self, _id: &str, _took: Duration, _what: &str) {}
    fn end(&mut self) {}
}

const TEXT: &str = "kind = \"toy\"\nname = \"toys\"\nn = 3\n";

fn request(out: PathBuf) -> SweepRequest {
    SweepRequest {
        text: TEXT.into(),
        out,
        quick: false,
        fresh: false,
        profile: false,
        connlab: PathBuf::from("connlab"),
        attempts: None,
        ci_target: None,
        ci_max_duration: None,
        repetitions: None,
    }
}

#[test]
fn a_kind_registered_in_one_line_is_swept_resumed_and_reported() {
    let registry = Registry::builtin().with(Toy);
    assert!(registry.names().contains(&"toy"));
    let exp = registry.load(TEXT, "toy.toml").unwrap();
    assert_eq!(exp.plan(false), ["t1", "t2", "t3"]);
    // Untagged, its sections still say which kind it is.
    let untagged = TEXT.replace("kind = \"toy\"\n", "");
    assert_eq!(registry.kind_of(&untagged, "t").unwrap().name(), "toy");

    let out = std::env::temp_dir().join(format!("connlab-toy-kind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let shutdown = Shutdown::new().unwrap();
    let mut rec = Record::default();
    let o = exp.run(&request(out.clone()), &mut rec, &shutdown).unwrap();
    assert_eq!((o.total, o.kept, o.measured), (3, 0, 3));
    assert_eq!(rec.started, ["t1", "t2", "t3"]);
    let ending = exp.ending(&o, Duration::from_secs(1));
    assert_eq!(ending.code, 0);
    assert!(
        ending.lines[0].contains("3 of 3 toys done"),
        "{:?}",
        ending.lines
    );

    // Again: everything is kept.
    let mut rec = Record::default();
    let o = exp.run(&request(out.clone()), &mut rec, &shutdown).unwrap();
    assert_eq!((o.kept, o.measured), (3, 0));
    assert!(rec.started.is_empty());

    // The registry finds the kind of the directory and the kind reports it.
    let results = registry.open(&out, &ReportOptions::default()).unwrap();
    assert_eq!(results.done(), "3 of 3 toys");
    let md = results.render(Format::MARKDOWN).unwrap();
    assert!(md.contains("| t3 | 9 |"), "{md}");
    assert_eq!(results.claims().title, "toys");
    // A directory of another experiment file is refused before anything is written.
    let other = request(out.clone());
    let other = SweepRequest {
        text: "kind = \"toy\"\nname = \"other\"\nn = 2\n".into(),
        ..other
    };
    let err = exp.run(&other, &mut rec, &shutdown).unwrap_err();
    assert!(matches!(err, RunError::Input(_)), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}
