//! Outputs are atomic *mid-write*: a failure after the first row group or the first bytes
//! of a file were written leaves no output (or the previous file, unchanged) and no
//! temporary, for `predict`, `train --model`, `--summary` and checkpoints.
//!
//! `predict` fails on a real column that breaks mid-stream (`fixtures/corrupt_second_row_group.parquet`,
//! made by `fixtures/make_fixtures.py`); the JSON outputs fail through the test-only hook
//! `SAPWOOD_TEST_FAIL_WRITE=<file name>:<bytes>` of `sapwood_core::files::write_atomic`,
//! which writes that many bytes to the temporary file, syncs them, and fails as a full disk
//! would.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

const FAIL_WRITE: &str = "SAPWOOD_TEST_FAIL_WRITE";

/// The names of the files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `sapwood train` on the synthetic dataset (binary, 28 features) with `extra` arguments.
fn train(extra: &[&str]) -> Command {
    let mut c = sapwood();
    c.args([
        "train",
        "--quiet",
        "--label",
        "y",
        "--objective",
        "binary:logistic",
    ])
    .args(["--rounds", "6", "--max-depth", "3", "--data"])
    .arg(repo().join("datasets/synthetic/train.parquet"))
    .args(extra);
    c
}

fn stderr_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

#[test]
fn predict_that_fails_in_the_second_row_group_leaves_no_output() {
    let t = tempfile::tempdir().unwrap();
    let models = t.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let model = models.join("m.json");
    train(&["--model", model.to_str().unwrap()])
        .assert()
        .success();
    let data = repo().join("crates/sapwood-cli/tests/fixtures/corrupt_second_row_group.parquet");
    let out_dir = t.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("p.parquet");
    let predict = |out: &Path| {
        sapwood()
            .args(["predict", "--model", model.to_str().unwrap()])
            .args([
                "--data",
                data.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .assert()
            .failure()
    };
    let a = predict(&out);
    let err = stderr_of(&a);
    // the error is in row group 1: row group 0 was read, predicted and written first
    assert!(
        err.contains("corrupt_second_row_group.parquet") && err.contains("row group 1"),
        "{err}"
    );
    assert!(!err.contains("row group 0"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(files_in(&out_dir), Vec::<String>::new(), "{err}");
    // a previous output is left as it was
    std::fs::write(&out, b"previous predictions").unwrap();
    predict(&out);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous predictions");
    assert_eq!(files_in(&out_dir), ["p.parquet"]);
}

#[test]
fn a_model_write_that_fails_mid_file_leaves_no_model_and_no_summary() {
    let t = tempfile::tempdir().unwrap();
    let (model, summary) = (t.path().join("m.json"), t.path().join("s.json"));
    let a = train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "m.json:100")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("m.json") && err.contains("write failed after 100 bytes"),
        "{err}"
    );
    assert_eq!(files_in(t.path()), Vec::<String>::new(), "{err}");
    // the hook fails only the file it names: the same run without it writes both
    train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "other.json:100")
        .assert()
        .success();
    assert_eq!(files_in(t.path()), ["m.json", "s.json"]);
    // and a failed rewrite leaves the previous model whole
    let before = std::fs::read(&model).unwrap();
    train(&["--model", model.to_str().unwrap()])
        .env(FAIL_WRITE, "m.json:10")
        .assert()
        .failure();
    assert_eq!(std::fs::read(&model).unwrap(), before);
    assert_eq!(files_in(t.path()), ["m.json", "s.json"]);
}

#[test]
fn a_summary_write_that_fails_mid_file_leaves_no_summary() {
    let t = tempfile::tempdir().unwrap();
    let (model, summary) = (t.path().join("m.json"), t.path().join("s.json"));
    let a = train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "s.json:50")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("s.json") && err.contains("write failed after 50 bytes"),
        "{err}"
    );
    // the model, written before the summary, is whole; the summary is absent
    let files = files_in(t.path());
    assert!(files.is_empty() || files == ["m.json"], "{files:?}: {err}");
    if model.exists() {
        sapwood::Booster::load(&model).expect("a whole model");
    }
}

#[test]
fn a_checkpoint_write_that_fails_mid_file_leaves_the_previous_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let ck = t.path().join("ck.json");
    let checkpointing = |model: &str| {
        let mut c = train(&["--model", t.path().join(model).to_str().unwrap()]);
        c.args([
            "--checkpoint",
            ck.to_str().unwrap(),
            "--checkpoint-every",
            "2",
        ]);
        c
    };
    // no checkpoint yet: the first one fails after 10 bytes
    let a = checkpointing("a.json")
        .env(FAIL_WRITE, "ck.json:10")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("ck.json") && err.contains("write failed after 10 bytes"),
        "{err}"
    );
    assert_eq!(files_in(t.path()), Vec::<String>::new(), "{err}");
    // a run that checkpoints, then one whose checkpoint write fails midway
    checkpointing("b.json").assert().success();
    assert_eq!(files_in(t.path()), ["b.json", "ck.json"]);
    let before = std::fs::read(&ck).unwrap();
    let a = checkpointing("c.json")
        .env(FAIL_WRITE, "ck.json:1000")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(err.contains("ck.json"), "{err}");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the previous checkpoint"
    );
    assert_eq!(files_in(t.path()), ["b.json", "ck.json"], "{err}");
}
