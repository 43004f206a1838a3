//! Trains Sapwood on the deterministic synthetic binary task and prints one JSON line with
//! seconds, peak memory and test AUC. `bench/compare_peers.py` runs it beside XGBoost and
//! LightGBM on the same data (written with `--data-dir`).
//!
//! cargo bench -p sapwood --bench train_synthetic -- --rows 1000000 --rounds 100 --depth 8 --threads 2

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use sapwood::{
    Booster, Dataset, GrowPolicy, Metric, ObjectiveKind, Params, Quantisation, RunOptions,
};
use sapwood_core::hash::{hash32, Stream};

struct Args {
    rows: usize,
    test_rows: usize,
    features: usize,
    rounds: usize,
    depth: usize,
    leaves: usize,
    threads: usize,
    workers: usize,
    grad_bits: u32,
    subsample: f64,
    data_dir: Option<PathBuf>,
    model: Option<PathBuf>,
}

fn parse() -> Args {
    let mut a = Args {
        rows: 1_000_000,
        test_rows: 100_000,
        features: 28,
        rounds: 100,
        depth: 8,
        leaves: 0,
        threads: 2,
        workers: 1,
        grad_bits: 0,
        subsample: 1.0,
        data_dir: None,
        model: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        let num = || {
            v.parse::<usize>()
                .unwrap_or_else(|_| panic!("{} needs a number", argv[i]))
        };
        match argv[i].as_str() {
            "--rows" => a.rows = num(),
            "--test-rows" => a.test_rows = num(),
            "--features" => a.features = num(),
            "--rounds" => a.rounds = num(),
            "--depth" => a.depth = num(),
            "--leaves" => a.leaves = num(),
            "--threads" => a.threads = num(),
            "--workers" => a.workers = num(),
            "--grad-bits" => a.grad_bits = num() as u32,
            "--data-dir" => a.data_dir = Some(PathBuf::from(&v)),
            "--model" => a.model = Some(PathBuf::from(&v)),
            "--subsample" => {
                a.subsample = v
                    .parse()
                    .unwrap_or_else(|_| panic!("--subsample needs a number"))
            }
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// A uniform draw in [0, 1) keyed on (row, stream).
fn u(seed: u64, row: usize, j: u32) -> f32 {
    (hash32(seed, Stream::RowSample, j, row as u64) >> 8) as f32 / (1u32 << 24) as f32
}

/// The synthetic task: `features` columns (row-major), a nonlinear logistic signal with
/// interactions, 2% missing values in three columns. Deterministic for a seed.
fn generate(rows: usize, features: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut x = vec![0f32; rows * features];
    let mut y = vec![0f32; rows];
    for r in 0..rows {
        let row = &mut x[r * features..(r + 1) * features];
        for (j, v) in row.iter_mut().enumerate() {
            // sums of uniforms: bell-shaped, like measured physics features
            let s: f32 = (0..3).map(|k| u(seed, r, (j * 3 + k) as u32)).sum();
            *v = s - 1.5;
        }
        let f = |j: usize| row[j % features];
        let signal = 1.2 * f(0) * f(1) - 0.8 * f(2).abs() + (2.0 * f(3)).sin() + 0.6 * f(4)
            - 0.5 * f(5) * f(6) * f(7)
            + 0.4 * (f(8) > 0.3) as u8 as f32
            - 0.3 * f(9) * f(9)
            + 0.2 * f(10)
            + 0.5 * (f(11) + f(12)).tanh();
        let p = 1.0 / (1.0 + (-2.0 * signal).exp());
        y[r] = (u(seed, r, 1000) < p) as u8 as f32;
        for (k, j) in [13usize, 17, 21].into_iter().enumerate() {
            if j < features && u(seed, r, 2000 + k as u32) < 0.02 {
                row[j] = f32::NAN;
            }
        }
    }
    (x, y)
}

fn dataset(x: &[f32], y: Vec<f32>, features: usize) -> Dataset<'static> {
    let rows = y.len();
    let mut b = Dataset::builder();
    for j in 0..features {
        b = b.numeric(
            format!("f{j:02}"),
            (0..rows).map(|r| x[r * features + j]).collect::<Vec<f32>>(),
        );
    }
    b.label(y).build().unwrap()
}

fn write_f32(path: &std::path::Path, v: &[f32]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for x in v {
        f.write_all(&x.to_le_bytes()).unwrap();
    }
}

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let a = parse();
    let (x, y) = generate(a.rows, a.features, 1);
    let (tx, ty) = generate(a.test_rows, a.features, 2);
    if let Some(dir) = &a.data_dir {
        std::fs::create_dir_all(dir).unwrap();
        write_f32(&dir.join("train_x.f32"), &x);
        write_f32(&dir.join("train_y.f32"), &y);
        write_f32(&dir.join("test_x.f32"), &tx);
        write_f32(&dir.join("test_y.f32"), &ty);
    }
    let train = dataset(&x, y, a.features);
    let test = dataset(&tx, ty, a.features);
    drop((x, tx));
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: a.rounds,
        // a leaf budget grows without a depth limit, as the peers' lossguide runs do
        max_depth: if a.leaves > 0 { 0 } else { a.depth },
        max_leaves: a.leaves,
        grow_policy: if a.leaves > 0 {
            GrowPolicy::Lossguide
        } else {
            GrowPolicy::Depthwise
        },
        learning_rate: 0.1,
        max_bin: 256,
        quantisation: Quantisation::from_grad_bits(a.grad_bits).unwrap(),
        eval_metric: vec![Metric::Auc],
        subsample: a.subsample,
        ..Default::default()
    };
    let start = Instant::now();
    let run = RunOptions {
        threads: a.threads,
        workers: a.workers,
        ..Default::default()
    };
    let booster = Booster::train_with(&params, &run, &train, &[], &mut sapwood::Quiet).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    if let Some(path) = &a.model {
        booster.save(path).unwrap();
    }
    let p = booster.predict(&test).unwrap();
    let Some(sapwood::Label::Values(labels)) = test.label() else {
        unreachable!()
    };
    let margins: Vec<f32> = p.values.clone();
    let auc = Metric::Auc.evaluate(&margins, 1, labels, None);
    println!(
        "{{\"library\": \"sapwood\", \"rows\": {}, \"features\": {}, \"rounds\": {}, \"depth\": {}, \"threads\": {}, \"grad_bits\": {}, \"train_seconds\": {seconds:.3}, \"peak_rss_mib\": {:.1}, \"test_auc\": {auc:.6}}}",
        a.rows,
        a.features,
        a.rounds,
        a.depth,
        a.threads,
        a.grad_bits,
        peak_rss_mib()
    );
}
