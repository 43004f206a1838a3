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
        match self {
            Source::Csv(t) => {
                if shard.rows.start == 0 && shard.rows.end == t.n_rows() as u64 {
                    return f(t.clone());
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
                        })
                        .collect(),
                )?;
                f(Table {
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
                })
            }
            Source::Parquet(p) => {
                let mut conv = p.converter(opts)?;
                let mut any = false;
                for batch in p.batches(&conv.columns(), shard.row_groups.clone())? {
                    any = true;
                    f(conv.convert(&batch?)?)?;
                }
                if !any {
                    let empty = sapwood_io::arrow_array::RecordBatch::new_empty(
                        std::sync::Arc::new(p.schema().clone()),
                    );
                    f(conv.convert(&empty)?)?;
                }
                Ok(())
            }
        }
    }

    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
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
