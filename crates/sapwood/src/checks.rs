//! The checks every training path makes before any work: parameters, run options, labels,
//! base margins and evaluation sets.

use sapwood_core::model::Model;
use sapwood_core::objective::ObjectiveKind;
use sapwood_core::params::{Checked, CollectiveKind, Params, RunOptions};
use sapwood_core::train::EvalSet;

use crate::dataset::{check_base_margin, Label};
use crate::labels;
use crate::stream::BinnedDataset;
use crate::{Error, Result};

/// Checks what the job's checked parameters and run options must fit (the workers, the
/// evaluation sets, the labels, the model to continue) and encodes the training labels;
/// fills `num_class` from them.
pub(crate) fn prepare(
    params: &Checked<Params>,
    run: &RunOptions,
    label: Option<&Label>,
    n_rows: usize,
    n_evals: usize,
    init: Option<&Model>,
) -> Result<(Checked<Params>, labels::Encoded)> {
    if let Some(m) = init {
        check_init_objective(params, m)?;
    }
    if run.collective != CollectiveKind::InProcess {
        return Err(Error::param(
            "collective",
            "in-process training takes collective = in-process; a rank of a distributed job (MPI, TCP ranks, Dask, Spark) trains through its collective (Workers::Rank)",
        ));
    }
    if params.early_stopping_rounds.is_some() && n_evals == 0 {
        return Err(Error::param(
            "early_stopping_rounds",
            "early stopping watches an evaluation set, but none was given",
        ));
    }
    let label =
        label.ok_or_else(|| Error::EmptyData("the training dataset has no label".into()))?;
    if n_rows == 0 {
        return Err(Error::EmptyData("the training dataset has no rows".into()));
    }
    let encoded = encode_for(params.objective, label, init)?;
    if let (Some(c), true) = (&encoded.classes, params.objective.is_multiclass()) {
        if let Some(k) = params.num_class.filter(|&k| k != c.len()) {
            return Err(Error::param(
                "num_class",
                format!("{k} given but the labels have {} classes", c.len()),
            ));
        }
        return Ok((params.with_num_class(c.len())?, encoded));
    }
    Ok((params.clone(), encoded))
}

/// Refuses to continue a model with another objective before the labels are encoded for
/// it (the engine checks the rest of what must match, see `train::continued_params`).
pub(crate) fn check_init_objective(params: &Params, init: &Model) -> Result<()> {
    if params.objective != init.params.objective {
        return Err(Error::param(
            "objective",
            format!(
                "{} given but the model to continue was trained with {}: continued training \
                 keeps the loss",
                params.objective, init.params.objective
            ),
        ));
    }
    Ok(())
}

/// Encodes training labels: with the classes of the model to continue when it has some
/// (so class codes mean what its trees learned), else from the labels themselves.
pub(crate) fn encode_for(
    objective: ObjectiveKind,
    label: &Label,
    init: Option<&Model>,
) -> Result<labels::Encoded> {
    match init.and_then(|m| m.classes.as_deref()) {
        Some(classes) => Ok(labels::Encoded {
            values: labels::encode_with(objective, label, Some(classes))?,
            classes: Some(classes.to_vec()),
        }),
        None => labels::encode(objective, label),
    }
}

/// Output groups of a job when known before training (multiclass jobs whose class count
/// comes from numeric labels learn it in training).
fn known_groups(params: &Params) -> Option<usize> {
    match params.objective {
        k if k.is_multiclass() => params.num_class,
        ObjectiveKind::Custom => Some(params.num_class.unwrap_or(1)),
        ObjectiveKind::QuantileError => Some(params.quantile_alpha.len()),
        _ => Some(1),
    }
}

/// Checks a training set's per-row base margins before any work; returns the values per
/// row.
pub(crate) fn check_train_margins(margins: &[f32], n: usize, params: &Params) -> Result<usize> {
    check_base_margin(margins, n, known_groups(params))?;
    Ok(margins.len() / n.max(1))
}

/// An evaluation set binned as it was read, with its labels encoded as the training
/// labels were and its query groups.
pub(crate) fn binned_eval_set(
    params: &Params,
    name: &str,
    d: &BinnedDataset,
    encoded: &labels::Encoded,
) -> Result<EvalSet> {
    let set = EvalSet::new(
        name.to_string(),
        d.binned.clone(),
        eval_labels(params, name, d.label.as_ref(), encoded)?,
        d.weight.clone(),
    );
    Ok(match &d.queries {
        Some(q) => set.with_queries(q.clone()),
        None => set,
    })
}

/// An evaluation set's labels, encoded as the training labels were.
pub(crate) fn eval_labels(
    params: &Params,
    name: &str,
    label: Option<&Label>,
    encoded: &labels::Encoded,
) -> Result<Vec<f32>> {
    let l =
        label.ok_or_else(|| Error::EmptyData(format!("evaluation set `{name}` has no label")))?;
    labels::encode_with(params.objective, l, encoded.classes.as_deref()).map_err(|source| {
        Error::InDataset {
            dataset: format!("evaluation set `{name}`"),
            source: Box::new(source),
        }
    })
}
