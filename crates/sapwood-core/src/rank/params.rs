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

/// What a ranking loss needs besides margins and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankParams {
    /// The loss.
    pub loss: RankLoss,
    /// Pair construction.
    pub pairs: PairMethod,
    /// Gains 2^label - 1 (else the label itself) for NDCG.
    pub exp_gain: bool,
    /// Divide each query's gradients by Σ|λ| / log2(1 + Σ|λ|) (`lambdarank_normalization`).
    pub normalise: bool,
}
