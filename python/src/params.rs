//! Python keyword parameters to the engine's `Params`.

use pyo3::prelude::*;
use sapwood::{Params, PARAM_NAMES};

use crate::errors::{guarded, OrRaise};

/// Builds `Params` from `(name, value)` pairs already written as text by the Python
/// layer; names may be XGBoost or LightGBM aliases. Values are checked by the engine's
/// own parser so messages match the command line.
pub fn params_from(pairs: &[(String, String)]) -> PyResult<Params> {
    let mut params = Params::default();
    for (name, value) in pairs {
        params.set(name, value).or_raise()?;
    }
    Ok(params)
}

/// Checks parameters without training: every name is known and every value in range.
#[pyfunction]
pub fn check_params(pairs: Vec<(String, String)>) -> PyResult<()> {
    guarded(|| params_from(&pairs)?.validate().or_raise())
}

/// Every parameter name with its XGBoost/LightGBM aliases.
#[pyfunction]
pub fn parameter_names() -> Vec<(&'static str, Vec<&'static str>)> {
    PARAM_NAMES
        .iter()
        .map(|(name, aliases)| (*name, aliases.to_vec()))
        .collect()
}
