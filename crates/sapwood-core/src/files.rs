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

/// Writes `bytes` to a temporary file beside `path`, then renames it into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temporary_beside(path);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
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
