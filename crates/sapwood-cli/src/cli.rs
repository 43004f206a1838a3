//! Command-line definitions (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Gradient-boosted decision trees with bit-identical models on every backend.
#[derive(Debug, Parser)]
#[command(
    name = "sapwood",
    version,
    about,
    after_help = "Examples:
  sapwood train --data train.parquet --valid test.parquet --label y --objective binary:logistic --model model.json
  sapwood predict --model model.json --data test.parquet --out predictions.parquet
  sapwood params learning_rate"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a model on a Parquet or CSV file.
    #[command(after_help = "Examples:
  sapwood train --data train.parquet --valid test.parquet --label y --objective binary:logistic --rounds 200 --model model.json
  sapwood train --data train.csv --label price --set max_leaves=63 --set lambda=2 --valid valid.csv --early-stopping 20 --model model.json
  mpirun -np 4 sapwood train --data train.parquet --label y --collective mpi --model model.json")]
    Train(Box<TrainArgs>),
    /// Write predictions of a model for a Parquet or CSV file.
    #[command(after_help = "Examples:
  sapwood predict --model model.json --data test.parquet --out predictions.parquet
  sapwood predict --model model.json --data test.csv --out explained.parquet --contributions --keep id")]
    Predict(PredictArgs),
    /// Evaluate a model on labelled data.
    #[command(after_help = "Examples:
  sapwood eval --model model.json --data test.parquet
  sapwood eval --model model.json --data test.parquet --metric auc,logloss --rounds 50
  sapwood eval --model ranker.json --data test.parquet --group query --metric ndcg@10")]
    Eval(EvalArgs),
    /// Describe a model: trees, features, importance, parameters.
    #[command(after_help = "Examples:
  sapwood inspect model.json
  sapwood inspect model.json --dump json --trees 2")]
    Inspect(InspectArgs),
    /// Write a model in another library's format (XGBoost JSON, LightGBM text, ONNX).
    #[command(after_help = "Examples:
  sapwood export --model model.json --format xgboost --out model.xgb.json
  sapwood export --model model.json --format lightgbm --out model.txt
  sapwood export --model model.json --format onnx --out model.onnx")]
    Export(ExportArgs),
    /// List the parameters and run options: aliases, default, values, what each does.
    #[command(after_help = "Examples:
  sapwood params
  sapwood params eta
  sapwood params --json")]
    Params(ParamsArgs),
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
    /// Objective, e.g. reg:squarederror, binary:logistic, multi:softprob, count:poisson,
    /// rank:ndcg or survival:cox (`sapwood params objective` lists them all).
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
    /// Maximum leaves per tree (0: none): a cap under depth-wise growth; leaf-wise growth
    /// (LightGBM's) is `--set grow_policy=lossguide`.
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
    /// Query id column, for ranking metrics (the rows of a query contiguous); without it
    /// the whole file is one query.
    #[arg(long)]
    pub group: Option<String>,
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

/// `sapwood params`.
#[derive(Debug, Args)]
pub struct ParamsArgs {
    /// Show only this parameter (its name or an alias such as `eta` or `num_leaves`).
    pub name: Option<String>,
    /// Print JSON: one object per parameter with name, aliases, default, kind, range,
    /// applies, about and run_option.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn every_flag_and_subcommand_is_documented_with_examples() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        let mut commands = vec![cli.clone()];
        commands.extend(cli.get_subcommands().cloned());
        for cmd in &commands {
            let name = cmd.get_name().to_string();
            let examples = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let lines = examples.lines().filter(|l| l.contains("sapwood ")).count();
            assert!(
                examples.starts_with("Examples:") && (2..=3).contains(&lines),
                "`{name}` --help must end with two or three example lines, not {examples:?}"
            );
            if name != "sapwood" {
                assert!(
                    examples.contains(&format!("sapwood {name}")),
                    "`{name}`'s examples must run `sapwood {name}`"
                );
            }
            assert!(cmd.get_about().is_some(), "`{name}` has no description");
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(
                    !help.trim().is_empty(),
                    "`sapwood {name}`'s `{id}` has no help text (a doc comment): the CLI \
                     reference would not say what it does"
                );
            }
        }
    }
}
