//! `sapwood train`: the settings checked, the data file handed to the training job as rows
//! it reads in batches (two passes: a sample for the cuts, then the bins), the outputs
//! written.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use sapwood::{
    Booster, CheckedSettings, Collective, CollectiveKind, Params, RowSource, Rows, RunOptions,
    Settings, SingleWorker, TrainJob, PARAM_NAMES, RUN_OPTION_NAMES,
};
use sapwood_io::ReadOptions;
use serde_json::json;

use crate::checkpoints::Checkpoints;
use crate::cli::TrainArgs;
use crate::input::{Shard, Source};
use crate::progress::Progress;
use crate::rows::FileRows;
use crate::settings::{self, apply_config, apply_sets};
use crate::Interrupted;
use sapwood::collective::tcp::TcpConfig;

/// Parameters and run options from the config file, the flags and `--set`: each value
/// parsed once (by [`Settings::set`], whatever its spelling or source) and the whole
/// checked once, before any data is read. Continuing a model (`--init-model`), what is not
/// given is the model's (as XGBoost's `xgb_model`), except the rounds to add and early
/// stopping, which belong to a run.
fn settings_of(a: &TrainArgs, init: Option<&Booster>) -> Result<CheckedSettings> {
    let mut p = Settings::default();
    if let Some(b) = init {
        p.params = Params {
            num_rounds: p.params.num_rounds,
            early_stopping_rounds: None,
            ..b.model().params.clone()
        };
    }
    if let Some(c) = &a.config {
        apply_config(&mut p, c)?;
    }
    let flags: [(&str, &Option<String>); 11] = [
        ("objective", &a.objective),
        ("rounds", &a.rounds),
        ("learning_rate", &a.learning_rate),
        ("max_depth", &a.max_depth),
        ("max_leaves", &a.max_leaves),
        ("max_bin", &a.max_bin),
        ("early_stopping", &a.early_stopping),
        ("threads", &a.threads),
        ("device", &a.device),
        ("workers", &a.workers),
        ("collective", &a.collective),
    ];
    for (k, v) in &flags {
        if let Some(v) = v {
            p.set(k, v)
                .with_context(|| format!("--{}", k.replace('_', "-")))?;
        }
    }
    check_set_repeats(&flags, &a.set)?;
    apply_sets(&mut p, &a.set)?;
    let checked = p.checked()?;
    if let (Some(n), true) = (checked.params.early_stopping_rounds, a.valid.is_empty()) {
        // a fact of the command line, told before the data is read (training itself
        // refuses early stopping without an evaluation set too)
        return Err(settings::Error(format!(
            "early stopping ({n} rounds) watches a validation set: give one with --valid"
        ))
        .into());
    }
    Ok(checked)
}

/// The canonical name of a parameter or run option written as `key` (None when unknown:
/// setting it reports the error).
fn canonical(key: &str) -> Option<&'static str> {
    let k = key.trim().replace('-', "_");
    if k == "alpha" {
        // beside LightGBM's `quantile` and `huber` a bare `alpha` is not the L1 penalty,
        // so it may stand beside `reg_alpha` (the engine's settings read it)
        return Some("alpha (bare)");
    }
    PARAM_NAMES
        .iter()
        .chain(RUN_OPTION_NAMES)
        .find(|(n, aliases)| *n == k || aliases.contains(&k.as_str()))
        .map(|(n, _)| *n)
}

/// Refuses a parameter given both by a flag and by `--set` (in any spelling, e.g.
/// `--learning-rate` with `--set eta=...`), or twice by `--set`: which should win is a
/// guess. (A config file is meant to be overridden by both, so it is not compared.)
fn check_set_repeats(flags: &[(&str, &Option<String>)], sets: &[String]) -> Result<()> {
    let mut given: Vec<(&'static str, String)> = flags
        .iter()
        .filter(|(_, v)| v.is_some())
        .filter_map(|(k, _)| Some((canonical(k)?, format!("--{}", k.replace('_', "-")))))
        .collect();
    for s in sets {
        let Some((k, _)) = s.split_once('=') else {
            continue;
        };
        let Some(name) = canonical(k) else {
            continue;
        };
        if let Some((_, first)) = given.iter().find(|(n, _)| *n == name) {
            return Err(settings::Error(format!(
                "`{name}` is given twice ({first} and --set {}): give it once",
                k.trim()
            ))
            .into());
        }
        given.push((name, format!("--set {}", k.trim())));
    }
    Ok(())
}

/// Names the file and column of a label or weight error found once training started
/// (evaluation sets are named by their file stem).
fn name_file(e: sapwood::Error, a: &TrainArgs) -> anyhow::Error {
    let column = |e: &sapwood::Error| match e {
        sapwood::Error::InvalidLabel { .. } => Some(format!("label column `{}`", a.label)),
        sapwood::Error::EmptyData(m) if m.starts_with("the label") => {
            Some(format!("label column `{}`", a.label))
        }
        sapwood::Error::InvalidWeight { .. } => a
            .columns
            .weight
            .as_ref()
            .map(|w| format!("weight column `{w}`")),
        _ => None,
    };
    let at = |path: &Path, e: &sapwood::Error| match column(e) {
        Some(c) => format!("{}: {c}", path.display()),
        None => path.display().to_string(),
    };
    match e {
        sapwood::Error::InDataset { dataset, source } => {
            let file = a.valid.iter().find(|v| {
                v.file_stem()
                    .is_some_and(|s| dataset == format!("evaluation set `{}`", s.to_string_lossy()))
            });
            match file {
                Some(f) => {
                    let ctx = at(f, &source);
                    anyhow::Error::new(*source).context(ctx)
                }
                None => anyhow::Error::new(sapwood::Error::InDataset { dataset, source }),
            }
        }
        e @ (sapwood::Error::InvalidLabel { .. }
        | sapwood::Error::InvalidWeight { .. }
        | sapwood::Error::EmptyData(_)
        | sapwood::Error::SchemaMismatch(_)) => {
            let ctx = at(&a.data, &e);
            anyhow::Error::new(e).context(ctx)
        }
        sapwood::Error::QuerySpansRanks { first, second } => settings::Error(format!(
            "{}: group column `{}`: a query spans ranks {first} and {second}; each rank reads \
             whole row groups, so write the file with every query inside one row group, or \
             train on one process",
            a.data.display(),
            a.columns.group.as_deref().unwrap_or_default(),
        ))
        .into(),
        e => e.into(),
    }
}

/// The progress observer with the run's checkpoint files.
fn checkpoints_of<'a>(a: &TrainArgs, progress: &'a mut Progress) -> Checkpoints<'a, Progress> {
    Checkpoints {
        inner: progress,
        path: a.checkpoint.clone(),
        every: a.checkpoint_every,
    }
}

/// Checks before any data is read that the outputs can be written and overwrite no input.
fn check_outputs(a: &TrainArgs) -> Result<()> {
    let mut inputs: Vec<(&str, &Path)> = vec![("--data file", a.data.as_path())];
    inputs.extend(a.valid.iter().map(|v| ("--valid file", v.as_path())));
    if let Some(c) = &a.config {
        inputs.push(("--config file", c.as_path()));
    }
    if let Some(m) = &a.init_model {
        inputs.push(("--init-model file", m.as_path()));
    }
    super::predict::check_not_input(&a.model, &inputs, "--model")?;
    sapwood::check_writable(&a.model)?;
    if let Some(s) = &a.summary {
        inputs.push(("--model file", a.model.as_path()));
        super::predict::check_not_input(s, &inputs, "--summary")?;
        sapwood::check_writable(s)?;
    }
    if a.checkpoint_every == 0 {
        return Err(settings::Error("--checkpoint-every 0: use at least 1 round".into()).into());
    }
    if let Some(c) = &a.checkpoint {
        inputs.push(("--model file", a.model.as_path()));
        if let Some(s) = &a.summary {
            inputs.push(("--summary file", s.as_path()));
        }
        super::predict::check_not_input(c, &inputs, "--checkpoint")?;
        sapwood::check_writable(c)?;
        // a run killed while writing one leaves its temporary file
        sapwood::remove_stale_temporaries(c);
    }
    Ok(())
}

/// How the training file is read: the `--base-margin` columns are kept out of the
/// features (an evaluation file is read without them: see [`valid_options`]).
fn read_options(a: &TrainArgs) -> ReadOptions {
    ReadOptions {
        label: Some(a.label.clone()),
        weight: a.columns.weight.clone(),
        categorical: a.columns.categorical.clone(),
        drop: a.columns.drop.clone(),
        features: a.columns.features.clone(),
        keep: a
            .base_margin
            .iter()
            .chain(&a.columns.group)
            .cloned()
            .collect(),
    }
}

/// How a `--valid` file is read: its features are matched to the training features by
/// name, so base-margin columns in it are never features. Evaluation sets start at the
/// model's base margin: the engine does not take theirs yet.
fn valid_options(a: &TrainArgs) -> ReadOptions {
    ReadOptions {
        // the query groups of a validation file give its ranking metrics
        keep: a.columns.group.iter().cloned().collect(),
        ..read_options(a)
    }
}

/// Refuses a `--base-margin` column that has another role.
fn check_base_margin_columns(a: &TrainArgs) -> Result<()> {
    for (i, c) in a.base_margin.iter().enumerate() {
        let clash = if a.base_margin[..i].contains(c) {
            Some("is named twice in --base-margin")
        } else if *c == a.label {
            Some("is the label")
        } else if a.columns.weight.as_ref() == Some(c) {
            Some("is the weight column")
        } else if a.columns.features.contains(c) || a.columns.categorical.contains(c) {
            Some("is named as a feature; a base margin is never a feature")
        } else {
            None
        };
        if let Some(why) = clash {
            return Err(settings::Error(format!("--base-margin {c}: the column {why}")).into());
        }
    }
    Ok(())
}

/// Loads `--init-model`, naming the flag in errors.
fn init_model_of(a: &TrainArgs) -> Result<Option<Booster>> {
    a.init_model
        .as_ref()
        .map(|p| Booster::load(p).with_context(|| format!("--init-model {}", p.display())))
        .transpose()
}

fn check_column_roles(a: &TrainArgs, params: &Params) -> Result<()> {
    // a column plays one part: the label cannot also be the weights or the queries
    let mut roles: Vec<(&str, &str)> = vec![("--label", a.label.as_str())];
    roles.extend(a.columns.weight.as_deref().map(|w| ("--weight", w)));
    roles.extend(a.columns.group.as_deref().map(|g| ("--group", g)));
    roles.extend(a.base_margin.iter().map(|m| ("--base-margin", m.as_str())));
    for (i, (flag, column)) in roles.iter().enumerate() {
        if let Some((other, _)) = roles[..i].iter().find(|(_, c)| c == column) {
            return Err(settings::Error(format!(
                "{flag} {column}: `{column}` is already the {other} column; a column plays \
                 one part"
            ))
            .into());
        }
    }
    match (&a.columns.group, params.objective.is_ranking()) {
        (Some(g), false) => Err(settings::Error(format!(
            "--group {g}: query groups are for ranking objectives (rank:ndcg, rank:map, \
             rank:pairwise), not {}",
            params.objective
        ))
        .into()),
        _ => Ok(()),
    }
}

/// Writes the model (and summary) of a finished run; says so when Ctrl-C stopped it.
fn write_outputs(
    a: &TrainArgs,
    run: &RunOptions,
    booster: &mut Booster,
    rows: usize,
    timing: &Timing,
) -> Result<()> {
    let Timing {
        load_seconds,
        train_seconds,
        loading_peak_mib,
    } = *timing;
    let features = booster.model().feature_names.len();
    booster.set_label_name(&a.label);
    let types = crate::input::input_types(&a.data, booster.model())?;
    booster.set_input_types(types)?;
    sapwood::remove_stale_temporaries(&a.model);
    let reader = crate::fifos::await_reader(&a.model)?;
    booster
        .save(&a.model)
        .with_context(|| format!("writing the model to {}", a.model.display()))?;
    drop(reader);
    let comm = booster.comm_stats();
    if booster.interrupted() {
        eprintln!(
            "interrupted: saved the {} rounds trained so far to {}",
            booster.num_rounds(),
            a.model.display()
        );
    } else if !a.quiet {
        eprintln!(
            "trained {} rounds on {rows} rows in {train_seconds:.2} s (data {load_seconds:.2} s); model: {}",
            booster.num_rounds(),
            a.model.display()
        );
        if comm.allreduce_calls > 0 {
            eprintln!(
                "communication: {} bytes sent ({} before compression, {:.2}x), {} allreduce calls",
                comm.bytes_sent,
                comm.bytes_uncompressed,
                comm.bytes_uncompressed as f64 / comm.bytes_sent.max(1) as f64,
                comm.allreduce_calls
            );
        }
    }
    if let Some(path) = &a.summary {
        let record = booster.run_record();
        let history: Vec<serde_json::Value> = booster
            .history()
            .iter()
            .enumerate()
            .map(|(round, metrics)| {
                let mut m = serde_json::Map::new();
                m.insert("round".into(), json!(round));
                for r in metrics {
                    m.insert(format!("{}-{}", r.dataset, r.metric), json!(r.value));
                }
                serde_json::Value::Object(m)
            })
            .collect();
        let per_round: Vec<serde_json::Value> = booster
            .comm_history()
            .iter()
            .enumerate()
            .map(|(round, c)| json!({"round": round, "bytes_sent": c.bytes_sent, "bytes_before_compression": c.bytes_uncompressed, "allreduce_calls": c.allreduce_calls}))
            .collect();
        let summary = json!({
            "rounds": booster.num_rounds(),
            "best_round": booster.best_iteration(),
            "interrupted": booster.interrupted(),
            "rows": rows,
            "features": features,
            "history": history,
            "train_seconds": train_seconds,
            "data_loading_seconds": load_seconds,
            "data_loading_peak_memory_mib": loading_peak_mib,
            "peak_memory_mib": super::peak_memory_mib(),
            "device": run.device_spec(),
            "workers": run.workers,
            // what ran, not what was asked: settings that never change the model are
            // checked through this
            "ran": {
                "workers": record.workers(),
                "threads_per_worker": record.threads,
                "backends": record.backends,
                "bytes_sent_per_worker": record.comm.iter().map(|c| c.bytes_sent).collect::<Vec<_>>(),
                "communication_seconds_per_worker": record.comm.iter().map(|c| c.busy_nanos as f64 * 1e-9).collect::<Vec<_>>(),
                "comm_overlap": run.comm_overlap,
            },
            "communication": {
                "bytes_sent": comm.bytes_sent,
                "bytes_before_compression": comm.bytes_uncompressed,
                "blocks_by_encoding": {
                    "plain": comm.blocks.plain,
                    "packed": comm.blocks.packed,
                    "sparse": comm.blocks.sparse,
                    "bitmap": comm.blocks.bitmap,
                    "groups": comm.blocks.groups,
                },
                // of those, blocks a GPU backend encoded (the histograms left it encoded)
                "device_encoded_blocks": comm.device_encoded,
                "allreduce_calls": comm.allreduce_calls,
                // rank 0's wall time inside collective calls; with overlap it runs beside
                // the builds
                "seconds": comm.busy_nanos as f64 * 1e-9,
                "per_round": per_round,
            },
        });
        sapwood::remove_stale_temporaries(path);
        let text = serde_json::to_string_pretty(&summary)?;
        let _reader = crate::fifos::await_reader(path)?;
        sapwood::write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

/// Runs `sapwood train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let init = init_model_of(&a)?;
    let settings = settings_of(&a, init.as_ref())?;
    check_outputs(&a)?;
    check_base_margin_columns(&a)?;
    match settings.run.collective {
        CollectiveKind::InProcess => {
            check_no_tcp_flags(&a)?;
            if train_job(&a, settings, init.as_ref(), None)? {
                // saved: now end like an interrupted program does (exit code 130, or 143
                // for SIGTERM)
                return Err(Interrupted::training().into());
            }
            Ok(())
        }
        CollectiveKind::Mpi => {
            check_no_tcp_flags(&a)?;
            run_mpi(a, settings, init)
        }
        CollectiveKind::Tcp => run_tcp(a, settings, init),
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_a: TrainArgs, _settings: CheckedSettings, _init: Option<Booster>) -> Result<()> {
    Err(settings::Error(
        "--collective mpi: this build of sapwood has no MPI support (build with --features mpi)"
            .into(),
    )
    .into())
}

#[cfg(feature = "mpi")]
fn run_mpi(a: TrainArgs, settings: CheckedSettings, init: Option<Booster>) -> Result<()> {
    use sapwood::collective::mpi_transport::MpiTransport;
    use sapwood::collective::{RingCollective, Transport};
    let transport = MpiTransport::init()?.with_timeout(settings.run.comm_timeout);
    let rank = transport.rank();
    let mut coll = RingCollective::new(transport, settings.run.comm_codec)
        .with_overlap(settings.run.comm_overlap);
    match train_job(&a, settings, init.as_ref(), Some(&mut coll)) {
        Ok(interrupted) => {
            if interrupted {
                return Err(Interrupted::training().into());
            }
            Ok(())
        }
        Err(e) => {
            // the other ranks may wait in a collective: take the whole job down
            eprintln!("error: rank {rank}: {e:#}");
            coll.transport_mut().abort(2);
        }
    }
}

/// The rank, world, coordinator and token of `--collective tcp`, and its listening options.
fn tcp_config(a: &TrainArgs, timeout: std::time::Duration) -> Result<TcpConfig> {
    let need = |v: Option<String>, flag: &str, what: &str| {
        v.ok_or_else(|| settings::Error(format!("--collective tcp needs {flag} ({what})")))
    };
    let rank = need(
        a.rank.map(|r| r.to_string()),
        "--rank",
        "this process's rank, 0 to world - 1",
    )?;
    let world = need(
        a.world.map(|w| w.to_string()),
        "--world",
        "the number of processes",
    )?;
    let coordinator = need(
        a.coordinator.clone(),
        "--coordinator",
        "HOST:PORT where rank 0 listens",
    )?;
    let token = need(
        a.token
            .clone()
            .or_else(|| std::env::var("SAPWOOD_TOKEN").ok()),
        "--token or the environment variable SAPWOOD_TOKEN",
        "the same random string on every rank",
    )?;
    let ports = match &a.ports {
        None => None,
        Some(p) => {
            let parsed = p.split_once('-').and_then(|(lo, hi)| {
                Some((
                    lo.trim().parse::<u16>().ok()?,
                    hi.trim().parse::<u16>().ok()?,
                ))
            });
            match parsed {
                Some((lo, hi)) if lo <= hi => Some((lo, hi)),
                _ => {
                    return Err(settings::Error(format!(
                        "--ports {p}: give a range of ports LO-HI, e.g. 40000-40100"
                    ))
                    .into())
                }
            }
        }
    };
    Ok(TcpConfig {
        rank: rank.parse().expect("a number"),
        world: world.parse().expect("a number"),
        coordinator,
        token,
        bind: a.bind,
        ports,
        timeout,
    })
}

/// Refuses the `--collective tcp` flags on another collective, where they would be ignored.
fn check_no_tcp_flags(a: &TrainArgs) -> Result<()> {
    let given = [
        ("--rank", a.rank.is_some()),
        ("--world", a.world.is_some()),
        ("--coordinator", a.coordinator.is_some()),
        ("--token", a.token.is_some()),
        ("--bind", a.bind.is_some()),
        ("--ports", a.ports.is_some()),
    ];
    match given.iter().find(|(_, g)| *g) {
        Some((flag, _)) => Err(settings::Error(format!(
            "{flag} is for --collective tcp (this run's collective is another)"
        ))
        .into()),
        None => Ok(()),
    }
}

fn run_tcp(a: TrainArgs, settings: CheckedSettings, init: Option<Booster>) -> Result<()> {
    use sapwood::collective::tcp::TcpTransport;
    use sapwood::collective::RingCollective;
    let cfg = tcp_config(&a, settings.run.comm_timeout)?;
    let rank = cfg.rank;
    let transport = TcpTransport::connect(&cfg)?;
    let mut coll = RingCollective::new(transport, settings.run.comm_codec)
        .with_overlap(settings.run.comm_overlap);
    // on an error the connections close as `coll` drops, so every peer fails at once
    let interrupted = train_job(&a, settings, init.as_ref(), Some(&mut coll))
        .with_context(|| format!("rank {rank}"))?;
    if interrupted {
        return Err(anyhow::Error::new(Interrupted::training()).context(format!("rank {rank}")));
    }
    Ok(())
}

/// Trains on this process's rows and, on rank 0, writes the outputs; returns whether
/// training was interrupted. Alone (`ranks` is `None`) the process reads the whole file and
/// trains `--workers` in-process workers; as one rank of a distributed job (MPI or TCP) it
/// reads only its own rows, once the ranks agree that they run the same job. The job reads
/// and bins the rows itself ([`Rows::Stream`]).
fn train_job(
    a: &TrainArgs,
    settings: CheckedSettings,
    init: Option<&Booster>,
    ranks: Option<&mut dyn Collective>,
) -> Result<bool> {
    let CheckedSettings { params, run } = settings;
    check_column_roles(a, &params)?;
    let distributed = ranks.is_some();
    let mut alone = SingleWorker;
    let coll: &mut dyn Collective = match ranks {
        Some(c) => c,
        None => &mut alone,
    };
    let (rank, size) = (coll.rank(), coll.world_size());
    let load_start = Instant::now();
    let source = Source::open(&a.data, &read_options(a))?;
    let shard = if distributed {
        source.shard(rank, size)
    } else {
        Shard::whole(source.num_rows())
    };
    let group = a.columns.group.as_deref();
    let (first, n_total) = (shard.rows.start, source.num_rows());
    let mut train = FileRows::new(
        &a.data,
        &source,
        read_options(a),
        shard.clone(),
        &a.base_margin,
        group,
    )?;
    if distributed {
        train = train.with_facts(file_flags(a))?;
    }
    let valid_files = if rank == 0 {
        open_valid(a)?
    } else {
        Vec::new()
    };
    let valid = valid_files
        .iter()
        .map(|(_, path, src)| {
            let shard = Shard::whole(src.num_rows());
            FileRows::new(path, src, valid_options(a), shard, &[], group)
        })
        .collect::<Result<Vec<_>>>()?;
    let evals: Vec<(&str, &dyn RowSource)> = valid_files
        .iter()
        .zip(&valid)
        .map(|((name, _, _), rows)| (name.as_str(), rows as &dyn RowSource))
        .collect();
    let mut progress = Progress::new(params.num_rounds, a.quiet || rank != 0);
    if distributed && !a.quiet {
        progress = progress.with_rows_note(move |n| {
            format!(
                "rank {rank} of {size}: read {n} rows ({}..{} of {n_total}, row groups {:?})\n",
                shard.rows.start,
                shard.rows.end,
                shard.row_groups.as_deref().unwrap_or_default(),
            )
        });
    }
    let resume = crate::checkpoints::resume_of(a.resume.as_deref())?;
    let rows = Rows::Stream {
        train: &train,
        evals: &evals,
    };
    let mut job = TrainJob::new(&params, &run, rows)
        .continuing(init)
        .resuming(resume.as_ref());
    if distributed {
        job = job.on_rank(coll, first, n_total);
    }
    let mut observer = checkpoints_of(a, &mut progress);
    let trained = Booster::fit(job, &mut observer);
    progress.finish();
    let mut booster = trained.map_err(|e| {
        let failed = std::iter::once(&train).chain(&valid);
        match failed.filter_map(FileRows::take_failure).next() {
            Some(reading) => reading,
            None => name_file(e, a),
        }
    })?;
    if rank == 0 {
        let loaded = progress.loaded();
        let load_end = loaded.map_or(load_start, |l| l.at);
        // a distributed job's workers are its ranks
        let workers = if distributed { size } else { run.workers };
        let run = RunOptions {
            workers,
            ..run.into_inner()
        };
        let timing = Timing {
            load_seconds: (load_end - load_start).as_secs_f64(),
            train_seconds: load_end.elapsed().as_secs_f64(),
            loading_peak_mib: loaded.and_then(|l| l.peak_mib),
        };
        write_outputs(a, &run, &mut booster, n_total as usize, &timing)?;
    }
    Ok(booster.interrupted())
}

/// The flags that say how the training file is read, which every rank must share.
fn file_flags(a: &TrainArgs) -> Vec<(String, String)> {
    let list = |v: &[String]| v.join(", ");
    [
        ("--label", a.label.clone()),
        ("--weight", a.columns.weight.clone().unwrap_or_default()),
        ("--group", a.columns.group.clone().unwrap_or_default()),
        ("--base-margin", list(&a.base_margin)),
        ("--features", list(&a.columns.features)),
        ("--drop", list(&a.columns.drop)),
        ("--categorical", list(&a.columns.categorical)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The `--valid` files, opened, with their names (their stems).
fn open_valid(a: &TrainArgs) -> Result<Vec<(String, &Path, Source)>> {
    a.valid
        .iter()
        .map(|v| {
            let name = v
                .file_stem()
                .map_or("valid".into(), |s| s.to_string_lossy().into_owned());
            Ok((name, v.as_path(), Source::open(v, &valid_options(a))?))
        })
        .collect()
}

/// How long reading and training took, and the memory reading needed.
#[derive(Clone, Copy)]
struct Timing {
    load_seconds: f64,
    train_seconds: f64,
    loading_peak_mib: Option<f64>,
}
