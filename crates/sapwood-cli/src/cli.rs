//! Command-line definitions (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Gradient-boosted decision trees with bit-identical models on every backend.
#[derive(Debug, Parser)]
#[command(name = "sapwood", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model on a Parquet or CSV file.
    Train(Box<TrainArgs>),
    /// Write predictions of a model for a Parquet or CSV file.
    Predict(PredictArgs),
    /// Evaluate a model on labelled data.
    Eval(EvalArgs),
    /// Describe a model: trees, features, importance, parameters.
    Inspect(InspectArgs),
    /// Write a model in another library's format (XGBoost JSON, LightGBM text, ONNX).
    Export(ExportArgs),
}

/// Columns of the data and what they are for.
#[derive(Debug, Args, Clone, Default)]
pub struct ColumnArgs {
    /// Sample-weight column.
    #[arg(long)]
    pub weight: Option<String>,
    /// Query id column for ranking objectives (the rows of a query contiguous; validation
    /// files read theirs for ranking metrics).
    #[arg(long)]
    pub group: Option<String>,
    /// Use only these feature columns (comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "drop")]
    pub features: Vec<String>,
    /// Leave these columns out (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub drop: Vec<String>,
    /// Treat these integer columns as categorical (strings always are).
    #[arg(long, value_delimiter = ',')]
    pub categorical: Vec<String>,
}

/// `sapwood train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Training data (.parquet or .csv).
    #[arg(long)]
    pub data: PathBuf,
    /// Label column.
    #[arg(long)]
    pub label: String,
    /// Validation data, reported every round (repeatable; the last one drives early stopping).
    #[arg(long)]
    pub valid: Vec<PathBuf>,
    /// Column roles.
    #[command(flatten)]
    pub columns: ColumnArgs,
    /// Objective: reg:squarederror, binary:logistic or multi:softprob.
    #[arg(long)]
    pub objective: Option<String>,
    /// Boosting rounds.
    #[arg(long, value_name = "N")]
    pub rounds: Option<String>,
    /// Learning rate (eta).
    #[arg(long, value_name = "RATE")]
    pub learning_rate: Option<String>,
    /// Maximum tree depth (0: none).
    #[arg(long, value_name = "DEPTH")]
    pub max_depth: Option<String>,
    /// Maximum leaves per tree (0: none); implies leaf-wise growth unless grow_policy is set.
    #[arg(long, value_name = "LEAVES")]
    pub max_leaves: Option<String>,
    /// Bins per feature, the missing bin included.
    #[arg(long, value_name = "BINS")]
    pub max_bin: Option<String>,
    /// Stop when the last validation metric has not improved for N rounds.
    #[arg(long, value_name = "ROUNDS")]
    pub early_stopping: Option<String>,
    /// Threads (0: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<String>,
    /// Device: cpu, wgpu or cuda, optionally with an index (`cuda:1`, `wgpu:0`), or a
    /// comma-separated list of one device per worker (`cuda:0,cuda:1`).
    #[arg(long)]
    pub device: Option<String>,
    /// In-process workers.
    #[arg(long, value_name = "N")]
    pub workers: Option<String>,
    /// How workers communicate: `in-process` (threads of this process, the default),
    /// `mpi`, one worker per MPI rank (`mpirun -np N sapwood train ... --collective mpi`),
    /// or `tcp`, one worker per process started on each host with `--rank`, `--world`,
    /// `--coordinator` and `--token`: each rank reads only its row groups, rank 0 writes.
    #[arg(long)]
    pub collective: Option<String>,
    /// `--collective tcp`: this process's rank, 0..world (rank 0 is the coordinator).
    #[arg(long)]
    pub rank: Option<usize>,
    /// `--collective tcp`: processes in the job.
    #[arg(long)]
    pub world: Option<usize>,
    /// `--collective tcp`: HOST:PORT where rank 0 listens and the other ranks connect.
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: Option<String>,
    /// `--collective tcp`: the job's secret, the same random string on every rank
    /// (e.g. `openssl rand -hex 16`); read from the environment variable SAPWOOD_TOKEN
    /// when not given (command lines are visible to other users).
    #[arg(long)]
    pub token: Option<String>,
    /// `--collective tcp`: the address this rank listens on (default: loopback when the
    /// coordinator is a loopback address, else every interface).
    #[arg(long, value_name = "IP")]
    pub bind: Option<std::net::IpAddr>,
    /// `--collective tcp`: the ports ranks above 0 may listen on, LO-HI (default: any
    /// free port).
    #[arg(long, value_name = "LO-HI")]
    pub ports: Option<String>,
    /// Any parameter as key=value (repeatable), e.g. --set lambda=2 --set grad_bits=8.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A TOML file of parameters (key = value), applied before the flags.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where to write the model (JSON).
    #[arg(long)]
    pub model: PathBuf,
    /// Where to write a JSON summary of the run.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
    /// Write a checkpoint here (atomically) every `--checkpoint-every` rounds.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Rounds between checkpoints (with --checkpoint).
    #[arg(long, default_value_t = 10)]
    pub checkpoint_every: usize,
    /// Continue from a checkpoint written by the same command; the model is the one an
    /// uninterrupted run saves, byte for byte.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Each row's base margin: training starts the row's margin there instead of at the
    /// model's base margin (XGBoost's base_margin); never a feature. Multiclass: one column
    /// per class, comma-separated, in class order.
    #[arg(long, value_delimiter = ',', value_name = "COLUMN")]
    pub base_margin: Vec<String>,
    /// Continue this model: replay its trees, bin the data with its cuts and add --rounds
    /// more rounds; parameters not given are the model's.
    #[arg(long, value_name = "MODEL")]
    pub init_model: Option<PathBuf>,
}

/// `sapwood predict`.
#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The model (JSON).
    #[arg(long)]
    pub model: PathBuf,
    /// Data to predict (.parquet or .csv).
    #[arg(long)]
    pub data: PathBuf,
    /// Where to write predictions (Parquet).
    #[arg(long)]
    pub out: PathBuf,
    /// Write raw margins instead of values or probabilities.
    #[arg(long)]
    pub raw: bool,
    /// Also write SHAP contributions: `contrib_<feature>` and `contrib_bias` columns
    /// (`contrib_<class>_<feature>` for multiclass), summing to the margin.
    #[arg(long)]
    pub contributions: bool,
    /// Also write the leaf each tree sends the row to: `leaf_<tree>` columns.
    #[arg(long)]
    pub leaf: bool,
    /// Columns copied to the output unchanged (comma-separated), e.g. an id.
    #[arg(long, value_delimiter = ',')]
    pub keep: Vec<String>,
    /// Use only the first N rounds (default: all, or through the best iteration).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Each row's base margin, replacing the model's (as given in training); multiclass:
    /// one column per class, comma-separated, in class order.
    #[arg(long, value_delimiter = ',', value_name = "COLUMN")]
    pub base_margin: Vec<String>,
    /// Where to write a JSON summary: rows, and seconds spent reading, binning, predicting,
    /// explaining and writing, apart.
    #[arg(long)]
    pub summary: Option<PathBuf>,
}

/// `sapwood eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The model (JSON).
    #[arg(long)]
    pub model: PathBuf,
    /// Labelled data (.parquet or .csv).
    #[arg(long)]
    pub data: PathBuf,
    /// Label column (default: the one used in training, if recorded, else `label`).
    #[arg(long)]
    pub label: Option<String>,
    /// Sample-weight column.
    #[arg(long)]
    pub weight: Option<String>,
    /// Metrics (comma-separated); default: the objective's.
    #[arg(long, value_delimiter = ',')]
    pub metric: Vec<String>,
    /// Use only the first N rounds.
    #[arg(long)]
    pub rounds: Option<usize>,
}

/// `sapwood inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The model (JSON).
    pub model: PathBuf,
    /// Also print the first N trees.
    #[arg(long, default_value_t = 0)]
    pub trees: usize,
    /// Print only the trees (all, or the first --trees N), as `text` or `json`, with feature
    /// names and thresholds in values, not bins.
    #[arg(long, value_parser = ["text", "json"])]
    pub dump: Option<String>,
}

/// `sapwood export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The model (Sapwood JSON).
    #[arg(long)]
    pub model: PathBuf,
    /// The target format: xgboost, lightgbm or onnx.
    #[arg(long)]
    pub format: String,
    /// Where to write the exported model (replaced atomically).
    #[arg(long)]
    pub out: PathBuf,
    /// Export the first N rounds (default: the rounds `predict` uses, through early
    /// stopping's best round).
    #[arg(long)]
    pub rounds: Option<usize>,
}
