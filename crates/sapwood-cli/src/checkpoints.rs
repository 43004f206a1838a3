//! `--checkpoint`, `--checkpoint-every` and `--resume`: checkpoints written atomically every
//! N rounds, and a run continued from one to the bytes of a run never stopped.

use std::path::{Path, PathBuf};

use sapwood::{Checkpoint, Control, RoundReport, TrainObserver};

/// Wraps the progress observer with checkpoint files.
pub struct Checkpoints<'a, O: TrainObserver> {
    /// The observer rounds are reported to.
    pub inner: &'a mut O,
    /// Where checkpoints are written.
    pub path: Option<PathBuf>,
    /// Rounds between checkpoints.
    pub every: usize,
}

/// The checkpoint `--resume` names, loaded (and said on stderr).
pub fn resume_of(path: Option<&Path>) -> sapwood::Result<Option<Checkpoint>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let c = Checkpoint::load(path)?;
    eprintln!("resuming from {} after round {}", path.display(), c.rounds);
    Ok(Some(c))
}

impl<O: TrainObserver> TrainObserver for Checkpoints<'_, O> {
    fn on_round(&mut self, report: &RoundReport<'_>) -> Control {
        self.inner.on_round(report)
    }

    fn on_rows_binned(&mut self, n_rows: usize) {
        self.inner.on_rows_binned(n_rows)
    }

    fn checkpoint_every(&self) -> usize {
        if self.path.is_some() {
            self.every
        } else {
            0
        }
    }

    fn on_checkpoint(&mut self, checkpoint: &Checkpoint) -> sapwood::Result<()> {
        match &self.path {
            Some(p) => checkpoint.save(p),
            None => Ok(()),
        }
    }
}
