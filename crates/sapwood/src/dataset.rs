//! `Dataset`: feature columns with an optional label and sample weights.

use std::borrow::Cow;

use sapwood_core::data::{Column, FeatureMatrix};
use sapwood_core::model::ClassLabel;

use crate::Result;

/// A label column: numbers, or class labels of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    /// Real values (regression), 0/1 or probabilities (binary), class indices (multiclass).
    Values(Vec<f32>),
    /// Class labels; classes are sorted and stored in the model.
    Classes(Vec<ClassLabel>),
}

impl Label {
    /// Rows.
    pub fn len(&self) -> usize {
        match self {
            Label::Values(v) => v.len(),
            Label::Classes(c) => c.len(),
        }
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Feature columns plus, for training and evaluation, a label and optional weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset<'a> {
    pub(crate) features: FeatureMatrix<'a>,
    pub(crate) label: Option<Label>,
    pub(crate) weight: Option<Vec<f32>>,
}

impl<'a> Dataset<'a> {
    /// A builder adding columns one by one.
    pub fn builder() -> DatasetBuilder<'a> {
        DatasetBuilder::default()
    }

    /// A dataset from a feature matrix, label and weights; lengths are checked.
    pub fn from_parts(
        features: FeatureMatrix<'a>,
        label: Option<Label>,
        weight: Option<Vec<f32>>,
    ) -> Result<Self> {
        let n = features.n_rows();
        if let Some(l) = &label {
            if l.len() != n {
                return Err(crate::Error::LengthMismatch {
                    column: "label".into(),
                    got: l.len(),
                    expected: n,
                });
            }
        }
        if let Some(w) = &weight {
            if w.len() != n {
                return Err(crate::Error::LengthMismatch {
                    column: "weight".into(),
                    got: w.len(),
                    expected: n,
                });
            }
        }
        Ok(Dataset {
            features,
            label,
            weight,
        })
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.features.n_rows()
    }

    /// Feature columns.
    pub fn features(&self) -> &FeatureMatrix<'a> {
        &self.features
    }

    /// The label, if any.
    pub fn label(&self) -> Option<&Label> {
        self.label.as_ref()
    }

    /// Sample weights, if any.
    pub fn weight(&self) -> Option<&[f32]> {
        self.weight.as_deref()
    }
}

/// Builds a [`Dataset`] column by column; [`DatasetBuilder::build`] checks everything.
#[derive(Debug, Default)]
pub struct DatasetBuilder<'a> {
    names: Vec<String>,
    columns: Vec<Column<'a>>,
    label: Option<Label>,
    weight: Option<Vec<f32>>,
}

impl<'a> DatasetBuilder<'a> {
    /// Adds a numeric feature (NaN is missing); borrowed slices are not copied.
    pub fn numeric(mut self, name: impl Into<String>, values: impl Into<Cow<'a, [f32]>>) -> Self {
        self.names.push(name.into());
        self.columns.push(Column::Numeric(values.into()));
        self
    }

    /// Adds a categorical feature from codes into `levels` (`MISSING_CATEGORY` is missing).
    pub fn categorical(
        mut self,
        name: impl Into<String>,
        codes: impl Into<Cow<'a, [u32]>>,
        levels: Vec<String>,
    ) -> Self {
        self.names.push(name.into());
        self.columns.push(Column::Categorical {
            codes: codes.into(),
            levels,
        });
        self
    }

    /// Adds a categorical feature from strings (None is missing); levels are sorted.
    pub fn categorical_strings<S: AsRef<str>>(
        self,
        name: impl Into<String>,
        values: &[Option<S>],
    ) -> Self {
        let mut levels: Vec<String> = values
            .iter()
            .flatten()
            .map(|s| s.as_ref().to_string())
            .collect();
        levels.sort();
        levels.dedup();
        let codes: Vec<u32> = values
            .iter()
            .map(|v| match v {
                Some(s) => levels
                    .binary_search_by(|l| l.as_str().cmp(s.as_ref()))
                    .unwrap() as u32,
                None => crate::MISSING_CATEGORY,
            })
            .collect();
        self.categorical(name, codes, levels)
    }

    /// Sets a numeric label.
    pub fn label(mut self, values: Vec<f32>) -> Self {
        self.label = Some(Label::Values(values));
        self
    }

    /// Sets class labels (strings, integers or booleans).
    pub fn class_labels(mut self, classes: Vec<ClassLabel>) -> Self {
        self.label = Some(Label::Classes(classes));
        self
    }

    /// Sets sample weights.
    pub fn weight(mut self, weights: Vec<f32>) -> Self {
        self.weight = Some(weights);
        self
    }

    /// Checks names and lengths and returns the dataset.
    pub fn build(self) -> Result<Dataset<'a>> {
        let features = FeatureMatrix::new(self.names, self.columns)?;
        Dataset::from_parts(features, self.label, self.weight)
    }
}
