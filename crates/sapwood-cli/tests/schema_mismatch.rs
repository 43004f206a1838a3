//! `sapwood predict` and `sapwood eval` refuse a categorical column trained on text levels
//! and given as integer codes, naming the column and both kinds of values (exit 2, no
//! output), where every value would otherwise be an unseen level predicted as missing.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

/// `colour` (text), `x` (numbers) and `y`, which depends on the colour; with
/// `codes_as_numbers`, `colour` holds each colour's index (0, 1, 2) instead.
fn write_csv(path: &Path, codes_as_numbers: bool) {
    const COLOURS: [&str; 3] = ["blue", "green", "red"];
    let mut text = String::from("colour,x,y\n");
    for i in 0..200 {
        let c = i * 7 % 3;
        let colour = if codes_as_numbers {
            c.to_string()
        } else {
            COLOURS[c].to_string()
        };
        let x = (i % 10) as f32;
        text.push_str(&format!("{colour},{x},{}\n", c as f32 * 3.0 + x * 0.1));
    }
    std::fs::write(path, text).unwrap();
}

fn trained(dir: &Path) -> PathBuf {
    let data = dir.join("train.csv");
    write_csv(&data, false);
    let model = dir.join("model.json");
    sapwood()
        .args([
            "train", "--quiet", "--rounds", "5", "--label", "y", "--data",
        ])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    model
}

#[test]
fn predict_and_eval_refuse_integer_codes_for_a_text_category() {
    let t = tempfile::tempdir().unwrap();
    let model = trained(t.path());
    let codes = t.path().join("codes.csv");
    write_csv(&codes, true);
    let out = t.path().join("pred.parquet");
    let done = sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&codes)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).into_owned();
    assert!(stderr.contains("`colour`"), "{stderr}");
    assert!(
        stderr.contains("numbers (0, 1, 2)") && stderr.contains("blue, green, red"),
        "{stderr}"
    );
    assert!(stderr.contains("text"), "{stderr}");
    assert!(!out.exists(), "no output is written");
    let done = sapwood()
        .args(["eval", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&codes)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).into_owned();
    assert!(
        stderr.contains("`colour`") && stderr.contains("numbers"),
        "{stderr}"
    );
    // the text levels predict
    let train = t.path().join("train.csv");
    sapwood()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&train)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
}
