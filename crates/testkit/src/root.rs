//! Whether a test may do what needs root (namespaces, nftables, cgroups).

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// True as root. Otherwise panics when the environment says `CI=true` (a
/// CI run must not pass by skipping), else prints `skipped: needs root for
/// <what>` and returns false. Used through [`crate::require_root!`].
pub fn root_or_skip(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        !in_ci(),
        "needs root for {what}, and CI=true: run the tests as root (a CI run must not pass by skipping)"
    );
    eprintln!("skipped: needs root for {what}");
    false
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn require_root_fails_under_ci_without_root() {
        if super::is_root() {
            return;
        }
        // A child copy of this test binary with CI=true runs the check alone.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "root::tests::child_requires_root", "--nocapture"])
            .env("CI", "true")
            .env("CONNLAB_TESTKIT_ROOT_CHILD", "1")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{out:?}");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "root::tests::child_requires_root", "--nocapture"])
            .env("CI", "false")
            .env("CONNLAB_TESTKIT_ROOT_CHILD", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("skipped: needs root for the child"),
            "{out:?}"
        );
    }

    #[test]
    fn child_requires_root() {
        if std::env::var_os("CONNLAB_TESTKIT_ROOT_CHILD").is_none() {
            return;
        }
        crate::require_root!("the child");
        unreachable!("the child runs without root");
    }
}
