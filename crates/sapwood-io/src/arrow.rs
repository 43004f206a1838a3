//! Arrow record batches to Sapwood columns.
//!
//! Numbers of every width (nulls become NaN) and booleans are numeric features; strings and
//! dictionaries are categorical. A [`Converter`] keeps one level dictionary per categorical
//! column across batches, so codes stay consistent while a file is streamed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, Schema};
use sapwood_core::data::{Column, FeatureMatrix, MISSING_CATEGORY};

use crate::guard::guarded;
use crate::{IoError, LabelColumn, ReadOptions, Table};

/// What a column is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Feature,
    Label,
    Weight,
    Keep,
}

/// Level names seen so far in one categorical column, in first-seen order.
#[derive(Debug, Default, Clone)]
struct Levels {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Levels {
    fn code(&mut self, s: &str) -> u32 {
        if let Some(&c) = self.index.get(s) {
            return c;
        }
        let c = self.names.len() as u32;
        self.names.push(s.to_string());
        self.index.insert(s.to_string(), c);
        c
    }
}

#[derive(Debug, Clone)]
struct Plan {
    name: String,
    role: Role,
    categorical: bool,
    levels: Levels,
}

/// Converts batches of one file into feature columns, label, weight and kept columns.
#[derive(Debug, Clone)]
pub struct Converter {
    path: PathBuf,
    plans: Vec<Plan>,
}

fn is_numeric(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Boolean
    )
}

fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_text(v) || is_numeric(v),
        _ => false,
    }
}

fn prim<T: ArrowPrimitiveType>(a: &dyn Array, f: impl Fn(T::Native) -> f32) -> Vec<f32> {
    let p = a.as_primitive::<T>();
    match p.nulls() {
        None => p.values().iter().map(|&v| f(v)).collect(),
        // mostly null (sparse data written as columns): the values, found a set bit at a
        // time, cost their number rather than the rows'
        Some(n) if 2 * n.null_count() > n.len() => {
            let (values, mut out) = (p.values(), vec![f32::NAN; p.len()]);
            for i in n.valid_indices() {
                out[i] = f(values[i]);
            }
            out
        }
        Some(n) => p
            .values()
            .iter()
            .zip(n.iter())
            .map(|(&v, ok)| if ok { f(v) } else { f32::NAN })
            .collect(),
    }
}

/// A column is read as its entries alone ([`Column::Sparse`]) where at most one row in
/// this many holds a value: a wide table of one-hot or text-like columns written to
/// Parquet, nearly all null, then costs its values rather than its rows (and may be
/// binned by column, as a sparse matrix from Python is). So is every feature column of a
/// batch whose feature columns are all numeric and hold values in at most one cell in
/// this many: a text table's commonest terms are in most rows, and read dense they would
/// keep the whole matrix from being binned by column. (A boolean or categorical feature
/// keeps the matrix row-major anyway, and each column then follows its own share.)
const SPARSE_SHARE: usize = 8;

/// The rows holding a value and their values, where few rows hold one ([`SPARSE_SHARE`])
/// or `any` number do.
fn prim_entries<T: ArrowPrimitiveType>(
    a: &dyn Array,
    f: impl Fn(T::Native) -> f32,
    any: bool,
) -> Option<(Vec<u32>, Vec<f32>)> {
    let p = a.as_primitive::<T>();
    if p.len() > u32::MAX as usize {
        return None;
    }
    let values = p.values();
    match p.nulls() {
        Some(n) => {
            let held = p.len() - n.null_count();
            if !any && held.checked_mul(SPARSE_SHARE)? > p.len() {
                return None;
            }
            Some(n.valid_indices().map(|i| (i as u32, f(values[i]))).unzip())
        }
        None if any => Some(
            values
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as u32, f(v)))
                .unzip(),
        ),
        None => None,
    }
}

/// A numeric array's entries (see [`prim_entries`]), or None.
fn entries(a: &dyn Array, any: bool) -> Option<(Vec<u32>, Vec<f32>)> {
    match a.data_type() {
        DataType::Float16 => prim_entries::<Float16Type>(a, |v| v.to_f32(), any),
        DataType::Float32 => prim_entries::<Float32Type>(a, |v| v, any),
        DataType::Float64 => prim_entries::<Float64Type>(a, |v| v as f32, any),
        DataType::Int8 => prim_entries::<Int8Type>(a, |v| v as f32, any),
        DataType::Int16 => prim_entries::<Int16Type>(a, |v| v as f32, any),
        DataType::Int32 => prim_entries::<Int32Type>(a, |v| v as f32, any),
        DataType::Int64 => prim_entries::<Int64Type>(a, |v| v as f32, any),
        DataType::UInt8 => prim_entries::<UInt8Type>(a, |v| v as f32, any),
        DataType::UInt16 => prim_entries::<UInt16Type>(a, |v| v as f32, any),
        DataType::UInt32 => prim_entries::<UInt32Type>(a, |v| v as f32, any),
        DataType::UInt64 => prim_entries::<UInt64Type>(a, |v| v as f32, any),
        _ => None,
    }
}

/// Whether [`entries`] reads arrays of this type: the numeric ones but booleans.
fn has_entries(t: &DataType) -> bool {
    is_numeric(t) && *t != DataType::Boolean
}

/// Numeric values of an array (nulls are NaN), or None for non-numeric types.
fn numbers(a: &dyn Array) -> Option<Vec<f32>> {
    Some(match a.data_type() {
        DataType::Float16 => prim::<Float16Type>(a, |v| v.to_f32()),
        DataType::Float32 => prim::<Float32Type>(a, |v| v),
        DataType::Float64 => prim::<Float64Type>(a, |v| v as f32),
        DataType::Int8 => prim::<Int8Type>(a, |v| v as f32),
        DataType::Int16 => prim::<Int16Type>(a, |v| v as f32),
        DataType::Int32 => prim::<Int32Type>(a, |v| v as f32),
        DataType::Int64 => prim::<Int64Type>(a, |v| v as f32),
        DataType::UInt8 => prim::<UInt8Type>(a, |v| v as f32),
        DataType::UInt16 => prim::<UInt16Type>(a, |v| v as f32),
        DataType::UInt32 => prim::<UInt32Type>(a, |v| v as f32),
        DataType::UInt64 => prim::<UInt64Type>(a, |v| v as f32),
        DataType::Boolean => {
            let b = a.as_boolean();
            (0..b.len())
                .map(|i| {
                    if b.is_null(i) {
                        f32::NAN
                    } else {
                        b.value(i) as u8 as f32
                    }
                })
                .collect()
        }
        _ => return None,
    })
}

/// Integers as their exact decimal text (never through a float, so 16777217 and 2^62
/// stay themselves); None where null.
fn exact<T: ArrowPrimitiveType>(a: &dyn Array) -> Vec<Option<String>>
where
    T::Native: ToString,
{
    a.as_primitive::<T>()
        .iter()
        .map(|v| v.map(|v| v.to_string()))
        .collect()
}

/// Floats as text in their own precision; None where null.
fn floats<T: ArrowPrimitiveType>(
    a: &dyn Array,
    text: impl Fn(T::Native) -> String,
) -> Vec<Option<String>> {
    a.as_primitive::<T>().iter().map(|v| v.map(&text)).collect()
}

/// A float level name: whole numbers without a fraction (so they read as the data does),
/// others as `shortest`, the shortest text that reads back as the same value.
fn float_text(x: f64, shortest: String) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        shortest
    }
}

/// Each value as text (None where null): strings as they are, numbers formatted exactly.
fn texts(a: &dyn Array) -> Option<Vec<Option<String>>> {
    let n = a.len();
    let text = |i: usize, f: &dyn Fn(usize) -> String| if a.is_null(i) { None } else { Some(f(i)) };
    Some(match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            (0..n)
                .map(|i| text(i, &|i| s.value(i).to_string()))
                .collect()
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            (0..n)
                .map(|i| text(i, &|i| s.value(i).to_string()))
                .collect()
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            (0..n)
                .map(|i| text(i, &|i| s.value(i).to_string()))
                .collect()
        }
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let values = texts(d.values().as_ref())?;
            if values.is_empty() {
                // no dictionary (a file with no rows): normalized_keys would panic
                return Some(vec![None; n]);
            }
            let keys = d.normalized_keys();
            (0..n)
                .map(|i| {
                    if a.is_null(i) {
                        None
                    } else {
                        values.get(keys[i]).cloned().flatten()
                    }
                })
                .collect()
        }
        DataType::Boolean => {
            let b = a.as_boolean();
            (0..n)
                .map(|i| text(i, &|i| b.value(i).to_string()))
                .collect()
        }
        DataType::Int8 => exact::<Int8Type>(a),
        DataType::Int16 => exact::<Int16Type>(a),
        DataType::Int32 => exact::<Int32Type>(a),
        DataType::Int64 => exact::<Int64Type>(a),
        DataType::UInt8 => exact::<UInt8Type>(a),
        DataType::UInt16 => exact::<UInt16Type>(a),
        DataType::UInt32 => exact::<UInt32Type>(a),
        DataType::UInt64 => exact::<UInt64Type>(a),
        DataType::Float16 => {
            floats::<Float16Type>(a, |v| float_text(v.to_f32().into(), v.to_string()))
        }
        DataType::Float32 => floats::<Float32Type>(a, |v| float_text(v.into(), v.to_string())),
        DataType::Float64 => floats::<Float64Type>(a, |v| float_text(v, v.to_string())),
        _ => return None,
    })
}

impl Converter {
    /// Plans the conversion of a file with `schema`: which column is a feature, the label,
    /// the weight or kept as is; checks that every named column exists and is usable.
    pub fn new(path: &Path, schema: &Schema, opts: &ReadOptions) -> Result<Self, IoError> {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let missing = |column: &str| IoError::MissingColumn {
            path: path.to_path_buf(),
            column: column.to_string(),
            available: names.join(", "),
        };
        let named = opts
            .label
            .iter()
            .chain(&opts.weight)
            .chain(&opts.categorical)
            .chain(&opts.drop)
            .chain(&opts.features)
            .chain(&opts.keep);
        for n in named {
            if !names.contains(&n.as_str()) {
                return Err(missing(n));
            }
        }
        let mut plans = Vec::new();
        for field in schema.fields() {
            let name = field.name().clone();
            let role = if opts.label.as_ref() == Some(&name) {
                Role::Label
            } else if opts.weight.as_ref() == Some(&name) {
                Role::Weight
            } else if opts.keep.contains(&name) {
                Role::Keep
            } else if opts.drop.contains(&name)
                || (!opts.features.is_empty() && !opts.features.contains(&name))
            {
                continue;
            } else {
                Role::Feature
            };
            let t = field.data_type();
            let categorical = match role {
                Role::Feature if opts.categorical.contains(&name) => {
                    if !is_numeric(t) && !is_text(t) {
                        return Err(unsupported(path, &name, t));
                    }
                    true
                }
                Role::Feature if is_text(t) => true,
                Role::Feature if is_numeric(t) => false,
                Role::Feature => return Err(unsupported(path, &name, t)),
                Role::Weight if !is_numeric(t) => {
                    return Err(IoError::Column {
                        path: path.to_path_buf(),
                        column: name,
                        reason: format!("the weight column has type {t}, not a number"),
                    })
                }
                Role::Label if !is_numeric(t) && !is_text(t) => {
                    return Err(IoError::Column {
                        path: path.to_path_buf(),
                        column: name,
                        reason: format!(
                            "the label column has type {t}; labels must be numbers, \
                             booleans or strings"
                        ),
                    })
                }
                _ => false,
            };
            plans.push(Plan {
                name,
                role,
                categorical,
                levels: Levels::default(),
            });
        }
        if !plans.iter().any(|p| p.role == Role::Feature) {
            return Err(IoError::Invalid {
                path: path.to_path_buf(),
                reason: "no feature columns are left".into(),
            });
        }
        Ok(Converter {
            path: path.to_path_buf(),
            plans,
        })
    }

    /// The columns the conversion reads, in file order.
    pub fn columns(&self) -> Vec<String> {
        self.plans.iter().map(|p| p.name.clone()).collect()
    }

    /// The feature names, in file order.
    pub fn feature_names(&self) -> Vec<String> {
        self.plans
            .iter()
            .filter(|p| p.role == Role::Feature)
            .map(|p| p.name.clone())
            .collect()
    }

    /// Converts one batch. Columns are found by name, so projected batches work.
    pub fn convert(&mut self, batch: &RecordBatch) -> Result<Table, IoError> {
        let path = self.path.clone();
        // by name once a batch: looking each of 5,000 columns up along the schema was a
        // tenth of a wide file's run
        let schema = batch.schema();
        let mut at: HashMap<&str, usize> = HashMap::with_capacity(schema.fields().len());
        for (i, f) in schema.fields().iter().enumerate() {
            // the first of a repeated name, as a lookup along the schema finds
            at.entry(f.name().as_str()).or_insert(i);
        }
        let column = |name: &str| -> Result<&ArrayRef, IoError> {
            at.get(name)
                .map(|&i| batch.column(i))
                .ok_or_else(|| IoError::MissingColumn {
                    path: path.clone(),
                    column: name.to_string(),
                    available: batch
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        };
        // every feature column read as its entries where they are all numeric and hold a
        // value in at most one cell in SPARSE_SHARE (null counts are known without a pass)
        let (mut cells, mut held, mut numeric) = (0usize, 0usize, true);
        for plan in self.plans.iter().filter(|p| p.role == Role::Feature) {
            let a = column(&plan.name)?;
            numeric &= !plan.categorical && has_entries(a.data_type());
            cells += a.len();
            held += a.len() - a.null_count();
        }
        let sparse_batch = numeric && cells > 0 && held <= cells / SPARSE_SHARE;
        let (mut names, mut cols) = (Vec::new(), Vec::new());
        let (mut label, mut weight, mut kept) = (None, None, Vec::new());
        for plan in &mut self.plans {
            let a = column(&plan.name)?;
            let name = plan.name.clone();
            // corrupt arrays could make arrow panic: that is an error naming the column
            guarded(|| -> Result<(), IoError> {
                match plan.role {
                    Role::Keep => kept.push((plan.name.clone(), a.clone())),
                    Role::Weight => {
                        weight = Some(
                            numbers(a.as_ref())
                                .ok_or_else(|| not_a_number(&path, &plan.name, a.data_type()))?,
                        )
                    }
                    Role::Label => {
                        label = Some(match numbers(a.as_ref()) {
                            Some(v) => LabelColumn::Numeric(v),
                            None => LabelColumn::Strings(
                                texts(a.as_ref())
                                    .ok_or_else(|| unsupported(&path, &plan.name, a.data_type()))?,
                            ),
                        })
                    }
                    Role::Feature if plan.categorical => {
                        let t = texts(a.as_ref())
                            .ok_or_else(|| unsupported(&path, &plan.name, a.data_type()))?;
                        let codes: Vec<u32> = t
                            .iter()
                            .map(|v| {
                                v.as_deref()
                                    .map_or(MISSING_CATEGORY, |s| plan.levels.code(s))
                            })
                            .collect();
                        names.push(plan.name.clone());
                        cols.push(Column::Categorical {
                            codes: Cow::Owned(codes),
                            levels: plan.levels.names.clone(),
                        });
                    }
                    Role::Feature => {
                        let col = match entries(a.as_ref(), sparse_batch) {
                            Some((rows, values)) => Column::Sparse {
                                len: a.len(),
                                start: 0,
                                rows: Cow::Owned(rows),
                                values: Cow::Owned(values),
                            },
                            None => Column::Numeric(Cow::Owned(
                                numbers(a.as_ref())
                                    .ok_or_else(|| unsupported(&path, &plan.name, a.data_type()))?,
                            )),
                        };
                        names.push(plan.name.clone());
                        cols.push(col);
                    }
                }
                Ok(())
            })
            .map_err(|panic| IoError::Column {
                path: path.clone(),
                column: name,
                reason: format!("the Arrow data cannot be read ({panic}); it is probably corrupt"),
            })??;
        }
        let features = FeatureMatrix::new(names, cols).map_err(|source| IoError::Data {
            path: path.clone(),
            source,
        })?;
        Ok(Table {
            features,
            label,
            weight,
            kept,
        })
    }
}

fn not_a_number(path: &Path, name: &str, t: &DataType) -> IoError {
    IoError::Column {
        path: path.to_path_buf(),
        column: name.to_string(),
        reason: format!("the weight column has type {t}, not a number"),
    }
}

fn unsupported(path: &Path, name: &str, t: &DataType) -> IoError {
    IoError::Column {
        path: path.to_path_buf(),
        column: name.to_string(),
        reason: format!(
            "type {t}, which Sapwood cannot use as a feature (drop it with --drop {name})"
        ),
    }
}

/// Converts whole batches at once (for data already in memory, e.g. from Python).
pub fn table_from_arrow(
    schema: &Schema,
    batches: &[RecordBatch],
    opts: &ReadOptions,
) -> Result<Table, IoError> {
    let path = Path::new("<arrow>");
    let mut conv = Converter::new(path, schema, opts)?;
    let parts = batches
        .iter()
        .map(|b| conv.convert(b))
        .collect::<Result<Vec<_>, _>>()?;
    Table::concat(path, parts, &conv.feature_names())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BooleanArray, Float64Array, Int32Array};

    #[test]
    fn nulls_are_nan_in_mostly_null_and_mostly_valid_columns() {
        // 1 in 7 valid (the set-bit path), then 6 in 7 valid (the zipped path)
        for valid_every in [7usize, 1] {
            let values: Vec<Option<i32>> = (0..1000i32)
                .map(|i| {
                    let valid = if valid_every == 7 {
                        i % 7 == 3
                    } else {
                        i % 7 != 3
                    };
                    valid.then_some(i - 500)
                })
                .collect();
            let ints = Int32Array::from(values.clone());
            let floats = Float64Array::from(
                values
                    .iter()
                    .map(|v| v.map(|x| x as f64 + 0.5))
                    .collect::<Vec<_>>(),
            );
            let got_ints = numbers(&ints).unwrap();
            let got_floats = numbers(&floats).unwrap();
            for (i, v) in values.iter().enumerate() {
                match v {
                    Some(x) => {
                        assert_eq!(got_ints[i], *x as f32, "row {i}");
                        assert_eq!(got_floats[i], *x as f32 + 0.5, "row {i}");
                    }
                    None => {
                        assert!(got_ints[i].is_nan() && got_floats[i].is_nan(), "row {i}");
                    }
                }
            }
        }
        // every row null
        let none = Int32Array::from(vec![None::<i32>; 100]);
        assert!(numbers(&none).unwrap().iter().all(|v| v.is_nan()));
    }

    #[test]
    fn mostly_null_columns_are_read_as_their_entries() {
        // one row in eight holds a value (a stored NaN among them): its entries; one in
        // seven: every row
        for (every, sparse) in [(8usize, true), (7, false), (1000, true)] {
            let values: Vec<Option<f64>> = (0..1000usize)
                .map(|i| (i % every == 5).then_some(if i == 5 { f64::NAN } else { i as f64 }))
                .collect();
            let a = Float64Array::from(values.clone());
            match entries(&a, false) {
                Some((rows, got)) => {
                    assert!(sparse, "one in {every}");
                    let want: Vec<(u32, f64)> = values
                        .iter()
                        .enumerate()
                        .filter_map(|(i, v)| v.map(|x| (i as u32, x)))
                        .collect();
                    assert_eq!(rows, want.iter().map(|w| w.0).collect::<Vec<_>>());
                    for ((_, w), g) in want.iter().zip(&got) {
                        assert!(g.to_bits() == (*w as f32).to_bits() || (g.is_nan() && w.is_nan()));
                    }
                }
                None => assert!(!sparse, "one in {every}"),
            }
        }
        let no_nulls = Int32Array::from(vec![1, 2, 3]);
        assert!(
            entries(&no_nulls, false).is_none(),
            "no validity bits: every row holds a value"
        );
        let (rows, values) = entries(&no_nulls, true).expect("any number of entries");
        assert_eq!((rows, values), (vec![0, 1, 2], vec![1.0, 2.0, 3.0]));
        let flags = BooleanArray::from(vec![None, None, None, Some(true)]);
        assert!(entries(&flags, true).is_none(), "booleans are read whole");
    }

    #[test]
    fn a_batch_of_mostly_null_feature_columns_reads_every_numeric_one_as_entries() {
        use arrow_array::Float32Array;
        use arrow_schema::{Field, Schema};
        use std::sync::Arc;
        // 20 columns: 19 with a value in one row in a hundred, one in every row (a text
        // table's commonest term): a value in about one cell in 17
        let n = 400;
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for j in 0..20 {
            fields.push(Field::new(format!("c{j}"), DataType::Float32, true));
            let v: Vec<Option<f32>> = (0..n)
                .map(|i| (j == 7 || i % 100 == j).then_some(i as f32))
                .collect();
            arrays.push(Arc::new(Float32Array::from(v)));
        }
        let read = |fields: Vec<Field>, arrays: Vec<ArrayRef>, opts: &ReadOptions| {
            let schema = Schema::new(fields);
            let batch = RecordBatch::try_new(Arc::new(schema.clone()), arrays).unwrap();
            table_from_arrow(&schema, &[batch], opts).unwrap()
        };
        let t = read(fields.clone(), arrays.clone(), &ReadOptions::default());
        let dense = t.features.column(7);
        let Column::Sparse { rows, values, .. } = dense else {
            panic!("the full column of a sparse batch is read as entries: {dense:?}");
        };
        assert_eq!(rows.len(), n);
        assert!(values.iter().enumerate().all(|(i, &v)| v == i as f32));
        // a label is not a feature: it is read whole, and counts for nothing
        let opts = ReadOptions {
            label: Some("c7".into()),
            ..Default::default()
        };
        let t = read(fields.clone(), arrays.clone(), &opts);
        assert!((0..19).all(|j| matches!(t.features.column(j), Column::Sparse { .. })));
        // a boolean feature (read whole): the other columns keep the per-column rule
        let mut with_flag = (fields, arrays);
        with_flag
            .0
            .push(Field::new("flag", DataType::Boolean, true));
        with_flag
            .1
            .push(Arc::new(BooleanArray::from(vec![Some(true); n])));
        let t = read(with_flag.0, with_flag.1, &ReadOptions::default());
        assert!(matches!(t.features.column(7), Column::Numeric(_)));
        assert!(matches!(t.features.column(0), Column::Sparse { .. }));
    }

    #[test]
    fn batches_of_sparse_columns_join_as_one_sparse_column() {
        use arrow_schema::{Field, Schema};
        use std::sync::Arc;
        let schema = Schema::new(vec![
            Field::new("few", DataType::Float64, true),
            Field::new("all", DataType::Float64, true),
        ]);
        let batch = |first: usize, n: usize| {
            let few: Vec<Option<f64>> = (first..first + n)
                .map(|i| (i % 10 == 3).then_some(i as f64))
                .collect();
            let all: Vec<Option<f64>> = (first..first + n).map(|i| Some(i as f64)).collect();
            RecordBatch::try_new(
                Arc::new(schema.clone()),
                vec![
                    Arc::new(Float64Array::from(few)) as ArrayRef,
                    Arc::new(Float64Array::from(all)) as ArrayRef,
                ],
            )
            .unwrap()
        };
        let t = table_from_arrow(
            &schema,
            &[batch(0, 40), batch(40, 25)],
            &ReadOptions::default(),
        )
        .unwrap();
        let few = t.features.column(0);
        assert!(matches!(few, Column::Sparse { len: 65, .. }), "{few:?}");
        let rows: Vec<usize> = few.sparse_entries(0..65).unwrap().map(|(r, _)| r).collect();
        assert_eq!(rows, vec![3, 13, 23, 33, 43, 53, 63]);
        let dense = few.dense_values().unwrap();
        for (i, v) in dense.iter().enumerate() {
            assert!(
                if i % 10 == 3 {
                    *v == i as f32
                } else {
                    v.is_nan()
                },
                "row {i}"
            );
        }
        assert!(matches!(t.features.column(1), Column::Numeric(v) if v.len() == 65));
    }
}
