//! A CSV reader: header row, optional double quotes, empty or NA fields are missing.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;

use sapwood_core::data::{Column, FeatureMatrix, MISSING_CATEGORY};

use crate::{IoError, LabelColumn, ReadOptions, Table};

const MISSING: [&str; 6] = ["", "NA", "NaN", "nan", "null", "NULL"];

fn split_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut cur)),
            (_, c) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    fields.push(cur);
    Ok(fields)
}

fn parse_number(s: &str) -> Option<f64> {
    if MISSING.contains(&s) {
        Some(f64::NAN)
    } else {
        s.trim().parse::<f64>().ok()
    }
}

/// A column as text, typed once every row is read.
struct RawColumn {
    name: String,
    cells: Vec<String>,
}

impl RawColumn {
    fn numbers(&self) -> Option<Vec<f32>> {
        self.cells
            .iter()
            .map(|s| parse_number(s).map(|v| v as f32))
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
                    .unwrap()
                    .total_cmp(&b.trim().parse::<f64>().unwrap())
            });
        }
        let index: std::collections::HashMap<&str, u32> = levels
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

/// Reads a CSV file with a header row. Columns whose values all parse as numbers are
/// numeric (unless listed as categorical); others are categorical with sorted levels.
pub fn read_csv(path: &Path, opts: &ReadOptions) -> Result<Table, IoError> {
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let parse_err = |line: usize, reason: String| IoError::Parse {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| parse_err(1, "the file is empty".into()))?;
    let names = split_line(header.trim_start_matches('\u{feff}')).map_err(|e| parse_err(1, e))?;
    let mut cols: Vec<RawColumn> = names
        .iter()
        .map(|n| RawColumn {
            name: n.trim().to_string(),
            cells: Vec::new(),
        })
        .collect();
    for (i, line) in lines {
        let fields = split_line(line).map_err(|e| parse_err(i + 1, e))?;
        if fields.len() != cols.len() {
            return Err(parse_err(
                i + 1,
                format!("{} fields but the header has {}", fields.len(), cols.len()),
            ));
        }
        for (c, f) in cols.iter_mut().zip(fields) {
            c.cells.push(f);
        }
    }
    let available = || {
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
                available: available(),
            });
        }
    }
    let mut take = |name: &Option<String>| -> Option<RawColumn> {
        let name = name.as_ref()?;
        let i = cols.iter().position(|c| &c.name == name)?;
        Some(cols.remove(i))
    };
    let label = take(&opts.label).map(|c| match c.numbers() {
        Some(v) => LabelColumn::Numeric(v),
        None => LabelColumn::Strings(
            c.cells
                .into_iter()
                .map(|s| {
                    if MISSING.contains(&s.as_str()) {
                        None
                    } else {
                        Some(s)
                    }
                })
                .collect(),
        ),
    });
    let weight = match take(&opts.weight) {
        None => None,
        Some(c) => Some(c.numbers().ok_or_else(|| IoError::Parse {
            path: path.to_path_buf(),
            line: 0,
            reason: format!("weight column `{}` is not numeric", c.name),
        })?),
    };
    let mut kept = Vec::new();
    for k in &opts.keep {
        if let Some(c) = take(&Some(k.clone())) {
            let values: arrow_array::StringArray = c
                .cells
                .iter()
                .map(|s| {
                    if MISSING.contains(&s.as_str()) {
                        None
                    } else {
                        Some(s.as_str())
                    }
                })
                .collect();
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
        let forced = opts.categorical.contains(&c.name);
        columns.push(match c.numbers() {
            Some(v) if !forced => Column::Numeric(Cow::Owned(v)),
            _ => c.categorical(),
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

    #[test]
    fn quoted_fields_and_missing_values() {
        assert_eq!(
            split_line(r#"a,"b,c","d""e",,"#).unwrap(),
            vec!["a", "b,c", "d\"e", "", ""]
        );
        assert!(split_line(r#"a,"b"#).is_err());
    }

    #[test]
    fn reads_types_label_and_reports_bad_rows() {
        let dir = std::env::temp_dir().join(format!("sapwood-io-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        std::fs::write(&p, "x,c,y\n1.5,red,yes\n,blue,no\n2,red,\n").unwrap();
        let t = read_csv(
            &p,
            &ReadOptions {
                label: Some("y".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(t.features.names(), &["x", "c"]);
        match t.features.column(0) {
            Column::Numeric(v) => assert!(v[0] == 1.5 && v[1].is_nan()),
            _ => panic!("x should be numeric"),
        }
        match t.features.column(1) {
            Column::Categorical { codes, levels } => {
                assert_eq!(levels, &["blue", "red"]);
                assert_eq!(&codes[..], &[1, 0, 1]);
            }
            _ => panic!("c should be categorical"),
        }
        assert_eq!(
            t.label,
            Some(LabelColumn::Strings(vec![
                Some("yes".into()),
                Some("no".into()),
                None
            ]))
        );
        std::fs::write(&p, "x,y\n1,2\n3\n").unwrap();
        let e = read_csv(&p, &ReadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        std::fs::write(&p, "x,y\n1,2\n").unwrap();
        let e = read_csv(
            &p,
            &ReadOptions {
                label: Some("z".into()),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no column `z`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
