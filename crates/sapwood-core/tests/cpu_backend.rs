//! The CPU reference backend against brute force, and training margins against prediction.

use std::sync::Arc;

use proptest::prelude::*;
use sapwood_core::backend::{CpuBackend, HistBackend, NodeSplit, TreeSetup};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{BinnedMatrix, Bins, Column, Cuts, FeatureCuts, FeatureMatrix};
use sapwood_core::hash::SampleRate;
use sapwood_core::objective::Objective;
use sapwood_core::params::{ObjectiveKind, Params, Quantisation};
use sapwood_core::quantise::{quantise_exact, GroupScales, Scale};
use sapwood_core::split::{BinSet, SplitRule};
use sapwood_core::train::{self, CpuFactory, Quiet, Shard};
use sapwood_core::tree::NodeId;

fn backend(bins: Vec<u8>, nf: usize, labels: Vec<f32>, nb: usize) -> (CpuBackend, Vec<u32>) {
    let n = labels.len();
    let binned = BinnedMatrix::from_bins(n, nf, Bins::U8(bins)).unwrap();
    let offsets: Vec<u32> = (0..=nf as u32).map(|f| f * nb as u32).collect();
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).unwrap();
    let b = CpuBackend::new(
        Arc::new(binned),
        offsets.clone(),
        labels,
        None,
        obj,
        &[0.0],
        0,
    )
    .unwrap();
    (b, offsets)
}

fn setup(max_abs: f32, n: u64, q: Quantisation) -> TreeSetup {
    TreeSetup {
        tree_index: 0,
        group: 0,
        seed: 1,
        row_sample: SampleRate::new(1.0),
        scales: GroupScales {
            grad: Scale::agree(max_abs, n, q),
            hess: Scale::agree(1.0, n, q),
        },
    }
}

proptest! {
    #[test]
    fn histograms_match_brute_force_and_subtraction_equals_direct_build(
        rows in proptest::collection::vec((proptest::collection::vec(0u8..5, 3), -100.0f32..100.0), 1..300),
        split_feature in 0usize..3,
        split_bin in 1u16..4,
        default_left in any::<bool>(),
    ) {
        let (nf, nb) = (3, 5);
        let bins: Vec<u8> = rows.iter().flat_map(|r| r.0.clone()).collect();
        let labels: Vec<f32> = rows.iter().map(|r| r.1).collect();
        let n = labels.len();
        let (mut b, offsets) = backend(bins.clone(), nf, labels.clone(), nb);
        let max = b.compute_gradients().unwrap();
        let s = setup(max[0][0], n as u64, Quantisation::Exact);
        b.start_tree(&s).unwrap();
        let width = 2 * nb * nf;
        let mut root = vec![0i64; width];
        b.build_histograms(&[NodeId::ROOT], &mut root).unwrap();
        // brute force from the definition: g = margin - label with margin 0, h = 1
        let mut want = vec![0i64; width];
        for (i, &y) in labels.iter().enumerate() {
            for f in 0..nf {
                let e = 2 * (offsets[f] as usize + bins[i * nf + f] as usize);
                want[e] += quantise_exact(0.0 - y, s.scales.grad.shift);
                want[e + 1] += quantise_exact(1.0, s.scales.hess.shift);
            }
        }
        prop_assert_eq!(&root, &want);
        let rule = SplitRule::Numeric { bin: split_bin };
        b.apply_splits(&[NodeSplit { node: NodeId::ROOT, left: NodeId(1), right: NodeId(2), feature: split_feature, rule, default_left }]).unwrap();
        let mut children = vec![0i64; 2 * width];
        b.build_histograms(&[NodeId(1), NodeId(2)], &mut children).unwrap();
        let (left, right) = children.split_at(width);
        let by_subtraction: Vec<i64> = root.iter().zip(left).map(|(p, l)| p - l).collect();
        prop_assert_eq!(by_subtraction, right.to_vec());
    }
}

#[test]
fn categorical_splits_route_by_bin_set() {
    let bins = vec![1u8, 2, 3, 0, 2];
    let (mut b, _) = backend(bins, 1, vec![1.0, 2.0, 3.0, 4.0, 5.0], 4);
    let max = b.compute_gradients().unwrap();
    b.start_tree(&setup(max[0][0], 5, Quantisation::Exact))
        .unwrap();
    let rule = SplitRule::Categorical {
        left: BinSet::from_bins([2u16]),
    };
    let counts = b
        .apply_splits(&[NodeSplit {
            node: NodeId::ROOT,
            left: NodeId(1),
            right: NodeId(2),
            feature: 0,
            rule,
            default_left: true,
        }])
        .unwrap();
    // rows with bin 2 and the missing row go left
    assert_eq!(counts, vec![[3, 2]]);
}

#[test]
fn training_margins_equal_model_predictions() {
    let n = 3_000;
    let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 / 10.0).collect();
    let z: Vec<f32> = (0..n)
        .map(|i| {
            if i % 13 == 0 {
                f32::NAN
            } else {
                ((i * 11) % 17) as f32
            }
        })
        .collect();
    let c: Vec<u32> = (0..n).map(|i| (i % 5) as u32).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| ((x[i] * 0.7).sin() + c[i] as f32 * 0.3 > 0.4) as u8 as f32)
        .collect();
    let levels: Vec<String> = (0..5).map(|i| format!("l{i}")).collect();
    let features = FeatureMatrix::new(
        vec!["x".into(), "z".into(), "c".into()],
        vec![
            Column::Numeric(x.into()),
            Column::Numeric(z.into()),
            Column::Categorical {
                codes: c.into(),
                levels,
            },
        ],
    )
    .unwrap();
    for q in [Quantisation::Exact, Quantisation::Bits(6)] {
        let params = Params {
            objective: ObjectiveKind::Logistic,
            num_rounds: 15,
            subsample: 0.7,
            quantisation: q,
            ..Default::default()
        };
        let shard = Shard {
            features: features.slice_rows(0..n),
            labels: y.clone(),
            weights: None,
            row_offset: 0,
        };
        // a factory that keeps the backend's final margins
        struct Keep(std::sync::Mutex<Option<Vec<f32>>>);
        struct Wrap<'a>(Box<dyn HistBackend>, &'a Keep);
        impl HistBackend for Wrap<'_> {
            fn num_rows(&self) -> usize {
                self.0.num_rows()
            }
            fn compute_gradients(&mut self) -> sapwood_core::Result<Vec<[f32; 2]>> {
                self.0.compute_gradients()
            }
            fn start_tree(&mut self, s: &TreeSetup) -> sapwood_core::Result<u64> {
                self.0.start_tree(s)
            }
            fn build_histograms(
                &mut self,
                n: &[NodeId],
                o: &mut [i64],
            ) -> sapwood_core::Result<()> {
                self.0.build_histograms(n, o)
            }
            fn apply_splits(&mut self, s: &[NodeSplit]) -> sapwood_core::Result<Vec<[u64; 2]>> {
                self.0.apply_splits(s)
            }
            fn exact_sums(&mut self, n: &[NodeId]) -> sapwood_core::Result<Vec<[i64; 2]>> {
                self.0.exact_sums(n)
            }
            fn update_margins(
                &mut self,
                t: &sapwood_core::tree::Tree,
                g: usize,
            ) -> sapwood_core::Result<()> {
                self.0.update_margins(t, g)?;
                *self.1 .0.lock().unwrap() = Some(self.0.margins()?);
                Ok(())
            }
            fn margins(&self) -> sapwood_core::Result<Vec<f32>> {
                self.0.margins()
            }
        }
        let keep: &'static Keep = Box::leak(Box::new(Keep(std::sync::Mutex::new(None))));
        struct F(&'static Keep);
        impl train::BackendFactory for F {
            fn create(&self, s: train::ShardData) -> sapwood_core::Result<Box<dyn HistBackend>> {
                Ok(Box::new(Wrap(CpuFactory.create(s)?, self.0)))
            }
        }
        let trained = train::train(
            &params,
            shard,
            vec![],
            &mut SingleWorker,
            &F(keep),
            &mut Quiet,
        )
        .unwrap();
        let margins = keep.0.lock().unwrap().clone().unwrap();
        let predicted = trained.model.predict_margins(&features, None).unwrap();
        assert_eq!(margins, predicted, "{q:?}");
        // and the model's cuts bin the data as training did
        let cuts: &Cuts = &trained.model.cuts;
        assert!(matches!(cuts.feature(2), FeatureCuts::Categorical { .. }));
    }
}
