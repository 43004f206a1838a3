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
        Column::Categorical { .. } => panic!("{name} is not numeric"),
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
        assert!(printed.contains(": "), "{name}: eval printed {printed}");

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
        if want.groups == 1 {
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
        (train(&p("nan.csv"), &[]), "row 1"),
        (train(&p("inf.csv"), &[]), "row 1"),
        (
            train(&p("oneclass.csv"), &["--objective", "binary:logistic"]),
            "two classes",
        ),
        (
            train(&p("ok.csv"), &["--objective", "reg:tweedie"]),
            "reg:tweedie",
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

#[test]
fn ctrl_c_saves_the_model_trained_so_far() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let child = std::process::Command::new(bin)
        .args(["train", "--rounds", "1000000", "--label", "price", "--data"])
        .arg(repo().join("datasets/diamonds/train.parquet"))
        .arg("--model")
        .arg(&model)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("interrupted: saved the"), "{err}");
    let b = Booster::load(&model).unwrap();
    assert!(b.num_rounds() > 0 && b.num_rounds() < 1_000_000);
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
fn predict_keeps_ids_and_writes_raw_margins_from_csv() {
    let t = tempfile::tempdir().unwrap();
    let csv = t.path().join("d.csv");
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
    let model = t.path().join("m.json");
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
        Column::Numeric(_) => panic!("class labels are strings"),
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
fn device_wgpu_saves_the_cpu_model_or_says_no_adapter_was_found() {
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/penguins/train.parquet");
    let run = |device: &str, model: &Path| {
        sapwood()
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
            .args(["--device", device, "--set", "grad_bits=8", "--data"])
            .arg(&data)
            .arg("--model")
            .arg(model)
            .env("XDG_RUNTIME_DIR", t.path())
            .output()
            .unwrap()
    };
    let (cpu, gpu) = (t.path().join("cpu.json"), t.path().join("gpu.json"));
    assert!(run("cpu", &cpu).status.success());
    let out = run("wgpu", &gpu);
    if out.status.success() {
        assert_eq!(
            std::fs::read(&cpu).unwrap(),
            std::fs::read(&gpu).unwrap(),
            "wgpu and cpu models differ"
        );
        // three logical devices on the one adapter, one in-process worker each
        let three = t.path().join("gpu3.json");
        let run3 = sapwood()
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
            .args([
                "--device",
                "wgpu",
                "--workers",
                "3",
                "--set",
                "grad_bits=8",
                "--data",
            ])
            .arg(&data)
            .arg("--model")
            .arg(&three)
            .env("XDG_RUNTIME_DIR", t.path())
            .output()
            .unwrap();
        assert!(
            run3.status.success(),
            "{}",
            String::from_utf8_lossy(&run3.stderr)
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
