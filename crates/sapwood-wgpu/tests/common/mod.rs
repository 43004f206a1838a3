//! Shared helpers of the device tests: one device per test binary, random inputs.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use sapwood_core::data::{BinnedMatrix, Bins, Column, FeatureMatrix};
use sapwood_wgpu::{Gpu, WgpuFactory, WgpuOptions};

/// The device every test of this binary shares (small tiles and chunks, so the tiling,
/// global-memory and chunking paths all run on small data).
pub fn small_gpu() -> Arc<Gpu> {
    static G: OnceLock<Arc<Gpu>> = OnceLock::new();
    G.get_or_init(|| {
        WgpuFactory::with_options(WgpuOptions {
            tile_bins: Some(16),
            max_chunk_bytes: Some(4096),
        })
        .open_device()
        .expect("a wgpu adapter (run crates/sapwood-wgpu/install-lavapipe.sh)")
    })
    .clone()
}

/// A device with the adapter's own limits.
pub fn gpu() -> Arc<Gpu> {
    static G: OnceLock<Arc<Gpu>> = OnceLock::new();
    G.get_or_init(|| {
        WgpuFactory::new()
            .open_device()
            .expect("a wgpu adapter (run crates/sapwood-wgpu/install-lavapipe.sh)")
    })
    .clone()
}

/// A small deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Random bins of `n` rows with the given feature widths (bin 0 = missing is drawn too).
pub fn random_bins(
    rng: &mut Rng,
    n: usize,
    widths: &[u32],
    wide: bool,
) -> (BinnedMatrix, Vec<u32>) {
    let nf = widths.len();
    let mut offsets = vec![0u32];
    for w in widths {
        offsets.push(offsets.last().unwrap() + w);
    }
    let vals: Vec<u16> = (0..n * nf)
        .map(|i| rng.below(widths[i % nf] as u64) as u16)
        .collect();
    let bins = if wide {
        Bins::U16(vals)
    } else {
        Bins::U8(vals.iter().map(|&v| v as u8).collect())
    };
    (BinnedMatrix::from_bins(n, nf, bins).unwrap(), offsets)
}

/// A data set with a numeric feature, one with missing values and a categorical one.
pub fn mixed_features(n: usize, seed: u64) -> (FeatureMatrix<'static>, Vec<f32>, Vec<f32>) {
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
    .unwrap();
    let weights = (0..n).map(|i| 0.5 + (i % 4) as f32 * 0.25).collect();
    (features, signal, weights)
}
