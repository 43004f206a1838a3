//! `sapwood predict`: streams the data by row group and writes Parquet predictions.

use std::sync::Arc;

use anyhow::Result;
use sapwood::{Booster, ClassLabel, Model, ObjectiveKind};
use sapwood_io::arrow_array::{ArrayRef, BooleanArray, Float32Array, Int64Array, StringArray};
use sapwood_io::arrow_schema::DataType;
use sapwood_io::{PredictionWriter, ReadOptions};

use super::categorical_features;
use crate::cli::PredictArgs;
use crate::input::Source;

/// The output columns after the kept ones: names and types.
fn output_fields(model: &Model, raw: bool) -> Vec<(String, DataType)> {
    let mut f = Vec::new();
    if model.groups == 1 {
        f.push(("prediction".to_string(), DataType::Float32));
        return f;
    }
    let classes = class_names(model);
    f.push(("prediction".to_string(), label_type(model)));
    let prefix = if raw { "margin_" } else { "prob_" };
    f.extend(
        classes
            .iter()
            .map(|c| (format!("{prefix}{c}"), DataType::Float32)),
    );
    f
}

fn class_names(model: &Model) -> Vec<String> {
    match &model.classes {
        Some(c) => c.iter().map(|c| c.to_string()).collect(),
        None => (0..model.groups).map(|c| c.to_string()).collect(),
    }
}

fn label_type(model: &Model) -> DataType {
    match model.classes.as_ref().and_then(|c| c.first()) {
        Some(ClassLabel::Str(_)) => DataType::Utf8,
        Some(ClassLabel::Bool(_)) => DataType::Boolean,
        _ => DataType::Int64,
    }
}

/// The class label column of a batch of argmax class indices.
fn labels_array(model: &Model, best: &[usize]) -> ArrayRef {
    let class = |i: usize| {
        model
            .classes
            .as_ref()
            .map(|c| c[i].clone())
            .unwrap_or(ClassLabel::Int(i as i64))
    };
    match label_type(model) {
        DataType::Utf8 => Arc::new(StringArray::from_iter_values(
            best.iter().map(|&i| class(i).to_string()),
        )),
        DataType::Boolean => Arc::new(BooleanArray::from_iter(
            best.iter()
                .map(|&i| Some(matches!(class(i), ClassLabel::Bool(true)))),
        )),
        _ => Arc::new(Int64Array::from_iter_values(best.iter().map(
            |&i| match class(i) {
                ClassLabel::Int(v) => v,
                _ => i as i64,
            },
        ))),
    }
}

/// Runs `sapwood predict`.
pub fn run(a: PredictArgs) -> Result<()> {
    let booster = Booster::load(&a.model)?;
    let model = booster.model();
    let opts = ReadOptions {
        features: model.feature_names.clone(),
        categorical: categorical_features(model),
        keep: a.keep.clone(),
        ..Default::default()
    };
    let source = Source::open(&a.data, &opts)?;
    let objective = model.objective();
    let k = model.groups;
    let rounds = Some(a.rounds.unwrap_or_else(|| model.default_rounds()));
    let mut writer: Option<PredictionWriter> = None;
    let mut rows = 0usize;
    source.for_each(&opts, |t| {
        let margins = model.predict_margins(&t.features, rounds)?;
        let n = t.n_rows();
        let mut arrays: Vec<ArrayRef> = t.kept.iter().map(|(_, a)| a.clone()).collect();
        if writer.is_none() {
            let mut fields: Vec<(String, DataType)> = t
                .kept
                .iter()
                .map(|(n, a)| (n.clone(), a.data_type().clone()))
                .collect();
            fields.extend(output_fields(model, a.raw));
            writer = Some(PredictionWriter::create(&a.out, &fields)?);
        }
        if k == 1 {
            let v = if a.raw {
                margins
            } else {
                objective.transform(&margins)
            };
            arrays.push(Arc::new(Float32Array::from(v)));
        } else {
            let values = if a.raw {
                margins.clone()
            } else {
                objective.transform(&margins)
            };
            let best: Vec<usize> = margins.chunks_exact(k).map(sapwood::argmax).collect();
            arrays.push(labels_array(model, &best));
            for c in 0..k {
                arrays.push(Arc::new(Float32Array::from_iter_values(
                    (0..n).map(|i| values[i * k + c]),
                )));
            }
        }
        writer.as_mut().expect("created above").write(arrays)?;
        rows += n;
        Ok(())
    })?;
    let writer = match writer {
        Some(w) => w,
        // no rows: still write a file with the right columns
        None => {
            let kept: Vec<(String, DataType)> =
                a.keep.iter().map(|n| (n.clone(), DataType::Utf8)).collect();
            let mut fields = kept;
            fields.extend(output_fields(model, a.raw));
            PredictionWriter::create(&a.out, &fields)?
        }
    };
    writer.finish()?;
    let what = match (objective.kind(), a.raw) {
        (_, true) => "margins",
        (ObjectiveKind::SquaredError, _) => "values",
        (ObjectiveKind::Logistic, _) => "probabilities",
        (ObjectiveKind::Softprob, _) => "classes and probabilities",
    };
    eprintln!("wrote {what} for {rows} rows to {}", a.out.display());
    Ok(())
}
