//! What the workers of a job agree on before boosting, each through the collective: row
//! count, cuts, classes, base margin. Every result is the same on every worker however rows
//! are sharded.

use crate::collective::Collective;
use crate::data::cuts::{BinLimits, CutSample, Cuts};
use crate::detmath;
use crate::error::{Error, Result};
use crate::objective::{Objective, ObjectiveKind};
use crate::params::{Params, PARAM_NAMES, RUN_OPTION_NAMES};
use crate::quantise::{exact_shift, quantise_exact};
use crate::wire::{ByteReader, PutBytes};

/// Σ values over all workers, exactly (fixed point), so the result is the same however rows
/// are sharded.
pub fn exact_sum(values: &[f32], n_total: u64, collective: &mut dyn Collective) -> Result<f64> {
    let local_max = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let mut max = [local_max.to_bits() as u64];
    collective.allreduce_max(&mut max)?;
    let shift = exact_shift(f32::from_bits(max[0] as u32), n_total);
    let mut sum = [values
        .iter()
        .map(|&v| quantise_exact(v, shift))
        .sum::<i64>()];
    collective.allreduce_sum(&mut sum, 1 << crate::quantise::EXACT_SUM_BITS)?;
    Ok(sum[0] as f64 * detmath::pow2(-shift))
}

/// The initial margin of each group: from `base_score`, or estimated from the labels.
pub fn base_margin(
    params: &Params,
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    n_total: u64,
    collective: &mut dyn Collective,
) -> Result<Vec<f32>> {
    if let Some(b) = params.base_score {
        return Ok(objective.base_margin_from_score(b));
    }
    let w: Vec<f32> = match weights {
        Some(w) => w.to_vec(),
        None => vec![1.0; labels.len()],
    };
    let total_w = exact_sum(&w, n_total, collective)?;
    if total_w.is_nan() || total_w <= 0.0 {
        return Err(Error::EmptyData("the sample weights sum to zero".into()));
    }
    let weighted_mean = |hit: &dyn Fn(f32) -> f32, c: &mut dyn Collective| -> Result<f64> {
        let v: Vec<f32> = labels.iter().zip(&w).map(|(&y, &wi)| hit(y) * wi).collect();
        Ok(exact_sum(&v, n_total, c)? / total_w)
    };
    Ok(match objective.kind() {
        ObjectiveKind::SquaredError | ObjectiveKind::Huber => {
            vec![weighted_mean(&|y| y, collective)? as f32]
        }
        ObjectiveKind::AbsoluteError
        | ObjectiveKind::QuantileError
        | ObjectiveKind::PseudoHuber => {
            // the loss's own minimiser over a constant: a quantile (the median for the
            // robust losses), exact over every worker; one per output
            let slot = vec![0u32; labels.len()];
            let mut m = Vec::with_capacity(objective.groups());
            for group in 0..objective.groups() {
                let q = super::quantile::weighted_quantiles(
                    &slot,
                    labels,
                    weights,
                    1,
                    objective.refit_quantile(group),
                    n_total,
                    collective,
                )?;
                m.push(q[0].unwrap_or(0.0));
            }
            m
        }
        ObjectiveKind::Poisson | ObjectiveKind::Tweedie | ObjectiveKind::Gamma => {
            let mean = weighted_mean(&|y| y, collective)?;
            vec![detmath::ln(mean.max(1e-6)) as f32]
        }
        ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => {
            let p = weighted_mean(&|y| y, collective)?;
            if p == 0.0 || p == 1.0 {
                // as scikit-learn refuses it: the model could only ever say one thing
                return Err(Error::param(
                    "objective",
                    format!(
                        "{}: every weighted label is {p}, so the training data has one \
                         class; a binary classifier needs rows of both (set base_score to \
                         train a constant model anyway)",
                        objective.kind()
                    ),
                ));
            }
            let p = p.clamp(1e-6, 1.0 - 1e-6);
            vec![detmath::ln(p / (1.0 - p)) as f32]
        }
        // scores rank documents within a query: any constant start is the same model
        // and the partial likelihood of Cox is the same for any constant shift
        ObjectiveKind::RankNdcg
        | ObjectiveKind::RankMap
        | ObjectiveKind::RankPairwise
        | ObjectiveKind::Cox => vec![0.0],
        // a custom objective's margins start at 0, as XGBoost's and LightGBM's do
        ObjectiveKind::Custom => vec![0.0; objective.groups()],
        ObjectiveKind::Softprob | ObjectiveKind::Softmax => {
            let mut m = Vec::with_capacity(objective.groups());
            for k in 0..objective.groups() {
                let p = weighted_mean(&|y| if y as usize == k { 1.0 } else { 0.0 }, collective)?;
                m.push(detmath::ln(p.max(1e-6)) as f32);
            }
            m
        }
    })
}

/// Rows over all workers.
pub fn total_rows(n_local: usize, collective: &mut dyn Collective) -> Result<u64> {
    let mut n = [n_local as i64];
    collective.allreduce_sum(&mut n, u32::MAX as u64 * 1024)?;
    Ok(n[0] as u64)
}

/// Gathers every worker's cut sample on worker 0, which merges them and computes the cuts
/// that it then sends to all: the others never hold the whole sample.
pub fn agree_cuts(
    local: &CutSample,
    params: &Params,
    collective: &mut dyn Collective,
) -> Result<Cuts> {
    let cuts_of = |sample: &CutSample| Cuts::from_sample(sample, &BinLimits::from(params));
    if collective.world_size() == 1 {
        // the merge of one sample is itself: no round trip through bytes
        return cuts_of(local);
    }
    let gathered = collective.gather(&local.to_bytes(), 0)?;
    // worker 0's outcome, sent to all as a status byte and the cuts or the error's text
    let mut message = Vec::new();
    let mine = gathered.map(|parts| {
        // each worker's bytes are freed as soon as they are decoded
        let merged = CutSample::merge(
            parts
                .into_iter()
                .map(|b| CutSample::from_bytes(&b))
                .collect::<Result<_>>()?,
        )?;
        cuts_of(&merged)
    });
    match &mine {
        Some(Ok(cuts)) => {
            message.put_u8(CUTS);
            message.extend_from_slice(&cuts.to_bytes());
        }
        Some(Err(e)) => write_failure(e, &mut message),
        None => {}
    }
    collective.broadcast(&mut message, 0)?;
    if let Some(outcome) = mine {
        return outcome;
    }
    match message.split_first() {
        Some((&CUTS, cuts)) => Cuts::from_bytes(cuts),
        _ => Err(read_failure(&message)),
    }
}

/// Tags of worker 0's message after it computed the cuts: the cuts, or its error as an
/// invalid parameter (so every worker reports the same kind of error) or as text.
const CUTS: u8 = 1;
const FAILED_PARAM: u8 = 2;
const FAILED: u8 = 3;

/// Appends worker 0's error for the others: a parameter's name and reason, or the text.
fn write_failure(e: &Error, out: &mut Vec<u8>) {
    match e {
        Error::InvalidParam { name, reason } => {
            out.put_u8(FAILED_PARAM);
            out.put_u64(name.len() as u64);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(reason.as_bytes());
        }
        Error::Collective(why) => {
            out.put_u8(FAILED);
            out.extend_from_slice(why.as_bytes());
        }
        other => {
            out.put_u8(FAILED);
            out.extend_from_slice(other.to_string().as_bytes());
        }
    }
}

/// The error worker 0 sent in place of the cuts ([`write_failure`]).
fn read_failure(message: &[u8]) -> Error {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let failed =
        |why: String| Error::Collective(format!("worker 0 could not compute the bin cuts: {why}"));
    match message.split_first() {
        Some((&FAILED_PARAM, rest)) => {
            let mut r = ByteReader::new(rest, "failure message");
            let parsed = r.u64().and_then(|n| r.take(n as usize)).map(|name| {
                let name = text(name);
                // the name is one of the engine's own, as a static string again
                let known = PARAM_NAMES
                    .iter()
                    .chain(RUN_OPTION_NAMES)
                    .map(|(n, _)| *n)
                    .find(|n| *n == name);
                match known {
                    Some(name) => Error::param(name, text(r.rest())),
                    None => failed(format!("invalid parameter `{name}`: {}", text(r.rest()))),
                }
            });
            parsed.unwrap_or_else(|_| failed("a malformed message".into()))
        }
        Some((&FAILED, why)) => failed(text(why)),
        _ => failed("a malformed message".into()),
    }
}

/// Classes of a softmax job: `num_class`, or one more than the largest label over all
/// workers (at least 2); 1 for other objectives.
pub fn agree_num_class(
    params: &Params,
    labels: &[f32],
    collective: &mut dyn Collective,
) -> Result<usize> {
    Ok(match params.objective {
        ObjectiveKind::Custom => params.num_class.unwrap_or(1).max(1),
        k if k.is_multiclass() => match params.num_class {
            Some(k) => k,
            None => {
                let local = labels
                    .iter()
                    .fold(0.0f32, |m, &y| if y.is_finite() { m.max(y) } else { m });
                let mut max = [local as u64];
                collective.allreduce_max(&mut max)?;
                (max[0] as usize + 1).max(2)
            }
        },
        _ => 1,
    })
}

/// What a worker says its job is: named values that every worker of one job shares (every
/// parameter, the run options the wire depends on, the schema, which columns play which
/// part, the data's row count). [`agree_job`] compares them before any other exchange.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFacts {
    facts: Vec<(String, String)>,
}

impl JobFacts {
    /// Every model parameter (objective, rounds, seed, penalties, ...) by its name, and the
    /// run options that decide what goes over the wire (the codec and the overlap: ranks
    /// that differ in them would read each other's bytes wrongly).
    pub fn of_params(params: &Params, run: &crate::params::RunOptions) -> Self {
        let mut facts = JobFacts::default();
        match serde_json::to_value(params) {
            Ok(serde_json::Value::Object(map)) => {
                for (name, value) in map {
                    facts.push(name, value.to_string());
                }
            }
            // parameters always serialise to an object; anything else is still compared
            Ok(other) => facts.push("parameters", other.to_string()),
            Err(e) => facts.push("parameters", e.to_string()),
        }
        facts.push("comm_codec", format!("{:?}", run.comm_codec));
        facts.push("comm_overlap", run.comm_overlap.to_string());
        facts
    }

    /// Adds a fact (its name as users know it, e.g. `label column`).
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.facts.push((name.into(), value.into()));
    }

    /// Adds a fact that stands for `bytes` (a file's footer, a model): a 64-bit FNV-1a
    /// digest, enough to tell two different inputs apart by accident.
    pub fn push_digest(&mut self, name: impl Into<String>, bytes: &[u8]) {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.push(name, format!("digest {h:016x} of {} bytes", bytes.len()));
    }

    /// The facts, in the order they are compared.
    pub fn facts(&self) -> &[(String, String)] {
        &self.facts
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u64(self.facts.len() as u64);
        for (k, v) in &self.facts {
            out.put_u64(k.len() as u64);
            out.extend_from_slice(k.as_bytes());
            out.put_u64(v.len() as u64);
            out.extend_from_slice(v.as_bytes());
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(bytes, "job description");
        let n = r.u64()?;
        let mut facts = JobFacts::default();
        let text = |r: &mut ByteReader<'_>| -> Result<String> {
            let len = r.u64()?;
            let b = r.take(usize::try_from(len).map_err(|_| r.malformed("a huge length"))?)?;
            Ok(String::from_utf8_lossy(b).into_owned())
        };
        for _ in 0..n {
            let k = text(&mut r)?;
            let v = text(&mut r)?;
            facts.facts.push((k, v));
        }
        r.finish()?;
        Ok(facts)
    }

    /// The index of the first fact that differs from `other`'s, if any.
    fn first_difference(&self, other: &JobFacts) -> Option<usize> {
        let n = self.facts.len().max(other.facts.len());
        (0..n).find(|&i| self.facts.get(i) != other.facts.get(i))
    }

    /// How fact `i` reads, for an error message.
    fn describe(&self, i: usize) -> (String, String) {
        match self.facts.get(i) {
            Some((k, v)) if v.is_empty() => (k.clone(), "(none)".into()),
            Some((k, v)) => (k.clone(), v.clone()),
            None => ("(nothing)".into(), "(no such setting)".into()),
        }
    }
}

/// Checks that every worker describes the same job, before any other exchange: a rank
/// started with another parameter, objective, round count, schema or data file would
/// otherwise train one garbled model with the others, or fail later with a message about
/// the wire. On a difference every worker fails with the same error naming the first
/// differing fact, the first rank that differs from rank 0, and both values.
pub fn agree_job(mine: &JobFacts, collective: &mut dyn Collective) -> Result<()> {
    let world = collective.world_size();
    if world == 1 {
        return Ok(());
    }
    let rank = collective.rank();
    let mut first = if rank == 0 {
        mine.to_bytes()
    } else {
        Vec::new()
    };
    collective.broadcast(&mut first, 0)?;
    let rank0 = JobFacts::from_bytes(&first)?;
    // each rank's first differing fact, plus one (0: none), in its own slot
    let mut table = vec![0u64; world];
    table[rank] = mine.first_difference(&rank0).map_or(0, |i| i as u64 + 1);
    collective.allreduce_max(&mut table)?;
    let Some((other, &slot)) = table.iter().enumerate().find(|(_, &s)| s != 0) else {
        return Ok(());
    };
    let i = (slot - 1) as usize;
    // the differing rank tells everyone its name and value of that fact
    let mut theirs = if rank == other {
        let (k, v) = mine.describe(i);
        JobFacts {
            facts: vec![(k, v)],
        }
        .to_bytes()
    } else {
        Vec::new()
    };
    collective.broadcast(&mut theirs, other)?;
    let theirs = JobFacts::from_bytes(&theirs)?;
    let (their_name, their_value) = theirs.describe(0);
    let (name, value) = rank0.describe(i);
    let also: Vec<String> = table
        .iter()
        .enumerate()
        .filter(|&(r, &s)| s != 0 && r != other)
        .map(|(r, _)| r.to_string())
        .collect();
    let also = if also.is_empty() {
        String::new()
    } else {
        format!(
            " (ranks {} differ from rank 0 too, in this or another setting: each rank's own \
             error line says)",
            also.join(", ")
        )
    };
    let what = if their_name == name {
        format!("`{name}` is {their_value} on rank {other} but {value} on rank 0")
    } else {
        format!(
            "rank {other} describes `{their_name}` ({their_value}) where rank 0 describes \
             `{name}` ({value})"
        )
    };
    Err(Error::Collective(format!(
        "the ranks do not describe the same job: {what}{also}; start every rank with the same \
         parameters, columns and data"
    )))
}
