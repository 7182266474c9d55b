//! The suite kind: a list of experiment files per paper (`[[paper]]`), which
//! `connlab reproduce` runs; it is no sweep of its own.

use crate::{Builtin, Ending, Listing, Sweep, SweepTraits};
use connlab_lab::run::{Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::ExperimentKind;
use connlab_os::Shutdown;
use std::path::Path;
use std::time::Duration;

/// `kind = "suite"`: no results directory of its own.
pub(crate) const KIND: Builtin = Builtin {
    kind: ExperimentKind::Suite,
    load: |text, origin| {
        Ok(Box::new(SuiteFile {
            suite: connlab_lab::Suite::from_toml(text, origin)?,
            origin: origin.to_string(),
        }))
    },
    holds: |_| false,
    open: |dir| {
        Err(format!(
            "{}: a suite leaves no results directory of its own",
            dir.display()
        ))
    },
    results: "",
};

/// A suite file, read to say how to run it.
struct SuiteFile {
    suite: connlab_lab::Suite,
    origin: String,
}

impl SuiteFile {
    fn refusal(&self) -> RunError {
        RunError::Input(format!(
            "a suite of experiment files (kind = \"suite\"); run it with `connlab reproduce --suite {}`",
            self.origin
        ))
    }
}

impl Sweep for SuiteFile {
    fn name(&self) -> &str {
        &self.suite.name
    }

    fn plan(&self, _quick: bool) -> Vec<String> {
        Vec::new()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits::default()
    }

    fn check(&self, _quick: bool) -> Result<(), RunError> {
        Err(self.refusal())
    }

    fn listing(&self, _quick: bool, _profile: bool, _out: &Path) -> Result<Listing, RunError> {
        Err(self.refusal())
    }

    fn run(
        &self,
        _req: &SweepRequest,
        _progress: &mut dyn Progress,
        _shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError> {
        Err(self.refusal())
    }

    fn ending(&self, outcome: &SweepOutcome, _took: Duration) -> Ending {
        Ending::nothing_left(outcome)
    }
}
