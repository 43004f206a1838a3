//! `Booster`: train, predict, save and load a model.

use std::collections::BTreeMap;
use std::path::Path;

use sapwood_core::collective::CommStats;
use sapwood_core::explain;
use sapwood_core::model::{ClassLabel, Model};
use sapwood_core::objective::ftz;
use sapwood_core::train::{self, EvalResult};

use crate::dataset::{check_base_margin, Dataset};
use crate::pool::in_pool;
use crate::{Error, Result};

/// What [`Booster::predict_with`] returns for each row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Output {
    /// Values, probabilities or class probabilities: one per output group (one class index
    /// per row for `multi:softmax`).
    #[default]
    Value,
    /// Raw margins: one per output group.
    Margin,
    /// SHAP contributions (XGBoost's `pred_contribs`): per output group, one per feature
    /// then the bias; each group's values sum to its margin.
    Contributions,
    /// SHAP interaction values (XGBoost's `pred_interactions`): per output group, a
    /// (features + 1)² matrix, row-major; row i sums to contribution i.
    Interactions,
    /// The leaf each tree sends the row to (XGBoost's `pred_leaf`): one per tree.
    Leaf,
}

/// Options for [`Booster::predict_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PredictOptions {
    /// What to return.
    pub output: Output,
    /// Use only the first `rounds` rounds; by default all rounds, or through the best
    /// iteration when early stopping chose one.
    pub rounds: Option<usize>,
    /// Threads to predict with; 0 (the default) for every core (rayon's global pool).
    pub threads: usize,
}

/// Predictions: `per_row` values for each row, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// Values, row-major.
    pub values: Vec<f32>,
    /// Values per row: the output groups (one for regression and binary tasks), or what
    /// [`Output`] says for explanations.
    pub per_row: usize,
}

impl Predictions {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.values.len() / self.per_row.max(1)
    }

    /// The values of row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.per_row..(i + 1) * self.per_row]
    }
}

/// How feature importance is measured, with XGBoost's names (LightGBM's `split` is
/// [`Importance::Weight`] and its `gain` is [`Importance::TotalGain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Importance {
    /// Number of splits on the feature (`weight`; LightGBM's `split`).
    Weight,
    /// Average loss reduction of the feature's splits (XGBoost's `gain`).
    Gain,
    /// Total loss reduction of the feature's splits (`total_gain`; LightGBM's `gain`).
    TotalGain,
    /// Average hessian of the rows the feature's splits route (`cover`).
    Cover,
    /// Total hessian of the rows the feature's splits route (`total_cover`).
    TotalCover,
}

/// What a training run actually used, as opposed to what it was asked for: settings that
/// never change the model can only be checked this way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// Each worker's thread-pool size (`rayon::current_num_threads()` inside it), by rank.
    pub threads: Vec<usize>,
    /// Each worker's traffic, by rank (this process's worker only for a distributed rank).
    pub comm: Vec<CommStats>,
    /// The name of every backend built (e.g. "cpu", `"wgpu: <adapter>"`), one per worker.
    pub backends: Vec<String>,
}

impl RunRecord {
    /// Workers that trained (in this process).
    pub fn workers(&self) -> usize {
        self.threads.len()
    }
}

/// A trained model with its evaluation history.
#[derive(Debug, Clone, PartialEq)]
pub struct Booster {
    model: Model,
    history: Vec<Vec<EvalResult>>,
    interrupted: bool,
    comm: CommStats,
    comm_rounds: Vec<CommStats>,
    record: RunRecord,
}

impl Booster {
    /// The booster of a finished run, with the classes its labels were encoded with.
    pub(crate) fn finish(
        trained: train::Trained,
        classes: Option<Vec<ClassLabel>>,
        record: RunRecord,
    ) -> Booster {
        let mut model = trained.model;
        model.classes = classes;
        if trained.interrupted {
            // record the rounds actually trained, so the saved parameters reproduce the model
            model.params.num_rounds = model.num_rounds();
        }
        Booster {
            model,
            history: trained.history,
            interrupted: trained.interrupted,
            comm: trained.comm,
            comm_rounds: trained.comm_rounds,
            record,
        }
    }

    /// Predictions for `data` (values, probabilities or class probabilities).
    pub fn predict(&self, data: &Dataset<'_>) -> Result<Predictions> {
        self.predict_with(data, PredictOptions::default())
    }

    /// Predictions with options (margins, number of rounds). When `data` carries base
    /// margins ([`Dataset::set_base_margin`]), each row's trees are added to its own base
    /// margin instead of the model's (and SHAP's bias moves by the difference).
    pub fn predict_with(&self, data: &Dataset<'_>, opts: PredictOptions) -> Result<Predictions> {
        if opts.threads == 0 {
            return self.predict_here(data, opts);
        }
        in_pool(opts.threads, || self.predict_here(data, opts)).map(|(p, _)| p)
    }

    /// [`Booster::predict_with`] in the current thread pool.
    fn predict_here(&self, data: &Dataset<'_>, opts: PredictOptions) -> Result<Predictions> {
        let m = &self.model;
        crate::schema::check_categorical_types(m, &data.features)?;
        let rounds = m.check_rounds(opts.rounds)?;
        let side = m.feature_names.len() + 1;
        let base = data.base_margin.as_deref();
        if let Some(b) = base {
            check_base_margin(b, data.n_rows(), Some(m.groups))?;
        }
        let (values, per_row) = match opts.output {
            Output::Value => match base {
                Some(b) => (
                    m.objective()
                        .transform(&self.margins_from(data, rounds, b)?),
                    m.objective().output_width(),
                ),
                None => (
                    m.predict(&data.features, Some(rounds))?,
                    m.objective().output_width(),
                ),
            },
            Output::Margin => match base {
                Some(b) => (self.margins_from(data, rounds, b)?, m.groups),
                None => (m.predict_margins(&data.features, Some(rounds))?, m.groups),
            },
            Output::Contributions => {
                let mut v = explain::contributions(m, &m.bin(&data.features)?, rounds);
                if let Some(b) = base {
                    self.move_bias(&mut v, b, side, side - 1);
                }
                (v.into_iter().map(|x| x as f32).collect(), m.groups * side)
            }
            Output::Interactions => {
                let mut v = explain::interactions(m, &m.bin(&data.features)?, rounds);
                if let Some(b) = base {
                    // the bias is entry (nf, nf) of each group's matrix
                    self.move_bias(&mut v, b, side * side, side * side - 1);
                }
                (
                    v.into_iter().map(|x| x as f32).collect(),
                    m.groups * side * side,
                )
            }
            Output::Leaf => {
                let v = explain::leaf_indices(m, &m.bin(&data.features)?, rounds);
                (v.into_iter().map(|x| x as f32).collect(), rounds * m.groups)
            }
        };
        Ok(Predictions { values, per_row })
    }

    /// Margins of `data` (`groups` per row) from each row's own base margin `base`: the
    /// trees are added in the order training added them, so a training row's prediction
    /// has the bits of its training margin.
    fn margins_from(&self, data: &Dataset<'_>, rounds: usize, base: &[f32]) -> Result<Vec<f32>> {
        self.predict_binned_from(&self.model.bin(&data.features)?, rounds, base)
    }

    /// Margins (`groups` per row) of rows binned with the model's cuts
    /// ([`Model::bin`]) using the first `rounds` rounds, starting from each row's own base
    /// margin `base` (`groups` per row, row-major) instead of the model's.
    pub fn predict_binned_from(
        &self,
        binned: &sapwood_core::data::BinnedMatrix,
        rounds: usize,
        base: &[f32],
    ) -> Result<Vec<f32>> {
        let m = &self.model;
        let k = m.groups.max(1);
        check_base_margin(base, binned.n_rows(), Some(k))?;
        let trees = &m.trees[..rounds.min(m.num_rounds()) * k];
        // training flushes subnormal starting margins too (every backend alike); the trees
        // are added a block of rows at a time, each row's in order, as from the model's base
        let mut out: Vec<f32> = base.iter().map(|&v| ftz(v)).collect();
        sapwood_core::predict::add_to_margins(binned, trees, k, &mut out);
        Ok(out)
    }

    /// Moves each row's SHAP bias (at `at` within each block of `block` values, one block
    /// per row and group) from the model's base margin to the row's own.
    fn move_bias(&self, values: &mut [f64], base: &[f32], block: usize, at: usize) {
        let model_base = &self.model.base_margin;
        let k = model_base.len().max(1);
        for (i, chunk) in values.chunks_mut(block).enumerate() {
            chunk[at] += base[i] as f64 - model_base[i % k] as f64;
        }
    }

    /// A binning pass with the model's cuts: data binned by it can continue the model
    /// ([`crate::TrainJob::continuing`] with [`crate::Rows::Binned`]).
    pub fn bin_pass(&self) -> crate::BinPass {
        crate::BinPass::with_cuts(self.model.feature_names.clone(), self.model.cuts.clone())
    }

    /// The most likely class of each row (classification models).
    pub fn predict_classes(&self, data: &Dataset<'_>) -> Result<Vec<ClassLabel>> {
        let classes = self
            .model
            .classes
            .as_ref()
            .ok_or_else(|| Error::param("objective", "the model has no classes"))?;
        let p = self.predict(data)?;
        Ok((0..p.n_rows())
            .map(|i| {
                let row = p.row(i);
                let c = if row.len() == 1 {
                    (row[0] > 0.5) as usize
                } else {
                    sapwood_core::metric::argmax(row)
                };
                classes[c].clone()
            })
            .collect())
    }

    /// The model as JSON text.
    pub fn to_json(&self) -> String {
        self.model.to_json()
    }

    /// A booster from JSON text; malformed models are errors.
    pub fn from_json(text: &str) -> Result<Booster> {
        Ok(Booster {
            model: Model::from_json(text)?,
            history: Vec::new(),
            interrupted: false,
            comm: CommStats::default(),
            comm_rounds: Vec::new(),
            record: RunRecord::default(),
        })
    }

    /// Writes the model to `path` through a temporary file, so a failure leaves nothing behind.
    /// Models holding non-finite numbers are refused: they could not be read back.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.model.check_finite().map_err(|e| match e {
            Error::InvalidModel(m) => {
                Error::InvalidModel(format!("{}: not saved: {m}", path.as_ref().display()))
            }
            e => e,
        })?;
        sapwood_core::files::write_atomic(path.as_ref(), self.to_json().as_bytes())
    }

    /// Records the name of the label column in the model (for `eval` and `inspect`).
    pub fn set_label_name(&mut self, name: impl Into<String>) {
        self.model.label_name = Some(name.into());
    }

    /// Records what each feature's values were in the training data (one per feature, in
    /// training order), saved with the model so that prediction can refuse a column whose
    /// type drifted (booleans where numbers were trained); a list of another length is an
    /// error.
    pub fn set_input_types(&mut self, types: Vec<sapwood_core::model::InputType>) -> Result<()> {
        if types.len() != self.model.feature_names.len() {
            return Err(Error::param(
                "input_types",
                format!(
                    "{} types for {} features",
                    types.len(),
                    self.model.feature_names.len()
                ),
            ));
        }
        self.model.input_types = Some(types);
        Ok(())
    }

    /// Reads a model written by [`Booster::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Booster> {
        sapwood_core::files::read_parsed(path.as_ref(), Self::from_json)
    }

    /// The underlying model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Rounds trained.
    pub fn num_rounds(&self) -> usize {
        self.model.num_rounds()
    }

    /// Trees in the model (rounds × groups).
    pub fn num_trees(&self) -> usize {
        self.model.trees.len()
    }

    /// Best round under early stopping.
    pub fn best_iteration(&self) -> Option<usize> {
        self.model.best_iteration
    }

    /// Metrics after every round.
    pub fn history(&self) -> &[Vec<EvalResult>] {
        &self.history
    }

    /// Whether the observer stopped training before the last round.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// Bytes exchanged between workers during training (zeros for one worker).
    pub fn comm_stats(&self) -> CommStats {
        self.comm
    }

    /// What the run actually used: pool sizes, workers, backends, traffic per worker (empty
    /// for a loaded model).
    pub fn run_record(&self) -> &RunRecord {
        &self.record
    }

    /// Bytes exchanged in each round (empty for a loaded model).
    pub fn comm_history(&self) -> &[CommStats] {
        &self.comm_rounds
    }

    /// Class labels of a classification model.
    pub fn classes(&self) -> Option<&[ClassLabel]> {
        self.model.classes.as_deref()
    }

    /// Importance of each feature that is used, by name.
    pub fn feature_importance(&self, kind: Importance) -> BTreeMap<String, f64> {
        // (splits, total gain, total cover) per feature
        let mut sums: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
        for tree in &self.model.trees {
            for node in &tree.nodes {
                if let Some(s) = &node.split {
                    let e = sums.entry(s.feature).or_default();
                    e.0 += 1.0;
                    e.1 += s.gain;
                    e.2 += node.cover;
                }
            }
        }
        sums.into_iter()
            .map(|(f, (n, gain, cover))| {
                let v = match kind {
                    Importance::Weight => n,
                    Importance::Gain => gain / n,
                    Importance::TotalGain => gain,
                    Importance::Cover => cover / n,
                    Importance::TotalCover => cover,
                };
                (self.model.feature_names[f].clone(), v)
            })
            .collect()
    }
}

/// A format [`Booster::export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// XGBoost JSON, loadable by `xgboost.Booster(model_file=...)`.
    XGBoost,
    /// LightGBM text, loadable by `lightgbm.Booster(model_file=...)`.
    LightGBM,
    /// ONNX protobuf (`ai.onnx.ml` TreeEnsembleRegressor), for `onnxruntime`; binary, so
    /// [`Booster::export_bytes`] rather than [`Booster::export_string`].
    Onnx,
}

impl std::str::FromStr for ExportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "xgboost" => Ok(ExportFormat::XGBoost),
            "lightgbm" => Ok(ExportFormat::LightGBM),
            "onnx" => Ok(ExportFormat::Onnx),
            _ => Err(Error::param(
                "format",
                format!("unknown export format `{s}`; expected xgboost, lightgbm or onnx"),
            )),
        }
    }
}

impl Booster {
    /// The model's text in `format` (XGBoost JSON or LightGBM text), of the rounds prediction
    /// uses by default (through early stopping's best round; see
    /// [`Booster::export_rounds`]). Every split is translated (see [`sapwood_core::export`]);
    /// a split the format cannot express is an error naming it, and ONNX, a binary format, is
    /// an error pointing to [`Booster::export_bytes`].
    pub fn export_string(&self, format: ExportFormat) -> Result<String> {
        self.export_string_of(format, self.model.default_rounds())
    }

    fn export_string_of(&self, format: ExportFormat, rounds: usize) -> Result<String> {
        let model = self.model.first_rounds(rounds);
        match format {
            ExportFormat::XGBoost => sapwood_core::export::xgboost::to_json(&model),
            ExportFormat::LightGBM => sapwood_core::export::lightgbm::to_text(&model),
            ExportFormat::Onnx => Err(Error::param(
                "format",
                "ONNX is a binary format: use Booster::export_bytes or Booster::export",
            )),
        }
    }

    /// The model's bytes in `format` (the text formats as UTF-8), of the rounds prediction
    /// uses by default; a split the format cannot express is an error naming the tree and node.
    pub fn export_bytes(&self, format: ExportFormat) -> Result<Vec<u8>> {
        self.export_bytes_of(format, self.model.default_rounds())
    }

    fn export_bytes_of(&self, format: ExportFormat, rounds: usize) -> Result<Vec<u8>> {
        match format {
            ExportFormat::Onnx => {
                sapwood_core::export::onnx::to_bytes(&self.model.first_rounds(rounds))
            }
            text => self.export_string_of(text, rounds).map(String::into_bytes),
        }
    }

    /// Writes the model in `format` to `path` atomically (nothing is written on error), with
    /// the rounds prediction uses by default: an early-stopped model exports through its best
    /// round, since the other libraries predict with every tree of the file.
    pub fn export(&self, format: ExportFormat, path: impl AsRef<Path>) -> Result<()> {
        self.export_rounds(format, self.model.default_rounds(), path)
    }

    /// [`Booster::export`] of the first `rounds` rounds (all of them when `rounds` is more
    /// than the model has); zero rounds is an error.
    pub fn export_rounds(
        &self,
        format: ExportFormat,
        rounds: usize,
        path: impl AsRef<Path>,
    ) -> Result<()> {
        let path = path.as_ref();
        if rounds == 0 {
            return Err(Error::param(
                "rounds",
                "0: export at least one round (omit it for the rounds prediction uses)",
            ));
        }
        let bytes = self.export_bytes_of(format, rounds)?;
        sapwood_core::files::write_atomic(path, &bytes)
    }
}
