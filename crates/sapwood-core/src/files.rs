//! Writing files so that a failure never leaves a partial file under the final name.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A temporary name beside `path`, in the same directory so the rename is atomic.
pub fn temporary_beside(path: &Path) -> PathBuf {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// Test only: `SAPWOOD_TEST_FAIL_WRITE=<file name>:<bytes>` makes [`write_atomic`] to a file
/// of that name fail after that many of its bytes reached the temporary file, as a full disk
/// would, so tests can show that a failure mid-write leaves no output and no temporary
/// (models, summaries, checkpoints). Never set it outside tests.
pub const TEST_FAIL_WRITE_ENV: &str = "SAPWOOD_TEST_FAIL_WRITE";

/// The bytes after which writing `path` fails, when [`TEST_FAIL_WRITE_ENV`] names its file.
fn injected_failure(path: &Path) -> Option<usize> {
    let spec = std::env::var(TEST_FAIL_WRITE_ENV).ok()?;
    let (name, bytes) = spec.rsplit_once(':')?;
    if path.file_name()? != std::ffi::OsStr::new(name) {
        return None;
    }
    bytes.trim().parse().ok()
}

/// Writes `bytes` to a temporary file beside `path`, then renames it into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temporary_beside(path);
    let fail_after = injected_failure(path);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        if let Some(n) = fail_after {
            f.write_all(&bytes[..n.min(bytes.len())])?;
            f.sync_all()?;
            return Err(std::io::Error::other(format!(
                "write failed after {n} bytes (injected by {TEST_FAIL_WRITE_ENV}, a test hook)"
            )));
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    })
}

/// Checks, before any work, that `path` can be written: its directory exists and takes a
/// new file, and `path` is not a directory. Nothing is left behind.
pub fn check_writable(path: &Path) -> Result<()> {
    let err = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    if path.is_dir() {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "is a directory, not a file name",
        )));
    }
    let tmp = temporary_beside(path);
    std::fs::File::create(&tmp).map_err(|e| {
        let dir = tmp
            .parent()
            .map_or(String::new(), |d| d.display().to_string());
        err(std::io::Error::new(
            e.kind(),
            format!("cannot create a file in `{dir}`: {e}"),
        ))
    })?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// Removes temporaries of `path` left by writers that were killed (their process is gone),
/// so an interrupted run does not leave hidden files behind forever. Returns how many.
pub fn remove_stale_temporaries(path: &Path) -> usize {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return 0;
    };
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".tmp"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id()
            && !process_alive(pid)
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether process `pid` runs; where that cannot be told, it is assumed to (nothing removed).
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Reads `path` as text and parses it with `parse`; a read error names the file, and so does
/// an invalid-content error (model files, checkpoints).
pub fn read_parsed<T>(path: &Path, parse: impl FnOnce(&str) -> Result<T>) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|e| match e {
        Error::InvalidModel(m) => Error::InvalidModel(format!("{}: {m}", path.display())),
        e => e,
    })
}
