//! `sapwood export`: a model in XGBoost JSON, LightGBM text or ONNX.

use anyhow::Result;
use sapwood::{Booster, ExportFormat};

use crate::cli::ExportArgs;

/// Reads the model, translates it and writes it atomically; the format is checked first, so
/// an unknown one fails before the model is read.
pub fn run(a: ExportArgs) -> Result<()> {
    let format: ExportFormat = a.format.parse()?;
    let booster = Booster::load(&a.model)?;
    booster.export(format, &a.out)?;
    eprintln!(
        "exported {} ({} trees) to {} as {}",
        a.model.display(),
        booster.num_trees(),
        a.out.display(),
        a.format.to_ascii_lowercase()
    );
    Ok(())
}
