//! `sapwood export` end to end: every format from a model trained on a bundled dataset with
//! categories and missing values, atomic writes, and exit-2 errors naming what is wrong.

use std::path::PathBuf;

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

/// A penguins model (categorical `island`/`sex`, missing values, three classes).
fn model(dir: &std::path::Path) -> PathBuf {
    let model = dir.join("model.json");
    sapwood()
        .args(["train", "--quiet", "--rounds", "5", "--label", "species"])
        .args(["--objective", "multi:softprob", "--data"])
        .arg(repo().join("datasets/penguins/train.csv"))
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    model
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn exports_every_format_atomically() {
    let t = tempfile::tempdir().unwrap();
    let m = model(t.path());
    for (format, check) in [
        ("xgboost", "\"sapwood_categories\""),
        ("lightgbm", "pandas_categorical:[["),
    ] {
        let out = t.path().join(format!("out.{format}"));
        // an existing file is replaced whole, never appended to or left half-written
        std::fs::write(&out, "old contents").unwrap();
        sapwood()
            .args(["export", "--format", format, "--model"])
            .arg(&m)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains(check), "{format}: {}", &text[..200]);
        assert!(!text.contains("old contents"));
        // the text is exactly what the library writes
        let b = sapwood::Booster::load(&m).unwrap();
        let fmt: sapwood::ExportFormat = format.parse().unwrap();
        assert_eq!(text, b.export_string(fmt).unwrap());
    }
    // ONNX is binary: the file holds exactly the library's bytes, replacing the old file
    let out = t.path().join("out.onnx");
    std::fs::write(&out, "old contents").unwrap();
    sapwood()
        .args(["export", "--format", "ONNX", "--model"])
        .arg(&m)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let bytes = std::fs::read(&out).unwrap();
    let b = sapwood::Booster::load(&m).unwrap();
    assert_eq!(bytes, b.export_bytes(sapwood::ExportFormat::Onnx).unwrap());
    // ModelProto field 1 (ir_version) comes first; the ensemble operator is named inside
    assert_eq!(bytes[0], 0x08);
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    // every categorical split ends its search in an inequality
    assert!(has(b"TreeEnsembleRegressor") && has(b"ai.onnx.ml") && has(b"BRANCH_NEQ"));
    let text_error = b.export_string(sapwood::ExportFormat::Onnx).unwrap_err();
    assert!(
        text_error.to_string().contains("export_bytes"),
        "{text_error}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("out.xgboost")).unwrap())
            .unwrap();
    assert_eq!(v["learner"]["objective"]["name"], "multi:softprob");
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[test]
fn bad_inputs_are_exit_2_errors_naming_the_file_or_format() {
    let t = tempfile::tempdir().unwrap();
    let m = model(t.path());
    let out = t.path().join("out.json");
    let run = |model: &std::path::Path, format: &str| {
        sapwood()
            .args(["export", "--format", format, "--model"])
            .arg(model)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    // an unknown format
    let o = run(&m, "pmml");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`pmml`"), "{}", stderr(&o));
    // truncated, hostile and missing model files
    let text = std::fs::read_to_string(&m).unwrap();
    let truncated = t.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let hostile = t.path().join("hostile.json");
    // a node pointing back at the root: a cycle
    let cyclic = text.replacen("\"left\":[1,", "\"left\":[0,", 1);
    assert_ne!(cyclic, text);
    std::fs::write(&hostile, cyclic).unwrap();
    for bad in [truncated, hostile, t.path().join("absent.json")] {
        for format in ["xgboost", "onnx"] {
            let o = run(&bad, format);
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(
                stderr(&o).contains(&*bad.file_name().unwrap().to_string_lossy()),
                "{}",
                stderr(&o)
            );
        }
    }
    assert!(!out.exists(), "nothing is written on error");
}

/// `--out` naming the model itself is refused before anything is written: the model stays.
#[test]
fn export_over_its_own_model_is_refused_and_the_model_kept() {
    let t = tempfile::tempdir().unwrap();
    let m = model(t.path());
    let before = std::fs::read(&m).unwrap();
    for format in ["xgboost", "lightgbm", "onnx"] {
        let out = sapwood()
            .args(["export", "--format", format, "--model"])
            .arg(&m)
            .arg("--out")
            .arg(&m)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{format}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("that is the --model file"),
            "{format}: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read(&m).unwrap(),
            before,
            "{format} overwrote the model"
        );
    }
}

/// An early-stopped model exports the rounds `predict` uses (through the best round),
/// says so, and `--rounds` exports others: the peers predict with every tree in a file.
#[test]
fn an_early_stopped_model_exports_the_rounds_predict_uses() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("es.json");
    let data = repo().join("datasets/synthetic");
    sapwood()
        .args([
            "train",
            "--quiet",
            "--label",
            "y",
            "--objective",
            "binary:logistic",
        ])
        .args([
            "--rounds",
            "300",
            "--set",
            "learning_rate=0.8",
            "--early-stopping",
            "3",
        ])
        .arg("--data")
        .arg(data.join("train.parquet"))
        .arg("--valid")
        .arg(data.join("test.parquet"))
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let b = sapwood::Booster::load(&model).unwrap();
    let best = b
        .model()
        .best_iteration
        .expect("early stopping chose a round");
    let total = b.model().num_rounds();
    assert!(
        best + 1 < total,
        "best {best} of {total}: no later rounds to leave out"
    );
    let trees_in = |text: &str, format: &str| -> usize {
        match format {
            "xgboost" => {
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                v["learner"]["gradient_booster"]["model"]["trees"]
                    .as_array()
                    .unwrap()
                    .len()
            }
            _ => text.lines().filter(|l| l.starts_with("Tree=")).count(),
        }
    };
    for format in ["xgboost", "lightgbm"] {
        let out_path = t.path().join(format!("es.{format}"));
        let out = sapwood()
            .args(["export", "--format", format, "--model"])
            .arg(&model)
            .arg("--out")
            .arg(&out_path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains(&format!("rounds 1-{} of {total}", best + 1))
                && said.contains(&format!("--rounds {total}")),
            "{format}: {said}"
        );
        let text = std::fs::read_to_string(&out_path).unwrap();
        assert_eq!(trees_in(&text, format), best + 1, "{format}");
        sapwood()
            .args(["export", "--format", format, "--rounds", &total.to_string()])
            .arg("--model")
            .arg(&model)
            .arg("--out")
            .arg(&out_path)
            .assert()
            .success();
        let text = std::fs::read_to_string(&out_path).unwrap();
        assert_eq!(trees_in(&text, format), total, "{format} --rounds {total}");
    }
    // ONNX: the default export is the library's export of the best rounds, smaller than all
    let onnx = t.path().join("es.onnx");
    sapwood()
        .args(["export", "--format", "onnx", "--model"])
        .arg(&model)
        .arg("--out")
        .arg(&onnx)
        .assert()
        .success();
    let best_bytes = std::fs::read(&onnx).unwrap();
    let cut = sapwood::Booster::from_json(&b.model().first_rounds(best + 1).to_json()).unwrap();
    let all = b.model().first_rounds(total);
    assert_eq!(
        best_bytes,
        sapwood::export::onnx::to_bytes(cut.model()).unwrap()
    );
    assert!(best_bytes.len() < sapwood::export::onnx::to_bytes(&all).unwrap().len());
    // more rounds than the model has is an error naming them
    let out = sapwood()
        .args([
            "export", "--format", "onnx", "--rounds", "100000", "--model",
        ])
        .arg(&model)
        .arg("--out")
        .arg(&onnx)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--rounds 100000"), "{}", stderr(&out));
}

/// A refused export names the model, the format and the output, then why: it used to begin
/// "invalid model: <the --out path>", as if the output were the model at fault.
#[test]
fn a_refused_export_names_the_model_format_and_output() {
    let t = tempfile::tempdir().unwrap();
    let m = t.path().join("huber.json");
    sapwood()
        .args(["train", "--quiet", "--rounds", "2", "--label", "price"])
        .args(["--objective", "huber", "--data"])
        .arg(repo().join("datasets/diamonds/train.parquet"))
        .arg("--model")
        .arg(&m)
        .assert()
        .success();
    let out_path = t.path().join("h.xgb.json");
    let out = sapwood()
        .args(["export", "--format", "xgboost", "--model"])
        .arg(&m)
        .arg("--out")
        .arg(&out_path)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let want = format!(
        "error: {} was not exported as xgboost to {}: invalid model: objective huber cannot be \
         exported to",
        m.display(),
        out_path.display()
    );
    assert!(err.starts_with(&want), "{err}");
    assert!(!out_path.exists());
}
