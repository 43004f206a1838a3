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
