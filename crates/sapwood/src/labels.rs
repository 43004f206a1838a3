//! Labels to the numbers an objective trains on, and the classes kept in the model.

use sapwood_core::model::ClassLabel;
use sapwood_core::objective::ObjectiveKind;

use crate::dataset::Label;
use crate::{Error, Result};

/// Labels ready for training: values or class codes, with the sorted classes if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// Values, or class codes indexing `classes`.
    pub values: Vec<f32>,
    /// The sorted classes of a classification task.
    pub classes: Option<Vec<ClassLabel>>,
}

fn class_of_value(row: usize, v: f32) -> Result<ClassLabel> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < (1 << 24) as f32 {
        Ok(ClassLabel::Int(v as i64))
    } else {
        Err(Error::InvalidLabel {
            row,
            value: v.to_string(),
            reason: "class labels must be integers".into(),
        })
    }
}

/// Encodes training labels for `objective`: class labels become codes of the sorted classes.
pub fn encode(objective: ObjectiveKind, label: &Label) -> Result<Encoded> {
    match (objective, label) {
        (k, Label::Values(v)) if !k.is_classification() => Ok(Encoded {
            values: v.clone(),
            classes: None,
        }),
        (k, Label::Classes(_)) if !k.is_classification() => Err(Error::InvalidLabel {
            row: 0,
            value: "a class label".into(),
            reason: format!("{k} needs numeric labels"),
        }),
        (k, Label::Values(v)) if k.is_binary() => {
            // 0/1 labels are classes; fractional ones are probabilities
            let binary = v.iter().all(|&y| y == 0.0 || y == 1.0);
            Ok(Encoded {
                values: v.clone(),
                classes: binary.then(|| vec![ClassLabel::Int(0), ClassLabel::Int(1)]),
            })
        }
        (kind, label) => {
            let labels: Vec<ClassLabel> = match label {
                Label::Classes(c) => c.clone(),
                Label::Values(v) => v
                    .iter()
                    .enumerate()
                    .map(|(i, &y)| class_of_value(i, y))
                    .collect::<Result<_>>()?,
            };
            let mut classes = labels.clone();
            classes.sort();
            classes.dedup();
            check_class_count(kind, &classes)?;
            let values = labels
                .iter()
                .map(|l| classes.binary_search(l).unwrap() as f32)
                .collect();
            Ok(Encoded {
                values,
                classes: Some(classes),
            })
        }
    }
}

/// Encodes evaluation labels with the classes found in training.
pub fn encode_with(
    objective: ObjectiveKind,
    label: &Label,
    classes: Option<&[ClassLabel]>,
) -> Result<Vec<f32>> {
    let Some(classes) = classes else {
        return match label {
            Label::Values(v) => Ok(v.clone()),
            Label::Classes(_) => encode(objective, label).map(|e| e.values),
        };
    };
    let as_class = |i: usize, l: ClassLabel| -> Result<f32> {
        classes
            .binary_search(&l)
            .map(|c| c as f32)
            .map_err(|_| Error::InvalidLabel {
                row: i,
                value: l.to_string(),
                reason: "this class was not in the training labels".into(),
            })
    };
    match label {
        Label::Classes(c) => c
            .iter()
            .enumerate()
            .map(|(i, l)| as_class(i, l.clone()))
            .collect(),
        Label::Values(v) => v
            .iter()
            .enumerate()
            .map(|(i, &y)| {
                if objective.is_binary() && (y == 0.0 || y == 1.0) {
                    Ok(y)
                } else {
                    as_class(i, class_of_value(i, y)?)
                }
            })
            .collect(),
    }
}

/// The classes over every worker's labels (None for regression or probability labels), so
/// that workers holding different subsets of classes encode them alike.
pub fn global_classes(
    objective: ObjectiveKind,
    label: &Label,
    collective: &mut dyn sapwood_core::collective::Collective,
) -> Result<Option<Vec<ClassLabel>>> {
    // local distinct classes, or None where the labels are not classes
    let local: Option<Vec<ClassLabel>> = match (objective, label) {
        (k, _) if !k.is_classification() => None,
        (k, Label::Values(v)) if k.is_binary() && !v.iter().all(|&y| y == 0.0 || y == 1.0) => None,
        (_, Label::Values(v)) => {
            let mut c: Vec<ClassLabel> = v
                .iter()
                .enumerate()
                .map(|(i, &y)| class_of_value(i, y))
                .collect::<Result<_>>()?;
            c.sort();
            c.dedup();
            Some(c)
        }
        (_, Label::Classes(c)) => {
            let mut c = c.clone();
            c.sort();
            c.dedup();
            Some(c)
        }
    };
    let bytes = serde_json::to_vec(&local).expect("labels serialise");
    let mut all: Option<Vec<ClassLabel>> = Some(Vec::new());
    for part in collective.allgather(&bytes)? {
        let part: Option<Vec<ClassLabel>> = serde_json::from_slice(&part)
            .map_err(|e| Error::Collective(format!("a worker sent malformed classes: {e}")))?;
        all = match (all, part) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            _ => None,
        };
    }
    let Some(mut classes) = all else {
        return Ok(None);
    };
    if !objective.is_classification() {
        return Ok(None);
    }
    classes.sort();
    classes.dedup();
    if objective.is_binary() && classes.iter().all(|c| matches!(c, ClassLabel::Int(0 | 1))) {
        return Ok(Some(vec![ClassLabel::Int(0), ClassLabel::Int(1)]));
    }
    check_class_count(objective, &classes)?;
    Ok(Some(classes))
}

/// Refuses a label with fewer than two classes, or more than two for a binary objective:
/// a fact of the whole column, so the error names the classes, not a row.
fn check_class_count(objective: ObjectiveKind, classes: &[ClassLabel]) -> Result<()> {
    let listed = || {
        let shown: Vec<String> = classes.iter().take(5).map(|c| format!("`{c}`")).collect();
        let more = if classes.len() > 5 { ", ..." } else { "" };
        format!("{}{more}", shown.join(", "))
    };
    if classes.len() < 2 {
        return Err(Error::param(
            "objective",
            format!(
                "{objective} needs at least two classes, but the label has {} ({})",
                classes.len(),
                if classes.is_empty() {
                    "no values".into()
                } else {
                    listed()
                }
            ),
        ));
    }
    if objective.is_binary() && classes.len() > 2 {
        return Err(Error::param(
            "objective",
            format!(
                "{objective} needs exactly two classes, but the label has {} ({}); use \
                 multi:softprob",
                classes.len(),
                listed()
            ),
        ));
    }
    Ok(())
}
