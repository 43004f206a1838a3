//! Histogram entries: what every backend builds and every worker sums.
//!
//! A node's histogram is `total_bins` entries, the features' bins one after another at the
//! cuts' offsets (bin 0 of each feature holds its missing values). Entries are integers in
//! the tree's quantisation units, so any order of summation gives the same bits.

/// (Σg, Σh) of the rows in one bin, in that order.
pub type HistBin = [i64; 2];

/// The sum of two entries.
#[inline]
pub fn add(a: HistBin, b: HistBin) -> HistBin {
    [a[0] + b[0], a[1] + b[1]]
}

/// `a` minus `b`: a sibling's entry from its parent's and its built twin's.
#[inline]
pub fn sub(a: HistBin, b: HistBin) -> HistBin {
    [a[0] - b[0], a[1] - b[1]]
}

/// The node's (Σg, Σh): the sum of any one feature's bins (every row falls in one bin of
/// each feature), taken from the first.
pub fn node_sums(hist: &[HistBin], offsets: &[u32]) -> HistBin {
    let end = offsets.get(1).map_or(0, |&e| e as usize);
    hist[..end].iter().fold([0, 0], |a, &e| add(a, e))
}
