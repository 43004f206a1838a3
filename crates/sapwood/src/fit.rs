//! [`Booster::fit`], the one function every front end (the CLI, Python, Dask, Spark, the
//! Rust conveniences) trains through, and the conveniences themselves.

use sapwood_core::params::{Checked, Params, RunOptions};
use sapwood_core::train::{Quiet, TrainObserver};

use crate::booster::Booster;
use crate::dataset::Dataset;
use crate::job::{Rows, TrainJob, Workers};
use crate::stream::BinnedDataset;
use crate::Result;

impl Booster {
    /// Runs `job`, telling `observer` about every round: it may stop training (the rounds
    /// so far are kept) and keep checkpoints. Its parameters and run options were checked where
    /// they entered; what depends on the data (labels, classes, evaluation sets, the model
    /// to continue) is checked here, before any work.
    pub fn fit(job: TrainJob<'_>, observer: &mut dyn TrainObserver) -> Result<Booster> {
        let TrainJob {
            params,
            run,
            rows,
            init_model,
            resume,
            workers,
        } = job;
        let start = crate::job::Start {
            init: init_model,
            resume,
        };
        match workers {
            Workers::InProcess => crate::in_process::fit(params, run, rows, start, observer),
            Workers::Rank {
                collective,
                row_offset,
                n_total,
            } => {
                let part = crate::rank::Part {
                    params,
                    run,
                    start,
                    row_offset,
                    n_total,
                };
                crate::rank::fit(part, rows, collective, observer)
            }
        }
    }

    /// Trains on `train` with the default run options (all cores, CPU, one worker),
    /// reporting metrics on `evals` (name, dataset). The conveniences check `params` and
    /// `run` (they are where a Rust caller's parameters enter) and call [`Booster::fit`].
    pub fn train(
        params: &Params,
        train: &Dataset<'_>,
        evals: &[(&str, &Dataset<'_>)],
    ) -> Result<Booster> {
        Self::train_with(params, &RunOptions::default(), train, evals, &mut Quiet)
    }

    /// Trains like [`Booster::train`] as `run` says (threads, device, workers, codec),
    /// telling `observer` about every round; the observer can stop training (the rounds so
    /// far are kept). The model does not depend on `run`.
    pub fn train_with(
        params: &Params,
        run: &RunOptions,
        train: &Dataset<'_>,
        evals: &[(&str, &Dataset<'_>)],
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        let (params, run) = checked(params, run)?;
        Self::fit(
            TrainJob::new(&params, &run, Rows::Columns { train, evals }),
            observer,
        )
    }

    /// Continues `init` (XGBoost's `xgb_model`): replays its trees and trains
    /// `params.num_rounds` more rounds on `train`, binned with the model's cuts (see
    /// [`TrainJob::init_model`] for what must match). Otherwise like
    /// [`Booster::train_with`].
    pub fn train_from_model(
        params: &Params,
        run: &RunOptions,
        init: &Booster,
        train: &Dataset<'_>,
        evals: &[(&str, &Dataset<'_>)],
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        let (params, run) = checked(params, run)?;
        let job = TrainJob::new(&params, &run, Rows::Columns { train, evals });
        Self::fit(job.continuing(Some(init)), observer)
    }

    /// Trains on data binned as it was read (see [`crate::CutPass`]); evaluation sets must
    /// be binned with the training set's cuts.
    pub fn train_binned(
        params: &Params,
        run: &RunOptions,
        train: &BinnedDataset,
        evals: &[(&str, &BinnedDataset)],
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        let rows = Rows::Binned {
            train,
            evals,
            base_margin: None,
        };
        let (params, run) = checked(params, run)?;
        Self::fit(TrainJob::new(&params, &run, rows), observer)
    }
}

/// A Rust caller's parameters and run options, checked.
fn checked(params: &Params, run: &RunOptions) -> Result<(Checked<Params>, Checked<RunOptions>)> {
    Ok((Checked::new(params.clone())?, Checked::new(*run)?))
}
