//! `Dataset`: feature columns with an optional label, sample weights and base margin.

use sapwood_core::rank::Queries;
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

/// Feature columns plus, for training and evaluation, a label and optional weights; and
/// optionally each row's base margin.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset<'a> {
    pub(crate) features: FeatureMatrix<'a>,
    pub(crate) label: Option<Label>,
    pub(crate) weight: Option<Vec<f32>>,
    pub(crate) base_margin: Option<Vec<f32>>,
    pub(crate) queries: Option<Queries>,
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
            base_margin: None,
            queries: None,
        })
    }

    /// Sets (or with `None` removes) each row's base margin: one value per row, or for
    /// multiclass models one per row and class, row-major (XGBoost's `base_margin`,
    /// LightGBM's `init_score`). Training starts these rows' margins there instead of at
    /// the model's base margin (which is still estimated and saved); predicting on a dataset
    /// with one adds the trees to it instead of to the model's base margin. Every value must
    /// be finite; the length is checked against the model's outputs where it is used.
    pub fn set_base_margin(&mut self, margins: Option<Vec<f32>>) -> Result<()> {
        if let Some(m) = &margins {
            check_base_margin(m, self.n_rows(), None)?;
        }
        self.base_margin = margins;
        Ok(())
    }

    /// Sets the query each row belongs to, for ranking (XGBoost's `qid`): one id per row,
    /// the rows of a query contiguous (an error names the row where a query comes back).
    pub fn set_group(&mut self, qid: &[i64]) -> Result<()> {
        self.check_group_rows(qid.len())?;
        self.queries = Some(Queries::from_ids(qid, "qid")?);
        Ok(())
    }

    /// Sets the query groups by their sizes in row order (XGBoost's and LightGBM's `group`).
    pub fn set_group_sizes(&mut self, sizes: &[u32]) -> Result<()> {
        let q = Queries::from_sizes(sizes);
        self.check_group_rows(q.n_rows())?;
        self.queries = Some(q);
        Ok(())
    }

    fn check_group_rows(&self, got: usize) -> Result<()> {
        if got == self.n_rows() {
            Ok(())
        } else {
            Err(crate::Error::LengthMismatch {
                column: "group".into(),
                got,
                expected: self.n_rows(),
            })
        }
    }

    /// The query groups, if any (see [`Dataset::set_group`]).
    pub fn queries(&self) -> Option<&Queries> {
        self.queries.as_ref()
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

    /// Each row's base margin, if any (see [`Dataset::set_base_margin`]).
    pub fn base_margin(&self) -> Option<&[f32]> {
        self.base_margin.as_deref()
    }
}

/// Checks per-row base margins for `n` rows: `groups` per row when known (else a whole
/// number per row), every one finite; errors name the row (and group).
pub(crate) fn check_base_margin(margins: &[f32], n: usize, groups: Option<usize>) -> Result<()> {
    let k = match groups {
        Some(k) => k,
        None if n > 0 && !margins.is_empty() && margins.len().is_multiple_of(n) => {
            margins.len() / n
        }
        None => 1,
    };
    if margins.len() != n * k {
        return Err(crate::Error::param(
            "base_margin",
            format!(
                "{} values for {n} rows: give {k} per row (one per output{})",
                margins.len(),
                if k > 1 { ", row-major" } else { "" }
            ),
        ));
    }
    match margins.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(crate::Error::param(
            "base_margin",
            format!(
                "row {}{} is {}: base margins must be finite",
                i / k,
                if k > 1 {
                    format!(", group {}", i % k)
                } else {
                    String::new()
                },
                margins[i]
            ),
        )),
        None => Ok(()),
    }
}

/// Builds a [`Dataset`] column by column; [`DatasetBuilder::build`] checks everything.
#[derive(Debug, Default)]
pub struct DatasetBuilder<'a> {
    names: Vec<String>,
    columns: Vec<Column<'a>>,
    label: Option<Label>,
    weight: Option<Vec<f32>>,
    base_margin: Option<Vec<f32>>,
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

    /// Sets each row's base margin (see [`Dataset::set_base_margin`]).
    pub fn base_margin(mut self, margins: Vec<f32>) -> Self {
        self.base_margin = Some(margins);
        self
    }

    /// Checks names and lengths and returns the dataset.
    pub fn build(self) -> Result<Dataset<'a>> {
        let features = FeatureMatrix::new(self.names, self.columns)?;
        let mut d = Dataset::from_parts(features, self.label, self.weight)?;
        d.set_base_margin(self.base_margin)?;
        Ok(d)
    }
}
