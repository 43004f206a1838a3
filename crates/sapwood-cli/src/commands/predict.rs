//! `sapwood predict`: streams the data by row group and writes Parquet predictions.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use sapwood::{Booster, ClassLabel, Model, ObjectiveKind};
use sapwood_io::arrow_array::{ArrayRef, BooleanArray, Float32Array, Int64Array, StringArray};
use sapwood_io::arrow_schema::DataType;
use sapwood_io::{PredictionWriter, ReadOptions};
use serde_json::json;

use super::{categorical_features, check_categorical_types, check_rounds};
use crate::cli::PredictArgs;
use crate::input::{base_margins_of, check_unique_columns, Shard, Source};
use crate::settings;

/// The output columns after the kept ones: names and types.
fn output_fields(model: &Model, a: &PredictArgs, rounds: usize) -> Vec<(String, DataType)> {
    let mut f = Vec::new();
    if model.groups == 1 {
        f.push(("prediction".to_string(), DataType::Float32));
    } else if is_multi_output(model) {
        let prefix = output_prefix(model);
        f.extend(
            group_names(model)
                .iter()
                .map(|q| (format!("{prefix}{q}"), DataType::Float32)),
        );
    } else {
        f.push(("prediction".to_string(), label_type(model)));
        let prefix = if a.raw { "margin_" } else { "prob_" };
        f.extend(
            class_names(model)
                .iter()
                .map(|c| (format!("{prefix}{c}"), DataType::Float32)),
        );
    }
    if a.contributions {
        let features = model
            .feature_names
            .iter()
            .map(String::as_str)
            .chain(["bias"]);
        let groups: Vec<String> = if model.groups == 1 {
            vec![String::new()]
        } else {
            group_names(model).iter().map(|c| format!("{c}_")).collect()
        };
        for g in &groups {
            for name in features.clone() {
                f.push((format!("contrib_{g}{name}"), DataType::Float32));
            }
        }
    }
    if a.leaf {
        for t in 0..rounds * model.groups {
            f.push((format!("leaf_{t}"), DataType::Int64));
        }
    }
    f
}

/// Whether the model's outputs are values, not classes, though it has several: one per
/// quantile (`reg:quantileerror` with a list of `quantile_alpha`) or per output of a
/// custom objective.
fn is_multi_output(model: &Model) -> bool {
    model.groups > 1 && !model.params.objective.is_classification()
}

/// One name per output: its quantile for a multi-quantile model, its index for a custom
/// objective's, else its class.
fn group_names(model: &Model) -> Vec<String> {
    match model.params.objective {
        ObjectiveKind::QuantileError => model
            .params
            .quantile_alpha
            .iter()
            .map(|a| a.to_string())
            .collect(),
        _ if is_multi_output(model) => (0..model.groups).map(|g| g.to_string()).collect(),
        _ => class_names(model),
    }
}

/// The column prefix of a multi-output model's values.
fn output_prefix(model: &Model) -> &'static str {
    if model.params.objective == ObjectiveKind::QuantileError {
        "quantile_"
    } else {
        "margin_"
    }
}

fn kind_of(c: &ClassLabel) -> &'static str {
    match c {
        ClassLabel::Bool(_) => "bool",
        ClassLabel::Int(_) => "int",
        ClassLabel::Str(_) => "str",
    }
}

/// One distinct name per class: the class as written, or, when two classes of different
/// types write alike (`1` and "1"), every class prefixed with its type (`int:1`, `str:1`).
fn class_names(model: &Model) -> Vec<String> {
    let Some(classes) = &model.classes else {
        return (0..model.groups).map(|c| c.to_string()).collect();
    };
    let plain: Vec<String> = classes.iter().map(|c| c.to_string()).collect();
    let mut sorted = plain.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() == plain.len() {
        return plain;
    }
    classes
        .iter()
        .map(|c| format!("{}:{c}", kind_of(c)))
        .collect()
}

/// The type of the `prediction` column: the classes' type, or text (the class names) when
/// the classes mix types.
fn label_type(model: &Model) -> DataType {
    let Some(classes) = &model.classes else {
        return DataType::Int64;
    };
    let first = classes.first().map(kind_of);
    if classes.iter().any(|c| Some(kind_of(c)) != first) {
        return DataType::Utf8;
    }
    match classes.first() {
        Some(ClassLabel::Str(_)) => DataType::Utf8,
        Some(ClassLabel::Bool(_)) => DataType::Boolean,
        _ => DataType::Int64,
    }
}

/// The class label column of a batch of argmax class indices.
fn labels_array(model: &Model, names: &[String], best: &[usize]) -> ArrayRef {
    let class = |i: usize| {
        model
            .classes
            .as_ref()
            .map(|c| c[i].clone())
            .unwrap_or(ClassLabel::Int(i as i64))
    };
    match label_type(model) {
        DataType::Utf8 => Arc::new(StringArray::from_iter_values(
            best.iter().map(|&i| names[i].as_str()),
        )),
        DataType::Boolean => Arc::new(BooleanArray::from_iter(
            best.iter()
                .map(|&i| Some(matches!(class(i), ClassLabel::Bool(true)))),
        )),
        _ => Arc::new(Int64Array::from_iter_values(best.iter().map(
            |&i| match class(i) {
                ClassLabel::Int(v) => v,
                _ => i as i64,
            },
        ))),
    }
}

/// The same file, whether or not the second exists yet (it is compared by its directory).
fn same_file(a: &Path, b: &Path) -> bool {
    let full = |p: &Path| -> Option<std::path::PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new(".")).canonicalize().ok()?;
        Some(dir.join(p.file_name()?))
    };
    matches!((full(a), full(b)), (Some(x), Some(y)) if x == y)
}

/// Refuses outputs that would overwrite an input.
pub(crate) fn check_not_input(out: &Path, inputs: &[(&str, &Path)], flag: &str) -> Result<()> {
    for (what, input) in inputs {
        if same_file(out, input) {
            return Err(settings::Error(format!(
                "{flag} {}: that is the {what}; write the output to another file",
                out.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// Refuses an output named for another format (`p.csv`): predictions are written as
/// Parquet, and a CSV reader given Parquet bytes under a `.csv` name fails far from here.
/// Names without an extension (a FIFO, `/dev/stdout`) and `.parquet`/`.pq` are taken.
fn check_parquet_name(out: &Path) -> Result<()> {
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("csv" | "tsv" | "txt" | "json" | "jsonl" | "arrow" | "feather" | "npy") => {
            Err(settings::Error(format!(
                "--out {}: predictions are written as Parquet; name the file .parquet \
                 (this build writes no other format)",
                out.display()
            ))
            .into())
        }
        _ => Ok(()),
    }
}

/// Refuses `--keep` lists that name a column twice or an output column.
fn check_keep(keep: &[String], outputs: &[(String, DataType)]) -> Result<()> {
    for (i, k) in keep.iter().enumerate() {
        if keep[..i].contains(k) {
            return Err(settings::Error(format!("--keep names `{k}` twice")).into());
        }
        if outputs.iter().any(|(n, _)| n == k) {
            return Err(settings::Error(format!(
                "--keep {k}: the output already has a column `{k}` (the predictions); \
                 rename the input column"
            ))
            .into());
        }
    }
    Ok(())
}

/// Refuses `--base-margin` columns that are the model's features or named twice, and a
/// count that is not the model's outputs.
fn check_base_margin_columns(columns: &[String], model: &Model) -> Result<()> {
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(settings::Error(format!("--base-margin names `{c}` twice")).into());
        }
        if model.feature_names.contains(c) {
            return Err(settings::Error(format!(
                "--base-margin {c}: `{c}` is a feature of the model; a base margin is never a \
                 feature"
            ))
            .into());
        }
    }
    if !columns.is_empty() && columns.len() != model.groups {
        return Err(settings::Error(format!(
            "--base-margin: {} columns given but the model has {} outputs: give one column per \
             output (class), comma-separated",
            columns.len(),
            model.groups
        ))
        .into());
    }
    Ok(())
}

/// Runs `sapwood predict`.
pub fn run(a: PredictArgs) -> Result<()> {
    let start = Instant::now();
    check_output_paths(&a)?;
    let booster = Booster::load(&a.model)?;
    let model = booster.model();
    let rounds = check_rounds(a.rounds, model)?;
    let used = rounds.unwrap_or_else(|| model.default_rounds());
    let outputs = output_fields(model, &a, used);
    check_keep(&a.keep, &outputs)?;
    check_base_margin_columns(&a.base_margin, model)?;
    let (copies, keep) = columns_beside_features(&a, model);
    let opts = ReadOptions {
        features: model.feature_names.clone(),
        categorical: categorical_features(model),
        keep,
        ..Default::default()
    };
    let source = Source::open(&a.data, &opts)?;
    crate::input::check_input_types(&a.data, &source, model)?;
    let mut roles: Vec<(&str, &str)> = a.keep.iter().map(|k| ("kept", k.as_str())).collect();
    roles.extend(a.base_margin.iter().map(|c| ("base margin", c.as_str())));
    check_unique_columns(&a.data, &source, &roles)?;
    check_parquet_name(&a.out)?;
    sapwood::check_writable(&a.out)?;
    sapwood::remove_stale_temporaries(&a.out);
    let objective = model.objective();
    let k = model.groups;
    let names = class_names(model);
    let mut writer: Option<PredictionWriter> = None;
    // a FIFO's reader, awaited just before the output opens and let go once it is written
    let mut out_reader: Option<crate::fifos::Reader> = None;
    let mut rows = 0usize;
    let mut slices = 0usize;
    let mut time = Stages::default();
    let whole = Shard::whole(source.num_rows());
    let stream_start = Instant::now();
    source.for_each_copying(&opts, &whole, &copies, |t, copied| {
        let batch_start = Instant::now();
        check_categorical_types(model, &t.features, &a.data)?;
        let binned = model.bin(&t.features)?;
        let binned_at = Instant::now();
        time.bin += binned_at - batch_start;
        let n = t.n_rows();
        let base = if a.base_margin.is_empty() {
            None
        } else {
            Some(base_margins_of(&t.kept, &a.base_margin, rows, &a.data)?)
        };
        let margins = match &base {
            Some(b) => booster.predict_binned_from(&binned, used, b)?,
            None => model.predict_binned(&binned, used),
        };
        let predicted_at = Instant::now();
        time.predict += predicted_at - binned_at;
        // kept columns in the order --keep gave them
        let kept: Vec<(String, ArrayRef)> = a
            .keep
            .iter()
            .filter_map(|name| t.kept.iter().chain(&copied).find(|(n, _)| n == name))
            .cloned()
            .collect();
        let mut arrays: Vec<ArrayRef> = kept.iter().map(|(_, a)| a.clone()).collect();
        if writer.is_none() {
            let mut fields: Vec<(String, DataType)> = kept
                .iter()
                .map(|(n, a)| (n.clone(), a.data_type().clone()))
                .collect();
            fields.extend(outputs.iter().cloned());
            out_reader = Some(crate::fifos::await_reader(&a.out)?);
            writer = Some(PredictionWriter::create(&a.out, &fields)?);
        }
        arrays.extend(value_columns(model, &names, margins, a.raw));
        let explain_start = Instant::now();
        if a.contributions {
            let c = contributions(model, &binned, used, &mut slices)?;
            arrays.extend(contribution_columns(model, c, base.as_deref()));
        }
        if a.leaf {
            arrays.extend(leaf_columns(model, &binned, used));
        }
        let write_start = Instant::now();
        time.explain += write_start - explain_start;
        time.transform += explain_start - predicted_at;
        writer.as_mut().expect("created above").write(arrays)?;
        time.write += write_start.elapsed();
        rows += n;
        time.batches += batch_start.elapsed();
        Ok(())
    })?;
    let streamed = stream_start.elapsed();
    let writer = match writer {
        Some(w) => w,
        // no rows: still write a file with the right columns
        None => {
            let kept: Vec<(String, DataType)> =
                a.keep.iter().map(|n| (n.clone(), DataType::Utf8)).collect();
            let mut fields = kept;
            fields.extend(outputs.iter().cloned());
            out_reader = Some(crate::fifos::await_reader(&a.out)?);
            PredictionWriter::create(&a.out, &fields)?
        }
    };
    let finish_start = Instant::now();
    writer.finish()?;
    drop(out_reader);
    time.write += finish_start.elapsed();
    // reading is what the stream took beyond the batches' own work
    time.read = streamed.saturating_sub(time.batches);
    let what = written(objective.kind(), a.raw);
    eprintln!("wrote {what} for {rows} rows to {}", a.out.display());
    if let Some(path) = &a.summary {
        let counts = [rows, used, used * k];
        write_summary(path, counts, start.elapsed(), &time)?;
    }
    Ok(())
}

/// What the output's value columns hold, in words.
fn written(kind: ObjectiveKind, raw: bool) -> &'static str {
    match (kind, raw) {
        (_, true) => "margins",
        (ObjectiveKind::Logistic, _) => "probabilities",
        (k, _) if k.is_multiclass() => "classes and probabilities",
        (k, _) if k.has_log_link() => "means",
        _ => "values",
    }
}

/// The columns read besides the features: kept columns that are features (read as
/// features and copied out), and the other kept and base-margin columns (never read as
/// features).
fn columns_beside_features(a: &PredictArgs, model: &Model) -> (Vec<String>, Vec<String>) {
    let (copies, mut keep): (Vec<String>, Vec<String>) = a
        .keep
        .iter()
        .cloned()
        .partition(|k| model.feature_names.contains(k));
    for c in &a.base_margin {
        if !keep.contains(c) {
            keep.push(c.clone());
        }
    }
    (copies, keep)
}

/// Refuses an output (`--out`, `--summary`) that is one of the inputs, and a summary that
/// cannot be written, before any work.
fn check_output_paths(a: &PredictArgs) -> Result<()> {
    check_not_input(
        &a.out,
        &[("--data file", &a.data), ("--model file", &a.model)],
        "--out",
    )?;
    if let Some(s) = &a.summary {
        let inputs = [
            ("--data file", a.data.as_path()),
            ("--model file", a.model.as_path()),
            ("--out file", a.out.as_path()),
        ];
        check_not_input(s, &inputs, "--summary")?;
        sapwood::check_writable(s)?;
    }
    Ok(())
}

/// The prediction columns of a batch's margins: one value per row (transformed unless
/// `raw`), the quantiles of a multi-output model, or a class column and one probability (or
/// margin) column per class.
fn value_columns(model: &Model, names: &[String], margins: Vec<f32>, raw: bool) -> Vec<ArrayRef> {
    let (objective, k) = (model.objective(), model.groups);
    let n = margins.len() / k.max(1);
    let column = |values: &[f32], j: usize| -> ArrayRef {
        Arc::new(Float32Array::from_iter_values(
            (0..n).map(|i| values[i * k + j]),
        ))
    };
    if k == 1 {
        let v = if raw {
            margins
        } else {
            objective.transform(&margins)
        };
        return vec![Arc::new(Float32Array::from(v))];
    }
    if is_multi_output(model) {
        // identity link: margins are the predicted quantiles (or custom outputs)
        return (0..k).map(|q| column(&margins, q)).collect();
    }
    let values = if raw {
        margins.clone()
    } else {
        // the class column holds multi:softmax's prediction; these its probabilities
        objective.class_probabilities(&margins)
    };
    let best: Vec<usize> = margins.chunks_exact(k).map(sapwood::argmax).collect();
    let mut arrays = vec![labels_array(model, names, &best)];
    arrays.extend((0..k).map(|c| column(&values, c)));
    arrays
}

/// One column per output group and feature (then the bias) of SHAP contributions; with
/// row base margins, the bias holds the row's own rather than the model's.
fn contribution_columns(model: &Model, mut c: Vec<f64>, base: Option<&[f32]>) -> Vec<ArrayRef> {
    let k = model.groups;
    let side = model.feature_names.len() + 1;
    let width = k * side;
    if let Some(b) = base {
        for (i, chunk) in c.chunks_mut(side).enumerate() {
            chunk[side - 1] += b[i] as f64 - model.base_margin[i % k] as f64;
        }
    }
    let n = c.len() / width.max(1);
    (0..width)
        .map(|j| -> ArrayRef {
            Arc::new(Float32Array::from_iter_values(
                (0..n).map(|i| c[i * width + j] as f32),
            ))
        })
        .collect()
}

/// One column per tree of each row's leaf index.
fn leaf_columns(model: &Model, binned: &sapwood::BinnedMatrix, rounds: usize) -> Vec<ArrayRef> {
    let trees = rounds * model.groups;
    let n = binned.n_rows();
    let l = sapwood::explain::leaf_indices(model, binned, rounds);
    (0..trees)
        .map(|t| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| l[i * trees + t] as i64),
            ))
        })
        .collect()
}

/// Writes `--summary`: rows, rounds and trees (`counts`), each stage's seconds, the
/// prediction rate and the peak memory.
fn write_summary(path: &Path, counts: [usize; 3], total: Duration, time: &Stages) -> Result<()> {
    let [rows, rounds, trees] = counts;
    let secs = |d: Duration| d.as_secs_f64();
    let summary = json!({
        "rows": rows,
        "rounds": rounds,
        "trees": trees,
        "seconds": {
            "total": secs(total),
            "read": secs(time.read),
            "bin": secs(time.bin),
            "predict": secs(time.predict),
            "transform": secs(time.transform),
            "explain": secs(time.explain),
            "write": secs(time.write),
        },
        "predict_rows_per_second": rows as f64 / secs(time.predict).max(1e-9),
        "peak_memory_mib": super::peak_memory_mib(),
    });
    sapwood::remove_stale_temporaries(path);
    let _reader = crate::fifos::await_reader(path)?;
    sapwood::write_atomic(path, serde_json::to_string_pretty(&summary)?.as_bytes())?;
    Ok(())
}

/// TreeSHAP steps (see `sapwood::explain::work_per_row`) explained between two looks at
/// the signal flag: about 0.2 s of one core of a 2-core AMD Zen 4 (December 2026). SHAP
/// values cost rows × trees × leaves × depth², so a batch of a large model (400 trees of
/// depth 10: 15 ms a row) is explained in slices, and a signal is heard between them.
const SLICE_WORK: u64 = 1 << 29;

/// The SHAP contributions of every row of `binned` (as `sapwood::explain::contributions`),
/// stopping between slices of rows when a signal asks to; `slices` counts them for the
/// test hook.
fn contributions(
    model: &Model,
    binned: &sapwood::BinnedMatrix,
    rounds: usize,
    slices: &mut usize,
) -> Result<Vec<f64>, crate::Interrupted> {
    let n = binned.n_rows();
    // at least a row per core, so that slicing never idles a core
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let work = sapwood::explain::work_per_row(model, rounds).max(1);
    let step = usize::try_from(SLICE_WORK / work)
        .unwrap_or(usize::MAX)
        .clamp(cores, 1 << 14);
    let mut out = Vec::new();
    for start in (0..n).step_by(step) {
        *slices += 1;
        crate::signals::test_raise_at_slice(*slices);
        crate::Interrupted::check()?;
        let rows = binned.slice_rows(start..(start + step).min(n));
        out.extend(sapwood::explain::contributions(model, &rows, rounds));
    }
    Ok(out)
}

/// Time spent in each stage of `sapwood predict`, summed over the batches.
#[derive(Debug, Default)]
struct Stages {
    /// Reading and decoding the input (the stream's time outside the batches' work).
    read: Duration,
    /// Binning the features with the model's cuts.
    bin: Duration,
    /// Walking the trees: the margins.
    predict: Duration,
    /// Margins to outputs (probabilities, classes) and output columns.
    transform: Duration,
    /// SHAP contributions and leaf indices, when asked for.
    explain: Duration,
    /// Writing the Parquet output.
    write: Duration,
    /// Everything done with the batches once read.
    batches: Duration,
}
