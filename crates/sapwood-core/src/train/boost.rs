//! The boosting loop: gradients, agreed scales, one tree per group, evaluation, early
//! stopping.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use super::checkpoint::Checkpoint;
use super::host::{host_gradients, HostRows};
use super::observer::{Control, CustomEval, EvalMargins, RoundReport, TrainObserver};
use super::quantile::refit_leaves;
use crate::backend::{HistBackend, TreeBackend, TreeSetup};
use crate::collective::{Collective, CommStats, SingleWorker};
use crate::data::binned::BinnedMatrix;
use crate::data::cuts::Cuts;
use crate::metric::EvalResult;

use crate::error::{Error, Result};
use crate::grower::constraints::{enforce_monotone, TreeRules};
use crate::grower::store::HistStore;
use crate::grower::{grow_tree, GrowerConfig};
use crate::hash::{HashKey, SampleRate, Stream};
use crate::metric::Metric;
use crate::model::Model;
use crate::objective::{ftz, Objective};
use crate::params::{Checked, Params};
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
        let by_columns = tree.leaves_of_columns(binned);
        e.margins
            .par_chunks_mut(k)
            .enumerate()
            .for_each(|(row, m)| {
                let leaf = match &by_columns {
                    Some(leaves) => leaves[row],
                    None => tree.leaf_of_binned(binned, row),
                };
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
    /// The job's parameters (with the class count and, continuing a model, its binning):
    /// what the grower and the loop read.
    pub params: &'a Checked<Params>,
    /// The model without trees, as checkpoints record it: its parameters (the job's), cuts,
    /// feature names and base margin of each group.
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
        params,
        skeleton,
        objective,
        n_total,
        resume,
        rows,
        start_bound,
        data,
    } = *setup;
    let base_margin = &skeleton.base_margin;
    let start = Instant::now();
    let k = objective.groups();
    start_eval_margins(evals, base_margin, k)?;
    let cfg = grower_config(params, &skeleton.cuts, &skeleton.feature_names, n_total)?;
    let metrics = params.metrics();
    // grown as rounds are made: a huge round count with early stopping reserves nothing
    let mut trees = Vec::new();
    let mut history = resume.map_or_else(Vec::new, |c| c.history.clone());
    let mut stopping = EarlyStopping {
        rounds: params.early_stopping_rounds,
        best: resume.and_then(|c| c.best),
    };
    let mut interrupted = false;
    let mut comm_rounds = Vec::new();
    let mut last_comm = collective.stats();
    let mut store = HistStore::new();
    // |margin| of any row is at most |base| plus the largest |leaf| of every tree so far
    let mut margin_bound = first_margin_bound(base_margin, start_bound);
    let first_round = resume.map_or(0, |c| c.rounds);
    if let Some(c) = resume {
        replay(&c.model.trees, k, &mut margin_bound, backend, evals)?;
        trees.extend(c.model.trees.iter().cloned());
    }
    let every = observer.checkpoint_every();
    let custom = observer.has_custom_objective();
    // a lone worker may grow a round's trees several at once, each team of threads on its
    // own (refit leaves read every group's margins and sum over the job: one at a time)
    let teams = if collective.world_size() == 1 && !objective.kind().refits_leaves() {
        backend.round_teams(k, grower_bytes(params, skeleton.cuts.total_bins()))
    } else {
        1
    };
    let team_stores: Vec<Mutex<HistStore>> =
        (0..teams).map(|_| Mutex::new(HistStore::new())).collect();
    // one worker owns the pool: its threads spin between a tree's short parallel steps
    // (with several workers in a process, a spinning thread would take a core from another,
    // and a custom objective's own code, Python's numpy say, would compete with it; teams
    // each have threads of their own, and spinners would take their cores)
    let _warm = (backend.runs_on_pool() && collective.world_size() == 1 && !custom && teams < 2)
        .then(WarmPool::start)
        .flatten();
    let round_trees = RoundTrees {
        cfg: &cfg,
        params,
        objective,
        rows: rows.as_ref(),
        n_total,
    };
    for round in first_round..params.num_rounds {
        let local = round_trees.gradients(round, custom, backend, observer, collective)?;
        let max = agreed_maxima(&local, collective, round)?;
        let setups: Vec<TreeSetup> = (0..k).map(|g| round_trees.setup(round, g, &max)).collect();
        let grow = |team: usize, setup: &TreeSetup, b: &mut dyn TreeBackend| {
            let mut store = team_stores
                .get(team)
                .ok_or_else(|| Error::Backend(format!("no store for team {team}")))?
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // a lone worker's: nothing to exchange, and each team grows on its own
            round_trees.grow_plain(setup, b, &mut SingleWorker, &mut store)
        };
        let grown = if teams >= 2 {
            backend.grow_round(&setups, teams, &grow)
        } else {
            None
        };
        if let Some(grown) = grown {
            // the margins hold every tree already; the checks and evaluation sets follow
            // in the order of the trees
            for ((group, bound), tree) in margin_bound.iter_mut().enumerate().zip(grown?) {
                check_tree(&tree, round, round * k + group, bound)?;
                add_to_evals(evals, &tree, group, k);
                trees.push(tree);
            }
        } else {
            backend.start_round(&setups)?;
            for ((group, bound), setup) in margin_bound.iter_mut().enumerate().zip(&setups) {
                let tree = round_trees.grow(setup, backend, collective, &mut store)?;
                check_tree(&tree, round, round * k + group, bound)?;
                backend.update_margins(&tree, group)?;
                add_to_evals(evals, &tree, group, k);
                trees.push(tree);
            }
        }
        let on_rank0 = collective.rank() == 0;
        let (results, custom, watched) =
            round_metrics(evals, objective, &metrics, round, on_rank0, observer)?;
        let mut stop = stopping.update(round, watched);
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
        (stop, interrupted) = agree_on_stopping(stop, interrupted, collective)?;
        // an interrupted run keeps its state to resume from, as a checkpoint of this round
        let due = (round + 1) % every.max(1) == 0 || (interrupted && !trees.is_empty());
        if every > 0 && due && collective.rank() == 0 {
            let state = Checkpoint {
                model: Model {
                    trees: trees.clone(),
                    ..skeleton.clone()
                },
                rounds: round + 1,
                best: stopping.best,
                history: history.clone(),
                data,
            };
            observer.on_checkpoint(&state)?;
        }
        if stop {
            break;
        }
    }
    Ok(BoostOutcome {
        trees,
        best_iteration: stopping.best_round(),
        history,
        interrupted,
        comm_rounds,
    })
}

/// Bytes of histograms the grower may keep for one tree of `total_bins` bins: one for each
/// node that may still split (at most a leaf of the largest tree the parameters allow) and
/// a level's batch.
fn grower_bytes(params: &Params, total_bins: usize) -> usize {
    let leaves = if params.max_leaves > 0 {
        params.max_leaves
    } else {
        1 << params.max_depth.min(16)
    };
    (leaves + 2)
        .saturating_mul(total_bins)
        .saturating_mul(std::mem::size_of::<crate::hist::HistBin>())
}

/// The grower's settings for every tree of the job.
fn grower_config<'a>(
    params: &Checked<Params>,
    cuts: &'a Cuts,
    feature_names: &[String],
    n_total: u64,
) -> Result<GrowerConfig<'a>> {
    Ok(GrowerConfig {
        cuts,
        split: SplitParams::from_params(params),
        policy: params.grow_policy,
        max_depth: params.max_depth,
        max_leaves: params.max_leaves,
        learning_rate: params.learning_rate,
        n_total,
        rules: TreeRules::from_params(params, feature_names, cuts)?,
    })
}

/// |margin| of any row before the first tree, per output group: at most |base| plus the
/// largest |leaf| of every tree so far, starting from the largest row base margin.
fn first_margin_bound(base_margin: &[f32], start_bound: Option<&[f64]>) -> Vec<f64> {
    base_margin
        .iter()
        .enumerate()
        .map(|(g, m)| {
            let row_bound = start_bound.map_or(0.0, |b| b[g]);
            (*m as f64).abs().max(row_bound)
        })
        .collect()
}

/// Adds a resumed run's trees to every margin exactly as training did.
fn replay(
    trees: &[Tree],
    k: usize,
    margin_bound: &mut [f64],
    backend: &mut dyn HistBackend,
    evals: &mut [EvalSet],
) -> Result<()> {
    for (t, tree) in trees.iter().enumerate() {
        let (round, group) = (t / k, t % k);
        check_tree(tree, round, t, &mut margin_bound[group])?;
        backend.update_margins(tree, group)?;
        add_to_evals(evals, tree, group, k);
    }
    Ok(())
}

/// A round's metrics of every evaluation set: the built-in ones, the observer's own (rank
/// 0), and the value early stopping watches with whether higher is better (the last metric
/// reported: the observer's own, else the last built-in one).
type RoundMetrics = (Vec<EvalResult>, Vec<CustomEval>, Option<(f64, bool)>);

/// Evaluates a round's metrics (see [`RoundMetrics`]).
fn round_metrics(
    evals: &[EvalSet],
    objective: &Objective,
    metrics: &[Metric],
    round: usize,
    on_rank0: bool,
    observer: &mut dyn TrainObserver,
) -> Result<RoundMetrics> {
    let results: Vec<EvalResult> = evals
        .iter()
        .flat_map(|e| metrics_of(e, objective, metrics))
        .collect();
    let custom = if on_rank0 && !evals.is_empty() {
        let sets: Vec<EvalMargins<'_>> = evals
            .iter()
            .map(|e| EvalMargins {
                name: &e.name,
                margins: &e.margins,
                groups: objective.groups(),
            })
            .collect();
        observer.custom_metrics(round, &sets)?
    } else {
        Vec::new()
    };
    let watched = match custom.last() {
        Some(c) => Some((c.value, c.higher_is_better)),
        None => metrics
            .last()
            .zip(results.last())
            .map(|(m, r)| (r.value, m.higher_is_better())),
    };
    Ok((results, custom, watched))
}

/// Every evaluation set's margins before the first tree: its own base margins, else the
/// model's.
fn start_eval_margins(evals: &mut [EvalSet], base_margin: &[f32], k: usize) -> Result<()> {
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
    Ok(())
}

/// The largest |gradient| and |hessian| of every group over all workers (as f32 bits,
/// gradient then hessian per group); an error where one is not finite. After the allreduce
/// every worker sees the same maxima, so all stop together.
fn agreed_maxima(
    local: &[[f32; 2]],
    collective: &mut dyn Collective,
    round: usize,
) -> Result<Vec<u64>> {
    let mut max: Vec<u64> = local
        .iter()
        .flat_map(|m| [m[0].to_bits() as u64, m[1].to_bits() as u64])
        .collect();
    collective.allreduce_max(&mut max)?;
    let k = local.len();
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
    Ok(max)
}

/// What growing each round's trees needs besides the backend, the collective and the store.
struct RoundTrees<'a> {
    cfg: &'a GrowerConfig<'a>,
    params: &'a Params,
    objective: &'a Objective,
    rows: Option<&'a HostRows<'a>>,
    n_total: u64,
}

impl RoundTrees<'_> {
    /// This worker's gradients of `round`: the host's for a custom objective or a loss
    /// without a kernel, the backend's otherwise.
    fn gradients(
        &self,
        round: usize,
        custom: bool,
        backend: &mut dyn HistBackend,
        observer: &mut dyn TrainObserver,
        collective: &mut dyn Collective,
    ) -> Result<Vec<[f32; 2]>> {
        if custom || !self.objective.has_kernel() {
            let seed = (self.params.seed, round);
            host_gradients(
                self.objective,
                self.rows,
                backend,
                observer,
                collective,
                seed,
            )
        } else {
            backend.compute_gradients()
        }
    }

    /// The setup of the tree of `group` in `round`, with the scales every worker agreed on
    /// from `max` (see [`agreed_maxima`]).
    fn setup(&self, round: usize, group: usize, max: &[u64]) -> TreeSetup {
        let p = self.params;
        let k = self.objective.groups();
        let scale =
            |bits: u64| Scale::agree(f32::from_bits(bits as u32), self.n_total, p.quantisation);
        TreeSetup {
            tree_index: (round * k + group) as u32,
            group,
            seed: p.seed,
            row_sample: SampleRate::new(p.subsample),
            scales: GroupScales {
                grad: scale(max[2 * group]),
                hess: scale(max[2 * group + 1]),
            },
        }
    }

    /// Grows the tree `setup` describes, leaves as the grower set them.
    fn grow_plain(
        &self,
        setup: &TreeSetup,
        backend: &mut dyn TreeBackend,
        collective: &mut dyn Collective,
        store: &mut HistStore,
    ) -> Result<Tree> {
        let (cfg, p) = (self.cfg, self.params);
        let features = sample_features(
            cfg.cuts.n_features(),
            p.colsample_bytree,
            &p.feature_weights,
            p.seed,
            setup.tree_index,
        );
        grow_tree(cfg, backend, collective, setup, &features, store)
    }

    /// Grows the tree `setup` describes; quantile objectives refit its leaves.
    fn grow(
        &self,
        setup: &TreeSetup,
        backend: &mut dyn HistBackend,
        collective: &mut dyn Collective,
        store: &mut HistStore,
    ) -> Result<Tree> {
        let (cfg, p) = (self.cfg, self.params);
        let k = self.objective.groups();
        let group = setup.group;
        let mut tree = self.grow_plain(setup, backend, collective, store)?;
        if let (true, Some(rows)) = (self.objective.kind().refits_leaves(), self.rows) {
            // every group's margins before this round's trees are added
            let margins = backend.margins()?;
            refit_leaves(
                &mut tree,
                rows,
                &margins,
                group,
                k,
                self.objective.refit_quantile(group),
                p.learning_rate,
                self.n_total,
                collective,
            )?;
            // residual quantiles know nothing of monotone bounds
            enforce_monotone(&mut tree, cfg.cuts, &cfg.rules);
        }
        Ok(tree)
    }
}

/// Early stopping's state: the best round so far and its value.
struct EarlyStopping {
    /// Rounds without improvement that stop training (`None`: never).
    rounds: Option<usize>,
    /// The best round and its value.
    best: Option<(usize, f64)>,
}

impl EarlyStopping {
    /// Records `round`'s watched value (and whether higher is better); whether training
    /// should stop.
    fn update(&mut self, round: usize, watched: Option<(f64, bool)>) -> bool {
        let (Some(esr), Some((value, higher))) = (self.rounds, watched) else {
            return false;
        };
        let better = |a: f64, b: f64| if higher { a > b } else { a < b };
        match self.best {
            Some((_, v)) if !better(value, v) => {}
            _ => self.best = Some((round, value)),
        }
        self.best.is_some_and(|(r, _)| round - r >= esr)
    }

    /// The best round, where early stopping was asked for.
    fn best_round(&self) -> Option<usize> {
        self.rounds.and(self.best.map(|(r, _)| r))
    }
}

/// Whether the job stops, and whether by an interruption: any worker may stop it (rank 0
/// by early stopping, any rank by its observer, a signal to that rank's process); the
/// largest wish wins.
fn agree_on_stopping(
    stop: bool,
    interrupted: bool,
    collective: &mut dyn Collective,
) -> Result<(bool, bool)> {
    if collective.world_size() <= 1 {
        return Ok((stop, interrupted));
    }
    let mut flag = [if interrupted { 2 } else { u64::from(stop) }];
    collective.allreduce_max(&mut flag)?;
    Ok((flag[0] > 0, flag[0] == 2))
}
