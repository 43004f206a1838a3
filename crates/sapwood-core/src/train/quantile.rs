//! Exact weighted quantiles over every worker's rows, for the losses whose leaves (and base
//! margin) are a quantile of residuals: `reg:absoluteerror` and `reg:quantileerror`.
//!
//! Each quantile is selected by radix over the order-preserving bits of f32, eight bits per
//! pass: every worker counts its rows' weights per (slot, byte) and one integer allreduce
//! sums them. Weights are fixed point with an agreed scale, so every sum is exact and the
//! selected value is the same however rows are sharded. The α-quantile is the smallest value
//! v with W(x <= v) >= α W (the lower weighted quantile).

use rayon::prelude::*;

use crate::collective::Collective;
use crate::error::Result;
use crate::objective::ftz;
use crate::quantise::{exact_shift, quantise_exact, EXACT_SUM_BITS};
use crate::tree::Tree;

use super::host::HostRows;

/// Bits selected per pass.
const RADIX_BITS: u32 = 8;
const BUCKETS: usize = 1 << RADIX_BITS;
/// A row in no slot.
pub const NO_SLOT: u32 = u32::MAX;

/// An f32 as a u32 whose unsigned order is the order of the values (-0 before +0).
#[inline]
fn key_of(v: f32) -> u32 {
    let b = v.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

#[inline]
fn value_of(key: u32) -> f32 {
    if key >> 31 == 1 {
        f32::from_bits(key & 0x7fff_ffff)
    } else {
        f32::from_bits(!key)
    }
}

/// The `alpha`-quantile of `values` in each of `slots` slots (row i belongs to slot
/// `slot_of[i]`, or none with [`NO_SLOT`]), weighted by `weights`, over every worker; `None`
/// for a slot without weight. NaN values must not occur. Every worker calls it with its own
/// rows and gets the same result.
pub fn weighted_quantiles(
    slot_of: &[u32],
    values: &[f32],
    weights: Option<&[f32]>,
    slots: usize,
    alpha: f64,
    n_total: u64,
    collective: &mut dyn Collective,
) -> Result<Vec<Option<f32>>> {
    let local_max = weights.map_or(1.0, |w| w.iter().fold(0.0f32, |m, &v| m.max(v)));
    let mut max = [local_max.to_bits() as u64];
    collective.allreduce_max(&mut max)?;
    let shift = exact_shift(f32::from_bits(max[0] as u32), n_total);
    let weight_of = |i: usize| weights.map_or(1, |w| quantise_exact(w[i], shift));
    let bound = 1u64 << EXACT_SUM_BITS;
    let keys: Vec<u32> = values.par_iter().map(|&v| key_of(v)).collect();

    let mut totals = vec![0i64; slots];
    for (i, &s) in slot_of.iter().enumerate() {
        if s != NO_SLOT {
            totals[s as usize] += weight_of(i);
        }
    }
    collective.allreduce_sum(&mut totals, bound)?;
    // per slot: the bits chosen so far, and the weight still to pass within them
    let mut prefix = vec![0u32; slots];
    let mut remaining: Vec<i64> = totals
        .iter()
        .map(|&t| ((alpha * t as f64).ceil() as i64).clamp(1, t.max(1)))
        .collect();
    for pass in 0..(32 / RADIX_BITS) {
        let shift_bits = 32 - RADIX_BITS * (pass + 1);
        let high_mask = if pass == 0 {
            0
        } else {
            u32::MAX << (shift_bits + RADIX_BITS)
        };
        let mut counts = (0..slot_of.len())
            .into_par_iter()
            .with_min_len(1 << 14)
            .fold(
                || vec![0i64; slots * BUCKETS],
                |mut acc, i| {
                    let s = slot_of[i];
                    if s != NO_SLOT && keys[i] & high_mask == prefix[s as usize] {
                        let b = ((keys[i] >> shift_bits) as usize) & (BUCKETS - 1);
                        acc[s as usize * BUCKETS + b] += weight_of(i);
                    }
                    acc
                },
            )
            .reduce(
                || vec![0i64; slots * BUCKETS],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        collective.allreduce_sum(&mut counts, bound)?;
        for s in 0..slots {
            if totals[s] <= 0 {
                continue;
            }
            let row = &counts[s * BUCKETS..(s + 1) * BUCKETS];
            let mut chosen = BUCKETS - 1;
            for (b, &c) in row.iter().enumerate() {
                if c >= remaining[s] {
                    chosen = b;
                    break;
                }
                remaining[s] -= c;
            }
            prefix[s] |= (chosen as u32) << shift_bits;
        }
    }
    Ok((0..slots)
        .map(|s| (totals[s] > 0).then(|| value_of(prefix[s])))
        .collect())
}

/// Sets every leaf of `tree` (fitting `group`) to `learning_rate` times the `alpha`-quantile
/// of the residuals (label - margin) of its rows over every worker, as XGBoost and LightGBM
/// do for absolute and quantile losses. `margins` holds `k` values per row, before the tree
/// is added. A leaf without rows keeps its value.
#[allow(clippy::too_many_arguments)]
pub fn refit_leaves(
    tree: &mut Tree,
    rows: &HostRows<'_>,
    margins: &[f32],
    group: usize,
    k: usize,
    alpha: f64,
    learning_rate: f64,
    n_total: u64,
    collective: &mut dyn Collective,
) -> Result<()> {
    let n = rows.labels.len();
    let slot_of: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| tree.leaf_of_binned(rows.binned, i).0)
        .collect();
    let residuals: Vec<f32> = (0..n)
        .into_par_iter()
        .map(|i| ftz(ftz(rows.labels[i]) - ftz(margins[i * k + group])))
        .collect();
    let q = weighted_quantiles(
        &slot_of,
        &residuals,
        rows.weights,
        tree.nodes.len(),
        alpha,
        n_total,
        collective,
    )?;
    for (node, q) in tree.nodes.iter_mut().zip(q) {
        if let (None, Some(q)) = (&node.split, q) {
            node.value = ftz((q as f64 * learning_rate) as f32);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::SingleWorker as Single;

    fn brute(values: &[f32], weights: &[f32], alpha: f64) -> f32 {
        let mut pairs: Vec<(f32, f32)> = values
            .iter()
            .copied()
            .zip(weights.iter().copied())
            .collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 = weights.iter().map(|&w| w as f64).sum();
        let mut cum = 0.0f64;
        for (v, w) in pairs {
            cum += w as f64;
            if cum >= alpha * total - 1e-9 * total {
                return v;
            }
        }
        unreachable!()
    }

    #[test]
    fn keys_keep_the_order_of_values() {
        let v = [-f32::MAX, -3.5, -1e-30, -0.0, 0.0, 1e-30, 2.0, f32::MAX];
        for w in v.windows(2) {
            assert!(key_of(w[0]) < key_of(w[1]), "{} < {}", w[0], w[1]);
        }
        for x in v {
            assert_eq!(value_of(key_of(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn quantiles_match_a_sort() {
        let mut lcg = crate::test_rng::lcg(12345);
        let mut next = || (lcg() >> 33) as u32;
        let n = 5000;
        let values: Vec<f32> = (0..n)
            .map(|_| (next() % 2001) as f32 * 0.37 - 370.0)
            .collect();
        let weights: Vec<f32> = (0..n).map(|_| 1.0 + (next() % 7) as f32).collect();
        let slot_of: Vec<u32> = (0..n)
            .map(|i| if i % 11 == 0 { NO_SLOT } else { (i % 3) as u32 })
            .collect();
        for alpha in [0.05, 0.5, 0.9] {
            let got = weighted_quantiles(
                &slot_of,
                &values,
                Some(&weights),
                4,
                alpha,
                n as u64,
                &mut Single,
            )
            .unwrap();
            for s in 0..3u32 {
                let (v, w): (Vec<f32>, Vec<f32>) = (0..n)
                    .filter(|&i| slot_of[i] == s)
                    .map(|i| (values[i], weights[i]))
                    .unzip();
                assert_eq!(
                    got[s as usize],
                    Some(brute(&v, &w, alpha)),
                    "slot {s}, alpha {alpha}"
                );
            }
            assert_eq!(got[3], None, "an empty slot has no quantile");
        }
        let unweighted =
            weighted_quantiles(&vec![0; n], &values, None, 1, 0.5, n as u64, &mut Single).unwrap();
        assert_eq!(unweighted[0], Some(brute(&values, &vec![1.0; n], 0.5)));
    }
}
