//! TreeSHAP against Shapley values by enumeration of every feature subset on tiny trees.

use super::*;
use crate::data::binned::Bins;
use crate::data::cuts::{Cuts, FeatureCuts};
use crate::hash::{hash32, Stream};
use crate::params::Params;
use crate::split::{BinSet, SplitRule};
use crate::tree::{Node, NodeId, Split};

struct Gen(u64, u32);

impl Gen {
    fn next(&mut self, n: u32) -> u32 {
        self.1 += 1;
        hash32(self.0, Stream::RowSample, self.1, 7) % n.max(1)
    }
}

const BINS: u16 = 5;

/// A random tree over `nf` features with 5 bins each: repeated features on a path, numeric
/// and categorical rules, both default directions, covers that need not add up.
fn random_tree(g: &mut Gen, nf: usize, depth: usize) -> Tree {
    let mut nodes = vec![Node {
        split: None,
        value: 0.0,
        cover: 10.0 + g.next(90) as f64,
    }];
    let mut open = vec![(0usize, 0usize)];
    while let Some((i, d)) = open.pop() {
        if d >= depth || (d > 0 && g.next(4) == 0) {
            nodes[i].value = g.next(2001) as f32 / 100.0 - 10.0;
            continue;
        }
        let feature = g.next(nf as u32) as usize;
        let rule = if g.next(3) == 0 {
            SplitRule::Categorical {
                left: BinSet::from_bins((1..BINS).filter(|_| g.next(2) == 0)),
            }
        } else {
            SplitRule::Numeric {
                bin: 1 + g.next(BINS as u32 - 2) as u16,
            }
        };
        let (left, right) = (NodeId(nodes.len() as u32), NodeId(nodes.len() as u32 + 1));
        for _ in 0..2 {
            nodes.push(Node {
                split: None,
                value: 0.0,
                cover: 1.0 + g.next(60) as f64,
            });
        }
        nodes[i].split = Some(Split {
            feature,
            rule,
            default_left: g.next(2) == 0,
            left,
            right,
            gain: 1.0,
        });
        open.push((left.index(), d + 1));
        open.push((right.index(), d + 1));
    }
    Tree { nodes }
}

/// E[tree | the features in `known` take the row's bins], the others following covers.
fn conditional(tree: &Tree, bins: &[u16], known: u32) -> f64 {
    let mut total = 0.0;
    let mut stack = vec![(NodeId::ROOT, 1.0f64)];
    while let Some((id, w)) = stack.pop() {
        let n = &tree.nodes[id.index()];
        match &n.split {
            None => total += w * n.value as f64,
            Some(s) if known & (1 << s.feature) != 0 => {
                let next = if s.rule.goes_left(bins[s.feature], s.default_left) {
                    s.left
                } else {
                    s.right
                };
                stack.push((next, w));
            }
            Some(s) => {
                for c in [s.left, s.right] {
                    stack.push((c, w * tree.nodes[c.index()].cover / n.cover));
                }
            }
        }
    }
    total
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|i| i as f64).product()
}

/// Shapley values by enumeration of every subset.
fn brute_shap(tree: &Tree, bins: &[u16], nf: usize) -> Vec<f64> {
    let mut phi = vec![0.0; nf];
    for (i, p) in phi.iter_mut().enumerate() {
        for s in 0u32..1 << nf {
            if s & (1 << i) != 0 {
                continue;
            }
            let k = s.count_ones() as usize;
            let w = factorial(k) * factorial(nf - k - 1) / factorial(nf);
            *p += w * (conditional(tree, bins, s | 1 << i) - conditional(tree, bins, s));
        }
    }
    phi
}

/// The Shapley interaction index by enumeration (off-diagonal entries).
fn brute_interaction(tree: &Tree, bins: &[u16], nf: usize, i: usize, j: usize) -> f64 {
    let mut v = 0.0;
    for s in 0u32..1 << nf {
        if s & (1 << i | 1 << j) != 0 {
            continue;
        }
        let k = s.count_ones() as usize;
        let w = factorial(k) * factorial(nf - k - 2) / (2.0 * factorial(nf - 1));
        let e = |m: u32| conditional(tree, bins, m);
        v += w * (e(s | 1 << i | 1 << j) - e(s | 1 << i) - e(s | 1 << j) + e(s));
    }
    v
}

fn model_of(trees: Vec<Tree>, nf: usize, base: f32) -> Model {
    let cuts = Cuts::new(
        (0..nf)
            .map(|_| FeatureCuts::Numeric {
                thresholds: (1..BINS - 1).map(|t| t as f32).collect(),
            })
            .collect(),
    );
    Model {
        params: Params::default(),
        groups: 1,
        classes: None,
        feature_names: (0..nf).map(|f| format!("f{f}")).collect(),
        cuts,
        base_margin: vec![base],
        trees,
        best_iteration: None,
        label_name: None,
        input_types: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn tree_shap_equals_shapley_values_by_enumeration() {
    for seed in 0..60u64 {
        let mut g = Gen(seed, 0);
        let nf = 1 + (seed % 6) as usize;
        let tree = random_tree(&mut g, nf, 1 + (seed % 5) as usize);
        // one scratch for every tree and row, as the callers reuse it
        let mut scratch = Scratch::default();
        for _ in 0..6 {
            let bins: Vec<u16> = (0..nf).map(|_| g.next(BINS as u32) as u16).collect();
            let mut phi = vec![0.0; nf];
            tree_shap(
                &tree,
                &cover_shares(&tree),
                |id| {
                    let s = tree.nodes[id.index()].split.as_ref().unwrap();
                    s.rule.goes_left(bins[s.feature], s.default_left)
                },
                Condition::None,
                &mut phi,
                &mut scratch,
            );
            let want = brute_shap(&tree, &bins, nf);
            for f in 0..nf {
                assert!(
                    close(phi[f], want[f]),
                    "seed {seed} feature {f}: {phi:?} vs {want:?}"
                );
            }
            // local accuracy: the expected value plus the contributions is the prediction
            let pred = conditional(&tree, &bins, (1 << nf) - 1);
            let total = expected_value(&tree) + phi.iter().sum::<f64>();
            assert!(close(total, pred), "seed {seed}: {total} vs {pred}");
        }
    }
}

#[test]
fn contributions_and_interactions_of_a_model_add_up_and_match_enumeration() {
    let nf = 4;
    let mut g = Gen(99, 0);
    let trees: Vec<Tree> = (0..5).map(|_| random_tree(&mut g, nf, 4)).collect();
    let model = model_of(trees, nf, 0.25);
    let rows = 40;
    let bins: Vec<u8> = (0..rows * nf).map(|_| g.next(BINS as u32) as u8).collect();
    let binned = BinnedMatrix::from_bins(rows, nf, Bins::U8(bins.clone())).unwrap();
    let margins = model.predict_binned(&binned, model.num_rounds());
    let contribs = contributions(&model, &binned, model.num_rounds());
    let inter = interactions(&model, &binned, model.num_rounds());
    let side = nf + 1;
    for r in 0..rows {
        let c = &contribs[r * side..(r + 1) * side];
        let sum: f64 = c.iter().sum();
        assert!(
            (sum - margins[r] as f64).abs() <= 1e-5 * margins[r].abs().max(1.0) as f64,
            "row {r}: contributions sum to {sum}, margin {}",
            margins[r]
        );
        let row_bins: Vec<u16> = bins[r * nf..(r + 1) * nf]
            .iter()
            .map(|&b| b as u16)
            .collect();
        let m = &inter[r * side * side..(r + 1) * side * side];
        for i in 0..side {
            let row_sum: f64 = m[i * side..(i + 1) * side].iter().sum();
            assert!(
                close(row_sum, c[i]),
                "row {r}: interactions of {i} sum to {row_sum}, not {}",
                c[i]
            );
            for j in 0..nf {
                if i < nf && j != i {
                    assert!(
                        close(m[i * side + j], m[j * side + i]),
                        "not symmetric at ({i}, {j})"
                    );
                    let want: f64 = model
                        .trees
                        .iter()
                        .map(|t| brute_interaction(t, &row_bins, nf, i, j))
                        .sum();
                    assert!(
                        close(m[i * side + j], want),
                        "row {r} ({i}, {j}): {} vs {want}",
                        m[i * side + j]
                    );
                }
            }
        }
    }
    let leaves = leaf_indices(&model, &binned, 2);
    assert_eq!(leaves.len(), rows * 2);
    for r in 0..rows {
        for t in 0..2 {
            assert_eq!(
                leaves[r * 2 + t],
                model.trees[t].leaf_of_binned(&binned, r).0
            );
        }
    }
}

#[test]
fn a_very_deep_tree_is_explained_without_recursion() {
    // a chain of 30,000 splits alternating over two features
    let depth = 30_000u32;
    let mut nodes = Vec::new();
    for d in 0..depth {
        nodes.push(Node {
            split: Some(Split {
                feature: (d % 2) as usize,
                rule: SplitRule::Numeric { bin: 2 },
                default_left: false,
                left: NodeId(2 * d + 1),
                right: NodeId(2 * d + 2),
                gain: 1.0,
            }),
            value: 0.0,
            cover: 2.0,
        });
        nodes.push(Node {
            split: None,
            value: 1.0,
            cover: 1.0,
        });
    }
    // the last right child is a leaf too
    nodes.push(Node {
        split: None,
        value: -1.0,
        cover: 1.0,
    });
    // ids: node d's split at index 2d, its left leaf at 2d+1, right child (next split) 2d+2
    let tree = Tree { nodes };
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut phi = vec![0.0; 2];
            tree_shap(
                &tree,
                &cover_shares(&tree),
                |_| false,
                Condition::None,
                &mut phi,
                &mut Scratch::default(),
            );
            let pred = conditional(&tree, &[3, 3], 3);
            (expected_value(&tree) + phi[0] + phi[1], pred)
        })
        .unwrap();
    let (total, pred) = handle.join().expect("no stack overflow");
    assert!(close(total, pred), "{total} vs {pred}");
}
