//! Raw features as columns: f32 values (NaN is missing), the same held sparse (a few rows'
//! values, the rest missing), or categorical codes with level names.

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
    /// Real values of a few rows, every other row missing (a column of a sparse matrix):
    /// row `rows[i] - start` holds `values[i]`. Held so, a column costs its entries, not a
    /// value a row.
    Sparse {
        /// Rows in the column.
        len: usize,
        /// The index in `rows` of the column's first row (a slice of a column keeps the
        /// whole column's indices).
        start: usize,
        /// The rows holding a value, strictly ascending, each in `start..start + len`.
        rows: Cow<'a, [u32]>,
        /// Their values (NaN is missing here too).
        values: Cow<'a, [f32]>,
    },
}

impl Column<'_> {
    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Column::Numeric(v) => v.len(),
            Column::Categorical { codes, .. } => codes.len(),
            Column::Sparse { len, .. } => *len,
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

    /// The entries of a sparse column within its rows `range`, as (row within the column,
    /// value) pairs in row order; `None` for a column that is not sparse.
    pub fn sparse_entries(
        &self,
        range: std::ops::Range<usize>,
    ) -> Option<impl ExactSizeIterator<Item = (usize, f32)> + '_> {
        let Column::Sparse {
            start,
            rows,
            values,
            ..
        } = self
        else {
            return None;
        };
        let at = sparse_range(rows, *start, range);
        Some(
            rows[at.clone()]
                .iter()
                .zip(&values[at])
                .map(move |(&r, &v)| (r as usize - start, v)),
        )
    }

    /// Every row's value, missing ones NaN (categorical columns: `None`).
    pub fn dense_values(&self) -> Option<Cow<'_, [f32]>> {
        match self {
            Column::Numeric(v) => Some(Cow::Borrowed(v)),
            Column::Categorical { .. } => None,
            Column::Sparse { len, .. } => {
                let mut out = vec![f32::NAN; *len];
                for (r, v) in self.sparse_entries(0..*len)? {
                    out[r] = v;
                }
                Some(Cow::Owned(out))
            }
        }
    }
}

/// The positions in `rows` (ascending row indices of a column whose first row is `start`)
/// of the rows within `range` of the column.
fn sparse_range(
    rows: &[u32],
    start: usize,
    range: std::ops::Range<usize>,
) -> std::ops::Range<usize> {
    // saturating: an unchecked column's indices must not overflow the bounds
    let (lo, hi) = (
        start.saturating_add(range.start),
        start.saturating_add(range.end),
    );
    let first = rows.partition_point(|&r| (r as usize) < lo);
    let end = first + rows[first..].partition_point(|&r| (r as usize) < hi);
    first..end
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
            if let Column::Sparse {
                len,
                start,
                rows,
                values,
            } = col
            {
                let reason = if rows.len() != values.len() {
                    Some(format!("{} rows for {} values", rows.len(), values.len()))
                } else if start.checked_add(*len).is_none() {
                    Some(format!("its first row {start} and {len} rows overflow"))
                } else if let Some(i) = (1..rows.len()).find(|&i| rows[i] <= rows[i - 1]) {
                    Some(format!("row indices are not ascending at entry {i}"))
                } else {
                    rows.iter()
                        .find(|&&r| !(*start..start + len).contains(&(r as usize)))
                        .map(|r| format!("row index {r} is outside rows {start}..{}", start + len))
                };
                if let Some(reason) = reason {
                    return Err(Error::InvalidFeature {
                        feature: name.clone(),
                        reason,
                    });
                }
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
    ///
    /// # Panics
    /// When `range` is not within the rows.
    pub fn slice_rows(&self, range: std::ops::Range<usize>) -> FeatureMatrix<'_> {
        assert!(
            range.start <= range.end && range.end <= self.n_rows,
            "rows {range:?} of {}",
            self.n_rows
        );
        let columns = self
            .columns
            .iter()
            .map(|c| match c {
                Column::Numeric(v) => Column::Numeric(Cow::Borrowed(&v[range.clone()])),
                Column::Categorical { codes, levels } => Column::Categorical {
                    codes: Cow::Borrowed(&codes[range.clone()]),
                    levels: levels.clone(),
                },
                Column::Sparse {
                    start,
                    rows,
                    values,
                    ..
                } => {
                    let at = sparse_range(rows, *start, range.clone());
                    Column::Sparse {
                        len: range.len(),
                        start: start + range.start,
                        rows: Cow::Borrowed(&rows[at.clone()]),
                        values: Cow::Borrowed(&values[at]),
                    }
                }
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
