//! Opening data files (Parquet or CSV) and streaming them as converted batches.

use std::path::Path;

use anyhow::Result;
use sapwood::{ClassLabel, Label};
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
            Ok(Source::Csv(sapwood_io::read_csv(path, opts)?))
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
    pub fn for_each(
        &self,
        opts: &ReadOptions,
        mut f: impl FnMut(Table) -> Result<()>,
    ) -> Result<()> {
        match self {
            Source::Csv(t) => f(t.clone()),
            Source::Parquet(p) => {
                let mut conv = p.converter(opts)?;
                for batch in p.batches(&conv.columns(), None)? {
                    f(conv.convert(&batch?)?)?;
                }
                Ok(())
            }
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
