//! IPv4 forwarding for `--mode nat`, changed so that it is always put back.
//!
//! `net.ipv4.ip_forward` is per network namespace. Before turning it on the
//! gateway records the value it found in a state file,
//! `/run/connlab/gateway-ip_forward-<netns>-<pid>` (`<netns>` the namespace's
//! inode, so gateways in different namespaces never mix), and on exit writes
//! the value back and deletes the file. A gateway that was killed leaves its
//! file; the next gateway started in that namespace finds it (its process
//! is gone) and takes the recorded value as the original: restored at once
//! when it does not itself need forwarding, at its exit otherwise. While
//! another live gateway in the namespace holds a state file, the value it
//! recorded is the original, and only the last gateway to leave restores it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where state files go by default.
pub const STATE_DIR: &str = "/run/connlab";
/// The namespace's forwarding switch (procfs).
pub const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
const PREFIX: &str = "gateway-ip_forward-";

/// Why forwarding could not be set or put back, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub struct ForwardError {
    /// What was being done.
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// The files and identities one gateway works with (the real ones from
/// [`Forwarding::system`]; tests use temporary files).
#[derive(Clone, Debug)]
pub struct Forwarding {
    /// The `ip_forward` file.
    pub switch: PathBuf,
    /// The directory of state files.
    pub state_dir: PathBuf,
    /// This namespace's identity (inode of `/proc/self/ns/net`).
    pub netns: u64,
    /// This process's id.
    pub pid: u32,
}

/// Forwarding turned on; restored on [`ForwardGuard::restore`] or drop.
#[derive(Debug)]
pub struct ForwardGuard {
    cfg: Forwarding,
    original: String,
    state: PathBuf,
    done: bool,
}

/// What the start-up sweep found: state files of gateways that died, with
/// the values they recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Stale state files removed.
    pub files: Vec<PathBuf>,
    /// The original value they recorded (the oldest file's), if any.
    pub original: Option<String>,
}

impl Forwarding {
    /// This process in its current network namespace, with the real files.
    pub fn system() -> Result<Forwarding, ForwardError> {
        use std::os::unix::fs::MetadataExt as _;
        let ns = Path::new("/proc/self/ns/net");
        let netns = fs::metadata(ns)
            .map_err(|source| ForwardError {
                what: "reading the network namespace of",
                path: ns.into(),
                source,
            })?
            .ino();
        Ok(Forwarding {
            switch: IP_FORWARD.into(),
            state_dir: STATE_DIR.into(),
            netns,
            pid: std::process::id(),
        })
    }

    fn state_file(&self, pid: u32) -> PathBuf {
        self.state_dir.join(format!("{PREFIX}{}-{pid}", self.netns))
    }

    /// State files of this namespace: (pid, path, recorded value), oldest
    /// (lowest modification time) first.
    fn states(&self) -> Vec<(u32, PathBuf, String)> {
        let mine = format!("{PREFIX}{}-", self.netns);
        let Ok(dir) = fs::read_dir(&self.state_dir) else {
            return Vec::new();
        };
        let mut found: Vec<(std::time::SystemTime, u32, PathBuf, String)> = dir
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let pid = name.strip_prefix(&mine)?.parse::<u32>().ok()?;
                let value = fs::read_to_string(e.path()).ok()?.trim().to_string();
                let when = e.metadata().and_then(|m| m.modified()).ok()?;
                Some((when, pid, e.path(), value))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, p, f, v)| (p, f, v)).collect()
    }

    /// Removes the state files of dead gateways in this namespace and
    /// returns the original value they recorded. With no live gateway
    /// left in the namespace, that value is written back now.
    pub fn sweep(&self, alive: impl Fn(u32) -> bool) -> Result<Swept, ForwardError> {
        let mut swept = Swept::default();
        let mut live = false;
        for (pid, path, value) in self.states() {
            if pid != self.pid && alive(pid) {
                live = true;
                continue;
            }
            if pid == self.pid {
                continue;
            }
            swept.original.get_or_insert(value);
            let _ = fs::remove_file(&path);
            swept.files.push(path);
        }
        if let (Some(v), false) = (&swept.original, live) {
            self.write_switch(v)?;
        }
        Ok(swept)
    }

    /// Sweeps stale state, records the original value and turns forwarding
    /// on. `alive` says whether a process id still runs.
    pub fn enable(
        &self,
        alive: impl Fn(u32) -> bool,
    ) -> Result<(ForwardGuard, Swept), ForwardError> {
        let swept = self.sweep(&alive)?;
        // A live gateway's record is the true original (the switch is on
        // because of it); else what the switch holds now (after the sweep).
        let original = match self
            .states()
            .into_iter()
            .find(|(pid, _, _)| *pid != self.pid && alive(*pid))
        {
            Some((_, _, v)) => v,
            None => fs::read_to_string(&self.switch)
                .map_err(|source| ForwardError {
                    what: "reading",
                    path: self.switch.clone(),
                    source,
                })?
                .trim()
                .to_string(),
        };
        fs::create_dir_all(&self.state_dir).map_err(|source| ForwardError {
            what: "creating the state directory",
            path: self.state_dir.clone(),
            source,
        })?;
        let state = self.state_file(self.pid);
        write_synced(&state, &original).map_err(|source| ForwardError {
            what: "recording the original ip_forward in",
            path: state.clone(),
            source,
        })?;
        let guard = ForwardGuard {
            cfg: self.clone(),
            original,
            state,
            done: false,
        };
        // Recorded first: from here a kill leaves what the next start needs.
        self.write_switch("1")?;
        Ok((guard, swept))
    }

    fn write_switch(&self, value: &str) -> Result<(), ForwardError> {
        fs::write(&self.switch, value).map_err(|source| ForwardError {
            what: "writing",
            path: self.switch.clone(),
            source,
        })
    }
}

impl ForwardGuard {
    /// The value found before forwarding was turned on.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// Puts the original value back (unless another live gateway in this
    /// namespace still needs forwarding) and removes the state file.
    pub fn restore(mut self, alive: impl Fn(u32) -> bool) -> Result<(), ForwardError> {
        self.done = true;
        self.put_back(alive)
    }

    fn put_back(&self, alive: impl Fn(u32) -> bool) -> Result<(), ForwardError> {
        let others = self
            .cfg
            .states()
            .into_iter()
            .any(|(pid, _, _)| pid != self.cfg.pid && alive(pid));
        let result = if others {
            Ok(())
        } else {
            self.cfg.write_switch(&self.original)
        };
        let _ = fs::remove_file(&self.state);
        result
    }
}

impl Drop for ForwardGuard {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.put_back(process_alive);
        }
    }
}

/// Whether process `pid` exists (`/proc/<pid>`).
pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Writes `text` to a temporary file, fsyncs it and renames it over `path`:
/// a kill leaves the old file or the new one, never a partial one.
fn write_synced(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(name: &str, value: &str) -> (tempfile_dir::Dir, Forwarding) {
        let dir = tempfile_dir::Dir::new(name);
        let switch = dir.0.join("ip_forward");
        fs::write(&switch, value).unwrap();
        let f = Forwarding {
            switch,
            state_dir: dir.0.join("run"),
            netns: 4026531840,
            pid: 100,
        };
        (dir, f)
    }

    /// A temporary directory removed on drop (no extra dependency).
    mod tempfile_dir {
        pub(super) struct Dir(pub(super) std::path::PathBuf);
        impl Dir {
            pub(super) fn new(name: &str) -> Dir {
                let p =
                    std::env::temp_dir().join(format!("connlab-fwd-{}-{name}", std::process::id()));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn switch(f: &Forwarding) -> String {
        fs::read_to_string(&f.switch).unwrap().trim().to_string()
    }

    #[test]
    fn enable_records_then_restore_puts_back() {
        let (_d, f) = setup("plain", "0");
        let (guard, swept) = f.enable(|_| false).unwrap();
        assert_eq!(swept, Swept::default());
        assert_eq!(switch(&f), "1");
        assert_eq!(fs::read_to_string(f.state_file(100)).unwrap(), "0");
        guard.restore(|_| false).unwrap();
        assert_eq!(switch(&f), "0");
        assert!(!f.state_file(100).exists());
    }

    #[test]
    fn a_killed_gateways_original_is_restored_by_the_next_start() {
        // Issue 17: a killed NAT gateway left ip_forward at 1.
        let (_d, f) = setup("killed", "0");
        let (guard, _) = f.enable(|_| false).unwrap();
        std::mem::forget(guard); // killed: no restore ran
        assert_eq!(switch(&f), "1");
        let next = Forwarding {
            pid: 200,
            ..f.clone()
        };
        // A sweep alone (the next start before it needs forwarding).
        let swept = next.sweep(|_| false).unwrap();
        assert_eq!(swept.original.as_deref(), Some("0"));
        assert_eq!(swept.files, vec![f.state_file(100)]);
        assert_eq!(switch(&f), "0");
        // And a next gateway that enables again records the true original.
        let (guard, _) = next.enable(|_| false).unwrap();
        assert_eq!(guard.original(), "0");
        guard.restore(|_| false).unwrap();
        assert_eq!(switch(&f), "0");
    }

    #[test]
    fn the_last_live_gateway_restores_and_others_in_other_namespaces_are_left_alone() {
        let (_d, a) = setup("shared", "0");
        let (ga, _) = a.enable(|_| false).unwrap();
        let b = Forwarding {
            pid: 200,
            ..a.clone()
        };
        let alive_a = |pid: u32| pid == 100;
        let (gb, swept) = b.enable(alive_a).unwrap();
        assert!(
            swept.files.is_empty(),
            "a live gateway's state is not stale"
        );
        assert_eq!(
            gb.original(),
            "0",
            "the live gateway's record is the original"
        );
        let other_ns = Forwarding {
            netns: 1,
            pid: 300,
            ..a.clone()
        };
        assert!(other_ns.sweep(|_| false).unwrap().files.is_empty());
        // a leaves first: b still needs forwarding.
        ga.restore(|pid| pid == 200).unwrap();
        assert_eq!(switch(&a), "1");
        gb.restore(|_| false).unwrap();
        assert_eq!(switch(&a), "0");
    }
}
