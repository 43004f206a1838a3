//! Every loss from the command line, on the bundled datasets that suit it: the CPU with one
//! and three workers and the WGSL backend save the same bytes, and predictions are written in
//! the loss's output space.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sapwood::Column;
use sapwood_io::{read_parquet, ReadOptions};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

/// (objective, dataset, label, extra settings)
const CASES: [(&str, &str, &str, &[&str]); 11] = [
    ("reg:absoluteerror", "txhousing", "median", &[]),
    (
        "reg:quantileerror",
        "txhousing",
        "median",
        &["quantile_alpha=0.9"],
    ),
    (
        "reg:pseudohubererror",
        "txhousing",
        "median",
        &["huber_slope=20000"],
    ),
    ("huber", "txhousing", "median", &["huber_slope=20000"]),
    ("count:poisson", "diamonds", "price", &[]),
    (
        "reg:tweedie",
        "diamonds",
        "price",
        &["tweedie_variance_power=1.3"],
    ),
    ("reg:gamma", "diamonds", "price", &[]),
    ("binary:logitraw", "chile", "vote", &[]),
    ("multi:softmax", "penguins", "species", &[]),
    ("survival:cox", "gbsg2", "survival", &[]),
    (
        "reg:quantileerror",
        "txhousing",
        "median",
        &["quantile_alpha=0.1,0.5,0.9"],
    ),
];

/// Trains one case; returns whether it succeeded and its stderr.
fn train(
    case: &(&str, &str, &str, &[&str]),
    device: &str,
    workers: &str,
    model: &Path,
    tmp: &Path,
) -> (bool, String) {
    let (objective, dataset, label, sets) = case;
    let data = repo().join("datasets").join(dataset).join("train.parquet");
    let mut cmd = sapwood();
    cmd.args([
        "train",
        "--quiet",
        "--label",
        label,
        "--objective",
        objective,
    ])
    .args(["--rounds", "6", "--device", device, "--workers", workers])
    .args(["--set", "subsample=0.9"]);
    for s in *sets {
        cmd.args(["--set", s]);
    }
    let out = cmd
        .arg("--data")
        .arg(&data)
        .arg("--model")
        .arg(model)
        .env("XDG_RUNTIME_DIR", tmp)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_loss_saves_one_model_on_the_cpu_any_worker_count_and_wgpu() {
    let t = tempfile::tempdir().unwrap();
    let require_adapter = std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_some();
    for case in &CASES {
        let name = case.0.replace(':', "_");
        let cpu = t.path().join(format!("{name}.cpu.json"));
        let (ok, err) = train(case, "cpu", "1", &cpu, t.path());
        assert!(ok, "{}: {err}", case.0);
        let three = t.path().join(format!("{name}.cpu3.json"));
        let (ok, err) = train(case, "cpu", "3", &three, t.path());
        assert!(ok, "{}: {err}", case.0);
        assert!(
            std::fs::read(&cpu).unwrap() == std::fs::read(&three).unwrap(),
            "{}: three workers save another model",
            case.0
        );
        let gpu = t.path().join(format!("{name}.wgpu.json"));
        let (ok, err) = train(case, "wgpu", "1", &gpu, t.path());
        if !ok {
            assert!(
                !require_adapter && err.contains("adapter"),
                "{}: wgpu failed: {err}",
                case.0
            );
            continue;
        }
        assert!(
            std::fs::read(&cpu).unwrap() == std::fs::read(&gpu).unwrap(),
            "{}: wgpu and cpu models differ",
            case.0
        );
    }
}

/// The `prediction` column of a predictions file: values, or class names.
fn prediction_column(path: &Path) -> Result<Vec<f32>, Vec<String>> {
    let t = read_parquet(path, &ReadOptions::default()).unwrap();
    let j = t
        .features
        .names()
        .iter()
        .position(|n| n == "prediction")
        .expect("a prediction column");
    match t.features.column(j) {
        Column::Numeric(v) => Ok(v.to_vec()),
        Column::Categorical { codes, levels } => {
            Err(codes.iter().map(|&c| levels[c as usize].clone()).collect())
        }
        c @ Column::Sparse { .. } => Ok(c.dense_values().unwrap_or_default().into_owned()),
    }
}

#[test]
fn predictions_are_in_each_losses_output_space() {
    let t = tempfile::tempdir().unwrap();
    for case in [&CASES[4], &CASES[7], &CASES[8], &CASES[9], &CASES[10]] {
        let name = case.0.replace(':', "_");
        let model = t.path().join(format!("{name}.json"));
        let (ok, err) = train(case, "cpu", "1", &model, t.path());
        assert!(ok, "{}: {err}", case.0);
        let data = repo().join("datasets").join(case.1).join("test.parquet");
        let out = t.path().join(format!("{name}.parquet"));
        let run = sapwood()
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&data)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        if case.3.iter().any(|s| s.contains("0.1,0.5,0.9")) {
            // one column per quantile, in α order on most rows
            let t = read_parquet(&out, &ReadOptions::default()).unwrap();
            assert_eq!(
                t.features.names(),
                ["quantile_0.1", "quantile_0.5", "quantile_0.9"]
            );
            let col = |j: usize| match t.features.column(j) {
                Column::Numeric(v) => v.to_vec(),
                _ => panic!("values"),
            };
            let (lo, mid, hi) = (col(0), col(1), col(2));
            let ordered = (0..lo.len())
                .filter(|&i| lo[i] <= mid[i] && mid[i] <= hi[i])
                .count();
            assert!(ordered * 10 > lo.len() * 9, "{ordered} of {}", lo.len());
            continue;
        }
        match (case.0, prediction_column(&out)) {
            // means of a log link are positive
            ("count:poisson" | "survival:cox", Ok(v)) => assert!(v.iter().all(|&p| p > 0.0)),
            // margins, not probabilities: some fall outside [0, 1]
            ("binary:logitraw", Ok(v)) => {
                assert!(v.iter().any(|p| !(0.0..=1.0).contains(p)), "probabilities")
            }
            // one class name per row
            ("multi:softmax", Err(names)) => {
                assert!(names
                    .iter()
                    .all(|n| ["Adelie", "Chinstrap", "Gentoo"].contains(&n.as_str())))
            }
            (objective, got) => panic!("{objective}: unexpected predictions {got:?}"),
        }
    }
}

/// A CSV of queries (3 to 17 documents) with a relevance label from the features.
fn ranking_csv(path: &Path, queries: usize, break_row: Option<usize>) {
    let mut text = String::from("x0,x1,qid,rel\n");
    let mut row = 0;
    for q in 0..queries {
        let docs = 3 + (q * 7) % 15;
        for d in 0..docs {
            let x0 = ((q * 31 + d * 17) % 97) as f32 / 97.0;
            let x1 = ((q * 13 + d * 29) % 89) as f32 / 89.0;
            let rel = ((x0 * 2.0 + x1).min(2.99) as u32).min(2);
            // a row of query 0 placed again later, when asked
            let qid = if Some(row) == break_row { 0 } else { q };
            text += &format!("{x0},{x1},q{qid},{rel}\n");
            row += 1;
        }
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn ranking_from_the_command_line_with_a_group_column() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("rank.csv");
    ranking_csv(&data, 60, None);
    let train = |extra: &[&str], model: &Path| {
        sapwood()
            .args(["train", "--quiet", "--label", "rel", "--group", "qid"])
            .args(["--objective", "rank:ndcg", "--rounds", "8", "--data"])
            .arg(&data)
            .arg("--model")
            .arg(model)
            .args(extra)
            .env("XDG_RUNTIME_DIR", t.path())
            .output()
            .unwrap()
    };
    let one = t.path().join("one.json");
    let out = train(&[], &one);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let three = t.path().join("three.json");
    let out = train(&["--workers", "3"], &three);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&three).unwrap());
    let gpu = t.path().join("gpu.json");
    let out = train(&["--device", "wgpu"], &gpu);
    if out.status.success() {
        assert!(std::fs::read(&one).unwrap() == std::fs::read(&gpu).unwrap());
    } else {
        assert!(std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none());
    }
    // a query whose rows are not contiguous is refused with the column and row
    let broken = t.path().join("broken.csv");
    ranking_csv(&broken, 20, Some(40));
    let out = sapwood()
        .args(["train", "--quiet", "--label", "rel", "--group", "qid"])
        .args(["--objective", "rank:ndcg", "--rounds", "2", "--data"])
        .arg(&broken)
        .arg("--model")
        .arg(t.path().join("x.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("qid") && err.contains("row 40"),
        "{err}"
    );
    // groups belong to ranking
    let out = sapwood()
        .args([
            "train", "--quiet", "--label", "rel", "--group", "qid", "--data",
        ])
        .arg(&data)
        .arg("--model")
        .arg(t.path().join("y.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--group"), "{err}");
}

/// A binary label with one class (every row 0, or every row 1) is refused, as scikit-learn
/// refuses it, naming the objective and the way to train a constant model anyway; it used to
/// train a constant model and exit 0. Both classes present, even one row of one, trains.
#[test]
fn a_binary_label_with_one_class_is_refused() {
    let t = tempfile::tempdir().unwrap();
    for (name, labels, ok) in [
        ("zeros", [0, 0, 0, 0, 0, 0], false),
        ("ones", [1, 1, 1, 1, 1, 1], false),
        ("both", [0, 0, 0, 0, 0, 1], true),
    ] {
        let data = t.path().join(format!("{name}.csv"));
        let mut text = String::from("x,y\n");
        for (i, y) in labels.iter().enumerate() {
            text += &format!("{i},{y}\n");
        }
        std::fs::write(&data, text).unwrap();
        for objective in ["binary:logistic", "binary:logitraw"] {
            let out = sapwood()
                .args(["train", "--quiet", "--label", "y", "--rounds", "2"])
                .args(["--objective", objective, "--data"])
                .arg(&data)
                .arg("--model")
                .arg(t.path().join("m.json"))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if ok {
                assert!(out.status.success(), "{name} {objective}: {err}");
            } else {
                assert_eq!(out.status.code(), Some(2), "{name} {objective}: {err}");
                assert!(
                    err.contains(objective)
                        && err.contains("one class")
                        && err.contains("base_score"),
                    "{name} {objective}: {err}"
                );
            }
        }
    }
}

/// `sapwood eval --group` scores each query apart, as training's report of the same file
/// does; without it the file is one query (another number).
#[test]
fn eval_scores_ranking_metrics_per_query_with_a_group_column() {
    let t = tempfile::tempdir().unwrap();
    let dir = repo().join("datasets/lambdarank");
    let (train, test) = (dir.join("train.parquet"), dir.join("test.parquet"));
    let model = t.path().join("ranker.json");
    let out = sapwood()
        .args(["train", "--label", "relevance", "--group", "qid"])
        .args(["--objective", "rank:ndcg", "--rounds", "10"])
        .args(["--set", "eval_metric=ndcg@10", "--data"])
        .arg(&train)
        .arg("--valid")
        .arg(&test)
        .arg("--model")
        .arg(&model)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let reported = err
        .lines()
        .rev()
        .find_map(|l| l.split("test-ndcg@10: ").nth(1))
        .unwrap_or_else(|| panic!("no validation metric in {err}"))
        .trim()
        .to_string();
    let eval = |extra: &[&str]| {
        let out = sapwood()
            .args(["eval", "--metric", "ndcg@10", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&test)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(eval(&["--group", "qid"]), format!("ndcg@10: {reported}"));
    assert_ne!(eval(&[]), format!("ndcg@10: {reported}"));
    // a feature cannot be the query column
    let out = sapwood()
        .args(["eval", "--group", "f001", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&test)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--group f001"),
        "{err}"
    );
}
