//! `NativeBatches`: rows a Python callable yields in batches (what `sapwood.DataIter`
//! reads), as the engine's [`RowSource`]: the job reads them once per pass, one batch at a
//! time, so the raw rows never sit in memory whole.

use std::sync::Mutex;

use pyo3::prelude::*;
use sapwood::{JobFacts, RowBatch, RowSource};

use crate::data::NativeData;

/// Rows read in batches: `batches()` returns an iterator of `(data, qid, base_margin)`,
/// `data` a `NativeData` with the batch's label and weights, `qid` each row's query id (or
/// None), `base_margin` its rows' margins, row-major (or None); it is called once per pass,
/// each call starting from the first row. `n_rows` is how many rows every pass yields.
#[pyclass(frozen, module = "sapwood._sapwood")]
pub struct NativeBatches {
    batches: Py<PyAny>,
    n_rows: u64,
    /// The exception a pass raised in Python, re-raised as it was once training ends.
    error: Mutex<Option<PyErr>>,
}

#[pymethods]
impl NativeBatches {
    /// Rows `batches()` yields in batches, `n_rows` of them in every pass.
    #[new]
    fn new(batches: Py<PyAny>, n_rows: u64) -> Self {
        NativeBatches {
            batches,
            n_rows,
            error: Mutex::new(None),
        }
    }
}

/// One batch as Python hands it over.
type PyBatch<'py> = (Bound<'py, NativeData>, Option<Vec<i64>>, Option<Vec<f32>>);

impl NativeBatches {
    /// The exception a pass raised, if reading is what failed.
    pub fn take_error(&self) -> Option<PyErr> {
        self.error.lock().ok()?.take()
    }

    /// Reads one pass under the GIL, handing each batch to `each`; a job's error raised in
    /// `each` is returned as it is (`Ok(Err(..))`), a Python one as `Err`.
    fn pass(
        &self,
        py: Python<'_>,
        each: &mut dyn FnMut(RowBatch<'_>) -> sapwood::Result<()>,
    ) -> PyResult<sapwood::Result<()>> {
        let batches = self.batches.bind(py).call0()?;
        for item in batches.try_iter()? {
            let (data, query_ids, base_margin): PyBatch<'_> = item?.extract()?;
            let native = data.get();
            let borrowed = native.borrow(py)?;
            let set = native.dataset(&borrowed)?;
            let batch = RowBatch {
                features: set.features(),
                label: set.label().cloned(),
                weight: set.weight().map(<[f32]>::to_vec),
                base_margin,
                query_ids,
            };
            if let Err(e) = each(batch) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }
}

impl RowSource for NativeBatches {
    fn n_rows(&self) -> u64 {
        self.n_rows
    }

    fn describe(&self, _facts: &mut JobFacts) {
        // trains in one process only: Dask and Spark ranks train on their partitions
    }

    fn for_each_batch(
        &self,
        each: &mut dyn FnMut(RowBatch<'_>) -> sapwood::Result<()>,
    ) -> sapwood::Result<()> {
        Python::attach(|py| match self.pass(py, each) {
            Ok(job) => job,
            Err(e) => {
                let text = e.value(py).to_string();
                if let Ok(mut slot) = self.error.lock() {
                    *slot = Some(e);
                }
                Err(sapwood::Error::Read(text))
            }
        })
    }
}
