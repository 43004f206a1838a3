//! The native module of the Python package, `sapwood._sapwood` (private: users import
//! `sapwood`). It wraps the `sapwood` crate: datasets that borrow numpy memory, training
//! with the GIL released, prediction, model files, and the exception hierarchy.

mod arrow;
mod batches;
mod booster;
mod data;
mod distributed;
mod errors;
mod params;
mod pool;
mod training;

use pyo3::prelude::*;

/// The `_sapwood` module.
#[pymodule]
fn _sapwood(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<data::NativeData>()?;
    m.add_class::<batches::NativeBatches>()?;
    m.add_class::<booster::NativeBooster>()?;
    m.add_function(wrap_pyfunction!(training::train, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::train_tcp, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::listen, m)?)?;
    m.add_class::<distributed::NativeListener>()?;
    m.add_function(wrap_pyfunction!(params::check_params, m)?)?;
    m.add_function(wrap_pyfunction!(params::parameter_names, m)?)?;
    errors::register(m)?;
    Ok(())
}
