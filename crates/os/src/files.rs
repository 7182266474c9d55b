//! Output files that are either whole or absent: written to a temporary file
//! in the same directory, flushed to disk, then renamed over the target, and
//! the directory synced so that the rename itself survives a crash
//! (rename(2): the replacement is atomic). A writer killed or failing before
//! [`AtomicFile::commit`] leaves the earlier file untouched; its temporary
//! file is removed on drop (a SIGKILL cannot run drop, but the temporary's
//! name starts with `.` and ends in `.tmp`, so it never passes for output).

use std::ffi::OsString;
use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: readers see the old file or the new
/// one, never a mix or a truncated file.
pub fn write_atomic(path: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes.as_ref())?;
    f.commit()
}

/// Checks now that `path` can be written later with [`write_atomic`]: it
/// names a file, not a directory, in a directory that takes a new file (a
/// temporary one beside it, removed at once). For outputs written when a
/// run ends, so that a mistyped or unwritable path fails before anything
/// is measured.
///
/// # Errors
///
/// Why the file could not be written.
pub fn check_writable(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a directory", path.display()),
        ));
    }
    AtomicFile::create(path).map(drop)
}

/// A file being written that replaces `path` only on [`commit`](Self::commit).
///
/// Dropped without a commit, it removes its temporary file and leaves `path`
/// as it was. Wrap it in a [`std::io::BufWriter`] for many small writes and
/// take it back with `into_inner` before committing.
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts a replacement for `path` (a temporary file beside it, with the
    /// permissions `File::create` would give: 0666 less the umask).
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            )
        })?;
        let mut prefix = OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(parent(&path))?;
        Ok(AtomicFile { tmp, path })
    }

    /// The file it will replace.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the data to disk, renames the temporary file over the target
    /// and syncs the directory.
    pub fn commit(mut self) -> io::Result<()> {
        self.tmp.as_file_mut().flush()?;
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        // A directory opened read-only can be fsynced (fsync(2)); some file
        // systems refuse, which costs only the durability of the rename.
        match File::open(parent(&self.path)).and_then(|d| d.sync_all()) {
            Err(e) if e.kind() != io::ErrorKind::InvalidInput => Err(e),
            _ => Ok(()),
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.tmp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_atomic(&p, "v1").unwrap();
        write_atomic(&p, "v2 longer").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "v2 longer");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    #[test]
    fn dropped_without_commit_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.csv");
        write_atomic(&p, "old").unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"half").unwrap();
        assert_eq!(names(dir.path()).len(), 2, "the temporary sits beside it");
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(names(dir.path()), ["out.csv"]);
    }

    #[test]
    fn has_the_permissions_file_create_gives() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        File::create(&a).unwrap();
        write_atomic(&b, "x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a), mode(&b));
    }

    #[test]
    fn a_path_without_a_file_name_is_an_error() {
        let e = AtomicFile::create("/").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
