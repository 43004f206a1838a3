//! Explanations computed from a saved model and the rows' bins (never from a backend):
//! leaf indices, SHAP contributions and SHAP interaction values (path-dependent TreeSHAP).
//!
//! Contributions come as `nf + 1` values per row and output group, the last being the bias
//! (base margin plus every tree's expected value); they sum to the margin. Interaction values
//! are `(nf + 1)²` per row and group, as XGBoost lays them out: row i of the matrix sums to
//! contribution i.

mod treeshap;

use rayon::prelude::*;

pub use treeshap::{cover_shares, expected_value, tree_shap, Condition, Scratch};

use crate::data::binned::BinnedMatrix;
use crate::model::Model;
use crate::tree::Tree;

/// The trees of the first `rounds` rounds.
fn trees(model: &Model, rounds: usize) -> &[Tree] {
    let k = model.groups.max(1);
    &model.trees[..(rounds.min(model.num_rounds()) * k).min(model.trees.len())]
}

/// The leaf each row reaches in each tree of the first `rounds` rounds: `trees` node ids per
/// row, row-major.
pub fn leaf_indices(model: &Model, binned: &BinnedMatrix, rounds: usize) -> Vec<u32> {
    let trees = trees(model, rounds);
    let mut out = vec![0u32; binned.n_rows() * trees.len()];
    out.par_chunks_mut(trees.len().max(1))
        .enumerate()
        .for_each(|(row, o)| {
            for (slot, tree) in o.iter_mut().zip(trees) {
                *slot = tree.leaf_of_binned(binned, row).0;
            }
        });
    out
}

/// The work of explaining one row with the first `rounds` rounds, in TreeSHAP's steps
/// (leaves × depth², summed over the trees): what a caller sizes its slices of rows by.
pub fn work_per_row(model: &Model, rounds: usize) -> u64 {
    trees(model, rounds)
        .iter()
        .map(|t| {
            let depth = t.depth().max(1) as u64;
            t.num_leaves() as u64 * depth * depth
        })
        .sum()
}

/// SHAP contributions of each row: `groups * (nf + 1)` values per row (group-major, the bias
/// last in each group), computed in f64.
pub fn contributions(model: &Model, binned: &BinnedMatrix, rounds: usize) -> Vec<f64> {
    let (k, nf) = (model.groups.max(1), binned.n_features());
    let trees = trees(model, rounds);
    let bias: Vec<f64> = (0..k)
        .map(|g| {
            model.base_margin.get(g).copied().unwrap_or(0.0) as f64
                + trees
                    .iter()
                    .skip(g)
                    .step_by(k)
                    .map(expected_value)
                    .sum::<f64>()
        })
        .collect();
    let shares: Vec<Vec<f64>> = trees.iter().map(cover_shares).collect();
    let width = k * (nf + 1);
    let mut out = vec![0.0f64; binned.n_rows() * width];
    out.par_chunks_mut(width.max(1)).enumerate().for_each_init(
        Scratch::default,
        |scratch, (row, o)| {
            for (t, tree) in trees.iter().enumerate() {
                let g = t % k;
                let phi = &mut o[g * (nf + 1)..(g + 1) * (nf + 1)];
                tree_shap(
                    tree,
                    &shares[t],
                    |id| goes_left(tree, binned, row, id),
                    Condition::None,
                    phi,
                    scratch,
                );
            }
            for g in 0..k {
                o[g * (nf + 1) + nf] += bias[g];
            }
        },
    );
    out
}

/// SHAP interaction values of each row: `groups * (nf + 1)²` values per row, group-major;
/// within a group, entry (i, j) for i, j < nf is half the change in j's contribution when i
/// is known rather than unknown, the diagonal is i's contribution minus its interactions,
/// and (nf, nf) is the bias. Costs `nf` times the contributions'.
pub fn interactions(model: &Model, binned: &BinnedMatrix, rounds: usize) -> Vec<f64> {
    let (k, nf) = (model.groups.max(1), binned.n_features());
    let trees = trees(model, rounds);
    let contribs = contributions(model, binned, rounds);
    let side = nf + 1;
    let shares: Vec<Vec<f64>> = trees.iter().map(cover_shares).collect();
    let width = k * side * side;
    let mut out = vec![0.0f64; binned.n_rows() * width];
    out.par_chunks_mut(width.max(1)).enumerate().for_each_init(
        Scratch::default,
        |scratch, (row, o)| {
            let c = &contribs[row * k * side..(row + 1) * k * side];
            let mut on = vec![0.0f64; side];
            let mut off = vec![0.0f64; side];
            for g in 0..k {
                let m = &mut o[g * side * side..(g + 1) * side * side];
                let cg = &c[g * side..(g + 1) * side];
                for i in 0..nf {
                    on.fill(0.0);
                    off.fill(0.0);
                    for t in (g..trees.len()).step_by(k) {
                        let (tree, shares) = (&trees[t], &shares[t]);
                        let left = |id| goes_left(tree, binned, row, id);
                        tree_shap(tree, shares, left, Condition::On(i), &mut on, scratch);
                        tree_shap(tree, shares, left, Condition::Off(i), &mut off, scratch);
                    }
                    let mut off_diagonal = 0.0;
                    for j in 0..nf {
                        if j != i {
                            let v = (on[j] - off[j]) / 2.0;
                            m[i * side + j] = v;
                            off_diagonal += v;
                        }
                    }
                    m[i * side + i] = cg[i] - off_diagonal;
                }
                m[nf * side + nf] = cg[nf];
            }
        },
    );
    out
}

fn goes_left(tree: &Tree, binned: &BinnedMatrix, row: usize, id: crate::tree::NodeId) -> bool {
    let s = tree.nodes[id.index()]
        .split
        .as_ref()
        .expect("only internal nodes are asked");
    s.rule.goes_left(binned.bin(row, s.feature), s.default_left)
}

#[cfg(test)]
mod tests;
