//! Trains Sapwood on the deterministic synthetic binary task and prints one JSON line with
//! seconds, peak memory and test AUC. `bench/compare_peers.py` runs it beside XGBoost and
//! LightGBM on the same data (written with `--data-dir`). `--streamed` bins the training set
//! batch by batch as it is generated, as `sapwood train` bins a Parquet file, so the raw
//! values are never all in memory (its seconds then include binning, as the peers' do).
//!
//! cargo bench -p sapwood --bench train_synthetic -- --rows 1000000 --rounds 100 --depth 8 --threads 2

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use sapwood::{
    BinnedDataset, Booster, Column, CutPass, Dataset, FeatureMatrix, GrowPolicy, Label, Metric,
    ObjectiveKind, Params, Quantisation, RunOptions,
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
    streamed: bool,
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
        streamed: false,
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
            "--streamed" => {
                a.streamed = true;
                i += 1;
                continue;
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

/// Row `r` of the synthetic task, written to `row` (`features` values), and its label: a
/// nonlinear logistic signal with interactions, 2% missing values in three columns.
/// Deterministic for a seed.
fn row_of(seed: u64, r: usize, row: &mut [f32]) -> f32 {
    let features = row.len();
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
    let y = (u(seed, r, 1000) < p) as u8 as f32;
    for (k, j) in [13usize, 17, 21].into_iter().enumerate() {
        if j < features && u(seed, r, 2000 + k as u32) < 0.02 {
            row[j] = f32::NAN;
        }
    }
    y
}

/// Rows `rows` of the task, column by column (no row-major copy is ever held).
fn generate(rows: std::ops::Range<usize>, features: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut columns = vec![Vec::with_capacity(rows.len()); features];
    let mut y = Vec::with_capacity(rows.len());
    let mut row = vec![0f32; features];
    for r in rows {
        y.push(row_of(seed, r, &mut row));
        for (c, &v) in columns.iter_mut().zip(&row) {
            c.push(v);
        }
    }
    (columns, y)
}

fn names(features: usize) -> Vec<String> {
    (0..features).map(|j| format!("f{j:02}")).collect()
}

fn dataset(columns: Vec<Vec<f32>>, y: Vec<f32>) -> Dataset<'static> {
    let mut b = Dataset::builder();
    for (name, c) in names(columns.len()).into_iter().zip(columns) {
        b = b.numeric(name, c);
    }
    b.label(y).build().unwrap()
}

/// Rows per batch when the training set is binned as it is generated (`--streamed`).
const BATCH: usize = 100_000;

fn matrix(columns: &[Vec<f32>]) -> FeatureMatrix<'_> {
    let cols = columns
        .iter()
        .map(|c| Column::Numeric(Cow::Borrowed(c.as_slice())))
        .collect();
    FeatureMatrix::new(names(columns.len()), cols).unwrap()
}

/// The training set binned batch by batch as it is generated, in two passes (cuts, then
/// bins), as `sapwood train` bins a Parquet file: the raw values are never all in memory.
/// Also returns the seconds spent generating (not binning) the batches.
fn streamed(rows: usize, features: usize, params: &Params) -> (BinnedDataset, f64) {
    let batches = || {
        (0..rows)
            .step_by(BATCH)
            .map(move |lo| lo..(lo + BATCH).min(rows))
    };
    let mut making = 0.0;
    let mut make = |b| {
        let start = Instant::now();
        let out = generate(b, features, 1);
        making += start.elapsed().as_secs_f64();
        out
    };
    let mut cuts = CutPass::new(params, rows as u64);
    for b in batches() {
        let (columns, _) = make(b);
        cuts.push(&matrix(&columns), None).unwrap();
    }
    let mut bins = cuts.finish().unwrap();
    for b in batches() {
        let (columns, y) = make(b);
        bins.push(&matrix(&columns), Some(Label::Values(y)), None)
            .unwrap();
    }
    (bins.finish().unwrap(), making)
}

/// Writes rows `0..rows` of the task row-major (the peers' input), batch by batch.
fn write_rows(dir: &std::path::Path, name: &str, rows: usize, features: usize, seed: u64) {
    let open = |what: &str| {
        std::io::BufWriter::new(
            std::fs::File::create(dir.join(format!("{name}_{what}.f32"))).unwrap(),
        )
    };
    let (mut fx, mut fy) = (open("x"), open("y"));
    let mut row = vec![0f32; features];
    for r in 0..rows {
        let y = row_of(seed, r, &mut row);
        for v in &row {
            fx.write_all(&v.to_le_bytes()).unwrap();
        }
        fy.write_all(&y.to_le_bytes()).unwrap();
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
    if let Some(dir) = &a.data_dir {
        std::fs::create_dir_all(dir).unwrap();
        write_rows(dir, "train", a.rows, a.features, 1);
        write_rows(dir, "test", a.test_rows, a.features, 2);
    }
    let (tx, ty) = generate(0..a.test_rows, a.features, 2);
    let test = dataset(tx, ty);
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
    let run = RunOptions {
        threads: a.threads,
        workers: a.workers,
        ..Default::default()
    };
    let (booster, seconds) = if a.streamed {
        // binning is part of training here, as it is for the peers
        let start = Instant::now();
        let (train, making) = streamed(a.rows, a.features, &params);
        let b = Booster::train_binned(&params, &run, &train, &[], &mut sapwood::Quiet).unwrap();
        (b, start.elapsed().as_secs_f64() - making)
    } else {
        let (x, y) = generate(0..a.rows, a.features, 1);
        let train = dataset(x, y);
        let start = Instant::now();
        let b = Booster::train_with(&params, &run, &train, &[], &mut sapwood::Quiet).unwrap();
        (b, start.elapsed().as_secs_f64())
    };
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
