//! `sapwood train --init-model` (continued training, XGBoost's `xgb_model`) and
//! `--base-margin` in `train` and `predict` (XGBoost's `base_margin`).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sapwood::Column;
use sapwood_io::{read_parquet, ReadOptions};

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

/// A CSV of `n` rows: features `a`, `b`, `c` (`b` with gaps), base-margin columns `bm`,
/// `bm0`..`bm2` (`bad` at row `bad_row` when given), a binary label `y` and a three-class
/// label `k`.
fn write_csv(path: &Path, n: usize, bad: Option<(usize, &str)>) {
    let mut s = String::from("a,b,c,bm,bm0,bm1,bm2,y,k\n");
    for i in 0..n {
        let a = ((i * 37) % 101) as f32 / 101.0;
        let b = if i % 9 == 0 {
            String::new()
        } else {
            (((i * 13) % 17) as f32).to_string()
        };
        let c = ((i * 7) % 23) as f32 - 11.0;
        let bm = match bad {
            Some((r, v)) if r == i => v.to_string(),
            _ => format!("{}", ((i * 29) % 41) as f32 / 41.0 - 0.5),
        };
        let s0 = a * 2.0 + c * 0.05 + (i % 5) as f32 * 0.2;
        let y = (s0 > 1.2) as u8;
        let k = (s0 * 1.5) as usize % 3;
        s.push_str(&format!(
            "{a},{b},{c},{bm},{},{},{},{y},{k}\n",
            (i % 3) as f32 * 0.1,
            (i % 4) as f32 * -0.1,
            (i % 5) as f32 * 0.05
        ));
    }
    std::fs::write(path, s).unwrap();
}

struct Files {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Files {
    fn new(n: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        write_csv(&root.join("train.csv"), n, None);
        Files { _dir: dir, root }
    }

    fn at(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// `sapwood train` on `data` predicting `y` (binary) with `extra` arguments; the columns
/// `bm*` and `k` are dropped unless named.
fn train(data: &Path, model: &Path, extra: &[&str]) -> Command {
    let mut c = sapwood();
    c.args([
        "train",
        "--quiet",
        "--label",
        "y",
        "--objective",
        "binary:logistic",
    ])
    .args([
        "--max-depth",
        "3",
        "--learning-rate",
        "0.2",
        "--set",
        "seed=5",
    ])
    .arg("--data")
    .arg(data)
    .arg("--model")
    .arg(model)
    .args(extra);
    c
}

fn stderr_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

const DROPPED: &str = "bm,bm0,bm1,bm2,k";

#[test]
fn fifty_rounds_then_fifty_more_with_init_model_save_the_bytes_of_a_hundred() {
    let f = Files::new(1_200);
    let data = f.at("train.csv");
    for sampling in [
        &["--set", "subsample=0.8", "--set", "colsample_bytree=0.8"][..],
        &[
            "--set",
            "subsample=0.8",
            "--set",
            "colsample_bytree=0.8",
            "--set",
            "grad_bits=8",
        ][..],
    ] {
        let once = f.at("once.json");
        let half = f.at("half.json");
        let more = f.at("more.json");
        let more_inherited = f.at("more-inherited.json");
        train(&data, &once, &["--rounds", "100", "--drop", DROPPED])
            .args(sampling)
            .assert()
            .success();
        train(&data, &half, &["--rounds", "50", "--drop", DROPPED])
            .args(sampling)
            .assert()
            .success();
        // the same flags again, and two workers: the model does not depend on them
        train(&data, &more, &["--rounds", "50", "--drop", DROPPED])
            .args(sampling)
            .args(["--workers", "2", "--init-model"])
            .arg(&half)
            .assert()
            .success();
        let once_bytes = std::fs::read(&once).unwrap();
        assert!(
            std::fs::read(&more).unwrap() == once_bytes,
            "{sampling:?}: 50 + 50 rounds differ from 100"
        );
        // parameters not given are the model's: only the rounds to add are given here
        let mut c = sapwood();
        c.args(["train", "--quiet", "--label", "y", "--rounds", "50"])
            .args(["--drop", DROPPED, "--data"])
            .arg(&data)
            .arg("--model")
            .arg(&more_inherited)
            .arg("--init-model")
            .arg(&half)
            .assert()
            .success();
        assert!(
            std::fs::read(&more_inherited).unwrap() == once_bytes,
            "{sampling:?}: the init model's parameters were not kept"
        );
    }
}

#[test]
fn init_model_errors_name_what_does_not_match() {
    let f = Files::new(300);
    let data = f.at("train.csv");
    let model = f.at("m.json");
    train(&data, &model, &["--rounds", "3", "--drop", DROPPED])
        .assert()
        .success();
    let out = f.at("out.json");

    let a = sapwood()
        .args([
            "train",
            "--quiet",
            "--label",
            "y",
            "--objective",
            "reg:squarederror",
        ])
        .args(["--rounds", "3", "--drop", DROPPED, "--data"])
        .arg(&data)
        .arg("--model")
        .arg(&out)
        .arg("--init-model")
        .arg(&model)
        .assert()
        .code(2);
    let e = stderr_of(&a);
    assert!(
        e.contains("objective") && e.contains("binary:logistic"),
        "{e}"
    );

    // without feature `c` the data cannot be binned with the model's cuts
    let a = train(
        &data,
        &out,
        &["--rounds", "3", "--drop", "c,bm,bm0,bm1,bm2,k"],
    )
    .arg("--init-model")
    .arg(&model)
    .assert()
    .code(2);
    let e = stderr_of(&a);
    assert!(e.contains("`c`") && e.contains("model to continue"), "{e}");

    let missing = f.at("no-such-model.json");
    let a = train(&data, &out, &["--rounds", "3", "--drop", DROPPED])
        .arg("--init-model")
        .arg(&missing)
        .assert()
        .code(2);
    let e = stderr_of(&a);
    assert!(
        e.contains("--init-model") && e.contains("no-such-model.json"),
        "{e}"
    );

    // the continued model may not overwrite the model it continues
    let a = train(&data, &model, &["--rounds", "3", "--drop", DROPPED])
        .arg("--init-model")
        .arg(&model)
        .assert()
        .code(2);
    assert!(
        stderr_of(&a).contains("--init-model file"),
        "{}",
        stderr_of(&a)
    );
    assert!(!out.exists());
}

/// The `prediction` column of a predictions file.
fn predictions(path: &Path, column: &str) -> Vec<f32> {
    let t = read_parquet(path, &ReadOptions::default()).unwrap();
    let j = t.features.names().iter().position(|n| n == column).unwrap();
    match t.features.column(j) {
        Column::Numeric(v) => v.to_vec(),
        _ => panic!("{column} is not numeric"),
    }
}

fn model_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn base_margin_column_starts_training_and_prediction_and_is_never_a_feature() {
    let f = Files::new(600);
    let data = f.at("train.csv");
    let with = f.at("with.json");
    let without = f.at("without.json");
    train(&data, &with, &["--rounds", "5", "--drop", "bm0,bm1,bm2,k"])
        .args(["--base-margin", "bm"])
        .assert()
        .success();
    train(&data, &without, &["--rounds", "5", "--drop", DROPPED])
        .assert()
        .success();
    let m = model_json(&with);
    let names = m.to_string();
    assert!(!names.contains("\"bm\""), "bm became a feature");
    assert_ne!(
        std::fs::read(&with).unwrap(),
        std::fs::read(&without).unwrap(),
        "the base margin was not used"
    );
    // two workers read the same margins for their rows
    let two = f.at("two.json");
    train(&data, &two, &["--rounds", "5", "--drop", "bm0,bm1,bm2,k"])
        .args(["--base-margin", "bm", "--workers", "2"])
        .assert()
        .success();
    assert!(std::fs::read(&two).unwrap() == std::fs::read(&with).unwrap());

    // predictions add the trees to the row's base margin only when it is given
    let plain = f.at("plain.parquet");
    let given = f.at("given.parquet");
    sapwood()
        .args(["predict", "--raw", "--model"])
        .arg(&with)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&plain)
        .assert()
        .success();
    sapwood()
        .args(["predict", "--raw", "--base-margin", "bm", "--model"])
        .arg(&with)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&given)
        .assert()
        .success();
    let base = m["base_margin"][0].as_f64().unwrap() as f32;
    let (p, g) = (
        predictions(&plain, "prediction"),
        predictions(&given, "prediction"),
    );
    for i in 0..600 {
        let bm = ((i * 29) % 41) as f32 / 41.0 - 0.5;
        let expected = p[i] - base + bm;
        assert!(
            (g[i] - expected).abs() < 1e-5,
            "row {i}: {} vs {expected}",
            g[i]
        );
    }
}

#[test]
fn multiclass_base_margin_takes_one_column_per_class() {
    let f = Files::new(600);
    let data = f.at("train.csv");
    let model = f.at("m.json");
    let args = |c: &mut Command, model: &Path| {
        c.args([
            "train",
            "--quiet",
            "--label",
            "k",
            "--objective",
            "multi:softprob",
        ])
        .args(["--rounds", "4", "--max-depth", "3", "--drop", "bm,y"])
        .arg("--data")
        .arg(&data)
        .arg("--model")
        .arg(model);
    };
    let mut c = sapwood();
    args(&mut c, &model);
    c.args(["--base-margin", "bm0,bm1,bm2"]).assert().success();
    let m = model_json(&model);
    assert_eq!(m["base_margin"].as_array().unwrap().len(), 3);
    let one = f.at("one.json");
    let mut c = sapwood();
    args(&mut c, &one);
    c.args(["--base-margin", "bm0,bm1,bm2", "--workers", "3"])
        .assert()
        .success();
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&model).unwrap());

    // one column for three classes
    let mut c = sapwood();
    args(&mut c, &f.at("bad.json"));
    let a = c
        .args(["--base-margin", "bm0", "--drop", "bm1,bm2"])
        .assert()
        .code(2);
    let e = stderr_of(&a);
    assert!(e.contains("base_margin") && e.contains("3 per row"), "{e}");
    let out = f.at("p.parquet");
    let a = sapwood()
        .args(["predict", "--base-margin", "bm0", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("3 outputs"), "{}", stderr_of(&a));
}

#[test]
fn base_margin_errors_name_the_column_and_row() {
    let f = Files::new(200);
    let bad = f.at("bad.csv");
    write_csv(&bad, 200, Some((42, "inf")));
    let model = f.at("m.json");
    let a = train(&bad, &model, &["--rounds", "2", "--drop", "bm0,bm1,bm2,k"])
        .args(["--base-margin", "bm"])
        .assert()
        .code(2);
    let e = stderr_of(&a);
    assert!(
        e.contains("`bm`") && e.contains("row 42") && e.contains("bad.csv"),
        "{e}"
    );

    let gap = f.at("gap.csv");
    write_csv(&gap, 200, Some((7, "")));
    let a = train(&gap, &model, &["--rounds", "2", "--drop", "bm0,bm1,bm2,k"])
        .args(["--base-margin", "bm"])
        .assert()
        .code(2);
    let e = stderr_of(&a);
    assert!(
        e.contains("`bm`") && e.contains("row 7") && e.contains("missing"),
        "{e}"
    );

    let data = f.at("train.csv");
    let a = train(&data, &model, &["--rounds", "2", "--drop", DROPPED])
        .args(["--base-margin", "nope"])
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("nope"), "{}", stderr_of(&a));

    let a = train(&data, &model, &["--rounds", "2", "--drop", DROPPED])
        .args(["--base-margin", "y"])
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("is the label"), "{}", stderr_of(&a));
    assert!(!model.exists());

    // predict: a feature of the model is not a base margin
    train(&data, &model, &["--rounds", "2", "--drop", DROPPED])
        .assert()
        .success();
    let a = sapwood()
        .args(["predict", "--base-margin", "a", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(f.at("p.parquet"))
        .assert()
        .code(2);
    assert!(
        stderr_of(&a).contains("feature of the model"),
        "{}",
        stderr_of(&a)
    );
}
