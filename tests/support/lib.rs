//! Helpers shared by the cross-crate tests: the bundled datasets and synthetic data.

use std::path::{Path, PathBuf};

use sapwood::{ClassLabel, Dataset, Label, ObjectiveKind};
use sapwood_io::{read_csv, LabelColumn, ReadOptions};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A bundled dataset: train and test splits and its task.
pub struct Bundled {
    /// Directory name under `datasets/`.
    pub name: String,
    /// binary, regression or multiclass.
    pub task: String,
    /// Training rows.
    pub train: Dataset<'static>,
    /// Test rows.
    pub test: Dataset<'static>,
}

impl Bundled {
    /// The objective for the task.
    pub fn objective(&self) -> ObjectiveKind {
        match self.task.as_str() {
            "binary" => ObjectiveKind::Logistic,
            "regression" => ObjectiveKind::SquaredError,
            _ => ObjectiveKind::Softprob,
        }
    }
}

fn load_split(path: &Path, label: &str, categorical: &[String]) -> Dataset<'static> {
    let t = read_csv(
        path,
        &ReadOptions {
            label: Some(label.to_string()),
            categorical: categorical.to_vec(),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let label = match t.label.unwrap() {
        LabelColumn::Numeric(v) => Label::Values(v),
        LabelColumn::Strings(s) => {
            Label::Classes(s.into_iter().map(|x| ClassLabel::Str(x.unwrap())).collect())
        }
    };
    Dataset::from_parts(t.features, Some(label), t.weight).unwrap()
}

/// Loads `datasets/<name>` (train.csv, test.csv, meta.json).
pub fn bundled(name: &str) -> Bundled {
    let dir = repo_root().join("datasets").join(name);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let label = meta["label"].as_str().unwrap();
    let categorical: Vec<String> = meta["categorical"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    Bundled {
        name: name.to_string(),
        task: meta["task"].as_str().unwrap().to_string(),
        train: load_split(&dir.join("train.csv"), label, &categorical),
        test: load_split(&dir.join("test.csv"), label, &categorical),
    }
}

/// A deterministic synthetic task: `n` rows, numeric features (some missing), one
/// categorical feature, and a nonlinear signal. `task` is binary, regression or multiclass.
pub fn synthetic(n: usize, task: &str, seed: u32) -> Dataset<'static> {
    let h = |i: usize, j: u32| -> f32 {
        let x = sapwood_core::hash::hash32(
            seed as u64,
            sapwood_core::hash::Stream::RowSample,
            j,
            i as u64,
        );
        x as f32 / u32::MAX as f32
    };
    let nf = 6;
    let mut cols: Vec<Vec<f32>> = (0..nf).map(|_| Vec::with_capacity(n)).collect();
    let mut cat = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let x: Vec<f32> = (0..nf).map(|j| h(i, j as u32) * 2.0 - 1.0).collect();
        let c = (h(i, 99) * 5.0) as u32;
        let mut s = 2.0 * x[0] * x[1] + (3.0 * x[2]).sin() + x[3].abs() - 0.5
            + [0.8, -0.4, 0.0, 0.3, -0.7][c as usize];
        s += 0.3 * (h(i, 100) - 0.5);
        for (j, col) in cols.iter_mut().enumerate() {
            // feature 4 is missing for a tenth of the rows
            col.push(if j == 4 && h(i, 101) < 0.1 {
                f32::NAN
            } else {
                x[j]
            });
        }
        cat.push(c);
        y.push(match task {
            "binary" => (s > 0.0) as u8 as f32,
            "regression" => s,
            _ => (s.clamp(-1.49, 1.49) + 1.5) as u32 as f32,
        });
    }
    let mut b = Dataset::builder();
    for (j, col) in cols.into_iter().enumerate() {
        b = b.numeric(format!("x{j}"), col);
    }
    b.categorical(
        "colour",
        cat,
        ["red", "green", "blue", "cyan", "grey"]
            .map(String::from)
            .to_vec(),
    )
    .label(y)
    .build()
    .unwrap()
}
