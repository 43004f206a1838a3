//! The training loop: agree on cuts and scales, grow trees, evaluate, stop early.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::backend::{HistBackend, TreeSetup};
use crate::collective::Collective;
use crate::data::binned::BinnedMatrix;
use crate::data::cuts::{CutSample, Cuts};
use crate::data::matrix::FeatureMatrix;
use crate::detmath;
use crate::error::{Error, Result};
use crate::grower::{grow_tree, GrowerConfig};
use crate::hash::{hash32, SampleRate, Stream};
use crate::metric::Metric;
use crate::model::Model;
use crate::objective::{ftz, Objective};
use crate::params::{ObjectiveKind, Params};
use crate::quantise::{exact_shift, quantise_exact, GroupScales, Scale};
use crate::split::SplitParams;
use crate::tree::Tree;

/// One metric on one evaluation set after one round.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalResult {
    /// The evaluation set's name.
    pub dataset: String,
    /// The metric.
    pub metric: Metric,
    /// Its value.
    pub value: f64,
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
    /// Seconds since training started.
    pub elapsed: f64,
    /// This worker's traffic so far.
    pub comm: crate::collective::CommStats,
}

/// Whether training goes on after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Train the next round.
    Continue,
    /// Stop now and keep the rounds trained so far.
    Stop,
}

/// Receives per-round progress (front ends draw progress bars, check for Ctrl-C, log).
pub trait TrainObserver: Send {
    /// Called after every round on every worker.
    fn on_round(&mut self, report: &RoundReport<'_>) -> Control;
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl TrainObserver for Quiet {
    fn on_round(&mut self, _report: &RoundReport<'_>) -> Control {
        Control::Continue
    }
}

/// A named evaluation set, binned with the training cuts.
pub struct EvalSet {
    /// Name used in reports.
    pub name: String,
    /// Rows binned with the training cuts.
    pub binned: Arc<BinnedMatrix>,
    /// Labels (class indices for multiclass).
    pub labels: Vec<f32>,
    /// Optional weights.
    pub weights: Option<Vec<f32>>,
    margins: Vec<f32>,
}

impl EvalSet {
    /// An evaluation set; its margins start at the model's base margin.
    pub fn new(
        name: impl Into<String>,
        binned: Arc<BinnedMatrix>,
        labels: Vec<f32>,
        weights: Option<Vec<f32>>,
    ) -> Self {
        EvalSet {
            name: name.into(),
            binned,
            labels,
            weights,
            margins: Vec::new(),
        }
    }
}

/// What boosting produced.
#[derive(Debug, Clone)]
pub struct BoostOutcome {
    /// Trees, round-major.
    pub trees: Vec<Tree>,
    /// Best round under early stopping.
    pub best_iteration: Option<usize>,
    /// Metrics after every round (rank 0).
    pub history: Vec<Vec<EvalResult>>,
    /// Whether the observer asked to stop.
    pub interrupted: bool,
    /// This worker's traffic in each round.
    pub comm_rounds: Vec<crate::collective::CommStats>,
}

/// The features a tree may split on (`colsample_bytree`), ascending.
pub fn sample_features(n_features: usize, rate: f64, seed: u64, tree_index: u32) -> Vec<usize> {
    if rate >= 1.0 {
        return (0..n_features).collect();
    }
    let k = ((rate * n_features as f64).round() as usize).clamp(1, n_features);
    let mut f: Vec<usize> = (0..n_features).collect();
    f.sort_by_key(|&j| (hash32(seed, Stream::ColSample, tree_index, j as u64), j));
    f.truncate(k);
    f.sort_unstable();
    f
}

/// Σ values over all workers, exactly (fixed point), so the result is the same however rows
/// are sharded.
pub fn exact_sum(values: &[f32], n_total: u64, collective: &mut dyn Collective) -> Result<f64> {
    let local_max = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let mut max = [local_max.to_bits() as u64];
    collective.allreduce_max(&mut max)?;
    let shift = exact_shift(f32::from_bits(max[0] as u32), n_total);
    let mut sum = [values
        .iter()
        .map(|&v| quantise_exact(v, shift))
        .sum::<i64>()];
    collective.allreduce_sum(&mut sum, 1 << crate::quantise::EXACT_SUM_BITS)?;
    Ok(sum[0] as f64 * detmath::pow2(-shift))
}

/// The initial margin of each group: from `base_score`, or estimated from the labels.
pub fn base_margin(
    params: &Params,
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    n_total: u64,
    collective: &mut dyn Collective,
) -> Result<Vec<f32>> {
    if let Some(b) = params.base_score {
        return Ok(objective.base_margin_from_score(b));
    }
    let w: Vec<f32> = match weights {
        Some(w) => w.to_vec(),
        None => vec![1.0; labels.len()],
    };
    let total_w = exact_sum(&w, n_total, collective)?;
    if total_w.is_nan() || total_w <= 0.0 {
        return Err(Error::EmptyData("the sample weights sum to zero".into()));
    }
    let weighted_mean = |hit: &dyn Fn(f32) -> f32, c: &mut dyn Collective| -> Result<f64> {
        let v: Vec<f32> = labels.iter().zip(&w).map(|(&y, &wi)| hit(y) * wi).collect();
        Ok(exact_sum(&v, n_total, c)? / total_w)
    };
    Ok(match objective.kind() {
        ObjectiveKind::SquaredError => vec![weighted_mean(&|y| y, collective)? as f32],
        ObjectiveKind::Logistic => {
            let p = weighted_mean(&|y| y, collective)?.clamp(1e-6, 1.0 - 1e-6);
            vec![detmath::ln(p / (1.0 - p)) as f32]
        }
        ObjectiveKind::Softprob => {
            let mut m = Vec::with_capacity(objective.groups());
            for k in 0..objective.groups() {
                let p = weighted_mean(&|y| if y as usize == k { 1.0 } else { 0.0 }, collective)?;
                m.push(detmath::ln(p.max(1e-6)) as f32);
            }
            m
        }
    })
}

fn metrics_of(set: &EvalSet, groups: usize, metrics: &[Metric]) -> Vec<EvalResult> {
    metrics
        .iter()
        .map(|&metric| EvalResult {
            dataset: set.name.clone(),
            metric,
            value: metric.evaluate(&set.margins, groups, &set.labels, set.weights.as_deref()),
        })
        .collect()
}

/// Boosts `params.num_rounds` rounds on this worker's backend. Evaluation sets are only
/// evaluated on rank 0, which broadcasts the decision to stop.
#[allow(clippy::too_many_arguments)]
pub fn boost(
    params: &Params,
    objective: &Objective,
    cuts: &Cuts,
    base_margin: &[f32],
    n_total: u64,
    backend: &mut dyn HistBackend,
    collective: &mut dyn Collective,
    evals: &mut [EvalSet],
    observer: &mut dyn TrainObserver,
) -> Result<BoostOutcome> {
    let start = Instant::now();
    let k = objective.groups();
    for e in evals.iter_mut() {
        e.margins = (0..e.binned.n_rows())
            .flat_map(|_| base_margin.iter().copied())
            .collect();
    }
    let cfg = GrowerConfig {
        cuts,
        split: SplitParams::from_params(params),
        policy: params.grow_policy,
        max_depth: params.max_depth,
        max_leaves: params.max_leaves,
        learning_rate: params.learning_rate,
        n_total,
    };
    let metrics = params.metrics();
    let row_sample = SampleRate::new(params.subsample);
    let mut trees = Vec::with_capacity(params.num_rounds * k);
    let mut history = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let mut interrupted = false;
    let watch = metrics.last().copied();
    let mut comm_rounds = Vec::with_capacity(params.num_rounds);
    let mut last_comm = collective.stats();
    for round in 0..params.num_rounds {
        let local = backend.compute_gradients()?;
        let mut max: Vec<u64> = local
            .iter()
            .flat_map(|m| [m[0].to_bits() as u64, m[1].to_bits() as u64])
            .collect();
        collective.allreduce_max(&mut max)?;
        for group in 0..k {
            let scales = GroupScales {
                grad: Scale::agree(
                    f32::from_bits(max[2 * group] as u32),
                    n_total,
                    params.quantisation,
                ),
                hess: Scale::agree(
                    f32::from_bits(max[2 * group + 1] as u32),
                    n_total,
                    params.quantisation,
                ),
            };
            let tree_index = (round * k + group) as u32;
            let setup = TreeSetup {
                tree_index,
                group,
                seed: params.seed,
                row_sample,
                scales,
            };
            let features = sample_features(
                cuts.n_features(),
                params.colsample_bytree,
                params.seed,
                tree_index,
            );
            let tree = grow_tree(&cfg, backend, collective, &setup, &features)?;
            backend.update_margins(&tree, group)?;
            for e in evals.iter_mut() {
                let binned = &e.binned;
                e.margins
                    .par_chunks_mut(k)
                    .enumerate()
                    .for_each(|(row, m)| {
                        let leaf = tree.leaf_of_binned(binned, row);
                        m[group] = ftz(m[group] + tree.value(leaf));
                    });
            }
            trees.push(tree);
        }
        let results: Vec<EvalResult> = evals
            .iter()
            .flat_map(|e| metrics_of(e, k, &metrics))
            .collect();
        let mut stop = false;
        if let (Some(esr), Some(m), Some(last)) =
            (params.early_stopping_rounds, watch, results.last())
        {
            let better = |a: f64, b: f64| if m.higher_is_better() { a > b } else { a < b };
            match best {
                Some((_, v)) if !better(last.value, v) => {}
                _ => best = Some((round, last.value)),
            }
            if let Some((r, _)) = best {
                stop = round - r >= esr;
            }
        }
        let report = RoundReport {
            round,
            num_rounds: params.num_rounds,
            metrics: &results,
            elapsed: start.elapsed().as_secs_f64(),
            comm: collective.stats(),
        };
        if observer.on_round(&report) == Control::Stop {
            interrupted = true;
            stop = true;
        }
        history.push(results);
        let now = collective.stats();
        comm_rounds.push(crate::collective::CommStats {
            bytes_sent: now.bytes_sent - last_comm.bytes_sent,
            bytes_uncompressed: now.bytes_uncompressed - last_comm.bytes_uncompressed,
            allreduce_calls: now.allreduce_calls - last_comm.allreduce_calls,
        });
        last_comm = now;
        if collective.world_size() > 1 {
            let mut flag = vec![stop as u8];
            collective.broadcast(&mut flag, 0)?;
            stop = flag.first() == Some(&1);
        }
        if stop {
            break;
        }
    }
    Ok(BoostOutcome {
        trees,
        best_iteration: if params.early_stopping_rounds.is_some() {
            best.map(|(r, _)| r)
        } else {
            None
        },
        history,
        interrupted,
        comm_rounds,
    })
}

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

/// Everything a backend is built from.
pub struct ShardData {
    /// Binned rows of the shard.
    pub binned: Arc<BinnedMatrix>,
    /// Histogram offsets of the features (from the cuts).
    pub offsets: Vec<u32>,
    /// Labels.
    pub labels: Vec<f32>,
    /// Weights.
    pub weights: Option<Vec<f32>>,
    /// The loss.
    pub objective: Objective,
    /// Initial margins, one per group.
    pub base_margin: Vec<f32>,
    /// Global index of the first row.
    pub row_offset: u64,
}

/// Creates the histogram backend of one worker.
pub trait BackendFactory: Send + Sync {
    /// A backend holding `shard`.
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>>;
}

/// Builds CPU backends.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuFactory;

impl BackendFactory for CpuFactory {
    fn create(&self, s: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(crate::backend::CpuBackend::new(
            s.binned,
            s.offsets,
            s.labels,
            s.weights,
            s.objective,
            &s.base_margin,
            s.row_offset,
        )?))
    }
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
    pub comm: crate::collective::CommStats,
    /// Its traffic in each round.
    pub comm_rounds: Vec<crate::collective::CommStats>,
}

fn check_inputs(
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    n: usize,
    what: &str,
) -> Result<()> {
    if labels.len() != n {
        return Err(Error::LengthMismatch {
            column: format!("{what} label"),
            got: labels.len(),
            expected: n,
        });
    }
    for (i, &y) in labels.iter().enumerate() {
        objective.check_label(i, y)?;
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
                row: i,
                value: w[i],
            });
        }
    }
    Ok(())
}

/// Rows over all workers.
pub fn total_rows(n_local: usize, collective: &mut dyn Collective) -> Result<u64> {
    let mut n = [n_local as i64];
    collective.allreduce_sum(&mut n, u32::MAX as u64 * 1024)?;
    Ok(n[0] as u64)
}

/// Gathers every worker's cut sample and computes the cuts they all share.
pub fn agree_cuts(
    local: &CutSample,
    params: &Params,
    collective: &mut dyn Collective,
) -> Result<Cuts> {
    let gathered = collective.allgather(&local.to_bytes())?;
    let merged = CutSample::merge(
        gathered
            .iter()
            .map(|b| CutSample::from_bytes(b))
            .collect::<Result<_>>()?,
    )?;
    Cuts::from_sample(
        &merged,
        params.max_bin,
        params.min_data_in_bin,
        params.min_category_count,
    )
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
    params.validate()?;
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
    train_binned(
        params, names, cuts, shard, n_total, eval_sets, collective, factory, observer,
    )
}

/// Trains on a shard already binned with the agreed `cuts` (the streaming path: data read
/// in batches is binned as it arrives). `n_total` is the row count over all workers.
#[allow(clippy::too_many_arguments)]
pub fn train_binned(
    params: &Params,
    feature_names: Vec<String>,
    cuts: Cuts,
    shard: BinnedShard,
    n_total: u64,
    evals: Vec<EvalSet>,
    collective: &mut dyn Collective,
    factory: &dyn BackendFactory,
    observer: &mut dyn TrainObserver,
) -> Result<Trained> {
    params.validate()?;
    if n_total == 0 {
        return Err(Error::EmptyData("the training data has no rows".into()));
    }
    let n_local = shard.binned.n_rows();
    let num_class = match params.objective {
        ObjectiveKind::Softprob => match params.num_class {
            Some(k) => k,
            None => {
                let local =
                    shard
                        .labels
                        .iter()
                        .fold(0.0f32, |m, &y| if y.is_finite() { m.max(y) } else { m });
                let mut max = [local as u64];
                collective.allreduce_max(&mut max)?;
                (max[0] as usize + 1).max(2)
            }
        },
        _ => 1,
    };
    let objective = Objective::new(params.objective, num_class)?;
    check_inputs(
        &objective,
        &shard.labels,
        shard.weights.as_deref(),
        n_local,
        "training",
    )?;
    for e in &evals {
        check_inputs(
            &objective,
            &e.labels,
            e.weights.as_deref(),
            e.binned.n_rows(),
            &format!("`{}`", e.name),
        )?;
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
            // runtime settings never reach the model
            threads: 0,
            device: Default::default(),
            workers: 1,
            comm_codec: Default::default(),
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
    let mut eval_sets = evals;
    let mut backend = factory.create(ShardData {
        binned: shard.binned,
        offsets: model.cuts.offsets().to_vec(),
        labels: shard.labels,
        weights: shard.weights,
        objective,
        base_margin: base.clone(),
        row_offset: shard.row_offset,
    })?;
    let outcome = boost(
        params,
        &objective,
        &model.cuts,
        &base,
        n_total,
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
