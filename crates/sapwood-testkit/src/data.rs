//! Input data: mixed feature matrices with missing values and a categorical column, labels
//! per objective, random binned shards and the shard description backends are built from.

use std::sync::Arc;

use sapwood_core::backend::ShardData;
use sapwood_core::data::{BinnedMatrix, Bins, Column, FeatureMatrix};
use sapwood_core::objective::{Objective, ObjectiveKind};

use crate::rng::Rng;

/// A data set with every kind of column: what whole trainings are run on.
pub struct Mixed {
    /// Columns `x` (numeric), `z` (numeric, missing in every 7th row) and `c` (categorical,
    /// 6 levels).
    pub features: FeatureMatrix<'static>,
    /// A noisy signal of the three columns, turned into labels by [`labels_for`].
    pub signal: Vec<f32>,
    /// Row weights in {0.5, 0.75, 1, 1.25}.
    pub weights: Vec<f32>,
}

/// `n` rows of a numeric feature, one with missing values and a categorical one, drawn
/// from `seed`.
pub fn mixed_features(n: usize, seed: u64) -> Mixed {
    let mut rng = Rng(seed);
    let x: Vec<f32> = (0..n).map(|_| rng.unit() * 10.0 - 5.0).collect();
    let z: Vec<f32> = (0..n)
        .map(|i| {
            if i % 7 == 0 {
                f32::NAN
            } else {
                rng.unit() * 3.0
            }
        })
        .collect();
    let c: Vec<u32> = (0..n).map(|_| rng.below(6) as u32).collect();
    let signal: Vec<f32> = (0..n)
        .map(|i| {
            let zz = if z[i].is_nan() { 1.0 } else { z[i] };
            (x[i] * 0.8).sin()
                + zz * 0.5
                + [0.3, -0.7, 1.1, 0.0, -0.2, 0.6][c[i] as usize]
                + (rng.unit() - 0.5) * 0.3
        })
        .collect();
    let levels: Vec<String> = (0..6).map(|i| format!("c{i}")).collect();
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
    .expect("valid columns");
    let weights = (0..n).map(|i| 0.5 + (i % 4) as f32 * 0.25).collect();
    Mixed {
        features,
        signal,
        weights,
    }
}

/// Labels for `kind` from a signal: the signal itself, `signal > 0.4`, 3 classes, or a
/// positive value (exp of the signal, rounded down for counts).
pub fn labels_for(kind: ObjectiveKind, signal: &[f32]) -> Vec<f32> {
    match kind {
        k if k.is_binary() => signal.iter().map(|&s| (s > 0.4) as u8 as f32).collect(),
        ObjectiveKind::Poisson | ObjectiveKind::Tweedie => {
            signal.iter().map(|&s| s.exp().floor()).collect()
        }
        ObjectiveKind::Gamma => signal.iter().map(|&s| s.exp() + 0.01).collect(),
        k if !k.is_multiclass() => signal.to_vec(),
        _ => signal
            .iter()
            .map(|&s| {
                (if s < 0.0 {
                    0
                } else if s < 1.0 {
                    1
                } else {
                    2
                }) as f32
            })
            .collect(),
    }
}

/// Histogram offsets of features with the given widths (bins per feature, missing included).
pub fn offsets_of(widths: &[u32]) -> Vec<u32> {
    let mut offsets = vec![0u32];
    for w in widths {
        offsets.push(offsets.last().expect("not empty") + w);
    }
    offsets
}

/// Binned rows from row-major bins, as u16 when `wide`, else u8.
pub fn binned(n: usize, nf: usize, vals: Vec<u16>, wide: bool) -> BinnedMatrix {
    let bins = if wide {
        Bins::U16(vals)
    } else {
        Bins::U8(vals.iter().map(|&v| v as u8).collect())
    };
    BinnedMatrix::from_bins(n, nf, bins).expect("valid bins")
}

/// Random bins of `n` rows with the given feature widths (bin 0, missing, is drawn too) and
/// their offsets.
pub fn random_bins(
    rng: &mut Rng,
    n: usize,
    widths: &[u32],
    wide: bool,
) -> (BinnedMatrix, Vec<u32>) {
    let nf = widths.len();
    let vals: Vec<u16> = (0..n * nf)
        .map(|i| rng.below(widths[i % nf] as u64) as u16)
        .collect();
    (binned(n, nf, vals, wide), offsets_of(widths))
}

/// Bins of `n` rows as sparse data has them, and their offsets: each feature holds one bin
/// (missing, or another for some) in all but one row in 40, except the feature in the
/// middle, whose bins are all drawn. So few bins differ from their feature's common one
/// that the CPU backend stores the rows sparse.
pub fn sparse_bins(
    rng: &mut Rng,
    n: usize,
    widths: &[u32],
    wide: bool,
) -> (BinnedMatrix, Vec<u32>) {
    let nf = widths.len();
    let vals: Vec<u16> = (0..n * nf)
        .map(|i| {
            let (f, w) = (i % nf, widths[i % nf]);
            if f == nf / 2 || rng.below(40) == 0 {
                rng.below(w as u64) as u16
            } else {
                (f as u32 % w) as u16
            }
        })
        .collect();
    (binned(n, nf, vals, wide), offsets_of(widths))
}

/// Rows per value of the row-naming feature pair of [`with_row_ids`].
pub const ROWS_PER_ID: usize = 200;

/// Random bins (as [`random_bins`], u8) followed by two features naming each row: `hi` =
/// 1 + row / [`ROWS_PER_ID`] and `lo` = 1 + row % [`ROWS_PER_ID`]. A node holding one value
/// of `hi` has one row per bin of `lo`, so its histogram shows every row's value apart.
pub fn with_row_ids(rng: &mut Rng, n: usize, widths: &[u32]) -> (BinnedMatrix, Vec<u32>) {
    let his = n.div_ceil(ROWS_PER_ID) as u32;
    assert!(his < 255, "too many rows for u8 row ids");
    let mut all = widths.to_vec();
    all.extend([his + 1, ROWS_PER_ID as u32 + 1]);
    let nf = all.len();
    let mut vals = Vec::with_capacity(n * nf);
    for i in 0..n {
        vals.extend(widths.iter().map(|&w| rng.below(w as u64) as u16));
        vals.extend([1 + (i / ROWS_PER_ID) as u16, 1 + (i % ROWS_PER_ID) as u16]);
    }
    (binned(n, nf, vals, false), offsets_of(&all))
}

/// A shard of `binned` with squared error, no weights, margins 0 and row offset 0 (change
/// the rest with struct update syntax).
pub fn shard(binned: BinnedMatrix, offsets: Vec<u32>, labels: Vec<f32>) -> ShardData {
    ShardData {
        binned: Arc::new(binned),
        offsets,
        labels,
        weights: None,
        objective: Objective::new(ObjectiveKind::SquaredError, 1).expect("one group"),
        base_margin: vec![0.0],
        initial_margins: None,
        row_offset: 0,
    }
}

/// A copy of `s` (sharing its binned rows), so that two backends get the same shard.
pub fn copy_shard(s: &ShardData) -> ShardData {
    ShardData {
        binned: s.binned.clone(),
        offsets: s.offsets.clone(),
        labels: s.labels.clone(),
        weights: s.weights.clone(),
        objective: s.objective.clone(),
        base_margin: s.base_margin.clone(),
        initial_margins: s.initial_margins.clone(),
        row_offset: s.row_offset,
    }
}

/// A valid three-row shard of one feature: for tests that only need `create` to be called.
pub fn tiny_shard() -> ShardData {
    let binned = BinnedMatrix::from_bins(3, 1, Bins::U8(vec![1, 2, 0])).expect("valid bins");
    shard(binned, vec![0, 3], vec![0.0, 1.0, 0.5])
}
