//! `NativeBooster`: a trained model; prediction, files, JSON and introspection.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sapwood::{Booster, ClassLabel, Importance, InputType, Output, PredictOptions};
use sapwood::{FeatureCuts, SplitRule};

use crate::data::NativeData;
use crate::errors::{guarded, Kind, OrRaise};

/// A trained (or loaded) model with its evaluation history.
#[pyclass(frozen, module = "sapwood._sapwood")]
pub struct NativeBooster {
    inner: Booster,
}

impl NativeBooster {
    /// Wraps an engine booster.
    pub fn new(inner: Booster) -> Self {
        NativeBooster { inner }
    }

    /// The engine's booster.
    pub fn engine(&self) -> &Booster {
        &self.inner
    }
}

fn class_to_py<'py>(py: Python<'py>, c: &ClassLabel) -> PyResult<Bound<'py, PyAny>> {
    Ok(match c {
        ClassLabel::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        ClassLabel::Int(i) => i.into_pyobject(py)?.into_any(),
        ClassLabel::Str(s) => s.into_pyobject(py)?.into_any(),
    })
}

#[pymethods]
impl NativeBooster {
    /// Predictions for `data`, row-major with the returned count of values per row, as
    /// float32. `output` is `value`, `margin`, `contributions`, `interactions` or `leaf`.
    /// Uses the first `rounds` rounds, by default all of them (or through the best
    /// iteration), on `threads` threads (0: every core).
    #[pyo3(signature = (data, output="value", rounds=None, threads=0))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        data: Bound<'py, NativeData>,
        output: &str,
        rounds: Option<usize>,
        threads: usize,
    ) -> PyResult<(Bound<'py, PyArray1<f32>>, usize)> {
        guarded(|| {
            let output = match output {
                "value" => Output::Value,
                "margin" => Output::Margin,
                "contributions" => Output::Contributions,
                "interactions" => Output::Interactions,
                "leaf" => Output::Leaf,
                other => {
                    return Err(Kind::Parameter.err(format!(
                        "invalid parameter `output`: `{other}` is not value, margin, \
                         contributions, interactions or leaf"
                    )))
                }
            };
            let native = data.get();
            let borrowed = native.borrow(py)?;
            let dataset = native.dataset(&borrowed)?;
            let opts = PredictOptions {
                output,
                rounds,
                threads,
            };
            let predictions = py
                .detach(|| crate::pool::install(|| self.inner.predict_with(&dataset, opts)))
                .or_raise()?;
            Ok((predictions.values.into_pyarray(py), predictions.per_row))
        })
    }

    /// The model as JSON text (identical models give identical text).
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// A booster from JSON text written by `to_json` or `save`.
    #[staticmethod]
    fn from_json(py: Python<'_>, text: &str) -> PyResult<NativeBooster> {
        guarded(|| {
            let inner = py.detach(|| Booster::from_json(text)).or_raise()?;
            Ok(NativeBooster { inner })
        })
    }

    /// Writes the model to `path` atomically (a failure leaves no partial file).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        guarded(|| py.detach(|| self.inner.save(&path)).or_raise())
    }

    /// Writes the model's first `rounds` rounds (default: the engine's, through the best
    /// round of early stopping) to `path` in another library's
    /// format (`xgboost`, `lightgbm` or `onnx`), atomically; an unknown format or a split the
    /// format cannot express is an error.
    #[pyo3(signature = (path, format, rounds=None))]
    fn export(
        &self,
        py: Python<'_>,
        path: PathBuf,
        format: &str,
        rounds: Option<usize>,
    ) -> PyResult<()> {
        guarded(|| {
            let format: sapwood::ExportFormat = format.parse().or_raise()?;
            py.detach(|| match rounds {
                Some(r) => self.inner.export_rounds(format, r, &path),
                None => self.inner.export(format, &path),
            })
            .or_raise()
        })
    }

    /// What each feature held in the training data (`number`, `bool`, `text` for
    /// categories that may be integers, `strings` for text, by feature), or None when the
    /// model does not record it.
    #[getter]
    fn input_types(&self) -> Option<Vec<&'static str>> {
        self.inner.model().input_types.as_ref().map(|t| {
            t.iter()
                .map(|t| match t {
                    InputType::Number => "number",
                    InputType::Bool => "bool",
                    InputType::Text => "text",
                    InputType::Strings => "strings",
                })
                .collect()
        })
    }

    /// The same model recording what each feature held in the training data (`number`,
    /// `bool`, `text` or `strings`, one per feature); anything else is an error.
    fn with_input_types(&self, types: Vec<String>) -> PyResult<NativeBooster> {
        guarded(|| {
            let parsed = types
                .iter()
                .map(|t| match t.as_str() {
                    "number" => Ok(InputType::Number),
                    "bool" => Ok(InputType::Bool),
                    "text" => Ok(InputType::Text),
                    "strings" => Ok(InputType::Strings),
                    other => Err(Kind::Parameter.err(format!(
                        "invalid parameter `input_types`: `{other}` is not number, bool, text \
                         or strings"
                    ))),
                })
                .collect::<PyResult<Vec<_>>>()?;
            let mut inner = self.inner.clone();
            inner.set_input_types(parsed).or_raise()?;
            Ok(NativeBooster { inner })
        })
    }

    /// Reads a model file.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<NativeBooster> {
        guarded(|| {
            let inner = py.detach(|| Booster::load(&path)).or_raise()?;
            Ok(NativeBooster { inner })
        })
    }

    /// Importance of each used feature by name, with XGBoost's kinds: `weight` (splits),
    /// `gain` (average), `total_gain`, `cover` (average), `total_cover`.
    fn feature_importance<'py>(
        &self,
        py: Python<'py>,
        importance_type: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kind = match importance_type {
            "weight" => Importance::Weight,
            "gain" => Importance::Gain,
            "total_gain" => Importance::TotalGain,
            "cover" => Importance::Cover,
            "total_cover" => Importance::TotalCover,
            other => {
                return Err(Kind::Parameter.err(format!(
                    "invalid parameter `importance_type`: `{other}` is not weight, gain, \
                     total_gain, cover or total_cover"
                )))
            }
        };
        let out = PyDict::new(py);
        for (name, value) in self.inner.feature_importance(kind) {
            out.set_item(name, value)?;
        }
        Ok(out)
    }

    /// Metrics after every round: one list of `(dataset, metric, value)` per round.
    #[getter]
    fn history(&self) -> Vec<Vec<(String, String, f64)>> {
        self.inner
            .history()
            .iter()
            .map(|round| {
                round
                    .iter()
                    .map(|m| (m.dataset.clone(), m.metric.to_string(), m.value))
                    .collect()
            })
            .collect()
    }

    /// The best round (0-based) chosen by early stopping, if any.
    #[getter]
    fn best_iteration(&self) -> Option<usize> {
        self.inner.best_iteration()
    }

    /// Bytes this worker exchanged in training: a dict with `bytes_sent`,
    /// `bytes_before_compression`, `allreduce_calls` (zeros for one worker),
    /// `device_encoded_blocks` (blocks a GPU backend encoded), `seconds` (wall time inside
    /// collective calls), and `per_round`, one such dict per round.
    #[getter]
    fn comm_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let to_dict = |c: sapwood::CommStats| -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            d.set_item("bytes_sent", c.bytes_sent)?;
            d.set_item("bytes_before_compression", c.bytes_uncompressed)?;
            d.set_item("allreduce_calls", c.allreduce_calls)?;
            d.set_item("device_encoded_blocks", c.device_encoded)?;
            d.set_item("seconds", c.busy_nanos as f64 * 1e-9)?;
            Ok(d)
        };
        let out = to_dict(self.inner.comm_stats())?;
        let rounds = self
            .inner
            .comm_history()
            .iter()
            .map(|&c| to_dict(c))
            .collect::<PyResult<Vec<_>>>()?;
        out.set_item("per_round", rounds)?;
        Ok(out)
    }

    /// What training actually used, as opposed to what it was asked for: a dict with
    /// `workers`, `threads_per_worker` (each worker's thread-pool size) and `backends` (the
    /// name of each worker's backend: "cpu", "wgpu: <adapter>", ...). Empty lists for a
    /// loaded model.
    #[getter]
    fn run_record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner.run_record();
        let d = PyDict::new(py);
        d.set_item("workers", r.workers())?;
        d.set_item("threads_per_worker", r.threads.clone())?;
        d.set_item("backends", r.backends.clone())?;
        Ok(d)
    }

    /// Trees in the model (rounds × groups).
    #[getter]
    fn num_trees(&self) -> usize {
        self.inner.num_trees()
    }

    /// Rounds trained.
    #[getter]
    fn num_rounds(&self) -> usize {
        self.inner.num_rounds()
    }

    /// Values per prediction row: the number of classes for multiclass, else 1.
    #[getter]
    fn groups(&self) -> usize {
        self.inner.model().groups
    }

    /// The objective's name (`reg:squarederror`, `binary:logistic`, `multi:softprob`).
    #[getter]
    fn objective(&self) -> &'static str {
        self.inner.model().params.objective.name()
    }

    /// Whether training stopped early because a callback asked it to.
    #[getter]
    fn interrupted(&self) -> bool {
        self.inner.interrupted()
    }

    /// Feature names, in training order.
    #[getter]
    fn feature_names(&self) -> Vec<String> {
        self.inner.model().feature_names.clone()
    }

    /// For each feature, its category levels if categorical, else None.
    #[getter]
    fn feature_levels(&self) -> Vec<Option<Vec<String>>> {
        self.inner
            .model()
            .cuts
            .features()
            .iter()
            .map(|f| match f {
                FeatureCuts::Categorical { levels, .. } => Some(levels.clone()),
                FeatureCuts::Numeric { .. } => None,
            })
            .collect()
    }

    /// A model of the rounds `start, start + step, ...` before `end` (their trees with the
    /// same base margin, cuts and parameters; no best iteration): XGBoost's
    /// `booster[start:end:step]`. The range must be within the rounds trained.
    #[pyo3(signature = (start, end, step=1))]
    fn slice(
        &self,
        py: Python<'_>,
        start: usize,
        end: usize,
        step: usize,
    ) -> PyResult<NativeBooster> {
        guarded(|| {
            let model = self.inner.model();
            let rounds = model.num_rounds();
            if step == 0 || start >= end || end > rounds {
                return Err(Kind::Parameter.err(format!(
                    "invalid parameter `iteration_range`: rounds [{start}, {end}) with step \
                     {step} are not a non-empty range within the {rounds} rounds trained"
                )));
            }
            let groups = model.groups.max(1);
            let mut sliced = model.clone();
            sliced.trees = (start..end)
                .step_by(step)
                .flat_map(|r| model.trees[r * groups..(r + 1) * groups].iter().cloned())
                .collect();
            sliced.best_iteration = None;
            sliced.params.num_rounds = sliced.trees.len() / groups;
            sliced.params.early_stopping_rounds = None;
            let text = sliced.to_json();
            let inner = py.detach(|| Booster::from_json(&text)).or_raise()?;
            Ok(NativeBooster { inner })
        })
    }

    /// The same model with `best` as its best iteration (0-based; None for none), for
    /// early stopping decided outside the engine (a custom metric's).
    fn with_best_iteration(&self, py: Python<'_>, best: Option<usize>) -> PyResult<NativeBooster> {
        guarded(|| {
            let rounds = self.inner.num_rounds();
            if best.is_some_and(|b| b >= rounds) {
                return Err(Kind::Parameter.err(format!(
                    "invalid parameter `best_iteration`: {} is not one of the {rounds} rounds \
                     trained",
                    best.unwrap_or_default()
                )));
            }
            let mut model = self.inner.model().clone();
            model.best_iteration = best;
            let text = model.to_json();
            let inner = py.detach(|| Booster::from_json(&text)).or_raise()?;
            Ok(NativeBooster { inner })
        })
    }

    /// Every node of every tree, column by column: `tree`, `node`, `feature` (index, -1 for a
    /// leaf), `threshold` (numeric splits send values `<=` it left; NaN otherwise),
    /// `categories` (the levels a categorical split sends left, else None), `left`, `right`
    /// (children, -1 for a leaf), `default_left` (where missing values go), `gain`, `cover`
    /// (hessian sum) and `value` (the leaf value, learning rate applied).
    fn tree_nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let model = self.inner.model();
        let cuts = model.cuts.features();
        let mut tree_ids = Vec::new();
        let mut node_ids = Vec::new();
        let mut feature = Vec::new();
        let mut threshold = Vec::new();
        let mut categories: Vec<Option<Vec<String>>> = Vec::new();
        let mut left = Vec::new();
        let mut right = Vec::new();
        let mut default_left = Vec::new();
        let mut gain = Vec::new();
        let mut cover = Vec::new();
        let mut value = Vec::new();
        for (t, tree) in model.trees.iter().enumerate() {
            for (i, node) in tree.nodes.iter().enumerate() {
                tree_ids.push(t);
                node_ids.push(i);
                cover.push(node.cover);
                value.push(f64::from(node.value));
                let Some(s) = &node.split else {
                    feature.push(-1i64);
                    threshold.push(f64::NAN);
                    categories.push(None);
                    left.push(-1i64);
                    right.push(-1i64);
                    default_left.push(false);
                    gain.push(0.0);
                    continue;
                };
                feature.push(s.feature as i64);
                left.push(i64::from(s.left.0));
                right.push(i64::from(s.right.0));
                default_left.push(s.default_left);
                gain.push(s.gain);
                match (&s.rule, &cuts[s.feature]) {
                    (SplitRule::Numeric { bin }, FeatureCuts::Numeric { thresholds }) => {
                        threshold.push(f64::from(FeatureCuts::split_threshold(thresholds, *bin)));
                        categories.push(None);
                    }
                    (
                        SplitRule::Categorical { left: set },
                        FeatureCuts::Categorical {
                            levels, level_bins, ..
                        },
                    ) => {
                        threshold.push(f64::NAN);
                        categories.push(Some(
                            levels
                                .iter()
                                .zip(level_bins)
                                .filter(|(_, &b)| set.contains(b))
                                .map(|(l, _)| l.clone())
                                .collect(),
                        ));
                    }
                    _ => {
                        return Err(Kind::Model.err(format!(
                            "invalid model: tree {t}, node {i}: the split does not match the \
                             kind of feature `{}`",
                            model.feature_names[s.feature]
                        )))
                    }
                }
            }
        }
        let out = PyDict::new(py);
        out.set_item("tree", tree_ids)?;
        out.set_item("node", node_ids)?;
        out.set_item("feature", feature)?;
        out.set_item("threshold", threshold)?;
        out.set_item("categories", categories)?;
        out.set_item("left", left)?;
        out.set_item("right", right)?;
        out.set_item("default_left", default_left)?;
        out.set_item("gain", gain)?;
        out.set_item("cover", cover)?;
        out.set_item("value", value)?;
        Ok(out)
    }

    /// Class labels of a classification model (bool, int or str), else None.
    #[getter]
    fn classes<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
        self.inner
            .classes()
            .map(|cs| cs.iter().map(|c| class_to_py(py, c)).collect())
            .transpose()
    }
}
