//! `sapwood export`: a model in XGBoost JSON, LightGBM text or ONNX.

use anyhow::{Context, Result};
use sapwood::{Booster, ExportFormat};

use crate::cli::ExportArgs;
use crate::commands::check_rounds;
use crate::commands::predict::check_not_input;

/// Reads the model, translates it and writes it atomically; the format and the output are
/// checked first, so an unknown format or an output that is the model fails before reading.
pub fn run(a: ExportArgs) -> Result<()> {
    let format: ExportFormat = a.format.parse()?;
    check_not_input(&a.out, &[("--model file", &a.model)], "--out")?;
    let booster = Booster::load(&a.model)?;
    let model = booster.model();
    let rounds = check_rounds(a.rounds, model)?.unwrap_or_else(|| model.default_rounds());
    let reader = crate::fifos::await_reader(&a.out)?;
    booster
        .export_rounds(format, rounds, &a.out)
        .with_context(|| {
            format!(
                "{} was not exported as {} to {}",
                a.model.display(),
                a.format.to_ascii_lowercase(),
                a.out.display()
            )
        })?;
    drop(reader);
    let total = model.num_rounds();
    let written = rounds;
    let which = match (a.rounds, model.best_iteration) {
        (None, Some(best)) if written < total => format!(
            "rounds 1-{written} of {total}: through early stopping's best round {best}, as \
             `sapwood predict` uses; --rounds {total} exports all"
        ),
        _ => format!("{written} of {total} rounds"),
    };
    eprintln!(
        "exported {} ({which}) to {} as {}",
        a.model.display(),
        a.out.display(),
        a.format.to_ascii_lowercase()
    );
    Ok(())
}
