//! `NativeData`: feature columns that borrow numpy memory where the layout allows, plus
//! the label and weights. The Python `sapwood.Dataset` wraps one.
//!
//! Columns are kept as references to the numpy arrays (which stay alive as long as this
//! object) and turned into a borrowed [`sapwood::Dataset`] for each training or
//! prediction call, under a read-only borrow of every array.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use numpy::ndarray::{ArrayView2, Axis};
use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList};
use rayon::prelude::*;
use sapwood::{ClassLabel, Column, Dataset, FeatureMatrix, Label};

use crate::errors::{guarded, NativeError, OrRaise};

/// Where one feature column lives.
enum Source {
    /// A contiguous float32 numpy vector, borrowed.
    Vector(Py<PyArray1<f32>>),
    /// Column `j` of the Fortran-ordered float32 matrix, borrowed.
    MatrixColumn(usize),
    /// Contiguous uint32 category codes (borrowed) and their level names.
    Codes(Py<PyArray1<u32>>, Vec<String>),
    /// A column converted or copied at construction.
    Owned(Column<'static>),
    /// Column `j` of a matrix converted at construction into one block, column after
    /// column (one allocation, backed by huge pages where the OS allows).
    Block(Arc<Vec<f32>>, usize),
    /// Column `j` of the table imported from Arrow.
    Table(usize),
}

/// Feature columns with an optional label and weights, ready for the engine.
#[pyclass(frozen, module = "sapwood._sapwood")]
pub struct NativeData {
    names: Vec<String>,
    sources: Vec<Source>,
    matrix: Option<Py<PyArray2<f32>>>,
    table: Option<FeatureMatrix<'static>>,
    n_rows: usize,
    label: Option<Label>,
    weight: Option<Vec<f32>>,
    /// Each row's base margin (XGBoost's `base_margin`, LightGBM's `init_score`), groups
    /// per row, row-major; settable after construction, as XGBoost's `set_base_margin`.
    base_margin: Mutex<Option<Vec<f32>>>,
    /// The rows of each query, in row order, for ranking (from XGBoost's `qid` or the
    /// peers' `group` sizes); checked when set, settable after construction.
    group_sizes: Mutex<Option<Vec<u32>>>,
}

/// Read-only borrows of every numpy array a `NativeData` refers to, in source order.
/// The engine's `Dataset` borrows from these; they must outlive it.
pub struct Borrowed<'py> {
    vectors: Vec<PyReadonlyArray1<'py, f32>>,
    codes: Vec<PyReadonlyArray1<'py, u32>>,
    matrix: Option<PyReadonlyArray2<'py, f32>>,
}

fn input(message: impl Into<String>) -> PyErr {
    NativeError::Input(message.into()).into()
}

/// Copies every column of a 2-D view into one float32 block, column after column, in
/// parallel. The block is one allocation backed by huge pages where the OS allows: with a
/// vector of its own for each column, faulting in fresh 4 KiB pages took most of the copy
/// (a 2M x 28 C-ordered matrix: 116 ms, against 46-51 ms as one block).
fn columns_of<T: Copy + Sync + Into<f64>>(view: ArrayView2<'_, T>) -> Vec<f32> {
    let (n, nf) = view.dim();
    // zeroed by every thread, a part each (a page's first write faults it in)
    let mut block = sapwood::huge_pages::filled(n * nf, 0f32);
    if view.is_standard_layout() {
        // row-major: blocks of rows, each read once in order and written to every column,
        // rather than one strided pass over the whole matrix per column
        const ROWS: usize = 4_096;
        let mut blocks: Vec<Vec<&mut [f32]>> = (0..n.div_ceil(ROWS)).map(|_| Vec::new()).collect();
        for c in block.chunks_mut(n.max(1)).take(nf) {
            for (b, part) in c.chunks_mut(ROWS).enumerate() {
                blocks[b].push(part);
            }
        }
        blocks
            .into_par_iter()
            .enumerate()
            .for_each(|(b, mut parts)| {
                let rows = view.slice(numpy::ndarray::s![b * ROWS..(b * ROWS + ROWS).min(n), ..]);
                for (i, row) in rows.outer_iter().enumerate() {
                    for (part, &v) in parts.iter_mut().zip(row.iter()) {
                        part[i] = v.into() as f32;
                    }
                }
            });
        return block;
    }
    let columns: Vec<_> = view.axis_iter(Axis(1)).collect();
    block
        .par_chunks_mut(n.max(1))
        .zip(columns)
        .for_each(|(out, c)| {
            for (o, &v) in out.iter_mut().zip(c.iter()) {
                *o = v.into() as f32;
            }
        });
    block
}

/// A 1-D numeric column as float32: borrowed when it already is contiguous float32.
fn numeric_source(values: &Bound<'_, PyAny>) -> PyResult<Source> {
    if let Ok(a) = values.cast::<PyArray1<f32>>() {
        if a.is_contiguous() {
            return Ok(Source::Vector(a.clone().unbind()));
        }
        let v = a.try_readonly().map_err(|e| input(e.to_string()))?;
        return Ok(Source::Owned(Column::Numeric(Cow::Owned(
            v.as_array().to_vec(),
        ))));
    }
    if let Ok(a) = values.cast::<PyArray1<f64>>() {
        let v = a.try_readonly().map_err(|e| input(e.to_string()))?;
        let values = v.as_array().iter().map(|&x| x as f32).collect();
        return Ok(Source::Owned(Column::Numeric(Cow::Owned(values))));
    }
    Err(input(
        "a numeric column must be a 1-D float32 or float64 numpy array",
    ))
}

/// One class label from Python: bool, int or str (bool first: it is a subclass of int).
fn class_label(item: &Bound<'_, PyAny>) -> PyResult<ClassLabel> {
    if item.is_instance_of::<PyBool>() {
        return Ok(ClassLabel::Bool(item.extract()?));
    }
    if let Ok(i) = item.extract::<i64>() {
        return Ok(ClassLabel::Int(i));
    }
    if let Ok(s) = item.extract::<String>() {
        return Ok(ClassLabel::Str(s));
    }
    Err(input(format!(
        "class label {} is not a bool, int or str",
        item.repr()?
    )))
}

/// The label: float32 values, or a list of class labels.
fn label_of(label: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Label>> {
    let Some(label) = label else { return Ok(None) };
    if let Ok(a) = label.cast::<PyArray1<f32>>() {
        let v = a.try_readonly().map_err(|e| input(e.to_string()))?;
        return Ok(Some(Label::Values(v.as_array().to_vec())));
    }
    if let Ok(list) = label.cast::<PyList>() {
        let classes = list
            .iter()
            .map(|i| class_label(&i))
            .collect::<PyResult<_>>()?;
        return Ok(Some(Label::Classes(classes)));
    }
    Err(input(
        "the label must be a float32 numpy array or a list of class labels",
    ))
}

fn poisoned() -> PyErr {
    input("the dataset's base margin or groups are unavailable after a panic")
}

fn weight_of(weight: Option<PyReadonlyArray1<'_, f32>>) -> Option<Vec<f32>> {
    weight.map(|w| w.as_array().to_vec())
}

impl NativeData {
    /// Replaces the query groups, keeping the old ones when the engine refuses the new.
    fn replace_groups(&self, py: Python<'_>, sizes: Option<Vec<u32>>) -> PyResult<()> {
        let old = std::mem::replace(
            &mut *self.group_sizes.lock().map_err(|_| poisoned())?,
            sizes,
        );
        let checked = self.borrow(py).and_then(|b| self.dataset(&b).map(drop));
        if checked.is_err() {
            *self.group_sizes.lock().map_err(|_| poisoned())? = old;
        }
        checked
    }

    fn finish(self, py: Python<'_>) -> PyResult<Self> {
        // Build once now so that bad lengths or codes are reported by the constructor,
        // not by the first training call.
        let borrowed = self.borrow(py)?;
        self.dataset(&borrowed)?;
        drop(borrowed);
        Ok(self)
    }

    /// Read-only borrows of the arrays behind the columns.
    pub fn borrow<'py>(&self, py: Python<'py>) -> PyResult<Borrowed<'py>> {
        let mut b = Borrowed {
            vectors: Vec::new(),
            codes: Vec::new(),
            matrix: None,
        };
        let busy = |e: numpy::BorrowError| input(format!("an input array is in use: {e}"));
        for s in &self.sources {
            match s {
                Source::Vector(a) => b.vectors.push(a.bind(py).try_readonly().map_err(busy)?),
                Source::Codes(a, _) => b.codes.push(a.bind(py).try_readonly().map_err(busy)?),
                _ => {}
            }
        }
        if let Some(m) = &self.matrix {
            b.matrix = Some(m.bind(py).try_readonly().map_err(busy)?);
        }
        Ok(b)
    }

    /// The engine's dataset, borrowing every column from `b` or from `self`.
    pub fn dataset<'a>(&'a self, b: &'a Borrowed<'_>) -> PyResult<Dataset<'a>> {
        let changed = || input("an input array changed shape or layout after the Dataset was made");
        let (mut vectors, mut codes) = (b.vectors.iter(), b.codes.iter());
        let matrix = match &b.matrix {
            Some(m) => Some(m.as_slice().map_err(|_| changed())?),
            None => None,
        };
        let n = self.n_rows;
        let mut columns = Vec::with_capacity(self.sources.len());
        for s in &self.sources {
            let col = match s {
                Source::Vector(_) => {
                    let v = vectors.next().ok_or_else(changed)?;
                    Column::Numeric(Cow::Borrowed(v.as_slice().map_err(|_| changed())?))
                }
                Source::MatrixColumn(j) => {
                    let m = matrix.ok_or_else(changed)?;
                    let col = m.get(j * n..(j + 1) * n).ok_or_else(changed)?;
                    Column::Numeric(Cow::Borrowed(col))
                }
                Source::Codes(_, levels) => {
                    let c = codes.next().ok_or_else(changed)?;
                    Column::Categorical {
                        codes: Cow::Borrowed(c.as_slice().map_err(|_| changed())?),
                        levels: levels.clone(),
                    }
                }
                Source::Owned(c) => borrow_column(c),
                Source::Block(block, j) => Column::Numeric(Cow::Borrowed(
                    block.get(j * n..(j + 1) * n).ok_or_else(changed)?,
                )),
                Source::Table(j) => {
                    let t = self.table.as_ref().ok_or_else(changed)?;
                    borrow_column(t.column(*j))
                }
            };
            columns.push(col);
        }
        let features = FeatureMatrix::new(self.names.clone(), columns).or_raise()?;
        let mut dataset =
            Dataset::from_parts(features, self.label.clone(), self.weight.clone()).or_raise()?;
        let margin = self.base_margin.lock().map_err(|_| poisoned())?.clone();
        if margin.is_some() {
            dataset.set_base_margin(margin).or_raise()?;
        }
        if let Some(sizes) = self.group_sizes.lock().map_err(|_| poisoned())?.as_deref() {
            dataset.set_group_sizes(sizes).or_raise()?;
        }
        Ok(dataset)
    }
}

/// A view of a column that borrows its values instead of copying them.
fn borrow_column<'a>(c: &'a Column<'_>) -> Column<'a> {
    match c {
        Column::Numeric(v) => Column::Numeric(Cow::Borrowed(v.as_ref())),
        Column::Sparse {
            len,
            start,
            rows,
            values,
        } => Column::Sparse {
            len: *len,
            start: *start,
            rows: Cow::Borrowed(rows.as_ref()),
            values: Cow::Borrowed(values.as_ref()),
        },
        Column::Categorical { codes, levels } => Column::Categorical {
            codes: Cow::Borrowed(codes.as_ref()),
            levels: levels.clone(),
        },
    }
}

#[pymethods]
impl NativeData {
    /// A dataset from a 2-D float32 or float64 array. A Fortran-ordered float32 array is
    /// borrowed column by column; anything else is converted to float32 columns once.
    #[staticmethod]
    #[pyo3(signature = (array, names, label=None, weight=None))]
    fn from_matrix(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        names: Vec<String>,
        label: Option<&Bound<'_, PyAny>>,
        weight: Option<PyReadonlyArray1<'_, f32>>,
    ) -> PyResult<Self> {
        guarded(|| {
            let mut data = NativeData {
                names,
                sources: Vec::new(),
                matrix: None,
                table: None,
                n_rows: 0,
                label: label_of(label)?,
                weight: weight_of(weight),
                base_margin: Mutex::new(None),
                group_sizes: Mutex::new(None),
            };
            let shape = array
                .getattr("shape")
                .and_then(|s| s.extract::<Vec<usize>>())
                .map_err(|_| input("expected a 2-D numpy array"))?;
            let [rows, cols] = shape[..] else {
                return Err(input(format!(
                    "expected a 2-D array, got {} dimensions",
                    shape.len()
                )));
            };
            if cols != data.names.len() {
                return Err(input(format!(
                    "{} feature names for {cols} columns",
                    data.names.len()
                )));
            }
            data.n_rows = rows;
            let block_sources = |block: Vec<f32>| -> Vec<Source> {
                let block = Arc::new(block);
                (0..cols).map(|j| Source::Block(block.clone(), j)).collect()
            };
            if let Ok(a) = array.cast::<PyArray2<f32>>() {
                if a.is_fortran_contiguous() {
                    data.matrix = Some(a.clone().unbind());
                    data.sources = (0..cols).map(Source::MatrixColumn).collect();
                } else {
                    let r = a.try_readonly().map_err(|e| input(e.to_string()))?;
                    let view = r.as_array();
                    data.sources =
                        block_sources(py.detach(|| crate::pool::install(|| columns_of(view))));
                }
            } else if let Ok(a) = array.cast::<PyArray2<f64>>() {
                let r = a.try_readonly().map_err(|e| input(e.to_string()))?;
                let view = r.as_array();
                data.sources =
                    block_sources(py.detach(|| crate::pool::install(|| columns_of(view))));
            } else {
                return Err(input("expected a float32 or float64 numpy array"));
            }
            data.finish(py)
        })
    }

    /// A dataset from `(name, values, levels)` columns: `levels=None` for a numeric
    /// column (1-D float32, borrowed when contiguous, or float64), else uint32 codes
    /// into `levels` (4294967295 is missing).
    #[staticmethod]
    #[pyo3(signature = (columns, label=None, weight=None))]
    fn from_columns(
        py: Python<'_>,
        columns: Vec<(String, Bound<'_, PyAny>, Option<Vec<String>>)>,
        label: Option<&Bound<'_, PyAny>>,
        weight: Option<PyReadonlyArray1<'_, f32>>,
    ) -> PyResult<Self> {
        guarded(|| {
            let mut data = NativeData {
                names: Vec::with_capacity(columns.len()),
                sources: Vec::with_capacity(columns.len()),
                matrix: None,
                table: None,
                n_rows: 0,
                label: label_of(label)?,
                weight: weight_of(weight),
                base_margin: Mutex::new(None),
                group_sizes: Mutex::new(None),
            };
            for (name, values, levels) in columns {
                let source = match levels {
                    None => numeric_source(&values)?,
                    Some(levels) => {
                        let codes = values.cast::<PyArray1<u32>>().map_err(|_| {
                            input(format!("categorical column `{name}` needs uint32 codes"))
                        })?;
                        if codes.is_contiguous() {
                            Source::Codes(codes.clone().unbind(), levels)
                        } else {
                            let c = codes.try_readonly().map_err(|e| input(e.to_string()))?;
                            Source::Owned(Column::Categorical {
                                codes: Cow::Owned(c.as_array().to_vec()),
                                levels,
                            })
                        }
                    }
                };
                data.n_rows = values.len()?;
                data.names.push(name);
                data.sources.push(source);
            }
            data.finish(py)
        })
    }

    /// A dataset from a compressed sparse column matrix (scipy's CSC arrays): column `j`
    /// holds `data[indptr[j]..indptr[j + 1]]` at rows `indices[...]`. Absent entries are
    /// missing (NaN) and stored zeros are values, as in XGBoost. Each column keeps its
    /// entries alone (row indices ascending, as scipy's canonical format has them), so no
    /// dense matrix is ever built.
    #[staticmethod]
    #[pyo3(signature = (indptr, indices, data, n_rows, names, label=None, weight=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_csc(
        py: Python<'_>,
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i64>,
        data: PyReadonlyArray1<'_, f32>,
        n_rows: usize,
        names: Vec<String>,
        label: Option<&Bound<'_, PyAny>>,
        weight: Option<PyReadonlyArray1<'_, f32>>,
    ) -> PyResult<Self> {
        guarded(|| {
            let (indptr, indices, values) =
                (indptr.as_array(), indices.as_array(), data.as_array());
            let cols = names.len();
            if indptr.len() != cols + 1 {
                return Err(input(format!(
                    "sparse matrix: {} column pointers for {cols} columns",
                    indptr.len()
                )));
            }
            if indices.len() != values.len() {
                return Err(input(format!(
                    "sparse matrix: {} row indices for {} values",
                    indices.len(),
                    values.len()
                )));
            }
            // Checked up front so that the parallel fill below cannot go out of bounds.
            let mut ranges = Vec::with_capacity(cols);
            for j in 0..cols {
                let (start, end) = (indptr[j], indptr[j + 1]);
                if start < 0 || end < start || end as usize > values.len() {
                    return Err(input(format!(
                        "sparse matrix: invalid column pointers for column {j}"
                    )));
                }
                ranges.push(start as usize..end as usize);
            }
            if let Some(bad) = indices.iter().find(|&&i| i < 0 || i as usize >= n_rows) {
                return Err(input(format!(
                    "sparse matrix: row index {bad} is out of range for {n_rows} rows"
                )));
            }
            // the Python side passes contiguous arrays; borrowed slices can cross `detach`
            let contiguous = || input("sparse matrix: indices and data must be contiguous");
            let indices = indices.as_slice().ok_or_else(contiguous)?;
            let values = values.as_slice().ok_or_else(contiguous)?;
            if n_rows > u32::MAX as usize {
                return Err(input(format!(
                    "sparse matrix: {n_rows} rows; at most {} are supported",
                    u32::MAX
                )));
            }
            // each column keeps its entries alone (the engine's sparse column): a value a
            // row would cost n_rows x cols floats, most of them missing
            let columns: Vec<Column<'static>> = py.detach(|| {
                crate::pool::install(|| {
                    ranges
                        .into_par_iter()
                        .map(|r| Column::Sparse {
                            len: n_rows,
                            start: 0,
                            rows: Cow::Owned(
                                indices[r.clone()].iter().map(|&i| i as u32).collect(),
                            ),
                            values: Cow::Owned(values[r].to_vec()),
                        })
                        .collect()
                })
            });
            NativeData {
                names,
                sources: columns.into_iter().map(Source::Owned).collect(),
                matrix: None,
                table: None,
                n_rows,
                label: label_of(label)?,
                weight: weight_of(weight),
                base_margin: Mutex::new(None),
                group_sizes: Mutex::new(None),
            }
            .finish(py)
        })
    }

    /// A dataset from an object exporting the Arrow PyCapsule stream interface
    /// (`__arrow_c_stream__`: pyarrow Table or RecordBatchReader, polars DataFrame, ...).
    /// Columns named in `categorical` are read as categories even when numeric.
    #[staticmethod]
    #[pyo3(signature = (source, categorical=Vec::new(), names=None, label=None, weight=None))]
    fn from_arrow(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        categorical: Vec<String>,
        names: Option<Vec<String>>,
        label: Option<&Bound<'_, PyAny>>,
        weight: Option<PyReadonlyArray1<'_, f32>>,
    ) -> PyResult<Self> {
        guarded(|| {
            let table = crate::arrow::import_table(py, source, categorical)?;
            let n_features = table.n_features();
            let names = match names {
                Some(n) if n.len() != n_features => {
                    return Err(input(format!(
                        "{} feature names for {n_features} columns",
                        n.len()
                    )))
                }
                Some(n) => n,
                None => table.names().to_vec(),
            };
            NativeData {
                names,
                sources: (0..n_features).map(Source::Table).collect(),
                matrix: None,
                n_rows: table.n_rows(),
                table: Some(table),
                label: label_of(label)?,
                weight: weight_of(weight),
                base_margin: Mutex::new(None),
                group_sizes: Mutex::new(None),
            }
            .finish(py)
        })
    }

    /// Rows.
    #[getter]
    fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Feature names, in column order.
    #[getter]
    fn feature_names(&self) -> Vec<String> {
        self.names.clone()
    }

    /// Whether each feature is categorical.
    #[getter]
    fn categorical(&self) -> Vec<bool> {
        self.sources
            .iter()
            .map(|s| match s {
                Source::Codes(..) => true,
                Source::Owned(c) => c.is_categorical(),
                Source::Table(j) => self
                    .table
                    .as_ref()
                    .is_some_and(|t| t.column(*j).is_categorical()),
                Source::Vector(_) | Source::MatrixColumn(_) | Source::Block(..) => false,
            })
            .collect()
    }

    /// Columns read in place from numpy memory, without a copy.
    #[getter]
    fn borrowed_columns(&self) -> usize {
        self.sources
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Source::Vector(_) | Source::MatrixColumn(_) | Source::Codes(..)
                )
            })
            .count()
    }

    /// Whether a label is set.
    #[getter]
    fn has_label(&self) -> bool {
        self.label.is_some()
    }

    /// Sets (or with None removes) each row's base margin: float32, groups per row,
    /// row-major. Every value must be finite; the length must be a whole number of values
    /// per row (checked against the model where it is used).
    #[pyo3(signature = (margin))]
    fn set_base_margin(
        &self,
        py: Python<'_>,
        margin: Option<PyReadonlyArray1<'_, f32>>,
    ) -> PyResult<()> {
        guarded(|| {
            let margin = margin.map(|m| m.as_array().to_vec());
            let old = std::mem::replace(
                &mut *self.base_margin.lock().map_err(|_| poisoned())?,
                margin,
            );
            // the engine's own checks (finite values, whole rows), naming the row
            let checked = self.borrow(py).and_then(|b| self.dataset(&b).map(drop));
            if checked.is_err() {
                *self.base_margin.lock().map_err(|_| poisoned())? = old;
            }
            checked
        })
    }

    /// Sets (or with None removes) the query groups by their sizes in row order (the
    /// peers' `group`); they must add up to the rows (the error names `group`).
    #[pyo3(signature = (sizes))]
    fn set_group_sizes(
        &self,
        py: Python<'_>,
        sizes: Option<PyReadonlyArray1<'_, u32>>,
    ) -> PyResult<()> {
        guarded(|| {
            let sizes = sizes.map(|s| s.as_array().to_vec());
            self.replace_groups(py, sizes)
        })
    }

    /// Sets the query groups from one query id per row (XGBoost's `qid`); the rows of a
    /// query must be contiguous: the error names `qid` and the row where a query comes
    /// back.
    #[pyo3(signature = (qid))]
    fn set_qid(&self, py: Python<'_>, qid: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        guarded(|| {
            let ids = qid.as_array();
            let ids = ids
                .as_slice()
                .map(Cow::Borrowed)
                .unwrap_or_else(|| Cow::Owned(ids.to_vec()));
            if ids.len() != self.n_rows {
                return Err(input(format!(
                    "invalid parameter `qid`: {} query ids for {} rows",
                    ids.len(),
                    self.n_rows
                )));
            }
            // the engine checks that each query's rows are contiguous; its sizes are kept
            let sizes = {
                let borrowed = self.borrow(py)?;
                let mut dataset = self.dataset(&borrowed)?;
                dataset.set_group(&ids).or_raise()?;
                let offsets = dataset.queries().map(|q| q.offsets().to_vec());
                offsets
                    .unwrap_or_default()
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .collect()
            };
            self.replace_groups(py, Some(sizes))
        })
    }

    /// The rows of each query, or None.
    #[getter]
    fn group_sizes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<u32>>>> {
        let sizes = self.group_sizes.lock().map_err(|_| poisoned())?;
        Ok(sizes.as_ref().map(|s| PyArray1::from_slice(py, s)))
    }

    /// Each row's base margin as set, flat (groups per row, row-major), or None.
    #[getter]
    fn base_margin<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<f32>>>> {
        let margin = self.base_margin.lock().map_err(|_| poisoned())?;
        Ok(margin.as_ref().map(|m| PyArray1::from_slice(py, m)))
    }
}
