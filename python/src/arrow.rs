//! Arrow data from Python without pyarrow on the Rust side: the object's
//! `__arrow_c_stream__` PyCapsule (pyarrow, polars, pandas, ...) is imported with
//! arrow-array's C stream interface and converted by `sapwood_io::table_from_arrow`.
// The C stream interface is an FFI boundary; the one unsafe call is documented below.
#![allow(unsafe_code)]

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::RecordBatchReader;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use sapwood::FeatureMatrix;
use sapwood_io::{table_from_arrow, ReadOptions};

use crate::errors::{NativeError, OrRaise};

fn input(message: impl Into<String>) -> PyErr {
    NativeError::Input(message.into()).into()
}

/// Reads every batch of `source`'s Arrow stream and converts the columns to features;
/// columns named in `categorical` become categories even when numeric.
pub fn import_table(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    categorical: Vec<String>,
) -> PyResult<FeatureMatrix<'static>> {
    let capsule = source
        .call_method0("__arrow_c_stream__")
        .map_err(|e| input(format!("the data does not export an Arrow stream: {e}")))?;
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| input("__arrow_c_stream__ did not return a PyCapsule"))?;
    let pointer = capsule
        .pointer_checked(Some(c"arrow_array_stream"))
        .map_err(|_| input("the Arrow capsule is not named `arrow_array_stream`"))?;
    // SAFETY: the capsule is named `arrow_array_stream`, so by the Arrow PyCapsule
    // interface it points to a valid FFI_ArrowArrayStream. `from_raw` moves the stream
    // out and leaves a released one behind, so the capsule's destructor (which releases
    // streams not yet released) does nothing; the capsule outlives this call.
    let reader = unsafe {
        RecordBatchStreamReader::from_raw(pointer.as_ptr().cast::<FFI_ArrowArrayStream>())
    }
    .map_err(|e| input(format!("cannot read the Arrow stream: {e}")))?;
    let schema = reader.schema();
    let batches = py
        .detach(|| reader.collect::<Result<Vec<_>, _>>())
        .map_err(|e| input(format!("cannot read the Arrow stream: {e}")))?;
    let opts = ReadOptions {
        categorical,
        ..ReadOptions::default()
    };
    let table = py
        .detach(|| table_from_arrow(&schema, &batches, &opts))
        .or_raise()?;
    Ok(table.features)
}
