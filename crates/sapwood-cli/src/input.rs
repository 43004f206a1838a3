//! Opening data files (Parquet or CSV) and streaming them as converted batches.

use std::path::Path;

use anyhow::Result;
use sapwood::{ClassLabel, Label};
use std::sync::Arc;

use sapwood_io::arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray};
use sapwood_io::{LabelColumn, ParquetSource, ReadOptions, Table};

/// A data file, read batch by batch (Parquet, by row group) or whole (CSV).
pub enum Source {
    /// A Parquet file.
    Parquet(ParquetSource),
    /// A CSV file with a header, read into memory.
    Csv(Table),
}

fn is_csv(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("tsv"))
}

impl Source {
    /// Opens `path`: CSV by its extension, Parquet otherwise (the footer is checked now).
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<Source> {
        if is_csv(path) {
            // asked every few thousand records: for the test hook, each ask is a batch
            let asked = std::cell::Cell::new(0usize);
            let stop = || {
                asked.set(asked.get() + 1);
                crate::signals::test_raise_at_batch(asked.get());
                crate::signals::received().is_some()
            };
            match sapwood_io::read_csv_until(path, opts, &stop) {
                Ok(t) => Ok(Source::Csv(t)),
                Err(sapwood_io::IoError::Stopped { .. }) => {
                    Err(crate::Interrupted(crate::signals::received()).into())
                }
                Err(e) => Err(e.into()),
            }
        } else {
            Ok(Source::Parquet(ParquetSource::open(path)?))
        }
    }

    /// Rows in the file.
    pub fn num_rows(&self) -> u64 {
        match self {
            Source::Parquet(p) => p.num_rows(),
            Source::Csv(t) => t.n_rows() as u64,
        }
    }

    /// Calls `f` on every batch, converted with `opts`.
    pub fn for_each(&self, opts: &ReadOptions, f: impl FnMut(Table) -> Result<()>) -> Result<()> {
        self.for_each_in(opts, &Shard::whole(self.num_rows()), f)
    }

    /// Calls `f` on every batch of one worker's share of the rows (an empty batch when the
    /// share is empty, so the columns are still known).
    pub fn for_each_in(
        &self,
        opts: &ReadOptions,
        shard: &Shard,
        mut f: impl FnMut(Table) -> Result<()>,
    ) -> Result<()> {
        self.for_each_copying(opts, shard, &[], |t, _| f(t))
    }

    /// Like [`Source::for_each_in`], also handing `f` a copy of the feature columns named
    /// in `copies` as they are in the file (Parquet) or as read (CSV: numbers or text): a
    /// reader gives every column one role, and a feature may also be wanted as itself
    /// (`predict --keep` of a feature column).
    pub fn for_each_copying(
        &self,
        opts: &ReadOptions,
        shard: &Shard,
        copies: &[String],
        mut f: impl FnMut(Table, Vec<(String, ArrayRef)>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Source::Csv(t) => {
                crate::signals::test_raise_at_batch(1);
                crate::Interrupted::check()?;
                if shard.rows.start == 0 && shard.rows.end == t.n_rows() as u64 {
                    let c = copies_of_features(t, copies);
                    return f(t.clone(), c);
                }
                let rows = shard.rows.start as usize..shard.rows.end as usize;
                let features = t.features.slice_rows(rows.clone());
                let features = sapwood::FeatureMatrix::new(
                    features.names().to_vec(),
                    features
                        .columns()
                        .iter()
                        .map(|c| match c {
                            sapwood::Column::Numeric(v) => {
                                sapwood::Column::Numeric(v.to_vec().into())
                            }
                            sapwood::Column::Categorical { codes, levels } => {
                                sapwood::Column::Categorical {
                                    codes: codes.to_vec().into(),
                                    levels: levels.clone(),
                                }
                            }
                            sapwood::Column::Sparse {
                                len,
                                start,
                                rows,
                                values,
                            } => sapwood::Column::Sparse {
                                len: *len,
                                start: *start,
                                rows: rows.to_vec().into(),
                                values: values.to_vec().into(),
                            },
                        })
                        .collect(),
                )?;
                let part = Table {
                    features,
                    label: t.label.as_ref().map(|l| match l {
                        LabelColumn::Numeric(v) => LabelColumn::Numeric(v[rows.clone()].to_vec()),
                        LabelColumn::Strings(v) => LabelColumn::Strings(v[rows.clone()].to_vec()),
                    }),
                    weight: t.weight.as_ref().map(|w| w[rows.clone()].to_vec()),
                    kept: t
                        .kept
                        .iter()
                        .map(|(n, a)| (n.clone(), a.slice(rows.start, rows.len())))
                        .collect(),
                };
                let c = copies_of_features(&part, copies);
                f(part, c)
            }
            Source::Parquet(p) => {
                let mut conv = p.converter(opts)?;
                let mut any = false;
                let raw = |batch: &RecordBatch| -> Vec<(String, ArrayRef)> {
                    copies
                        .iter()
                        .filter_map(|n| Some((n.clone(), batch.column_by_name(n)?.clone())))
                        .collect()
                };
                for (i, batch) in p
                    .batches(&conv.columns(), shard.row_groups.clone())?
                    .enumerate()
                {
                    crate::signals::test_raise_at_batch(i + 1);
                    // a stop signal is heard between batches, in every command that reads
                    crate::Interrupted::check()?;
                    any = true;
                    let batch = batch?;
                    f(conv.convert(&batch)?, raw(&batch))?;
                }
                if !any {
                    let empty = RecordBatch::new_empty(std::sync::Arc::new(p.schema().clone()));
                    f(conv.convert(&empty)?, raw(&empty))?;
                }
                Ok(())
            }
        }
    }

    /// The share of worker `rank` of `size`: whole row groups (Parquet) or an even slice
    /// of rows (CSV), contiguous and in order.
    pub fn shard(&self, rank: usize, size: usize) -> Shard {
        let (rank, size) = (rank as u64, size as u64);
        match self {
            Source::Csv(t) => {
                let n = t.n_rows() as u64;
                Shard {
                    rows: rank * n / size..(rank + 1) * n / size,
                    row_groups: None,
                }
            }
            Source::Parquet(p) => {
                let groups = p.row_group_rows();
                let total: u64 = groups.iter().sum();
                // a group belongs to the worker whose even share holds its first row
                let (mut start, mut mine) = (0u64, Vec::new());
                let mut rows: Option<std::ops::Range<u64>> = None;
                for (g, &n) in groups.iter().enumerate() {
                    if start * size / total.max(1) == rank {
                        mine.push(g);
                        rows = Some(rows.map_or(start..start + n, |r| r.start..start + n));
                    }
                    start += n;
                }
                Shard {
                    rows: rows.unwrap_or(0..0),
                    row_groups: Some(mine),
                }
            }
        }
    }
}

/// The feature columns of `t` named in `names`, as Arrow arrays: numbers as Float32, text
/// as Utf8, missing values as nulls.
fn copies_of_features(t: &Table, names: &[String]) -> Vec<(String, ArrayRef)> {
    names
        .iter()
        .filter_map(|n| {
            let j = t.features.names().iter().position(|m| m == n)?;
            let a: ArrayRef = match t.features.column(j) {
                c @ (sapwood::Column::Numeric(_) | sapwood::Column::Sparse { .. }) => {
                    let v = c.dense_values().unwrap_or_default();
                    Arc::new(Float32Array::from_iter(
                        v.iter().map(|&x| (!x.is_nan()).then_some(x)),
                    ))
                }
                sapwood::Column::Categorical { codes, levels } => Arc::new(StringArray::from_iter(
                    codes.iter().map(|&c| levels.get(c as usize)),
                )),
            };
            Some((n.clone(), a))
        })
        .collect()
}

/// The kind of values an Arrow type holds, as a model records them: text (a dictionary of
/// text too) as strings, so that exports keep `"17"` a string; a dictionary of other
/// values as categories.
fn input_type_of(t: &sapwood_io::arrow_schema::DataType) -> sapwood::InputType {
    use sapwood_io::arrow_schema::DataType as T;
    match t {
        T::Boolean => sapwood::InputType::Bool,
        T::Utf8 | T::LargeUtf8 | T::Utf8View => sapwood::InputType::Strings,
        T::Dictionary(_, values) => match input_type_of(values) {
            sapwood::InputType::Strings => sapwood::InputType::Strings,
            _ => sapwood::InputType::Text,
        },
        _ => sapwood::InputType::Number,
    }
}

/// What each of `model`'s features holds in the training file `path`: a Parquet column's
/// type, else (CSV, which has no booleans) numbers or text as the cuts say.
pub fn input_types(path: &Path, model: &sapwood::Model) -> Result<Vec<sapwood::InputType>> {
    let from_cuts = |j: usize| match model.cuts.feature(j) {
        sapwood::FeatureCuts::Categorical { .. } => sapwood::InputType::Text,
        sapwood::FeatureCuts::Numeric { .. } => sapwood::InputType::Number,
    };
    if is_csv(path) {
        return Ok((0..model.feature_names.len()).map(from_cuts).collect());
    }
    let p = ParquetSource::open(path)?;
    Ok(model
        .feature_names
        .iter()
        .enumerate()
        .map(|(j, n)| match p.schema().field_with_name(n) {
            Ok(f) => input_type_of(f.data_type()),
            Err(_) => from_cuts(j),
        })
        .collect())
}

/// Refuses a feature column whose values are booleans where the model was trained on
/// numbers, or numbers where it was trained on booleans: read as 0 and 1 they would be
/// predicted without a word, and wrongly. (Text against numbers is refused by the
/// categorical checks.) Models that do not record their input types are not checked.
pub fn check_input_types(path: &Path, source: &Source, model: &sapwood::Model) -> Result<()> {
    let (Some(types), Source::Parquet(p)) = (&model.input_types, source) else {
        return Ok(());
    };
    for (name, &trained) in model.feature_names.iter().zip(types) {
        let Ok(field) = p.schema().field_with_name(name) else {
            continue;
        };
        let given = input_type_of(field.data_type());
        let drift = matches!(
            (trained, given),
            (sapwood::InputType::Number, sapwood::InputType::Bool)
                | (sapwood::InputType::Bool, sapwood::InputType::Number)
        );
        if drift {
            return Err(crate::settings::Error(format!(
                "{}: column `{name}` holds {given} ({}), but the model was trained on {trained}: \
                 cast the column to the training type",
                path.display(),
                field.data_type()
            ))
            .into());
        }
    }
    Ok(())
}

/// Files up to this size are digested whole; larger ones by this many evenly spread
/// blocks of [`BLOCK`] and their tail (a Parquet footer with every chunk's offsets, sizes
/// and statistics): reading a whole file of many GiB on every rank would cost more than
/// the check is worth.
const WHOLE_UP_TO: u64 = 256 << 20;
const BLOCK: u64 = 1 << 20;

/// Bytes that stand for a data file's content, for the ranks of a job to compare: the
/// FNV-1a hash of each 1 MiB block of the file (every block up to 256 MiB; beyond, 256
/// evenly spread blocks and the last one, which holds a Parquet file's footer). Reading is
/// streamed; the result is 8 bytes a block.
pub fn content_footprint(path: &Path, _source: &Source) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| sapwood_io::IoError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.seek(SeekFrom::End(0)).map_err(io)?;
    let blocks = len.div_ceil(BLOCK);
    let starts: Vec<u64> = if len <= WHOLE_UP_TO {
        (0..blocks).map(|b| b * BLOCK).collect()
    } else {
        let mut v: Vec<u64> = (0..256u64).map(|i| i * (blocks / 256) * BLOCK).collect();
        v.push(len.saturating_sub(BLOCK));
        v
    };
    let mut out = len.to_le_bytes().to_vec();
    let mut buf = vec![0u8; BLOCK as usize];
    for start in starts {
        f.seek(SeekFrom::Start(start)).map_err(io)?;
        let want = BLOCK.min(len - start) as usize;
        f.read_exact(&mut buf[..want]).map_err(io)?;
        let h = buf[..want].iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
        });
        out.extend_from_slice(&h.to_le_bytes());
    }
    Ok(out)
}

/// The column names of a file in order, duplicates included (CSV: its header line).
pub fn column_names(path: &Path, source: &Source) -> Result<Vec<String>> {
    match source {
        Source::Parquet(p) => Ok(p
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()),
        Source::Csv(_) => {
            use std::io::BufRead;
            let file = std::fs::File::open(path).map_err(|source| sapwood_io::IoError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let mut header = String::new();
            for line in std::io::BufReader::new(file).lines() {
                let line = line.map_err(|source| sapwood_io::IoError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                if !line.trim().is_empty() {
                    header = line;
                    break;
                }
            }
            Ok(split_header(header.trim_start_matches('\u{feff}')))
        }
    }
}

/// Splits a CSV header line on commas outside double quotes.
fn split_header(line: &str) -> Vec<String> {
    let (mut names, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => names.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    names.push(cur.trim().to_string());
    names
}

/// Refuses a file where a column given a role (label, weight, kept column) is named twice:
/// which one is meant would be a guess.
pub fn check_unique_columns(path: &Path, source: &Source, roles: &[(&str, &str)]) -> Result<()> {
    let names = column_names(path, source)?;
    for (role, name) in roles {
        let n = names.iter().filter(|c| c == name).count();
        if n > 1 {
            return Err(crate::settings::Error(format!(
                "{}: {role} column `{name}` appears {n} times; rename the columns so it is one",
                path.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// One worker's rows of a file.
#[derive(Debug, Clone)]
pub struct Shard {
    /// Global row indices.
    pub rows: std::ops::Range<u64>,
    /// The Parquet row groups holding them (all when None).
    pub row_groups: Option<Vec<usize>>,
}

impl Shard {
    /// Every row.
    pub fn whole(n: u64) -> Self {
        Shard {
            rows: 0..n,
            row_groups: None,
        }
    }
}

/// A label column as the engine takes it; missing class labels are an error naming the row.
pub fn label_of(col: LabelColumn, first_row: usize, column: &str) -> Result<Label> {
    Ok(match col {
        LabelColumn::Numeric(v) => Label::Values(v),
        LabelColumn::Strings(s) => Label::Classes(
            s.into_iter()
                .enumerate()
                .map(|(i, x)| {
                    x.map(ClassLabel::Str)
                        .ok_or_else(|| sapwood::Error::InvalidLabel {
                            row: first_row + i,
                            value: "null".into(),
                            reason: format!("label column `{column}` has a missing value"),
                        })
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Reads the `--base-margin` columns of a batch (kept out of the features by the reader)
/// as row-major margins, one per column per row; a missing or non-finite value is an error
/// naming the file, column and row (counted in the whole file from `first_row`).
/// The kept column `name` of a batch (`role` names it in the error when it was not read).
fn kept_column<'a>(
    kept: &'a [(String, ArrayRef)],
    name: &str,
    role: &str,
    path: &Path,
) -> Result<&'a ArrayRef> {
    kept.iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| a)
        .ok_or_else(|| {
            crate::settings::Error(format!(
                "{}: {role} column `{name}` was not read",
                path.display()
            ))
            .into()
        })
}

pub fn base_margins_of(
    kept: &[(String, ArrayRef)],
    columns: &[String],
    first_row: usize,
    path: &Path,
) -> Result<Vec<f32>> {
    let k = columns.len();
    let mut out = Vec::new();
    for (c, name) in columns.iter().enumerate() {
        let array = kept_column(kept, name, "base margin", path)?;
        let values = numbers_of(array, first_row).map_err(|why| {
            crate::settings::Error(format!(
                "{}: base margin column `{name}`: {why}",
                path.display()
            ))
        })?;
        if c == 0 {
            out = vec![0f32; values.len() * k];
        }
        for (i, v) in values.into_iter().enumerate() {
            match v {
                Some(v) if v.is_finite() => out[i * k + c] = v,
                v => {
                    return Err(crate::settings::Error(format!(
                        "{}: base margin column `{name}`, row {}: {}; base margins must be \
                         finite numbers",
                        path.display(),
                        first_row + i,
                        v.map_or("missing".to_string(), |v| v.to_string()),
                    ))
                    .into())
                }
            }
        }
    }
    Ok(out)
}

/// A numeric column's values as f32 (None where null); text (a CSV column) is parsed.
/// The query ids of the kept column `name` in one batch: integers (or integral floats) as
/// they are, text mapped to one id per distinct value through `names` (shared by every
/// batch); a missing value is an error naming the row.
pub fn query_ids_of(
    kept: &[(String, ArrayRef)],
    name: &str,
    first_row: usize,
    path: &Path,
    names: &mut std::collections::HashMap<i64, String>,
) -> Result<Vec<i64>> {
    use sapwood_io::arrow_array::cast::AsArray;
    use sapwood_io::arrow_array::Array;
    use sapwood_io::arrow_schema::DataType as T;
    let bad = |row: usize, why: &str| -> anyhow::Error {
        crate::settings::Error(format!(
            "{}: group column `{name}`, row {row}: {why}",
            path.display()
        ))
        .into()
    };
    let array = kept_column(kept, name, "group", path)?;
    if let T::Utf8 = array.data_type() {
        let s = array.as_string::<i32>();
        let mut ids = Vec::with_capacity(s.len());
        for (i, x) in s.iter().enumerate() {
            let x = x.ok_or_else(|| bad(first_row + i, "missing; every row needs a query"))?;
            // a hash, not a count, so that MPI ranks reading different rows give a query
            // the same id (and can see one that spans two of them)
            let id = fnv1a(x.as_bytes()) as i64;
            match names.get(&id) {
                Some(seen) if seen != x => {
                    return Err(bad(
                        first_row + i,
                        &format!("query ids `{seen}` and `{x}` hash alike; rename one"),
                    ))
                }
                Some(_) => {}
                None => {
                    names.insert(id, x.to_string());
                }
            }
            ids.push(id);
        }
        return Ok(ids);
    }
    use sapwood_io::arrow_array::types::*;
    macro_rules! values {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|v| v as f64))
                .collect::<Vec<_>>()
        };
    }
    let values: Vec<Option<f64>> = match array.data_type() {
        T::Int8 => values!(Int8Type),
        T::Int16 => values!(Int16Type),
        T::Int32 => values!(Int32Type),
        T::Int64 => {
            // exact: ids beyond 2^53 must not merge through f64
            return array
                .as_primitive::<Int64Type>()
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.ok_or_else(|| bad(first_row + i, "missing; every row needs a query"))
                })
                .collect();
        }
        T::UInt8 => values!(UInt8Type),
        T::UInt16 => values!(UInt16Type),
        T::UInt32 => values!(UInt32Type),
        T::UInt64 => values!(UInt64Type),
        T::Float32 => values!(Float32Type),
        T::Float64 => values!(Float64Type),
        other => return Err(bad(first_row, &format!("{other} is not a query id type"))),
    };
    let mut ids = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        match v {
            Some(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 => ids.push(v as i64),
            Some(v) => return Err(bad(first_row + i, &format!("{v} is not a whole number"))),
            None => return Err(bad(first_row + i, "missing; every row needs a query")),
        }
    }
    Ok(ids)
}

/// Refuses a query whose rows are not contiguous, naming it by its value in the file (text
/// ids are hashed to numbers: the engine's own message would show the hash) and the row, as
/// the other row errors of the file do (0-based, the header not counted).
pub fn check_queries_contiguous(
    ids: &[i64],
    names: &std::collections::HashMap<i64, String>,
    first_row: u64,
    path: &Path,
    column: &str,
) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for i in 1..ids.len() {
        if ids[i] == ids[i - 1] {
            continue;
        }
        seen.insert(ids[i - 1]);
        if seen.contains(&ids[i]) {
            let id = names
                .get(&ids[i])
                .map_or_else(|| ids[i].to_string(), |n| format!("`{n}`"));
            return Err(crate::settings::Error(format!(
                "{}: group column `{column}`, row {}: query {id} appears again after other \
                 queries; the rows of a query must be contiguous (sort the file by `{column}`)",
                path.display(),
                first_row + i as u64
            ))
            .into());
        }
    }
    Ok(())
}

/// FNV-1a, 64 bits: a stable hash of a query id's text.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn numbers_of(array: &ArrayRef, first_row: usize) -> std::result::Result<Vec<Option<f32>>, String> {
    use sapwood_io::arrow_array::cast::AsArray;
    use sapwood_io::arrow_array::types::*;
    use sapwood_io::arrow_array::Array;
    use sapwood_io::arrow_schema::DataType as T;
    macro_rules! numbers {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|v| v as f32))
                .collect()
        };
    }
    Ok(match array.data_type() {
        T::Float32 => numbers!(Float32Type),
        T::Float64 => numbers!(Float64Type),
        T::Int8 => numbers!(Int8Type),
        T::Int16 => numbers!(Int16Type),
        T::Int32 => numbers!(Int32Type),
        T::Int64 => numbers!(Int64Type),
        T::UInt8 => numbers!(UInt8Type),
        T::UInt16 => numbers!(UInt16Type),
        T::UInt32 => numbers!(UInt32Type),
        T::UInt64 => numbers!(UInt64Type),
        T::Utf8 => {
            let s = array.as_string::<i32>();
            let mut v = Vec::with_capacity(s.len());
            for (i, x) in s.iter().enumerate() {
                v.push(match x.map(str::trim) {
                    None | Some("") => None,
                    Some(x) => Some(
                        x.parse::<f32>()
                            .map_err(|_| format!("row {}: `{x}` is not a number", first_row + i))?,
                    ),
                });
            }
            v
        }
        t => return Err(format!("type {t}, not a number")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sapwood_io::arrow_schema::DataType as T;

    #[test]
    fn text_columns_are_strings_and_other_dictionaries_categories() {
        let dict = |values: T| T::Dictionary(Box::new(T::Int32), Box::new(values));
        for (t, want) in [
            (T::Utf8, sapwood::InputType::Strings),
            (T::LargeUtf8, sapwood::InputType::Strings),
            (T::Utf8View, sapwood::InputType::Strings),
            (dict(T::Utf8), sapwood::InputType::Strings),
            (dict(T::LargeUtf8), sapwood::InputType::Strings),
            (dict(T::Int64), sapwood::InputType::Text),
            (T::Int64, sapwood::InputType::Number),
            (T::Float32, sapwood::InputType::Number),
            (T::Boolean, sapwood::InputType::Bool),
        ] {
            assert_eq!(input_type_of(&t), want, "{t:?}");
        }
    }
}
