//! One module per subcommand.

mod eval;
mod inspect;
mod predict;
mod train;

use anyhow::Result;
use sapwood::FeatureCuts;
use sapwood::Model;

use crate::cli::{Cli, Command};

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(a) => train::run(*a),
        Command::Predict(a) => predict::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Inspect(a) => inspect::run(a),
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
