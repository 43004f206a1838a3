//! The trained model and its versioned JSON format.
//!
//! Loading validates everything a hostile or truncated file could get wrong (indices, tree
//! shape, bins, lengths), so prediction can index without checks and never panics.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::data::binned::{BinnedMatrix, Binner};
use crate::data::cuts::{Cuts, FeatureCuts};
use crate::data::matrix::{Column, FeatureMatrix};
use crate::error::{Error, Result};
use crate::objective::Objective;
use crate::objective::ObjectiveKind;
use crate::params::Params;
use crate::split::{BinSet, SplitRule};
use crate::tree::{Node, NodeId, Split, Tree};

/// The format name written in every model file.
pub const FORMAT_NAME: &str = "sapwood-model";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A class label as it appeared in the training data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClassLabel {
    /// A boolean label.
    Bool(bool),
    /// An integer label.
    Int(i64),
    /// A string label.
    Str(String),
}

impl std::fmt::Display for ClassLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassLabel::Bool(b) => write!(f, "{b}"),
            ClassLabel::Int(i) => write!(f, "{i}"),
            ClassLabel::Str(s) => f.write_str(s),
        }
    }
}

/// A trained model: cuts, trees and what is needed to turn margins into outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The parameters it was trained with (without those that never change the model).
    pub params: Params,
    /// Output groups per row: classes for softmax, else 1.
    pub groups: usize,
    /// Class labels, index = class code, for classification.
    pub classes: Option<Vec<ClassLabel>>,
    /// Feature names, in training order.
    pub feature_names: Vec<String>,
    /// The cuts used for training.
    pub cuts: Cuts,
    /// Initial margin of each group.
    pub base_margin: Vec<f32>,
    /// Trees, round-major: tree `r * groups + k` is round r's tree for group k.
    pub trees: Vec<Tree>,
    /// The round with the best evaluation score when early stopping was used.
    pub best_iteration: Option<usize>,
    /// The name of the label column in the training data, when known.
    pub label_name: Option<String>,
    /// What each feature's values were in the training data, when the front end knew
    /// (by feature, in training order): prediction refuses a column of another type where
    /// the conversion would not be exact (booleans where numbers were trained).
    pub input_types: Option<Vec<InputType>>,
}

/// The type of a feature's values in the training data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// Numbers (integers or floats).
    Number,
    /// Booleans, read as 0 and 1.
    Bool,
    /// Categories whose levels may be integers (pandas' integer categories, a Parquet
    /// dictionary of integers), or text in models saved before [`InputType::Strings`]:
    /// exports write the levels as integers when every one reads as an integer.
    Text,
    /// Text, or categories of text: exports write the levels as text, whatever they look
    /// like (`"17"` stays a string, as the peers read the same column).
    Strings,
}

impl std::fmt::Display for InputType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InputType::Number => "numbers",
            InputType::Bool => "booleans",
            InputType::Text | InputType::Strings => "text",
        })
    }
}

#[derive(Serialize, Deserialize)]
struct FeatureFile {
    name: String,
    #[serde(flatten)]
    cuts: FeatureCuts,
}

#[derive(Serialize, Deserialize, Default)]
struct TreeFile {
    group: usize,
    left: Vec<i64>,
    right: Vec<i64>,
    feature: Vec<i64>,
    split_bin: Vec<u32>,
    default_left: Vec<bool>,
    /// (node, bins going left) for categorical splits
    categories: Vec<(u32, Vec<u32>)>,
    value: Vec<f32>,
    gain: Vec<f64>,
    cover: Vec<f64>,
}

#[derive(Serialize, Deserialize)]
struct ModelFile {
    format: String,
    version: u32,
    objective: ObjectiveKind,
    groups: usize,
    classes: Option<Vec<ClassLabel>>,
    base_margin: Vec<f32>,
    best_iteration: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input_types: Option<Vec<InputType>>,
    features: Vec<FeatureFile>,
    params: Params,
    trees: Vec<TreeFile>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidModel(msg.into())
}

fn tree_to_file(tree: &Tree, group: usize) -> TreeFile {
    let mut t = TreeFile {
        group,
        ..Default::default()
    };
    for (i, n) in tree.nodes.iter().enumerate() {
        t.value.push(n.value);
        t.cover.push(n.cover);
        match &n.split {
            None => {
                t.left.push(-1);
                t.right.push(-1);
                t.feature.push(-1);
                t.split_bin.push(0);
                t.default_left.push(false);
                t.gain.push(0.0);
            }
            Some(s) => {
                t.left.push(s.left.0 as i64);
                t.right.push(s.right.0 as i64);
                t.feature.push(s.feature as i64);
                t.default_left.push(s.default_left);
                t.gain.push(s.gain);
                match &s.rule {
                    SplitRule::Numeric { bin } => t.split_bin.push(*bin as u32),
                    SplitRule::Categorical { left } => {
                        t.split_bin.push(0);
                        t.categories
                            .push((i as u32, left.iter().map(u32::from).collect()));
                    }
                }
            }
        }
    }
    t
}

fn tree_from_file(t: TreeFile, cuts: &Cuts, index: usize) -> Result<Tree> {
    let n = t.value.len();
    let ctx = |msg: String| bad(format!("tree {index}: {msg}"));
    if n == 0 {
        return Err(ctx("has no nodes".into()));
    }
    for (name, len) in [
        ("left", t.left.len()),
        ("right", t.right.len()),
        ("feature", t.feature.len()),
        ("split_bin", t.split_bin.len()),
        ("default_left", t.default_left.len()),
        ("gain", t.gain.len()),
        ("cover", t.cover.len()),
    ] {
        if len != n {
            return Err(ctx(format!("`{name}` has {len} entries for {n} nodes")));
        }
    }
    let mut cats: HashMap<u32, Vec<u32>> = HashMap::new();
    for (node, bins) in t.categories {
        if cats.insert(node, bins).is_some() {
            return Err(ctx(format!("node {node} has two category sets")));
        }
    }
    let mut parents = vec![0u32; n];
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n {
        let (l, r) = (t.left[i], t.right[i]);
        let value = t.value[i];
        if !value.is_finite() || !t.cover[i].is_finite() {
            return Err(ctx(format!("node {i} has a non-finite value")));
        }
        let split = if l == -1 && r == -1 {
            if cats.contains_key(&(i as u32)) {
                return Err(ctx(format!("leaf {i} has a category set")));
            }
            None
        } else {
            for c in [l, r] {
                if c <= i as i64 || c >= n as i64 {
                    return Err(ctx(format!(
                        "node {i} has child {c} outside {}..{n}",
                        i + 1
                    )));
                }
                parents[c as usize] += 1;
            }
            if l == r {
                return Err(ctx(format!("node {i} has the same child twice")));
            }
            let f = t.feature[i];
            if f < 0 || f as usize >= cuts.n_features() {
                return Err(ctx(format!(
                    "node {i} splits on feature {f} of {}",
                    cuts.n_features()
                )));
            }
            let f = f as usize;
            let nb = cuts.feature(f).n_bins() as u32;
            let rule = match (cuts.feature(f), cats.remove(&(i as u32))) {
                (FeatureCuts::Numeric { .. }, None) => {
                    let b = t.split_bin[i];
                    if b == 0 || b >= nb {
                        return Err(ctx(format!("node {i} splits at bin {b} of {nb}")));
                    }
                    SplitRule::Numeric { bin: b as u16 }
                }
                (FeatureCuts::Categorical { .. }, Some(bins)) => {
                    if let Some(b) = bins.iter().find(|&&b| b == 0 || b >= nb) {
                        return Err(ctx(format!("node {i} sends bin {b} of {nb} left")));
                    }
                    SplitRule::Categorical {
                        left: BinSet::from_bins(bins.iter().map(|&b| b as u16)),
                    }
                }
                _ => {
                    return Err(ctx(format!(
                        "node {i}: split kind does not match feature {f}"
                    )))
                }
            };
            Some(Split {
                feature: f,
                rule,
                default_left: t.default_left[i],
                left: NodeId(l as u32),
                right: NodeId(r as u32),
                gain: t.gain[i],
            })
        };
        nodes.push(Node {
            split,
            value,
            cover: t.cover[i],
        });
    }
    if let Some(node) = cats.keys().next() {
        return Err(ctx(format!(
            "category set for node {node}, which is not a split"
        )));
    }
    if parents[0] != 0 || parents[1..].iter().any(|&p| p != 1) {
        return Err(ctx("nodes do not form a tree".into()));
    }
    Ok(Tree { nodes })
}

fn check_cuts(f: &FeatureFile) -> Result<()> {
    match f.cuts.problem() {
        Some(p) => Err(bad(format!("feature `{}`: {p}", f.name))),
        None => Ok(()),
    }
}

/// The columns of `data` named `names`, in that order, checked against the cuts' kinds.
pub fn select_columns<'a>(
    names: &[String],
    cuts: &Cuts,
    data: &'a FeatureMatrix<'_>,
) -> Result<FeatureMatrix<'a>> {
    let index: HashMap<&str, usize> = data
        .names()
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut columns = Vec::with_capacity(names.len());
    for (name, fc) in names.iter().zip(cuts.features()) {
        let &j = index
            .get(name.as_str())
            .ok_or_else(|| Error::SchemaMismatch(format!("column `{name}` is missing")))?;
        let col = match (data.column(j), fc) {
            (Column::Numeric(v), FeatureCuts::Numeric { .. }) => {
                Column::Numeric(Cow::Borrowed(&v[..]))
            }
            (Column::Categorical { codes, levels }, FeatureCuts::Categorical { .. }) => {
                Column::Categorical {
                    codes: Cow::Borrowed(&codes[..]),
                    levels: levels.clone(),
                }
            }
            (
                Column::Sparse {
                    len,
                    start,
                    rows,
                    values,
                },
                FeatureCuts::Numeric { .. },
            ) => Column::Sparse {
                len: *len,
                start: *start,
                rows: Cow::Borrowed(&rows[..]),
                values: Cow::Borrowed(&values[..]),
            },
            (Column::Numeric(_) | Column::Sparse { .. }, _) => {
                return Err(Error::SchemaMismatch(format!(
                    "column `{name}` is numeric but was categorical in training"
                )))
            }
            (Column::Categorical { .. }, _) => {
                return Err(Error::SchemaMismatch(format!(
                    "column `{name}` is categorical but was numeric in training"
                )))
            }
        };
        columns.push(col);
    }
    FeatureMatrix::new(names.to_vec(), columns)
}

impl Model {
    /// Completed rounds (trees per group).
    pub fn num_rounds(&self) -> usize {
        self.trees.len() / self.groups.max(1)
    }

    /// The objective.
    pub fn objective(&self) -> Objective {
        self.params
            .objective_with(self.groups)
            .expect("groups and constants validated")
    }

    /// Refuses a model holding a non-finite number (JSON would write `null`, which no
    /// reader accepts back): base margins, leaf values, covers and gains.
    pub fn check_finite(&self) -> Result<()> {
        if let Some(m) = self.base_margin.iter().find(|m| !m.is_finite()) {
            return Err(bad(format!("base_margin holds {m}")));
        }
        for (t, tree) in self.trees.iter().enumerate() {
            for (i, n) in tree.nodes.iter().enumerate() {
                let gain = n.split.as_ref().map_or(0.0, |s| s.gain);
                if !(n.value.is_finite() && n.cover.is_finite() && gain.is_finite()) {
                    return Err(bad(format!(
                        "tree {t} (round {}), node {i}: value {}, cover {}, gain {gain}: \
                         models with non-finite numbers are not saved",
                        t / self.groups.max(1),
                        n.value,
                        n.cover
                    )));
                }
            }
        }
        Ok(())
    }

    /// The model as JSON text (deterministic: identical models give identical bytes).
    pub fn to_json(&self) -> String {
        let file = ModelFile {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            objective: self.params.objective,
            groups: self.groups,
            classes: self.classes.clone(),
            base_margin: self.base_margin.clone(),
            best_iteration: self.best_iteration,
            label_name: self.label_name.clone(),
            input_types: self.input_types.clone(),
            features: self
                .feature_names
                .iter()
                .zip(self.cuts.features())
                .map(|(name, cuts)| FeatureFile {
                    name: name.clone(),
                    cuts: cuts.clone(),
                })
                .collect(),
            params: self.params.clone(),
            trees: self
                .trees
                .iter()
                .enumerate()
                .map(|(i, t)| tree_to_file(t, i % self.groups))
                .collect(),
        };
        serde_json::to_string(&file).expect("models always serialise")
    }

    /// Parses and validates a model; anything malformed is an error naming what is wrong.
    pub fn from_json(text: &str) -> Result<Self> {
        let file: ModelFile =
            serde_json::from_str(text).map_err(|e| bad(format!("not a Sapwood model: {e}")))?;
        if file.format != FORMAT_NAME {
            return Err(bad(format!(
                "format is `{}`, expected `{FORMAT_NAME}`",
                file.format
            )));
        }
        if file.version != FORMAT_VERSION {
            return Err(bad(format!(
                "format version {} is not supported (this build reads {FORMAT_VERSION})",
                file.version
            )));
        }
        if file.params.objective != file.objective {
            return Err(bad("objective disagrees with params"));
        }
        let groups = file.groups;
        match file.objective {
            k if k.is_multiclass() && groups < 2 => {
                return Err(bad(format!("{k} needs groups >= 2")))
            }
            k if k.is_multiclass() => {}
            ObjectiveKind::QuantileError if groups != file.params.quantile_alpha.len() => {
                return Err(bad(format!(
                    "reg:quantileerror has one group per quantile_alpha ({}), not {groups}",
                    file.params.quantile_alpha.len()
                )))
            }
            ObjectiveKind::QuantileError | ObjectiveKind::Custom => {}
            _ if groups != 1 => {
                return Err(bad(format!("{} has 1 group, not {groups}", file.objective)))
            }
            _ => {}
        }
        if let Err(e) = file.params.objective_params().validate(file.objective) {
            return Err(bad(e.to_string()));
        }
        if file.base_margin.len() != groups || file.base_margin.iter().any(|m| !m.is_finite()) {
            return Err(bad("base_margin must hold one finite value per group"));
        }
        if file.features.is_empty() {
            return Err(bad("no features"));
        }
        for f in &file.features {
            check_cuts(f)?;
        }
        if !file.trees.len().is_multiple_of(groups) {
            return Err(bad(format!(
                "{} trees is not a multiple of {groups} groups",
                file.trees.len()
            )));
        }
        let rounds = file.trees.len() / groups;
        if let Some(t) = &file.input_types {
            if t.len() != file.features.len() {
                return Err(bad(format!(
                    "{} input types for {} features",
                    t.len(),
                    file.features.len()
                )));
            }
        }
        if let Some(b) = file.best_iteration {
            if b >= rounds {
                return Err(bad(format!("best_iteration {b} but only {rounds} rounds")));
            }
        }
        if let Some(c) = &file.classes {
            let want = if file.objective.is_multiclass() {
                groups
            } else {
                2
            };
            if c.len() != want {
                return Err(bad(format!("{} classes for {want} expected", c.len())));
            }
            // labels are encoded by binary search, and each class names an output column
            if let Some(w) = c.windows(2).find(|w| w[0] >= w[1]) {
                return Err(bad(format!(
                    "classes must be sorted and distinct, but `{}` comes before `{}`",
                    w[0], w[1]
                )));
            }
        }
        let feature_names: Vec<String> = file.features.iter().map(|f| f.name.clone()).collect();
        let cuts = Cuts::new(file.features.into_iter().map(|f| f.cuts).collect());
        let trees = file
            .trees
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                if t.group != i % groups {
                    return Err(bad(format!(
                        "tree {i} is for group {} but should be {}",
                        t.group,
                        i % groups
                    )));
                }
                tree_from_file(t, &cuts, i)
            })
            .collect::<Result<Vec<_>>>()?;
        file.params
            .validate()
            .map_err(|e| bad(format!("params: {e}")))?;
        Ok(Model {
            params: file.params,
            groups,
            classes: file.classes,
            feature_names,
            cuts,
            base_margin: file.base_margin,
            trees,
            best_iteration: file.best_iteration,
            label_name: file.label_name,
            input_types: file.input_types,
        })
    }

    /// Bins `data` with the model's cuts, matching columns by name; extra columns are
    /// ignored and categorical levels are matched by name (unseen levels are missing).
    pub fn bin(&self, data: &FeatureMatrix<'_>) -> Result<BinnedMatrix> {
        select_columns(&self.feature_names, &self.cuts, data)
            .and_then(|m| BinnedMatrix::new(&m, &self.cuts))
    }

    /// Rounds used by default: through the best iteration when early stopping chose one.
    pub fn default_rounds(&self) -> usize {
        self.best_iteration.map_or(self.num_rounds(), |b| b + 1)
    }

    /// The model of its first `rounds` rounds (all of them when `rounds` is more), as
    /// exporters write it: other libraries predict with every tree of a file.
    pub fn first_rounds(&self, rounds: usize) -> Model {
        let rounds = rounds.min(self.num_rounds());
        let mut m = self.clone();
        m.trees.truncate(rounds * self.groups);
        m.best_iteration = self.best_iteration.filter(|&b| b < rounds);
        m
    }

    /// Margins (`groups` per row) of binned rows using the first `rounds` rounds.
    pub fn predict_binned(&self, binned: &BinnedMatrix, rounds: usize) -> Vec<f32> {
        let (trees, mut out) = self.prediction_start(binned.n_rows(), rounds);
        crate::predict::add_to_margins(binned, trees, self.groups, &mut out);
        out
    }

    /// The trees of the first `rounds` rounds, and `n_rows` rows of the model's base
    /// margins for them to be added to.
    fn prediction_start(&self, n_rows: usize, rounds: usize) -> (&[Tree], Vec<f32>) {
        let trees = &self.trees[..rounds.min(self.num_rounds()) * self.groups];
        let start = (0..n_rows)
            .flat_map(|_| self.base_margin.iter().copied())
            .collect();
        (trees, start)
    }

    /// Margins of `data` (`groups` per row), using `rounds` rounds or the default.
    pub fn predict_margins(
        &self,
        data: &FeatureMatrix<'_>,
        rounds: Option<usize>,
    ) -> Result<Vec<f32>> {
        let rounds = self.check_rounds(rounds)?;
        let selected = select_columns(&self.feature_names, &self.cuts, data)?;
        let binner = Binner::new(&selected, &self.cuts)?;
        let (trees, mut out) = self.prediction_start(binner.n_rows(), rounds);
        crate::predict::add_raw_to_margins(&binner, trees, self.groups, &mut out);
        Ok(out)
    }

    /// Outputs of `data`: values, probabilities, or class probabilities (`groups` per row).
    pub fn predict(&self, data: &FeatureMatrix<'_>, rounds: Option<usize>) -> Result<Vec<f32>> {
        Ok(self
            .objective()
            .transform(&self.predict_margins(data, rounds)?))
    }

    /// The rounds a prediction uses: `rounds`, or the default; 0 or more than the model has
    /// is an error.
    pub fn check_rounds(&self, rounds: Option<usize>) -> Result<usize> {
        match rounds {
            None => Ok(self.default_rounds()),
            Some(0) => Err(Error::param(
                "iteration_range",
                "0 rounds asked: use at least 1 (or none for the default)",
            )),
            Some(r) if r <= self.num_rounds() => Ok(r),
            Some(r) => Err(Error::param(
                "iteration_range",
                format!("{r} rounds asked but the model has {}", self.num_rounds()),
            )),
        }
    }
}
