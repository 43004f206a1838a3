//! Training one worker's shard: agree on cuts, bin, agree on the base margin, boost.
//!
//! - [`observer`]: per-round reports and the stop signal front ends use;
//! - [`agree`]: what workers agree on before boosting (rows, cuts, classes, base margin);
//! - [`mod@boost`]: the boosting loop around the grower;
//! - [`host`]: gradients the host computes itself and the rows it keeps for them;
//! - [`quantile`]: the leaf refit of quantile losses;
//! - [`checkpoint`]: a run's state at the end of a round, to continue to the same bytes,
//!   and the continuation of a saved model (XGBoost's `xgb_model`) built on it.
//!
//! Parameters arrive [`Checked`] (where they entered: the CLI, Python, a Rust caller); this
//! module only derives from them (a continued model's binning, the class count).

pub mod agree;
pub mod boost;
pub mod checkpoint;
pub mod host;
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
use crate::objective::{Objective, ObjectiveKind};
use crate::params::{Checked, Params};
use crate::rank::Queries;

pub use crate::metric::EvalResult;
pub use agree::{
    agree_cuts, agree_job, agree_num_class, base_margin, exact_sum, total_rows, JobFacts,
};
pub use boost::{boost, sample_features, BoostOutcome, BoostSetup, EvalSet};
pub use checkpoint::{continued_params, Checkpoint};
pub use host::HostRows;
pub use observer::{Control, CustomEval, EvalMargins, Quiet, RoundReport, TrainObserver};

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
    /// Query groups of the shard's rows, for ranking (a query is never split between
    /// shards).
    pub queries: Option<Queries>,
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
    /// Optional per-row base margins (`groups` per row, row-major) the set's margins start
    /// from instead of the model's base margin.
    pub base_margin: Option<Vec<f32>>,
    /// Query groups, for ranking metrics.
    pub queries: Option<Queries>,
}

/// How a job starts, besides the base margin it estimates from the labels.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// This worker's rows' own base margins (`groups` per row, row-major): training starts
    /// their margins there (XGBoost's `base_margin`, LightGBM's `init_score`); the model's
    /// base margin is still estimated and saved, and predictions do not include these.
    pub base_margin: Option<Vec<f32>>,
    /// A saved model to continue (XGBoost's `xgb_model`): its cuts bin the data, its base
    /// margin and trees are where the margins start, and `num_rounds` more rounds follow.
    pub init_model: Option<Model>,
    /// A checkpoint of this very job to continue from (see [`checkpoint`]).
    pub resume: Option<Checkpoint>,
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
    /// Optional per-row base margins (`groups` per row, row-major; see [`Start`]).
    pub base_margin: Option<Vec<f32>>,
    /// Global index of the shard's first row.
    pub row_offset: u64,
    /// Query groups of the shard's rows, for ranking.
    pub queries: Option<Queries>,
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
    /// The saved model to continue (every worker gets the same one); the shard and the
    /// evaluation sets must be binned with its cuts.
    pub init_model: Option<Model>,
}

/// Trains on this worker's shard: cuts from the gathered sample, binning, base margin,
/// boosting. Every worker calls it with its own shard; evaluation sets matter on rank 0 only.
pub fn train(
    params: &Checked<Params>,
    shard: Shard<'_>,
    evals: Vec<EvalInput<'_>>,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    train_started(
        params,
        shard,
        evals,
        Start::default(),
        collective,
        factory,
        observer,
    )
}

/// Trains like [`train`], continuing from `resume` when given (see [`checkpoint`]).
pub fn train_from(
    params: &Checked<Params>,
    shard: Shard<'_>,
    evals: Vec<EvalInput<'_>>,
    resume: Option<Checkpoint>,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    let start = Start {
        resume,
        ..Start::default()
    };
    train_started(params, shard, evals, start, collective, factory, observer)
}

/// Trains like [`train`], starting as `start` says: from the rows' own base margins, a
/// saved model to continue, a checkpoint.
pub fn train_started(
    params: &Checked<Params>,
    shard: Shard<'_>,
    evals: Vec<EvalInput<'_>>,
    start: Start,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    let n_total = total_rows(shard.features.n_rows(), collective)?;
    if n_total == 0 {
        return Err(Error::EmptyData("the training data has no rows".into()));
    }
    let (names, cuts, binned) = match &start.init_model {
        // the model's cuts, so the new data (which may differ from the old) falls in the
        // bins its trees split on; every worker holds the same model, so none gathers
        Some(m) => {
            let selected = crate::model::select_columns(&m.feature_names, &m.cuts, &shard.features)
                .map_err(|e| in_init_model("the training data", e))?;
            let binned = BinnedMatrix::new(&selected, &m.cuts)?;
            (m.feature_names.clone(), m.cuts.clone(), binned)
        }
        None => {
            let sample = CutSample::collect(
                &shard.features,
                shard.weights.as_deref(),
                shard.row_offset,
                n_total,
                params.seed,
                params.bin_sample_rows,
            );
            let cuts = agree_cuts(&sample, params, collective)?;
            let binned = BinnedMatrix::new(&shard.features, &cuts)?;
            (shard.features.names().to_vec(), cuts, binned)
        }
    };
    let mut eval_sets = Vec::new();
    if collective.rank() == 0 {
        for e in evals {
            let m = crate::model::select_columns(&names, &cuts, &e.features)?;
            let binned = BinnedMatrix::new(&m, &cuts)?;
            let mut set = EvalSet::new(e.name, Arc::new(binned), e.labels, e.weights);
            if let Some(m) = e.base_margin {
                set = set.with_base_margin(m);
            }
            if let Some(q) = e.queries {
                set = set.with_queries(q);
            }
            eval_sets.push(set);
        }
    }
    let shard = BinnedShard {
        binned: Arc::new(binned),
        labels: shard.labels,
        weights: shard.weights,
        base_margin: start.base_margin,
        row_offset: shard.row_offset,
        queries: shard.queries,
    };
    let job = BinnedJob {
        feature_names: names,
        cuts,
        shard,
        n_total,
        evals: eval_sets,
        resume: start.resume,
        init_model: start.init_model,
    };
    train_binned(params, job, collective, factory, observer)
}

/// A ranking loss needs query groups covering the rows; others take none.
fn check_queries(
    objective: &Objective,
    queries: Option<&Queries>,
    n: usize,
    what: &str,
) -> Result<()> {
    match (objective.kind().is_ranking(), queries) {
        (true, None) if what == "training" => Err(Error::param(
            "group",
            format!(
                "{} ranks documents within queries: give the {what} data query groups \
                 (CLI --group COLUMN, Python group= or qid=, Rust Dataset::set_group)",
                objective.kind()
            ),
        )),
        (_, Some(q)) if q.n_rows() != n => Err(Error::LengthMismatch {
            column: format!("{what} query groups"),
            got: q.n_rows(),
            expected: n,
        }),
        _ => Ok(()),
    }
}

/// Names the init model in an error about data that does not fit it.
pub fn in_init_model(what: &str, e: Error) -> Error {
    match e {
        Error::SchemaMismatch(m) => Error::SchemaMismatch(format!(
            "{what} does not have the features of the model to continue: {m}"
        )),
        e => e,
    }
}

/// Checks this worker's per-row base margins: `groups` per row, every one finite (rows
/// named by their index in the whole dataset).
fn check_row_margins(margins: &[f32], n: usize, k: usize, first_row: usize) -> Result<()> {
    if margins.len() != n * k {
        return Err(Error::param(
            "base_margin",
            format!(
                "{} values for {n} rows: give {k} per row (one per output{})",
                margins.len(),
                if k > 1 { ", row-major" } else { "" }
            ),
        ));
    }
    match margins.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(Error::param(
            "base_margin",
            format!(
                "row {}{} is {}: base margins must be finite",
                first_row + i / k,
                if k > 1 {
                    format!(", group {}", i % k)
                } else {
                    String::new()
                },
                margins[i]
            ),
        )),
        None => Ok(()),
    }
}

/// Trains on a shard already binned with the agreed cuts (the streaming path: data read
/// in batches is binned as it arrives).
pub fn train_binned(
    params: &Checked<Params>,
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
        init_model,
    } = job;
    if n_total == 0 {
        return Err(Error::EmptyData("the training data has no rows".into()));
    }
    let params = match &init_model {
        Some(m) => checkpoint::continued_params(params, m, &feature_names, &cuts)?,
        None => params.clone(),
    };
    let num_class = agree_num_class(&params, &shard.labels, collective)?;
    // a class count the labels give is at least 2, as checking requires
    let params = Checked::derived(Params {
        num_class: (num_class > 1).then_some(num_class),
        ..params.into_inner()
    });
    let objective = params.objective_with(num_class)?;
    check_binned_inputs(&objective, &shard, &evals)?;
    let base = match &init_model {
        // a continued model keeps the base margin its trees were grown on
        Some(m) => m.base_margin.clone(),
        None => base_margin(
            &params,
            &objective,
            &shard.labels,
            shard.weights.as_deref(),
            n_total,
            collective,
        )?,
    };
    let mut model = Model {
        params: Params::clone(&params),
        groups: objective.groups(),
        classes: None,
        feature_names,
        cuts,
        base_margin: base.clone(),
        trees: Vec::new(),
        best_iteration: None,
        label_name: None,
        input_types: None,
    };
    let resume = resume_of(resume, init_model.as_ref(), &model)?;
    let data = rows_digest(&shard, resume.is_some(), observer, collective)?;
    if let Some(c) = &resume {
        c.check_matches(&model, data)?;
    }
    let k = objective.groups();
    let start_bound = start_margin_bound(shard.base_margin.as_deref(), k, collective)?;
    let mut eval_sets = evals;
    let host_copy = host_copy(&objective, &shard);
    let risk = rows_at_risk(&objective, &shard, collective)?;
    let queries = shard.queries;
    let row_offset = shard.row_offset;
    let mut backend = factory.create(ShardData {
        binned: shard.binned,
        offsets: model.cuts.offsets().to_vec(),
        labels: shard.labels,
        weights: shard.weights,
        objective: objective.clone(),
        base_margin: base.clone(),
        initial_margins: shard.base_margin,
        row_offset: shard.row_offset,
    })?;
    let setup = BoostSetup {
        params: &params,
        skeleton: &model,
        objective: &objective,
        n_total,
        resume: resume.as_ref(),
        rows: host_copy
            .as_ref()
            .map(|(binned, labels, weights)| HostRows {
                binned,
                labels,
                weights: weights.as_deref(),
                queries: queries.as_ref(),
                risk: risk.as_ref(),
                row_offset,
            }),
        start_bound: start_bound.as_deref(),
        data,
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

/// The rows the host keeps besides the backend's copy: the leaf refit of quantile losses
/// and losses without a kernel read them on the host, whatever the backend.
fn host_copy(objective: &Objective, shard: &BinnedShard) -> Option<HostCopy> {
    (objective.kind().refits_leaves() || !objective.has_kernel()).then(|| {
        (
            shard.binned.clone(),
            shard.labels.clone(),
            shard.weights.clone(),
        )
    })
}

/// A shard's binned rows, labels and weights, kept on the host.
type HostCopy = (Arc<BinnedMatrix>, Vec<f32>, Option<Vec<f32>>);

/// Checks the shard's and the evaluation sets' labels, weights, base margins and queries
/// against the objective before any work.
fn check_binned_inputs(
    objective: &Objective,
    shard: &BinnedShard,
    evals: &[EvalSet],
) -> Result<()> {
    let n_local = shard.binned.n_rows();
    check_inputs(
        objective,
        &shard.labels,
        shard.weights.as_deref(),
        n_local,
        "training",
        shard.row_offset as usize,
    )?;
    for e in evals {
        check_inputs(
            objective,
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
    if let Some(m) = &shard.base_margin {
        check_row_margins(m, n_local, objective.groups(), shard.row_offset as usize)?;
    }
    check_queries(objective, shard.queries.as_ref(), n_local, "training")?;
    for e in evals {
        check_queries(objective, e.queries.as_ref(), e.binned.n_rows(), &e.name)?;
    }
    Ok(())
}

/// The checkpoint training resumes from: a continued model is a checkpoint of the longer
/// job (its trees are replayed into the margins and training goes on from its last round).
fn resume_of(
    resume: Option<Checkpoint>,
    init_model: Option<&Model>,
    skeleton: &Model,
) -> Result<Option<Checkpoint>> {
    Ok(match (resume, init_model) {
        (Some(c), Some(init)) => {
            c.check_continues(init)?;
            Some(c)
        }
        (None, Some(init)) => Some(Checkpoint::of_model(init, skeleton)),
        (resume, None) => resume,
    })
}

/// The digest of the training rows that checkpoints carry (checked on resume), where one
/// is resumed from or written. Rank 0 alone knows whether it writes checkpoints, so the
/// workers agree on computing it.
fn rows_digest(
    shard: &BinnedShard,
    resuming: bool,
    observer: &dyn TrainObserver,
    collective: &mut dyn Collective,
) -> Result<Option<u64>> {
    let mut wants = [u64::from(resuming || observer.checkpoint_every() > 0)];
    if collective.world_size() > 1 {
        collective.allreduce_max(&mut wants)?;
    }
    if wants[0] != 1 {
        return Ok(None);
    }
    let rows = checkpoint::DigestRows {
        binned: &shard.binned,
        labels: &shard.labels,
        weights: shard.weights.as_deref(),
        margins: shard.base_margin.as_deref(),
        queries: shard.queries.as_ref(),
        row_offset: shard.row_offset,
    };
    Ok(Some(checkpoint::data_digest(&rows, collective)?))
}

/// The largest |row base margin| of every output group over all workers: the divergence
/// check starts from it.
fn start_margin_bound(
    margins: Option<&[f32]>,
    k: usize,
    collective: &mut dyn Collective,
) -> Result<Option<Vec<f64>>> {
    let Some(margins) = margins else {
        return Ok(None);
    };
    let mut max: Vec<u64> = (0..k)
        .map(|g| {
            margins
                .iter()
                .skip(g)
                .step_by(k)
                .fold(0.0f32, |a, v| a.max(v.abs()))
                .to_bits() as u64
        })
        .collect();
    collective.allreduce_max(&mut max)?;
    Ok(Some(
        max.iter()
            .map(|&b| f32::from_bits(b as u32) as f64)
            .collect(),
    ))
}

/// Every row at risk over all workers, for the Cox loss (its gradient sums over them, on
/// whichever worker they live); `None` for other losses.
fn rows_at_risk(
    objective: &Objective,
    shard: &BinnedShard,
    collective: &mut dyn Collective,
) -> Result<Option<crate::survival::GlobalRows>> {
    if objective.kind() != ObjectiveKind::Cox {
        return Ok(None);
    }
    Ok(Some(crate::survival::GlobalRows::gather(
        &shard.labels,
        shard.weights.as_deref(),
        shard.row_offset,
        collective,
    )?))
}
