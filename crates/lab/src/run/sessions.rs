//! How long a results directory took to measure: every sweep session that
//! measured something appends one line to `DIR/sessions.jsonl` (when it
//! began, how long it ran, how many points it measured), so a sweep
//! resumed over several sessions is timed as the sum of them, not as its
//! last resume. `--fresh` starts the file over.

use super::SweepOutcome;
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The file, in the results directory.
pub const SESSIONS_FILE: &str = "sessions.jsonl";

/// One session of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// When it began (Unix seconds).
    pub started_unix_s: f64,
    /// How long it ran, seconds.
    pub seconds: f64,
    /// Points (or runs) it measured.
    pub measured: usize,
    /// Whether it was stopped before the plan ended.
    pub interrupted: bool,
}

/// Appends this session to `DIR/sessions.jsonl` (`fresh`: replaces it).
pub(super) fn record(
    dir: &Path,
    started: (f64, Instant),
    o: &SweepOutcome,
    fresh: bool,
) -> Result<(), String> {
    let line = serde_json::to_string(&Session {
        started_unix_s: started.0,
        seconds: started.1.elapsed().as_secs_f64(),
        measured: o.measured,
        interrupted: o.interrupted,
    })
    .map_err(|e| e.to_string())?;
    let path = dir.join(SESSIONS_FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(!fresh)
        .write(true)
        .truncate(fresh)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(file, "{line}").map_err(|e| format!("{}: {e}", path.display()))
}

/// The sessions recorded in `dir` (none for a directory from before they
/// were recorded; unreadable lines are skipped).
pub fn read(dir: &Path) -> Vec<Session> {
    std::fs::read_to_string(dir.join(SESSIONS_FILE))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The time every recorded session of `dir` took, and how many there were.
pub fn measuring_time(dir: &Path) -> (Duration, usize) {
    let s = read(dir);
    let total: f64 = s.iter().map(|s| s.seconds).sum();
    (Duration::from_secs_f64(total.max(0.0)), s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_add_up_and_fresh_starts_over() {
        let dir = std::env::temp_dir().join(format!("connlab-sessions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = SweepOutcome {
            measured: 3,
            ..SweepOutcome::default()
        };
        let t = Instant::now() - Duration::from_secs(2);
        record(&dir, (1.0, t), &o, true).unwrap();
        record(&dir, (5.0, t), &o, false).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(SESSIONS_FILE))
            .unwrap()
            .write_all(b"not json\n")
            .unwrap();
        let (total, n) = measuring_time(&dir);
        assert_eq!(n, 2);
        assert!(total >= Duration::from_secs(4), "{total:?}");
        record(&dir, (9.0, Instant::now()), &o, true).unwrap();
        assert_eq!(read(&dir).len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
