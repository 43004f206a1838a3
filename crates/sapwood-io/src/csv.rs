//! CSV (and tab-separated `.tsv`) files with a header row, parsed by the `csv` crate
//! (RFC 4180: quoted fields may hold delimiters, doubled quotes and newlines).
//!
//! Missing values: an empty cell or one of `NA`, `NaN`, `nan`, `null`, `NULL`. In a number
//! column surrounding spaces are ignored, so ` 1.5 ` and ` NA ` read as 1.5 and missing.
//!
//! How a feature column is typed, once every row is read:
//! * named in [`ReadOptions::categorical`]: categorical, whatever its cells look like;
//! * every present cell is a number (`1`, `-2.5e3`, `inf`): numeric;
//! * no present cell is a number (`red`, `Very Good`): categorical;
//! * numbers and text mixed: an error naming the line, column and the odd cell out, since
//!   a stray token in a number column (`abc`, `0x10`, `1,5`) is a data error, not a
//!   reason to treat thousands of distinct numbers as categories.
//!
//! A number too large for a 32-bit float (`1e400`) is an error. The label column follows
//! the same rule (numbers, or text for class names); the weight column must be numbers.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use sapwood_core::data::{Column, FeatureMatrix, MISSING_CATEGORY};

use crate::{IoError, LabelColumn, ReadOptions, Table};

const MISSING: [&str; 6] = ["", "NA", "NaN", "nan", "null", "NULL"];

/// What one cell of a column holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    /// Empty or a missing-value marker.
    Missing,
    /// A number that fits an f32 (infinity only when written as such).
    Number(f32),
    /// A number beyond the range of an f32, such as `1e400`.
    OutOfRange,
    /// Anything else.
    Text,
}

fn cell(s: &str) -> Cell {
    let t = s.trim();
    if MISSING.contains(&s) || MISSING.contains(&t) {
        return Cell::Missing;
    }
    match t.parse::<f64>() {
        Err(_) => Cell::Text,
        Ok(v) if v.is_nan() => Cell::Missing,
        Ok(v) => {
            let x = v as f32;
            if x.is_infinite() && v.is_finite() || v.is_infinite() && !is_infinity_word(t) {
                Cell::OutOfRange
            } else {
                Cell::Number(x)
            }
        }
    }
}

/// Whether `t` spells infinity (`inf`, `-Infinity`, ...) rather than overflowing to it.
fn is_infinity_word(t: &str) -> bool {
    let word = t.trim_start_matches(['+', '-']).to_ascii_lowercase();
    word == "inf" || word == "infinity"
}

/// A column as text, typed once every row is read.
struct RawColumn {
    name: String,
    cells: Vec<String>,
}

/// What the cells of a column turned out to be.
enum Typed {
    Numbers(Vec<f32>),
    Texts,
}

impl RawColumn {
    /// Numbers when every present cell is one, text when none is; otherwise the error
    /// naming the cell that does not fit (a number among text, or text among numbers).
    fn classify(&self, path: &Path, lines: &[u64]) -> Result<Typed, IoError> {
        let err = |row: usize, reason: String| IoError::Value {
            path: path.to_path_buf(),
            line: lines[row] as usize,
            row,
            column: self.name.clone(),
            value: self.cells[row].clone(),
            reason,
        };
        let kinds: Vec<Cell> = self.cells.iter().map(|s| cell(s)).collect();
        let first = |want: fn(&Cell) -> bool| kinds.iter().position(want);
        let number = first(|c| matches!(c, Cell::Number(_) | Cell::OutOfRange));
        let text = first(|c| *c == Cell::Text);
        match (number, text) {
            (Some(n), Some(t)) => {
                let numbers = kinds
                    .iter()
                    .filter(|c| matches!(c, Cell::Number(_) | Cell::OutOfRange))
                    .count();
                let texts = kinds.iter().filter(|c| **c == Cell::Text).count();
                let hint = "fix the cell, write missing values as an empty cell or NA, or \
                            name the column in --categorical to read every value as a category";
                Err(if texts <= numbers {
                    err(
                        t,
                        format!(
                            "is not a number, but the column holds numbers ({numbers} \
                             cells, e.g. `{}` on line {}): {hint}",
                            self.cells[n], lines[n]
                        ),
                    )
                } else {
                    err(
                        n,
                        format!(
                            "is a number, but the column holds text ({texts} cells, e.g. \
                             `{}` on line {}): {hint}",
                            self.cells[t], lines[t]
                        ),
                    )
                })
            }
            (None, Some(_)) => Ok(Typed::Texts),
            // names the cell out of range
            (_, None) if kinds.contains(&Cell::OutOfRange) => self
                .numbers(path, lines, "is not a number")
                .map(Typed::Numbers),
            (_, None) => Ok(Typed::Numbers(
                kinds
                    .iter()
                    .map(|c| match c {
                        Cell::Number(x) => *x,
                        _ => f32::NAN,
                    })
                    .collect(),
            )),
        }
    }

    /// The cells as numbers (NaN where missing); a cell that is not a number, or is out
    /// of range, is an error saying `not_a_number` or why.
    fn numbers(&self, path: &Path, lines: &[u64], not_a_number: &str) -> Result<Vec<f32>, IoError> {
        self.cells
            .iter()
            .enumerate()
            .map(|(row, s)| {
                let reason = match cell(s) {
                    Cell::Missing => return Ok(f32::NAN),
                    Cell::Number(x) => return Ok(x),
                    Cell::Text => not_a_number.to_string(),
                    Cell::OutOfRange => "is out of range for a 32-bit float (at most about \
                                         3.4e38); name the column in --categorical to read \
                                         its values as categories"
                        .to_string(),
                };
                Err(IoError::Value {
                    path: path.to_path_buf(),
                    line: lines[row] as usize,
                    row,
                    column: self.name.clone(),
                    value: s.clone(),
                    reason,
                })
            })
            .collect()
    }

    /// The cells as strings, None where missing.
    fn strings(self) -> Vec<Option<String>> {
        self.cells
            .into_iter()
            .map(|s| (!MISSING.contains(&s.as_str())).then_some(s))
            .collect()
    }

    fn categorical(self) -> Column<'static> {
        let present: BTreeSet<&str> = self
            .cells
            .iter()
            .map(String::as_str)
            .filter(|s| !MISSING.contains(s))
            .collect();
        let mut levels: Vec<String> = present.into_iter().map(str::to_string).collect();
        // numeric-looking levels sort by value so codes follow the numbers
        if levels.iter().all(|l| l.trim().parse::<f64>().is_ok()) {
            levels.sort_by(|a, b| {
                a.trim()
                    .parse::<f64>()
                    .unwrap_or(f64::NAN)
                    .total_cmp(&b.trim().parse::<f64>().unwrap_or(f64::NAN))
            });
        }
        let index: HashMap<&str, u32> = levels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.as_str(), i as u32))
            .collect();
        let codes = self
            .cells
            .iter()
            .map(|s| index.get(s.as_str()).copied().unwrap_or(MISSING_CATEGORY))
            .collect();
        Column::Categorical {
            codes: Cow::Owned(codes),
            levels,
        }
    }
}

/// The header and the cells of every row, with the line each row starts on.
struct Raw {
    cols: Vec<RawColumn>,
    lines: Vec<u64>,
}

fn is_tsv(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("tsv"))
}

/// Records read between two calls of a reader's `stop`.
const RECORDS_BETWEEN_STOPS: usize = 1 << 14;

/// Reads every record of `path` (comma-separated; tab-separated for `.tsv`), unless `stop`
/// says to stop.
fn read_raw(path: &Path, stop: &dyn Fn() -> bool) -> Result<Raw, IoError> {
    let io_err = |source| IoError::Io {
        path: path.to_path_buf(),
        source,
    };
    let parse_err = |line: u64, reason: String| IoError::Parse {
        path: path.to_path_buf(),
        line: line as usize,
        reason,
    };
    let mut input = BufReader::new(File::open(path).map_err(io_err)?);
    // a UTF-8 byte order mark (spreadsheet exports) is not part of the first name
    if input
        .fill_buf()
        .map_err(io_err)?
        .starts_with(b"\xEF\xBB\xBF")
    {
        input.consume(3);
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(if is_tsv(path) { b'\t' } else { b',' })
        .from_reader(input);
    let csv_err = |e: csv::Error| {
        let line = e.position().map_or(0, |p| p.line());
        let message = e.to_string();
        match e.into_kind() {
            csv::ErrorKind::Io(source) => io_err(source),
            csv::ErrorKind::Utf8 { err, .. } => parse_err(
                line,
                format!("field {} is not valid UTF-8", err.field() + 1),
            ),
            _ => parse_err(line, message),
        }
    };
    let mut record = csv::StringRecord::new();
    let mut cols: Option<Vec<RawColumn>> = None;
    let mut lines = Vec::new();
    let mut records = 0usize;
    while reader.read_record(&mut record).map_err(csv_err)? {
        let line = record.position().map_or(0, |p| p.line());
        records += 1;
        if records.is_multiple_of(RECORDS_BETWEEN_STOPS) && stop() {
            return Err(IoError::Stopped {
                path: path.to_path_buf(),
                line: line as usize,
            });
        }
        // a line of nothing but spaces is skipped, like an empty one
        if record.len() == 1 && record[0].trim().is_empty() {
            continue;
        }
        match &mut cols {
            None => {
                cols = Some(
                    record
                        .iter()
                        .map(|n| RawColumn {
                            name: n.trim().to_string(),
                            cells: Vec::new(),
                        })
                        .collect(),
                )
            }
            Some(cols) => {
                if record.len() != cols.len() {
                    // a quote left open swallows the lines after it into one field
                    let open_quote = if record.iter().any(|f| f.contains('\n')) {
                        " (a quoted field starting on this line may lack its closing quote)"
                    } else {
                        ""
                    };
                    return Err(parse_err(
                        line,
                        format!(
                            "{} fields but the header has {}{open_quote}",
                            record.len(),
                            cols.len()
                        ),
                    ));
                }
                for (c, f) in cols.iter_mut().zip(record.iter()) {
                    c.cells.push(f.to_string());
                }
                lines.push(line);
            }
        }
    }
    let cols = cols.ok_or_else(|| parse_err(1, "the file is empty".into()))?;
    Ok(Raw { cols, lines })
}

/// Reads a CSV file with a header row; see the module documentation for how columns are
/// typed. Categorical columns get sorted levels (by value when every level is a number).
pub fn read_csv(path: &Path, opts: &ReadOptions) -> Result<Table, IoError> {
    read_csv_until(path, opts, &|| false)
}

/// [`read_csv`], asking `stop` every few thousand records whether to give up (an
/// [`IoError::Stopped`]): a program that heard Ctrl-C need not read a large file to its end.
pub fn read_csv_until(
    path: &Path,
    opts: &ReadOptions,
    stop: &dyn Fn() -> bool,
) -> Result<Table, IoError> {
    let Raw { mut cols, lines } = read_raw(path, stop)?;
    let available = |cols: &[RawColumn]| {
        cols.iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let wanted = opts
        .label
        .iter()
        .chain(opts.weight.iter())
        .chain(opts.categorical.iter())
        .chain(opts.drop.iter())
        .chain(opts.features.iter())
        .chain(opts.keep.iter());
    for w in wanted {
        if !cols.iter().any(|c| &c.name == w) {
            return Err(IoError::MissingColumn {
                path: path.to_path_buf(),
                column: w.clone(),
                available: available(&cols),
            });
        }
    }
    let mut take = |name: &Option<String>| -> Option<RawColumn> {
        let name = name.as_ref()?;
        let i = cols.iter().position(|c| &c.name == name)?;
        Some(cols.remove(i))
    };
    let label = match take(&opts.label) {
        None => None,
        Some(c) => Some(match c.classify(path, &lines)? {
            Typed::Numbers(v) => LabelColumn::Numeric(v),
            Typed::Texts => LabelColumn::Strings(c.strings()),
        }),
    };
    let weight = match take(&opts.weight) {
        None => None,
        Some(c) => Some(c.numbers(
            path,
            &lines,
            "is not a number; sample weights must be numbers",
        )?),
    };
    let mut kept = Vec::new();
    for k in &opts.keep {
        if let Some(c) = take(&Some(k.clone())) {
            let values: arrow_array::StringArray = c.strings().into_iter().collect();
            kept.push((
                k.clone(),
                std::sync::Arc::new(values) as arrow_array::ArrayRef,
            ));
        }
    }
    let mut names = Vec::new();
    let mut columns = Vec::new();
    for c in cols {
        if opts.drop.contains(&c.name)
            || (!opts.features.is_empty() && !opts.features.contains(&c.name))
        {
            continue;
        }
        names.push(c.name.clone());
        if opts.categorical.contains(&c.name) {
            columns.push(c.categorical());
            continue;
        }
        columns.push(match c.classify(path, &lines)? {
            Typed::Numbers(v) => Column::Numeric(Cow::Owned(v)),
            Typed::Texts => c.categorical(),
        });
    }
    let features = FeatureMatrix::new(names, columns).map_err(|source| IoError::Data {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Table {
        features,
        label,
        weight,
        kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` as the file `name` in a fresh directory.
    fn read_as(name: &str, text: &str, opts: &ReadOptions) -> Result<Table, IoError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        read_csv(&p, opts)
    }

    fn read(text: &str, opts: &ReadOptions) -> Result<Table, IoError> {
        read_as("t.csv", text, opts)
    }

    fn error(text: &str, opts: &ReadOptions) -> String {
        match read(text, opts) {
            Ok(t) => panic!("expected an error, read {:?}", t.features.names()),
            Err(e) => e.to_string(),
        }
    }

    fn numbers(t: &Table, j: usize) -> Vec<f32> {
        match t.features.column(j) {
            Column::Numeric(v) => v.to_vec(),
            Column::Categorical { levels, .. } => panic!("numeric expected, levels {levels:?}"),
            Column::Sparse { .. } => panic!("the reader writes dense columns"),
        }
    }

    fn levels(t: &Table, j: usize) -> (Vec<u32>, Vec<String>) {
        match t.features.column(j) {
            Column::Categorical { codes, levels } => (codes.to_vec(), levels.clone()),
            Column::Numeric(v) => panic!("categorical expected, values {v:?}"),
            Column::Sparse { .. } => panic!("categorical expected, got a sparse column"),
        }
    }

    fn label(name: &str) -> ReadOptions {
        ReadOptions {
            label: Some(name.into()),
            ..Default::default()
        }
    }

    #[test]
    fn reads_types_label_and_reports_bad_rows() {
        let t = read("x,c,y\n1.5,red,yes\n,blue,no\n2,red,\n", &label("y")).unwrap();
        assert_eq!(t.features.names(), &["x", "c"]);
        let x = numbers(&t, 0);
        assert!(x[0] == 1.5 && x[1].is_nan() && x[2] == 2.0);
        assert_eq!(
            levels(&t, 1),
            (vec![1, 0, 1], vec!["blue".into(), "red".into()])
        );
        assert_eq!(
            t.label,
            Some(LabelColumn::Strings(vec![
                Some("yes".into()),
                Some("no".into()),
                None
            ]))
        );
        let e = error("x,y\n1,2\n3\n", &ReadOptions::default());
        assert!(e.contains("t.csv: line 3") && e.contains("1 fields"), "{e}");
        let e = error("x,y\n1,2\n", &label("z"));
        assert!(e.contains("no column `z`"), "{e}");
        let e = error("", &ReadOptions::default());
        assert!(e.contains("line 1: the file is empty"), "{e}");
    }

    #[test]
    fn quoted_fields_follow_rfc_4180_even_across_lines() {
        let text =
            "id,note,x\n1,\"a, b\",1\n2,\"two\nlines, \"\"quoted\"\"\",2\n3,plain,3\n4,x,oops\n";
        let e = error(text, &ReadOptions::default());
        // line 6: the record on line 3 spans two lines
        assert!(e.contains("line 6 (row 3), column `x`: `oops`"), "{e}");
        let t = read(
            &text.replace("oops", "4"),
            &ReadOptions {
                keep: vec!["note".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(numbers(&t, 1), vec![1.0, 2.0, 3.0, 4.0]);
        let note = t.kept[0]
            .1
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        assert_eq!(note.value(0), "a, b");
        assert_eq!(note.value(1), "two\nlines, \"quoted\"");
        let e = error("x,y\n\"open,1\n2,3\n", &ReadOptions::default());
        assert!(
            e.contains("t.csv: line 2: 1 fields but the header has 2")
                && e.contains("closing quote"),
            "{e}"
        );
    }

    #[test]
    fn a_stray_token_in_a_number_column_is_an_error_naming_file_line_column_value() {
        for bad in ["abc", "1e400", "0x10", "1,5", "-1e39"] {
            let quoted = format!("\"{bad}\"");
            let text = format!("x,c\n1,a\n2.5,b\n{quoted},c\n4,d\n");
            let e = error(&text, &ReadOptions::default());
            assert!(
                e.starts_with(&std::env::temp_dir().display().to_string())
                    && e.contains("t.csv: line 4 (row 2), column `x`: ")
                    && e.contains(&format!("`{bad}`")),
                "{bad}: {e}"
            );
            assert!(e.contains("--categorical"), "{e}");
            // named categorical, the same column is read as categories, every value kept
            let t = read(
                &text,
                &ReadOptions {
                    categorical: vec!["x".into()],
                    ..Default::default()
                },
            )
            .unwrap();
            let (codes, names) = levels(&t, 0);
            assert_eq!(names.len(), 4, "{names:?}");
            assert_eq!(names[codes[2] as usize], bad);
        }
    }

    #[test]
    fn text_columns_stay_categorical_and_a_stray_number_in_one_is_an_error() {
        let t = read("c\nVery Good\nFair\nNA\n\nIdeal\n", &ReadOptions::default()).unwrap();
        assert_eq!(
            levels(&t, 0),
            (
                vec![2, 0, MISSING_CATEGORY, 1],
                vec!["Fair".into(), "Ideal".into(), "Very Good".into()]
            )
        );
        let e = error(
            "c,x\nred,1\nblue,2\n7,3\ngreen,4\n",
            &ReadOptions::default(),
        );
        assert!(
            e.contains("line 4 (row 2), column `c`: `7` is a number, but the column holds text"),
            "{e}"
        );
    }

    #[test]
    fn missing_markers_spaces_and_infinities_keep_a_column_numeric() {
        let t = read(
            "x\n 1.5 \nNA\nnull\nNaN\n\" NA \"\ninf\n-Infinity\n1e38\n",
            &ReadOptions::default(),
        )
        .unwrap();
        let x = numbers(&t, 0);
        assert_eq!(x[0], 1.5);
        assert!(x[1..5].iter().all(|v| v.is_nan()), "{x:?}");
        assert_eq!(&x[5..], &[f32::INFINITY, f32::NEG_INFINITY, 1e38]);
        // an all-missing column is numeric, all NaN
        let t = read("x,y\n,1\nNA,2\n", &ReadOptions::default()).unwrap();
        assert!(numbers(&t, 0).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn weight_and_label_errors_name_file_column_and_line() {
        let opts = ReadOptions {
            label: Some("y".into()),
            weight: Some("w".into()),
            ..Default::default()
        };
        let t = read("x,w,y\n1,0.5,1\n2,,0\n", &opts).unwrap();
        let w = t.weight.unwrap();
        assert!(w[0] == 0.5 && w[1].is_nan());
        let e = error("x,w,y\n1,0.5,1\n2,heavy,0\n", &opts);
        assert!(
            e.contains(
                "t.csv: line 3 (row 1), column `w`: `heavy` is not a number; sample weights"
            ),
            "{e}"
        );
        let e = error("x,w,y\n1,1,1\n2,1e300,0\n", &opts);
        assert!(
            e.contains("line 3 (row 1), column `w`: `1e300` is out of range"),
            "{e}"
        );
        let e = error("x,w,y\n1,1,1\n2,1,0\n3,1,1\n4,1,abc\n", &opts);
        assert!(
            e.contains("t.csv: line 5 (row 3), column `y`: `abc` is not a number"),
            "{e}"
        );
        // class names are text labels
        let t = read("x,y\n1,cat\n2,dog\n", &label("y")).unwrap();
        assert!(matches!(t.label, Some(LabelColumn::Strings(_))));
    }

    #[test]
    fn integer_levels_stay_exact_and_sort_by_value() {
        let t = read(
            "id\n16777217\n16777216\n4611686018427387905\n4611686018427387904\n-3\n",
            &ReadOptions {
                categorical: vec!["id".into()],
                ..Default::default()
            },
        )
        .unwrap();
        let (codes, names) = levels(&t, 0);
        assert_eq!(names.len(), 5);
        let got: Vec<&str> = codes.iter().map(|&c| names[c as usize].as_str()).collect();
        assert_eq!(
            got,
            [
                "16777217",
                "16777216",
                "4611686018427387905",
                "4611686018427387904",
                "-3"
            ]
        );
        assert_eq!(names[0], "-3");
    }

    #[test]
    fn tsv_files_bom_crlf_and_blank_lines() {
        let t = read_as("t.tsv", "a\tb\n1\tx y\n\n2\tz\n", &ReadOptions::default()).unwrap();
        assert_eq!(t.features.names(), &["a", "b"]);
        assert_eq!(numbers(&t, 0), vec![1.0, 2.0]);
        let t = read(
            "\u{feff}a,b\r\n1,2\r\n   \r\n3,4\r\n",
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(t.features.names(), &["a", "b"]);
        assert_eq!(numbers(&t, 1), vec![2.0, 4.0]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("latin1.csv");
        std::fs::write(&p, b"a,b\n1,caf\xe9\n").unwrap();
        let e = read_csv(&p, &ReadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("latin1.csv: line 2") && e.contains("UTF-8"),
            "{e}"
        );
    }
}
