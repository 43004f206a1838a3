//! Checkpoints: the state of a run at the end of a round, enough to continue to the same
//! model bytes as a run that was never stopped.
//!
//! Nothing random is stateful (every random choice is a hash of the seed, the tree and the
//! global row), and margins are the base margin plus the trees' leaves added in tree order,
//! so the trees, early stopping's best round and the metric history are the whole state:
//! resuming replays the trees into the backend's and the evaluation sets' margins with the
//! same additions training made.

use std::path::Path;

use serde_json::{json, Value};

use crate::collective::Collective;
use crate::data::binned::{HeldRows, RowMajor};
use crate::data::cuts::Cuts;
use crate::error::{Error, Result};
use crate::metric::EvalResult;
use crate::metric::Metric;
use crate::model::Model;
use crate::params::{Checked, Params};

/// A run's state at the end of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The model so far: the job's parameters, cuts and base margin, and the trees of every
    /// round trained (no best iteration yet).
    pub model: Model,
    /// Rounds trained.
    pub rounds: usize,
    /// Early stopping's best (round, value) so far.
    pub best: Option<(usize, f64)>,
    /// Every round's metrics so far.
    pub history: Vec<Vec<EvalResult>>,
    /// [`data_digest`] of the training rows it was trained on; None for a checkpoint of an
    /// earlier version (or a saved model seen as one), whose data cannot be checked.
    pub data: Option<u64>,
}

const FORMAT: &str = "sapwood-checkpoint";
/// 2: the data digest and the integrity digest. Version 1 files still load (unchecked).
const VERSION: u64 = 2;

/// A 64-bit FNV-1a hash of `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// The integrity digest of a checkpoint's JSON without its `integrity` field.
fn integrity_of(v: &Value) -> String {
    format!("{:016x}", fnv(FNV_START, v.to_string().as_bytes()))
}

/// A training row's part of [`data_digest`].
pub struct DigestRows<'a> {
    /// The rows' bins (the cuts are compared separately).
    pub binned: &'a crate::data::binned::BinnedMatrix,
    /// Labels.
    pub labels: &'a [f32],
    /// Sample weights.
    pub weights: Option<&'a [f32]>,
    /// The rows' own base margins, `groups` per row.
    pub margins: Option<&'a [f32]>,
    /// Query groups.
    pub queries: Option<&'a crate::rank::Queries>,
    /// Global index of the first row.
    pub row_offset: u64,
}

/// A digest of a job's training rows (labels, weights, own base margins, query starts, bins)
/// that does not depend on how they are sharded: each row's hash, which includes its global
/// index, summed modulo 2^64 over every worker (exactly, in 16-bit limbs). A checkpoint
/// carries it, so resuming on other data (labels permuted, another file binned alike) is
/// refused rather than mixed into one model.
pub fn data_digest(rows: &DigestRows<'_>, collective: &mut dyn Collective) -> Result<u64> {
    let n = rows.binned.n_rows();
    let f = rows.binned.n_features();
    let mut starts = vec![false; n];
    if let Some(q) = rows.queries {
        for &o in q.offsets() {
            if let Some(s) = starts.get_mut(o as usize) {
                *s = true;
            }
        }
    }
    let k = rows
        .margins
        .map_or(0, |m| m.len().checked_div(n).unwrap_or(0));
    // bins held by column hash as the same rows held row-major would, made row-major a
    // block of rows at a time
    const BLOCK: usize = 4096;
    let mut sum = 0u64;
    for first in (0..n).step_by(BLOCK) {
        let part = rows.binned.slice_rows(first..(first + BLOCK).min(n));
        let mut held = HeldRows::default();
        let bins = part.bins().row_major(&mut held);
        for j in 0..part.n_rows() {
            let i = first + j;
            let mut h = fnv(FNV_START, &(rows.row_offset + i as u64).to_le_bytes());
            h = fnv(
                h,
                &rows
                    .labels
                    .get(i)
                    .copied()
                    .unwrap_or(0.0)
                    .to_bits()
                    .to_le_bytes(),
            );
            if let Some(w) = rows.weights {
                h = fnv(h, &w.get(i).copied().unwrap_or(0.0).to_bits().to_le_bytes());
            }
            if let Some(m) = rows.margins {
                for v in m.get(i * k..(i + 1) * k).unwrap_or_default() {
                    h = fnv(h, &v.to_bits().to_le_bytes());
                }
            }
            h = fnv(h, &[starts[i] as u8]);
            h = match bins {
                RowMajor::U8(b) => fnv(h, &b[j * f..(j + 1) * f]),
                RowMajor::U16(b) => b[j * f..(j + 1) * f]
                    .iter()
                    .fold(h, |h, v| fnv(h, &v.to_le_bytes())),
            };
            // one more multiply so that the last byte is mixed into the high bits too
            sum = sum.wrapping_add(h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
    }
    let mut limbs: Vec<i64> = (0..4)
        .map(|l| ((sum >> (16 * l)) & 0xffff) as i64)
        .collect();
    let bound = (collective.world_size() as u64).saturating_mul(u64::from(u16::MAX));
    collective.allreduce_sum(&mut limbs, bound)?;
    Ok(limbs
        .iter()
        .enumerate()
        .fold(0u64, |d, (l, &v)| d.wrapping_add((v as u64) << (16 * l))))
}

/// A metric value as JSON: a number, or its name where JSON has none (NaN, infinities).
fn number(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        json!(v.to_string())
    }
}

fn read_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::InvalidModel(format!("checkpoint: {what}"))
}

impl Checkpoint {
    /// Writes the checkpoint to `path` through a temporary file, so a kill at any moment
    /// leaves the previous checkpoint or this one, never half of one.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::files::write_atomic(path, self.to_json().as_bytes())
    }

    /// Reads a checkpoint written by [`Checkpoint::save`]; errors name the file.
    pub fn load(path: &Path) -> Result<Self> {
        crate::files::read_parsed(path, Self::from_json)
    }

    /// The checkpoint as JSON text.
    pub fn to_json(&self) -> String {
        let model: Value =
            serde_json::from_str(&self.model.to_json()).expect("a model writes valid JSON");
        let history: Vec<Value> = self
            .history
            .iter()
            .map(|round| {
                Value::Array(
                    round
                        .iter()
                        .map(|r| {
                            json!({"dataset": r.dataset, "metric": r.metric.name(),
                                   "value": number(r.value)})
                        })
                        .collect(),
                )
            })
            .collect();
        let mut v = json!({
            "format": FORMAT,
            "version": VERSION,
            "rounds": self.rounds,
            "best": self.best.map(|(r, v)| json!([r, number(v)])),
            "history": history,
            "data": self.data.map(|d| format!("{d:016x}")),
            "model": model,
        });
        let integrity = integrity_of(&v);
        v["integrity"] = json!(integrity);
        v.to_string()
    }

    /// Reads what [`Checkpoint::to_json`] wrote; anything else is an error, never a panic.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        if v["format"] != FORMAT {
            return Err(bad("not a Sapwood checkpoint"));
        }
        let version = v["version"].as_u64();
        if !matches!(version, Some(1) | Some(VERSION)) {
            return Err(bad(format!("version {} is not {VERSION}", v["version"])));
        }
        let mut v = v;
        let data = if version == Some(VERSION) {
            // an edited or damaged checkpoint would continue into a model no run makes
            let stored = v
                .as_object_mut()
                .and_then(|o| o.remove("integrity"))
                .ok_or_else(|| bad("no integrity digest"))?;
            if stored.as_str() != Some(integrity_of(&v).as_str()) {
                return Err(bad(
                    "its contents changed after it was written (the integrity digest \
                     differs): it was edited or damaged; resume from an intact checkpoint",
                ));
            }
            // null: a version-1 checkpoint (no digest of its data) saved again, as to_json
            // writes it; it resumes unchecked as the version-1 file did
            match v.get("data").ok_or_else(|| bad("no data digest"))? {
                Value::Null => None,
                d => {
                    let d = d.as_str().ok_or_else(|| bad("a malformed data digest"))?;
                    Some(u64::from_str_radix(d, 16).map_err(|_| bad("a malformed data digest"))?)
                }
            }
        } else {
            None
        };
        let rounds = v["rounds"].as_u64().ok_or_else(|| bad("no round count"))? as usize;
        let best = match &v["best"] {
            Value::Null => None,
            Value::Array(a) if a.len() == 2 => Some((
                a[0].as_u64().ok_or_else(|| bad("bad best round"))? as usize,
                read_number(&a[1]).ok_or_else(|| bad("bad best value"))?,
            )),
            _ => return Err(bad("bad best round")),
        };
        let history = v["history"]
            .as_array()
            .ok_or_else(|| bad("no history"))?
            .iter()
            .map(|round| {
                round
                    .as_array()
                    .ok_or_else(|| bad("bad history"))?
                    .iter()
                    .map(|r| {
                        Ok(EvalResult {
                            dataset: r["dataset"]
                                .as_str()
                                .ok_or_else(|| bad("bad history dataset"))?
                                .to_string(),
                            metric: r["metric"]
                                .as_str()
                                .ok_or_else(|| bad("bad history metric"))?
                                .parse::<Metric>()?,
                            value: read_number(&r["value"])
                                .ok_or_else(|| bad("bad history value"))?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let model = Model::from_json(&v["model"].to_string())
            .map_err(|e| bad(format!("its model: {e}")))?;
        if Some(model.trees.len()) != rounds.checked_mul(model.groups.max(1)) {
            return Err(bad(format!(
                "{rounds} rounds but {} trees for {} groups",
                model.trees.len(),
                model.groups
            )));
        }
        if best.is_some_and(|(r, _)| r >= rounds) || history.len() > rounds {
            return Err(bad("early stopping state beyond the rounds trained"));
        }
        Ok(Checkpoint {
            model,
            rounds,
            best,
            history,
            data,
        })
    }

    /// Checks that this checkpoint was written by the job described by `skeleton` (same
    /// parameters, features, cuts, groups and base margin), so continuing it gives that
    /// job's model.
    pub fn check_matches(&self, skeleton: &Model, data: Option<u64>) -> Result<()> {
        let m = &self.model;
        let data_differs = matches!((self.data, data), (Some(a), Some(b)) if a != b);
        let differs = if m.params != skeleton.params {
            Some("parameters")
        } else if m.feature_names != skeleton.feature_names {
            Some("features")
        } else if m.cuts != skeleton.cuts {
            Some("bins (the data differ)")
        } else if m.groups != skeleton.groups
            || m.base_margin
                .iter()
                .map(|v| v.to_bits())
                .ne(skeleton.base_margin.iter().map(|v| v.to_bits()))
        {
            Some("base margin (the labels or weights differ)")
        } else if data_differs {
            Some("training rows (labels, weights, query groups or feature values)")
        } else {
            None
        };
        match differs {
            Some(what) => Err(Error::param(
                "resume",
                format!(
                    "the checkpoint was written by another job: its {what} differ from this run's"
                ),
            )),
            None if self.rounds > skeleton.params.num_rounds => Err(Error::param(
                "resume",
                format!(
                    "the checkpoint holds {} rounds, more than the {} asked",
                    self.rounds, skeleton.params.num_rounds
                ),
            )),
            None => Ok(()),
        }
    }
}

impl Checkpoint {
    /// A saved model seen as the checkpoint of the longer job `skeleton` describes (the
    /// model's cuts, base margin and continued parameters, see [`continued_params`]):
    /// nothing random is stateful, so replaying its trees and boosting on gives the bytes a
    /// run of every round in one go gives. Early stopping starts afresh.
    pub fn of_model(init: &Model, skeleton: &Model) -> Checkpoint {
        Checkpoint {
            model: Model {
                trees: init.trees.clone(),
                best_iteration: None,
                ..skeleton.clone()
            },
            rounds: init.num_rounds(),
            best: None,
            history: Vec::new(),
            data: None,
        }
    }

    /// Checks that this checkpoint (a run continuing `init`, resumed) begins with the
    /// trees of `init`.
    pub fn check_continues(&self, init: &Model) -> Result<()> {
        let n = init.trees.len();
        if self.model.trees.len() < n || self.model.trees[..n] != init.trees[..] {
            return Err(Error::param(
                "resume",
                "the checkpoint does not continue the init model: its first trees differ",
            ));
        }
        Ok(())
    }
}

/// Whether two lists of a loss's numbers are the same bit for bit (as the model file keeps
/// them): `0.1` and `0.1 + ε` are different losses.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The parameters of a job continuing `init` with `params`: `params.num_rounds` more
/// rounds after the model's, the model's classes, and its binning parameters (its cuts
/// bin the data, so the parameters saved with the new model must be the ones that made
/// them). The loss (objective and its constants), the class count, the base score and the
/// features (by name, binned with the model's cuts) must match the model's: anything else
/// is an error naming what differs.
pub fn continued_params(
    params: &Checked<Params>,
    init: &Model,
    feature_names: &[String],
    cuts: &Cuts,
) -> Result<Checked<Params>> {
    let was = &init.params;
    let differ = |name: &'static str, given: String, model: String| {
        Error::param(
            name,
            format!(
                "{given} given but the model to continue was trained with {model}: \
                 continued training keeps the loss"
            ),
        )
    };
    // the model's bound is kept below; a model built in Rust rather than read from a file
    // (which validates it) may hold any
    if !crate::params::poisson_leaf_bound_valid(was.poisson_leaf_bound) {
        return Err(Error::param(
            "poisson_leaf_bound",
            format!(
                "the model to continue holds {}, which must be a finite number > 0",
                was.poisson_leaf_bound
            ),
        ));
    }
    if params.objective != was.objective {
        return Err(differ(
            "objective",
            params.objective.to_string(),
            was.objective.to_string(),
        ));
    }
    // the gains are part of a ranking loss (and of its metric), as the alphas of a quantile one
    for (name, given, model) in [
        (
            "quantile_alpha",
            &params.quantile_alpha,
            &was.quantile_alpha,
        ),
        ("label_gain", &params.label_gain, &was.label_gain),
    ] {
        if !same_bits(given, model) {
            return Err(differ(name, format!("{given:?}"), format!("{model:?}")));
        }
    }
    if params.ndcg_exp_gain != was.ndcg_exp_gain {
        return Err(differ(
            "ndcg_exp_gain",
            params.ndcg_exp_gain.to_string(),
            was.ndcg_exp_gain.to_string(),
        ));
    }
    for (name, given, model) in [
        ("huber_slope", params.huber_slope, was.huber_slope),
        (
            "tweedie_variance_power",
            params.tweedie_variance_power,
            was.tweedie_variance_power,
        ),
    ] {
        if given.to_bits() != model.to_bits() {
            return Err(differ(name, given.to_string(), model.to_string()));
        }
    }
    let show = |k: Option<usize>| k.map_or("none".to_string(), |k| k.to_string());
    let num_class = match (params.num_class, was.num_class) {
        (Some(a), Some(b)) if a != b => {
            return Err(differ("num_class", show(Some(a)), show(Some(b))))
        }
        (Some(a), None) => return Err(differ("num_class", show(Some(a)), show(None))),
        (_, k) => k,
    };
    if let Some(b) = params.base_score {
        if was.base_score.map(f64::to_bits) != Some(b.to_bits()) {
            return Err(differ(
                "base_score",
                b.to_string(),
                was.base_score
                    .map_or("the base score estimated from its labels".into(), |s| {
                        s.to_string()
                    }),
            ));
        }
    }
    if feature_names != init.feature_names.as_slice() {
        let missing: Vec<&str> = init
            .feature_names
            .iter()
            .filter(|f| !feature_names.contains(f))
            .map(String::as_str)
            .collect();
        return Err(Error::SchemaMismatch(if missing.is_empty() {
            format!(
                "the features are not those of the model to continue ({}), in its order",
                init.feature_names.join(", ")
            )
        } else {
            format!(
                "the model to continue splits on features the data lacks: {}",
                missing.join(", ")
            )
        }));
    }
    if cuts != &init.cuts {
        return Err(Error::SchemaMismatch(
            "the data was binned with other cuts than the model to continue: bin it with the \
             model's"
                .into(),
        ));
    }
    let rounds = init.num_rounds();
    // the loss and class count are the model's and checked above; the binning parameters
    // were checked when the model was trained or loaded
    Ok(Checked::derived(Params {
        num_rounds: rounds.checked_add(params.num_rounds).ok_or_else(|| {
            Error::param(
                "num_rounds",
                format!("{rounds} + {} rounds overflow", params.num_rounds),
            )
        })?,
        num_class,
        base_score: was.base_score,
        max_bin: was.max_bin,
        max_cat_bin: was.max_cat_bin,
        min_data_in_bin: was.min_data_in_bin,
        heavy_value_bins: was.heavy_value_bins,
        // the softmax hessian is the model's: one saved with XGBoost's (before LightGBM's
        // became the default) trains on as it began, whichever API continues it
        multiclass_hessian: was.multiclass_hessian,
        // and so is the ranking pair's hessian (a model saved before the choice existed
        // reads as XGBoost's, which it was trained with)
        lambdarank_hessian: was.lambdarank_hessian,
        // and how categorical nodes measure their noise (fitted, in a model saved before
        // the measure existed)
        cat_noise: was.cat_noise,
        // so is the Poisson leaf bound (XGBoost's 0.7 in models saved before it was 2)
        poisson_leaf_bound: was.poisson_leaf_bound,
        min_category_count: was.min_category_count,
        bin_sample_rows: was.bin_sample_rows,
        ..Params::clone(params)
    }))
}
