//! Everything about a shard that is not a kernel launch, written once for every backend:
//! input validation, the node → row-span bookkeeping ([`NodeSpans`]), the kernel list and
//! the scalars each kernel is given ([`kernels`]). A backend adds allocation, launches and
//! read-backs.

mod encoded;
mod host;
pub mod kernels;
mod spans;

pub use encoded::{check_blocks, group_offsets, message_count, split_messages};
pub use host::{
    check_gradients, gradients_into, larger_of, rows_of_groups, square_sum, square_terms,
};
pub use spans::{NodeSpans, Span};

use rayon::prelude::*;

use super::kernel::BinValue;
use super::ShardData;
use crate::data::binned::BinsRef;
use crate::error::{Error, Result};

/// The sizes of a validated shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardShape {
    /// Rows.
    pub n: usize,
    /// Features.
    pub nf: usize,
    /// Output groups (margins per row).
    pub k: usize,
    /// Histogram bins over all features.
    pub total_bins: usize,
}

/// What a backend can hold, beyond what every backend needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardLimits {
    /// Most rows (row indices are u32; kernels may need headroom).
    pub max_rows: usize,
    /// Most output groups.
    pub max_groups: usize,
}

impl Default for ShardLimits {
    fn default() -> Self {
        ShardLimits {
            max_rows: u32::MAX as usize,
            max_groups: usize::MAX,
        }
    }
}

/// Checks a shard before a backend is built on it: lengths of labels, weights, base margins
/// and offsets, the backend's limits, and every bin inside its feature's histogram (kernels
/// index histograms without checks).
pub fn validate(s: &ShardData, limits: ShardLimits) -> Result<ShardShape> {
    let (n, nf) = (s.binned.n_rows(), s.binned.n_features());
    let k = s.objective.groups();
    for (column, got) in [
        ("label", Some(s.labels.len())),
        ("weight", s.weights.as_ref().map(Vec::len)),
    ] {
        if let Some(got) = got.filter(|&g| g != n) {
            return Err(Error::LengthMismatch {
                column: column.into(),
                got,
                expected: n,
            });
        }
    }
    if s.base_margin.len() != k {
        return Err(Error::Backend(format!(
            "{} base margins for {k} groups",
            s.base_margin.len()
        )));
    }
    if s.offsets.len() != nf + 1 {
        return Err(Error::Backend(format!(
            "{} offsets for {nf} features",
            s.offsets.len()
        )));
    }
    if s.offsets.first().is_some_and(|&o| o != 0) || s.offsets.windows(2).any(|w| w[1] < w[0]) {
        // the kernels index a feature's bins from offsets[f] − offsets[0] and cut a node's
        // histogram by the differences
        return Err(Error::Backend(format!(
            "histogram offsets must start at 0 and never decrease: {:?}",
            &s.offsets[..s.offsets.len().min(8)]
        )));
    }
    if n > limits.max_rows {
        return Err(Error::Backend(format!(
            "a shard of {n} rows is too large for this backend's 32-bit row indices \
             (at most {}: use more workers)",
            limits.max_rows
        )));
    }
    if k > limits.max_groups {
        return Err(Error::Backend(format!(
            "this backend handles up to {} classes, not {k}",
            limits.max_groups
        )));
    }
    let widths: Vec<usize> = s
        .offsets
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) as usize)
        .collect();
    let ok = match s.binned.bins() {
        BinsRef::U8(b) => bins_in_range(b, &widths),
        BinsRef::U16(b) => bins_in_range(b, &widths),
        BinsRef::Sparse(b) => (0..nf).into_par_iter().all(|f| {
            let (c, w) = (b.column(f), widths.get(f).copied().unwrap_or(0));
            (c.absent as usize) < w && c.bins.iter().all(|&x| (x as usize) < w)
        }),
    };
    if !ok {
        return Err(Error::Backend(
            "a bin lies outside its feature's histogram".into(),
        ));
    }
    Ok(ShardShape {
        n,
        nf,
        k,
        total_bins: *s.offsets.last().unwrap_or(&0) as usize,
    })
}

fn bins_in_range<B: BinValue>(bins: &[B], widths: &[usize]) -> bool {
    bins.par_chunks(widths.len().max(1))
        .all(|row| row.iter().zip(widths).all(|(b, &w)| b.index() < w))
}

/// Checks that `out` holds `nodes` histograms of `total_bins` bins.
pub fn check_hist_len(out_len: usize, nodes: usize, total_bins: usize) -> Result<()> {
    if out_len != nodes * total_bins {
        return Err(Error::Backend(format!(
            "histogram buffer of {out_len} bins for {nodes} nodes of {total_bins}"
        )));
    }
    Ok(())
}

/// Checks a group index against the shard's groups.
pub fn check_group(group: usize, k: usize) -> Result<()> {
    if group >= k {
        return Err(Error::Backend(format!("group {group} of {k}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::binned::{BinnedMatrix, Bins};
    use crate::objective::{Objective, ObjectiveKind};
    use std::sync::Arc;

    fn shard_with(offsets: Vec<u32>) -> ShardData {
        // two rows, two features, bins 0 and 1
        let binned = BinnedMatrix::from_bins(2, 2, Bins::U8(vec![0, 1, 1, 0])).unwrap();
        ShardData {
            binned: Arc::new(binned),
            offsets,
            labels: vec![0.0, 1.0],
            weights: None,
            objective: Objective::new(ObjectiveKind::SquaredError, 1).unwrap(),
            base_margin: vec![0.0],
            initial_margins: None,
            row_offset: 0,
        }
    }

    #[test]
    fn offsets_must_start_at_zero_and_never_decrease() {
        let limits = ShardLimits::default();
        assert_eq!(
            validate(&shard_with(vec![0, 2, 4]), limits)
                .unwrap()
                .total_bins,
            4
        );
        for bad in [vec![5, 7, 9], vec![0, 4, 2]] {
            let e = validate(&shard_with(bad.clone()), limits)
                .unwrap_err()
                .to_string();
            assert!(e.contains("offsets must start at 0"), "{bad:?}: {e}");
        }
        let e = validate(&shard_with(vec![0, 1, 2]), limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside its feature"), "{e}");
    }
}
