//! `sapwood train`: two passes over the data (sample for cuts, then bin), then boosting.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use sapwood::{BinnedDataset, Booster, CutPass, Label, Params};
use sapwood_io::ReadOptions;
use serde_json::json;

use crate::cli::TrainArgs;
use crate::input::{label_of, Source};
use crate::progress::Progress;
use crate::settings::{self, apply_config, apply_sets};

fn params_of(a: &TrainArgs) -> Result<Params> {
    let mut p = Params::default();
    if let Some(c) = &a.config {
        apply_config(&mut p, c)?;
    }
    let flags: [(&str, Option<String>); 10] = [
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

/// Reads and bins one file with the training cuts (or, for the training set, computes them).
fn bin_file(
    path: &Path,
    opts: &ReadOptions,
    params: &Params,
    like: Option<&BinnedDataset>,
) -> Result<BinnedDataset> {
    let source = Source::open(path, opts)?;
    let n = source.num_rows();
    if n == 0 {
        return Err(
            sapwood::Error::EmptyData(format!("{}: the file has no rows", path.display())).into(),
        );
    }
    let mut bin = match like {
        Some(d) => d.bin_like(),
        None => {
            let mut cut = CutPass::new(params, n);
            source.for_each(opts, |t| Ok(cut.push(&t.features, t.weight.as_deref())?))?;
            cut.finish()?
        }
    };
    let label_name = opts.label.clone().unwrap_or_default();
    let mut row = 0usize;
    let mut labelled = 0usize;
    source.for_each(opts, |t| {
        let n = t.n_rows();
        let col = t
            .label
            .expect("the label column is part of the read options");
        let label = label_of(col, row, &label_name)?;
        if let Label::Values(v) = &label {
            labelled += v.iter().filter(|x| !x.is_nan()).count();
        } else {
            labelled += n;
        }
        bin.push(&t.features, Some(label), t.weight)?;
        row += n;
        Ok(())
    })?;
    if labelled == 0 {
        return Err(sapwood::Error::EmptyData(format!(
            "{}: label column `{label_name}` has no values (all null)",
            path.display()
        ))
        .into());
    }
    Ok(bin.finish()?)
}

/// Runs `sapwood train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let params = params_of(&a)?;
    if let Some(g) = &a.columns.group {
        return Err(settings::Error(format!(
            "--group {g}: ranking objectives are not available yet"
        ))
        .into());
    }
    let load_start = Instant::now();
    let opts = ReadOptions {
        label: Some(a.label.clone()),
        weight: a.columns.weight.clone(),
        categorical: a.columns.categorical.clone(),
        drop: a.columns.drop.clone(),
        features: a.columns.features.clone(),
        keep: Vec::new(),
    };
    let train = bin_file(&a.data, &opts, &params, None)?;
    let mut valid = Vec::new();
    for v in &a.valid {
        let name = v
            .file_stem()
            .map_or("valid".into(), |s| s.to_string_lossy().into_owned());
        valid.push((name, bin_file(v, &opts, &params, Some(&train))?));
    }
    let load_seconds = load_start.elapsed().as_secs_f64();

    let mut progress = Progress::new(params.num_rounds, a.quiet);
    let train_start = Instant::now();
    let evals: Vec<(&str, &BinnedDataset)> = valid.iter().map(|(n, d)| (n.as_str(), d)).collect();
    let result = Booster::train_binned(&params, &train, &evals, &mut progress);
    progress.finish();
    let mut booster = result?;
    let train_seconds = train_start.elapsed().as_secs_f64();
    booster.set_label_name(&a.label);
    booster
        .save(&a.model)
        .with_context(|| format!("writing the model to {}", a.model.display()))?;
    if booster.interrupted() {
        eprintln!(
            "interrupted: saved the {} rounds trained so far to {}",
            booster.num_rounds(),
            a.model.display()
        );
    } else if !a.quiet {
        eprintln!(
            "trained {} rounds on {} rows in {train_seconds:.2} s (data {load_seconds:.2} s); model: {}",
            booster.num_rounds(),
            train.n_rows(),
            a.model.display()
        );
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
        let comm = booster.comm_stats();
        let summary = json!({
            "rounds": booster.num_rounds(),
            "best_round": booster.best_iteration(),
            "interrupted": booster.interrupted(),
            "rows": train.n_rows(),
            "features": train.names().len(),
            "history": history,
            "train_seconds": train_seconds,
            "data_loading_seconds": load_seconds,
            "peak_memory_mib": super::peak_memory_mib(),
            "device": params.device.to_string(),
            "workers": params.workers,
            "communication": {
                "bytes_sent": comm.bytes_sent,
                "bytes_before_compression": comm.bytes_uncompressed,
                "allreduce_calls": comm.allreduce_calls,
            },
        });
        let text = serde_json::to_string_pretty(&summary)?;
        sapwood_core::files::write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}
