//! The `sapwood` binary end to end: every bundled dataset, bad input, Ctrl-C, summaries.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use assert_cmd::Command;
use sapwood::Column;
use sapwood::{Booster, Dataset};
use sapwood_io::{read_parquet, ReadOptions};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

fn meta(name: &str) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo().join("datasets").join(name).join("meta.json")).unwrap(),
    )
    .unwrap()
}

const DATASETS: [&str; 8] = [
    "breast_cancer",
    "chile",
    "synthetic",
    "diabetes",
    "diamonds",
    "txhousing",
    "penguins",
    "digits",
];

fn objective(task: &str) -> &'static str {
    match task {
        "binary" => "binary:logistic",
        "regression" => "reg:squarederror",
        _ => "multi:softprob",
    }
}

fn numeric_column(t: &sapwood_io::Table, name: &str) -> Vec<f32> {
    let j = t
        .features
        .names()
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    match t.features.column(j) {
        Column::Numeric(v) => v.to_vec(),
        Column::Categorical { .. } | Column::Sparse { .. } => panic!("{name} is not dense numeric"),
    }
}

#[test]
fn every_dataset_trains_predicts_and_evaluates_like_the_rust_api() {
    let tmp = tempfile::tempdir().unwrap();
    for name in DATASETS {
        let m = meta(name);
        let dir = repo().join("datasets").join(name);
        let (train, test) = (dir.join("train.parquet"), dir.join("test.parquet"));
        let model = tmp.path().join(format!("{name}.json"));
        let out = tmp.path().join(format!("{name}.parquet"));
        let label = m["label"].as_str().unwrap();
        sapwood()
            .args(["train", "--quiet", "--rounds", "15", "--label", label])
            .arg("--objective")
            .arg(objective(m["task"].as_str().unwrap()))
            .arg("--data")
            .arg(&train)
            .arg("--valid")
            .arg(&test)
            .arg("--model")
            .arg(&model)
            .assert()
            .success();
        sapwood()
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&test)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let eval = sapwood()
            .args(["eval", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&test)
            .assert()
            .success();
        let printed = String::from_utf8(eval.get_output().stdout.clone()).unwrap();
        check_eval_output(name, &printed, &model, &test, label);

        // the same model through the Rust API on the same file
        let booster = Booster::load(&model).unwrap();
        let data = read_parquet(&test, &ReadOptions::default()).unwrap();
        let want = booster
            .predict(&Dataset::from_parts(data.features, None, None).unwrap())
            .unwrap();
        let got = read_parquet(&out, &ReadOptions::default()).unwrap();
        assert_eq!(
            got.n_rows(),
            m["rows"]["test"].as_u64().unwrap() as usize,
            "{name}"
        );
        if want.per_row == 1 {
            assert_eq!(numeric_column(&got, "prediction"), want.values, "{name}");
        } else {
            for (c, class) in booster.classes().unwrap().iter().enumerate() {
                let col = numeric_column(&got, &format!("prob_{class}"));
                let expect: Vec<f32> = (0..want.n_rows()).map(|i| want.row(i)[c]).collect();
                assert_eq!(col, expect, "{name} class {class}");
            }
        }
    }
}

/// `eval` prints the objective's default metric, equal to the metric computed here from the
/// model's predictions by its textbook formula (not through Sapwood's own metric code).
fn check_eval_output(name: &str, printed: &str, model: &Path, data: &Path, label: &str) {
    let booster = Booster::load(model).unwrap();
    let t = read_parquet(
        data,
        &ReadOptions {
            label: Some(label.into()),
            ..Default::default()
        },
    )
    .unwrap();
    let p = booster
        .predict(&Dataset::from_parts(t.features, None, None).unwrap())
        .unwrap();
    // each row's label as the index of its class, or its value for regression
    let y: Vec<f64> = match (t.label.unwrap(), booster.classes()) {
        (sapwood_io::LabelColumn::Numeric(v), None) => v.iter().map(|&x| x as f64).collect(),
        (col, Some(classes)) => {
            let names: Vec<String> = match col {
                sapwood_io::LabelColumn::Numeric(v) => v.iter().map(|x| x.to_string()).collect(),
                sapwood_io::LabelColumn::Strings(s) => s.into_iter().map(|x| x.unwrap()).collect(),
            };
            names
                .iter()
                .map(|n| classes.iter().position(|c| c.to_string() == *n).unwrap() as f64)
                .collect()
        }
        (_, None) => panic!("{name}: string labels without classes"),
    };
    let n = y.len() as f64;
    let (metric, want) = match booster.model().params.objective {
        sapwood::ObjectiveKind::SquaredError => {
            let se: f64 = y
                .iter()
                .zip(&p.values)
                .map(|(y, &q)| (q as f64 - y).powi(2))
                .sum();
            ("rmse", (se / n).sqrt())
        }
        sapwood::ObjectiveKind::Logistic => {
            let ll: f64 = y
                .iter()
                .zip(&p.values)
                .map(|(y, &q)| {
                    let q = (q as f64).clamp(1e-15, 1.0 - 1e-15);
                    -(y * q.ln() + (1.0 - y) * (1.0 - q).ln())
                })
                .sum();
            ("logloss", ll / n)
        }
        sapwood::ObjectiveKind::Softprob => {
            let ll: f64 = y
                .iter()
                .enumerate()
                .map(|(i, &c)| -(p.row(i)[c as usize] as f64).clamp(1e-15, 1.0).ln())
                .sum();
            ("mlogloss", ll / n)
        }
        other => panic!("{name}: no bundled dataset trains {other}"),
    };
    let line = printed
        .lines()
        .find(|l| l.starts_with(&format!("{metric}: ")))
        .unwrap_or_else(|| panic!("{name}: eval printed no {metric}: {printed}"));
    let got: f64 = line[metric.len() + 2..].trim().parse().unwrap();
    assert!(
        (got - want).abs() <= 1e-4 * want.abs().max(1e-3),
        "{name}: eval printed {metric} {got}, the predictions give {want}"
    );
}

/// Runs a command that must fail: exit code 2, one `error:` line naming `needle`, and no
/// file left at `out`.
fn fails(args: &[&str], needle: &str, out: &Path) {
    let a = sapwood().args(args).assert().code(2);
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected `{needle}` in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{args:?} left {}", out.display());
    let dir = out.parent().unwrap();
    let stray: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{args:?} left temporary files");
}

#[test]
fn bad_input_exits_2_with_one_line_and_no_output() {
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| t.path().join(n).to_string_lossy().into_owned();
    let write = |n: &str, text: &str| std::fs::write(t.path().join(n), text).unwrap();
    write("ok.csv", "x,y\n1,0\n2,1\n3,0\n4,1\n");
    write("nolabel.csv", "x,z\n1,0\n2,1\n");
    write("nan.csv", "x,y\n1,0\n2,NaN\n3,0\n");
    write("inf.csv", "x,y\n1,0\n2,inf\n3,0\n");
    write("allnull.csv", "x,y\n1,\n2,\n3,\n");
    write("oneclass.csv", "x,y\n1,a\n2,a\n3,a\n");
    write("badvalid.csv", "x,y\n1,0\n2,inf\n");
    write("negw.csv", "x,y,w\n1,0,1\n2,1,-1\n3,0,1\n");
    write("twolabels.csv", "x,y,y\n1,0,1\n2,1,0\n3,0,1\n");
    write("notmodel.json", "{\"hello\": \"world\"}");
    write("junk.parquet", "definitely not parquet");
    let parquet = std::fs::read(repo().join("datasets/chile/train.parquet")).unwrap();
    std::fs::write(t.path().join("cut.parquet"), &parquet[..parquet.len() / 2]).unwrap();
    let model = p("m.json");
    let model_path = t.path().join("m.json");
    let train = |data: &str, extra: &[&str]| {
        let mut v = vec![
            "train", "--quiet", "--data", data, "--label", "y", "--model", &model,
        ];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (train(&p("absent.parquet"), &[]), "absent.parquet"),
        (train(&p("junk.parquet"), &[]), "junk.parquet"),
        (train(&p("cut.parquet"), &[]), "cut.parquet"),
        (train(&p("nolabel.csv"), &[]), "no column `y`"),
        (train(&p("allnull.csv"), &[]), "all null"),
        (train(&p("nan.csv"), &[]), "nan.csv: label column `y`"),
        (train(&p("nan.csv"), &[]), "row 1"),
        (train(&p("inf.csv"), &[]), "row 1"),
        (
            train(&p("ok.csv"), &["--valid", &p("badvalid.csv")]),
            "badvalid.csv: label column `y`",
        ),
        (
            train(&p("negw.csv"), &["--weight", "w"]),
            "negw.csv: weight column `w`",
        ),
        (
            train(&p("twolabels.csv"), &[]),
            "label column `y` appears 2 times",
        ),
        (train(&p("ok.csv"), &["--early-stopping", "3"]), "--valid"),
        (
            train(
                &p("ok.csv"),
                &["--objective", "binary:logistic", "--set", "num_class=3"],
            ),
            "num_class",
        ),
        (
            train(
                &p("ok.csv"),
                &["--learning-rate", "0.1", "--set", "eta=0.2"],
            ),
            "`learning_rate` is given twice",
        ),
        (train(&p("ok.csv"), &["--workers", "2000"]), "at most"),
        (
            train(&p("ok.csv"), &["--learning-rate", "5", "--rounds", "500"]),
            "diverged in round",
        ),
        (
            train(&p("oneclass.csv"), &["--objective", "binary:logistic"]),
            "two classes",
        ),
        (
            train(&p("ok.csv"), &["--objective", "reg:nonsense"]),
            "reg:nonsense",
        ),
        (
            train(&p("ok.csv"), &["--set", "max_dept=3"]),
            "did you mean `max_depth`",
        ),
        (train(&p("ok.csv"), &["--set", "subsample=2"]), "subsample"),
    ];
    for (args, needle) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&args, needle, &model_path);
    }
    let out = t.path().join("out.parquet");
    for (m, needle) in [
        (p("notmodel.json"), "not a Sapwood model"),
        (p("ok.csv"), "not a Sapwood model"),
        (p("none.json"), "none.json"),
    ] {
        let args = [
            "predict",
            "--model",
            &m,
            "--data",
            &p("ok.csv"),
            "--out",
            &out.to_string_lossy(),
        ];
        fails(&args, needle, &out);
    }
    // a real model, but the data lacks one of its columns
    sapwood()
        .args(train(&p("ok.csv"), &["--rounds", "2"]))
        .assert()
        .success();
    write("other.csv", "z\n1\n");
    let args = [
        "predict",
        "--model",
        &model,
        "--data",
        &p("other.csv"),
        "--out",
        &out.to_string_lossy(),
    ];
    fails(&args, "no column `x`", &out);
}

/// Ctrl-C (SIGINT) and SIGTERM (what schedulers send before SIGKILL) during training stop
/// it after the current round: the model, the summary and a checkpoint of that very round
/// are saved, and the exit status is 130 or 143. SIGTERM used to kill the process with
/// nothing saved, and the checkpoint lagged behind the saved model.
#[test]
fn ctrl_c_and_sigterm_save_the_model_summary_and_checkpoint_trained_so_far() {
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let t = tempfile::tempdir().unwrap();
        let model = t.path().join("m.json");
        let ck = t.path().join("ck.json");
        let summary = t.path().join("summary.json");
        let bin = assert_cmd::cargo::cargo_bin("sapwood");
        let mut child = std::process::Command::new(bin)
            .args(["train", "--rounds", "1000000", "--label", "price", "--data"])
            .arg(repo().join("datasets/diamonds/train.parquet"))
            .arg("--model")
            .arg(&model)
            .arg("--summary")
            .arg(&summary)
            .args(["--checkpoint-every", "3", "--checkpoint"])
            .arg(&ck)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // ready when rounds are done (the handler is installed before anything is read):
        // the first checkpoint says so, however slow the machine
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let ready = |ck: &Path| {
            std::fs::read_to_string(ck)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
                .and_then(|v| v["rounds"].as_u64())
                .unwrap_or(0)
        };
        let mut seen = ready(&ck);
        while seen == 0 {
            assert!(child.try_wait().unwrap().is_none(), "training ended early");
            assert!(std::time::Instant::now() < deadline, "no round in 300 s");
            std::thread::sleep(std::time::Duration::from_millis(5));
            seen = ready(&ck);
        }
        let sent = std::time::Instant::now();
        let status = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{signal}: saved, then exit {code}: {err}"
        );
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(10),
            "{signal}: {:?}",
            sent.elapsed()
        );
        assert!(err.contains("interrupted: saved the"), "{signal}: {err}");
        let b = Booster::load(&model).unwrap();
        assert!(b.num_rounds() as u64 >= seen && b.num_rounds() < 1_000_000);
        assert_eq!(
            b.model().params.num_rounds,
            b.num_rounds(),
            "the model records the rounds actually trained"
        );
        // the summary is written too, and says the run was interrupted after those rounds
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&summary).expect("a summary")).unwrap();
        assert_eq!(s["interrupted"], true, "{s}");
        assert_eq!(s["rounds"].as_u64(), Some(b.num_rounds() as u64), "{s}");
        // and the checkpoint holds the very round the model ends with, to resume from
        assert_eq!(
            ready(&ck),
            b.num_rounds() as u64,
            "{signal}: checkpoint behind the model"
        );
    }
}

/// A stop signal while the data is read (train) or rows are predicted stops at the next
/// batch with exit 130, writes nothing and leaves no temporary (the test makes the process
/// send itself SIGINT at its first batch; before, SIGINT there killed it outright, and a
/// predict temporary could stay behind).
#[test]
fn a_signal_while_reading_or_predicting_stops_cleanly() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    sapwood()
        .args([
            "train", "--quiet", "--rounds", "3", "--label", "y", "--data",
        ])
        .arg(repo().join("datasets/synthetic/train.parquet"))
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let out_dir = t.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    for data in ["train.parquet", "train.csv"] {
        let data = repo().join("datasets/synthetic").join(data);
        let m2 = out_dir.join("m2.json");
        let out = sapwood()
            .env("SAPWOOD_TEST_RAISE_AT_BATCH", "1")
            .args([
                "train", "--quiet", "--rounds", "3", "--label", "y", "--data",
            ])
            .arg(&data)
            .arg("--model")
            .arg(&m2)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "train {data:?}: {err}");
        assert!(err.contains("interrupted by SIGINT"), "{err}");
        let p = out_dir.join("p.parquet");
        let out = sapwood()
            .env("SAPWOOD_TEST_RAISE_AT_BATCH", "1")
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&data)
            .arg("--out")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "predict {data:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // a CSV file is read whole before its one batch: the reader itself stops, between
    // blocks of records (the hook's batch 2 is the reader's second look at the flag)
    let csv = out_dir.join("big.csv");
    let mut text = String::from("y,x\n");
    for i in 0..40_000 {
        text.push_str(&format!("{},{}\n", i % 2, i % 97));
    }
    std::fs::write(&csv, text).unwrap();
    let m3 = out_dir.join("m3.json");
    let out = sapwood()
        .env("SAPWOOD_TEST_RAISE_AT_BATCH", "2")
        .args([
            "train", "--quiet", "--rounds", "3", "--label", "y", "--data",
        ])
        .arg(&csv)
        .arg("--model")
        .arg(&m3)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "train big.csv: {err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(!m3.exists());
    std::fs::remove_file(&csv).unwrap();
    // inside a batch: SHAP values of a large model take seconds per thousand rows, so a
    // signal is heard between slices of a batch, not after the whole of it. Trees of depth
    // 10 make a slice a few hundred rows, so slice 2 lies inside the first batch (row
    // groups of 1,000 rows)
    let data = repo().join("datasets/synthetic/train.parquet");
    let deep = t.path().join("deep.json");
    sapwood()
        .args(["train", "--quiet", "--rounds", "20", "--max-depth", "10"])
        .args(["--label", "y", "--data"])
        .arg(&data)
        .arg("--model")
        .arg(&deep)
        .assert()
        .success();
    let p = out_dir.join("p.parquet");
    let out = sapwood()
        .env("SAPWOOD_TEST_RAISE_AT_SLICE", "2")
        .args(["predict", "--contributions", "--model"])
        .arg(&deep)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "predict --contributions: {err}"
    );
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(!err.contains("wrote"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn summary_config_and_set_reach_the_run() {
    let t = tempfile::tempdir().unwrap();
    let (model, summary, config) = (
        t.path().join("m.json"),
        t.path().join("s.json"),
        t.path().join("c.toml"),
    );
    std::fs::write(
        &config,
        "learning_rate = 0.5\nmax_depth = 2\neval_metric = [\"auc\", \"logloss\"]\n",
    )
    .unwrap();
    let data = repo().join("datasets/chile");
    sapwood()
        .args([
            "train",
            "--quiet",
            "--label",
            "vote",
            "--objective",
            "binary:logistic",
            "--rounds",
            "30",
        ])
        .args(["--set", "max_depth=3", "--early-stopping", "5"])
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(data.join("train.parquet"))
        .arg("--valid")
        .arg(data.join("test.parquet"))
        .arg("--model")
        .arg(&model)
        .arg("--summary")
        .arg(&summary)
        .assert()
        .success();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    for key in [
        "rounds",
        "best_round",
        "history",
        "train_seconds",
        "data_loading_seconds",
        "peak_memory_mib",
        "device",
        "workers",
    ] {
        assert!(s.get(key).is_some(), "summary lacks {key}: {s}");
    }
    assert_eq!(s["communication"]["bytes_sent"], 0);
    assert!(s["history"][0]["test-auc"].as_f64().unwrap() > 0.5);
    let b = Booster::load(&model).unwrap();
    assert_eq!(b.model().params.learning_rate, 0.5, "config applied");
    assert_eq!(b.model().params.max_depth, 3, "--set overrides the config");
    assert!(b.best_iteration().is_some());
}

#[test]
fn predict_summary_reports_each_stage_apart() {
    let t = tempfile::tempdir().unwrap();
    let (model, out, summary) = (
        t.path().join("m.json"),
        t.path().join("p.parquet"),
        t.path().join("s.json"),
    );
    let data = repo().join("datasets/digits");
    sapwood()
        .args([
            "train",
            "--quiet",
            "--label",
            "target",
            "--objective",
            "multi:softprob",
        ])
        .args(["--rounds", "5", "--max-depth", "3", "--data"])
        .arg(data.join("train.parquet"))
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let predict = |summary: &Path| {
        let mut c = sapwood();
        c.args(["predict", "--contributions", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(data.join("test.parquet"))
            .arg("--out")
            .arg(&out)
            .arg("--summary")
            .arg(summary);
        c
    };
    predict(&summary).assert().success();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let rows = meta("digits")["rows"]["test"].as_u64().unwrap();
    assert!(out.exists());
    assert_eq!(s["rows"].as_u64(), Some(rows), "{s}");
    assert_eq!(s["rounds"], 5);
    assert_eq!(s["trees"], 50, "ten classes");
    let secs = &s["seconds"];
    let stage = |k: &str| {
        secs[k]
            .as_f64()
            .unwrap_or_else(|| panic!("no seconds.{k}: {s}"))
    };
    let stages: f64 = ["read", "bin", "predict", "transform", "explain", "write"]
        .iter()
        .map(|k| {
            assert!(stage(k) >= 0.0, "{k}: {s}");
            stage(k)
        })
        .sum();
    assert!(stage("predict") > 0.0 && stage("explain") > 0.0, "{s}");
    assert!(
        stages <= stage("total"),
        "the stages add up to more than the run: {s}"
    );
    let rate = s["predict_rows_per_second"].as_f64().unwrap();
    assert!(
        (rate * stage("predict") - rows as f64).abs() < 1e-6 * rows as f64 + 1e-3,
        "{s}"
    );
    // a summary that would overwrite an input is refused before anything is written
    std::fs::remove_file(&out).unwrap();
    let refused = predict(&model).assert().failure();
    let err = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        err.contains("--summary") && err.contains("the --model file"),
        "{err}"
    );
    assert!(!out.exists());
}

/// A CSV of 200 rows (id, x, colour, y with classes cat, dog, owl) and a 10-round
/// multiclass model trained on it without the id: (csv, model).
fn animals(dir: &Path) -> (PathBuf, PathBuf) {
    let csv = dir.join("d.csv");
    let mut text = String::from("id,x,colour,y\n");
    for i in 0..200 {
        text += &format!(
            "row{i},{},{},{}\n",
            i % 17,
            ["a", "b", "c"][i % 3],
            ["cat", "dog", "owl"][(i % 17) * 3 / 17]
        );
    }
    std::fs::write(&csv, text).unwrap();
    let model = dir.join("m.json");
    sapwood()
        .args([
            "train",
            "--quiet",
            "--label",
            "y",
            "--objective",
            "multi:softprob",
            "--rounds",
            "10",
            "--drop",
            "id",
        ])
        .arg("--data")
        .arg(&csv)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    (csv, model)
}

#[test]
fn predict_keeps_ids_and_writes_raw_margins_from_csv() {
    let t = tempfile::tempdir().unwrap();
    let (csv, model) = animals(t.path());
    let out = t.path().join("p.parquet");
    sapwood()
        .args(["predict", "--raw", "--keep", "id", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&csv)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let got = read_parquet(&out, &ReadOptions::default()).unwrap();
    let names = got.features.names().to_vec();
    assert_eq!(
        names,
        ["id", "prediction", "margin_cat", "margin_dog", "margin_owl"]
    );
    match got.features.column(1) {
        Column::Categorical { codes, levels } => {
            let acc = codes
                .iter()
                .enumerate()
                .filter(|(i, &c)| levels[c as usize] == ["cat", "dog", "owl"][(i % 17) * 3 / 17])
                .count();
            assert_eq!(acc, 200, "the training data is learnt exactly");
        }
        Column::Numeric(_) | Column::Sparse { .. } => panic!("class labels are strings"),
    }
    let inspect = sapwood()
        .arg("inspect")
        .arg(&model)
        .args(["--trees", "1"])
        .assert()
        .success();
    let text = String::from_utf8(inspect.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("classes: cat, dog, owl") && text.contains("tree 0"),
        "{text}"
    );
}

#[test]
fn predict_writes_contributions_that_sum_to_the_margin_and_leaf_columns() {
    let t = tempfile::tempdir().unwrap();
    let (csv, model) = animals(t.path());
    let out = t.path().join("p.parquet");
    sapwood()
        .args([
            "predict",
            "--raw",
            "--contributions",
            "--leaf",
            "--rounds",
            "4",
            "--model",
        ])
        .arg(&model)
        .arg("--data")
        .arg(&csv)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let got = read_parquet(&out, &ReadOptions::default()).unwrap();
    let names = got.features.names().to_vec();
    let mut want = vec!["prediction".to_string()];
    want.extend(["cat", "dog", "owl"].map(|c| format!("margin_{c}")));
    for c in ["cat", "dog", "owl"] {
        for f in ["x", "colour", "bias"] {
            want.push(format!("contrib_{c}_{f}"));
        }
    }
    want.extend((0..12).map(|t| format!("leaf_{t}")));
    assert_eq!(names, want);
    for c in ["cat", "dog", "owl"] {
        let margin = numeric_column(&got, &format!("margin_{c}"));
        let parts: Vec<Vec<f32>> = ["x", "colour", "bias"]
            .iter()
            .map(|f| numeric_column(&got, &format!("contrib_{c}_{f}")))
            .collect();
        for (i, m) in margin.iter().enumerate() {
            let sum: f32 = parts.iter().map(|p| p[i]).sum();
            assert!(
                (sum - m).abs() <= 1e-4 * m.abs().max(1.0),
                "{c} row {i}: {sum} vs {m}"
            );
        }
    }
    let b = Booster::load(&model).unwrap();
    let leaf0 = numeric_column(&got, "leaf_0");
    let tree = &b.model().trees[0];
    assert!(leaf0
        .iter()
        .all(|&l| tree.nodes[l as usize].split.is_none()));
}

#[test]
fn device_wgpu_saves_the_cpu_model_or_says_no_adapter_was_found() {
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/penguins/train.parquet");
    // trains with `device` on `workers` in-process workers; returns the run's output and
    // what its summary says ran (equal models alone would pass if --device were ignored)
    let run = |device: &str, workers: &str, model: &Path| {
        let summary = model.with_extension("summary.json");
        let out = sapwood()
            .args([
                "train",
                "--quiet",
                "--label",
                "species",
                "--objective",
                "multi:softprob",
                "--rounds",
                "8",
            ])
            .args(["--device", device, "--workers", workers, "--threads", "3"])
            .args(["--set", "grad_bits=8", "--data"])
            .arg(&data)
            .arg("--model")
            .arg(model)
            .arg("--summary")
            .arg(&summary)
            .env("XDG_RUNTIME_DIR", t.path())
            .output()
            .unwrap();
        let ran = std::fs::read_to_string(&summary)
            .ok()
            .map(|s| serde_json::from_str::<serde_json::Value>(&s).unwrap()["ran"].clone());
        (out, ran)
    };
    let backends = |ran: &serde_json::Value| -> Vec<String> {
        ran["backends"]
            .as_array()
            .unwrap_or_else(|| panic!("no backends in {ran}"))
            .iter()
            .map(|b| b.as_str().unwrap().to_string())
            .collect()
    };
    let (cpu, gpu) = (t.path().join("cpu.json"), t.path().join("gpu.json"));
    let (out, ran) = run("cpu", "1", &cpu);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = ran.unwrap();
    assert_eq!(backends(&ran), ["cpu"]);
    assert_eq!(ran["threads_per_worker"], serde_json::json!([3]), "{ran}");
    let (out, ran) = run("wgpu", "1", &gpu);
    if out.status.success() {
        let ran = ran.expect("a summary");
        let names = backends(&ran);
        assert!(
            names.len() == 1 && names[0].starts_with("wgpu: "),
            "the wgpu backend ran: {ran}"
        );
        assert_eq!(
            std::fs::read(&cpu).unwrap(),
            std::fs::read(&gpu).unwrap(),
            "wgpu and cpu models differ"
        );
        // three logical devices on the one adapter, one in-process worker each
        let three = t.path().join("gpu3.json");
        let (run3, ran3) = run("wgpu", "3", &three);
        assert!(
            run3.status.success(),
            "{}",
            String::from_utf8_lossy(&run3.stderr)
        );
        let ran3 = ran3.expect("a summary");
        assert_eq!(ran3["workers"], 3, "{ran3}");
        // the 3 threads are shared among the workers
        assert_eq!(ran3["threads_per_worker"], serde_json::json!([1, 1, 1]));
        assert_eq!(backends(&ran3), vec![names[0].clone(); 3], "{ran3}");
        let sent = ran3["bytes_sent_per_worker"].as_array().unwrap();
        assert!(
            sent.len() == 3 && sent.iter().all(|b| b.as_u64().unwrap() > 0),
            "every worker sent bytes: {ran3}"
        );
        assert_eq!(
            std::fs::read(&cpu).unwrap(),
            std::fs::read(&three).unwrap(),
            "3 wgpu workers differ"
        );
    } else {
        // only acceptable without an adapter, and never where the test script installed one
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("no wgpu adapter found"), "{err}");
        assert!(
            std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
            "an adapter was required: {err}"
        );
    }
}

/// Trains a small model on `csv` with `extra` flags and returns its path.
fn train_csv(dir: &Path, csv: &str, text: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let data = dir.join(csv);
    std::fs::write(&data, text).unwrap();
    let model = dir.join(format!("{csv}.json"));
    sapwood()
        .args(["train", "--quiet", "--rounds", "3", "--label", "y"])
        .args(extra)
        .arg("--data")
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    (data, model)
}

fn stderr_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(a.get_output().stderr.clone()).unwrap()
}

#[test]
fn outputs_are_checked_before_training_and_inputs_are_never_overwritten() {
    let t = tempfile::tempdir().unwrap();
    let mut text = String::from("x,y\n");
    for i in 0..50 {
        text += &format!("{i},{}\n", i % 7);
    }
    let data = t.path().join("d.csv");
    std::fs::write(&data, &text).unwrap();
    let model = t.path().join("m.json");
    // a model or summary in a missing directory fails before any training, leaving nothing
    for (flag, target) in [
        ("--model", "missing/m.json"),
        ("--summary", "missing/s.json"),
    ] {
        let mut cmd = sapwood();
        cmd.args(["train", "--quiet", "--label", "y", "--data"])
            .arg(&data);
        if flag == "--model" {
            cmd.arg("--model").arg(t.path().join(target));
        } else {
            cmd.arg("--model")
                .arg(&model)
                .arg("--summary")
                .arg(t.path().join(target));
        }
        let a = cmd.assert().code(2);
        let err = stderr_of(&a);
        assert!(
            err.contains("missing") && err.contains("cannot create"),
            "{err}"
        );
        assert!(!model.exists(), "{flag}: no model written");
    }
    sapwood()
        .args([
            "train", "--quiet", "--rounds", "2", "--label", "y", "--data",
        ])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let before = std::fs::read(&data).unwrap();
    let a = sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(t.path().join(".").join("d.csv"))
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("--data file"), "{}", stderr_of(&a));
    assert_eq!(std::fs::read(&data).unwrap(), before, "the input is intact");
    // a temporary file of a killed predict (its process is gone) is removed by the next run
    let out = t.path().join("p.parquet");
    let stale = t.path().join(".p.parquet.4194305.tmp");
    std::fs::write(&stale, "partial").unwrap();
    sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    assert!(out.exists());
    assert!(!stale.exists(), "the orphaned temporary file is cleaned up");
    // zero rounds is refused rather than writing base margins
    let a = sapwood()
        .args(["predict", "--rounds", "0", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(t.path().join("zero.parquet"))
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("--rounds 0"), "{}", stderr_of(&a));
}

#[test]
fn features_can_be_kept_and_be_the_eval_label_and_column_names_are_unique() {
    let t = tempfile::tempdir().unwrap();
    let mut text = String::from("id,x,y\n");
    for i in 0..60 {
        text += &format!("{},{i},{}\n", 1000 + i, (i % 3) as f32 * 1.5);
    }
    let (data, model) = train_csv(t.path(), "d.csv", &text, &[]);
    // keeping a feature column copies it out next to the predictions
    let out = t.path().join("p.parquet");
    sapwood()
        .args(["predict", "--keep", "x,id", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let got = read_parquet(&out, &ReadOptions::default()).unwrap();
    assert_eq!(got.features.names(), ["x", "id", "prediction"]);
    assert_eq!(numeric_column(&got, "x")[59], 59.0);
    // --keep prediction would give two columns of one name
    let a = sapwood()
        .args(["predict", "--keep", "prediction", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(t.path().join("q.parquet"))
        .assert()
        .code(2);
    assert!(
        stderr_of(&a).contains("--keep prediction"),
        "{}",
        stderr_of(&a)
    );
    assert!(!t.path().join("q.parquet").exists());
    // eval where the label is also a feature: a model trained on x to predict y, evaluated
    // with --label x, reads x both ways
    let a = sapwood()
        .args(["eval", "--label", "x", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .assert()
        .success();
    let text = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    assert!(text.starts_with("rmse: "), "{text}");
    // eval on a file without rows is an error, not NaN
    let empty = t.path().join("empty.csv");
    std::fs::write(&empty, "id,x,y\n").unwrap();
    let a = sapwood()
        .args(["eval", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&empty)
        .assert()
        .code(2);
    assert!(!stderr_of(&a).contains("NaN"), "{}", stderr_of(&a));
    assert!(stderr_of(&a).contains("empty.csv"), "{}", stderr_of(&a));
}

#[test]
fn mixed_type_classes_get_distinct_columns_and_integers_are_not_taken_for_strings() {
    use sapwood::{ClassLabel, ObjectiveKind, Params};
    let t = tempfile::tempdir().unwrap();
    let n = 90;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let classes: Vec<ClassLabel> = (0..n)
        .map(|i| match i * 3 / n {
            0 => ClassLabel::Int(1),
            1 => ClassLabel::Str("1".into()),
            _ => ClassLabel::Int(2),
        })
        .collect();
    let d = Dataset::builder()
        .numeric("x", x)
        .class_labels(classes)
        .build()
        .unwrap();
    let params = Params {
        objective: ObjectiveKind::Softprob,
        num_rounds: 5,
        ..Default::default()
    };
    let model = t.path().join("mixed.json");
    Booster::train(&params, &d, &[])
        .unwrap()
        .save(&model)
        .unwrap();
    let data = t.path().join("x.csv");
    let mut text = String::from("x\n");
    for i in 0..n {
        text += &format!("{i}\n");
    }
    std::fs::write(&data, text).unwrap();
    let out = t.path().join("p.parquet");
    sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let got = read_parquet(&out, &ReadOptions::default()).unwrap();
    assert_eq!(
        got.features.names(),
        ["prediction", "prob_int:1", "prob_int:2", "prob_str:1"]
    );
    match got.features.column(0) {
        Column::Categorical { levels, .. } => {
            assert!(levels.iter().all(|l| l.contains(':')), "{levels:?}")
        }
        Column::Numeric(_) | Column::Sparse { .. } => {
            panic!("mixed classes are written as text, not bool or int")
        }
    }
    // a string feature in training, integers at prediction: refused, naming the column
    let mut text = String::from("c,y\n");
    for i in 0..40 {
        text += &format!("{},{}\n", ["red", "green"][i % 2], i % 2);
    }
    let (_, model) = train_csv(t.path(), "s.csv", &text, &[]);
    let ints = t.path().join("ints.csv");
    std::fs::write(&ints, "c\n1\n2\n").unwrap();
    let a = sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&ints)
        .arg("--out")
        .arg(t.path().join("q.parquet"))
        .assert()
        .code(2);
    let err = stderr_of(&a);
    assert!(
        err.contains("column `c`") && err.contains("ints.csv"),
        "{err}"
    );
}

/// The JSON of a model whose first tree is a chain `depth` splits deep.
fn deep_model_json(dir: &Path, depth: usize) -> PathBuf {
    let mut text = String::from("x,y\n");
    for i in 0..40 {
        text += &format!("{i},{}\n", i % 5);
    }
    let (_, model) = train_csv(dir, "deep.csv", &text, &[]);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let n = 2 * depth + 1;
    let (mut left, mut right, mut feature) = (vec![-1i64; n], vec![-1i64; n], vec![-1i64; n]);
    let mut split_bin = vec![0u32; n];
    for j in 0..depth {
        left[2 * j] = (2 * j + 1) as i64;
        right[2 * j] = (2 * j + 2) as i64;
        feature[2 * j] = 0;
        split_bin[2 * j] = 1;
    }
    v["trees"][0] = serde_json::json!({
        "group": 0, "left": left, "right": right, "feature": feature,
        "split_bin": split_bin, "default_left": vec![false; n], "categories": [],
        "value": vec![0.5f32; n], "gain": vec![1.0f64; n], "cover": vec![1.0f64; n],
    });
    let path = dir.join("deep.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

#[test]
fn inspect_prints_a_30000_deep_tree_and_stops_quietly_on_a_closed_pipe() {
    use std::io::Read;
    let t = tempfile::tempdir().unwrap();
    let model = deep_model_json(t.path(), 30_000);
    let a = sapwood()
        .arg("inspect")
        .arg(&model)
        .args(["--trees", "1"])
        .assert()
        .success();
    let text = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    assert!(text.contains("deepest tree: 30000"), "{}", &text[..500]);
    assert!(
        text.contains("[depth 30000] leaf 60000"),
        "the last leaf is printed"
    );
    // `sapwood inspect ... | head`: the reader goes away after a few bytes
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("sapwood"))
        .arg("inspect")
        .arg(&model)
        .args(["--trees", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{err}");
}

#[test]
fn a_run_killed_at_random_rounds_resumes_to_the_uninterrupted_model() {
    let t = tempfile::tempdir().unwrap();
    let csv = t.path().join("d.csv");
    let mut text = String::from("a,b,c,d,y\n");
    for i in 0..20_000u64 {
        let h = |k: u64| ((i * 2654435761 + k * 40503) % 1000) as f64 / 1000.0;
        let y = (h(1) * h(2) + (3.0 * h(3)).sin() > 0.7) as u8;
        text += &format!("{},{},{},{},{y}\n", h(1), h(2), h(3), h(4));
    }
    std::fs::write(&csv, text).unwrap();
    let common = |model: &Path| -> Vec<String> {
        let mut v: Vec<String> = [
            "train",
            "--quiet",
            "--label",
            "y",
            "--objective",
            "binary:logistic",
            "--rounds",
            "150",
            "--max-depth",
            "7",
            "--set",
            "subsample=0.8",
            "--set",
            "colsample_bytree=0.7",
            "--set",
            "seed=3",
            "--threads",
            "1",
        ]
        .map(String::from)
        .to_vec();
        v.extend(["--data".into(), csv.display().to_string()]);
        v.extend(["--model".into(), model.display().to_string()]);
        v
    };
    let whole = t.path().join("whole.json");
    sapwood().args(common(&whole)).assert().success();
    let want = std::fs::read(&whole).unwrap();
    let ck = t.path().join("ck.json");
    let mut killed = 0;
    for target in [9usize, 47, 101] {
        let _ = std::fs::remove_file(&ck);
        let model = t.path().join(format!("m{target}.json"));
        let mut args = common(&model);
        args.extend(["--checkpoint".into(), ck.display().to_string()]);
        args.extend(["--checkpoint-every".into(), "1".into()]);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("sapwood"))
            .args(&args)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let rounds = std::fs::read_to_string(&ck)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
                .and_then(|v| v["rounds"].as_u64())
                .unwrap_or(0) as usize;
            if rounds >= target {
                child.kill().unwrap(); // SIGKILL: no handler runs, nothing is flushed
                killed += 1;
                break;
            }
            if child.try_wait().unwrap().is_some() || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = child.wait();
        assert!(!model.exists(), "a killed run wrote no model");
        let mut resume = common(&model);
        resume.extend(["--resume".into(), ck.display().to_string()]);
        resume.extend(["--checkpoint".into(), ck.display().to_string()]);
        sapwood().args(&resume).assert().success();
        assert!(
            std::fs::read(&model).unwrap() == want,
            "resumed after round {target}+: model differs"
        );
    }
    assert!(killed >= 2, "only {killed} runs were killed mid-training");
    let leftovers: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // a checkpoint of another job is refused by name
    let other = t.path().join("other.json");
    let mut args = common(&other);
    for a in args.iter_mut().filter(|a| *a == "seed=3") {
        *a = "seed=4".into();
    }
    args.extend(["--resume".into(), ck.display().to_string()]);
    let out = sapwood().args(&args).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("another job"), "{err}");
}

#[test]
fn inspect_dumps_trees_in_values_that_route_rows_as_the_model_does() {
    let t = tempfile::tempdir().unwrap();
    let (csv, model) = animals(t.path());
    let out = sapwood()
        .args(["inspect", "--dump", "json"])
        .arg(&model)
        .assert()
        .success();
    let trees: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let trees = trees.as_array().unwrap();
    let b = Booster::load(&model).unwrap();
    assert_eq!(trees.len(), b.num_trees());
    let table = sapwood_io::read_csv(
        &csv,
        &ReadOptions {
            label: Some("y".into()),
            drop: vec!["id".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let x = numeric_column(&table, "x");
    let Column::Categorical { codes, levels } = table.features.column(1) else {
        panic!("colour is categorical")
    };
    let data = Dataset::from_parts(table.features.clone(), None, None).unwrap();
    let leaves = b
        .predict_with(
            &data,
            sapwood::PredictOptions {
                output: sapwood::Output::Leaf,
                ..Default::default()
            },
        )
        .unwrap();
    for (ti, tree) in trees.iter().enumerate() {
        let nodes = tree["nodes"].as_array().unwrap();
        for row in 0..x.len() {
            let mut id = 0usize;
            while nodes[id].get("leaf").is_none() {
                let n = &nodes[id];
                let left = match n["feature"].as_str().unwrap() {
                    "x" => x[row] as f64 <= n["threshold"].as_f64().unwrap(),
                    _ => {
                        let level = &levels[codes[row] as usize];
                        n["left_levels"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|l| l == level)
                    }
                };
                id = n[if left { "left" } else { "right" }].as_u64().unwrap() as usize;
            }
            assert_eq!(id as f32, leaves.row(row)[ti], "tree {ti} row {row}");
        }
    }
    let text = sapwood()
        .args(["inspect", "--dump", "text", "--trees", "2"])
        .arg(&model)
        .assert()
        .success();
    let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
    assert!(text.starts_with("tree 0 (group 0):") && text.contains("tree 1 (group 1):"));
    assert!(!text.contains("tree 2") && text.contains("x <= "), "{text}");
}

/// A checkpoint resumed on other data with the same label mean (the labels permuted, so the
/// base margin and the bins are the same) is refused naming the training rows; one whose
/// trees were edited after it was written fails its integrity check; the intact one on the
/// same data resumes to the model of a run never stopped. Both used to exit 0 with a model
/// mixed from two jobs.
#[test]
fn resume_refuses_other_rows_and_an_edited_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("datasets/synthetic/train.csv")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.remove(0);
    // the same rows with the labels of rows i and i+1 swapped when they differ: the label
    // mean, the features and so the bins stay exactly the same
    let (features, labels): (Vec<&str>, Vec<&str>) =
        lines.iter().map(|l| l.rsplit_once(',').unwrap()).unzip();
    let mut swapped = labels.clone();
    for pair in swapped.chunks_mut(2) {
        pair.reverse();
    }
    assert_ne!(swapped, labels);
    let write = |name: &str, labels: &[&str]| {
        let mut s = format!("{header}\n");
        for (f, y) in features.iter().zip(labels) {
            s += &format!("{f},{y}\n");
        }
        let p = t.path().join(name);
        std::fs::write(&p, s).unwrap();
        p
    };
    let original = write("original.csv", &labels);
    let permuted = write("permuted.csv", &swapped);
    let ck = t.path().join("ck.json");
    let run = |data: &Path, model: &Path, rounds: &str, extra: &[&str]| {
        let mut c = sapwood();
        c.args([
            "train",
            "--quiet",
            "--label",
            "y",
            "--objective",
            "binary:logistic",
        ])
        .args(["--rounds", rounds, "--max-depth", "3", "--data"])
        .arg(data)
        .arg("--model")
        .arg(model)
        .args(extra);
        c
    };
    // every checkpoint of the job (the last one at round 8) carries the same parameters
    let ck_args = [
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "2",
    ];
    run(&original, &t.path().join("part.json"), "8", &ck_args)
        .assert()
        .success();
    let whole = t.path().join("whole.json");
    run(&original, &whole, "8", &[]).assert().success();
    let saved = std::fs::read_to_string(&ck).unwrap();

    let resume = ["--resume", ck.to_str().unwrap()];
    let out = run(&permuted, &t.path().join("mixed.json"), "8", &resume)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("another job") && err.contains("training rows"),
        "{err}"
    );
    assert!(!t.path().join("mixed.json").exists());

    // one leaf value changed in the file: refused by its integrity digest
    let mut v: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let values = v["model"]["trees"][1]["value"].as_array_mut().unwrap();
    let last = values.last_mut().unwrap();
    assert_ne!(last.as_f64(), Some(0.125));
    *last = serde_json::json!(0.125);
    let edited = v.to_string();
    std::fs::write(&ck, &edited).unwrap();
    let out = run(&original, &t.path().join("edited.json"), "8", &resume)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("integrity"), "{err}");

    // the intact checkpoint on its own data resumes to the uninterrupted model
    std::fs::write(&ck, &saved).unwrap();
    let resumed = t.path().join("resumed.json");
    run(&original, &resumed, "8", &resume).assert().success();
    assert_eq!(
        std::fs::read(&resumed).unwrap(),
        std::fs::read(&whole).unwrap()
    );
}

/// Messages that used to mislead: a column given two parts ("not read"), a label with three
/// classes for a binary objective ("label at row 0 is 3 classes"), a text query id that
/// comes back (shown as its hash), and `predict --out p.csv` (silently Parquet).
#[test]
fn messages_name_the_column_the_classes_and_the_query_as_written() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("m.json");
    let csv = t.path().join("d.csv");
    std::fs::write(
        &csv,
        "x,y,q,w\n1,a,q1,1\n2,b,q1,1\n3,c,q2,1\n4,a,q2,1\n5,b,q1,1\n6,c,q3,1\n",
    )
    .unwrap();
    let d = csv.to_str().unwrap();
    let o = out.to_str().unwrap();
    fails(
        &[
            "train",
            "--quiet",
            "--data",
            d,
            "--label",
            "y",
            "--group",
            "y",
            "--objective",
            "rank:ndcg",
            "--model",
            o,
        ],
        "--group y: `y` is already the --label column",
        &out,
    );
    fails(
        &[
            "train", "--quiet", "--data", d, "--label", "y", "--weight", "y", "--model", o,
        ],
        "--weight y: `y` is already the --label column",
        &out,
    );
    fails(
        &[
            "train",
            "--quiet",
            "--data",
            d,
            "--label",
            "y",
            "--objective",
            "binary:logistic",
            "--model",
            o,
        ],
        "binary:logistic needs exactly two classes, but the label has 3 (`a`, `b`, `c`)",
        &out,
    );
    // query q1 comes back at row 4 (0-based data rows): named as written, not as a hash
    fails(
        &[
            "train",
            "--quiet",
            "--data",
            d,
            "--label",
            "w",
            "--group",
            "q",
            "--objective",
            "rank:ndcg",
            "--drop",
            "y",
            "--model",
            o,
        ],
        "row 4: query `q1` appears again",
        &out,
    );
    sapwood()
        .args([
            "train", "--quiet", "--rounds", "2", "--label", "x", "--drop", "y,q", "--data", d,
            "--model", o,
        ])
        .assert()
        .success();
    let p = t.path().join("p.csv");
    fails(
        &[
            "predict",
            "--model",
            o,
            "--data",
            d,
            "--out",
            p.to_str().unwrap(),
        ],
        "predictions are written as Parquet",
        &p,
    );
}

/// `sapwood params` finds an entry by its name or an alias, lists every parameter and run
/// option as JSON, and refuses an unknown name with the closest known one (exit 2).
#[test]
fn params_prints_the_reference_by_name_or_alias() {
    let out = sapwood().args(["params", "num-leaves"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("max_leaves (parameter"), "{text}");
    let out = sapwood().args(["params", "--json"]).output().unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    let expected: Vec<&str> = sapwood::PARAM_NAMES
        .iter()
        .chain(sapwood::RUN_OPTION_NAMES)
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(names, expected);
    let out = sapwood().args(["params", "etaa"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("did you mean `eta`"), "{err}");
}

#[test]
fn the_portable_switch_is_read_and_gives_the_vector_paths_bits() {
    // the binary with every vector path allowed (None), AVX2 but no AVX-512 ("avx2"), or
    // the portable paths only ("1")
    let sapwood_with = |portable: Option<&str>| {
        let mut c = sapwood();
        match portable {
            Some(v) => c.env("SAPWOOD_PORTABLE", v),
            None => c.env_remove("SAPWOOD_PORTABLE"),
        };
        c
    };
    // --version says which paths the kernels take
    let version = |portable: Option<&str>| {
        let out = sapwood_with(portable)
            .arg("--version")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let (portable, avx2, native) = (version(Some("1")), version(Some("avx2")), version(None));
    assert!(
        portable.contains("vector paths: portable (SAPWOOD_PORTABLE is set)"),
        "{portable}"
    );
    assert!(
        native.contains("vector paths: ") && !native.contains("SAPWOOD_PORTABLE is set"),
        "{native}"
    );
    // on a CPU with AVX2 the limited binary names it and no AVX-512; on one without, the
    // portable paths
    assert!(
        avx2.contains("vector paths: AVX2 (no AVX-512: SAPWOOD_PORTABLE=avx2 is set)")
            || avx2.contains("vector paths: portable (the CPU has no vector extension"),
        "{avx2}"
    );
    assert!(!avx2.contains("AVX-512 F"), "{avx2}");
    // the same job trains the same bytes and predicts the same values every way: every
    // kernel's vector paths give its portable path's bits (categorical and missing values
    // in chile, 8-bit gradients for the low-bit draw's hashes)
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo().join("datasets").join("chile");
    let label = meta("chile")["label"].as_str().unwrap().to_string();
    let run = |portable: Option<&str>, tag: &str| {
        let (model, out) = (
            tmp.path().join(format!("{tag}.json")),
            tmp.path().join(format!("{tag}.parquet")),
        );
        sapwood_with(portable)
            .args(["train", "--quiet", "--rounds", "20", "--label", &label])
            .args(["--objective", "binary:logistic", "--set", "grad_bits=8"])
            .arg("--data")
            .arg(dir.join("train.parquet"))
            .arg("--model")
            .arg(&model)
            .assert()
            .success();
        sapwood_with(portable)
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(dir.join("test.parquet"))
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        (std::fs::read(&model).unwrap(), std::fs::read(&out).unwrap())
    };
    let native = run(None, "native");
    for (limit, tag) in [("avx2", "avx2"), ("1", "portable")] {
        let other = run(Some(limit), tag);
        assert!(native.0 == other.0, "the {tag} paths trained another model");
        assert!(
            native.1 == other.1,
            "the {tag} paths predicted other values"
        );
    }
}

/// A ranking model with a `label_gain` table: `eval` scores NDCG with the table's gains,
/// and a label the table has no gain for is an error naming the file and the row (as in
/// training), not a document of gain 0.
#[test]
fn eval_of_a_label_gain_model_checks_labels_against_the_table() {
    let t = tempfile::tempdir().unwrap();
    let (train, model) = (t.path().join("train.csv"), t.path().join("m.json"));
    let mut rows = String::from("x,rel,q\n");
    for i in 0..60 {
        rows += &format!("{},{},{}\n", i % 7, (i % 7) / 3, i / 6);
    }
    std::fs::write(&train, &rows).unwrap();
    sapwood()
        .args([
            "train",
            "--quiet",
            "--rounds",
            "3",
            "--objective",
            "rank:ndcg",
        ])
        .args([
            "--label",
            "rel",
            "--group",
            "q",
            "--set",
            "label_gain=0,1,5",
        ])
        .arg("--data")
        .arg(&train)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let a = sapwood()
        .args(["eval", "--label", "rel", "--group", "q", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&train)
        .assert()
        .success();
    let text = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    assert!(text.starts_with("ndcg: "), "{text}");
    let bad = t.path().join("bad.csv");
    std::fs::write(&bad, "x,rel,q\n1,0,1\n2,1,1\n3,3,1\n").unwrap();
    let a = sapwood()
        .args(["eval", "--label", "rel", "--group", "q", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&bad)
        .assert()
        .code(2);
    let err = stderr_of(&a);
    assert!(
        err.contains("bad.csv") && err.contains("row 2") && err.contains("label_gain"),
        "{err}"
    );
}
