//! Reading tables into Sapwood's feature columns.
//!
//! Parquet (streamed by row group), Arrow record batches, and CSV with a header row; and
//! the Parquet writer of predictions.
#![deny(missing_docs)]

mod arrow;
mod csv;
mod guard;
mod parquet;

pub use crate::arrow::{table_from_arrow, Converter};
pub use crate::csv::{read_csv, read_csv_until};
pub use crate::parquet::{read_parquet, ParquetSource, PredictionWriter};
pub use arrow_array;
pub use arrow_schema;

use std::borrow::Cow;
use std::path::Path;

use arrow_array::ArrayRef;
use sapwood_core::data::Column;

use std::path::PathBuf;

use sapwood_core::data::FeatureMatrix;
use thiserror::Error;

/// What went wrong reading a table; every variant names the file.
#[derive(Debug, Error)]
pub enum IoError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Reading was stopped by the caller (a signal asked the program to stop).
    #[error("{path}: reading stopped at line {line}")]
    Stopped {
        /// The file.
        path: PathBuf,
        /// The line reached.
        line: usize,
    },
    /// A line of a text file is malformed.
    #[error("{path}: line {line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// One cell of a text file cannot be used.
    #[error("{path}: line {line} (row {row}), column `{column}`: `{value}` {reason}")]
    Value {
        /// The file.
        path: PathBuf,
        /// 1-based line number where the record starts.
        line: usize,
        /// 0-based row of the data (the header not counted), as the engine's own errors
        /// about the same row (a label, a weight) number it.
        row: usize,
        /// The column.
        column: String,
        /// The cell as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A column named in the options is not in the file.
    #[error("{path}: no column `{column}` (columns: {available})")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column asked for.
        column: String,
        /// The columns the file has.
        available: String,
    },
    /// A column has a type or role Sapwood cannot use.
    #[error("{path}: column `{column}`: {reason}")]
    Column {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A Parquet file is corrupt or unreadable, in its footer or in one row group.
    #[error("{}: {}{reason}", path.display(), parquet_place(*row_group, column.as_deref()))]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The row group, when the failure is in one.
        row_group: Option<usize>,
        /// The column, when the failure is in one.
        column: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// The file as a whole cannot be used (no usable columns, nothing to read).
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A Parquet file could not be written.
    #[error("{path}: cannot write Parquet: {reason}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        reason: String,
    },
    /// The columns do not make a valid feature matrix.
    #[error("{path}: {source}")]
    Data {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: sapwood_core::Error,
    },
}

/// "row group 3, column `x`: " (the parts that are known) for a Parquet error.
fn parquet_place(row_group: Option<usize>, column: Option<&str>) -> String {
    match (row_group, column) {
        (Some(g), Some(c)) => format!("row group {g}, column `{c}`: "),
        (Some(g), None) => format!("row group {g}: "),
        (None, Some(c)) => format!("column `{c}`: "),
        (None, None) => String::new(),
    }
}

/// Which columns play which role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The label column, if any.
    pub label: Option<String>,
    /// The sample-weight column, if any.
    pub weight: Option<String>,
    /// Columns read as categorical even when their values are numbers.
    pub categorical: Vec<String>,
    /// Columns left out.
    pub drop: Vec<String>,
    /// When not empty, the only feature columns (the label and weight are read too).
    pub features: Vec<String>,
    /// Columns carried through unchanged (identifiers for prediction output).
    pub keep: Vec<String>,
}

/// A label column: numbers (NaN where missing) or strings (None where missing).
#[derive(Debug, Clone, PartialEq)]
pub enum LabelColumn {
    /// Numeric labels.
    Numeric(Vec<f32>),
    /// String labels.
    Strings(Vec<Option<String>>),
}

/// A table read from a file: features plus the label and weight columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Feature columns in file order.
    pub features: FeatureMatrix<'static>,
    /// The label column, when one was named.
    pub label: Option<LabelColumn>,
    /// The weight column, when one was named (NaN where missing).
    pub weight: Option<Vec<f32>>,
    /// Columns kept as they are, by name.
    pub kept: Vec<(String, ArrayRef)>,
}

impl Table {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.features.n_rows()
    }

    /// The rows of several tables of one file, one after another. Categorical columns take
    /// the last part's levels, a superset of the earlier ones when parts come from one
    /// [`Converter`]; kept columns are only carried for a single part.
    pub fn concat(path: &Path, parts: Vec<Table>, names: &[String]) -> Result<Table, IoError> {
        let data_err = |source| IoError::Data {
            path: path.to_path_buf(),
            source,
        };
        if parts.len() == 1 {
            return Ok(parts.into_iter().next().unwrap());
        }
        let mut columns: Vec<Column<'static>> = Vec::new();
        let total_rows: usize = parts.iter().map(|p| p.features.n_rows()).sum();
        for j in 0..names.len() {
            let col = match parts.last().map(|p| p.features.column(j)) {
                Some(Column::Categorical { levels, .. }) => Column::Categorical {
                    codes: Cow::Owned(
                        parts
                            .iter()
                            .flat_map(|p| match p.features.column(j) {
                                Column::Categorical { codes, .. } => codes.to_vec(),
                                Column::Numeric(_) | Column::Sparse { .. } => Vec::new(),
                            })
                            .collect(),
                    ),
                    levels: levels.clone(),
                },
                // sparse in every part: joined as sparse, each part's rows after the last's
                _ if total_rows <= u32::MAX as usize
                    && parts
                        .iter()
                        .all(|p| matches!(p.features.column(j), Column::Sparse { .. })) =>
                {
                    let (mut rows, mut values, mut offset) = (Vec::new(), Vec::new(), 0usize);
                    for p in &parts {
                        let c = p.features.column(j);
                        for (r, v) in c.sparse_entries(0..c.len()).into_iter().flatten() {
                            rows.push((offset + r) as u32);
                            values.push(v);
                        }
                        offset += c.len();
                    }
                    Column::Sparse {
                        len: offset,
                        start: 0,
                        rows: Cow::Owned(rows),
                        values: Cow::Owned(values),
                    }
                }
                _ => Column::Numeric(Cow::Owned(
                    parts
                        .iter()
                        .flat_map(|p| {
                            let c = p.features.column(j);
                            c.dense_values().map_or_else(Vec::new, Cow::into_owned)
                        })
                        .collect(),
                )),
            };
            columns.push(col);
        }
        let label = match parts.first().and_then(|p| p.label.as_ref()) {
            None => None,
            Some(LabelColumn::Numeric(_)) => Some(LabelColumn::Numeric(
                parts
                    .iter()
                    .flat_map(|p| match &p.label {
                        Some(LabelColumn::Numeric(v)) => v.clone(),
                        _ => Vec::new(),
                    })
                    .collect(),
            )),
            Some(LabelColumn::Strings(_)) => Some(LabelColumn::Strings(
                parts
                    .iter()
                    .flat_map(|p| match &p.label {
                        Some(LabelColumn::Strings(v)) => v.clone(),
                        _ => Vec::new(),
                    })
                    .collect(),
            )),
        };
        let weight = parts.first().and_then(|p| p.weight.as_ref()).map(|_| {
            parts
                .iter()
                .flat_map(|p| p.weight.clone().unwrap_or_default())
                .collect()
        });
        let features =
            sapwood_core::data::FeatureMatrix::new(names.to_vec(), columns).map_err(data_err)?;
        Ok(Table {
            features,
            label,
            weight,
            kept: Vec::new(),
        })
    }
}
