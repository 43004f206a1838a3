//! One module per subcommand.

mod eval;
mod export;
mod inspect;
mod params;
mod predict;
mod train;

use std::path::Path;

use anyhow::Result;
use sapwood::FeatureCuts;
use sapwood::Model;
use sapwood::{Column, FeatureMatrix};

use crate::cli::{Cli, Command};
use crate::settings;

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(a) => train::run(*a),
        Command::Predict(a) => predict::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Export(a) => export::run(a),
        Command::Params(a) => params::run(a),
    }
}

/// The model's categorical features, which must be read as categorical whatever their type.
pub(crate) fn categorical_features(model: &Model) -> Vec<String> {
    model
        .feature_names
        .iter()
        .zip(model.cuts.features())
        .filter(|(_, c)| matches!(c, FeatureCuts::Categorical { .. }))
        .map(|(n, _)| n.clone())
        .collect()
}

/// Peak resident memory of this process in MiB (Linux), if known.
pub(crate) fn peak_memory_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// `--rounds` of predict and eval: at least one (unset means all, or the best iteration).
pub(crate) fn check_rounds(rounds: Option<usize>, model: &Model) -> Result<Option<usize>> {
    match rounds {
        Some(0) => Err(settings::Error(
            "--rounds 0: use at least 1 round, or leave --rounds out for the model's default"
                .into(),
        )
        .into()),
        Some(r) if r > model.num_rounds() => Err(settings::Error(format!(
            "--rounds {r}: the model has {} rounds",
            model.num_rounds()
        ))
        .into()),
        r => Ok(Some(r.unwrap_or_else(|| model.default_rounds()))),
    }
}

fn is_number(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok()
}

/// Refuses a categorical feature that now holds numbers where training saw text levels
/// (e.g. an integer id column under a string column's name): every value would be an
/// unseen level, predicted as missing without a word.
pub(crate) fn check_categorical_types(
    model: &Model,
    data: &FeatureMatrix<'_>,
    path: &Path,
) -> Result<()> {
    for (name, cuts) in model.feature_names.iter().zip(model.cuts.features()) {
        let FeatureCuts::Categorical { levels: seen, .. } = cuts else {
            continue;
        };
        let Some(j) = data.names().iter().position(|n| n == name) else {
            continue;
        };
        let Column::Categorical { levels, .. } = data.column(j) else {
            continue;
        };
        let numeric_now = !levels.is_empty() && levels.iter().all(|l| is_number(l));
        let text_before = seen.iter().any(|l| !is_number(l));
        if numeric_now && text_before && !levels.iter().any(|l| seen.contains(l)) {
            let show = |v: &[String]| {
                let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                if v.len() > 5 {
                    s.push_str(", ...");
                }
                s
            };
            return Err(settings::Error(format!(
                "{}: column `{name}` holds numbers ({}) but the model was trained on text \
                 levels ({}) for it: is it the right column?",
                path.display(),
                show(levels),
                show(seen)
            ))
            .into());
        }
    }
    Ok(())
}
