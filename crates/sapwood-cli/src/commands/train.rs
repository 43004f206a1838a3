//! `sapwood train`: two passes over the data (sample for cuts, then bin), then boosting.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use sapwood::{
    BinnedDataset, Booster, Collective, CollectiveKind, CutPass, Label, Params, RunOptions,
    Settings, SingleWorker,
};
use sapwood_io::ReadOptions;
use serde_json::json;

use crate::cli::TrainArgs;
use crate::input::{label_of, Shard, Source};
use crate::progress::Progress;
use crate::settings::{self, apply_config, apply_sets};

/// Parameters and run options from the config file, the flags and `--set`, checked before
/// any data is read.
fn settings_of(a: &TrainArgs) -> Result<Settings> {
    let mut p = Settings::default();
    if let Some(c) = &a.config {
        apply_config(&mut p, c)?;
    }
    let flags: [(&str, Option<String>); 11] = [
        ("objective", a.objective.clone()),
        ("num_rounds", a.rounds.map(|v| v.to_string())),
        ("learning_rate", a.learning_rate.map(|v| v.to_string())),
        ("max_depth", a.max_depth.map(|v| v.to_string())),
        ("max_leaves", a.max_leaves.map(|v| v.to_string())),
        ("max_bin", a.max_bin.map(|v| v.to_string())),
        (
            "early_stopping_rounds",
            a.early_stopping.map(|v| v.to_string()),
        ),
        ("threads", a.threads.map(|v| v.to_string())),
        ("device", a.device.clone()),
        ("workers", a.workers.map(|v| v.to_string())),
        ("collective", a.collective.clone()),
    ];
    for (k, v) in flags {
        if let Some(v) = v {
            p.set(k, &v)?;
        }
    }
    apply_sets(&mut p, &a.set)?;
    p.validate()?;
    Ok(p)
}

/// Reads and bins one worker's share of a file with the training cuts (or, for the
/// training set, computes them with the other workers).
fn bin_source(
    source: &Source,
    path: &Path,
    opts: &ReadOptions,
    params: &Params,
    like: Option<&BinnedDataset>,
    shard: &Shard,
    collective: &mut dyn Collective,
) -> Result<BinnedDataset> {
    let n = source.num_rows();
    if n == 0 {
        return Err(
            sapwood::Error::EmptyData(format!("{}: the file has no rows", path.display())).into(),
        );
    }
    let mut bin = match like {
        Some(d) => d.bin_like(),
        None => {
            let mut cut = CutPass::for_shard(params, n, shard.rows.start);
            source.for_each_in(opts, shard, |t| {
                Ok(cut.push(&t.features, t.weight.as_deref())?)
            })?;
            cut.finish_with(collective)?
        }
    };
    let label_name = opts.label.clone().unwrap_or_default();
    let mut row = shard.rows.start as usize;
    let mut labelled = 0i64;
    source.for_each_in(opts, shard, |t| {
        let n = t.n_rows();
        let col = t
            .label
            .expect("the label column is part of the read options");
        let label = label_of(col, row, &label_name)?;
        labelled += match &label {
            Label::Values(v) => v.iter().filter(|x| !x.is_nan()).count(),
            Label::Classes(_) => n,
        } as i64;
        bin.push(&t.features, Some(label), t.weight)?;
        row += n;
        Ok(())
    })?;
    let mut total = [labelled];
    if like.is_none() {
        collective.allreduce_sum(&mut total, n)?;
    }
    if total[0] == 0 {
        return Err(sapwood::Error::EmptyData(format!(
            "{}: label column `{label_name}` has no values (all null)",
            path.display()
        ))
        .into());
    }
    Ok(bin.finish()?)
}

fn bin_file(
    path: &Path,
    opts: &ReadOptions,
    params: &Params,
    like: Option<&BinnedDataset>,
) -> Result<BinnedDataset> {
    let source = Source::open(path, opts)?;
    let shard = Shard::whole(source.num_rows());
    bin_source(&source, path, opts, params, like, &shard, &mut SingleWorker)
}

fn read_options(a: &TrainArgs) -> ReadOptions {
    ReadOptions {
        label: Some(a.label.clone()),
        weight: a.columns.weight.clone(),
        categorical: a.columns.categorical.clone(),
        drop: a.columns.drop.clone(),
        features: a.columns.features.clone(),
        keep: Vec::new(),
    }
}

fn check_group(a: &TrainArgs) -> Result<()> {
    match &a.columns.group {
        Some(g) => Err(settings::Error(format!(
            "--group {g}: ranking objectives are not available yet"
        ))
        .into()),
        None => Ok(()),
    }
}

/// Writes the model (and summary) of a finished run; says so when Ctrl-C stopped it.
fn write_outputs(
    a: &TrainArgs,
    run: &RunOptions,
    booster: &mut Booster,
    rows: usize,
    features: usize,
    load_seconds: f64,
    train_seconds: f64,
) -> Result<()> {
    booster.set_label_name(&a.label);
    booster
        .save(&a.model)
        .with_context(|| format!("writing the model to {}", a.model.display()))?;
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
            "data_loading_peak_memory_mib": loading_peak_mib(),
            "peak_memory_mib": super::peak_memory_mib(),
            "device": run.device.to_string(),
            "workers": run.workers,
            "communication": {
                "bytes_sent": comm.bytes_sent,
                "bytes_before_compression": comm.bytes_uncompressed,
                "allreduce_calls": comm.allreduce_calls,
                "per_round": per_round,
            },
        });
        let text = serde_json::to_string_pretty(&summary)?;
        sapwood::write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

/// Peak resident memory once the data is read and binned, before training allocates.
fn loading_peak_mib() -> Option<f64> {
    LOADING_PEAK.get().copied().flatten()
}

static LOADING_PEAK: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();

fn note_loading_peak() {
    let _ = LOADING_PEAK.set(super::peak_memory_mib());
}

/// Runs `sapwood train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let settings = settings_of(&a)?;
    match settings.run.collective {
        CollectiveKind::InProcess => run_local(a, settings),
        CollectiveKind::Mpi => run_mpi(a, settings),
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_a: TrainArgs, _settings: Settings) -> Result<()> {
    Err(settings::Error(
        "--collective mpi: this build of sapwood has no MPI support (build with --features mpi)"
            .into(),
    )
    .into())
}

#[cfg(feature = "mpi")]
fn run_mpi(a: TrainArgs, settings: Settings) -> Result<()> {
    use sapwood::collective::mpi_transport::MpiTransport;
    use sapwood::collective::{RingCollective, Transport};
    let Settings { params, run } = settings;
    check_group(&a)?;
    let transport = MpiTransport::init()?;
    let (rank, size) = (transport.rank(), transport.size());
    let mut coll = RingCollective::new(transport, run.comm_codec);
    let result = (|| -> Result<()> {
        let load_start = Instant::now();
        let opts = read_options(&a);
        let source = Source::open(&a.data, &opts)?;
        let shard = source.shard(rank, size);
        let local = bin_source(&source, &a.data, &opts, &params, None, &shard, &mut coll)?;
        let classes = sapwood::global_classes(
            params.objective,
            local.label().expect("labels were read"),
            &mut coll,
        )?;
        let mut valid = Vec::new();
        if rank == 0 {
            for v in &a.valid {
                let name = v
                    .file_stem()
                    .map_or("valid".into(), |s| s.to_string_lossy().into_owned());
                valid.push((name, bin_file(v, &opts, &params, Some(&local))?));
            }
        }
        let load_seconds = load_start.elapsed().as_secs_f64();
        note_loading_peak();
        let evals: Vec<(&str, &BinnedDataset)> =
            valid.iter().map(|(n, d)| (n.as_str(), d)).collect();
        let mut progress = Progress::new(params.num_rounds, a.quiet || rank != 0);
        let start = Instant::now();
        let rank_shard = sapwood::RankShard {
            local: &local,
            row_offset: shard.rows.start,
            n_total: source.num_rows(),
            classes,
        };
        let trained =
            Booster::train_shard(&params, &run, rank_shard, &evals, &mut coll, &mut progress);
        progress.finish();
        let mut booster = trained?;
        if rank == 0 {
            let run = RunOptions {
                workers: size,
                ..run
            };
            write_outputs(
                &a,
                &run,
                &mut booster,
                source.num_rows() as usize,
                local.names().len(),
                load_seconds,
                start.elapsed().as_secs_f64(),
            )?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        // the other ranks may wait in a collective: take the whole job down
        eprintln!("error: rank {rank}: {e:#}");
        coll.transport_mut().abort(2);
    }
    Ok(())
}

fn run_local(a: TrainArgs, settings: Settings) -> Result<()> {
    let Settings { params, run } = settings;
    check_group(&a)?;
    let load_start = Instant::now();
    let opts = read_options(&a);
    let train = bin_file(&a.data, &opts, &params, None)?;
    let mut valid = Vec::new();
    for v in &a.valid {
        let name = v
            .file_stem()
            .map_or("valid".into(), |s| s.to_string_lossy().into_owned());
        valid.push((name, bin_file(v, &opts, &params, Some(&train))?));
    }
    let load_seconds = load_start.elapsed().as_secs_f64();
    note_loading_peak();
    let mut progress = Progress::new(params.num_rounds, a.quiet);
    let train_start = Instant::now();
    let evals: Vec<(&str, &BinnedDataset)> = valid.iter().map(|(n, d)| (n.as_str(), d)).collect();
    let result = Booster::train_binned(&params, &run, &train, &evals, &mut progress);
    progress.finish();
    let mut booster = result?;
    let train_seconds = train_start.elapsed().as_secs_f64();
    write_outputs(
        &a,
        &run,
        &mut booster,
        train.n_rows(),
        train.names().len(),
        load_seconds,
        train_seconds,
    )
}
