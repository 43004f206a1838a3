//! The bins of a sparse matrix held by column: each feature's rows whose bin is not the bin
//! of an absent value, with their bins.
//!
//! One-hot and text-like columns at 0.5% density cost their few entries this way, where
//! row-major bins cost a byte for every (row, feature): 477 MiB for 100,000 rows × 5,000
//! features, written, read back to find each feature's common bin, and checked, before the
//! first tree. A backend builds its histograms from the rows' entries and routes rows by a
//! column's entries; whatever needs row-major bins (a GPU's upload, a block of rows to
//! predict) is filled from the columns a block at a time.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::{Error, Result};

/// A matrix is held by column where its entries are at most one (row, feature) in this
/// many: the backends' sparse rows pay below that (see `backend::sparse_rows`).
pub const DENSITY_INVERSE: usize = 8;

/// Rows a task of a conversion to row-major bins fills.
const ROWS_PER_TASK: usize = 4096;

/// A sparse matrix's bins, by column.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseBins {
    n_rows: usize,
    /// whether some bin needs 16 bits (row-major copies are then u16)
    wide: bool,
    /// where each feature's entries start in `rows` and `bins`, and where the last ends
    starts: Vec<usize>,
    /// each feature's rows holding an entry, strictly ascending
    rows: Vec<u32>,
    /// their bins, none the feature's `absent` bin
    bins: Vec<u16>,
    /// each feature's bin of a row without an entry
    absent: Vec<u16>,
}

impl SparseBins {
    /// The bins of `n_rows` rows given by column: feature f's rows with their bins (rows
    /// strictly ascending, below `n_rows`), every other row in bin `absent[f]`; entries in
    /// their feature's absent bin are dropped. `wide` where some bin needs 16 bits.
    pub fn from_columns(
        n_rows: usize,
        wide: bool,
        columns: Vec<(Vec<u32>, Vec<u16>)>,
        absent: Vec<u16>,
    ) -> Result<Self> {
        if columns.len() != absent.len() {
            return Err(Error::LengthMismatch {
                column: "absent bins".into(),
                got: absent.len(),
                expected: columns.len(),
            });
        }
        let total: usize = columns.iter().map(|(r, _)| r.len()).sum();
        let mut out = SparseBins {
            n_rows,
            wide,
            starts: Vec::with_capacity(columns.len() + 1),
            rows: Vec::with_capacity(total),
            bins: Vec::with_capacity(total),
            absent,
        };
        out.starts.push(0);
        for (f, (rows, bins)) in columns.into_iter().enumerate() {
            if rows.len() != bins.len() {
                return Err(Error::LengthMismatch {
                    column: format!("bins of feature {f}"),
                    got: bins.len(),
                    expected: rows.len(),
                });
            }
            let ascending = rows.windows(2).all(|w| w[0] < w[1]);
            if !ascending || rows.last().is_some_and(|&r| r as usize >= n_rows) {
                return Err(Error::Backend(format!(
                    "feature {f}'s rows are not strictly ascending below {n_rows}"
                )));
            }
            if !wide && (bins.iter().any(|&b| b > u8::MAX as u16) || out.absent[f] > 255) {
                return Err(Error::Backend(format!(
                    "feature {f} has a bin above 255 in a matrix of byte bins"
                )));
            }
            let keep = out.absent[f];
            for (r, b) in rows.into_iter().zip(bins) {
                if b != keep {
                    out.rows.push(r);
                    out.bins.push(b);
                }
            }
            out.starts.push(out.rows.len());
        }
        Ok(out)
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Features.
    pub fn n_features(&self) -> usize {
        self.absent.len()
    }

    /// Whether some bin needs 16 bits.
    pub fn wide(&self) -> bool {
        self.wide
    }

    /// The rows `range`, borrowed.
    ///
    /// # Panics
    /// If `range` reaches past the last row.
    pub fn rows(&self, range: Range<usize>) -> SparseBinsRef<'_> {
        assert!(
            range.start <= range.end && range.end <= self.n_rows,
            "rows {range:?} of {}",
            self.n_rows
        );
        SparseBinsRef {
            bins: self,
            first: range.start,
            len: range.len(),
        }
    }
}

/// Some consecutive rows of a [`SparseBins`].
#[derive(Debug, Clone, Copy)]
pub struct SparseBinsRef<'a> {
    bins: &'a SparseBins,
    /// the first row, of the whole matrix's
    first: usize,
    len: usize,
}

impl PartialEq for SparseBinsRef<'_> {
    /// Equal bins in every (row, feature), wherever the rows lie in their storage.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.n_features() == other.n_features()
            && self.bins.wide == other.bins.wide
            && self.bins.absent == other.bins.absent
            && (0..self.n_features()).all(|f| {
                let (a, b) = (self.column(f), other.column(f));
                a.bins == b.bins
                    && a.rows
                        .iter()
                        .zip(b.rows)
                        .all(|(&x, &y)| x as usize - self.first == y as usize - other.first)
            })
    }
}

impl<'a> SparseBinsRef<'a> {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.len
    }

    /// Features.
    pub fn n_features(&self) -> usize {
        self.bins.n_features()
    }

    /// Whether some bin needs 16 bits.
    pub fn wide(&self) -> bool {
        self.bins.wide
    }

    /// Each feature's bin of a row without an entry.
    pub fn absent(&self) -> &'a [u16] {
        &self.bins.absent
    }

    /// Entries (bins other than their feature's absent one) within these rows.
    pub fn entries(&self) -> usize {
        (0..self.n_features())
            .map(|f| self.column(f).rows.len())
            .sum()
    }

    /// Feature `f`'s entries within these rows.
    ///
    /// # Panics
    /// If `f` is not a feature.
    pub fn column(&self, f: usize) -> SparseColumn<'a> {
        let s = self.bins;
        let all = s.starts[f]..s.starts[f + 1];
        let rows = &s.rows[all.clone()];
        let lo = rows.partition_point(|&r| (r as usize) < self.first);
        let hi = lo + rows[lo..].partition_point(|&r| (r as usize) < self.first + self.len);
        SparseColumn {
            rows: &rows[lo..hi],
            bins: &s.bins[all][lo..hi],
            first: self.first,
            absent: s.absent[f],
        }
    }

    /// The bin of (row, feature), rows counted from this view's first.
    ///
    /// # Panics
    /// If the row or the feature is out of range.
    pub fn bin(&self, row: usize, feature: usize) -> u16 {
        assert!(
            row < self.len && feature < self.n_features(),
            "bin ({row}, {feature}) of {} x {} bins",
            self.len,
            self.n_features()
        );
        let s = self.bins;
        let (lo, hi) = (s.starts[feature], s.starts[feature + 1]);
        let target = self.first + row;
        let i = lo + s.rows[lo..hi].partition_point(|&r| (r as usize) < target);
        match s.rows[..hi].get(i) {
            Some(&r) if r as usize == target => s.bins[i],
            _ => s.absent[feature],
        }
    }

    /// Writes the bins of rows `start..start + rows` (of this view's) into `out`: row r's
    /// bin of feature f at `r * row_step + f * feature_step`, every such place written.
    ///
    /// # Panics
    /// If the rows pass the view's end or a place `out`'s, or a bin does not fit `T` (u8
    /// where [`SparseBinsRef::wide`]).
    pub fn fill<T: Copy + TryFrom<u16>>(
        &self,
        start: usize,
        rows: usize,
        out: &mut [T],
        row_step: usize,
        feature_step: usize,
    ) where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        assert!(start + rows <= self.len, "rows past the view's end");
        let block = self
            .bins
            .rows(self.first + start..self.first + start + rows);
        let absent: Vec<T> = self
            .absent()
            .iter()
            .map(|&b| T::try_from(b).unwrap())
            .collect();
        // the absent bins in the order that writes `out` front to back
        if row_step == 1 {
            for (f, &a) in absent.iter().enumerate() {
                for r in 0..rows {
                    out[f * feature_step + r] = a;
                }
            }
        } else {
            for r in 0..rows {
                for (f, &a) in absent.iter().enumerate() {
                    out[r * row_step + f * feature_step] = a;
                }
            }
        }
        for f in 0..self.n_features() {
            let c = block.column(f);
            for (&r, &b) in c.rows.iter().zip(c.bins) {
                out[(r as usize - c.first) * row_step + f * feature_step] = T::try_from(b).unwrap();
            }
        }
    }

    /// The view's bins row-major as `T` (u16 where [`SparseBinsRef::wide`]).
    ///
    /// # Panics
    /// If a bin does not fit `T`.
    pub fn row_major_as<T: Copy + Default + Send + TryFrom<u16>>(&self) -> Vec<T>
    where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        self.row_major_with_room(0)
    }

    /// [`SparseBinsRef::row_major_as`] in a buffer with room for at least `room` bins (rows
    /// yet to be appended).
    ///
    /// # Panics
    /// If a bin does not fit `T`.
    pub fn row_major_with_room<T: Copy + Default + Send + TryFrom<u16>>(
        &self,
        room: usize,
    ) -> Vec<T>
    where
        <T as TryFrom<u16>>::Error: std::fmt::Debug,
    {
        let nf = self.n_features();
        let mut out = Vec::with_capacity(room.max(self.len * nf));
        crate::huge_pages::advise(&mut out);
        out.resize(self.len * nf, T::default());
        if nf > 0 {
            out.par_chunks_mut(ROWS_PER_TASK * nf)
                .enumerate()
                .for_each(|(t, chunk)| {
                    self.fill(t * ROWS_PER_TASK, chunk.len() / nf, chunk, nf, 1);
                });
        }
        out
    }

    /// The view's bins row-major, u16 where [`SparseBinsRef::wide`], else u8.
    pub fn to_row_major(&self) -> super::Bins {
        if self.wide() {
            super::Bins::U16(self.row_major_as())
        } else {
            super::Bins::U8(self.row_major_as())
        }
    }

    /// Bytes held for these rows (an estimate: the entries within them).
    pub fn size_bytes(&self) -> usize {
        self.entries() * (std::mem::size_of::<u32>() + std::mem::size_of::<u16>())
    }
}

/// One feature's entries within a view's rows.
#[derive(Debug, Clone, Copy)]
pub struct SparseColumn<'a> {
    /// rows holding an entry (of the whole matrix's), strictly ascending
    pub rows: &'a [u32],
    /// their bins
    pub bins: &'a [u16],
    /// the view's first row (of the whole matrix's)
    pub first: usize,
    /// the bin of every other row
    pub absent: u16,
}

impl<'a> SparseColumn<'a> {
    /// A reader of the column's bins, row after row.
    pub fn cursor(self) -> ColumnCursor<'a> {
        ColumnCursor {
            column: self,
            at: 0,
        }
    }
}

/// Reads a column's bins row after row: each step a few comparisons where the rows come
/// ascending (a node's rows do), a search where they do not.
#[derive(Debug, Clone)]
pub struct ColumnCursor<'a> {
    column: SparseColumn<'a>,
    /// the first entry whose row is not below the last row asked for
    at: usize,
}

impl ColumnCursor<'_> {
    /// The bin of `row` (counted from the view's first).
    #[inline]
    pub fn bin(&mut self, row: usize) -> u16 {
        let c = &self.column;
        let row = c.first + row;
        let below = |r: u32| (r as usize) < row;
        if self.at > 0 && !below(c.rows[self.at - 1]) {
            // a row before the last one asked for
            self.at = c.rows.partition_point(|&r| below(r));
        } else if self.at < c.rows.len() && below(c.rows[self.at]) {
            // gallop: the entries passed over lie in steps of doubling length
            let rest = &c.rows[self.at..];
            let mut step = 1;
            while step < rest.len() && below(rest[step]) {
                step *= 2;
            }
            let end = (step + 1).min(rest.len());
            self.at += rest[..end].partition_point(|&r| below(r));
        }
        match c.rows.get(self.at) {
            Some(&r) if r as usize == row => c.bins[self.at],
            _ => c.absent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::lcg;

    /// Draws from the test generator.
    struct TestRng(Box<dyn FnMut() -> u64>);

    impl TestRng {
        fn new(seed: u64) -> Self {
            TestRng(Box::new(lcg(seed)))
        }
        fn uniform(&mut self) -> f64 {
            ((self.0)() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn below(&mut self, n: u64) -> u64 {
            ((self.0)() >> 32) % n
        }
    }

    /// A random matrix of `n` rows by column, with the same bins row-major.
    fn random(n: usize, nf: usize, density: f64, wide: bool, seed: u64) -> (SparseBins, Vec<u16>) {
        let mut rng = TestRng::new(seed);
        let top = if wide { 700 } else { 255 };
        let absent: Vec<u16> = (0..nf).map(|f| (f % 3) as u16).collect();
        let mut dense = vec![0u16; n * nf];
        let mut columns = Vec::new();
        for (f, &a) in absent.iter().enumerate() {
            let (mut rows, mut bins) = (Vec::new(), Vec::new());
            for r in 0..n {
                let b = if rng.uniform() < density {
                    // an entry in the absent bin too: it is dropped
                    (rng.below(top as u64 + 1)) as u16
                } else {
                    a
                };
                dense[r * nf + f] = b;
                if b != a || rng.uniform() < 0.1 {
                    rows.push(r as u32);
                    bins.push(b);
                }
            }
            columns.push((rows, bins));
        }
        (
            SparseBins::from_columns(n, wide, columns, absent).unwrap(),
            dense,
        )
    }

    #[test]
    fn every_bin_reads_as_the_row_major_ones_in_any_view() {
        for (n, nf, density, wide) in [(0, 3, 0.1, false), (50, 7, 0.1, false), (300, 5, 0.4, true)]
        {
            let (s, dense) = random(n, nf, density, wide, n as u64 + 1);
            for range in [0..n, n / 3..n, n / 4..n / 2] {
                let v = s.rows(range.clone());
                let want = &dense[range.start * nf..range.end * nf];
                for r in 0..v.n_rows() {
                    for f in 0..nf {
                        assert_eq!(v.bin(r, f), want[r * nf + f], "({r}, {f}) of {range:?}");
                    }
                }
                let expected_entries = (0..v.n_rows() * nf)
                    .filter(|&i| want[i] != s.absent[i % nf])
                    .count();
                assert_eq!(v.entries(), expected_entries);
                match v.to_row_major() {
                    crate::data::Bins::U16(b) => assert_eq!(b, want, "row-major u16"),
                    crate::data::Bins::U8(b) => {
                        assert!(!wide);
                        let want: Vec<u8> = want.iter().map(|&b| b as u8).collect();
                        assert_eq!(b, want, "row-major u8");
                    }
                    crate::data::Bins::Sparse(_) => panic!("bins by column"),
                }
                // a block's columns, as prediction fills them, from its middle rows
                if v.n_rows() >= 4 {
                    let (start, rows, step) = (1, v.n_rows() - 2, v.n_rows());
                    let mut block = vec![u16::MAX; step * nf];
                    v.fill(start, rows, &mut block, 1, step);
                    for r in 0..rows {
                        for f in 0..nf {
                            assert_eq!(block[f * step + r], want[(start + r) * nf + f]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_cursor_reads_rows_in_any_order() {
        let (s, dense) = random(400, 2, 0.2, false, 9);
        let nf = 2;
        let v = s.rows(17..390);
        let mut rng = TestRng::new(3);
        for f in 0..nf {
            let mut cursor = v.column(f).cursor();
            // ascending with gaps, then back to earlier rows, then random
            let mut order: Vec<usize> = (0..v.n_rows()).step_by(3).collect();
            order.extend([5, 4, 370, 0, 372]);
            order.extend((0..200).map(|_| rng.below(v.n_rows() as u64) as usize));
            for r in order {
                assert_eq!(
                    cursor.bin(r),
                    dense[(17 + r) * nf + f],
                    "row {r}, feature {f}"
                );
            }
        }
    }

    #[test]
    fn views_are_equal_by_their_bins_and_bad_columns_are_refused() {
        let (s, _) = random(100, 3, 0.3, false, 4);
        let t = SparseBins::from_columns(
            50,
            false,
            (0..3)
                .map(|f| {
                    let c = s.rows(50..100).column(f);
                    (c.rows.iter().map(|&r| r - 50).collect(), c.bins.to_vec())
                })
                .collect(),
            s.absent.clone(),
        )
        .unwrap();
        assert_eq!(s.rows(50..100), t.rows(0..50));
        assert_ne!(s.rows(49..99), t.rows(0..50));
        let refused = |rows: Vec<u32>, bins: Vec<u16>, wide: bool| {
            SparseBins::from_columns(10, wide, vec![(rows, bins)], vec![0]).is_err()
        };
        assert!(refused(vec![3, 3], vec![1, 1], false), "repeated row");
        assert!(refused(vec![4, 3], vec![1, 1], false), "descending");
        assert!(refused(vec![10], vec![1], false), "past the rows");
        assert!(refused(vec![1], vec![256], false), "a wide bin in bytes");
        assert!(refused(vec![1], vec![1, 2], false), "lengths");
        assert!(!refused(vec![1], vec![256], true));
        let absent_wide = SparseBins::from_columns(10, false, vec![(vec![], vec![])], vec![300]);
        assert!(absent_wide.is_err(), "a wide absent bin in bytes");
    }
}
