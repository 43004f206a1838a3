//! Training on in-process workers: one thread, thread pool, shard and collective each, the
//! rows split between them in order.

use std::ops::Range;
use std::sync::Arc;

use sapwood_collective::{in_process, RingCollective, Transport};
use sapwood_core::collective::{Collective, SingleWorker};
use sapwood_core::params::{Checked, Params, RunOptions};
use sapwood_core::train::{
    self, BinnedJob, BinnedShard, EvalInput, Quiet, Shard, Start as Begin, TrainObserver,
};

use crate::batches::read_rows;
use crate::booster::{Booster, RunRecord};
use crate::checks::{binned_eval_set, check_train_margins, eval_labels, prepare};
use crate::dataset::Dataset;
use crate::job::{Rows, Start};
use crate::pool::{factory, in_pool, Recording};
use crate::stream::BinnedDataset;
use crate::{Error, Result};

/// Runs a job on `run.workers` in-process workers.
pub(crate) fn fit(
    params: &Checked<Params>,
    run: &Checked<RunOptions>,
    rows: Rows<'_>,
    start: Start<'_>,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    match rows {
        Rows::Columns { train, evals } => columns(params, run, train, evals, start, observer),
        Rows::Binned {
            train,
            evals,
            base_margin,
        } => binned(params, run, train, evals, base_margin, start, observer),
        Rows::Stream { train, evals } => {
            let rows = (0, train.n_rows());
            let read = read_rows(params, train, evals, start.init, rows, &mut SingleWorker)?;
            observer.on_rows_binned(read.train.rows.n_rows());
            let base_margin = read.train.base_margin.as_deref();
            let evals = read.eval_refs();
            binned(
                params,
                run,
                &read.train.rows,
                &evals,
                base_margin,
                start,
                observer,
            )
        }
    }
}

/// Trains in-process workers on columns in memory: each bins its shard with the cuts the
/// workers agree on.
fn columns(
    params: &Checked<Params>,
    run: &RunOptions,
    train: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
    start: Start<'_>,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    let init = start.init.map(Booster::model);
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
    let resume = start.resume.cloned();
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
            let begin = Begin {
                base_margin: train
                    .base_margin
                    .as_ref()
                    .map(|m| m[rows.start * per_row..rows.end * per_row].to_vec()),
                init_model: init.cloned(),
                resume: resume.clone(),
            };
            train::train_started(&params, shard, evals, begin, collective, &factory, observer)
        },
    )?;
    record.backends = factory.names();
    Ok(Booster::finish(trained, encoded.classes, record))
}

/// Trains in-process workers on rows binned as they were read: each takes its slice.
fn binned(
    params: &Checked<Params>,
    run: &RunOptions,
    train: &BinnedDataset,
    evals: &[(&str, &BinnedDataset)],
    base_margin: Option<&[f32]>,
    start: Start<'_>,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    let init = start.init.map(Booster::model);
    let (params, encoded) = prepare(
        params,
        run,
        train.label.as_ref(),
        train.n_rows(),
        evals.len(),
        init,
    )?;
    let per_row = match base_margin {
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
    let resume = start.resume.cloned();
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
                base_margin: base_margin
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

/// One worker's result with the size of the pool it ran in.
type WorkerRun = (train::Trained, usize);

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
