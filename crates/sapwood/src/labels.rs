//! Labels to the numbers an objective trains on, and the classes kept in the model.

use sapwood_core::model::ClassLabel;
use sapwood_core::params::ObjectiveKind;

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
        (ObjectiveKind::SquaredError, Label::Values(v)) => Ok(Encoded {
            values: v.clone(),
            classes: None,
        }),
        (ObjectiveKind::SquaredError, Label::Classes(_)) => Err(Error::InvalidLabel {
            row: 0,
            value: "a class label".into(),
            reason: "reg:squarederror needs numeric labels".into(),
        }),
        (ObjectiveKind::Logistic, Label::Values(v)) => {
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
            if classes.len() < 2 {
                return Err(Error::InvalidLabel {
                    row: 0,
                    value: classes.first().map_or("nothing".into(), |c| c.to_string()),
                    reason: format!("{kind} needs at least two classes, found {}", classes.len()),
                });
            }
            if kind == ObjectiveKind::Logistic && classes.len() > 2 {
                return Err(Error::InvalidLabel {
                    row: 0,
                    value: format!("{} classes", classes.len()),
                    reason: "binary:logistic needs exactly two classes; use multi:softprob".into(),
                });
            }
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
                if objective == ObjectiveKind::Logistic && (y == 0.0 || y == 1.0) {
                    Ok(y)
                } else {
                    as_class(i, class_of_value(i, y)?)
                }
            })
            .collect(),
    }
}
