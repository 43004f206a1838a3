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

/// Writes a Parquet file of `columns` (name, array) through sapwood-io's writer.
fn write_parquet(path: &std::path::Path, columns: Vec<(&str, sapwood_io::arrow_array::ArrayRef)>) {
    let fields: Vec<(String, sapwood_io::arrow_schema::DataType)> = columns
        .iter()
        .map(|(n, a)| (n.to_string(), a.data_type().clone()))
        .collect();
    let mut w = sapwood_io::PredictionWriter::create(path, &fields).unwrap();
    w.write(columns.into_iter().map(|(_, a)| a).collect())
        .unwrap();
    w.finish().unwrap();
}

/// A feature trained on numbers given as booleans at prediction (or the other way round)
/// is refused naming the column and both types: read as 0 and 1 they were predicted
/// silently (315 of 352 rows changed). The model records what each feature held; a model
/// trained on booleans takes booleans.
#[test]
fn booleans_where_numbers_were_trained_are_refused() {
    use sapwood_io::arrow_array::{ArrayRef, BooleanArray, Float64Array};
    use std::sync::Arc;
    let t = tempfile::tempdir().unwrap();
    let n = 400;
    let x: Vec<f64> = (0..n).map(|i| (i % 17) as f64 / 7.0).collect();
    let b: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| ((i % 17) > 8 || i % 3 == 0) as u8 as f64)
        .collect();
    let num = |v: &[f64]| -> ArrayRef { Arc::new(Float64Array::from(v.to_vec())) };
    let boolean = |v: &[bool]| -> ArrayRef { Arc::new(BooleanArray::from(v.to_vec())) };
    let numbers = t.path().join("numbers.parquet");
    write_parquet(
        &numbers,
        vec![("x", num(&x)), ("f", boolean(&b)), ("y", num(&y))],
    );
    let x_as_bool: Vec<bool> = x.iter().map(|&v| v > 1.0).collect();
    let drifted = t.path().join("drifted.parquet");
    write_parquet(
        &drifted,
        vec![
            ("x", boolean(&x_as_bool)),
            ("f", boolean(&b)),
            ("y", num(&y)),
        ],
    );
    let f_as_number: Vec<f64> = b.iter().map(|&v| v as u8 as f64).collect();
    let drifted_f = t.path().join("drifted_f.parquet");
    write_parquet(
        &drifted_f,
        vec![("x", num(&x)), ("f", num(&f_as_number)), ("y", num(&y))],
    );

    let model = t.path().join("m.json");
    Command::cargo_bin("sapwood")
        .unwrap()
        .args([
            "train", "--quiet", "--rounds", "3", "--label", "y", "--data",
        ])
        .arg(&numbers)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let saved = std::fs::read_to_string(&model).unwrap();
    assert!(
        saved.contains(r#""input_types":["number","bool"]"#),
        "{}",
        &saved[..300.min(saved.len())]
    );
    let predict = |data: &std::path::Path| {
        Command::cargo_bin("sapwood")
            .unwrap()
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(data)
            .arg("--out")
            .arg(t.path().join("p.parquet"))
            .output()
            .unwrap()
    };
    assert!(predict(&numbers).status.success());
    for (data, column, given, trained) in [
        (&drifted, "x", "booleans", "numbers"),
        (&drifted_f, "f", "numbers", "booleans"),
    ] {
        let out = predict(data);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("column `{column}` holds {given}"))
                && err.contains(&format!("trained on {trained}")),
            "{err}"
        );
    }
}
