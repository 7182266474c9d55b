//! Issue 17 part 4: a writer killed before it commits leaves the earlier
//! output whole and no temporary file that passes for output.
//!
//! The test re-runs its own binary as the writer (selected by an environment
//! variable), waits until that child has written part of the new version,
//! SIGKILLs it and then reads the directory.

use connlab_os::files::{write_atomic, AtomicFile};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const CHILD: &str = "CONNLAB_ATOMIC_FILE_CHILD";

/// The child: starts v2 of the file, writes half of it, says so, and waits to be killed.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return;
    };
    let mut f = AtomicFile::create(&path).unwrap();
    f.write_all(&vec![b'2'; 1 << 20]).unwrap();
    f.flush().unwrap();
    println!("written");
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
fn writer_killed_before_commit_leaves_the_old_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    let v1 = vec![b'1'; 300_000];
    write_atomic(&path, &v1).unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "atomic_file::child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the writer ended early"
        );
        if line.trim_end().ends_with("written") {
            break;
        }
    }
    // The child has a megabyte of v2 in its temporary file now.
    let tmp: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "result.json")
        .collect();
    assert_eq!(tmp.len(), 1, "one temporary beside the output: {tmp:?}");
    assert!(tmp[0].starts_with(".result.json.") && tmp[0].ends_with(".tmp"));

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), v1, "v1 is whole");

    // The next writer replaces the file; the killed writer's temporary is
    // the only other entry and is never read as output.
    write_atomic(&path, b"v3").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"v3");
}

#[test]
fn writer_that_fails_before_commit_removes_its_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    write_atomic(&path, b"v1").unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "atomic_file::child_panics", "--test-threads=1"])
        .env(CHILD.to_owned() + "_PANIC", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
    assert_eq!(std::fs::read(&path).unwrap(), b"v1");
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "the temporary was removed on unwind");
}

/// The child of the test above: panics with v2 half written.
#[test]
fn child_panics() {
    let Some(path) = std::env::var_os(CHILD.to_owned() + "_PANIC").map(PathBuf::from) else {
        return;
    };
    let mut f = AtomicFile::create(&path).unwrap();
    f.write_all(b"v2, half").unwrap();
    panic!("the writer failed before commit");
}
