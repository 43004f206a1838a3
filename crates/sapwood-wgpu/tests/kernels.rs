//! Each kernel against its CPU counterpart on random inputs, through the backend methods
//! that run it: gradients, quantisation (exact and low-bit), row sampling, histograms
//! (shared tiles, the global-memory fallback, chunked bins), partitions, leaf sums and
//! margin updates. Exact-mode scales make every row's value large, so sums carry into the
//! high word constantly.

mod common;

use std::sync::Arc;

use common::{random_bins, small_gpu, Rng};
use sapwood_core::backend::{CpuBackend, HistBackend, NodeSplit, TreeSetup};
use sapwood_core::data::BinnedMatrix;
use sapwood_core::hash::{HashKey, SampleRate, Stream};
use sapwood_core::objective::Objective;
use sapwood_core::params::{ObjectiveKind, Quantisation};
use sapwood_core::quantise::{quantise_exact, GroupScales, Scale};
use sapwood_core::split::{BinSet, SplitRule};
use sapwood_core::train::ShardData;
use sapwood_core::tree::{Node, NodeId, Split, Tree};
use sapwood_wgpu::WgpuBackend;

struct Pair {
    cpu: CpuBackend,
    gpu: WgpuBackend,
}

#[allow(clippy::too_many_arguments)]
fn pair(
    binned: BinnedMatrix,
    offsets: Vec<u32>,
    labels: Vec<f32>,
    weights: Option<Vec<f32>>,
    obj: Objective,
    base: Vec<f32>,
    row_offset: u64,
) -> Pair {
    let binned = Arc::new(binned);
    let cpu = CpuBackend::new(
        binned.clone(),
        offsets.clone(),
        labels.clone(),
        weights.clone(),
        obj,
        &base,
        row_offset,
    )
    .unwrap();
    let gpu = WgpuBackend::new(
        small_gpu(),
        ShardData {
            binned,
            offsets,
            labels,
            weights,
            objective: obj,
            base_margin: base,
            row_offset,
        },
    )
    .unwrap();
    Pair { cpu, gpu }
}

fn leaf(value: f32) -> Node {
    Node {
        split: None,
        value,
        cover: 0.0,
    }
}

fn inner(feature: usize, rule: SplitRule, default_left: bool, l: u32, value: f32) -> Node {
    Node {
        split: Some(Split {
            feature,
            rule,
            default_left,
            left: NodeId(l),
            right: NodeId(l + 1),
            gain: 1.0,
        }),
        value,
        cover: 0.0,
    }
}

/// A random depth-2 tree over `widths` whose leaves take `values`.
fn random_tree(rng: &mut Rng, widths: &[u32], values: [f32; 4]) -> Tree {
    let rule = |rng: &mut Rng| {
        let f = rng.below(widths.len() as u64) as usize;
        let w = widths[f] as u64;
        let r = if rng.below(2) == 0 {
            SplitRule::Numeric {
                bin: 1 + rng.below(w.max(2) - 1) as u16,
            }
        } else {
            SplitRule::Categorical {
                left: BinSet::from_bins((1..w as u16).filter(|_| rng.below(2) == 0)),
            }
        };
        (f, r, rng.below(2) == 0)
    };
    let (f0, r0, d0) = rule(rng);
    let (f1, r1, d1) = rule(rng);
    let (f2, r2, d2) = rule(rng);
    Tree {
        nodes: vec![
            inner(f0, r0, d0, 1, 0.0),
            inner(f1, r1, d1, 3, 0.0),
            inner(f2, r2, d2, 5, 0.0),
            leaf(values[0]),
            leaf(values[1]),
            leaf(values[2]),
            leaf(values[3]),
        ],
    }
}

const ODD_VALUES: [f32; 12] = [
    0.37, -1.25, 31.0, -45.0, 1e-40, -0.0, 7.5e-3, 19.99, -19.999, 0.5, 2.0, -3.75,
];

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn gradients_and_margins_match_the_objective_bit_for_bit() {
    let widths = [6u32, 9, 4];
    for (kind, k) in [
        (ObjectiveKind::SquaredError, 1),
        (ObjectiveKind::Logistic, 1),
        (ObjectiveKind::Softprob, 3),
        (ObjectiveKind::Softprob, 7),
        // beyond the 64 groups reduced in workgroup memory
        (ObjectiveKind::Softprob, 70),
    ] {
        let mut rng = Rng(k as u64 * 31 + kind as u64);
        let n = 2000;
        let (binned, offsets) = random_bins(&mut rng, n, &widths, false);
        let labels: Vec<f32> = (0..n)
            .map(|_| match kind {
                ObjectiveKind::SquaredError => (rng.unit() - 0.5) * 1e4,
                ObjectiveKind::Logistic => (rng.below(3) as f32) * 0.5,
                ObjectiveKind::Softprob => rng.below(k as u64) as f32,
            })
            .collect();
        let weights: Vec<f32> = (0..n).map(|_| rng.unit() * 3.0).collect();
        let obj = Objective::new(kind, k).unwrap();
        let base: Vec<f32> = (0..k).map(|c| c as f32 * 0.1 - 0.2).collect();
        let mut p = pair(
            binned,
            offsets,
            labels.clone(),
            Some(weights.clone()),
            obj,
            base,
            0,
        );
        for round in 0..4 {
            for group in 0..k {
                let v = [0, 1, 2, 3].map(|_| ODD_VALUES[rng.below(12) as usize]);
                let tree = random_tree(&mut rng, &widths, v);
                p.cpu.update_margins(&tree, group).unwrap();
                p.gpu.update_margins(&tree, group).unwrap();
            }
            let margins = p.cpu.margins().unwrap();
            assert_eq!(
                margins.iter().map(|m| m.to_bits()).collect::<Vec<_>>(),
                p.gpu
                    .margins()
                    .unwrap()
                    .iter()
                    .map(|m| m.to_bits())
                    .collect::<Vec<_>>(),
                "{kind:?} margins, round {round}"
            );
            let cpu_max = p.cpu.compute_gradients().unwrap();
            let gpu_max = p.gpu.compute_gradients().unwrap();
            let grads = p.gpu.read_gradients().unwrap();
            let (mut g, mut h) = (vec![0f32; k], vec![0f32; k]);
            for i in 0..n {
                obj.gradient(
                    &margins[i * k..(i + 1) * k],
                    labels[i],
                    weights[i],
                    &mut g,
                    &mut h,
                );
                for c in 0..k {
                    let j = 2 * (i * k + c);
                    assert_eq!(
                        (g[c].to_bits(), h[c].to_bits()),
                        (grads[j].to_bits(), grads[j + 1].to_bits()),
                        "{kind:?} row {i} group {c}: margins {:?}",
                        &margins[i * k..(i + 1) * k]
                    );
                }
            }
            let bits = |v: Vec<[f32; 2]>| -> Vec<[u32; 2]> {
                v.iter().map(|m| [m[0].to_bits(), m[1].to_bits()]).collect()
            };
            assert_eq!(bits(cpu_max), bits(gpu_max), "{kind:?} maxima");
        }
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn quantisation_matches_the_core_exactly() {
    let mut rng = Rng(99);
    let n = 1500;
    let (binned, offsets) = random_bins(&mut rng, n, &[3], false);
    // squared error with margin 0 and weight 1: g = -label, so labels choose the gradients
    let labels: Vec<f32> = (0..n)
        .map(|i| match i % 6 {
            0 => (i as f32 / 2.0).floor() + 0.5,
            1 => -((i as f32 / 4.0).floor() + 0.5),
            2 => {
                f32::from_bits(rng.next() as u32 & 0x807f_ffff | (60 + rng.below(140) as u32) << 23)
            }
            3 => 1e-39 * (rng.unit() - 0.5),
            _ => (rng.unit() - 0.5) * 200.0,
        })
        .collect();
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).unwrap();
    let row_offset = 5_000_000_123;
    let mut p = pair(
        binned,
        offsets,
        labels.clone(),
        None,
        obj,
        vec![0.0],
        row_offset,
    );
    p.gpu.compute_gradients().unwrap();
    let grads = p.gpu.read_gradients().unwrap();
    let cases: Vec<(i32, Option<u32>)> = vec![
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
    for (shift, drop) in cases {
        let scale = Scale {
            shift,
            drop,
            max_value: 1,
        };
        let setup = TreeSetup {
            tree_index: 5,
            group: 0,
            seed: 0xfeed_beef_1234,
            row_sample: SampleRate::new(1.0),
            scales: GroupScales {
                grad: scale,
                hess: Scale { shift: 3, ..scale },
            },
        };
        p.gpu.start_tree(&setup).unwrap();
        let got = p.gpu.read_hist_values().unwrap();
        let exact = p.gpu.read_exact_values().unwrap();
        let gk = HashKey::new(setup.seed, Stream::GradNoise, 5);
        let hk = HashKey::new(setup.seed, Stream::HessNoise, 5);
        for i in 0..n {
            let (g, h) = (grads[2 * i], grads[2 * i + 1]);
            let x = [quantise_exact(g, shift), quantise_exact(h, 3)];
            assert_eq!(exact[i], x, "row {i} g {g:e} shift {shift}");
            if drop.is_some() && x[0].unsigned_abs() > 1 << 62 {
                continue;
            }
            let row = row_offset + i as u64;
            let want = [
                setup.scales.grad.hist_value(x[0], gk, row),
                setup.scales.hess.hist_value(x[1], hk, row),
            ];
            assert_eq!(got[i], want, "row {i} g {g:e} shift {shift} drop {drop:?}");
        }
    }
}

fn random_splits(rng: &mut Rng, open: &[NodeId], next: &mut u32, widths: &[u32]) -> Vec<NodeSplit> {
    open.iter()
        .map(|&node| {
            let t = random_tree(rng, widths, [0.0; 4]);
            let s = t.nodes[0].split.clone().unwrap();
            let left = NodeId(*next);
            *next += 2;
            NodeSplit {
                node,
                left,
                right: NodeId(left.0 + 1),
                feature: s.feature,
                rule: s.rule,
                default_left: s.default_left,
            }
        })
        .collect()
}

fn grow_both(widths: &[u32], wide: bool, q: Quantisation, rate: f64, seed: u64) {
    let mut rng = Rng(seed);
    let n = 1700;
    let (binned, offsets) = random_bins(&mut rng, n, widths, wide);
    let total = *offsets.last().unwrap() as usize;
    let labels: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.3) * 50.0).collect();
    let weights: Vec<f32> = (0..n).map(|_| rng.unit() * 2.0).collect();
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).unwrap();
    let mut p = pair(binned, offsets, labels, Some(weights), obj, vec![0.5], 77);
    for tree_index in 0..2u32 {
        let max = p.cpu.compute_gradients().unwrap();
        assert_eq!(max, p.gpu.compute_gradients().unwrap());
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
        let what = format!("widths {widths:?} wide {wide} {q:?} rate {rate} tree {tree_index}");
        assert_eq!(
            p.cpu.start_tree(&setup).unwrap(),
            p.gpu.start_tree(&setup).unwrap(),
            "{what}: root rows"
        );
        let mut open = vec![NodeId::ROOT];
        let mut next = 1;
        let mut all = vec![NodeId::ROOT];
        let mut applied = Vec::new();
        for depth in 0..3 {
            let mut a = vec![0i64; open.len() * 2 * total];
            let mut b = a.clone();
            p.cpu.build_histograms(&open, &mut a).unwrap();
            p.gpu.build_histograms(&open, &mut b).unwrap();
            assert_eq!(a, b, "{what}: histograms at depth {depth}");
            let splits = random_splits(&mut rng, &open, &mut next, widths);
            let ca = p.cpu.apply_splits(&splits).unwrap();
            let cb = p.gpu.apply_splits(&splits).unwrap();
            assert_eq!(ca, cb, "{what}: split counts at depth {depth}");
            applied.extend(splits.iter().cloned());
            open = splits.iter().flat_map(|s| [s.left, s.right]).collect();
            all.extend(&open);
        }
        let mut a = vec![0i64; open.len() * 2 * total];
        let mut b = a.clone();
        p.cpu.build_histograms(&open, &mut a).unwrap();
        p.gpu.build_histograms(&open, &mut b).unwrap();
        assert_eq!(a, b, "{what}: leaf histograms");
        assert_eq!(
            p.cpu.exact_sums(&all).unwrap(),
            p.gpu.exact_sums(&all).unwrap(),
            "{what}: exact sums"
        );
        // the grown tree: update_margins reads in-bag leaves off the partition
        let mut nodes: Vec<Node> = (0..next)
            .map(|_| leaf(ODD_VALUES[rng.below(12) as usize]))
            .collect();
        for s in &applied {
            nodes[s.node.index()].split = Some(Split {
                feature: s.feature,
                rule: s.rule.clone(),
                default_left: s.default_left,
                left: s.left,
                right: s.right,
                gain: 1.0,
            });
        }
        let tree = Tree { nodes };
        p.cpu.update_margins(&tree, 0).unwrap();
        p.gpu.update_margins(&tree, 0).unwrap();
        assert_eq!(p.cpu.margins().unwrap(), p.gpu.margins().unwrap(), "{what}");
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn histograms_partitions_and_sums_match_the_cpu_with_u8_bins() {
    // tiles of 16 bins: several shared tiles, and features 1 and 3 in global memory
    let widths = [5u32, 40, 3, 17, 2, 9, 12];
    for (q, rate) in [
        (Quantisation::Exact, 1.0),
        (Quantisation::Exact, 0.6),
        (Quantisation::Bits(8), 1.0),
        (Quantisation::Bits(3), 0.5),
    ] {
        grow_both(&widths, false, q, rate, 7);
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn histograms_partitions_and_sums_match_the_cpu_with_u16_bins() {
    let widths = [300u32, 7, 1000, 2, 15];
    for (q, rate) in [(Quantisation::Exact, 0.8), (Quantisation::Bits(8), 1.0)] {
        grow_both(&widths, true, q, rate, 8);
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn histogram_sums_carry_into_the_high_word() {
    // every row adds about 2^52 with random low bits: the low words wrap on nearly every add
    let mut rng = Rng(3);
    let n = 3000;
    let widths = [4u32, 3];
    let (binned, offsets) = random_bins(&mut rng, n, &widths, false);
    let labels: Vec<f32> = (0..n).map(|_| rng.unit() * 2.0 - 1.5).collect();
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).unwrap();
    let mut p = pair(binned, offsets, labels, None, obj, vec![0.0], 0);
    p.cpu.compute_gradients().unwrap();
    p.gpu.compute_gradients().unwrap();
    let scale = Scale {
        shift: 51,
        drop: None,
        max_value: 1 << 52,
    };
    let setup = TreeSetup {
        tree_index: 0,
        group: 0,
        seed: 1,
        row_sample: SampleRate::new(1.0),
        scales: GroupScales {
            grad: scale,
            hess: scale,
        },
    };
    p.cpu.start_tree(&setup).unwrap();
    p.gpu.start_tree(&setup).unwrap();
    let mut a = vec![0i64; 2 * 7];
    let mut b = a.clone();
    p.cpu.build_histograms(&[NodeId::ROOT], &mut a).unwrap();
    p.gpu.build_histograms(&[NodeId::ROOT], &mut b).unwrap();
    assert!(a.iter().any(|v| v.unsigned_abs() > 1 << 60), "{a:?}");
    assert_eq!(a, b);
    assert_eq!(
        p.cpu.exact_sums(&[NodeId::ROOT]).unwrap(),
        p.gpu.exact_sums(&[NodeId::ROOT]).unwrap()
    );
}
