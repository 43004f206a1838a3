//! Binning raw columns with cuts ([`Binner`], into any layout), and the binned matrix: one
//! small integer per (row, feature), row-major, or by column for sparse data.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::data::bin_search::{BinSearch, LANES};
use crate::data::cuts::{Cuts, FeatureCuts};
use crate::data::matrix::{Column, FeatureMatrix};
use crate::data::sparse_bins::{self, SparseBins, SparseBinsRef};
use crate::error::{Error, Result};

/// Bin storage: u8 when every feature has at most 256 bins, else u16; or by column where
/// the data is sparse.
#[derive(Debug, Clone, PartialEq)]
pub enum Bins {
    /// One byte per entry, row-major.
    U8(Vec<u8>),
    /// Two bytes per entry, row-major.
    U16(Vec<u16>),
    /// Each feature's rows outside its absent bin.
    Sparse(SparseBins),
}

/// Borrowed bins of a matrix's rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinsRef<'a> {
    /// One byte per entry, row-major.
    U8(&'a [u8]),
    /// Two bytes per entry, row-major.
    U16(&'a [u16]),
    /// By column.
    Sparse(SparseBinsRef<'a>),
}

impl Bins {
    /// The bins, borrowed.
    pub fn view(&self) -> BinsRef<'_> {
        match self {
            Bins::U8(b) => BinsRef::U8(b),
            Bins::U16(b) => BinsRef::U16(b),
            Bins::Sparse(s) => BinsRef::Sparse(s.rows(0..s.n_rows())),
        }
    }
}

/// Borrowed row-major bins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowMajor<'a> {
    /// One byte per entry.
    U8(&'a [u8]),
    /// Two bytes per entry.
    U16(&'a [u16]),
}

/// Row-major copies of bins held by column ([`BinsRef::row_major`]).
#[derive(Debug, Default)]
pub struct HeldRows {
    u8: Vec<u8>,
    u16: Vec<u16>,
}

impl<'a> BinsRef<'a> {
    /// These bins row-major: themselves where they are so, else a copy kept in `held`
    /// (for code that reads whole rows of bins: a GPU's upload, a stream of batches).
    pub fn row_major(self, held: &'a mut HeldRows) -> RowMajor<'a> {
        match self {
            BinsRef::U8(b) => RowMajor::U8(b),
            BinsRef::U16(b) => RowMajor::U16(b),
            BinsRef::Sparse(s) if s.wide() => {
                held.u16 = s.row_major_as();
                RowMajor::U16(&held.u16)
            }
            BinsRef::Sparse(s) => {
                held.u8 = s.row_major_as();
                RowMajor::U8(&held.u8)
            }
        }
    }
}

/// Rows of bins; row r's bins are `[r * n_features, (r + 1) * n_features)` of
/// [`BinnedMatrix::bins`] where they are row-major. A matrix may be a view of some rows of another's storage
/// ([`BinnedMatrix::slice_rows`]): the workers of one process share one binned matrix.
#[derive(Debug, Clone)]
pub struct BinnedMatrix {
    n_rows: usize,
    n_features: usize,
    /// the first row of this matrix in `bins`
    first_row: usize,
    bins: Arc<Bins>,
}

impl PartialEq for BinnedMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.n_rows == other.n_rows
            && self.n_features == other.n_features
            && match (self.bins(), other.bins()) {
                (a @ BinsRef::Sparse(_), b) | (a, b @ BinsRef::Sparse(_))
                    if std::mem::discriminant(&a) != std::mem::discriminant(&b) =>
                {
                    let (mut x, mut y) = (HeldRows::default(), HeldRows::default());
                    a.row_major(&mut x) == b.row_major(&mut y)
                }
                (a, b) => a == b,
            }
    }
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

/// How each column of a matrix is binned with some cuts, prepared once (checked kinds,
/// level codes matched by name, thresholds laid out for search) and applied to any rows.
pub struct Binner<'m> {
    matrix: &'m FeatureMatrix<'m>,
    cuts: &'m Cuts,
    code_bins: Vec<Option<Vec<u16>>>,
    searches: Vec<Option<BinSearch>>,
}

impl<'m> Binner<'m> {
    /// The binning of `matrix`'s columns with `cuts`, in the cuts' order; column kinds must
    /// match, categorical levels are matched by name (unknown ones are missing).
    pub fn new(matrix: &'m FeatureMatrix<'m>, cuts: &'m Cuts) -> Result<Self> {
        if matrix.n_features() != cuts.n_features() {
            return Err(Error::SchemaMismatch(format!(
                "{} feature columns but the cuts have {}",
                matrix.n_features(),
                cuts.n_features()
            )));
        }
        for (j, (col, fc)) in matrix.columns().iter().zip(cuts.features()).enumerate() {
            if col.is_categorical() != fc.is_categorical() {
                let kind = |c: bool| if c { "categorical" } else { "numeric" };
                return Err(Error::SchemaMismatch(format!(
                    "feature `{}` is {} but the model expects it {}",
                    matrix.names()[j],
                    kind(col.is_categorical()),
                    kind(fc.is_categorical()),
                )));
            }
        }
        let searches = cuts
            .features()
            .iter()
            .map(|fc| match fc {
                FeatureCuts::Numeric { thresholds } => BinSearch::new(thresholds),
                FeatureCuts::Categorical { .. } => None,
            })
            .collect();
        Ok(Binner {
            matrix,
            cuts,
            code_bins: code_bins(matrix, cuts),
            searches,
        })
    }

    /// Rows of the matrix.
    pub fn n_rows(&self) -> usize {
        self.matrix.n_rows()
    }

    /// Features of the matrix.
    pub fn n_features(&self) -> usize {
        self.matrix.n_features()
    }

    /// Whether some feature has more than 256 bins (its bins need 16 bits).
    pub fn wide(&self) -> bool {
        self.cuts.max_feature_bins() > 256
    }

    /// Every row's bins by column, where every column is sparse and holds at most one
    /// (row, feature) in [`sparse_bins::DENSITY_INVERSE`]; none otherwise.
    pub fn sparse_bins(&self) -> Option<Result<SparseBins>> {
        let (n, nf) = (self.n_rows(), self.n_features());
        let columns = self.matrix.columns();
        let mut entries = 0usize;
        for col in columns {
            entries += col.sparse_entries(0..n)?.len();
        }
        let dense = entries.checked_mul(sparse_bins::DENSITY_INVERSE)? > n.checked_mul(nf)?;
        if n == 0 || nf == 0 || dense || entries > u32::MAX as usize {
            return None;
        }
        let by_column: Vec<(Vec<u32>, Vec<u16>, u16)> = columns
            .par_iter()
            .zip(self.cuts.features())
            .zip(&self.searches)
            .map(|((col, fc), search)| {
                let bin = |x: f32| match (search, fc) {
                    (Some(s), _) => s.bin(x),
                    (None, FeatureCuts::Numeric { thresholds }) => {
                        FeatureCuts::bin_value(thresholds, x)
                    }
                    // sparse columns are numeric (checked in `Binner::new`)
                    (None, FeatureCuts::Categorical { .. }) => 0,
                };
                let absent = bin(f32::NAN);
                let (mut rows, mut bins) = (Vec::new(), Vec::new());
                for (r, x) in col.sparse_entries(0..n).into_iter().flatten() {
                    let b = bin(x);
                    if b != absent {
                        rows.push(r as u32);
                        bins.push(b);
                    }
                }
                (rows, bins, absent)
            })
            .collect();
        let absent = by_column.iter().map(|c| c.2).collect();
        let by_column = by_column.into_iter().map(|(r, b, _)| (r, b)).collect();
        Some(SparseBins::from_columns(n, self.wide(), by_column, absent))
    }

    /// Bins rows `start..start + rows` into `out`: row r's bin of feature f at `r *
    /// row_step + f * feature_step` (row-major: `nf`, 1; a block's columns: 1, its length).
    ///
    /// # Panics
    /// If the rows pass the matrix's end or a position `out`'s, or a bin does not fit `T`
    /// (u8 where [`Binner::wide`]).
    pub fn bin_into<T: Copy + TryFrom<u16>>(
        &self,
        start: usize,
        rows: usize,
        out: &mut [T],
        row_step: usize,
        feature_step: usize,
    ) where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        self.bin_into_over(start, rows, out, row_step, feature_step, false)
    }

    /// [`Binner::bin_into`]; where `zeroed` (every entry of `out` it would write is 0, the
    /// missing bin), a run of [`LANES`] missing values is passed over: a sparse column is
    /// mostly such runs, and writing rows of many features scatters its bins.
    fn bin_into_over<T: Copy + TryFrom<u16>>(
        &self,
        start: usize,
        rows: usize,
        out: &mut [T],
        row_step: usize,
        feature_step: usize,
        zeroed: bool,
    ) where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        let columns = self.matrix.columns().iter().zip(self.cuts.features());
        for (f, (col, fc)) in columns.enumerate() {
            let mut put = |r: usize, b: u16| {
                out[r * row_step + f * feature_step] = T::try_from(b).unwrap();
            };
            match (col, fc, &self.code_bins[f]) {
                (Column::Numeric(v), FeatureCuts::Numeric { thresholds }, _) => {
                    let v = &v[start..start + rows];
                    match &self.searches[f] {
                        Some(s) => {
                            let mut lanes = v.chunks_exact(LANES);
                            for (i, x) in (&mut lanes).enumerate() {
                                // `fold` rather than `all`: no early exit, so in lanes
                                if zeroed && x.iter().fold(true, |m, v| m & v.is_nan()) {
                                    continue;
                                }
                                let x = x.try_into().expect("a chunk of LANES");
                                for (j, b) in s.bins(x).into_iter().enumerate() {
                                    put(i * LANES + j, b);
                                }
                            }
                            let done = v.len() - lanes.remainder().len();
                            for (r, &x) in lanes.remainder().iter().enumerate() {
                                put(done + r, s.bin(x));
                            }
                        }
                        None => {
                            for (r, &x) in v.iter().enumerate() {
                                put(r, FeatureCuts::bin_value(thresholds, x));
                            }
                        }
                    }
                }
                (Column::Categorical { codes, .. }, _, Some(bins)) => {
                    for (r, &c) in codes[start..start + rows].iter().enumerate() {
                        put(r, FeatureCuts::bin_code(bins, c));
                    }
                }
                (Column::Sparse { .. }, FeatureCuts::Numeric { thresholds }, _) => {
                    let bin = |x: f32| match &self.searches[f] {
                        Some(s) => s.bin(x),
                        None => FeatureCuts::bin_value(thresholds, x),
                    };
                    if !zeroed {
                        let missing = bin(f32::NAN);
                        for r in 0..rows {
                            put(r, missing);
                        }
                    }
                    let entries = col.sparse_entries(start..start + rows);
                    for (r, x) in entries.into_iter().flatten() {
                        put(r - start, bin(x));
                    }
                }
                _ => unreachable!("feature kinds are checked in Binner::new"),
            }
        }
    }

    /// Asks for the raw values of rows `start..start + rows` to be brought into the
    /// second-level cache (a block of rows reads a short piece of every column: more
    /// streams than the hardware prefetcher follows; not the first level, which a block
    /// of many features would overflow). Rows past the end are ignored.
    #[allow(unsafe_code)]
    pub fn prefetch(&self, start: usize, rows: usize) {
        // a cache line holds this many values
        const LINE: usize = 16;
        for col in self.matrix.columns() {
            let (base, len) = match col {
                Column::Numeric(v) => (v.as_ptr(), v.len()),
                Column::Categorical { codes, .. } => (codes.as_ptr().cast(), codes.len()),
                // a block's few entries of a sparse column are found by search
                Column::Sparse { .. } => continue,
            };
            let end = (start + rows).min(len);
            if start >= end {
                continue;
            }
            // every line of the rows, the last one's too where the start is not aligned
            for r in (start..end).step_by(LINE).chain([end - 1]) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: prefetching is a hint and never faults, whatever the address.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
                    _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(r).cast());
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (base, r);
            }
        }
    }

    /// Bins every row, row-major, in tasks of [`ROWS_PER_TASK`] rows, into `out`, whose
    /// entries are all 0.
    fn bin_rows<T: Copy + Send + TryFrom<u16>>(&self, out: &mut [T])
    where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        let nf = self.n_features();
        out.par_chunks_mut(ROWS_PER_TASK * nf)
            .enumerate()
            .for_each(|(task, chunk)| {
                // `BinnedMatrix::new` hands over zeroed storage
                self.bin_into_over(task * ROWS_PER_TASK, chunk.len() / nf, chunk, nf, 1, true);
            });
    }
}

impl BinnedMatrix {
    /// Bins every row of `matrix` with `cuts`, column by column in the cuts' order; column
    /// kinds must match, categorical levels are matched by name (unknown ones are missing).
    /// A matrix of sparse columns few enough entries is binned by column
    /// ([`Binner::sparse_bins`]).
    pub fn new(matrix: &FeatureMatrix<'_>, cuts: &Cuts) -> Result<Self> {
        let binner = Binner::new(matrix, cuts)?;
        let (n, nf) = (matrix.n_rows(), matrix.n_features());
        let bins = if let Some(sparse) = binner.sparse_bins() {
            Bins::Sparse(sparse?)
        } else if binner.wide() {
            let mut out = crate::huge_pages::filled(n * nf, 0u16);
            binner.bin_rows(&mut out);
            Bins::U16(out)
        } else {
            let mut out = crate::huge_pages::filled(n * nf, 0u8);
            binner.bin_rows(&mut out);
            Bins::U8(out)
        };
        Ok(BinnedMatrix {
            n_rows: n,
            n_features: nf,
            first_row: 0,
            bins: Arc::new(bins),
        })
    }

    /// A matrix from raw bins (for backends and tests).
    pub fn from_bins(n_rows: usize, n_features: usize, bins: Bins) -> Result<Self> {
        let len = match &bins {
            Bins::U8(b) => b.len(),
            Bins::U16(b) => b.len(),
            Bins::Sparse(s) if s.n_features() != n_features => {
                return Err(Error::LengthMismatch {
                    column: "features of the sparse bins".into(),
                    got: s.n_features(),
                    expected: n_features,
                })
            }
            Bins::Sparse(s) if s.n_rows() != n_rows => {
                return Err(Error::LengthMismatch {
                    column: "rows of the sparse bins".into(),
                    got: s.n_rows(),
                    expected: n_rows,
                })
            }
            Bins::Sparse(_) => n_rows * n_features,
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
            first_row: 0,
            bins: Arc::new(bins),
        })
    }

    /// The rows `range` (of this matrix's rows), sharing this matrix's storage: no bin
    /// is copied.
    ///
    /// # Panics
    /// If `range` reaches past the last row.
    pub fn slice_rows(&self, range: std::ops::Range<usize>) -> BinnedMatrix {
        assert!(
            range.start <= range.end && range.end <= self.n_rows,
            "rows {range:?} of a matrix of {}",
            self.n_rows
        );
        BinnedMatrix {
            n_rows: range.len(),
            n_features: self.n_features,
            first_row: self.first_row + range.start,
            bins: self.bins.clone(),
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

    /// The bins of this matrix's rows, row-major or by column.
    #[inline]
    pub fn bins(&self) -> BinsRef<'_> {
        let range =
            self.first_row * self.n_features..(self.first_row + self.n_rows) * self.n_features;
        match &*self.bins {
            Bins::U8(b) => BinsRef::U8(&b[range]),
            Bins::U16(b) => BinsRef::U16(&b[range]),
            Bins::Sparse(s) => {
                BinsRef::Sparse(s.rows(self.first_row..self.first_row + self.n_rows))
            }
        }
    }

    /// Whether the bins are held by column ([`Bins::Sparse`]).
    pub fn is_sparse(&self) -> bool {
        matches!(&*self.bins, Bins::Sparse(_))
    }

    /// Bin of (row, feature).
    #[inline]
    pub fn bin(&self, row: usize, feature: usize) -> u16 {
        // past this view's rows lie another view's: out of range is a bug, not a read
        assert!(
            row < self.n_rows && feature < self.n_features,
            "bin ({row}, {feature}) of a {} x {} matrix",
            self.n_rows,
            self.n_features
        );
        let i = (self.first_row + row) * self.n_features + feature;
        match &*self.bins {
            Bins::U8(b) => b[i] as u16,
            Bins::U16(b) => b[i],
            Bins::Sparse(s) => s
                .rows(self.first_row..self.first_row + self.n_rows)
                .bin(row, feature),
        }
    }

    /// Bytes held by this matrix's rows.
    pub fn size_bytes(&self) -> usize {
        match self.bins() {
            BinsRef::U8(b) => b.len(),
            BinsRef::U16(b) => b.len() * 2,
            BinsRef::Sparse(s) => s.size_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_of_rows_shares_the_storage_and_reads_those_rows() {
        let (n, nf) = (10, 3);
        let all: Vec<u8> = (0..(n * nf) as u8).collect();
        let m = BinnedMatrix::from_bins(n, nf, Bins::U8(all.clone())).unwrap();
        let s = m.slice_rows(2..7);
        assert!(Arc::ptr_eq(&m.bins, &s.bins), "no copy");
        assert_eq!(s.n_rows(), 5);
        assert_eq!(s.bins(), BinsRef::U8(&all[6..21]));
        assert_eq!(s.size_bytes(), 15);
        // a slice of a slice counts from its own first row
        let t = s.slice_rows(1..3);
        assert_eq!(t.bins(), BinsRef::U8(&all[9..15]));
        assert_eq!(t.bin(1, 2), all[14] as u16);
        // equal rows are equal matrices, whatever storage they view
        let copy = BinnedMatrix::from_bins(2, nf, Bins::U8(all[9..15].to_vec())).unwrap();
        assert_eq!(t, copy);
        assert_ne!(t, m.slice_rows(0..2));
        assert_eq!(m.slice_rows(4..4).n_rows(), 0);
    }

    #[test]
    fn runs_of_missing_values_bin_as_every_value_does() {
        // columns with runs of NaN longer and shorter than a lane block, values between,
        // and one feature with more thresholds than the binary search (not strictly
        // increasing: the lanes search leaves those to it) and one past 256 (parts)
        let n = 5 * LANES + 13;
        let col = |j: usize| -> Vec<f32> {
            (0..n)
                .map(|r| match (r / (LANES / 2 + j)) % 3 {
                    0 => f32::NAN,
                    _ if r % 5 == j % 5 => f32::NAN,
                    _ => (r * (j + 3)) as f32 / 7.0 - 20.0,
                })
                .collect()
        };
        let features = vec![
            FeatureCuts::Numeric {
                thresholds: vec![-10.0, 0.0, 5.0, 40.0],
            },
            FeatureCuts::Numeric {
                thresholds: (0..300).map(|t| t as f32 / 3.0 - 20.0).collect(),
            },
            FeatureCuts::Numeric {
                thresholds: vec![1.0],
            },
            FeatureCuts::Numeric {
                thresholds: (0..300).map(|t| (t / 2) as f32 / 1.5 - 20.0).collect(),
            },
        ];
        let nf = features.len();
        let cuts = Cuts::new(features);
        let names = (0..nf).map(|j| format!("f{j}")).collect();
        let columns = (0..nf).map(|j| Column::Numeric(col(j).into())).collect();
        let matrix = FeatureMatrix::new(names, columns).unwrap();
        let binned = BinnedMatrix::new(&matrix, &cuts).unwrap();
        let binner = Binner::new(&matrix, &cuts).unwrap();
        // the plain path, into storage that is not zero
        let mut plain = vec![9u16; n * nf];
        binner.bin_into(0, n, &mut plain, nf, 1);
        let got: Vec<u16> = (0..n * nf).map(|i| binned.bin(i / nf, i % nf)).collect();
        assert_eq!(got, plain);
        // each value as the cuts bin it, one at a time
        for (i, &b) in plain.iter().enumerate() {
            let (r, f) = (i / nf, i % nf);
            let FeatureCuts::Numeric { thresholds } = &cuts.features()[f] else {
                unreachable!("numeric")
            };
            assert_eq!(
                b,
                FeatureCuts::bin_value(thresholds, col(f)[r]),
                "row {r}, feature {f}"
            );
        }
        assert!(
            plain.iter().filter(|&&b| b == 0).count() > n,
            "missing runs were there"
        );
    }

    #[test]
    #[should_panic(expected = "rows 3..6 of a matrix of 5")]
    fn a_slice_past_the_last_row_panics() {
        let m = BinnedMatrix::from_bins(5, 1, Bins::U16(vec![1; 5])).unwrap();
        let _ = m.slice_rows(3..6);
    }

    #[test]
    fn sparse_columns_few_enough_are_binned_by_column_with_the_same_bins() {
        use std::borrow::Cow;
        let n = 1000;
        // feature f holds rows f, f + 40, ... (a fortieth of the rows), a stored NaN and zero
        let sparse = |f: usize| {
            let rows: Vec<u32> = (f..n).step_by(40).map(|r| r as u32).collect();
            let values: Vec<f32> = rows
                .iter()
                .map(|&r| match r % 7 {
                    0 => f32::NAN,
                    1 => 0.0,
                    _ => (r % 13) as f32,
                })
                .collect();
            Column::Sparse {
                len: n,
                start: 0,
                rows: Cow::Owned(rows),
                values: Cow::Owned(values),
            }
        };
        let dense_of =
            |c: &Column<'_>| Column::Numeric(c.dense_values().unwrap().into_owned().into());
        let names = |k: usize| (0..k).map(|f| format!("f{f}")).collect::<Vec<_>>();
        let thresholds = FeatureCuts::Numeric {
            thresholds: vec![0.0, 2.0, 5.0, 9.0],
        };
        let cuts = |k: usize| Cuts::new(vec![thresholds.clone(); k]);
        let matrix = |columns: Vec<Column<'static>>| {
            let k = columns.len();
            FeatureMatrix::new(names(k), columns).unwrap()
        };
        let (c4, c6) = (cuts(4), cuts(6));
        let all: Vec<Column<'static>> = (0..4).map(sparse).collect();
        let by_column = BinnedMatrix::new(&matrix(all.clone()), &c4).unwrap();
        assert!(
            by_column.is_sparse(),
            "every column sparse, a fortieth of the rows"
        );
        let row_major =
            BinnedMatrix::new(&matrix(all.iter().map(dense_of).collect()), &c4).unwrap();
        assert!(!row_major.is_sparse());
        assert!(by_column == row_major, "the same bins");
        for (r, f) in [(0, 0), (40, 0), (41, 1), (42, 1), (999, 3), (963, 3)] {
            assert_eq!(by_column.bin(r, f), row_major.bin(r, f), "({r}, {f})");
        }
        let (a, b) = (
            by_column.slice_rows(300..700),
            row_major.slice_rows(300..700),
        );
        assert!(a == b, "a slice of rows");
        assert_eq!(a.bin(1, 1), b.bin(1, 1));
        // a dense column among them, or entries past one in eight: row-major
        let mut mixed = all.clone();
        mixed.push(dense_of(&sparse(5)));
        mixed.push(sparse(4));
        assert!(!BinnedMatrix::new(&matrix(mixed), &c6).unwrap().is_sparse());
        let full = |f: usize| Column::Sparse {
            len: n,
            start: 0,
            rows: Cow::Owned((0..n as u32).filter(|r| r % 2 == f as u32 % 2).collect()),
            values: Cow::Owned(vec![3.0; n / 2]),
        };
        let crowded: Vec<Column<'static>> = (0..4).map(sparse).chain([full(0), full(1)]).collect();
        assert!(!BinnedMatrix::new(&matrix(crowded), &c6)
            .unwrap()
            .is_sparse());
    }
}
