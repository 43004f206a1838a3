//! Training one rank of a distributed job (MPI, TCP ranks, Dask, Spark): the ranks agree
//! that they run the same job, on the cuts and the classes, then train through the job's
//! collective.

use sapwood_core::collective::Collective;
use sapwood_core::params::{Checked, Params, RunOptions};
use sapwood_core::train::{self, BinnedJob, BinnedShard, TrainObserver};

use crate::batches::{check_queries_whole, push_features, read_rows, RowSource};
use crate::booster::{Booster, RunRecord};
use crate::checks::{binned_eval_set, check_init_objective, check_train_margins};
use crate::dataset::Dataset;
use crate::job::{Rows, Start};
use crate::labels;
use crate::pool::{factory, in_pool, Recording};
use crate::stream::BinnedDataset;
use crate::{Error, Result};

/// What a rank's part of a job is, besides its rows and its collective.
#[derive(Clone, Copy)]
pub(crate) struct Part<'a> {
    /// What defines the model.
    pub params: &'a Checked<Params>,
    /// How the job runs.
    pub run: &'a Checked<RunOptions>,
    /// How every rank starts (the model it continues, the checkpoint it resumes).
    pub start: Start<'a>,
    /// Global index of this rank's first row.
    pub row_offset: u64,
    /// Rows over all ranks.
    pub n_total: u64,
}

/// Runs this rank's part of a job.
pub(crate) fn fit(
    part: Part<'_>,
    rows: Rows<'_>,
    collective: &mut dyn Collective,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    match rows {
        Rows::Columns { train, evals } => columns(part, train, evals, collective, observer),
        Rows::Binned {
            train,
            evals,
            base_margin,
        } => binned(part, train, evals, base_margin, collective, observer),
        Rows::Stream { train, evals } => stream(part, train, evals, collective, observer),
    }
}

/// Trains this rank's rows read in batches: the ranks agree on the job and on what their
/// sources say of their rows before exchanging cuts, then bin their rows (and rank 0 the
/// evaluation sets) and train as [`binned`] does.
fn stream(
    part: Part<'_>,
    train: &dyn RowSource,
    evals: &[(&str, &dyn RowSource)],
    collective: &mut dyn Collective,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    check_part(&part)?;
    let mut facts = train::JobFacts::of_params(part.params, part.run);
    train.describe(&mut facts);
    facts.push("rows over all workers", part.n_total.to_string());
    push_start(&mut facts, &part);
    train::agree_job(&facts, collective)?;
    check_shard_ranges(part.row_offset, train.n_rows(), part.n_total, collective)?;
    let rows = (part.row_offset, part.n_total);
    let read = read_rows(part.params, train, evals, part.start.init, rows, collective)?;
    check_queries_whole(read.train.query_ends, collective)?;
    observer.on_rows_binned(read.train.rows.n_rows());
    let evals = read.eval_refs();
    let margins = read.train.base_margin.as_deref();
    binned(
        part,
        &read.train.rows,
        &evals,
        margins,
        collective,
        observer,
    )
}

/// Trains this rank's columns: the ranks agree on the cuts (or take the continued model's),
/// each bins its own rows and evaluation sets, then trains as [`binned`] does.
fn columns(
    part: Part<'_>,
    local: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
    collective: &mut dyn Collective,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    check_part(&part)?;
    let kinds: Vec<bool> = local
        .features
        .columns()
        .iter()
        .map(|c| c.is_categorical())
        .collect();
    let given = [
        local.weight.is_some(),
        local.queries.is_some(),
        local.base_margin.is_some(),
    ];
    let names = local.features.names();
    agree(&part, names, &kinds, given, local.n_rows(), collective)?;
    let mut pass = match part.start.init {
        Some(b) => b.bin_pass(),
        None => {
            let mut cut = crate::CutPass::for_shard(part.params, part.n_total, part.row_offset);
            cut.push(&local.features, local.weight.as_deref())?;
            cut.finish_with(collective)?
        }
    };
    pass.push(&local.features, local.label.clone(), local.weight.clone())
        .map_err(|e| match part.start.init {
            Some(_) => train::in_init_model("the training data", e),
            None => e,
        })?;
    let mut rows = pass.finish()?;
    rows.queries = local.queries.clone();
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
            let mut pass = rows.bin_like();
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
    train_agreed(
        part,
        &rows,
        &eval_refs,
        local.base_margin.as_deref(),
        collective,
        observer,
    )
}

/// Trains this rank's rows binned with cuts every rank agreed on (or the continued model's).
fn binned(
    part: Part<'_>,
    local: &BinnedDataset,
    evals: &[(&str, &BinnedDataset)],
    base_margin: Option<&[f32]>,
    collective: &mut dyn Collective,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    check_part(&part)?;
    let kinds: Vec<bool> = (0..local.cuts.n_features())
        .map(|j| local.cuts.feature(j).is_categorical())
        .collect();
    let given = [
        local.weight.is_some(),
        local.queries.is_some(),
        base_margin.is_some(),
    ];
    agree(
        &part,
        &local.names,
        &kinds,
        given,
        local.n_rows(),
        collective,
    )?;
    train_agreed(part, local, evals, base_margin, collective, observer)
}

/// Trains this rank's rows once the ranks agree on the job and on the cuts.
fn train_agreed(
    part: Part<'_>,
    local: &BinnedDataset,
    evals: &[(&str, &BinnedDataset)],
    base_margin: Option<&[f32]>,
    collective: &mut dyn Collective,
    observer: &mut dyn TrainObserver,
) -> Result<Booster> {
    let Part {
        params,
        run,
        start,
        row_offset,
        n_total,
    } = part;
    let init = start.init.map(Booster::model);
    let label = local
        .label
        .as_ref()
        .ok_or_else(|| Error::EmptyData("the training shard has no label".into()))?;
    // a continued model's classes give the class codes its trees learned
    let classes = match init.and_then(|m| m.classes.as_deref()) {
        Some(c) => Some(c.to_vec()),
        None => labels::global_classes(params.objective, label, collective)?,
    };
    let params = match (&classes, params.objective.is_multiclass()) {
        (Some(c), true) => params.with_num_class(c.len())?,
        _ => params.clone(),
    };
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
    if let Some(m) = base_margin {
        check_train_margins(m, local.n_rows(), &params)?;
    }
    let shard = BinnedShard {
        binned: local.binned.clone(),
        labels: encoded.values,
        weights: local.weight.clone(),
        base_margin: base_margin.map(<[f32]>::to_vec),
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
        resume: start.resume.cloned(),
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

/// Checks that the model to continue has the job's loss, before any work or any
/// collective call (the parameters and run options were checked where they entered).
fn check_part(part: &Part<'_>) -> Result<()> {
    if let Some(b) = part.start.init {
        check_init_objective(part.params, b.model())?;
    }
    Ok(())
}

/// The ranks agree that they run the same job (see [`job_facts`] and [`push_start`]) and
/// that their row ranges follow one another.
fn agree(
    part: &Part<'_>,
    names: &[String],
    categorical: &[bool],
    given: [bool; 3],
    n_rows: usize,
    collective: &mut dyn Collective,
) -> Result<()> {
    let mut facts = job_facts(
        part.params,
        part.run,
        names,
        categorical,
        given,
        part.n_total,
    );
    push_start(&mut facts, part);
    train::agree_job(&facts, collective)?;
    check_shard_ranges(part.row_offset, n_rows as u64, part.n_total, collective)
}

/// Adds how the job starts to what the ranks agree on: the model to continue (so that no
/// rank bins with its cuts while another agrees on cuts) and the checkpoint to resume (so
/// that none replays trees the others lack).
fn push_start(facts: &mut train::JobFacts, part: &Part<'_>) {
    if let Some(b) = part.start.init {
        facts.push_digest("the model to continue", b.model().to_json().as_bytes());
    }
    if let Some(c) = part.start.resume {
        facts.push_digest("the checkpoint to resume", c.to_json().as_bytes());
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
    push_features(&mut facts, names, categorical);
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
        if rows == 0 {
            // a rank without rows holds no range: its offset says nothing
            continue;
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
