//! Kernel-level checks of GPU backends through what each reads back besides the trait
//! (every row's gradients, histogram values and exact values), and device prediction
//! against the model's. Each backend crate passes its own constructor and read-back methods.

use sapwood_core::backend::{CpuFactory, HistBackend, ShardData};
use sapwood_core::data::BinnedMatrix;
use sapwood_core::hist::HistBin;
use sapwood_core::model::Model;
use sapwood_core::objective::{Objective, ObjectiveKind};
use sapwood_core::params::Params;
use sapwood_core::Result;

use crate::conformance::{
    exact_values, gradients_and_margins, hist_values, quantisation_labels, quantisation_setup,
    RowGradients, QUANTISATION_CASES,
};
use crate::data::{copy_shard, random_bins, shard};
use crate::rng::Rng;
use crate::train::{train_model, Job};

/// A backend's read-back of one value per row (or per row and group) from the device.
pub type ReadBack<B, T> = fn(&B) -> Result<Vec<T>>;

/// A backend's prediction: margins of `rounds` rounds of a model on binned rows.
pub type Predict<'a> = dyn Fn(&Model, &BinnedMatrix, usize) -> Result<Vec<f32>> + 'a;

/// Every row's (g, h) read back after random trees match the objective's definition bit
/// for bit (and margins and maxima the CPU's), for every objective, 1 to 70 groups.
pub fn gradients_read_back_match_the_objective_bit_for_bit<B: HistBackend>(
    make: impl Fn(ShardData) -> Result<B>,
    read_gradients: ReadBack<B, f32>,
) {
    let read = |b: &B| read_gradients(b);
    gradients_and_margins(&|s| make(s).map(Box::new), RowGradients::Read(&read));
}

/// Every row's histogram values (and exact values, where the backend can read them back)
/// match the core's definition for shifts from -40 to 200 (saturating), low-bit cases
/// dropping 0 to 50 bits, gradients of every kind of f32 and rows far into the global row
/// space. Rows whose exact value exceeds 2^62 in low-bit mode have no defined histogram
/// value and are skipped there.
pub fn quantised_values_read_back_match_the_core_exactly<B: HistBackend>(
    make: impl Fn(ShardData) -> Result<B>,
    read_hist_values: ReadBack<B, HistBin>,
    read_exact_values: Option<ReadBack<B, HistBin>>,
) {
    let n = 1500;
    let (binned, offsets) = random_bins(&mut Rng(99), n, &[3], false);
    let labels = quantisation_labels(n, (60, 200));
    let spec = ShardData {
        row_offset: 5_000_000_123,
        ..shard(binned, offsets, labels)
    };
    let mut b = make(copy_shard(&spec)).unwrap_or_else(|e| panic!("creating the backend: {e}"));
    b.compute_gradients().expect("gradients");
    // squared error with margin 0 and weight 1: g = -label, h = 1
    let obj = Objective::new(ObjectiveKind::SquaredError, 1).expect("objective");
    let (mut g, mut h) = ([0f32], [0f32]);
    for (shift, drop) in QUANTISATION_CASES {
        // bounds the backend must not rely on: GPU kernels never read them
        let setup = quantisation_setup(shift, drop, [1, 1]);
        b.start_tree(&setup).expect("start_tree");
        let got = read_hist_values(&b).expect("histogram values");
        let exact = read_exact_values.map(|read| read(&b).expect("exact values"));
        for (i, &y) in spec.labels.iter().enumerate() {
            obj.gradient(&[0.0], y, 1.0, &mut g, &mut h);
            let x = exact_values(g[0], h[0], &setup);
            if let Some(exact) = &exact {
                assert_eq!(exact[i], x, "row {i} g {:e} shift {shift}", g[0]);
            }
            if drop.is_some() && x[0].unsigned_abs() > 1 << 62 {
                continue;
            }
            let want = hist_values(x, &setup, spec.row_offset + i as u64);
            assert_eq!(
                got[i], want,
                "row {i} g {:e} shift {shift} drop {drop:?}",
                g[0]
            );
        }
    }
}

/// The device's prediction of a 5-round softmax model on the training rows equals the
/// model's own, bit for bit, after 0, 2 and 5 rounds; `predict(model, binned, rounds)`
/// runs the backend's prediction.
pub fn device_prediction_equals_model_prediction(predict: &Predict<'_>) {
    let params = Params {
        objective: ObjectiveKind::Softprob,
        num_rounds: 5,
        ..Default::default()
    };
    let job = Job::rows(1500).seed(5);
    let model = train_model(&params, &CpuFactory, job);
    let data = crate::data::mixed_features(job.rows, job.seed);
    let binned = model.bin(&data.features).expect("binning");
    for rounds in [0, 2, 5] {
        let want = model.predict_binned(&binned, rounds);
        let got = predict(&model, &binned, rounds).expect("device prediction");
        assert_eq!(
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "rounds {rounds}"
        );
    }
}

/// 70,000 features of 2 bins with 2-bin tiles (`make` builds the backend so): 70,000 tiles
/// along grid y, above its limit of 65,535, so the histograms must be built in several
/// launches; they must equal the CPU's.
pub fn more_than_65535_tiles_go_in_several_launches<B: HistBackend + ?Sized>(
    make: &dyn Fn(ShardData) -> Result<Box<B>>,
) {
    use crate::conformance::{setup, Pair};
    use crate::data::{binned, offsets_of};
    use sapwood_core::params::Quantisation;
    use sapwood_core::quantise::Scale;
    use sapwood_core::tree::NodeId;
    let (n, nf) = (40, 70_000);
    let mut rng = Rng(5);
    let bins: Vec<u16> = (0..n * nf).map(|_| rng.below(2) as u16).collect();
    let labels: Vec<f32> = (0..n).map(|_| rng.unit() * 4.0 - 2.0).collect();
    let spec = shard(binned(n, nf, bins, false), offsets_of(&vec![2; nf]), labels);
    let mut p = Pair::with(make, &spec);
    let max = p.compute_gradients("70,000 tiles")[0];
    let scale = |m| Scale::agree(m, n as u64, Quantisation::Exact);
    p.start_tree(
        &setup(0, 0, 1, scale(max[0]), scale(max[1])),
        "70,000 tiles",
    );
    p.histograms(&[NodeId::ROOT], 2 * nf, "70,000 tiles");
    assert_eq!(p.dev.num_rows(), n);
}
