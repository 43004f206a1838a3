//! `Booster`: train, predict, save and load a model.

use std::collections::BTreeMap;
use std::path::Path;

use std::ops::Range;
use std::sync::Arc;

use sapwood_collective::{in_process, RingCollective, Transport};
use sapwood_core::backend::{BackendFactory, CpuFactory, HistBackend, ShardData};
use sapwood_core::collective::{Collective, CommStats, SingleWorker};
use sapwood_core::explain;
use sapwood_core::model::{ClassLabel, Model};
use sapwood_core::objective::{ftz, ObjectiveKind};
use sapwood_core::params::{CollectiveKind, Device, Params, RunOptions};
use sapwood_core::train::{
    self, BinnedJob, BinnedShard, EvalInput, EvalResult, EvalSet, Quiet, Shard, Start,
    TrainObserver,
};

use rayon::prelude::*;

use crate::dataset::{check_base_margin, Dataset, Label};
use crate::labels;
use crate::stream::BinnedDataset;
use crate::{Error, Result};

/// What [`Booster::predict_with`] returns for each row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Output {
    /// Values, probabilities or class probabilities: one per output group (one class index
    /// per row for `multi:softmax`).
    #[default]
    Value,
    /// Raw margins: one per output group.
    Margin,
    /// SHAP contributions (XGBoost's `pred_contribs`): per output group, one per feature
    /// then the bias; each group's values sum to its margin.
    Contributions,
    /// SHAP interaction values (XGBoost's `pred_interactions`): per output group, a
    /// (features + 1)² matrix, row-major; row i sums to contribution i.
    Interactions,
    /// The leaf each tree sends the row to (XGBoost's `pred_leaf`): one per tree.
    Leaf,
}

/// Options for [`Booster::predict_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PredictOptions {
    /// What to return.
    pub output: Output,
    /// Use only the first `rounds` rounds; by default all rounds, or through the best
    /// iteration when early stopping chose one.
    pub rounds: Option<usize>,
    /// Threads to predict with; 0 (the default) for every core (rayon's global pool).
    pub threads: usize,
}

/// Predictions: `per_row` values for each row, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// Values, row-major.
    pub values: Vec<f32>,
    /// Values per row: the output groups (one for regression and binary tasks), or what
    /// [`Output`] says for explanations.
    pub per_row: usize,
}

impl Predictions {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.values.len() / self.per_row.max(1)
    }

    /// The values of row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.per_row..(i + 1) * self.per_row]
    }
}

/// How feature importance is measured, with XGBoost's names (LightGBM's `split` is
/// [`Importance::Weight`] and its `gain` is [`Importance::TotalGain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Importance {
    /// Number of splits on the feature (`weight`; LightGBM's `split`).
    Weight,
    /// Average loss reduction of the feature's splits (XGBoost's `gain`).
    Gain,
    /// Total loss reduction of the feature's splits (`total_gain`; LightGBM's `gain`).
    TotalGain,
    /// Average hessian of the rows the feature's splits route (`cover`).
    Cover,
    /// Total hessian of the rows the feature's splits route (`total_cover`).
    TotalCover,
}

/// One rank's part of a distributed job, for [`Booster::train_shard`].
#[derive(Debug, Clone)]
pub struct RankShard<'a> {
    /// This rank's rows, binned with cuts agreed through the collective
    /// ([`crate::CutPass::finish_with`]), or with the init model's cuts.
    pub local: &'a BinnedDataset,
    /// Global index of its first row.
    pub row_offset: u64,
    /// Rows over all ranks.
    pub n_total: u64,
    /// The job's classes, from [`crate::global_classes`] (the init model's when continuing
    /// one).
    pub classes: Option<Vec<ClassLabel>>,
    /// Where this rank's part of the job starts: its rows' base margins, the model every
    /// rank continues.
    pub start: TrainStart<'a>,
}

/// One worker's rows of a distributed job before binning, for
/// [`Booster::train_dataset_shard`]: the rows `row_offset..row_offset + local.n_rows()` of
/// the job's `n_total`, the ranks' ranges following one another in rank order.
#[derive(Debug, Clone, Copy)]
pub struct DatasetShard<'a> {
    /// This worker's rows, with their labels, weights, base margins and queries.
    pub local: &'a Dataset<'a>,
    /// Global index of its first row.
    pub row_offset: u64,
    /// Rows over all workers.
    pub n_total: u64,
}

/// Where a training job starts besides its data (XGBoost's `xgb_model` and
/// `base_margin`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TrainStart<'a> {
    /// A saved model to continue: its trees are replayed into the margins, then
    /// `num_rounds` more rounds are added. The data is binned with the model's cuts (so it
    /// may differ from the data the model was trained on; binned data must already be, see
    /// [`Booster::bin_pass`]); the objective, its constants, the class count and the
    /// features must be the model's, and its binning parameters are kept. With the same
    /// data and parameters, 50 rounds continued by 50 save the bytes of 100 in one go.
    pub init_model: Option<&'a Booster>,
    /// Each training row's base margin (see [`Dataset::set_base_margin`]), for binned data,
    /// which carries none; a [`Dataset`] brings its own.
    pub base_margin: Option<&'a [f32]>,
}

/// What a training run actually used, as opposed to what it was asked for: settings that
/// never change the model can only be checked this way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// Each worker's thread-pool size (`rayon::current_num_threads()` inside it), by rank.
    pub threads: Vec<usize>,
    /// Each worker's traffic, by rank (this process's worker only for a distributed rank).
    pub comm: Vec<CommStats>,
    /// The name of every backend built (e.g. "cpu", "wgpu: <adapter>"), one per worker.
    pub backends: Vec<String>,
}

impl RunRecord {
    /// Workers that trained (in this process).
    pub fn workers(&self) -> usize {
        self.threads.len()
    }
}

/// A trained model with its evaluation history.
#[derive(Debug, Clone, PartialEq)]
pub struct Booster {
    model: Model,
    history: Vec<Vec<EvalResult>>,
    interrupted: bool,
    comm: CommStats,
    comm_rounds: Vec<CommStats>,
    record: RunRecord,
}

/// A factory that notes the name of every backend it builds, for [`RunRecord::backends`].
struct Recording<'a> {
    inner: &'a dyn BackendFactory,
    names: std::sync::Mutex<Vec<String>>,
}

impl<'a> Recording<'a> {
    fn new(inner: &'a dyn BackendFactory) -> Self {
        Recording {
            inner,
            names: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn names(self) -> Vec<String> {
        let mut names = self.names.into_inner().unwrap_or_else(|e| e.into_inner());
        // workers build theirs concurrently: sort so the record does not depend on timing
        names.sort();
        names
    }
}

impl BackendFactory for Recording<'_> {
    fn create(&self, shard: ShardData) -> sapwood_core::Result<Box<dyn HistBackend>> {
        let backend = self.inner.create(shard)?;
        let name = backend.name();
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name);
        Ok(backend)
    }
}

/// One worker's result with the size of the pool it ran in.
type WorkerRun = (train::Trained, usize);

/// Validates the parameters and run options (the one place they are checked before
/// training) and encodes the training labels; fills `num_class` from them.
fn prepare(
    params: &Params,
    run: &RunOptions,
    label: Option<&Label>,
    n_rows: usize,
    n_evals: usize,
    init: Option<&Model>,
) -> Result<(Params, labels::Encoded)> {
    params.validate()?;
    run.validate()?;
    if let Some(m) = init {
        check_init_objective(params, m)?;
    }
    if run.collective != CollectiveKind::InProcess {
        return Err(Error::param(
            "collective",
            "this call trains in-process workers; a distributed rank trains with Booster::train_shard",
        ));
    }
    check_param_combinations(params)?;
    if params.early_stopping_rounds.is_some() && n_evals == 0 {
        return Err(Error::param(
            "early_stopping_rounds",
            "early stopping watches an evaluation set, but none was given",
        ));
    }
    let label =
        label.ok_or_else(|| Error::EmptyData("the training dataset has no label".into()))?;
    if n_rows == 0 {
        return Err(Error::EmptyData("the training dataset has no rows".into()));
    }
    let encoded = encode_for(params.objective, label, init)?;
    let mut params = params.clone();
    if let (Some(c), true) = (&encoded.classes, params.objective.is_multiclass()) {
        match params.num_class {
            Some(k) if k != c.len() => {
                return Err(Error::param(
                    "num_class",
                    format!("{k} given but the labels have {} classes", c.len()),
                ))
            }
            _ => params.num_class = Some(c.len()),
        }
    }
    Ok((params, encoded))
}

/// Refuses to continue a model with another objective before the labels are encoded for
/// it (the engine checks the rest of what must match, see `train::continued_params`).
fn check_init_objective(params: &Params, init: &Model) -> Result<()> {
    if params.objective != init.params.objective {
        return Err(Error::param(
            "objective",
            format!(
                "{} given but the model to continue was trained with {}: continued training \
                 keeps the loss",
                params.objective, init.params.objective
            ),
        ));
    }
    Ok(())
}

/// Encodes training labels: with the classes of the model to continue when it has some
/// (so class codes mean what its trees learned), else from the labels themselves.
fn encode_for(
    objective: sapwood_core::objective::ObjectiveKind,
    label: &Label,
    init: Option<&Model>,
) -> Result<labels::Encoded> {
    match init.and_then(|m| m.classes.as_deref()) {
        Some(classes) => Ok(labels::Encoded {
            values: labels::encode_with(objective, label, Some(classes))?,
            classes: Some(classes.to_vec()),
        }),
        None => labels::encode(objective, label),
    }
}

/// Output groups of a job when known before training (multiclass jobs whose class count
/// comes from numeric labels learn it in training).
fn known_groups(params: &Params) -> Option<usize> {
    match params.objective {
        k if k.is_multiclass() => params.num_class,
        ObjectiveKind::Custom => Some(params.num_class.unwrap_or(1)),
        ObjectiveKind::QuantileError => Some(params.quantile_alpha.len()),
        _ => Some(1),
    }
}

/// Checks a training set's per-row base margins before any work; returns the values per
/// row.
fn check_train_margins(margins: &[f32], n: usize, params: &Params) -> Result<usize> {
    check_base_margin(margins, n, known_groups(params))?;
    Ok(margins.len() / n.max(1))
}

/// Parameters that validate alone but contradict each other.
fn check_param_combinations(params: &Params) -> Result<()> {
    if let (Some(k), false) = (params.num_class, params.objective.takes_num_class()) {
        return Err(Error::param(
            "num_class",
            format!(
                "{k} given but {} has one output; num_class is for multi:softprob, \
                 multi:softmax and custom",
                params.objective
            ),
        ));
    }
    Ok(())
}

/// An evaluation set binned as it was read, with its labels encoded as the training
/// labels were and its query groups.
fn binned_eval_set(
    params: &Params,
    name: &str,
    d: &BinnedDataset,
    encoded: &labels::Encoded,
) -> Result<EvalSet> {
    let set = EvalSet::new(
        name.to_string(),
        d.binned.clone(),
        eval_labels(params, name, d.label.as_ref(), encoded)?,
        d.weight.clone(),
    );
    Ok(match &d.queries {
        Some(q) => set.with_queries(q.clone()),
        None => set,
    })
}

fn eval_labels(
    params: &Params,
    name: &str,
    label: Option<&Label>,
    encoded: &labels::Encoded,
) -> Result<Vec<f32>> {
    let l =
        label.ok_or_else(|| Error::EmptyData(format!("evaluation set `{name}` has no label")))?;
    labels::encode_with(params.objective, l, encoded.classes.as_deref()).map_err(|source| {
        Error::InDataset {
            dataset: format!("evaluation set `{name}`"),
            source: Box::new(source),
        }
    })
}

/// Runs `work` on every in-process worker (one thread, thread pool, shard and collective
/// each) and returns rank 0's result with every worker's pool size and traffic. Worker
/// failures stop the others (their collectives fail), and the first real cause is reported
/// rather than the peers' "has stopped".
fn run_workers<F>(
    run: &RunOptions,
    n_rows: usize,
    queries: Option<&sapwood_core::rank::Queries>,
    observer: &mut dyn TrainObserver,
    work: F,
) -> Result<(train::Trained, RunRecord)>
where
    F: Fn(Range<usize>, &mut dyn Collective, &mut dyn TrainObserver) -> Result<train::Trained>
        + Sync,
{
    let workers = run.workers;
    if workers <= 1 {
        let (t, threads) = in_pool(run.threads, || work(0..n_rows, &mut SingleWorker, observer))?;
        let record = RunRecord {
            threads: vec![threads],
            comm: vec![t.comm],
            backends: Vec::new(),
        };
        return Ok((t, record));
    }
    if observer.has_custom_objective() {
        // the objective sees one worker's rows; XGBoost's `obj` expects the whole dataset
        return Err(Error::param(
            "workers",
            format!("{workers} in-process workers with a custom objective: it trains on one"),
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = max_workers(cores);
    if workers > most {
        return Err(Error::param(
            "workers",
            format!(
                "{workers} in-process workers on {cores} cores: at most {most} are allowed \
                 ({MAX_WORKERS_PER_CORE} per core, at least {MIN_WORKER_CAP}); every worker \
                 is a thread with its own pool and histograms"
            ),
        ));
    }
    if workers > n_rows {
        return Err(Error::param(
            "workers",
            format!("{workers} workers for {n_rows} rows: every worker needs a row"),
        ));
    }
    let total_threads = if run.threads == 0 { cores } else { run.threads };
    let per_worker = (total_threads / workers).max(1);
    let transports = in_process(workers, WORKER_TIMEOUT);
    let mut blocks = sapwood_collective::ring::even_blocks(n_rows, workers);
    if let Some(q) = queries {
        // a query's gradients need all its rows: shards end where queries do
        blocks = q.align(&blocks).ok_or_else(|| {
            Error::param(
                "workers",
                format!(
                    "{workers} workers for {} queries: every worker needs a query",
                    q.len()
                ),
            )
        })?;
    }
    let work = &work;
    let results: Vec<Result<WorkerRun>> = std::thread::scope(|scope| {
        let mut observer = Some(observer);
        let handles: Vec<_> = transports
            .into_iter()
            .zip(blocks)
            .map(|(t, rows)| {
                let obs = if t.rank() == 0 { observer.take() } else { None };
                let (codec, overlap) = (run.comm_codec, run.comm_overlap);
                scope.spawn(move || {
                    let mut collective = RingCollective::new(t, codec).with_overlap(overlap);
                    let mut quiet = Quiet;
                    let obs: &mut dyn TrainObserver = match obs {
                        Some(o) => o,
                        None => &mut quiet,
                    };
                    in_pool(per_worker, || work(rows, &mut collective, obs))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Collective("a worker panicked".into())))
            })
            .collect()
    });
    let mut first = None;
    let mut consequence = None;
    let mut record = RunRecord::default();
    for r in results {
        match r {
            Ok((t, threads)) => {
                record.threads.push(threads);
                record.comm.push(t.comm);
                if first.is_none() {
                    first = Some(t);
                }
            }
            Err(Error::Collective(m)) if m.contains("has stopped") => {
                consequence = consequence.or(Some(Error::Collective(m)))
            }
            Err(e) => return Err(e),
        }
    }
    match (consequence, first) {
        (Some(e), _) => Err(e),
        (None, Some(t)) => Ok((t, record)),
        (None, None) => Err(Error::Collective("no worker finished".into())),
    }
}

/// In-process workers allowed per core: more only add threads, memory and traffic.
const MAX_WORKERS_PER_CORE: usize = 4;
/// In-process workers always allowed, however few the cores (tests of worker counts).
const MIN_WORKER_CAP: usize = 16;

/// The most in-process workers allowed on `cores` cores.
fn max_workers(cores: usize) -> usize {
    (MAX_WORKERS_PER_CORE * cores).max(MIN_WORKER_CAP)
}

/// How long a worker waits for a peer before calling it dead.
const WORKER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// The backend factory for the run's device, on the devices it names: every worker's
/// (in-process workers take them in turn) or, for rank `rank` of a distributed job of
/// `world`, the rank's own entry of the list.
fn factory(run: &RunOptions, rank: usize, world: usize) -> Result<Box<dyn BackendFactory>> {
    let chosen = run.devices_for_rank(rank, world)?;
    // unused in a build without GPU backends, hence the underscore
    let _indices = (!chosen.is_empty()).then_some(chosen);
    match run.device {
        Device::Cpu => Ok(Box::new(CpuFactory)),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => Ok(Box::new(sapwood_wgpu::WgpuFactory::with_options(
            sapwood_wgpu::WgpuOptions {
                adapters: _indices,
                ..Default::default()
            },
        ))),
        #[cfg(feature = "cuda")]
        Device::Cuda => Ok(Box::new(sapwood_cuda::CudaFactory::with_options(
            sapwood_cuda::CudaOptions {
                devices: _indices,
                ..Default::default()
            },
        ))),
        #[allow(unreachable_patterns)]
        other => Err(Error::param(
            "device",
            format!("`{other}` is not compiled into this build of sapwood (enable the `{other}` feature)"),
        )),
    }
}

fn thread_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::param("threads", e.to_string()))
}

/// Runs `work` in a pool of `threads` (0: rayon's default) and returns its result with the
/// pool size seen from inside, which is what the work actually had.
fn in_pool<T>(threads: usize, work: impl FnOnce() -> Result<T> + Send) -> Result<(T, usize)>
where
    T: Send,
{
    thread_pool(threads)?.install(|| {
        let size = rayon::current_num_threads();
        work().map(|t| (t, size))
    })
}

impl Booster {
    /// Trains on `train` with the default run options (all cores, CPU, one worker),
    /// reporting metrics on `evals` (name, dataset).
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
        Self::train_dataset(params, run, train, evals, None, observer)
    }

    /// Continues `init` (XGBoost's `xgb_model`): replays its trees and trains
    /// `params.num_rounds` more rounds on `train`, binned with the model's cuts (see
    /// [`TrainStart::init_model`] for what must match). Otherwise like
    /// [`Booster::train_with`].
    pub fn train_from_model(
        params: &Params,
        run: &RunOptions,
        init: &Booster,
        train: &Dataset<'_>,
        evals: &[(&str, &Dataset<'_>)],
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        Self::train_dataset(params, run, train, evals, Some(&init.model), observer)
    }

    fn train_dataset(
        params: &Params,
        run: &RunOptions,
        train: &Dataset<'_>,
        evals: &[(&str, &Dataset<'_>)],
        init: Option<&Model>,
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        let (params, encoded) = prepare(
            params,
            run,
            train.label.as_ref(),
            train.n_rows(),
            evals.len(),
            init,
        )?;
        let per_row = match &train.base_margin {
            Some(m) => check_train_margins(m, train.n_rows(), &params)?,
            None => 0,
        };
        let mut eval_inputs = Vec::with_capacity(evals.len());
        for (name, d) in evals {
            eval_inputs.push(EvalInput {
                name: name.to_string(),
                features: d.features.slice_rows(0..d.n_rows()),
                labels: eval_labels(&params, name, d.label.as_ref(), &encoded)?,
                weights: d.weight.clone(),
                base_margin: d.base_margin.clone(),
                queries: d.queries.clone(),
            });
        }
        let eval_inputs = std::sync::Mutex::new(Some(eval_inputs));
        let chosen = factory(run, 0, run.workers)?;
        let factory = Recording::new(chosen.as_ref());
        // every worker continues from the same checkpoint
        let resume = observer.resume_from()?;
        let (trained, mut record) = run_workers(
            run,
            train.n_rows(),
            train.queries.as_ref(),
            observer,
            |rows, collective, observer| {
                let shard = Shard {
                    features: train.features.slice_rows(rows.clone()),
                    labels: encoded.values[rows.clone()].to_vec(),
                    weights: train.weight.as_ref().map(|w| w[rows.clone()].to_vec()),
                    row_offset: rows.start as u64,
                    queries: train.queries.as_ref().and_then(|q| q.slice(rows.clone())),
                };
                // evaluation sets matter on rank 0 only
                let evals = if collective.rank() == 0 {
                    eval_inputs.lock().unwrap().take().unwrap_or_default()
                } else {
                    Vec::new()
                };
                let start = Start {
                    base_margin: train
                        .base_margin
                        .as_ref()
                        .map(|m| m[rows.start * per_row..rows.end * per_row].to_vec()),
                    init_model: init.cloned(),
                    resume: resume.clone(),
                };
                train::train_started(&params, shard, evals, start, collective, &factory, observer)
            },
        )?;
        record.backends = factory.names();
        Ok(Booster::finish(trained, encoded.classes, record))
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
        Self::train_binned_from(params, run, train, evals, TrainStart::default(), observer)
    }

    /// Trains like [`Booster::train_binned`], starting as `start` says (a model to
    /// continue, the training rows' base margins).
    pub fn train_binned_from(
        params: &Params,
        run: &RunOptions,
        train: &BinnedDataset,
        evals: &[(&str, &BinnedDataset)],
        start: TrainStart<'_>,
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        let init = start.init_model.map(|b| &b.model);
        let (params, encoded) = prepare(
            params,
            run,
            train.label.as_ref(),
            train.n_rows(),
            evals.len(),
            init,
        )?;
        let per_row = match start.base_margin {
            Some(m) => check_train_margins(m, train.n_rows(), &params)?,
            None => 0,
        };
        let mut eval_sets = Vec::with_capacity(evals.len());
        for (name, d) in evals {
            if d.cuts != train.cuts || d.names != train.names {
                return Err(Error::SchemaMismatch(format!(
                    "evaluation set `{name}` was binned with other cuts than the training set"
                )));
            }
            eval_sets.push(binned_eval_set(&params, name, d, &encoded)?);
        }
        let eval_sets = std::sync::Mutex::new(Some(eval_sets));
        let chosen = factory(run, 0, run.workers)?;
        let factory = Recording::new(chosen.as_ref());
        let n = train.n_rows();
        // every worker continues from the same checkpoint
        let resume = observer.resume_from()?;
        let (trained, mut record) = run_workers(
            run,
            n,
            train.queries.as_ref(),
            observer,
            |rows, collective, observer| {
                let binned = if rows.len() == n {
                    train.binned.clone()
                } else {
                    Arc::new(train.binned.slice_rows(rows.clone()))
                };
                let shard = BinnedShard {
                    binned,
                    labels: encoded.values[rows.clone()].to_vec(),
                    weights: train.weight.as_ref().map(|w| w[rows.clone()].to_vec()),
                    base_margin: start
                        .base_margin
                        .map(|m| m[rows.start * per_row..rows.end * per_row].to_vec()),
                    row_offset: rows.start as u64,
                    queries: train.queries.as_ref().and_then(|q| q.slice(rows.clone())),
                };
                let evals = if collective.rank() == 0 {
                    eval_sets.lock().unwrap().take().unwrap_or_default()
                } else {
                    Vec::new()
                };
                let job = BinnedJob {
                    feature_names: train.names.clone(),
                    cuts: train.cuts.clone(),
                    shard,
                    n_total: n as u64,
                    evals,
                    resume: resume.clone(),
                    init_model: init.cloned(),
                };
                train::train_binned(&params, job, collective, &factory, observer)
            },
        )?;
        record.backends = factory.names();
        Ok(Booster::finish(trained, encoded.classes, record))
    }

    /// Trains this worker's shard of a distributed job (e.g. one MPI rank, see
    /// [`RankShard`]) through `collective`, as `run` says (threads, device, codec; its
    /// `workers` is ignored: the collective defines the workers). Evaluation sets matter on
    /// rank 0 only.
    pub fn train_shard(
        params: &Params,
        run: &RunOptions,
        shard: RankShard<'_>,
        evals: &[(&str, &BinnedDataset)],
        collective: &mut dyn Collective,
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        params.validate()?;
        run.validate()?;
        check_param_combinations(params)?;
        let RankShard {
            local,
            row_offset,
            n_total,
            classes,
            start,
        } = shard;
        let init = start.init_model.map(|b| &b.model);
        let kinds: Vec<bool> = (0..local.cuts.n_features())
            .map(|j| local.cuts.feature(j).is_categorical())
            .collect();
        let mut facts = job_facts(
            params,
            run,
            &local.names,
            &kinds,
            [
                local.weight.is_some(),
                local.queries.is_some(),
                start.base_margin.is_some(),
            ],
            n_total,
        );
        if let Some(m) = init {
            facts.push_digest("the model to continue", m.to_json().as_bytes());
        }
        train::agree_job(&facts, collective)?;
        if let Some(m) = init {
            check_init_objective(params, m)?;
        }
        let label = local
            .label
            .as_ref()
            .ok_or_else(|| Error::EmptyData("the training shard has no label".into()))?;
        let mut params = params.clone();
        if let (Some(c), true) = (&classes, params.objective.is_multiclass()) {
            params.num_class = Some(c.len());
        }
        let encoded = labels::Encoded {
            values: labels::encode_with(params.objective, label, classes.as_deref())?,
            classes,
        };
        let mut eval_sets = Vec::new();
        if collective.rank() == 0 {
            for (name, d) in evals {
                eval_sets.push(binned_eval_set(&params, name, d, &encoded)?);
            }
        }
        if let Some(m) = start.base_margin {
            check_train_margins(m, local.n_rows(), &params)?;
        }
        let shard = BinnedShard {
            binned: local.binned.clone(),
            labels: encoded.values,
            weights: local.weight.clone(),
            base_margin: start.base_margin.map(<[f32]>::to_vec),
            row_offset,
            queries: local.queries.clone(),
        };
        let chosen = factory(run, collective.rank(), collective.world_size())?;
        let factory = Recording::new(chosen.as_ref());
        let job = BinnedJob {
            feature_names: local.names.clone(),
            cuts: local.cuts.clone(),
            shard,
            n_total,
            evals: eval_sets,
            resume: observer.resume_from()?,
            init_model: init.cloned(),
        };
        let (trained, threads) = in_pool(run.threads, || {
            train::train_binned(&params, job, collective, &factory, observer)
        })?;
        let record = RunRecord {
            threads: vec![threads],
            comm: vec![trained.comm],
            backends: factory.names(),
        };
        Ok(Booster::finish(trained, encoded.classes, record))
    }

    /// Trains this worker's unbinned rows of a distributed job (one Dask worker, one TCP
    /// rank) through `collective`: the workers agree on the cuts and the classes, bin their
    /// own rows and train as [`Booster::train_shard`] does. The model is the one
    /// [`Booster::train_with`] saves for all the rows in rank order, byte for byte.
    /// Evaluation sets (binned with the agreed cuts) matter on rank 0 only.
    pub fn train_dataset_shard(
        params: &Params,
        run: &RunOptions,
        shard: DatasetShard<'_>,
        evals: &[(&str, &Dataset<'_>)],
        collective: &mut dyn Collective,
        observer: &mut dyn TrainObserver,
    ) -> Result<Booster> {
        params.validate()?;
        let DatasetShard {
            local,
            row_offset,
            n_total,
        } = shard;
        let kinds: Vec<bool> = local
            .features
            .columns()
            .iter()
            .map(|c| c.is_categorical())
            .collect();
        let facts = job_facts(
            params,
            run,
            local.features.names(),
            &kinds,
            [
                local.weight.is_some(),
                local.queries.is_some(),
                local.base_margin.is_some(),
            ],
            n_total,
        );
        train::agree_job(&facts, collective)?;
        check_shard_ranges(row_offset, local.n_rows() as u64, n_total, collective)?;
        let mut cut = crate::CutPass::for_shard(params, n_total, row_offset);
        cut.push(&local.features, local.weight.as_deref())?;
        let mut pass = cut.finish_with(collective)?;
        pass.push(&local.features, local.label.clone(), local.weight.clone())?;
        let mut binned = pass.finish()?;
        binned.queries = local.queries.clone();
        let label = local
            .label
            .as_ref()
            .ok_or_else(|| Error::EmptyData("the training shard has no label".into()))?;
        let classes = crate::global_classes(params.objective, label, collective)?;
        let mut binned_evals = Vec::new();
        if collective.rank() == 0 {
            for (name, d) in evals {
                if d.base_margin.is_some() {
                    return Err(Error::InDataset {
                        dataset: format!("evaluation set `{name}`"),
                        source: Box::new(Error::EmptyData(
                            "base margins of evaluation sets are not supported in \
                             distributed training"
                                .into(),
                        )),
                    });
                }
                let mut pass = binned.bin_like();
                pass.push(&d.features, d.label.clone(), d.weight.clone())
                    .map_err(|source| Error::InDataset {
                        dataset: format!("evaluation set `{name}`"),
                        source: Box::new(source),
                    })?;
                let mut b = pass.finish()?;
                b.queries = d.queries.clone();
                binned_evals.push((name.to_string(), b));
            }
        }
        let eval_refs: Vec<(&str, &BinnedDataset)> =
            binned_evals.iter().map(|(n, d)| (n.as_str(), d)).collect();
        let rank_shard = RankShard {
            local: &binned,
            row_offset,
            n_total,
            classes,
            start: TrainStart {
                init_model: None,
                base_margin: local.base_margin.as_deref(),
            },
        };
        Self::train_shard(params, run, rank_shard, &eval_refs, collective, observer)
    }

    fn finish(
        trained: train::Trained,
        classes: Option<Vec<ClassLabel>>,
        record: RunRecord,
    ) -> Booster {
        let mut model = trained.model;
        model.classes = classes;
        if trained.interrupted {
            // record the rounds actually trained, so the saved parameters reproduce the model
            model.params.num_rounds = model.num_rounds();
        }
        Booster {
            model,
            history: trained.history,
            interrupted: trained.interrupted,
            comm: trained.comm,
            comm_rounds: trained.comm_rounds,
            record,
        }
    }

    /// Predictions for `data` (values, probabilities or class probabilities).
    pub fn predict(&self, data: &Dataset<'_>) -> Result<Predictions> {
        self.predict_with(data, PredictOptions::default())
    }

    /// Predictions with options (margins, number of rounds). When `data` carries base
    /// margins ([`Dataset::set_base_margin`]), each row's trees are added to its own base
    /// margin instead of the model's (and SHAP's bias moves by the difference).
    pub fn predict_with(&self, data: &Dataset<'_>, opts: PredictOptions) -> Result<Predictions> {
        if opts.threads == 0 {
            return self.predict_here(data, opts);
        }
        in_pool(opts.threads, || self.predict_here(data, opts)).map(|(p, _)| p)
    }

    /// [`Booster::predict_with`] in the current thread pool.
    fn predict_here(&self, data: &Dataset<'_>, opts: PredictOptions) -> Result<Predictions> {
        let m = &self.model;
        crate::schema::check_categorical_types(m, &data.features)?;
        let rounds = m.check_rounds(opts.rounds)?;
        let side = m.feature_names.len() + 1;
        let base = data.base_margin.as_deref();
        if let Some(b) = base {
            check_base_margin(b, data.n_rows(), Some(m.groups))?;
        }
        let (values, per_row) = match opts.output {
            Output::Value => match base {
                Some(b) => (
                    m.objective()
                        .transform(&self.margins_from(data, rounds, b)?),
                    m.objective().output_width(),
                ),
                None => (
                    m.predict(&data.features, Some(rounds))?,
                    m.objective().output_width(),
                ),
            },
            Output::Margin => match base {
                Some(b) => (self.margins_from(data, rounds, b)?, m.groups),
                None => (m.predict_margins(&data.features, Some(rounds))?, m.groups),
            },
            Output::Contributions => {
                let mut v = explain::contributions(m, &m.bin(&data.features)?, rounds);
                if let Some(b) = base {
                    self.move_bias(&mut v, b, side, side - 1);
                }
                (v.into_iter().map(|x| x as f32).collect(), m.groups * side)
            }
            Output::Interactions => {
                let mut v = explain::interactions(m, &m.bin(&data.features)?, rounds);
                if let Some(b) = base {
                    // the bias is entry (nf, nf) of each group's matrix
                    self.move_bias(&mut v, b, side * side, side * side - 1);
                }
                (
                    v.into_iter().map(|x| x as f32).collect(),
                    m.groups * side * side,
                )
            }
            Output::Leaf => {
                let v = explain::leaf_indices(m, &m.bin(&data.features)?, rounds);
                (v.into_iter().map(|x| x as f32).collect(), rounds * m.groups)
            }
        };
        Ok(Predictions { values, per_row })
    }

    /// Margins of `data` (`groups` per row) from each row's own base margin `base`: the
    /// trees are added in the order training added them, so a training row's prediction
    /// has the bits of its training margin.
    fn margins_from(&self, data: &Dataset<'_>, rounds: usize, base: &[f32]) -> Result<Vec<f32>> {
        self.predict_binned_from(&self.model.bin(&data.features)?, rounds, base)
    }

    /// Margins (`groups` per row) of rows binned with the model's cuts
    /// ([`Model::bin`]) using the first `rounds` rounds, starting from each row's own base
    /// margin `base` (`groups` per row, row-major) instead of the model's.
    pub fn predict_binned_from(
        &self,
        binned: &sapwood_core::data::BinnedMatrix,
        rounds: usize,
        base: &[f32],
    ) -> Result<Vec<f32>> {
        let m = &self.model;
        let k = m.groups.max(1);
        check_base_margin(base, binned.n_rows(), Some(k))?;
        let trees = &m.trees[..rounds.min(m.num_rounds()) * k];
        // training flushes subnormal starting margins too (every backend alike)
        let mut out: Vec<f32> = base.iter().map(|&v| ftz(v)).collect();
        out.par_chunks_mut(k)
            .enumerate()
            .for_each(|(row, margins)| {
                for (t, tree) in trees.iter().enumerate() {
                    let leaf = tree.leaf_of_binned(binned, row);
                    margins[t % k] = ftz(margins[t % k] + tree.value(leaf));
                }
            });
        Ok(out)
    }

    /// Moves each row's SHAP bias (at `at` within each block of `block` values, one block
    /// per row and group) from the model's base margin to the row's own.
    fn move_bias(&self, values: &mut [f64], base: &[f32], block: usize, at: usize) {
        let model_base = &self.model.base_margin;
        let k = model_base.len().max(1);
        for (i, chunk) in values.chunks_mut(block).enumerate() {
            chunk[at] += base[i] as f64 - model_base[i % k] as f64;
        }
    }

    /// A binning pass with the model's cuts: data binned by it can continue the model
    /// ([`TrainStart::init_model`] with [`Booster::train_binned_from`]).
    pub fn bin_pass(&self) -> crate::BinPass {
        crate::BinPass::with_cuts(self.model.feature_names.clone(), self.model.cuts.clone())
    }

    /// The most likely class of each row (classification models).
    pub fn predict_classes(&self, data: &Dataset<'_>) -> Result<Vec<ClassLabel>> {
        let classes = self
            .model
            .classes
            .as_ref()
            .ok_or_else(|| Error::param("objective", "the model has no classes"))?;
        let p = self.predict(data)?;
        Ok((0..p.n_rows())
            .map(|i| {
                let row = p.row(i);
                let c = if row.len() == 1 {
                    (row[0] > 0.5) as usize
                } else {
                    sapwood_core::metric::argmax(row)
                };
                classes[c].clone()
            })
            .collect())
    }

    /// The model as JSON text.
    pub fn to_json(&self) -> String {
        self.model.to_json()
    }

    /// A booster from JSON text; malformed models are errors.
    pub fn from_json(text: &str) -> Result<Booster> {
        Ok(Booster {
            model: Model::from_json(text)?,
            history: Vec::new(),
            interrupted: false,
            comm: CommStats::default(),
            comm_rounds: Vec::new(),
            record: RunRecord::default(),
        })
    }

    /// Writes the model to `path` through a temporary file, so a failure leaves nothing behind.
    /// Models holding non-finite numbers are refused: they could not be read back.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.model.check_finite().map_err(|e| match e {
            Error::InvalidModel(m) => {
                Error::InvalidModel(format!("{}: not saved: {m}", path.as_ref().display()))
            }
            e => e,
        })?;
        sapwood_core::files::write_atomic(path.as_ref(), self.to_json().as_bytes())
    }

    /// Records the name of the label column in the model (for `eval` and `inspect`).
    pub fn set_label_name(&mut self, name: impl Into<String>) {
        self.model.label_name = Some(name.into());
    }

    /// Records what each feature's values were in the training data (one per feature, in
    /// training order), saved with the model so that prediction can refuse a column whose
    /// type drifted (booleans where numbers were trained); a list of another length is an
    /// error.
    pub fn set_input_types(&mut self, types: Vec<sapwood_core::model::InputType>) -> Result<()> {
        if types.len() != self.model.feature_names.len() {
            return Err(Error::param(
                "input_types",
                format!(
                    "{} types for {} features",
                    types.len(),
                    self.model.feature_names.len()
                ),
            ));
        }
        self.model.input_types = Some(types);
        Ok(())
    }

    /// Reads a model written by [`Booster::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Booster> {
        sapwood_core::files::read_parsed(path.as_ref(), Self::from_json)
    }

    /// The underlying model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Rounds trained.
    pub fn num_rounds(&self) -> usize {
        self.model.num_rounds()
    }

    /// Trees in the model (rounds × groups).
    pub fn num_trees(&self) -> usize {
        self.model.trees.len()
    }

    /// Best round under early stopping.
    pub fn best_iteration(&self) -> Option<usize> {
        self.model.best_iteration
    }

    /// Metrics after every round.
    pub fn history(&self) -> &[Vec<EvalResult>] {
        &self.history
    }

    /// Whether the observer stopped training before the last round.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// Bytes exchanged between workers during training (zeros for one worker).
    pub fn comm_stats(&self) -> CommStats {
        self.comm
    }

    /// What the run actually used: pool sizes, workers, backends, traffic per worker (empty
    /// for a loaded model).
    pub fn run_record(&self) -> &RunRecord {
        &self.record
    }

    /// Bytes exchanged in each round (empty for a loaded model).
    pub fn comm_history(&self) -> &[CommStats] {
        &self.comm_rounds
    }

    /// Class labels of a classification model.
    pub fn classes(&self) -> Option<&[ClassLabel]> {
        self.model.classes.as_deref()
    }

    /// Importance of each feature that is used, by name.
    pub fn feature_importance(&self, kind: Importance) -> BTreeMap<String, f64> {
        // (splits, total gain, total cover) per feature
        let mut sums: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
        for tree in &self.model.trees {
            for node in &tree.nodes {
                if let Some(s) = &node.split {
                    let e = sums.entry(s.feature).or_default();
                    e.0 += 1.0;
                    e.1 += s.gain;
                    e.2 += node.cover;
                }
            }
        }
        sums.into_iter()
            .map(|(f, (n, gain, cover))| {
                let v = match kind {
                    Importance::Weight => n,
                    Importance::Gain => gain / n,
                    Importance::TotalGain => gain,
                    Importance::Cover => cover / n,
                    Importance::TotalCover => cover,
                };
                (self.model.feature_names[f].clone(), v)
            })
            .collect()
    }
}

/// A format [`Booster::export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// XGBoost JSON, loadable by `xgboost.Booster(model_file=...)`.
    XGBoost,
    /// LightGBM text, loadable by `lightgbm.Booster(model_file=...)`.
    LightGBM,
    /// ONNX protobuf (`ai.onnx.ml` TreeEnsembleRegressor), for `onnxruntime`; binary, so
    /// [`Booster::export_bytes`] rather than [`Booster::export_string`].
    Onnx,
}

impl std::str::FromStr for ExportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "xgboost" => Ok(ExportFormat::XGBoost),
            "lightgbm" => Ok(ExportFormat::LightGBM),
            "onnx" => Ok(ExportFormat::Onnx),
            _ => Err(Error::param(
                "format",
                format!("unknown export format `{s}`; expected xgboost, lightgbm or onnx"),
            )),
        }
    }
}

impl Booster {
    /// The model's text in `format` (XGBoost JSON or LightGBM text), of the rounds prediction
    /// uses by default (through early stopping's best round; see
    /// [`Booster::export_rounds`]). Every split is translated (see [`sapwood_core::export`]);
    /// a split the format cannot express is an error naming it, and ONNX, a binary format, is
    /// an error pointing to [`Booster::export_bytes`].
    pub fn export_string(&self, format: ExportFormat) -> Result<String> {
        self.export_string_of(format, self.model.default_rounds())
    }

    fn export_string_of(&self, format: ExportFormat, rounds: usize) -> Result<String> {
        let model = self.model.first_rounds(rounds);
        match format {
            ExportFormat::XGBoost => sapwood_core::export::xgboost::to_json(&model),
            ExportFormat::LightGBM => sapwood_core::export::lightgbm::to_text(&model),
            ExportFormat::Onnx => Err(Error::param(
                "format",
                "ONNX is a binary format: use Booster::export_bytes or Booster::export",
            )),
        }
    }

    /// The model's bytes in `format` (the text formats as UTF-8), of the rounds prediction
    /// uses by default; a split the format cannot express is an error naming the tree and node.
    pub fn export_bytes(&self, format: ExportFormat) -> Result<Vec<u8>> {
        self.export_bytes_of(format, self.model.default_rounds())
    }

    fn export_bytes_of(&self, format: ExportFormat, rounds: usize) -> Result<Vec<u8>> {
        match format {
            ExportFormat::Onnx => {
                sapwood_core::export::onnx::to_bytes(&self.model.first_rounds(rounds))
            }
            text => self.export_string_of(text, rounds).map(String::into_bytes),
        }
    }

    /// Writes the model in `format` to `path` atomically (nothing is written on error), with
    /// the rounds prediction uses by default: an early-stopped model exports through its best
    /// round, since the other libraries predict with every tree of the file.
    pub fn export(&self, format: ExportFormat, path: impl AsRef<Path>) -> Result<()> {
        self.export_rounds(format, self.model.default_rounds(), path)
    }

    /// [`Booster::export`] of the first `rounds` rounds (all of them when `rounds` is more
    /// than the model has); zero rounds is an error.
    pub fn export_rounds(
        &self,
        format: ExportFormat,
        rounds: usize,
        path: impl AsRef<Path>,
    ) -> Result<()> {
        let path = path.as_ref();
        if rounds == 0 {
            return Err(Error::param(
                "rounds",
                "0: export at least one round (omit it for the rounds prediction uses)",
            ));
        }
        let bytes = self.export_bytes_of(format, rounds)?;
        sapwood_core::files::write_atomic(path, &bytes)
    }
}

/// What every worker of a distributed job must share ([`train::agree_job`]): the
/// parameters and the wire's run options, the features (names and kinds), which optional
/// columns (weights, query groups, base margins) are given, and the rows over all workers.
fn job_facts(
    params: &Params,
    run: &RunOptions,
    names: &[String],
    categorical: &[bool],
    [weights, groups, base_margin]: [bool; 3],
    n_total: u64,
) -> train::JobFacts {
    let mut facts = train::JobFacts::of_params(params, run);
    let features: Vec<String> = names
        .iter()
        .zip(categorical)
        .map(|(n, &c)| format!("{n}{}", if c { " (categorical)" } else { "" }))
        .collect();
    facts.push("features", features.join(", "));
    let given = |b: bool| if b { "given" } else { "not given" };
    facts.push("sample weights", given(weights));
    facts.push("query groups", given(groups));
    facts.push("base margins", given(base_margin));
    facts.push("rows over all workers", n_total.to_string());
    facts
}

/// Checks that the workers' row ranges follow one another in rank order and cover
/// `0..n_total`: a shard given the wrong offset would sample and hash the wrong rows.
fn check_shard_ranges(
    row_offset: u64,
    n_rows: u64,
    n_total: u64,
    collective: &mut dyn Collective,
) -> Result<()> {
    let mine = [
        row_offset.to_le_bytes(),
        n_rows.to_le_bytes(),
        n_total.to_le_bytes(),
    ]
    .concat();
    let mut next = 0u64;
    for (rank, part) in collective.allgather(&mine)?.iter().enumerate() {
        let word = |i: usize| {
            part.get(8 * i..8 * i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let (Some(offset), Some(rows), Some(total)) = (word(0), word(1), word(2)) else {
            return Err(Error::Collective(format!(
                "worker {rank} sent a malformed row range"
            )));
        };
        if total != n_total {
            return Err(Error::Collective(format!(
                "workers disagree on the number of rows: {n_total} here, {total} on worker {rank}"
            )));
        }
        if offset != next {
            return Err(Error::Collective(format!(
                "worker {rank}'s rows start at {offset}, but the workers before it hold rows \
                 0..{next}: each worker's rows must follow the previous worker's"
            )));
        }
        next = offset + rows;
    }
    if next != n_total {
        return Err(Error::Collective(format!(
            "the workers hold {next} rows, but n_total is {n_total}"
        )));
    }
    Ok(())
}
