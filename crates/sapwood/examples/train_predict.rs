//! Trains on a bundled dataset, reports test metrics, saves the model, reloads it and writes
//! test predictions: the main job until the command-line interface exists.
//!
//! `cargo run --release -p sapwood --example train_predict -- datasets/chile out/`

use std::io::Write;
use std::path::{Path, PathBuf};

use sapwood::{Booster, ClassLabel, Dataset, Label, Metric, ObjectiveKind, Params};
use sapwood_io::{read_csv, LabelColumn, ReadOptions};

fn load(
    path: &Path,
    label: &str,
    categorical: &[String],
) -> Result<Dataset<'static>, Box<dyn std::error::Error>> {
    let t = read_csv(
        path,
        &ReadOptions {
            label: Some(label.into()),
            categorical: categorical.to_vec(),
            ..Default::default()
        },
    )?;
    let label = match t.label {
        Some(LabelColumn::Numeric(v)) => Label::Values(v),
        Some(LabelColumn::Strings(s)) => Label::Classes(
            s.into_iter()
                .enumerate()
                .map(|(i, x)| {
                    x.map(ClassLabel::Str)
                        .ok_or(format!("{}: row {i} has no label", path.display()))
                })
                .collect::<Result<_, _>>()?,
        ),
        None => return Err(format!("{}: no label column `{label}`", path.display()).into()),
    };
    Ok(Dataset::from_parts(t.features, Some(label), t.weight)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(args.first().map_or("datasets/chile", String::as_str));
    let out = PathBuf::from(args.get(1).map_or("target/sapwood-example", String::as_str));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json"))?)?;
    let label = meta["label"].as_str().ok_or("meta.json has no label")?;
    let categorical: Vec<String> = meta["categorical"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let (objective, metrics) = match meta["task"].as_str() {
        Some("binary") => (ObjectiveKind::Logistic, vec![Metric::LogLoss, Metric::Auc]),
        Some("regression") => (ObjectiveKind::SquaredError, vec![Metric::Rmse, Metric::Mae]),
        _ => (
            ObjectiveKind::Softprob,
            vec![Metric::MError, Metric::MLogLoss],
        ),
    };
    let train = load(&dir.join("train.csv"), label, &categorical)?;
    let test = load(&dir.join("test.csv"), label, &categorical)?;
    let params = Params {
        objective,
        learning_rate: 0.1,
        num_rounds: 200,
        eval_metric: metrics,
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let booster = Booster::train(&params, &train, &[("test", &test)])?;
    println!(
        "trained {} rounds on {} rows in {:.2} s",
        booster.num_rounds(),
        train.n_rows(),
        start.elapsed().as_secs_f64()
    );
    for r in booster.history().last().into_iter().flatten() {
        println!("test {}: {:.6}", r.metric, r.value);
    }
    std::fs::create_dir_all(&out)?;
    let model_path = out.join("model.json");
    booster.save(&model_path)?;
    let loaded = Booster::load(&model_path)?;
    let predictions = loaded.predict(&test)?;
    assert_eq!(
        predictions,
        booster.predict(&test)?,
        "a reloaded model predicts identically"
    );
    let pred_path = out.join("predictions.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&pred_path)?);
    for i in 0..predictions.n_rows() {
        let row: Vec<String> = predictions.row(i).iter().map(|v| v.to_string()).collect();
        writeln!(f, "{}", row.join(","))?;
    }
    println!(
        "model: {}  predictions: {}",
        model_path.display(),
        pred_path.display()
    );
    Ok(())
}
