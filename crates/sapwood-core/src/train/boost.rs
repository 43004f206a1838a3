//! The boosting loop: gradients, agreed scales, one tree per group, evaluation, early
//! stopping.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::checkpoint::Checkpoint;
use super::host::{host_gradients, HostRows};
use super::observer::{Control, EvalMargins, RoundReport, TrainObserver};
use super::quantile::refit_leaves;
use crate::backend::{HistBackend, TreeSetup};
use crate::collective::{Collective, CommStats};
use crate::data::binned::BinnedMatrix;
use crate::metric::EvalResult;

use crate::error::{Error, Result};
use crate::grower::constraints::{enforce_monotone, TreeRules};
use crate::grower::store::HistStore;
use crate::grower::{grow_tree, GrowerConfig};
use crate::hash::{HashKey, SampleRate, Stream};
use crate::metric::Metric;
use crate::model::Model;
use crate::objective::{ftz, Objective};
use crate::quantise::{GroupScales, Scale};
use crate::rank::Queries;
use crate::split::SplitParams;
use crate::tree::Tree;
use crate::warm_pool::WarmPool;

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
    /// Optional per-row base margins (`groups` per row) the margins start from.
    pub base_margin: Option<Vec<f32>>,
    /// Query groups, for ranking metrics (without, the set is one query).
    pub queries: Option<Queries>,
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
            base_margin: None,
            queries: None,
            margins: Vec::new(),
        }
    }

    /// The set with the query groups its rows belong to (ranking metrics).
    pub fn with_queries(mut self, queries: Queries) -> Self {
        self.queries = Some(queries);
        self
    }

    /// The set with its rows' own base margins (`groups` per row, row-major) in place of the
    /// model's (XGBoost's `base_margin` of an evaluation `DMatrix`).
    pub fn with_base_margin(mut self, base_margin: Vec<f32>) -> Self {
        self.base_margin = Some(base_margin);
        self
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
    pub comm_rounds: Vec<CommStats>,
}

/// The features a tree may split on (`colsample_bytree`, drawn by `weights` when given),
/// ascending.
pub fn sample_features(
    n_features: usize,
    rate: f64,
    weights: &[f64],
    seed: u64,
    tree_index: u32,
) -> Vec<usize> {
    let all: Vec<usize> = (0..n_features).collect();
    let key = HashKey::new(seed, Stream::ColSample, tree_index);
    crate::grower::constraints::sample(&all, rate, weights, key, 0)
}

fn metrics_of(set: &EvalSet, objective: &Objective, metrics: &[Metric]) -> Vec<EvalResult> {
    metrics
        .iter()
        .map(|&metric| EvalResult {
            dataset: set.name.clone(),
            metric,
            value: metric.evaluate_on(
                objective,
                &set.margins,
                &set.labels,
                set.weights.as_deref(),
                set.queries.as_ref(),
            ),
        })
        .collect()
}

/// Adds a tree's leaf values to the evaluation sets' margins of `group`.
fn add_to_evals(evals: &mut [EvalSet], tree: &Tree, group: usize, k: usize) {
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
}

/// Refuses a tree with a non-finite leaf, or one after which some margin of its group
/// could leave the f32 range (`bound` is that group's margin bound, updated here). Trees
/// are identical on every worker and backend, so every worker decides alike.
fn check_tree(tree: &Tree, round: usize, index: usize, bound: &mut f64) -> Result<()> {
    let mut largest = 0f64;
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.split.is_none() {
            if !n.value.is_finite() {
                return Err(Error::Diverged {
                    round,
                    tree: index,
                    what: format!("leaf {i} has value {}", n.value),
                });
            }
            largest = largest.max((n.value as f64).abs());
        }
    }
    *bound += largest;
    if *bound > f32::MAX as f64 {
        return Err(Error::Diverged {
            round,
            tree: index,
            what: format!("margins may reach {:.3e}, beyond the f32 range", *bound),
        });
    }
    Ok(())
}

/// What every worker of a job has agreed on when boosting starts.
#[derive(Debug, Clone, Copy)]
pub struct BoostSetup<'a> {
    /// The model without trees: validated parameters, cuts, base margin of each group.
    pub skeleton: &'a Model,
    /// The loss with its number of groups.
    pub objective: &'a Objective,
    /// Rows over all workers.
    pub n_total: u64,
    /// The checkpoint to continue from (its trees are replayed into the margins).
    pub resume: Option<&'a Checkpoint>,
    /// This worker's rows, for losses whose leaves are refit to quantiles of residuals or
    /// whose gradients are computed on the host.
    pub rows: Option<HostRows<'a>>,
    /// The largest |per-row base margin| of each group over every worker, when training
    /// rows start from their own margins (agreed, so every worker refuses a tree alike).
    pub start_bound: Option<&'a [f64]>,
    /// The digest of the training rows checkpoints carry
    /// ([`super::checkpoint::data_digest`]).
    pub data: Option<u64>,
}

/// Boosts `params.num_rounds` rounds on this worker's backend. Evaluation sets are only
/// evaluated on rank 0, which broadcasts the decision to stop.
pub fn boost(
    setup: &BoostSetup<'_>,
    backend: &mut dyn HistBackend,
    collective: &mut dyn Collective,
    evals: &mut [EvalSet],
    observer: &mut dyn TrainObserver,
) -> Result<BoostOutcome> {
    let BoostSetup {
        skeleton,
        objective,
        n_total,
        resume,
        rows,
        start_bound,
        data,
    } = *setup;
    let (params, cuts, base_margin) = (&skeleton.params, &skeleton.cuts, &skeleton.base_margin);
    let start = Instant::now();
    let k = objective.groups();
    for e in evals.iter_mut() {
        let n = e.binned.n_rows();
        e.margins = match &e.base_margin {
            Some(m) if m.len() == n * k => m.iter().map(|&v| ftz(v)).collect(),
            Some(m) => {
                return Err(Error::LengthMismatch {
                    column: format!("`{}` base margin", e.name),
                    got: m.len(),
                    expected: n * k,
                })
            }
            None => (0..n).flat_map(|_| base_margin.iter().copied()).collect(),
        };
    }
    let cfg = GrowerConfig {
        cuts,
        split: SplitParams::from_params(params),
        policy: params.grow_policy,
        max_depth: params.max_depth,
        max_leaves: params.max_leaves,
        learning_rate: params.learning_rate,
        n_total,
        rules: TreeRules::from_params(params, &skeleton.feature_names, cuts)?,
    };
    let metrics = params.metrics();
    let row_sample = SampleRate::new(params.subsample);
    // grown as rounds are made: a huge round count with early stopping reserves nothing
    let mut trees = Vec::new();
    let mut history = resume.map_or_else(Vec::new, |c| c.history.clone());
    let mut best: Option<(usize, f64)> = resume.and_then(|c| c.best);
    let mut interrupted = false;
    let watch = metrics.last().copied();
    let mut comm_rounds = Vec::new();
    let mut last_comm = collective.stats();
    let mut store = HistStore::new();
    // |margin| of any row is at most |base| plus the largest |leaf| of every tree so far
    let mut margin_bound: Vec<f64> = base_margin
        .iter()
        .enumerate()
        .map(|(g, m)| {
            let row_bound = start_bound.map_or(0.0, |b| b[g]);
            (*m as f64).abs().max(row_bound)
        })
        .collect();
    let first_round = resume.map_or(0, |c| c.rounds);
    // a resumed run adds the checkpoint's trees to every margin exactly as training did
    for (t, tree) in resume.iter().flat_map(|c| &c.model.trees).enumerate() {
        let (round, group) = (t / k, t % k);
        check_tree(tree, round, t, &mut margin_bound[group])?;
        backend.update_margins(tree, group)?;
        add_to_evals(evals, tree, group, k);
        trees.push(tree.clone());
    }
    let every = observer.checkpoint_every();
    let custom = observer.has_custom_objective();
    // one worker owns the pool: its threads spin between a tree's short parallel steps
    // (with several workers in a process, a spinning thread would take a core from another,
    // and a custom objective's own code, Python's numpy say, would compete with it)
    let _warm = (backend.runs_on_pool() && collective.world_size() == 1 && !custom)
        .then(WarmPool::start)
        .flatten();
    for round in first_round..params.num_rounds {
        let local = if custom || !objective.has_kernel() {
            host_gradients(
                objective,
                rows.as_ref(),
                backend,
                observer,
                collective,
                (params.seed, round),
            )?
        } else {
            backend.compute_gradients()?
        };
        let mut max: Vec<u64> = local
            .iter()
            .flat_map(|m| [m[0].to_bits() as u64, m[1].to_bits() as u64])
            .collect();
        collective.allreduce_max(&mut max)?;
        // after the allreduce every worker sees the same maxima, so all stop together
        for group in 0..k {
            for (what, bits) in [
                ("gradient", max[2 * group]),
                ("hessian", max[2 * group + 1]),
            ] {
                let v = f32::from_bits(bits as u32);
                if !v.is_finite() {
                    return Err(Error::Diverged {
                        round,
                        tree: round * k + group,
                        what: format!("the largest {what} of group {group} is {v}"),
                    });
                }
            }
        }
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
                &params.feature_weights,
                params.seed,
                tree_index,
            );
            let mut tree = grow_tree(&cfg, backend, collective, &setup, &features, &mut store)?;
            if let (true, Some(rows)) = (objective.kind().refits_leaves(), &rows) {
                // every group's margins before this round's trees are added
                let margins = backend.margins()?;
                refit_leaves(
                    &mut tree,
                    rows,
                    &margins,
                    group,
                    k,
                    objective.refit_quantile(group),
                    params.learning_rate,
                    n_total,
                    collective,
                )?;
                // residual quantiles know nothing of monotone bounds
                enforce_monotone(&mut tree, cuts, &cfg.rules);
            }
            check_tree(&tree, round, tree_index as usize, &mut margin_bound[group])?;
            backend.update_margins(&tree, group)?;
            add_to_evals(evals, &tree, group, k);
            trees.push(tree);
        }
        let results: Vec<EvalResult> = evals
            .iter()
            .flat_map(|e| metrics_of(e, objective, &metrics))
            .collect();
        let custom = if collective.rank() == 0 && !evals.is_empty() {
            let sets: Vec<EvalMargins<'_>> = evals
                .iter()
                .map(|e| EvalMargins {
                    name: &e.name,
                    margins: &e.margins,
                    groups: k,
                })
                .collect();
            observer.custom_metrics(round, &sets)?
        } else {
            Vec::new()
        };
        // the last metric reported: the observer's own, else the last built-in one
        let watched = match custom.last() {
            Some(c) => Some((c.value, c.higher_is_better)),
            None => watch
                .zip(results.last())
                .map(|(m, r)| (r.value, m.higher_is_better())),
        };
        let mut stop = false;
        if let (Some(esr), Some((value, higher))) = (params.early_stopping_rounds, watched) {
            let better = |a: f64, b: f64| if higher { a > b } else { a < b };
            match best {
                Some((_, v)) if !better(value, v) => {}
                _ => best = Some((round, value)),
            }
            if let Some((r, _)) = best {
                stop = round - r >= esr;
            }
        }
        let report = RoundReport {
            round,
            num_rounds: params.num_rounds,
            metrics: &results,
            custom: &custom,
            elapsed: start.elapsed().as_secs_f64(),
            comm: collective.stats(),
        };
        if observer.on_round(&report) == Control::Stop {
            interrupted = true;
            stop = true;
        }
        history.push(results);
        let now = collective.stats();
        comm_rounds.push(now.since(&last_comm));
        last_comm = now;
        if collective.world_size() > 1 {
            // any worker may stop the job: rank 0 by early stopping, any rank by its
            // observer (a signal to that rank's process); the largest wish wins
            let mut flag = [if interrupted { 2 } else { u64::from(stop) }];
            collective.allreduce_max(&mut flag)?;
            stop = flag[0] > 0;
            interrupted = flag[0] == 2;
        }
        // an interrupted run keeps its state to resume from, as a checkpoint of this round
        let due = (round + 1) % every.max(1) == 0 || (interrupted && !trees.is_empty());
        if every > 0 && due && collective.rank() == 0 {
            observer.on_checkpoint(&Checkpoint {
                model: Model {
                    trees: trees.clone(),
                    ..skeleton.clone()
                },
                rounds: round + 1,
                best,
                history: history.clone(),
                data,
            })?;
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
