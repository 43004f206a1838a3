//! The rows and gradients the host handles itself: a custom objective's gradients, losses
//! without a device kernel (ranking, Cox), and the rows quantile losses refit leaves on.

use super::observer::TrainObserver;
use crate::backend::HistBackend;
use crate::collective::Collective;
use crate::data::binned::BinnedMatrix;
use crate::error::{Error, Result};
use crate::hash::Stream;
use crate::objective::Objective;
use crate::rank::Queries;

/// This worker's rows as the host reads them: for the leaf refit of quantile losses and for
/// gradients computed on the host (losses without a kernel).
#[derive(Debug, Clone, Copy)]
pub struct HostRows<'a> {
    /// Binned rows (to find each row's leaf).
    pub binned: &'a BinnedMatrix,
    /// Labels.
    pub labels: &'a [f32],
    /// Optional weights.
    pub weights: Option<&'a [f32]>,
    /// Query groups, for ranking losses.
    pub queries: Option<&'a Queries>,
    /// Every worker's survival times, for `survival:cox`.
    pub risk: Option<&'a crate::survival::GlobalRows>,
    /// Global index of the first row (keys the `mean` ranking pairs' draws).
    pub row_offset: u64,
}

/// Gradients computed on the host from the backend's margins (a custom objective's, or a
/// built-in loss without a kernel), handed to the backend; returns their maxima per group.
pub(super) fn host_gradients(
    objective: &Objective,
    rows: Option<&HostRows<'_>>,
    backend: &mut dyn HistBackend,
    observer: &mut dyn TrainObserver,
    collective: &mut dyn Collective,
    (seed, round): (u64, usize),
) -> Result<Vec<[f32; 2]>> {
    let k = objective.groups();
    let margins = backend.margins()?;
    let (grad, max) = match observer.gradients(&margins, k) {
        Some(grad) => {
            let grad = grad?;
            crate::backend::shard::check_gradients(grad.len(), margins.len())?;
            let mut max = vec![[0.0f32; 2]; k];
            for (j, &[g, h]) in grad.iter().enumerate() {
                if !(g.is_finite() && h.is_finite() && h >= 0.0) {
                    return Err(Error::Diverged {
                        round,
                        tree: round * k + j % k,
                        what: format!(
                            "the custom objective gave row {} group {} the gradient {g} and \
                             hessian {h} (both must be finite, the hessian >= 0)",
                            j / k,
                            j % k
                        ),
                    });
                }
                let m = &mut max[j % k];
                m[0] = m[0].max(g.abs());
                m[1] = m[1].max(h);
            }
            (grad, max)
        }
        None if objective.kind() == crate::objective::ObjectiveKind::Custom => {
            return Err(Error::param(
                "objective",
                "`custom` takes its gradients from a custom objective (Python `obj=`, Rust \
                 TrainObserver::gradients); none was given",
            ))
        }
        None => {
            let rows = rows.expect("a loss without a kernel keeps its rows on the host");
            let mut grad = vec![[0.0f32; 2]; margins.len()];
            let max = match (rows.queries, rows.risk) {
                (Some(q), _) if objective.kind().is_ranking() => vec![crate::rank::gradients(
                    objective.rank_params(),
                    q,
                    rows.labels,
                    rows.weights,
                    &margins,
                    crate::rank::PairDraws {
                        key: crate::hash::HashKey::new(seed, Stream::RankPairs, round as u32),
                        row_offset: rows.row_offset,
                    },
                    crate::rank::PairLogistic::Table(crate::objective::sigmoid_table()),
                    &mut grad,
                )],
                (_, Some(risk)) => vec![risk.gradients(&margins, collective, &mut grad)?],
                _ => crate::backend::shard::gradients_into(
                    objective,
                    rows.labels,
                    rows.weights,
                    &margins,
                    &mut grad,
                ),
            };
            (grad, max)
        }
    };
    backend.set_gradients(&grad)?;
    Ok(max)
}
