//! Outputs that are FIFOs (named pipes). Opening one for writing waits for a reader, in a
//! call that a signal does not end (the handlers restart system calls, so that exchanges are
//! never broken by one). So a command first waits here for each FIFO output's reader, where
//! Ctrl-C or SIGTERM ends the wait, and holds its end open until the command ends: the
//! output's own opening then finds the reader at once.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use sapwood::OutputTarget;

use crate::Interrupted;

/// How often the wait looks for a reader and for a signal.
const POLL: Duration = Duration::from_millis(20);

/// The FIFO outputs' write ends, held open while the command runs.
#[derive(Debug, Default)]
pub struct Readers {
    /// Held, never used: closing them would end the readers' input early.
    _ends: Vec<File>,
}

/// Waits until each FIFO among `outputs` (links followed) has a reader, or a signal
/// arrives (an [`Interrupted`] error). Other outputs are left alone.
pub fn await_readers(outputs: &[&Path]) -> anyhow::Result<Readers> {
    let mut held = Vec::new();
    for &path in outputs {
        let Ok(OutputTarget::WriteThrough(dest)) = sapwood::output_target(path) else {
            continue;
        };
        let is_fifo = std::fs::metadata(&dest).is_ok_and(|m| m.file_type().is_fifo());
        if !is_fifo {
            continue;
        }
        let mut said = false;
        loop {
            // without a reader, a non-blocking open fails at once (ENXIO) instead of waiting
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&dest)
            {
                Ok(f) => {
                    held.push(f);
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    if !said {
                        eprintln!("waiting for a reader of the FIFO {}", path.display());
                        said = true;
                    }
                    Interrupted::check()?;
                    std::thread::sleep(POLL);
                }
                Err(e) => return Err(anyhow::Error::new(e).context(format!("{}", path.display()))),
            }
        }
    }
    Ok(Readers { _ends: held })
}
