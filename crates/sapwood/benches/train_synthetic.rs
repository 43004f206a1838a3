//! Trains Sapwood on the deterministic synthetic binary task and prints one JSON line with
//! seconds, peak memory and test AUC. `bench/compare_peers.py` runs it beside XGBoost and
//! LightGBM on the same data (written with `--data-dir`). `--streamed` bins the training set
//! batch by batch as it is generated, as `sapwood train` bins a Parquet file, so the raw
//! values are never all in memory (its seconds then include binning, as the peers' do).
//! `--categorical` makes the last two features categorical (30 and 200 levels, 2% missing
//! each, each level with its own effect on the label).
//!
//! cargo bench -p sapwood --bench train_synthetic -- --rows 1000000 --rounds 100 --depth 8 --threads 2

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use sapwood::{
    BinnedDataset, Booster, Column, CutPass, Dataset, FeatureMatrix, GrowPolicy, Label, Metric,
    ObjectiveKind, Params, Quantisation, RunOptions, MISSING_CATEGORY,
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
    categorical: bool,
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
        categorical: false,
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
            "--categorical" => {
                a.categorical = true;
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

/// Levels of the two categorical features of `--categorical` (the last two columns).
const LEVELS: [u32; 2] = [30, 200];

/// The effect of `level` of categorical feature `k` on the label, in [-0.5, 0.5).
fn level_effect(k: usize, level: u32) -> f32 {
    (hash32(99, Stream::RowSample, 5000 + k as u32, level as u64) >> 8) as f32 / (1u32 << 24) as f32
        - 0.5
}

/// Row `r` of the synthetic task, written to `row` (`features` values), and its label: a
/// nonlinear logistic signal with interactions, 2% missing values in three columns; with
/// `categorical`, the last two columns hold level codes (as f32; NaN missing) whose levels
/// move the signal. Deterministic for a seed.
fn row_of(seed: u64, r: usize, row: &mut [f32], categorical: bool) -> f32 {
    let features = row.len();
    for (j, v) in row.iter_mut().enumerate() {
        // sums of uniforms: bell-shaped, like measured physics features
        let s: f32 = (0..3).map(|k| u(seed, r, (j * 3 + k) as u32)).sum();
        *v = s - 1.5;
    }
    let f = |j: usize| row[j % features];
    let mut signal = 1.2 * f(0) * f(1) - 0.8 * f(2).abs() + (2.0 * f(3)).sin() + 0.6 * f(4)
        - 0.5 * f(5) * f(6) * f(7)
        + 0.4 * (f(8) > 0.3) as u8 as f32
        - 0.3 * f(9) * f(9)
        + 0.2 * f(10)
        + 0.5 * (f(11) + f(12)).tanh();
    if categorical {
        for (k, &levels) in LEVELS.iter().enumerate() {
            let level = ((u(seed, r, 3000 + k as u32) * levels as f32) as u32).min(levels - 1);
            signal += 1.5 * level_effect(k, level);
            row[features - 2 + k] = if u(seed, r, 3100 + k as u32) < 0.02 {
                f32::NAN
            } else {
                level as f32
            };
        }
    }
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
fn generate(
    rows: std::ops::Range<usize>,
    features: usize,
    seed: u64,
    categorical: bool,
) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut columns = vec![Vec::with_capacity(rows.len()); features];
    let mut y = Vec::with_capacity(rows.len());
    let mut row = vec![0f32; features];
    for r in rows {
        y.push(row_of(seed, r, &mut row, categorical));
        for (c, &v) in columns.iter_mut().zip(&row) {
            c.push(v);
        }
    }
    (columns, y)
}

fn names(features: usize) -> Vec<String> {
    (0..features).map(|j| format!("f{j:02}")).collect()
}

/// Column `j` of `features` as level codes where it is categorical (the last two with
/// `categorical`); `None` for a numeric column (used as it is, never copied).
fn categorical_column(
    j: usize,
    features: usize,
    values: &[f32],
    categorical: bool,
) -> Option<Column<'static>> {
    if categorical && j + 2 >= features {
        let levels = LEVELS[j + 2 - features];
        let codes = values
            .iter()
            .map(|&v| {
                if v.is_nan() {
                    MISSING_CATEGORY
                } else {
                    v as u32
                }
            })
            .collect();
        Some(Column::Categorical {
            codes: Cow::Owned(codes),
            levels: (0..levels).map(|l| l.to_string()).collect(),
        })
    } else {
        None
    }
}

fn dataset(columns: Vec<Vec<f32>>, y: Vec<f32>, categorical: bool) -> Dataset<'static> {
    let features = columns.len();
    let mut b = Dataset::builder();
    for (j, (name, c)) in names(features).into_iter().zip(columns).enumerate() {
        b = match categorical_column(j, features, &c, categorical) {
            Some(Column::Categorical { codes, levels }) => b.categorical(name, codes, levels),
            _ => b.numeric(name, c),
        };
    }
    b.label(y).build().unwrap()
}

/// Rows per batch when the training set is binned as it is generated (`--streamed`).
const BATCH: usize = 100_000;

fn matrix(columns: &[Vec<f32>], categorical: bool) -> FeatureMatrix<'_> {
    let features = columns.len();
    let cols = columns
        .iter()
        .enumerate()
        .map(|(j, c)| {
            categorical_column(j, features, c, categorical)
                .unwrap_or(Column::Numeric(Cow::Borrowed(c.as_slice())))
        })
        .collect();
    FeatureMatrix::new(names(columns.len()), cols).unwrap()
}

/// The training set binned batch by batch as it is generated, in two passes (cuts, then
/// bins), as `sapwood train` bins a Parquet file: the raw values are never all in memory.
/// Also returns the seconds spent generating (not binning) the batches.
fn streamed(
    rows: usize,
    features: usize,
    categorical: bool,
    params: &Params,
) -> (BinnedDataset, f64) {
    let batches = || {
        (0..rows)
            .step_by(BATCH)
            .map(move |lo| lo..(lo + BATCH).min(rows))
    };
    let mut making = 0.0;
    let mut make = |b| {
        let start = Instant::now();
        let out = generate(b, features, 1, categorical);
        making += start.elapsed().as_secs_f64();
        out
    };
    let mut cuts = CutPass::new(params, rows as u64);
    for b in batches() {
        let (columns, _) = make(b);
        cuts.push(&matrix(&columns, categorical), None).unwrap();
    }
    let mut bins = cuts.finish().unwrap();
    for b in batches() {
        let (columns, y) = make(b);
        bins.push(&matrix(&columns, categorical), Some(Label::Values(y)), None)
            .unwrap();
    }
    (bins.finish().unwrap(), making)
}

/// Writes rows `0..rows` of the task row-major (the peers' input), batch by batch.
fn write_rows(
    dir: &std::path::Path,
    name: &str,
    rows: usize,
    features: usize,
    seed: u64,
    categorical: bool,
) {
    let open = |what: &str| {
        std::io::BufWriter::new(
            std::fs::File::create(dir.join(format!("{name}_{what}.f32"))).unwrap(),
        )
    };
    let (mut fx, mut fy) = (open("x"), open("y"));
    let mut row = vec![0f32; features];
    for r in 0..rows {
        let y = row_of(seed, r, &mut row, categorical);
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
    assert!(
        !a.categorical || a.features >= 24,
        "--categorical needs --features 24 or more (the signal and missing columns come first)"
    );
    if let Some(dir) = &a.data_dir {
        std::fs::create_dir_all(dir).unwrap();
        write_rows(dir, "train", a.rows, a.features, 1, a.categorical);
        write_rows(dir, "test", a.test_rows, a.features, 2, a.categorical);
    }
    let (tx, ty) = generate(0..a.test_rows, a.features, 2, a.categorical);
    let test = dataset(tx, ty, a.categorical);
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
        let (train, making) = streamed(a.rows, a.features, a.categorical, &params);
        let b = Booster::train_binned(&params, &run, &train, &[], &mut sapwood::Quiet).unwrap();
        (b, start.elapsed().as_secs_f64() - making)
    } else {
        let (x, y) = generate(0..a.rows, a.features, 1, a.categorical);
        let train = dataset(x, y, a.categorical);
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
