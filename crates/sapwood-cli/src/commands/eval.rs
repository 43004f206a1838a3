//! `sapwood eval`: metrics of a model on labelled data.

use std::io::Write;

use anyhow::{anyhow, Context, Result};
use sapwood::{encode_labels_with, Booster, ClassLabel, Column, Label, Metric, Model, Queries};
use sapwood_io::{LabelColumn, ReadOptions};

use super::{categorical_features, check_categorical_types, check_rounds};
use crate::cli::EvalArgs;
use crate::input::{check_unique_columns, label_of, query_ids_of, Source};
use crate::settings;

/// A label column that the model also uses as a feature, taken from its feature column (a
/// reader gives every column one role): numbers stay numbers; text stays text unless the
/// model's classes are numbers and every level is one.
fn label_from_feature(model: &Model, col: &Column<'_>) -> LabelColumn {
    match col {
        Column::Numeric(v) => LabelColumn::Numeric(v.to_vec()),
        Column::Sparse { .. } => {
            LabelColumn::Numeric(col.dense_values().map_or_else(Vec::new, |v| v.into_owned()))
        }
        Column::Categorical { codes, levels } => {
            let text_classes = model
                .classes
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| matches!(c, ClassLabel::Str(_))));
            let numbers: Option<Vec<f32>> = levels.iter().map(|l| l.trim().parse().ok()).collect();
            match numbers {
                Some(n) if !text_classes => LabelColumn::Numeric(
                    codes
                        .iter()
                        .map(|&c| n.get(c as usize).copied().unwrap_or(f32::NAN))
                        .collect(),
                ),
                _ => LabelColumn::Strings(
                    codes
                        .iter()
                        .map(|&c| levels.get(c as usize).cloned())
                        .collect(),
                ),
            }
        }
    }
}

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
    let rounds = check_rounds(a.rounds, model)?;
    let label_is_feature = model.feature_names.contains(&label_name);
    if a.weight
        .as_ref()
        .is_some_and(|w| model.feature_names.contains(w))
    {
        return Err(settings::Error(format!(
            "--weight {}: that column is one of the model's features",
            a.weight.as_deref().unwrap_or_default()
        ))
        .into());
    }
    let opts = ReadOptions {
        features: model.feature_names.clone(),
        categorical: categorical_features(model),
        label: (!label_is_feature).then(|| label_name.clone()),
        weight: a.weight.clone(),
        keep: a.group.iter().cloned().collect(),
        ..Default::default()
    };
    if let Some(g) = &a.group {
        if model.feature_names.contains(g) {
            return Err(settings::Error(format!(
                "--group {g}: that column is one of the model's features"
            ))
            .into());
        }
    }
    let source = Source::open(&a.data, &opts)?;
    crate::input::check_input_types(&a.data, &source, model)?;
    let mut roles = vec![("label", label_name.as_str())];
    if let Some(w) = &a.weight {
        roles.push(("weight", w.as_str()));
    }
    if let Some(g) = &a.group {
        roles.push(("group", g.as_str()));
    }
    check_unique_columns(&a.data, &source, &roles)?;
    let (mut margins, mut labels, mut weights) = (Vec::new(), Vec::new(), Vec::new());
    let (mut query_ids, mut query_names) = (Vec::new(), std::collections::HashMap::new());
    let label_context = || format!("{}: label column `{label_name}`", a.data.display());
    source.for_each(&opts, |t| {
        check_categorical_types(model, &t.features, &a.data)?;
        let first = labels.len();
        margins.extend(model.predict_margins(&t.features, rounds)?);
        let col = if label_is_feature {
            let j = t
                .features
                .names()
                .iter()
                .position(|n| *n == label_name)
                .ok_or_else(|| anyhow!("{}: no column `{label_name}`", a.data.display()))?;
            label_from_feature(model, t.features.column(j))
        } else {
            t.label.ok_or_else(|| anyhow!("no label column"))?
        };
        let label: Label = label_of(col, first, &label_name).with_context(label_context)?;
        let encoded = encode_labels_with(model.params.objective, &label, model.classes.as_deref())
            .map_err(|e| match e {
                sapwood::Error::InvalidLabel { row, value, reason } => {
                    sapwood::Error::InvalidLabel {
                        row: first + row,
                        value,
                        reason,
                    }
                }
                e => e,
            })
            .with_context(label_context)?;
        labels.extend(encoded);
        if let Some(g) = &a.group {
            query_ids.extend(query_ids_of(&t.kept, g, first, &a.data, &mut query_names)?);
        }
        weights.extend(t.weight.unwrap_or_default());
        Ok(())
    })?;
    check_read(&a, &label_name, &labels, &weights)?;
    let w = (!weights.is_empty()).then_some(weights.as_slice());
    let mut out = std::io::stdout().lock();
    // metrics see what training reported: predictions under a log link, margins otherwise
    let objective = model.objective();
    // a ranking model's table of gains has no gain for other labels: name the row, as
    // training does, rather than score it as gain 0
    if model.params.objective.is_ranking() && !model.params.label_gain.is_empty() {
        for (row, &y) in labels.iter().enumerate() {
            objective
                .check_label(row, y)
                .with_context(|| format!("{}: label column `{label_name}`", a.data.display()))?;
        }
    }
    let queries = match &a.group {
        Some(g) => Some(
            Queries::from_ids(&query_ids, g)
                .with_context(|| format!("{}: group column `{g}`", a.data.display()))?,
        ),
        None => None,
    };
    for m in metrics {
        writeln!(
            out,
            "{m}: {:.6}",
            m.evaluate_on(&objective, &margins, &labels, w, queries.as_ref())
        )?;
    }
    Ok(())
}

/// Checks what was read before any metric: some rows, finite labels, valid weights (the
/// error names the file, the column and the row).
fn check_read(a: &EvalArgs, label_name: &str, labels: &[f32], weights: &[f32]) -> Result<()> {
    if labels.is_empty() {
        return Err(sapwood::Error::EmptyData(format!(
            "{}: no rows to evaluate",
            a.data.display()
        ))
        .into());
    }
    if let Some(row) = labels.iter().position(|y: &f32| !y.is_finite()) {
        return Err(anyhow::Error::new(sapwood::Error::InvalidLabel {
            row,
            value: labels[row].to_string(),
            reason: "labels must be finite numbers".into(),
        })
        .context(format!("{}: label column `{label_name}`", a.data.display())));
    }
    if let Some(row) = weights
        .iter()
        .position(|w: &f32| !(w.is_finite() && *w >= 0.0))
    {
        return Err(anyhow::Error::new(sapwood::Error::InvalidWeight {
            row,
            value: weights[row],
        })
        .context(format!(
            "{}: weight column `{}`",
            a.data.display(),
            a.weight.as_deref().unwrap_or_default()
        )));
    }
    Ok(())
}
