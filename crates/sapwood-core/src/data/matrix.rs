//! Raw features as columns: f32 values (NaN is missing) or categorical codes with level names.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::error::{Error, Result};

/// The code of a missing categorical value.
pub const MISSING_CATEGORY: u32 = u32::MAX;

/// One feature column, borrowed or owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Column<'a> {
    /// Real values; NaN means missing.
    Numeric(Cow<'a, [f32]>),
    /// Level codes indexing `levels`; [`MISSING_CATEGORY`] means missing.
    Categorical {
        /// One code per row.
        codes: Cow<'a, [u32]>,
        /// Level names, indexed by code.
        levels: Vec<String>,
    },
}

impl Column<'_> {
    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Column::Numeric(v) => v.len(),
            Column::Categorical { codes, .. } => codes.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the column is categorical.
    pub fn is_categorical(&self) -> bool {
        matches!(self, Column::Categorical { .. })
    }
}

/// Named feature columns of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureMatrix<'a> {
    names: Vec<String>,
    columns: Vec<Column<'a>>,
    n_rows: usize,
}

impl<'a> FeatureMatrix<'a> {
    /// Checks names and lengths; categorical codes must index their levels (or be missing).
    pub fn new(names: Vec<String>, columns: Vec<Column<'a>>) -> Result<Self> {
        if names.len() != columns.len() {
            return Err(Error::InvalidFeature {
                feature: names.last().cloned().unwrap_or_default(),
                reason: format!("{} names for {} columns", names.len(), columns.len()),
            });
        }
        if columns.is_empty() {
            return Err(Error::EmptyData("no feature columns".into()));
        }
        let mut seen = HashSet::new();
        for n in &names {
            if !seen.insert(n.as_str()) {
                return Err(Error::InvalidFeature {
                    feature: n.clone(),
                    reason: "the name appears twice".into(),
                });
            }
        }
        let n_rows = columns[0].len();
        for (name, col) in names.iter().zip(&columns) {
            if col.len() != n_rows {
                return Err(Error::LengthMismatch {
                    column: name.clone(),
                    got: col.len(),
                    expected: n_rows,
                });
            }
            if let Column::Categorical { codes, levels } = col {
                if let Some(row) = codes
                    .iter()
                    .position(|&c| c != MISSING_CATEGORY && c as usize >= levels.len())
                {
                    return Err(Error::InvalidFeature {
                        feature: name.clone(),
                        reason: format!(
                            "row {row} has code {} but there are {} levels",
                            codes[row],
                            levels.len()
                        ),
                    });
                }
            }
        }
        Ok(FeatureMatrix {
            names,
            columns,
            n_rows,
        })
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Features.
    pub fn n_features(&self) -> usize {
        self.columns.len()
    }

    /// Feature names, in column order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The columns.
    pub fn columns(&self) -> &[Column<'a>] {
        &self.columns
    }

    /// Column `j`.
    pub fn column(&self, j: usize) -> &Column<'a> {
        &self.columns[j]
    }

    /// The rows `range` as a matrix borrowing this one.
    pub fn slice_rows(&self, range: std::ops::Range<usize>) -> FeatureMatrix<'_> {
        let columns = self
            .columns
            .iter()
            .map(|c| match c {
                Column::Numeric(v) => Column::Numeric(Cow::Borrowed(&v[range.clone()])),
                Column::Categorical { codes, levels } => Column::Categorical {
                    codes: Cow::Borrowed(&codes[range.clone()]),
                    levels: levels.clone(),
                },
            })
            .collect();
        FeatureMatrix {
            names: self.names.clone(),
            columns,
            n_rows: range.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatched_lengths_name_the_column() {
        let e = FeatureMatrix::new(
            vec!["a".into(), "b".into()],
            vec![
                Column::Numeric(vec![1.0, 2.0].into()),
                Column::Numeric(vec![1.0].into()),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`b`") && e.contains("1 rows"), "{e}");
    }

    #[test]
    fn out_of_range_codes_are_refused() {
        let e = FeatureMatrix::new(
            vec!["c".into()],
            vec![Column::Categorical {
                codes: vec![0, 5].into(),
                levels: vec!["x".into()],
            }],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("row 1"), "{e}");
    }
}
