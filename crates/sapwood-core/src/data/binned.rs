//! The binned matrix: one small integer per (row, feature), row-major.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::data::cuts::{Cuts, FeatureCuts};
use crate::data::matrix::{Column, FeatureMatrix};
use crate::error::{Error, Result};

/// Bin storage: u8 when every feature has at most 256 bins, else u16.
#[derive(Debug, Clone, PartialEq)]
pub enum Bins {
    /// One byte per entry.
    U8(Vec<u8>),
    /// Two bytes per entry.
    U16(Vec<u16>),
}

/// Rows of bins; row r's bins are `[r * n_features, (r + 1) * n_features)`.
#[derive(Debug, Clone, PartialEq)]
pub struct BinnedMatrix {
    n_rows: usize,
    n_features: usize,
    bins: Bins,
}

const ROWS_PER_TASK: usize = 4096;

/// Per feature, the bin of every level code of the data's column: the cuts' level bins
/// when the level lists agree, else matched by level name (unknown levels are missing).
fn code_bins(matrix: &FeatureMatrix<'_>, cuts: &Cuts) -> Vec<Option<Vec<u16>>> {
    matrix
        .columns()
        .iter()
        .zip(cuts.features())
        .map(|(col, fc)| match (col, fc) {
            (
                Column::Categorical { levels, .. },
                FeatureCuts::Categorical {
                    levels: cut_levels,
                    level_bins,
                    ..
                },
            ) => Some(if levels == cut_levels {
                level_bins.clone()
            } else {
                let index: HashMap<&str, u16> = cut_levels
                    .iter()
                    .zip(level_bins)
                    .map(|(l, &b)| (l.as_str(), b))
                    .collect();
                levels
                    .iter()
                    .map(|l| index.get(l.as_str()).copied().unwrap_or(0))
                    .collect()
            }),
            _ => None,
        })
        .collect()
}

fn bin_rows<T: Copy + Send + TryFrom<u16>>(matrix: &FeatureMatrix<'_>, cuts: &Cuts, out: &mut [T])
where
    <T as TryFrom<u16>>::Error: std::fmt::Debug,
{
    let nf = matrix.n_features();
    let code_bins = code_bins(matrix, cuts);
    out.par_chunks_mut(ROWS_PER_TASK * nf)
        .enumerate()
        .for_each(|(task, chunk)| {
            let start = task * ROWS_PER_TASK;
            let rows = chunk.len() / nf;
            for (f, (col, fc)) in matrix.columns().iter().zip(cuts.features()).enumerate() {
                match (col, fc, &code_bins[f]) {
                    (Column::Numeric(v), FeatureCuts::Numeric { thresholds }, _) => {
                        for r in 0..rows {
                            let b = FeatureCuts::bin_value(thresholds, v[start + r]);
                            chunk[r * nf + f] = T::try_from(b).unwrap();
                        }
                    }
                    (Column::Categorical { codes, .. }, _, Some(bins)) => {
                        for r in 0..rows {
                            let b = FeatureCuts::bin_code(bins, codes[start + r]);
                            chunk[r * nf + f] = T::try_from(b).unwrap();
                        }
                    }
                    _ => unreachable!("feature kinds are checked before binning"),
                }
            }
        });
}

impl BinnedMatrix {
    /// Bins every row of `matrix` with `cuts`, column by column in the cuts' order; column
    /// kinds must match, categorical levels are matched by name (unknown ones are missing).
    pub fn new(matrix: &FeatureMatrix<'_>, cuts: &Cuts) -> Result<Self> {
        if matrix.n_features() != cuts.n_features() {
            return Err(Error::SchemaMismatch(format!(
                "{} feature columns but the cuts have {}",
                matrix.n_features(),
                cuts.n_features()
            )));
        }
        for (j, (col, fc)) in matrix.columns().iter().zip(cuts.features()).enumerate() {
            if col.is_categorical() != fc.is_categorical() {
                return Err(Error::SchemaMismatch(format!(
                    "feature `{}` is {} but the model expects it {}",
                    matrix.names()[j],
                    if col.is_categorical() {
                        "categorical"
                    } else {
                        "numeric"
                    },
                    if fc.is_categorical() {
                        "categorical"
                    } else {
                        "numeric"
                    },
                )));
            }
        }
        let (n, nf) = (matrix.n_rows(), matrix.n_features());
        let bins = if cuts.max_feature_bins() <= 256 {
            let mut out = vec![0u8; n * nf];
            bin_rows(matrix, cuts, &mut out);
            Bins::U8(out)
        } else {
            let mut out = vec![0u16; n * nf];
            bin_rows(matrix, cuts, &mut out);
            Bins::U16(out)
        };
        Ok(BinnedMatrix {
            n_rows: n,
            n_features: nf,
            bins,
        })
    }

    /// A matrix from raw row-major bins (for backends and tests).
    pub fn from_bins(n_rows: usize, n_features: usize, bins: Bins) -> Result<Self> {
        let len = match &bins {
            Bins::U8(b) => b.len(),
            Bins::U16(b) => b.len(),
        };
        if len != n_rows * n_features {
            return Err(Error::LengthMismatch {
                column: "bins".into(),
                got: len,
                expected: n_rows * n_features,
            });
        }
        Ok(BinnedMatrix {
            n_rows,
            n_features,
            bins,
        })
    }

    /// A copy of the rows `range`.
    pub fn slice_rows(&self, range: std::ops::Range<usize>) -> BinnedMatrix {
        let nf = self.n_features;
        let (a, b) = (range.start * nf, range.end * nf);
        let bins = match &self.bins {
            Bins::U8(v) => Bins::U8(v[a..b].to_vec()),
            Bins::U16(v) => Bins::U16(v[a..b].to_vec()),
        };
        BinnedMatrix {
            n_rows: range.len(),
            n_features: nf,
            bins,
        }
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The storage.
    pub fn bins(&self) -> &Bins {
        &self.bins
    }

    /// Bin of (row, feature).
    #[inline]
    pub fn bin(&self, row: usize, feature: usize) -> u16 {
        let i = row * self.n_features + feature;
        match &self.bins {
            Bins::U8(b) => b[i] as u16,
            Bins::U16(b) => b[i],
        }
    }

    /// Bytes held by the bins.
    pub fn size_bytes(&self) -> usize {
        match &self.bins {
            Bins::U8(b) => b.len(),
            Bins::U16(b) => b.len() * 2,
        }
    }
}
