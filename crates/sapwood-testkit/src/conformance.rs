//! The backend conformance suite, written once: each check takes the factory of the backend
//! under test and compares what it computes with brute force or with the CPU reference
//! backend, bit for bit. [`conformance!`](crate::conformance!) turns every check into a
//! `#[test]` of the crate that instantiates it.
//!
//! Backend-level checks drive [`HistBackend`] directly (gradients, quantisation, histograms,
//! partitions, exact sums, margins) on random shards; model-level checks train whole models
//! on [`mixed_features`] and compare the saved bytes.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sapwood_core::backend::{
    BackendFactory, CpuBackend, CpuFactory, HistBackend, NodeSplit, ShardData, TreeBackend,
    TreeSetup,
};
use sapwood_core::data::{BinnedMatrix, FeatureCuts};
use sapwood_core::detmath::pow2;
use sapwood_core::hash::{HashKey, SampleRate, Stream};
use sapwood_core::hist::HistBin;
use sapwood_core::objective::{Objective, ObjectiveKind, ObjectiveParams};
use sapwood_core::params::{CatNoise, Checked, GrowPolicy, Params, Quantisation};
use sapwood_core::quantise::{quantise_exact, square_shift, square_term, GroupScales, Scale};
use sapwood_core::split::{BinSet, SplitRule};
use sapwood_core::train::{self, Quiet, Shard};
use sapwood_core::tree::{NodeId, Tree};
use sapwood_core::Result;

use crate::data::{
    binned, copy_shard, labels_for, mixed_features, offsets_of, random_bins, shard, sparse_bins,
    with_row_ids, ROWS_PER_ID,
};
use crate::rng::Rng;
use crate::train::{assert_cpu_model, first_difference, train_json, train_model, Job};
use crate::trees::{odd_values, random_splits, random_tree, tree_of};

/// A backend for `spec` from `factory`.
pub fn create(factory: &dyn BackendFactory, spec: &ShardData) -> Box<dyn HistBackend> {
    factory
        .create(copy_shard(spec))
        .unwrap_or_else(|e| panic!("creating the backend under test: {e}"))
}

/// The backend under test and the CPU reference, holding the same shard; every method runs
/// on both and asserts they agree.
pub struct Pair<B: ?Sized = dyn HistBackend> {
    /// The reference.
    pub cpu: CpuBackend,
    /// The backend under test.
    pub dev: Box<B>,
}

impl Pair {
    /// Both backends on `spec`, the one under test from `factory`.
    pub fn new(factory: &dyn BackendFactory, spec: &ShardData) -> Self {
        Pair::with(&|s| factory.create(s), spec)
    }
}

impl<B: HistBackend + ?Sized> Pair<B> {
    /// Both backends on `spec`, the one under test from `make`.
    pub fn with(make: &dyn Fn(ShardData) -> Result<Box<B>>, spec: &ShardData) -> Self {
        Pair {
            cpu: CpuBackend::new(copy_shard(spec)).expect("a valid shard"),
            dev: make(copy_shard(spec)).unwrap_or_else(|e| panic!("creating the backend: {e}")),
        }
    }

    /// Computes gradients on both; asserts the maxima's bits agree.
    pub fn compute_gradients(&mut self, what: &str) -> Vec<[f32; 2]> {
        let max = self.cpu.compute_gradients().expect("cpu gradients");
        let dev = self.dev.compute_gradients().expect("gradients");
        assert_eq!(max_bits(&max), max_bits(&dev), "{what}: gradient maxima");
        max
    }

    /// Starts a tree on both; asserts they agree on the root's rows.
    pub fn start_tree(&mut self, setup: &TreeSetup, what: &str) -> u64 {
        let rows = self.cpu.start_tree(setup).expect("cpu start_tree");
        let dev = self.dev.start_tree(setup).expect("start_tree");
        assert_eq!(rows, dev, "{what}: rows in the root");
        rows
    }

    /// Applies `splits` on both; asserts the same rows went each way.
    pub fn apply_splits(&mut self, splits: &[NodeSplit], what: &str) -> Vec<[u64; 2]> {
        let counts = self.cpu.apply_splits(splits).expect("cpu apply_splits");
        let dev = self.dev.apply_splits(splits).expect("apply_splits");
        assert_eq!(counts, dev, "{what}: split counts");
        counts
    }

    /// Histograms of `nodes` on both (`width` bins each); asserts they are equal.
    pub fn histograms(&mut self, nodes: &[NodeId], width: usize, what: &str) -> Vec<HistBin> {
        let mut a = vec![[0i64; 2]; nodes.len() * width];
        // every entry must be overwritten
        let mut b = vec![[1i64, -1]; nodes.len() * width];
        self.cpu
            .build_histograms(nodes, &mut a)
            .expect("cpu histograms");
        self.dev
            .build_histograms(nodes, &mut b)
            .expect("histograms");
        if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
            panic!(
                "{what}: histograms of {} nodes differ first at node {} bin {}: cpu {:?}, \
                 backend {:?}",
                nodes.len(),
                i / width.max(1),
                i % width.max(1),
                a[i],
                b[i]
            );
        }
        a
    }

    /// Exact sums of `nodes` on both; asserts they are equal.
    pub fn exact_sums(&mut self, nodes: &[NodeId], what: &str) -> Vec<HistBin> {
        let a = self.cpu.exact_sums(nodes).expect("cpu exact_sums");
        let b = self.dev.exact_sums(nodes).expect("exact_sums");
        assert_eq!(a, b, "{what}: exact sums");
        a
    }

    /// Sums of squares of `nodes` on both; asserts they are equal.
    pub fn square_sums(&mut self, nodes: &[NodeId], shift: i32, what: &str) -> Vec<i64> {
        let a = self.cpu.square_sums(nodes, shift).expect("cpu square_sums");
        let b = self.dev.square_sums(nodes, shift).expect("square_sums");
        assert_eq!(a, b, "{what}: sums of squares");
        a
    }

    /// Adds `tree` to both backends' margins of `group`; asserts the margins' bits agree.
    pub fn update_margins(&mut self, tree: &Tree, group: usize, what: &str) -> Vec<f32> {
        self.cpu.update_margins(tree, group).expect("cpu margins");
        self.dev.update_margins(tree, group).expect("margins");
        let m = self.cpu.margins().expect("cpu margins");
        assert_eq!(
            bits(&m),
            bits(&self.dev.margins().expect("margins")),
            "{what}"
        );
        m
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn max_bits(v: &[[f32; 2]]) -> Vec<[u32; 2]> {
    v.iter().map(|m| [m[0].to_bits(), m[1].to_bits()]).collect()
}

/// The setup of tree `tree_index` of `group` with every row in the bag and the given scales.
pub fn setup(tree_index: u32, group: usize, seed: u64, grad: Scale, hess: Scale) -> TreeSetup {
    TreeSetup {
        tree_index,
        group,
        seed,
        row_sample: SampleRate::new(1.0),
        scales: GroupScales { grad, hess },
    }
}

fn exact_scale(max_abs: f32, n: usize) -> Scale {
    Scale::agree(max_abs, n as u64, Quantisation::Exact)
}

/// Splits nodes apart by the bins of `feature` (no missing values among their rows): each
/// `(node, lo, hi, tag)` holds rows with bins `lo..=hi`; children are numbered from `*next`
/// on. Returns the leaves, each with the one bin its rows have and its ancestor's tag.
pub fn split_apart<B: HistBackend + ?Sized>(
    p: &mut Pair<B>,
    mut ranges: Vec<(NodeId, u16, u16, usize)>,
    feature: usize,
    next: &mut u32,
    what: &str,
) -> Vec<(NodeId, u16, usize)> {
    let mut leaves = Vec::new();
    loop {
        let mut splits = Vec::new();
        let mut more = Vec::new();
        for (node, lo, hi, tag) in ranges {
            if lo >= hi {
                leaves.push((node, lo, tag));
                continue;
            }
            let mid = lo + (hi - lo) / 2;
            let left = NodeId(*next);
            let right = NodeId(*next + 1);
            *next += 2;
            splits.push(NodeSplit {
                node,
                left,
                right,
                feature,
                rule: SplitRule::Numeric { bin: mid },
                default_left: false,
            });
            more.extend([(left, lo, mid, tag), (right, mid + 1, hi, tag)]);
        }
        if splits.is_empty() {
            return leaves;
        }
        // a backend takes a level's splits in any order: the grower's is the nodes' order,
        // so these go the other way
        splits.reverse();
        p.apply_splits(&splits, what);
        ranges = more;
    }
}

/// Splits the root of a shard of `n` rows built by [`with_row_ids`] (its `hi` feature at
/// `hi`) into one node per value of `hi`; returns them with their first row.
pub fn split_by_hi<B: HistBackend + ?Sized>(
    p: &mut Pair<B>,
    n: usize,
    hi: usize,
    next: &mut u32,
    what: &str,
) -> Vec<(NodeId, usize)> {
    let his = n.div_ceil(ROWS_PER_ID) as u16;
    split_apart(p, vec![(NodeId::ROOT, 1, his, 0)], hi, next, what)
        .into_iter()
        .map(|(node, v, _)| (node, (v as usize - 1) * ROWS_PER_ID))
        .collect()
}

/// Splits the nodes of [`split_by_hi`] on by `lo` (the feature after `hi`) to one row each;
/// returns every row's node, in row order.
pub fn split_to_rows<B: HistBackend + ?Sized>(
    p: &mut Pair<B>,
    n: usize,
    hi: usize,
    by_hi: &[(NodeId, usize)],
    next: &mut u32,
    what: &str,
) -> Vec<NodeId> {
    let ranges = by_hi
        .iter()
        .map(|&(node, first)| (node, 1, (n - first).min(ROWS_PER_ID) as u16, first))
        .collect();
    let mut rows = vec![NodeId::ROOT; n];
    for (node, lo, first) in split_apart(p, ranges, hi + 1, next, what) {
        rows[first + lo as usize - 1] = node;
    }
    rows
}

/// Every row's (g, h) read off histograms of the nodes of [`split_by_hi`] (`width` bins a
/// node): the bins of `lo`, whose histogram offset is `lo_offset`.
pub fn per_row(
    hist: &[HistBin],
    width: usize,
    lo_offset: usize,
    by_hi: &[(NodeId, usize)],
    n: usize,
) -> Vec<HistBin> {
    let mut rows = vec![[0i64; 2]; n];
    for (j, &(_, first)) in by_hi.iter().enumerate() {
        let count = (n - first).min(ROWS_PER_ID);
        let node = &hist[j * width + lo_offset + 1..][..count];
        rows[first..first + count].copy_from_slice(node);
    }
    rows
}

/// A histogram of the root and of the children of one split match the definition (each row
/// adds its quantised (g, h) to its bin of every feature), the children's row counts match
/// the rule, and the parent minus one child is the other child built directly. Random
/// shards from proptest (`PROPTEST_CASES` of them, 256 by default).
pub fn histograms_match_brute_force_and_subtraction_equals_direct_build(
    factory: &dyn BackendFactory,
) {
    let cases = (
        prop::collection::vec((prop::collection::vec(0u8..5, 3), -100.0f32..100.0), 1..300),
        0usize..3,
        1u16..4,
        any::<bool>(),
    );
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&cases, |(rows, split_feature, split_bin, default_left)| {
        let (nf, nb) = (3, 5);
        let bins: Vec<u16> = rows.iter().flat_map(|r| &r.0).map(|&b| b as u16).collect();
        let labels: Vec<f32> = rows.iter().map(|r| r.1).collect();
        let n = labels.len();
        let offsets = offsets_of(&[nb as u32; 3]);
        let spec = shard(binned(n, nf, bins.clone(), false), offsets.clone(), labels);
        let mut b = create(factory, &spec);
        let max = b.compute_gradients().expect("gradients");
        let s = setup(0, 0, 1, exact_scale(max[0][0], n), exact_scale(1.0, n));
        prop_assert_eq!(b.start_tree(&s).expect("start_tree"), n as u64);
        let width = nb * nf;
        let mut root = vec![[0i64; 2]; width];
        b.build_histograms(&[NodeId::ROOT], &mut root)
            .expect("histograms");
        // brute force from the definition: g = margin - label with margin 0, h = 1
        let mut want = vec![[0i64; 2]; width];
        for (i, &y) in spec.labels.iter().enumerate() {
            for f in 0..nf {
                let e = &mut want[offsets[f] as usize + bins[i * nf + f] as usize];
                e[0] += quantise_exact(0.0 - y, s.scales.grad.shift);
                e[1] += quantise_exact(1.0, s.scales.hess.shift);
            }
        }
        prop_assert_eq!(&root, &want);
        let counts = b
            .apply_splits(&[NodeSplit {
                node: NodeId::ROOT,
                left: NodeId(1),
                right: NodeId(2),
                feature: split_feature,
                rule: SplitRule::Numeric { bin: split_bin },
                default_left,
            }])
            .expect("apply_splits");
        let left = (0..n)
            .filter(|&i| match bins[i * nf + split_feature] {
                0 => default_left,
                v => v <= split_bin,
            })
            .count() as u64;
        prop_assert_eq!(counts, vec![[left, n as u64 - left]]);
        let mut children = vec![[0i64; 2]; 2 * width];
        b.build_histograms(&[NodeId(1), NodeId(2)], &mut children)
            .expect("histograms");
        let (left, right) = children.split_at(width);
        let by_subtraction: Vec<HistBin> = root
            .iter()
            .zip(left)
            .map(|(p, l)| [p[0] - l[0], p[1] - l[1]])
            .collect();
        prop_assert_eq!(by_subtraction, right.to_vec());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A categorical split sends the rows whose bin is in the set, and the missing rows when
/// missing goes left, to the left child; the children's histograms and sums match the CPU.
pub fn categorical_splits_route_by_bin_set(factory: &dyn BackendFactory) {
    let spec = shard(
        binned(5, 1, vec![1, 2, 3, 0, 2], false),
        vec![0, 4],
        vec![1.0, 2.0, 3.0, 4.0, 5.0],
    );
    let mut p = Pair::new(factory, &spec);
    let max = p.compute_gradients("labels 1..=5");
    for (tree, default_left, want) in [(0, true, [3, 2]), (1, false, [2, 3])] {
        let s = setup(tree, 0, 1, exact_scale(max[0][0], 5), exact_scale(1.0, 5));
        p.start_tree(&s, "root");
        let split = NodeSplit {
            node: NodeId::ROOT,
            left: NodeId(1),
            right: NodeId(2),
            feature: 0,
            rule: SplitRule::Categorical {
                left: BinSet::from_bins([2u16]),
            },
            default_left,
        };
        // rows with bin 2, and the missing row when missing goes left, go left
        assert_eq!(p.apply_splits(&[split], "bin set {2}"), vec![want]);
        p.histograms(&[NodeId(1), NodeId(2)], 4, "children");
        p.exact_sums(&[NodeId(1), NodeId(2)], "children");
    }
}

/// How [`gradients_and_margins`] checks every row's gradients.
pub(crate) enum RowGradients<'a, B: ?Sized> {
    /// Through histograms of nodes holding one row per bin of `lo`, for every group.
    Histograms,
    /// Read back from the backend, `2 * groups` per row.
    Read(&'a dyn Fn(&B) -> Result<Vec<f32>>),
}

/// Random trees update the margins of every group (u8 bins, leaf values hard to add); after
/// each round the margins and gradient maxima match the CPU bit for bit and every row's
/// gradients match the objective's definition, for every objective, 1 to 70 groups.
pub(crate) fn gradients_and_margins<B: HistBackend + ?Sized>(
    make: &dyn Fn(ShardData) -> Result<Box<B>>,
    rows: RowGradients<'_, B>,
) {
    let widths = [6u32, 9, 4];
    for (kind, k) in [
        (ObjectiveKind::SquaredError, 1),
        (ObjectiveKind::Logistic, 1),
        (ObjectiveKind::LogitRaw, 1),
        (ObjectiveKind::AbsoluteError, 1),
        (ObjectiveKind::QuantileError, 1),
        (ObjectiveKind::Huber, 1),
        (ObjectiveKind::PseudoHuber, 1),
        (ObjectiveKind::Poisson, 1),
        (ObjectiveKind::Gamma, 1),
        (ObjectiveKind::Tweedie, 1),
        (ObjectiveKind::Softmax, 4),
        (ObjectiveKind::Softprob, 3),
        (ObjectiveKind::Softprob, 7),
        // beyond the 64 groups a GPU reduces in workgroup memory
        (ObjectiveKind::Softprob, 70),
    ] {
        let mut rng = Rng(k as u64 * 31 + kind as u64);
        let n = 2000;
        let (binned, offsets) = with_row_ids(&mut rng, n, &widths);
        let width = *offsets.last().expect("offsets") as usize;
        let lo_offset = offsets[widths.len() + 1] as usize;
        let labels: Vec<f32> = (0..n)
            .map(|_| match kind {
                k if k.is_binary() => (rng.below(3) as f32) * 0.5,
                k if k.is_multiclass() => rng.below(k as u64) as f32,
                ObjectiveKind::Poisson | ObjectiveKind::Tweedie => rng.below(20) as f32,
                ObjectiveKind::Gamma => rng.unit() * 50.0 + 0.01,
                _ => (rng.unit() - 0.5) * 1e4,
            })
            .collect();
        let weights: Vec<f32> = (0..n).map(|_| rng.unit() * 3.0).collect();
        // constants away from their defaults, so that a kernel reading the wrong one fails
        let constants = ObjectiveParams {
            quantile_alpha: vec![0.3],
            huber_slope: 2.5,
            tweedie_variance_power: 1.3,
            // K/(K - 1) for 3 and 7 classes, so that a kernel multiplying by 2 fails, and
            // the default 2 for the others
            multiclass_hessian: if k == 3 || k == 7 {
                sapwood_core::objective::MulticlassHessian::LightGBM
            } else {
                sapwood_core::objective::MulticlassHessian::XGBoost
            },
            ..Default::default()
        };
        let obj = Objective::with_params(kind, k, &constants).expect("objective");
        let spec = ShardData {
            weights: Some(weights.clone()),
            objective: obj.clone(),
            base_margin: (0..k).map(|c| c as f32 * 0.1 - 0.2).collect(),
            initial_margins: None,
            ..shard(binned, offsets, labels.clone())
        };
        let mut p = Pair::with(make, &spec);
        for round in 0..4 {
            let what = format!("{kind:?} with {k} groups, round {round}");
            for group in 0..k {
                let values = odd_values(&mut rng);
                let tree = random_tree(&mut rng, &widths, values);
                p.update_margins(&tree, group, &what);
            }
            let margins = p.cpu.margins().expect("cpu margins");
            let max = if obj.has_kernel() {
                p.compute_gradients(&what)
            } else {
                // no kernel: the boosting loop hands every backend the host's gradients
                let mut host = vec![[0f32; 2]; n * k];
                let max = sapwood_core::backend::shard::gradients_into(
                    &obj,
                    &labels,
                    Some(&weights),
                    &margins,
                    &mut host,
                );
                p.cpu.set_gradients(&host).expect("cpu set_gradients");
                p.dev.set_gradients(&host).expect("set_gradients");
                max
            };
            // the definition, row by row
            let mut want = vec![[0f32; 2]; n * k];
            let (mut g, mut h) = (vec![0f32; k], vec![0f32; k]);
            for (i, w) in want.chunks_exact_mut(k).enumerate() {
                let m = &margins[i * k..(i + 1) * k];
                obj.gradient(m, labels[i], weights[i], &mut g, &mut h);
                for c in 0..k {
                    w[c] = [g[c], h[c]];
                }
            }
            match &rows {
                RowGradients::Read(read) => {
                    let grads = read(&*p.dev).expect("read gradients");
                    assert_eq!(grads.len(), 2 * n * k, "{what}: gradients read back");
                    for (j, (w, got)) in want.iter().zip(grads.chunks_exact(2)).enumerate() {
                        assert_eq!(
                            max_bits(&[*w]),
                            max_bits(&[[got[0], got[1]]]),
                            "{what}: row {} group {}: margins {:?}",
                            j / k,
                            j % k,
                            &margins[j / k * k..(j / k + 1) * k]
                        );
                    }
                }
                RowGradients::Histograms => {
                    for (group, max) in max.iter().enumerate() {
                        let what = format!("{what}, group {group}");
                        let (sg, sh) = (exact_scale(max[0], n), exact_scale(max[1], n));
                        p.start_tree(&setup(group as u32, group, 3, sg, sh), &what);
                        let mut next = 1;
                        let by_hi = split_by_hi(&mut p, n, widths.len(), &mut next, &what);
                        let nodes: Vec<NodeId> = by_hi.iter().map(|&(node, _)| node).collect();
                        let hist = p.histograms(&nodes, width, &what);
                        let got = per_row(&hist, width, lo_offset, &by_hi, n);
                        for (i, got) in got.iter().enumerate() {
                            let [g, h] = want[i * k + group];
                            let x = [quantise_exact(g, sg.shift), quantise_exact(h, sh.shift)];
                            assert_eq!(*got, x, "{what}: row {i}: (g, h) = ({g:e}, {h:e})");
                        }
                    }
                    // back to one node, the root, which every random tree splits: the next
                    // trees' margins are then computed from the bins of every row
                    let reset = setup(0, 0, 3, exact_scale(1.0, n), exact_scale(1.0, n));
                    p.start_tree(&reset, &what);
                }
            }
        }
    }
}

/// Margins after random trees and gradients (maxima, and every row's through histograms)
/// match the objective and the CPU bit for bit.
pub fn gradients_and_margins_match_the_objective_bit_for_bit(factory: &dyn BackendFactory) {
    gradients_and_margins(&|s| factory.create(s), RowGradients::Histograms);
}

/// Squared-error labels whose gradients (at margin 0) cover every kind of f32: halves,
/// negatives, random exponents in `exponents`, subnormals and plain values.
pub(crate) fn quantisation_labels(n: usize, exponents: (u32, u32)) -> Vec<f32> {
    let mut rng = Rng(99);
    (0..n)
        .map(|i| match i % 6 {
            0 => (i as f32 / 2.0).floor() + 0.5,
            1 => -((i as f32 / 4.0).floor() + 0.5),
            2 => {
                let e = exponents.0 + rng.below((exponents.1 - exponents.0) as u64) as u32;
                f32::from_bits(rng.next_u64() as u32 & 0x807f_ffff | e << 23)
            }
            3 => 1e-39 * (rng.unit() - 0.5),
            _ => (rng.unit() - 0.5) * 200.0,
        })
        .collect()
}

/// (shift, drop) cases: exact fixed point at shifts from -40 to 200, and low-bit rounding
/// from dropping nothing to dropping 50 bits.
pub(crate) const QUANTISATION_CASES: [(i32, Option<u32>); 15] = [
    (0, None),
    (1, None),
    (-7, None),
    (-40, None),
    (30, None),
    (45, None),
    (90, None),
    (200, None),
    (20, Some(0)),
    (20, Some(1)),
    (24, Some(7)),
    (30, Some(31)),
    (35, Some(32)),
    (40, Some(33)),
    (50, Some(50)),
];

/// The tree every quantisation case starts: tree 5 of a fixed seed.
pub(crate) fn quantisation_setup(shift: i32, drop: Option<u32>, max: [u64; 2]) -> TreeSetup {
    let grad = Scale {
        shift,
        drop,
        max_value: max[0],
    };
    let hess = Scale {
        shift: 3,
        max_value: max[1],
        ..grad
    };
    setup(5, 0, 0xfeed_beef_1234, grad, hess)
}

/// The exact fixed-point (g, h) under `s`, from the core's definition.
pub(crate) fn exact_values(g: f32, h: f32, s: &TreeSetup) -> HistBin {
    [
        quantise_exact(g, s.scales.grad.shift),
        quantise_exact(h, s.scales.hess.shift),
    ]
}

/// The values global row `row` adds to histograms under `s`, from its exact values `x`.
pub(crate) fn hist_values(x: HistBin, s: &TreeSetup, row: u64) -> HistBin {
    let gk = HashKey::new(s.seed, Stream::GradNoise, s.tree_index);
    let hk = HashKey::new(s.seed, Stream::HessNoise, s.tree_index);
    [
        s.scales.grad.hist_value(x[0], gk, row),
        s.scales.hess.hist_value(x[1], hk, row),
    ]
}

/// Every row's exact and histogram values, read through histograms of one-row bins and
/// exact sums of one-row nodes, match the core's definition for exact shifts from -40 to 40,
/// low-bit cases dropping 0 to 50 bits and the scales the grower agrees on for exact, 2-,
/// 3-, 8- and 16-bit modes (rows far into the global row space; noise keyed by row).
pub fn quantised_values_match_the_core_row_by_row(factory: &dyn BackendFactory) {
    let n = 1500;
    // |g| < 2^12: sums of 200 rows at shift 40 and values at shift 50 stay inside i64
    let labels = quantisation_labels(n, (60, 139));
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).expect("objective");
    let (binned, offsets) = with_row_ids(&mut Rng(5), n, &[]);
    let width = *offsets.last().expect("offsets") as usize;
    let spec = ShardData {
        row_offset: 5_000_000_123,
        ..shard(binned, offsets.clone(), labels)
    };
    let mut p = Pair::new(factory, &spec);
    let max = p.compute_gradients("labels of every kind")[0];
    let (mut g, mut h) = ([0f32], [0f32]);
    let grads: Vec<[f32; 2]> = (0..n)
        .map(|i| {
            obj.gradient(&[0.0], spec.labels[i], 1.0, &mut g, &mut h);
            [g[0], h[0]]
        })
        .collect();
    let mut cases: Vec<(i32, Option<u32>)> = QUANTISATION_CASES
        .into_iter()
        .filter(|&(shift, drop)| drop.is_some() || shift <= 40)
        .chain([(40, None)])
        .collect();
    for bits in [None, Some(2), Some(3), Some(8), Some(16)] {
        let q = bits.map_or(Quantisation::Exact, Quantisation::Bits);
        let s = Scale::agree(max[0], n as u64, q);
        cases.push((s.shift, s.drop));
    }
    for (shift, drop) in cases {
        let what = format!("shift {shift} drop {drop:?}");
        // the definition first, for honest bounds on the values (the CPU packs small ones)
        let probe = quantisation_setup(shift, drop, [0, 0]);
        let want: Vec<[HistBin; 2]> = (0..n)
            .map(|i| {
                let x = exact_values(grads[i][0], grads[i][1], &probe);
                [x, hist_values(x, &probe, spec.row_offset + i as u64)]
            })
            .collect();
        let bound = |j: usize| {
            want.iter()
                .map(|w| w[1][j].unsigned_abs())
                .max()
                .unwrap_or(0)
        };
        let s = quantisation_setup(shift, drop, [bound(0), bound(1)]);
        p.start_tree(&s, &what);
        let mut next = 1;
        let by_hi = split_by_hi(&mut p, n, 0, &mut next, &what);
        let nodes: Vec<NodeId> = by_hi.iter().map(|&(node, _)| node).collect();
        let hist = p.histograms(&nodes, width, &what);
        let got = per_row(&hist, width, offsets[1] as usize, &by_hi, n);
        let rows = split_to_rows(&mut p, n, 0, &by_hi, &mut next, &what);
        let exact = p.exact_sums(&rows, &what);
        for i in 0..n {
            let [x, q] = want[i];
            let g = grads[i][0];
            assert_eq!(exact[i], x, "{what}: exact values of row {i}, g {g:e}");
            assert_eq!(got[i], q, "{what}: histogram values of row {i}, g {g:e}");
        }
    }
}

/// f32 values at the edges of fixed-point quantisation: NaN (quiet, negative, signalling
/// with a payload), ±inf, ±f32::MAX, ±2^63 and the f32 values next to them, powers of two
/// that saturate only at large shifts, ties, the smallest normals, a subnormal and zeros.
pub fn edge_values() -> Vec<f32> {
    let two63 = 9_223_372_036_854_775_808.0f32;
    vec![
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fa0_0001),
        f32::from_bits(0xffc0_1234),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -f32::MAX,
        two63,
        -two63,
        // the largest f32 below 2^63, and the first one below -2^63
        f32::from_bits(0x5eff_ffff),
        -f32::from_bits(0x5eff_ffff),
        -f32::from_bits(0x5f00_0001),
        4_611_686_018_427_387_904.0,
        1e30,
        -1e30,
        4_294_967_296.0,
        -2_147_483_648.0,
        1e10,
        1.5,
        -2.5,
        0.5,
        -0.5,
        1.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-40,
        0.0,
        -0.0,
    ]
}

/// The rows of [`non_finite_and_huge_values_quantise_as_on_the_cpu`], as (label, weight)
/// of squared error at margin 0, where g = -label * weight and h = weight: every edge value
/// as g (h = 1), as h (g = 0 * h, NaN for NaN and ±inf) and as both.
fn edge_rows() -> Vec<(f32, f32)> {
    let v = edge_values();
    let mut rows: Vec<(f32, f32)> = v.iter().map(|&x| (x, 1.0)).collect();
    rows.extend(v.iter().map(|&x| (0.0, x)));
    rows.extend(v.iter().map(|&x| (-1.0, x)));
    rows
}

/// The pair of backends on a squared-error shard of `rows` (label, weight), one feature
/// with one bin per row (row i in bin i + 1), so that a histogram of the root holds each
/// row's values apart and no sum can overflow.
fn one_bin_per_row(factory: &dyn BackendFactory, rows: &[(f32, f32)]) -> (Pair, usize) {
    let n = rows.len();
    assert!(n < u16::MAX as usize);
    let bins: Vec<u16> = (1..=n as u16).collect();
    let spec = ShardData {
        weights: Some(rows.iter().map(|r| r.1).collect()),
        row_offset: 7_000_000_011,
        ..shard(
            binned(n, 1, bins, n > u8::MAX as usize),
            offsets_of(&[n as u32 + 1]),
            rows.iter().map(|r| r.0).collect(),
        )
    };
    (Pair::new(factory, &spec), n)
}

/// Each row's histogram values (from the root's histogram) and exact values (from exact sums
/// of one-row leaves) under `s` match `want` ([exact, histogram] per row); returns the
/// one-row leaves with their rows.
fn assert_rows_quantise_to(
    p: &mut Pair,
    n: usize,
    s: &TreeSetup,
    want: &[[HistBin; 2]],
    what: &str,
) -> Vec<(NodeId, usize)> {
    p.start_tree(s, what);
    let hist = p.histograms(&[NodeId::ROOT], n + 1, what);
    let mut next = 1;
    let leaves = split_apart(p, vec![(NodeId::ROOT, 1, n as u16, 0)], 0, &mut next, what);
    let nodes: Vec<NodeId> = leaves.iter().map(|l| l.0).collect();
    let exact = p.exact_sums(&nodes, what);
    for (&(_, bin, _), x) in leaves.iter().zip(&exact) {
        let i = bin as usize - 1;
        assert_eq!(*x, want[i][0], "{what}: exact values of row {i}");
    }
    for i in 0..n {
        assert_eq!(
            hist[i + 1],
            want[i][1],
            "{what}: histogram values of row {i}"
        );
    }
    leaves.iter().map(|l| (l.0, l.1 as usize - 1)).collect()
}

/// Non-finite and huge gradients and hessians quantise to the core's integers on every
/// backend, bit for bit: Rust's saturating `as i64` gives NaN 0, +inf and everything from
/// 2^63 up i64::MAX, -inf and everything below -2^63 i64::MIN (the f32 is scaled by 2^shift in
/// f64, exactly, with the shift clamped to -1022..=1023 as `detmath::pow2` does). NaN and ±inf
/// reach quantisation from labels and weights given straight to a backend (training
/// validates them, backends do not). Exact fixed point at shifts from i32::MIN to i32::MAX,
/// and low-bit rounding (dropping 1 to 62 bits) of every row whose exact value plus the noise
/// stays inside i64 (the core adds them with `+`).
pub fn non_finite_and_huge_values_quantise_as_on_the_cpu(factory: &dyn BackendFactory) {
    // the integers the core's definition gives, pinned
    let two63 = 9_223_372_036_854_775_808.0f32;
    for shift in [i32::MIN, -1100, -40, 0, 1, 62, 63, 200, 1100, i32::MAX] {
        assert_eq!(quantise_exact(f32::NAN, shift), 0);
        assert_eq!(quantise_exact(-f32::NAN, shift), 0);
        assert_eq!(quantise_exact(f32::INFINITY, shift), i64::MAX);
        assert_eq!(quantise_exact(f32::NEG_INFINITY, shift), i64::MIN);
    }
    for shift in [0, 1, 63, 1100, i32::MAX] {
        assert_eq!(quantise_exact(f32::MAX, shift), i64::MAX);
        assert_eq!(quantise_exact(-f32::MAX, shift), i64::MIN);
    }
    assert_eq!(quantise_exact(two63, 0), i64::MAX);
    assert_eq!(quantise_exact(-two63, 0), i64::MIN);
    assert_eq!(quantise_exact(two63, -1), 1 << 62);
    assert_eq!(
        quantise_exact(f32::from_bits(0x5eff_ffff), 0),
        0x7fff_ff80_0000_0000
    );
    assert_eq!(quantise_exact(1.0, i32::MIN), 0);
    assert_eq!(quantise_exact(1.0, 62), 1 << 62);
    assert_eq!(quantise_exact(-1.0, 63), i64::MIN);
    assert_eq!(quantise_exact(1.0, 63), i64::MAX);
    assert_eq!(quantise_exact(-2.5, 0), -2);

    let obj = Objective::new(ObjectiveKind::SquaredError, 1).expect("objective");
    let grads = |rows: &[(f32, f32)]| -> Vec<[f32; 2]> {
        let (mut g, mut h) = ([0f32], [0f32]);
        rows.iter()
            .map(|&(y, w)| {
                obj.gradient(&[0.0], y, w, &mut g, &mut h);
                [g[0], h[0]]
            })
            .collect()
    };
    let scale = |shift, drop| Scale {
        shift,
        drop,
        max_value: u64::MAX,
    };
    let setup_of = |gs: i32, hs: i32, drop: Option<u32>| {
        setup(9, 0, 0x5eed_f00d, scale(gs, drop), scale(hs, drop))
    };
    let expected = |grads: &[[f32; 2]], s: &TreeSetup, row_offset: u64| -> Vec<[HistBin; 2]> {
        grads
            .iter()
            .enumerate()
            .map(|(i, &[g, h])| {
                let x = exact_values(g, h, s);
                [x, hist_values(x, s, row_offset + i as u64)]
            })
            .collect()
    };

    // exact fixed point: every row, every shift
    let rows = edge_rows();
    let grad = grads(&rows);
    let (mut p, n) = one_bin_per_row(factory, &rows);
    let max = p.compute_gradients("edge values")[0];
    assert_eq!(
        max,
        [f32::INFINITY, f32::INFINITY],
        "NaN never wins a maximum"
    );
    let offset = 7_000_000_011;
    for (gs, hs) in [
        (0, 0),
        (1, -1),
        (40, 62),
        (62, 63),
        (63, 64),
        (64, 0),
        (200, 127),
        (1023, -149),
        (1100, -1022),
        (-1100, 1024),
        (i32::MAX, i32::MIN),
        (i32::MIN, i32::MAX),
        (-40, 30),
    ] {
        let s = setup_of(gs, hs, None);
        let want = expected(&grad, &s, offset);
        // the special values land where the core says, through the backend as well
        for (i, &[g, _]) in grad.iter().enumerate() {
            if g.is_nan() {
                assert_eq!(want[i][0][0], 0);
            } else if g == f32::INFINITY {
                assert_eq!(want[i][0][0], i64::MAX);
            } else if g == f32::NEG_INFINITY {
                assert_eq!(want[i][0][0], i64::MIN);
            }
        }
        let what = format!("edge values, exact, shifts g {gs} h {hs}");
        let leaves = assert_rows_quantise_to(&mut p, n, &s, &want, &what);
        // each row's square term at the gradients' shift: saturated, then clamped to 2^15
        let nodes: Vec<NodeId> = leaves.iter().map(|l| l.0).collect();
        let squares = p.square_sums(&nodes, gs, &what);
        for (&(_, i), &sq) in leaves.iter().zip(&squares) {
            let g = grad[i][0];
            let term = square_term(g, pow2(gs));
            assert_eq!(sq, term, "{what}: square term of row {i}, g {g:e}");
        }
        if gs == i32::MAX {
            // every finite nonzero g (and ±inf) is past the clamp here
            assert!(squares.contains(&(1 << 30)), "{what}");
        }
    }

    // low-bit rounding: the rows whose exact value plus any noise below 2^drop fits i64
    let lowbit = [
        (20, 3, 1u32),
        (40, 40, 33),
        (0, 0, 62),
        (62, 10, 7),
        (-1, 63, 3),
        (i32::MIN, 1100, 31),
    ];
    let fits = |row: &(f32, f32)| {
        let [g, h] = grads(&[*row])[0];
        lowbit.iter().all(|&(gs, hs, d)| {
            let room = (1i64 << d) - 1;
            quantise_exact(g, gs).checked_add(room).is_some()
                && quantise_exact(h, hs).checked_add(room).is_some()
        })
    };
    let rows: Vec<(f32, f32)> = edge_rows().into_iter().filter(fits).collect();
    let grad = grads(&rows);
    // still NaN, -inf and values saturating at i64::MIN among them
    assert!(grad.iter().any(|r| r[0].is_nan()));
    assert!(grad.iter().any(|r| r[0] == f32::NEG_INFINITY));
    assert!(grad.iter().any(|r| r[1] == f32::NEG_INFINITY));
    let (mut p, n) = one_bin_per_row(factory, &rows);
    p.compute_gradients("edge values for low-bit rounding");
    for (gs, hs, drop) in lowbit {
        let s = setup_of(gs, hs, Some(drop));
        let want = expected(&grad, &s, offset);
        let what = format!("edge values, drop {drop}, shifts g {gs} h {hs}");
        assert_rows_quantise_to(&mut p, n, &s, &want, &what);
    }
}

/// Softmax labels that are no class index (NaN, ±inf, negative, fractional, k and beyond,
/// 2^32 and up) give the gradients of the core's `label as usize` on every backend: NaN and
/// negatives are class 0, fractions truncate, and from k up no class is the label. Checked
/// row by row through the quantised values of each group.
pub fn softmax_labels_outside_the_classes_match_the_cpu(factory: &dyn BackendFactory) {
    let k = 3;
    let mut labels = edge_values();
    labels.extend([
        0.0,
        1.0,
        2.0,
        3.0,
        2.5,
        0.999_999_94,
        -1.0,
        -0.75,
        3e9,
        4_294_967_040.0,
        4_294_967_296.0,
        1e20,
    ]);
    let n = labels.len();
    let bins: Vec<u16> = (1..=n as u16).collect();
    let obj = Objective::new(ObjectiveKind::Softprob, k).expect("objective");
    let margins = [0.3f32, -0.2, 1.0];
    let spec = ShardData {
        objective: obj.clone(),
        base_margin: margins.to_vec(),
        initial_margins: None,
        ..shard(
            binned(n, 1, bins, false),
            offsets_of(&[n as u32 + 1]),
            labels.clone(),
        )
    };
    let mut p = Pair::new(factory, &spec);
    let max = p.compute_gradients("softmax labels");
    let (mut g, mut h) = (vec![0f32; k], vec![0f32; k]);
    let grads: Vec<Vec<[f32; 2]>> = labels
        .iter()
        .map(|&y| {
            obj.gradient(&margins, y, 1.0, &mut g, &mut h);
            (0..k).map(|c| [g[c], h[c]]).collect()
        })
        .collect();
    // the definition: NaN is class 0, 3.0 no class
    let class_of = |i: usize| (0..k).find(|&c| grads[i][c][0] < 0.0);
    assert_eq!(class_of(0), Some(0), "NaN");
    assert_eq!(
        class_of(labels.iter().position(|&y| y == 3.0).expect("3")),
        None
    );
    for (c, max) in max.iter().enumerate() {
        let what = format!("softmax labels, group {c}");
        let (sg, sh) = (exact_scale(max[0], n), exact_scale(max[1], n));
        p.start_tree(&setup(c as u32, c, 5, sg, sh), &what);
        let hist = p.histograms(&[NodeId::ROOT], n + 1, &what);
        for i in 0..n {
            let [g, h] = grads[i][c];
            let want = [quantise_exact(g, sg.shift), quantise_exact(h, sh.shift)];
            assert_eq!(hist[i + 1], want, "{what}: row {i}, label {:e}", labels[i]);
        }
    }
}

/// Skewed features build the CPU's histograms: one where every row has the same bin, one
/// where all are missing, a binary one and one where one row in a thousand differs, with
/// exact and 8-bit scales and values near 2^49 (whose low words carry on every add). On a
/// GPU a warp's lanes then all add to one bin (CUDA sums them across the warp first).
pub fn skewed_features_build_the_cpu_histograms(factory: &dyn BackendFactory) {
    let mut rng = Rng(41);
    let n = 5000;
    let widths = [3u32, 2, 3, 5];
    let bins: Vec<u16> = (0..n)
        .flat_map(|i| {
            let rare = if i % 1000 == 7 { 4 } else { 2 };
            [1, 0, 1 + (rng.below(2) as u16), rare]
        })
        .collect();
    let labels: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.4) * 8.0).collect();
    let spec = ShardData {
        weights: Some((0..n).map(|_| rng.unit() * 2.0).collect()),
        row_offset: 123,
        ..shard(
            binned(n, widths.len(), bins, false),
            offsets_of(&widths),
            labels,
        )
    };
    let total = widths.iter().sum::<u32>() as usize;
    let mut p = Pair::new(factory, &spec);
    let max = p.compute_gradients("skewed features")[0];
    // |g| < 10 and h < 2: values up to 2^49 (every add carries into the high word), sums of
    // 5000 rows below 2^62
    let big = Scale {
        shift: 45,
        drop: None,
        max_value: 1 << 49,
    };
    for (what, grad, hess) in [
        ("exact", exact_scale(max[0], n), exact_scale(max[1], n)),
        (
            "8 bits",
            Scale::agree(max[0], n as u64, Quantisation::Bits(8)),
            { Scale::agree(max[1], n as u64, Quantisation::Bits(8)) },
        ),
        ("shift 45", big, big),
    ] {
        let what = format!("skewed features, {what}");
        p.start_tree(&setup(1, 0, 77, grad, hess), &what);
        p.histograms(&[NodeId::ROOT], total, &what);
        // split on the binary feature, then the children on the rare one
        let (l, r) = (NodeId(1), NodeId(2));
        let split = |node, left, right, feature, bin| NodeSplit {
            node,
            left,
            right,
            feature,
            rule: SplitRule::Numeric { bin },
            default_left: true,
        };
        p.apply_splits(&[split(NodeId::ROOT, l, r, 2, 1)], &what);
        p.histograms(&[l, r], total, &what);
        p.apply_splits(
            &[
                split(l, NodeId(3), NodeId(4), 3, 2),
                split(r, NodeId(5), NodeId(6), 3, 2),
            ],
            &what,
        );
        let leaves = [NodeId(3), NodeId(4), NodeId(5), NodeId(6)];
        p.histograms(&leaves, total, &what);
        p.exact_sums(&leaves, &what);
    }
}

/// Grows two trees three levels deep with random splits on random bins of `widths` (u16
/// when `wide`), with quantisation `q` and row sampling `rate`; the backend matches the CPU
/// at every step: gradient maxima, rows in the bag, histograms of every level and the
/// leaves, split counts, exact sums of every node and the margins after the tree.
pub fn grow_against_the_cpu(
    factory: &dyn BackendFactory,
    widths: &[u32],
    wide: bool,
    q: Quantisation,
    rate: f64,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let (binned, offsets) = random_bins(&mut rng, 1700, widths, wide);
    let what = format!("widths {widths:?} wide {wide}");
    grow_shard_against_the_cpu(factory, &mut rng, binned, offsets, widths, q, rate, &what);
}

/// [`grow_against_the_cpu`] on the rows of `binned` (features of `widths`, bins at
/// `offsets`).
#[allow(clippy::too_many_arguments)]
fn grow_shard_against_the_cpu(
    factory: &dyn BackendFactory,
    rng: &mut Rng,
    binned: BinnedMatrix,
    offsets: Vec<u32>,
    widths: &[u32],
    q: Quantisation,
    rate: f64,
    what: &str,
) {
    let n = binned.n_rows();
    let total = *offsets.last().expect("offsets") as usize;
    let labels: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.3) * 50.0).collect();
    let spec = ShardData {
        weights: Some((0..n).map(|_| rng.unit() * 2.0).collect()),
        base_margin: vec![0.5],
        initial_margins: None,
        row_offset: 77,
        ..shard(binned, offsets, labels)
    };
    let mut p = Pair::new(factory, &spec);
    for tree_index in 0..2u32 {
        let what = format!("{what} {q:?} rate {rate} tree {tree_index}");
        let max = p.compute_gradients(&what);
        let setup = TreeSetup {
            tree_index,
            group: 0,
            seed: 42,
            row_sample: SampleRate::new(rate),
            scales: GroupScales {
                grad: Scale::agree(max[0][0], n as u64, q),
                hess: Scale::agree(max[0][1], n as u64, q),
            },
        };
        p.start_tree(&setup, &what);
        let mut open = vec![NodeId::ROOT];
        let mut next = 1;
        let mut all = vec![NodeId::ROOT];
        let mut applied = Vec::new();
        for depth in 0..3 {
            p.histograms(&open, total, &format!("{what}: depth {depth}"));
            let splits = random_splits(rng, &open, &mut next, widths);
            p.apply_splits(&splits, &format!("{what}: depth {depth}"));
            applied.extend(splits.iter().cloned());
            open = splits.iter().flat_map(|s| [s.left, s.right]).collect();
            all.extend(&open);
        }
        p.histograms(&open, total, &format!("{what}: leaves"));
        p.exact_sums(&all, &what);
        let shift = square_shift(&setup.scales.grad, n as u64).expect("some gradient");
        let squares = p.square_sums(&all, shift, &what);
        // the root's is its children's, and the rows' gradients are not all zero
        assert_eq!(squares[0], squares[1] + squares[2], "{what}");
        assert!(squares[0] > 0, "{what}");
        // the leaves alone (disjoint): a low-bit refit's sums, which the CPU then reuses
        // to add each row's leaf value
        p.exact_sums(&open, &what);
        // the grown tree: update_margins reads in-bag leaves off the partition
        let tree = tree_of(rng, &applied, next);
        p.update_margins(&tree, 0, &what);
    }
}

/// [`grow_against_the_cpu`] on a shard the CPU stores sparse (each feature mostly one bin,
/// missing or another, one feature dense), u8 and u16 bins: the CPU builds histograms from
/// each row's few other bins and fills the common ones in, which must give what the
/// backend builds from every entry.
pub fn sparse_shards_match_the_cpu(factory: &dyn BackendFactory) {
    let widths = [2u32, 3, 9, 40, 2, 17, 5, 2, 2, 3, 2, 7, 2, 2, 60, 2];
    for (wide, q, rate) in [
        (false, Quantisation::Exact, 1.0),
        (false, Quantisation::Bits(8), 0.7),
        (true, Quantisation::Bits(8), 1.0),
    ] {
        let mut rng = Rng(808);
        let (binned, offsets) = sparse_bins(&mut rng, 3000, &widths, wide);
        let what = format!("sparse, wide {wide}");
        grow_shard_against_the_cpu(factory, &mut rng, binned, offsets, &widths, q, rate, &what);
    }
}

/// [`grow_against_the_cpu`] on u8 bins: several shared-memory tiles, features wider than a
/// small tile in global memory; exact and 8- and 3-bit values, with and without sampling.
pub fn histograms_partitions_and_sums_match_the_cpu_with_u8_bins(factory: &dyn BackendFactory) {
    let widths = [5u32, 40, 3, 17, 2, 9, 12];
    for (q, rate) in [
        (Quantisation::Exact, 1.0),
        (Quantisation::Exact, 0.6),
        (Quantisation::Bits(8), 1.0),
        (Quantisation::Bits(3), 0.5),
    ] {
        grow_against_the_cpu(factory, &widths, false, q, rate, 7);
    }
}

/// [`grow_against_the_cpu`] on u16 bins (features of 300 and 1000 bins).
pub fn histograms_partitions_and_sums_match_the_cpu_with_u16_bins(factory: &dyn BackendFactory) {
    let widths = [300u32, 7, 1000, 2, 15];
    for (q, rate) in [(Quantisation::Exact, 0.8), (Quantisation::Bits(8), 1.0)] {
        grow_against_the_cpu(factory, &widths, true, q, rate, 8);
    }
}

/// Every row adds about 2^52 with random low bits, so 32-bit low words wrap on nearly every
/// add: histogram sums (beyond 2^60) and exact sums match the CPU.
pub fn histogram_sums_carry_into_the_high_word(factory: &dyn BackendFactory) {
    let mut rng = Rng(3);
    let n = 3000;
    let (binned, offsets) = random_bins(&mut rng, n, &[4, 3], false);
    let labels: Vec<f32> = (0..n).map(|_| rng.unit() * 2.0 - 1.5).collect();
    let mut p = Pair::new(factory, &shard(binned, offsets, labels));
    p.compute_gradients("labels in [-1.5, 0.5)");
    let scale = Scale {
        shift: 51,
        drop: None,
        max_value: 1 << 52,
    };
    p.start_tree(&setup(0, 0, 1, scale, scale), "shift 51");
    let a = p.histograms(&[NodeId::ROOT], 7, "shift 51");
    assert!(a.iter().any(|v| v[0].unsigned_abs() > 1 << 60), "{a:?}");
    p.exact_sums(&[NodeId::ROOT], "shift 51");
}

/// A factory whose backends report their margins after every tree, so a test can compare
/// the margins training ended with against the saved model's predictions.
struct KeepMargins<'a> {
    inner: &'a dyn BackendFactory,
    last: Arc<Mutex<Option<Vec<f32>>>>,
}

struct Keeping {
    inner: Box<dyn HistBackend>,
    last: Arc<Mutex<Option<Vec<f32>>>>,
}

impl TreeBackend for Keeping {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        self.inner.start_tree(s)
    }
    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        self.inner.build_histograms(nodes, out)
    }
    fn apply_splits(&mut self, s: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        self.inner.apply_splits(s)
    }
    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        self.inner.exact_sums(nodes)
    }
    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        self.inner.square_sums(nodes, shift)
    }
}

impl HistBackend for Keeping {
    fn num_rows(&self) -> usize {
        self.inner.num_rows()
    }
    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        self.inner.compute_gradients()
    }
    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        self.inner.set_gradients(grad)
    }
    fn start_round(&mut self, setups: &[TreeSetup]) -> Result<()> {
        self.inner.start_round(setups)
    }
    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        self.inner.update_margins(tree, group)?;
        *self.last.lock().expect("not poisoned") = Some(self.inner.margins()?);
        Ok(())
    }
    fn margins(&self) -> Result<Vec<f32>> {
        self.inner.margins()
    }
}

impl BackendFactory for KeepMargins<'_> {
    fn create(&self, s: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(Keeping {
            inner: self.inner.create(s)?,
            last: self.last.clone(),
        }))
    }
}

/// The margins a training ends with on the backend are the trained model's predictions of
/// the training rows, bit for bit (logistic, row sampling, exact and 6-bit values), and the
/// model's cuts keep the categorical column categorical.
pub fn training_margins_equal_model_predictions(factory: &dyn BackendFactory) {
    let n = 3000;
    let data = mixed_features(n, 29);
    let y = labels_for(ObjectiveKind::Logistic, &data.signal);
    // every row in bag too: a low-bit refit's leaves then give each row's leaf to the
    // margins (the CPU backend), which must agree with routing the row by its bins
    for (q, subsample) in [
        (Quantisation::Exact, 0.7),
        (Quantisation::Bits(6), 0.7),
        (Quantisation::Bits(6), 1.0),
    ] {
        let params = Params {
            objective: ObjectiveKind::Logistic,
            num_rounds: 15,
            subsample,
            quantisation: q,
            ..Default::default()
        };
        let shard = Shard {
            features: data.features.slice_rows(0..n),
            labels: y.clone(),
            weights: None,
            row_offset: 0,
            queries: None,
        };
        let keep = KeepMargins {
            inner: factory,
            last: Arc::default(),
        };
        let trained = train::train(
            &Checked::new(params).expect("valid parameters"),
            shard,
            vec![],
            &mut sapwood_core::collective::SingleWorker,
            &keep,
            &mut Quiet,
        )
        .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        let margins = keep.last.lock().expect("not poisoned").clone();
        let margins = margins.expect("update_margins was called");
        let predicted = trained
            .model
            .predict_margins(&data.features, None)
            .expect("prediction");
        assert_eq!(
            bits(&margins),
            bits(&predicted),
            "{q:?}, subsample {subsample}"
        );
        // and the model's cuts bin the data as training did
        let cuts = &trained.model.cuts;
        assert!(matches!(cuts.feature(2), FeatureCuts::Categorical { .. }));
    }
}

/// The 12 parameter sets of "every objective and mode": squared error, logistic and
/// 3-class softmax, exact and 8-bit values, depth-wise (depth 5) and leaf-wise (12 leaves)
/// growth, 6 rounds.
pub fn every_objective_and_mode() -> Vec<Params> {
    let mut v = Vec::new();
    for objective in [
        ObjectiveKind::SquaredError,
        ObjectiveKind::Logistic,
        ObjectiveKind::Softprob,
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            for grow_policy in [GrowPolicy::Depthwise, GrowPolicy::Lossguide] {
                let depthwise = grow_policy == GrowPolicy::Depthwise;
                v.push(Params {
                    objective,
                    quantisation,
                    grow_policy,
                    num_rounds: 6,
                    max_depth: if depthwise { 5 } else { 0 },
                    max_leaves: if depthwise { 0 } else { 12 },
                    ..Default::default()
                });
            }
        }
    }
    v
}

/// Saved models are the CPU's bytes for [`every_objective_and_mode`] with missing values
/// and a categorical feature.
pub fn models_are_byte_identical_to_the_cpu_for_every_objective_and_mode(
    factory: &dyn BackendFactory,
) {
    for params in every_objective_and_mode() {
        assert_cpu_model(
            &params,
            factory,
            Job::rows(3000),
            "every objective and mode",
        );
    }
}

/// Saved models are the CPU's bytes with 32 bins a feature and weights, without and with
/// row and column sampling: given a factory of tiny tiles and chunks, every rarely taken
/// path (several tiles, global-memory fallback, chunked bins) runs.
pub fn models_are_byte_identical_with_tiles_global_fallback_and_chunks(
    factory: &dyn BackendFactory,
) {
    for (objective, quantisation) in [
        (ObjectiveKind::Logistic, Quantisation::Exact),
        (ObjectiveKind::Softprob, Quantisation::Bits(8)),
    ] {
        for (subsample, colsample_bytree) in [(1.0, 1.0), (0.7, 0.67)] {
            let params = Params {
                objective,
                quantisation,
                num_rounds: 5,
                max_bin: 32,
                subsample,
                colsample_bytree,
                seed: 11,
                ..Default::default()
            };
            let job = Job::rows(2500).weighted();
            assert_cpu_model(&params, factory, job, "tiles, fallback and chunks");
        }
    }
}

/// Saved models are the CPU's bytes with row and column sampling and weights, the
/// categorical feature's 6 levels searched as many levels are (more than
/// `max_cat_threshold`): the nodes measure their noise from their rows' squared gradients,
/// which every backend sums for them.
pub fn models_are_byte_identical_with_sampling_and_weights(factory: &dyn BackendFactory) {
    for objective in [ObjectiveKind::SquaredError, ObjectiveKind::Softprob] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            let params = Params {
                objective,
                quantisation,
                num_rounds: 6,
                subsample: 0.7,
                colsample_bytree: 0.67,
                seed: 11,
                max_cat_to_onehot: 1,
                max_cat_threshold: 2,
                ..Default::default()
            };
            let job = Job::rows(2500).weighted();
            assert_cpu_model(&params, factory, job, "sampling and weights");
            if objective == ObjectiveKind::SquaredError && quantisation == Quantisation::Exact {
                // the measured noise took part: the fitted estimate grows other trees
                let fitted = Params {
                    cat_noise: CatNoise::Fitted,
                    ..params.clone()
                };
                let trees = |p: &Params| {
                    let m = train_model(p, &CpuFactory, job);
                    format!("{:?}", m.trees)
                };
                assert_ne!(
                    trees(&params),
                    trees(&fitted),
                    "the measured noise changed nothing"
                );
            }
        }
    }
}

/// `job` on each worker count of `workers` (threads joined by the in-process collective,
/// each with its own backend from `factory`) saves the model the CPU saves on one worker,
/// and so does the CPU itself on each worker count.
pub fn assert_workers_give_the_cpu_model(
    params: &Params,
    factory: &dyn BackendFactory,
    job: Job,
    workers: &[usize],
) {
    let cpu = train_json(params, &CpuFactory, job.workers(1));
    for &w in workers {
        let what = format!("{w} workers, {params:?}");
        if w > 1 {
            let cpu_w = train_json(params, &CpuFactory, job.workers(w));
            assert!(
                cpu == cpu_w,
                "{what}: the CPU disagrees with itself: {}",
                first_difference(&cpu, &cpu_w)
            );
        }
        let dev = train_json(params, factory, job.workers(w));
        assert!(
            cpu == dev,
            "{what}: differs from the CPU on one worker: {}",
            first_difference(&cpu, &dev)
        );
    }
}

/// One, three and four workers, each with its own backend (a logical device of its own
/// on a GPU), joined by the in-process collective, save the CPU's model: logistic and
/// softmax with exact depth-wise and 8-bit leaf-wise growth, sampling and weights, and a
/// quarter of [`every_objective_and_mode`] with weights.
pub fn several_logical_devices_give_the_cpu_model(factory: &dyn BackendFactory) {
    for objective in [ObjectiveKind::Logistic, ObjectiveKind::Softprob] {
        for (quantisation, grow_policy) in [
            (Quantisation::Exact, GrowPolicy::Depthwise),
            (Quantisation::Bits(8), GrowPolicy::Lossguide),
        ] {
            let depthwise = grow_policy == GrowPolicy::Depthwise;
            let params = Params {
                objective,
                quantisation,
                grow_policy,
                num_rounds: 5,
                max_depth: if depthwise { 5 } else { 0 },
                max_leaves: 10,
                subsample: 0.8,
                ..Default::default()
            };
            let job = Job::rows(2400).seed(23).weighted();
            assert_workers_give_the_cpu_model(&params, factory, job, &[1, 3]);
        }
    }
    for params in every_objective_and_mode().into_iter().step_by(3) {
        assert_workers_give_the_cpu_model(&params, factory, Job::rows(2400).weighted(), &[4]);
    }
}
