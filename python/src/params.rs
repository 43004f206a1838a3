//! Python keyword parameters to the engine's `Settings` (model parameters and run options).

use pyo3::prelude::*;
use sapwood::{Settings, PARAM_NAMES, RUN_OPTION_NAMES};

use crate::errors::{guarded, OrRaise};

/// Builds `Settings` from `(name, value)` pairs already written as text by the Python
/// layer; names may be XGBoost or LightGBM aliases. Values are checked by the engine's
/// own parser so messages match the command line.
pub fn params_from(pairs: &[(String, String)]) -> PyResult<Settings> {
    let mut settings = Settings::default();
    for (name, value) in pairs {
        settings.set(name, value).or_raise()?;
    }
    Ok(settings)
}

/// Checks parameters without training: every name is known and every value in range.
#[pyfunction]
pub fn check_params(pairs: Vec<(String, String)>) -> PyResult<()> {
    guarded(|| params_from(&pairs)?.validate().or_raise())
}

/// Every parameter and run option name with its XGBoost/LightGBM aliases.
#[pyfunction]
pub fn parameter_names() -> Vec<(&'static str, Vec<&'static str>)> {
    PARAM_NAMES
        .iter()
        .chain(RUN_OPTION_NAMES)
        .map(|(name, aliases)| (*name, aliases.to_vec()))
        .collect()
}
