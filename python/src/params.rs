//! Python keyword parameters to the engine's `Settings` (model parameters and run options).

use pyo3::prelude::*;
use sapwood::{CheckedSettings, Settings, PARAM_NAMES, RUN_OPTION_NAMES};

use crate::errors::{guarded, OrRaise};

/// Parses `(name, value)` pairs already written as text by the Python layer (names may be
/// XGBoost or LightGBM aliases) into settings, checked once: the engine's own parser and
/// checks, so messages match the command line.
pub fn params_from(pairs: &[(String, String)]) -> PyResult<CheckedSettings> {
    let mut settings = Settings::default();
    for (name, value) in pairs {
        settings.set(name, value).or_raise()?;
    }
    settings.checked().or_raise()
}

/// Checks parameters without training: every name is known and every value in range.
#[pyfunction]
pub fn check_params(pairs: Vec<(String, String)>) -> PyResult<()> {
    guarded(|| params_from(&pairs).map(drop))
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
