//! Outputs that are FIFOs (named pipes). Opening one for writing waits for a reader, in a
//! call that a signal does not end (the handlers restart system calls, so that exchanges are
//! never broken by one). So just before writing an output, a command waits here for its
//! reader if it is a FIFO, where Ctrl-C or SIGTERM ends the wait, and holds an end open
//! until that output is written: the output's own opening then finds the reader at once,
//! and dropping the [`Reader`] afterwards lets the reader see the end of its input.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use sapwood::OutputTarget;

use crate::Interrupted;

/// How often the wait looks for a reader and for a signal.
const POLL: Duration = Duration::from_millis(20);

/// A FIFO output's write end, held open until the output is written (then dropped).
#[derive(Debug, Default)]
pub struct Reader {
    /// Held, never used: it keeps the reader connected while the output opens its own end.
    _end: Option<File>,
}

/// Waits until `output` (links followed), if it is a FIFO, has a reader, or a signal
/// arrives (an [`Interrupted`] error). Any other output is left alone.
pub fn await_reader(output: &Path) -> anyhow::Result<Reader> {
    let Ok(OutputTarget::WriteThrough(dest)) = sapwood::output_target(output) else {
        return Ok(Reader::default());
    };
    if !std::fs::metadata(&dest).is_ok_and(|m| m.file_type().is_fifo()) {
        return Ok(Reader::default());
    }
    let mut said = false;
    loop {
        // without a reader, a non-blocking open fails at once (ENXIO) instead of waiting
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&dest)
        {
            Ok(f) => return Ok(Reader { _end: Some(f) }),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if !said {
                    eprintln!("waiting for a reader of the FIFO {}", output.display());
                    said = true;
                }
                Interrupted::check()?;
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("{}", output.display()))),
        }
    }
}
