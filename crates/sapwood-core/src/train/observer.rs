//! What front ends learn after each round, how they stop training, and how they keep and
//! give back checkpoints.

use super::checkpoint::Checkpoint;
use crate::collective::CommStats;
use crate::error::Result;
use crate::metric::EvalResult;

/// A metric the front end computes itself on the evaluation sets' margins (a Python
/// `custom_metric` or `feval`), after the built-in ones.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomEval {
    /// The evaluation set's name.
    pub dataset: String,
    /// The metric's name.
    pub name: String,
    /// Its value.
    pub value: f64,
    /// Whether a larger value is better (for early stopping).
    pub higher_is_better: bool,
}

/// One evaluation set as custom metrics read it after a round.
#[derive(Debug, Clone, Copy)]
pub struct EvalMargins<'a> {
    /// The set's name.
    pub name: &'a str,
    /// Margins with every tree so far (`groups` per row, row-major).
    pub margins: &'a [f32],
    /// Margins per row.
    pub groups: usize,
}

/// What an observer learns after each round.
#[derive(Debug, Clone)]
pub struct RoundReport<'a> {
    /// Zero-based round just completed.
    pub round: usize,
    /// Rounds requested.
    pub num_rounds: usize,
    /// Metrics of every evaluation set (empty on workers other than rank 0).
    pub metrics: &'a [EvalResult],
    /// The observer's own metrics of this round ([`TrainObserver::custom_metrics`]).
    pub custom: &'a [CustomEval],
    /// Seconds since training started.
    pub elapsed: f64,
    /// This worker's traffic so far.
    pub comm: CommStats,
}

/// Whether training goes on after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Train the next round.
    Continue,
    /// Stop now and keep the rounds trained so far.
    Stop,
}

/// The front end's side of a run: per-round progress (progress bars, Ctrl-C, logs) and
/// checkpoints.
pub trait TrainObserver: Send {
    /// Called after every round on every worker.
    fn on_round(&mut self, report: &RoundReport<'_>) -> Control;

    /// Rounds between checkpoints; 0 (the default) for none.
    fn checkpoint_every(&self) -> usize {
        0
    }

    /// Keeps a checkpoint, written on rank 0 every [`TrainObserver::checkpoint_every`]
    /// rounds; an error stops training.
    fn on_checkpoint(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let _ = checkpoint;
        Ok(())
    }

    /// Called once the job has read and binned its training rows itself (rows read in
    /// batches), before the first round, with this worker's row count: a front end can
    /// time its reading or note its memory there. Nothing by default.
    fn on_rows_binned(&mut self, n_rows: usize) {
        let _ = n_rows;
    }

    /// Whether gradients come from [`TrainObserver::gradients`] (a custom objective, such
    /// as XGBoost's `obj=`) instead of the built-in loss; false by default.
    fn has_custom_objective(&self) -> bool {
        false
    }

    /// Metrics of the observer's own on the evaluation sets' margins after each round, on
    /// rank 0, before the round's stop decision: early stopping watches the last one
    /// returned (after the built-in metrics), and [`RoundReport::custom`] carries them. None
    /// by default.
    fn custom_metrics(
        &mut self,
        round: usize,
        sets: &[EvalMargins<'_>],
    ) -> Result<Vec<CustomEval>> {
        let _ = (round, sets);
        Ok(Vec::new())
    }

    /// A custom objective's (g, h) of every row and group from this worker's margins
    /// (`groups` per row, row-major), asked every round when
    /// [`TrainObserver::has_custom_objective`]; `None` (the default) uses the built-in loss.
    /// The values go through the same quantiser as the built-in losses' gradients.
    fn gradients(&mut self, margins: &[f32], groups: usize) -> Option<Result<Vec<[f32; 2]>>> {
        let _ = (margins, groups);
        None
    }
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl TrainObserver for Quiet {
    fn on_round(&mut self, _report: &RoundReport<'_>) -> Control {
        Control::Continue
    }
}
