//! `sapwood eval`: metrics of a model on labelled data.

use anyhow::{anyhow, Result};
use sapwood::{encode_labels_with, Booster, Label, Metric};
use sapwood_io::ReadOptions;

use super::categorical_features;
use crate::cli::EvalArgs;
use crate::input::{label_of, Source};
use crate::settings;

/// Runs `sapwood eval`.
pub fn run(a: EvalArgs) -> Result<()> {
    let booster = Booster::load(&a.model)?;
    let model = booster.model();
    let label_name = a
        .label
        .clone()
        .or_else(|| model.label_name.clone())
        .ok_or_else(|| {
            settings::Error(
                "--label is required: the model does not record its label column".into(),
            )
        })?;
    let metrics: Vec<Metric> = if a.metric.is_empty() {
        model.params.metrics()
    } else {
        a.metric
            .iter()
            .map(|m| m.parse())
            .collect::<Result<_, _>>()?
    };
    for m in &metrics {
        m.check_objective(model.params.objective)?;
    }
    let opts = ReadOptions {
        features: model.feature_names.clone(),
        categorical: categorical_features(model),
        label: Some(label_name.clone()),
        weight: a.weight.clone(),
        ..Default::default()
    };
    let source = Source::open(&a.data, &opts)?;
    let rounds = Some(a.rounds.unwrap_or_else(|| model.default_rounds()));
    let (mut margins, mut labels, mut weights) = (Vec::new(), Vec::new(), Vec::new());
    source.for_each(&opts, |t| {
        let first = labels.len();
        margins.extend(model.predict_margins(&t.features, rounds)?);
        let label: Label = label_of(
            t.label.ok_or_else(|| anyhow!("no label column"))?,
            first,
            &label_name,
        )?;
        labels.extend(encode_labels_with(
            model.params.objective,
            &label,
            model.classes.as_deref(),
        )?);
        weights.extend(t.weight.unwrap_or_default());
        Ok(())
    })?;
    if let Some(row) = labels.iter().position(|y: &f32| !y.is_finite()) {
        return Err(sapwood::Error::InvalidLabel {
            row,
            value: labels[row].to_string(),
            reason: "labels must be finite numbers".into(),
        }
        .into());
    }
    let w = (!weights.is_empty()).then_some(weights.as_slice());
    for m in metrics {
        println!("{m}: {:.6}", m.evaluate(&margins, model.groups, &labels, w));
    }
    Ok(())
}
