//! What connlab's tests share, so no test file carries its own copy: the
//! `connlab` binary's path ([`connlab_bin`]), a child process that is killed
//! and reaped when dropped ([`ChildGuard`]), loopback servers and clients
//! ([`net`]), the reference server `connlab serve` under a guard with an
//! independent CLB1/HTTP client ([`serve`], [`wire`]), JSON and schema
//! assertions ([`json`]), the descriptor-limit checks ([`limits`]), and the
//! root check [`require_root!`].
//!
//! A dev-dependency only: nothing here is part of connlab itself, and the
//! wire client is written from `shared/protocol.md`, not from
//! `connlab-proto`, so it checks the server against the spec.

pub mod json;
pub mod limits;
pub mod net;
pub mod process;
mod root;
pub mod serve;
pub mod sweep;
pub mod wire;

pub use json::{assert_matches_schema, json_u64, read_json, workspace_root};
pub use net::{echo_server, free_port, pattern, round_trip};
pub use process::{connlab, connlab_bin, run_bounded, ChildGuard, Lines};
pub use root::{is_root, root_or_skip};

/// Returns from the calling test unless it runs as root. Without root the
/// test fails when `CI=true` (CI must not pass by skipping) and is skipped
/// elsewhere, printing why: `require_root!("network namespaces")`.
#[macro_export]
macro_rules! require_root {
    () => {
        $crate::require_root!("this test")
    };
    ($what:expr) => {
        if !$crate::root_or_skip($what) {
            return;
        }
    };
}

/// Returns from the calling test, printing `skipped: <reason>`, unless
/// `cond` holds: for tools a test needs besides root (`nft`, a cgroup
/// controller), whose absence is not a failure.
#[macro_export]
macro_rules! skip_unless {
    ($cond:expr, $($reason:tt)+) => {
        if !$cond {
            eprintln!("skipped: {}", format_args!($($reason)+));
            return;
        }
    };
}

/// A fresh, empty directory `<CARGO_TARGET_TMPDIR>/<prefix>-<pid>-<name>` of
/// the calling integration test, left in place for inspection afterwards.
#[macro_export]
macro_rules! scratch {
    ($prefix:expr, $name:expr) => {
        $crate::process::fresh_dir(
            ::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
            $prefix,
            $name,
        )
    };
}

/// A path no other call in this test process returns:
/// `<CARGO_TARGET_TMPDIR>/<prefix>-<pid>-<n>-<name>` (the file is not created).
#[macro_export]
macro_rules! out_path {
    ($prefix:expr, $name:expr) => {
        $crate::process::unique_path(
            ::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
            $prefix,
            $name,
        )
    };
}

/// Generates `mod <case> { #[test] fn processes() ... fn epoll_et() }` for each
/// behaviour function `fn <case>(engine: Variant)` in the calling module, so a
/// failure is reported as `<case>::<engine>`.
#[macro_export]
macro_rules! per_engine {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            use $crate::serve::Variant;
            #[test]
            fn processes() { super::$case(Variant::Processes) }
            #[test]
            fn threads() { super::$case(Variant::Threads) }
            #[test]
            fn select() { super::$case(Variant::Select) }
            #[test]
            fn poll() { super::$case(Variant::Poll) }
            #[test]
            fn epoll() { super::$case(Variant::Epoll) }
            #[test]
            fn epoll_et() { super::$case(Variant::EpollEt) }
            #[test]
            fn uring() { super::$case(Variant::Uring) }
            #[test]
            fn rtsig() { super::$case(Variant::Rtsig) }
            #[test]
            fn select_w2() { super::$case(Variant::SelectW2) }
            #[test]
            fn poll_w2() { super::$case(Variant::PollW2) }
            #[test]
            fn epoll_w2() { super::$case(Variant::EpollW2) }
            #[test]
            fn epoll_w2_shared() { super::$case(Variant::EpollW2Shared) }
            #[test]
            fn uring_w2() { super::$case(Variant::UringW2) }
            #[test]
            fn uring_w2_shared() { super::$case(Variant::UringW2Shared) }
            #[test]
            fn rtsig_w2() { super::$case(Variant::RtsigW2) }
        }
    )+};
}

/// Asserts that every test file of the crate at `manifest_dir` (each
/// `tests/<name>.rs` and `tests/<name>/mod.rs`) is a module of its one
/// integration binary `tests/<main>`: with `autotests = false`, Cargo
/// would silently leave out a file nobody listed.
pub fn assert_every_test_file_is_a_module(manifest_dir: &str, main: &str) {
    let tests = std::path::Path::new(manifest_dir).join("tests");
    let main_text = std::fs::read_to_string(tests.join(main))
        .unwrap_or_else(|e| panic!("reading tests/{main}: {e}"));
    let declared = |name: &str| {
        main_text
            .lines()
            .any(|l| l.trim_start().trim_start_matches("pub ") == format!("mod {name};"))
    };
    let entries =
        std::fs::read_dir(&tests).unwrap_or_else(|e| panic!("reading {}: {e}", tests.display()));
    let mut missing = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = if path.is_dir() && path.join("mod.rs").exists() {
            entry.file_name().to_string_lossy().into_owned()
        } else if path.extension().is_some_and(|e| e == "rs") && entry.file_name() != main {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            continue;
        };
        if !declared(&name) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "tests/{main} has no `mod` line for {missing:?}: add one, or Cargo never builds them"
    );
}
