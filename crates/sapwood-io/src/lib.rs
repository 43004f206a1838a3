//! Reading tables into Sapwood's feature columns.
//!
//! CSV with a header row is supported here; Parquet and Arrow readers join this crate with
//! the command-line interface.

mod csv;

pub use csv::read_csv;

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
    /// A line is malformed.
    #[error("{path}: line {line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
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
    /// The columns do not make a valid feature matrix.
    #[error("{path}: {source}")]
    Data {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: sapwood_core::Error,
    },
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
}
