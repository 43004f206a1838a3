//! Training one worker's shard: agree on cuts, bin, agree on the base margin, boost.
//!
//! - [`observer`]: per-round reports and the stop signal front ends use;
//! - [`agree`]: what workers agree on before boosting (rows, cuts, classes, base margin);
//! - [`mod@boost`]: the boosting loop around the grower;
//! - [`checkpoint`]: a run's state at the end of a round, to continue to the same bytes.
//!
//! Parameters are validated by the public crate (`sapwood`) before they reach this module.

pub mod agree;
pub mod boost;
pub mod checkpoint;
pub mod observer;
pub mod quantile;

use std::sync::Arc;

use crate::backend::{BackendFactory, ShardData};
use crate::collective::{Collective, CommStats};
use crate::data::binned::BinnedMatrix;
use crate::data::cuts::{CutSample, Cuts};
use crate::data::matrix::FeatureMatrix;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::objective::Objective;
use crate::params::Params;

pub use agree::{agree_cuts, agree_num_class, base_margin, exact_sum, total_rows};
pub use boost::{boost, sample_features, BoostOutcome, BoostSetup, EvalSet};
pub use checkpoint::Checkpoint;
pub use observer::{Control, EvalResult, Quiet, RoundReport, TrainObserver};

/// This worker's rows of a training job.
pub struct Shard<'a> {
    /// Feature columns.
    pub features: FeatureMatrix<'a>,
    /// Labels (class indices for classification).
    pub labels: Vec<f32>,
    /// Optional sample weights.
    pub weights: Option<Vec<f32>>,
    /// Global index of the shard's first row.
    pub row_offset: u64,
}

/// An evaluation set before binning.
pub struct EvalInput<'a> {
    /// Name used in reports.
    pub name: String,
    /// Feature columns (matched to the training columns by name).
    pub features: FeatureMatrix<'a>,
    /// Labels (class indices for classification).
    pub labels: Vec<f32>,
    /// Optional weights.
    pub weights: Option<Vec<f32>>,
}

/// A finished training job on one worker.
pub struct Trained {
    /// The model (identical on every worker).
    pub model: Model,
    /// Per-round metrics (rank 0).
    pub history: Vec<Vec<EvalResult>>,
    /// Whether the observer stopped training early.
    pub interrupted: bool,
    /// Traffic of this worker's collective.
    pub comm: CommStats,
    /// Its traffic in each round.
    pub comm_rounds: Vec<CommStats>,
}

fn check_inputs(
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    n: usize,
    what: &str,
    first_row: usize,
) -> Result<()> {
    if labels.len() != n {
        return Err(Error::LengthMismatch {
            column: format!("{what} label"),
            got: labels.len(),
            expected: n,
        });
    }
    // rows are reported by their index in the whole dataset, not in this worker's shard
    for (i, &y) in labels.iter().enumerate() {
        objective.check_label(first_row + i, y)?;
    }
    if let Some(w) = weights {
        if w.len() != n {
            return Err(Error::LengthMismatch {
                column: format!("{what} weight"),
                got: w.len(),
                expected: n,
            });
        }
        if let Some(i) = w.iter().position(|&v| !(v.is_finite() && v >= 0.0)) {
            return Err(Error::InvalidWeight {
                row: first_row + i,
                value: w[i],
            });
        }
    }
    Ok(())
}

/// This worker's rows, binned with the agreed cuts.
pub struct BinnedShard {
    /// Binned rows.
    pub binned: Arc<BinnedMatrix>,
    /// Labels (class indices for classification).
    pub labels: Vec<f32>,
    /// Optional sample weights.
    pub weights: Option<Vec<f32>>,
    /// Global index of the shard's first row.
    pub row_offset: u64,
}

/// A shard binned with cuts every worker agreed on, and what training needs besides.
pub struct BinnedJob {
    /// Feature names, in column order.
    pub feature_names: Vec<String>,
    /// The agreed cuts.
    pub cuts: Cuts,
    /// This worker's rows.
    pub shard: BinnedShard,
    /// Rows over all workers.
    pub n_total: u64,
    /// Evaluation sets binned with `cuts` (rank 0 only).
    pub evals: Vec<EvalSet>,
    /// The checkpoint to continue from (every worker gets the same one).
    pub resume: Option<Checkpoint>,
}

/// Trains on this worker's shard: cuts from the gathered sample, binning, base margin,
/// boosting. Every worker calls it with its own shard; evaluation sets matter on rank 0 only.
pub fn train(
    params: &Params,
    shard: Shard<'_>,
    evals: Vec<EvalInput<'_>>,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    train_from(params, shard, evals, None, collective, factory, observer)
}

/// Trains like [`train`], continuing from `resume` when given (see [`checkpoint`]).
pub fn train_from(
    params: &Params,
    shard: Shard<'_>,
    evals: Vec<EvalInput<'_>>,
    resume: Option<Checkpoint>,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    let n_total = total_rows(shard.features.n_rows(), collective)?;
    if n_total == 0 {
        return Err(Error::EmptyData("the training data has no rows".into()));
    }
    let sample = CutSample::collect(
        &shard.features,
        shard.weights.as_deref(),
        shard.row_offset,
        n_total,
        params.seed,
        params.bin_sample_rows,
    );
    let cuts = agree_cuts(&sample, params, collective)?;
    let names = shard.features.names().to_vec();
    let binned = Arc::new(BinnedMatrix::new(&shard.features, &cuts)?);
    let mut eval_sets = Vec::new();
    if collective.rank() == 0 {
        for e in evals {
            let m = crate::model::select_columns(&names, &cuts, &e.features)?;
            let binned = BinnedMatrix::new(&m, &cuts)?;
            eval_sets.push(EvalSet::new(e.name, Arc::new(binned), e.labels, e.weights));
        }
    }
    let shard = BinnedShard {
        binned,
        labels: shard.labels,
        weights: shard.weights,
        row_offset: shard.row_offset,
    };
    let job = BinnedJob {
        feature_names: names,
        cuts,
        shard,
        n_total,
        evals: eval_sets,
        resume,
    };
    train_binned(params, job, collective, factory, observer)
}

/// Trains on a shard already binned with the agreed cuts (the streaming path: data read
/// in batches is binned as it arrives).
pub fn train_binned(
    params: &Params,
    job: BinnedJob,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    let BinnedJob {
        feature_names,
        cuts,
        shard,
        n_total,
        evals,
        resume,
    } = job;
    if n_total == 0 {
        return Err(Error::EmptyData("the training data has no rows".into()));
    }
    let n_local = shard.binned.n_rows();
    let num_class = agree_num_class(params, &shard.labels, collective)?;
    let objective = params.objective_with(num_class)?;
    check_inputs(
        &objective,
        &shard.labels,
        shard.weights.as_deref(),
        n_local,
        "training",
        shard.row_offset as usize,
    )?;
    for e in &evals {
        check_inputs(
            &objective,
            &e.labels,
            e.weights.as_deref(),
            e.binned.n_rows(),
            &format!("`{}`", e.name),
            0,
        )
        .map_err(|source| Error::InDataset {
            dataset: format!("evaluation set `{}`", e.name),
            source: Box::new(source),
        })?;
    }
    let base = base_margin(
        params,
        &objective,
        &shard.labels,
        shard.weights.as_deref(),
        n_total,
        collective,
    )?;
    let mut model = Model {
        params: Params {
            num_class: (num_class > 1).then_some(num_class),
            ..params.clone()
        },
        groups: objective.groups(),
        classes: None,
        feature_names,
        cuts,
        base_margin: base.clone(),
        trees: Vec::new(),
        best_iteration: None,
        label_name: None,
    };
    if let Some(c) = &resume {
        c.check_matches(&model)?;
    }
    let mut eval_sets = evals;
    // the leaf refit of quantile losses reads rows on the host, whatever the backend
    let refit_copy = objective.kind().refits_leaves().then(|| {
        (
            shard.binned.clone(),
            shard.labels.clone(),
            shard.weights.clone(),
        )
    });
    let mut backend = factory.create(ShardData {
        binned: shard.binned,
        offsets: model.cuts.offsets().to_vec(),
        labels: shard.labels,
        weights: shard.weights,
        objective,
        base_margin: base.clone(),
        row_offset: shard.row_offset,
    })?;
    let setup = BoostSetup {
        skeleton: &model,
        objective: &objective,
        n_total,
        resume: resume.as_ref(),
        refit: refit_copy
            .as_ref()
            .map(|(binned, labels, weights)| quantile::RefitRows {
                binned,
                labels,
                weights: weights.as_deref(),
            }),
    };
    let outcome = boost(
        &setup,
        backend.as_mut(),
        collective,
        &mut eval_sets,
        observer,
    )?;
    model.trees = outcome.trees;
    model.best_iteration = outcome.best_iteration;
    Ok(Trained {
        model,
        history: outcome.history,
        interrupted: outcome.interrupted,
        comm: collective.stats(),
        comm_rounds: outcome.comm_rounds,
    })
}
