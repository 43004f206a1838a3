//! What a ranking loss is asked for: the loss, its pairs and its gains, as the objective
//! hands them to the gradients (a file of its own, so that the objective, which builds
//! them, and the gradients, which read the objective's sigmoid table, need not import each
//! other).

/// Which pairs of documents a query contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairMethod {
    /// Every pair with at least one document in the model's top `k` (XGBoost's `topk`).
    TopK(u32),
    /// `n` partners per document, drawn uniformly among the query's documents with another
    /// label (XGBoost's `mean`); the draws are hashes of (seed, round, global row).
    Mean(u32),
}

/// The LambdaMART losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankLoss {
    /// Pairs weighted by the change in NDCG of swapping them.
    Ndcg,
    /// Pairs weighted by the change in mean average precision.
    Map,
    /// Every pair alike (RankNet).
    Pairwise,
}

/// The gain of a relevance label in NDCG, for the loss and the metrics alike.
#[derive(Debug, Clone, PartialEq)]
pub enum Gains {
    /// 2^label - 1 (`ndcg_exp_gain`, the default).
    Exponential,
    /// The label itself (`ndcg_exp_gain` false).
    Linear,
    /// `label_gain`: the gain of each integer label, as LightGBM's parameter gives it.
    Table(std::sync::Arc<[f64]>),
}

impl Gains {
    /// The gain of label `y`. A label a table does not hold gains 0: labels are checked
    /// against the table before training (`Objective::check_label`), so only a metric on
    /// data never checked can meet one.
    #[inline]
    pub fn of(&self, y: f32) -> f64 {
        match self {
            Gains::Exponential => crate::detmath::pow2_f(y as f64) - 1.0,
            Gains::Linear => y as f64,
            Gains::Table(t) => {
                if y >= 0.0 && y.fract() == 0.0 {
                    t.get(y as usize).copied().unwrap_or(0.0)
                } else {
                    0.0
                }
            }
        }
    }
}

/// What a ranking loss needs besides margins and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct RankParams {
    /// The loss.
    pub loss: RankLoss,
    /// Pair construction.
    pub pairs: PairMethod,
    /// The gain of each label in NDCG.
    pub gains: Gains,
    /// A pair's hessian is p(1 - p)·|Δ| times this: 2 as XGBoost, 1 as LightGBM
    /// (`lambdarank_hessian`). A power of two, so either is exact.
    pub hessian_scale: f64,
    /// Divide each query's gradients by Σ|λ| / log2(1 + Σ|λ|) (`lambdarank_normalization`).
    pub normalise: bool,
}
