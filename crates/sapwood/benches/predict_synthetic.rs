//! Prediction speed from Rust: a 100-tree depth-8 binary model (trained here on 100,000
//! rows of 28 normal features) predicts 200,000 rows, with 1 and 2 threads; prints rows per
//! second, best of `--repeat`. `bench/predict.py` runs the same shape from Python beside
//! XGBoost's `inplace_predict` and LightGBM's `predict`.
//!
//! cargo bench -p sapwood --bench predict_synthetic -- --rows 200000 --trees 100 --depth 8 \
//!     --max-bin 256

use std::time::Instant;

use sapwood::{Booster, Dataset, ObjectiveKind, Params, PredictOptions};

/// A deterministic stream of standard normal draws (splitmix64 and Box-Muller).
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self) -> f32 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn columns(rows: usize, features: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut n = Normal(seed);
    let mut cols = vec![Vec::with_capacity(rows); features];
    for _ in 0..rows {
        for c in cols.iter_mut() {
            c.push(n.next());
        }
    }
    cols
}

fn dataset(cols: Vec<Vec<f32>>, label: Option<Vec<f32>>) -> Dataset<'static> {
    let mut b = Dataset::builder();
    for (j, c) in cols.into_iter().enumerate() {
        b = b.numeric(format!("f{j:02}"), c);
    }
    if let Some(y) = label {
        b = b.label(y);
    }
    b.build().unwrap()
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str, default: usize| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let (rows, trees, depth, repeat, max_bin) = (
        arg("--rows", 200_000),
        arg("--trees", 100),
        arg("--depth", 8),
        arg("--repeat", 5),
        arg("--max-bin", 256),
    );
    let train = columns(100_000, 28, 1);
    let mut noise = Normal(3);
    let y: Vec<f32> = (0..100_000)
        .map(|r| {
            let s = train[0][r] * train[1][r] + train[2][r].sin() + 0.3 * noise.next();
            (s > 0.0) as u8 as f32
        })
        .collect();
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: trees,
        max_depth: depth,
        learning_rate: 0.1,
        max_bin,
        ..Default::default()
    };
    let booster = Booster::train(&params, &dataset(train, Some(y)), &[]).unwrap();
    let data = dataset(columns(rows, 28, 2), None);
    println!(
        "{trees} trees of depth {depth}, max_bin {max_bin}, {rows} rows x 28 features, best of {repeat}"
    );
    for threads in [1, 2] {
        let opts = PredictOptions {
            threads,
            ..Default::default()
        };
        let mut best = f64::INFINITY;
        for _ in 0..repeat {
            let start = Instant::now();
            let p = booster.predict_with(&data, opts).unwrap();
            best = best.min(start.elapsed().as_secs_f64());
            assert_eq!(p.values.len(), rows);
        }
        println!(
            "{{\"library\": \"sapwood (Rust)\", \"threads\": {threads}, \"rows_per_second\": {:.0}}}",
            rows as f64 / best
        );
    }
}
