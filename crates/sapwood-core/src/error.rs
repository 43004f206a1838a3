//! The core's error type: every failure names the parameter, column, row or file at fault.

use thiserror::Error;

/// Everything that can go wrong inside the engine.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is outside its range or inconsistent with another.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParam {
        /// The parameter's name, as users spell it.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A parameter name is not one Sapwood knows.
    #[error("unknown parameter `{name}`{}", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    UnknownParam {
        /// The name given.
        name: String,
        /// The closest known name.
        suggestion: Option<String>,
    },
    /// The objective name is not one Sapwood knows.
    #[error(
        "unknown objective `{0}`; expected one of reg:squarederror, reg:absoluteerror, \
         reg:quantileerror, reg:pseudohubererror, huber, count:poisson, reg:tweedie, reg:gamma, \
         binary:logistic, binary:logitraw, multi:softprob, multi:softmax, rank:ndcg, rank:map, \
         rank:pairwise, survival:cox, custom (`sapwood params objective` lists LightGBM's names too)"
    )]
    UnknownObjective(String),
    /// The metric name is not one Sapwood knows.
    #[error(
        "unknown metric `{0}`; expected one of rmse, rmsle, mae, mape, mphe, quantile, \
         poisson-nloglik, gamma-nloglik, gamma-deviance, tweedie-nloglik[@RHO], logloss, error, \
         auc, aucpr, mlogloss, merror, ndcg[@K], map[@K], pre@K, cox-nloglik"
    )]
    UnknownMetric(String),
    /// There is nothing to train on or to predict.
    #[error("empty data: {0}")]
    EmptyData(String),
    /// Columns of one dataset disagree on the number of rows.
    #[error("column `{column}` has {got} rows but the dataset has {expected}")]
    LengthMismatch {
        /// The offending column (or `label`, `weight`).
        column: String,
        /// Its length.
        got: usize,
        /// The dataset's row count.
        expected: usize,
    },
    /// A label cannot be used with the objective.
    #[error("label at row {row} is {value}: {reason}")]
    InvalidLabel {
        /// Row index in the dataset.
        row: usize,
        /// The label as written.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A sample weight is negative, NaN or infinite.
    #[error("weight at row {row} is {value}: weights must be finite and non-negative")]
    InvalidWeight {
        /// Row index in the dataset.
        row: usize,
        /// The weight.
        value: f32,
    },
    /// A feature column is unusable.
    #[error("feature `{feature}`: {reason}")]
    InvalidFeature {
        /// The feature's name.
        feature: String,
        /// What is wrong.
        reason: String,
    },
    /// Data given for prediction does not match the model.
    #[error("data does not match the model: {0}")]
    SchemaMismatch(String),
    /// A model file or string is not a valid Sapwood model.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Workers could not exchange data.
    #[error("collective: {0}")]
    Collective(String),
    /// A histogram backend failed.
    #[error("backend: {0}")]
    Backend(String),
    /// Training diverged: a gradient, leaf value or margin left the finite f32 range.
    #[error("training diverged in round {round}, tree {tree}: {what}; lower learning_rate (or raise lambda, or set max_delta_step)")]
    Diverged {
        /// The round (0-based).
        round: usize,
        /// The tree's index in the model (round × groups + group).
        tree: usize,
        /// What became non-finite.
        what: String,
    },
    /// A query whose rows two ranks hold: its gradients need all of them on one.
    #[error("a query spans ranks {first} and {second}: every rank's rows must hold whole queries")]
    QuerySpansRanks {
        /// The rank holding the query's first rows.
        first: usize,
        /// The next rank holding rows, whose first query is the same.
        second: usize,
    },
    /// Reading rows failed in the caller's own reader (a file, a stream); the message is
    /// the reader's.
    #[error("{0}")]
    Read(String),
    /// An error in one named dataset (e.g. an evaluation set), so front ends can name its file.
    #[error("{dataset}: {source}")]
    InDataset {
        /// The dataset's name as the caller gave it.
        dataset: String,
        /// What is wrong with it.
        source: Box<Error>,
    },
}

/// Result with the core's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::InvalidParam`].
    pub fn param(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParam {
            name,
            reason: reason.into(),
        }
    }
}
