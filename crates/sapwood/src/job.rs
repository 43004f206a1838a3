//! One training job: where its rows come from, how it starts (fresh, continuing a model,
//! resuming a checkpoint), over which workers it runs. [`Booster::fit`] runs it.

use sapwood_core::collective::Collective;
use sapwood_core::params::{Checked, Params, RunOptions};
use sapwood_core::train::Checkpoint;

use crate::batches::RowSource;
use crate::booster::Booster;
use crate::dataset::Dataset;
use crate::stream::BinnedDataset;

/// Where a training job's rows come from.
#[derive(Clone, Copy)]
pub enum Rows<'a> {
    /// Columns in memory (with their labels, weights, base margins and query groups), binned
    /// by the job with cuts every worker agrees on (or the continued model's); evaluation
    /// sets are binned with the same cuts.
    Columns {
        /// The training rows (this rank's, for [`Workers::Rank`]).
        train: &'a Dataset<'a>,
        /// Evaluation sets by name, reported every round (on rank 0).
        evals: &'a [(&'a str, &'a Dataset<'a>)],
    },
    /// Rows binned as they were read ([`crate::CutPass`] with the other workers, or
    /// [`Booster::bin_pass`] of the model to continue); evaluation sets binned like them.
    Binned {
        /// The training rows (this rank's, for [`Workers::Rank`]).
        train: &'a BinnedDataset,
        /// Evaluation sets by name, binned with the training rows' cuts.
        evals: &'a [(&'a str, &'a BinnedDataset)],
        /// Each training row's base margin (`groups` per row, row-major): binned data
        /// carries none of its own.
        base_margin: Option<&'a [f32]>,
    },
    /// Rows read in batches (a Parquet or CSV file read by row groups, Arrow record
    /// batches), binned by the job as they are read (see [`RowSource`]).
    Stream {
        /// The training rows (this rank's, for [`Workers::Rank`]), with their base
        /// margins and query ids when the batches carry them.
        train: &'a dyn RowSource,
        /// Evaluation sets by name, read on rank 0 and binned with the training rows' cuts.
        evals: &'a [(&'a str, &'a dyn RowSource)],
    },
}

/// Over which workers a job trains. The model is the same for every choice.
pub enum Workers<'a> {
    /// `run.workers` workers in this process (a thread pool and a shard of the rows each, in
    /// row order, queries kept whole).
    InProcess,
    /// This process is one rank of a distributed job (MPI, TCP ranks, Dask, Spark): its rows
    /// are `row_offset..row_offset + n` of the job's `n_total`, the ranks' ranges following
    /// one another in rank order. The ranks first agree that they run the same job.
    Rank {
        /// The job's collective (this rank's end of it).
        collective: &'a mut dyn Collective,
        /// Global index of this rank's first row.
        row_offset: u64,
        /// Rows over all ranks.
        n_total: u64,
    },
}

/// One training job, for [`Booster::fit`].
pub struct TrainJob<'a> {
    /// What defines the model, checked where it entered ([`Checked::new`],
    /// [`crate::Settings::checked`]).
    pub params: &'a Checked<Params>,
    /// How the job runs (threads, device, workers, codec), checked like the parameters; the
    /// model does not depend on it.
    pub run: &'a Checked<RunOptions>,
    /// Where the rows come from.
    pub rows: Rows<'a>,
    /// A saved model to continue (XGBoost's `xgb_model`): its trees are replayed into the
    /// margins, then `num_rounds` more rounds are added. The rows are binned with its cuts
    /// (binned rows must already be: [`Booster::bin_pass`]); the objective, its constants,
    /// the classes and the features must be the model's, and its binning parameters are
    /// kept. With the same rows and parameters, 50 rounds continued by 50 save the bytes of
    /// 100 in one go.
    pub init_model: Option<&'a Booster>,
    /// A checkpoint of this same job to resume from ([`Checkpoint::load`]): its trees are
    /// replayed and training goes on from its round, to the bytes of a run never stopped.
    /// It must have been written by this job (parameters, features, cuts, data and, when
    /// continuing a model, that model): anything else is an error naming what differs.
    pub resume: Option<&'a Checkpoint>,
    /// Over which workers it trains.
    pub workers: Workers<'a>,
}

impl<'a> TrainJob<'a> {
    /// A fresh job on in-process workers.
    pub fn new(params: &'a Checked<Params>, run: &'a Checked<RunOptions>, rows: Rows<'a>) -> Self {
        TrainJob {
            params,
            run,
            rows,
            init_model: None,
            resume: None,
            workers: Workers::InProcess,
        }
    }

    /// The job continuing `init` (see [`TrainJob::init_model`]).
    pub fn continuing(self, init: Option<&'a Booster>) -> Self {
        TrainJob {
            init_model: init,
            ..self
        }
    }

    /// The job resuming from `checkpoint` (see [`TrainJob::resume`]).
    pub fn resuming(self, checkpoint: Option<&'a Checkpoint>) -> Self {
        TrainJob {
            resume: checkpoint,
            ..self
        }
    }

    /// The job as one rank of a distributed job (see [`Workers::Rank`]).
    pub fn on_rank(
        self,
        collective: &'a mut dyn Collective,
        row_offset: u64,
        n_total: u64,
    ) -> Self {
        TrainJob {
            workers: Workers::Rank {
                collective,
                row_offset,
                n_total,
            },
            ..self
        }
    }
}

/// How a job starts, as its workers receive it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Start<'a> {
    /// The model it continues.
    pub init: Option<&'a Booster>,
    /// The checkpoint it resumes.
    pub resume: Option<&'a Checkpoint>,
}
