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

/// Where an output named by the user really goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// A regular file, or nothing yet: written to a temporary beside it, renamed over it.
    Replace(PathBuf),
    /// Something that is not a regular file (a character device such as `/dev/null`, a FIFO,
    /// a socket): opened and written in place, since renaming over it would replace the
    /// node itself and its readers would never see the bytes.
    WriteThrough(PathBuf),
}

/// How many symbolic links an output path may pass through (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Resolves `path` to where an output belongs: symbolic links are followed to their target
/// (a link stays a link; its target is written), and the target is classified. A directory is
/// an error.
pub fn output_target(path: &Path) -> std::io::Result<OutputTarget> {
    let mut at = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(OutputTarget::Replace(at));
            }
            Err(e) => return Err(e),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let link = std::fs::read_link(&at)?;
            at = if link.is_absolute() {
                link
            } else {
                at.parent().unwrap_or(Path::new("")).join(link)
            };
            continue;
        }
        if kind.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory, not a file name",
            ));
        }
        return Ok(if kind.is_file() {
            OutputTarget::Replace(at)
        } else {
            OutputTarget::WriteThrough(at)
        });
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links to follow"
    )))
}

/// An output being written: either a temporary file that [`commit`](OutputFile::commit)
/// renames over a regular file (dropped uncommitted, the temporary is removed and the old file
/// is untouched), or a device, FIFO or socket written in place.
#[derive(Debug)]
pub struct OutputFile {
    file: std::fs::File,
    /// The temporary and the regular file it replaces; None when written in place.
    rename: Option<(PathBuf, PathBuf)>,
    fail_after: Option<usize>,
    written: usize,
}

impl OutputFile {
    /// Opens the output named `path` (see [`output_target`]).
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let fail_after = injected_failure(path);
        match output_target(path)? {
            OutputTarget::Replace(dest) => {
                let tmp = temporary_beside(&dest);
                let file = std::fs::File::create(&tmp)?;
                Ok(OutputFile {
                    file,
                    rename: Some((tmp, dest)),
                    fail_after,
                    written: 0,
                })
            }
            OutputTarget::WriteThrough(dest) => {
                let file = std::fs::OpenOptions::new().write(true).open(&dest)?;
                Ok(OutputFile {
                    file,
                    rename: None,
                    fail_after,
                    written: 0,
                })
            }
        }
    }

    /// Makes the output final: syncs the temporary and renames it over the regular file (or
    /// flushes a device or FIFO written in place).
    pub fn commit(mut self) -> std::io::Result<()> {
        self.file.flush()?;
        if let Some((tmp, dest)) = self.rename.take() {
            let done = self
                .file
                .sync_all()
                .and_then(|()| std::fs::rename(&tmp, &dest));
            if done.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            done?;
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(limit) = self.fail_after {
            if self.written + buf.len() > limit {
                let room = limit - self.written;
                self.file.write_all(&buf[..room])?;
                self.written = limit;
                let _ = self.file.sync_all();
                return Err(std::io::Error::other(format!(
                    "write failed after {limit} bytes (injected by {TEST_FAIL_WRITE_ENV}, a test hook)"
                )));
            }
        }
        let n = self.file.write(buf)?;
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // not committed: something failed, so the temporary goes and the old file stays
        if let Some((tmp, _)) = self.rename.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes `bytes` to `path` through an [`OutputFile`]: a regular file is replaced whole by a
/// rename, or left as it was on failure; a device, FIFO or symbolic link's target is written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let write = || -> std::io::Result<()> {
        let mut f = OutputFile::create(path)?;
        f.write_all(bytes)?;
        f.commit()
    };
    write().map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Checks, before any work, that `path` can be written: its directory exists and takes a
/// new file, and `path` is not a directory. Nothing is left behind. A device or FIFO (or a
/// link to one) is not opened here: opening a FIFO waits for its reader.
pub fn check_writable(path: &Path) -> Result<()> {
    let err = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let dest = match output_target(path).map_err(err)? {
        OutputTarget::Replace(dest) => dest,
        OutputTarget::WriteThrough(_) => return Ok(()),
    };
    let tmp = temporary_beside(&dest);
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
    let path = match output_target(path) {
        Ok(OutputTarget::Replace(dest)) => dest,
        _ => return 0,
    };
    let path = path.as_path();
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
