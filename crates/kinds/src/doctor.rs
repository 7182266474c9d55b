//! `connlab doctor`'s verdict on one experiment file: what its kind says
//! of the machine ([`Sweep::assess`](crate::Sweep::assess)) and whether the
//! machine is quiet, as a [`connlab_lab::doctor::Assessment`].

use crate::{Here, Registry};
use connlab_lab::doctor::Assessment;
use std::path::Path;

/// Whether the experiment in `path` can run here and be judged: `cannot
/// measure` with its blockers, `probably cannot judge` with its doubts
/// (a noisy machine is one), else `can judge`.
pub fn assess(path: &Path, registry: &Registry, here: &Here) -> Assessment {
    let experiment = connlab_lab::experiment_name(path);
    let loaded = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            let origin = path.display().to_string();
            let kind = registry.kind_of(&t, &origin).map_err(|e| e.to_string())?;
            let exp = kind.load(&t, &origin).map_err(|e| e.to_string())?;
            Ok((kind.name().to_string(), exp))
        });
    let (kind, exp) = match loaded {
        Ok(e) => e,
        Err(e) => {
            return Assessment {
                experiment,
                kind: "?".into(),
                outlook: "cannot measure",
                why: vec![format!("the file does not read: {e}")],
            }
        }
    };
    let crate::Assessment {
        blockers,
        mut doubts,
    } = exp.assess(here);
    if here.noisy {
        doubts.push(
            "the machine is not quiet now (steal or other processes over their limits)".into(),
        );
    }
    let (outlook, why) = if !blockers.is_empty() {
        ("cannot measure", blockers)
    } else if !doubts.is_empty() {
        ("probably cannot judge", doubts)
    } else {
        ("can judge", Vec::new())
    };
    Assessment {
        experiment,
        kind,
        outlook,
        why,
    }
}
