//! A data file as rows the training job reads in batches ([`sapwood::RowSource`]): this
//! process's share of the file, with its labels, weights, base margins and query ids; the
//! file and column stay in the context of every error the reading finds.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};
use sapwood::{JobFacts, RowBatch, RowSource};
use sapwood_io::ReadOptions;

use crate::input::{
    base_margins_of, check_queries_contiguous, check_unique_columns, label_of, query_ids_of, Shard,
    Source,
};

/// One file's rows as a job reads them.
pub struct FileRows<'a> {
    path: &'a Path,
    source: &'a Source,
    opts: ReadOptions,
    shard: Shard,
    /// The `--base-margin` columns (training rows only).
    margins: &'a [String],
    /// The `--group` column.
    group: Option<&'a str>,
    /// What every rank must share about the file (the flags that read it, its columns and
    /// types, its rows, its content); empty for one process.
    facts: Vec<(String, Fact)>,
    /// The reader's own error, with its context, which the job saw only as text.
    failure: Mutex<Option<anyhow::Error>>,
}

/// A fact about the file, as [`JobFacts`] takes it.
enum Fact {
    /// A value compared as it is.
    Text(String),
    /// Bytes compared by their digest.
    Digest(Vec<u8>),
}

impl<'a> FileRows<'a> {
    /// The rows `shard` of `source` (read with `opts` from `path`), with the rows' base
    /// margins in the columns `margins` and their query ids in `group`. Checks that no
    /// column plays two parts and that the file has rows.
    pub fn new(
        path: &'a Path,
        source: &'a Source,
        opts: ReadOptions,
        shard: Shard,
        margins: &'a [String],
        group: Option<&'a str>,
    ) -> Result<Self> {
        let mut roles = Vec::new();
        if let Some(l) = &opts.label {
            roles.push(("label", l.as_str()));
        }
        if let Some(w) = &opts.weight {
            roles.push(("weight", w.as_str()));
        }
        roles.extend(margins.iter().map(|m| ("base margin", m.as_str())));
        roles.extend(group.map(|g| ("group", g)));
        check_unique_columns(path, source, &roles)?;
        if source.num_rows() == 0 {
            return Err(sapwood::Error::EmptyData(format!(
                "{}: the file has no rows",
                path.display()
            ))
            .into());
        }
        Ok(FileRows {
            path,
            source,
            opts,
            shard,
            margins,
            group,
            facts: Vec::new(),
            failure: Mutex::new(None),
        })
    }

    /// These rows with what every rank must share about the file: `flags` (how it is
    /// read), its columns with their types, its rows and a digest of its content.
    pub fn with_facts(mut self, flags: Vec<(String, String)>) -> Result<Self> {
        let list = |v: &[String]| v.join(", ");
        let columns = match self.source {
            Source::Parquet(p) => p
                .schema()
                .fields()
                .iter()
                .map(|f| format!("{}: {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", "),
            Source::Csv(_) => list(&crate::input::column_names(self.path, self.source)?),
        };
        self.facts = flags.into_iter().map(|(k, v)| (k, Fact::Text(v))).collect();
        self.facts.extend([
            ("the data's columns".into(), Fact::Text(columns)),
            (
                "the data's rows".into(),
                Fact::Text(self.source.num_rows().to_string()),
            ),
            (
                "the data's content".into(),
                Fact::Digest(crate::input::content_footprint(self.path, self.source)?),
            ),
        ]);
        Ok(self)
    }

    /// The error the reader kept (with its file and column), if reading is what failed.
    pub fn take_failure(&self) -> Option<anyhow::Error> {
        self.failure.lock().ok()?.take()
    }

    /// Reads one batch's rows into what the job takes (its label and weight column taken
    /// out of it); `first` is the batch's first row in the file, `names` the query ids'
    /// text.
    fn batch<'t>(
        &self,
        t: &'t sapwood_io::Table,
        (label, weight): (Option<sapwood_io::LabelColumn>, Option<Vec<f32>>),
        first: usize,
        names: &mut HashMap<i64, String>,
    ) -> Result<RowBatch<'t>> {
        let base_margin = (!self.margins.is_empty())
            .then(|| base_margins_of(&t.kept, self.margins, first, self.path))
            .transpose()?;
        let query_ids = self
            .group
            .map(|g| query_ids_of(&t.kept, g, first, self.path, names))
            .transpose()?;
        let label = match (label, &self.opts.label) {
            (Some(col), Some(name)) => Some(
                label_of(col, first, name)
                    .with_context(|| format!("{}: label column `{name}`", self.path.display()))?,
            ),
            _ => None,
        };
        Ok(RowBatch {
            features: &t.features,
            label,
            weight,
            base_margin,
            query_ids,
        })
    }
}

impl RowSource for FileRows<'_> {
    fn n_rows(&self) -> u64 {
        self.shard.rows.end - self.shard.rows.start
    }

    fn describe(&self, facts: &mut JobFacts) {
        for (name, fact) in &self.facts {
            match fact {
                Fact::Text(v) => facts.push(name.clone(), v.clone()),
                Fact::Digest(b) => facts.push_digest(name.clone(), b),
            }
        }
    }

    fn for_each_batch(
        &self,
        each: &mut dyn FnMut(RowBatch<'_>) -> sapwood::Result<()>,
    ) -> sapwood::Result<()> {
        let start = self.shard.rows.start;
        let mut row = start as usize;
        let (mut names, mut qids) = (HashMap::new(), Vec::new());
        // the job's own error, raised inside a batch, goes back to it unchanged
        let mut job_error = None;
        let read = self
            .source
            .for_each_in(&self.opts, &self.shard, |mut t| {
                let taken = (t.label.take(), t.weight.take());
                let batch = self.batch(&t, taken, row, &mut names)?;
                qids.extend(batch.query_ids.iter().flatten());
                row += t.n_rows();
                each(batch).map_err(|e| {
                    job_error = Some(e);
                    anyhow!("stopped by the job")
                })
            })
            .and_then(|()| match self.group {
                Some(g) => check_queries_contiguous(&qids, &names, start, self.path, g),
                None => Ok(()),
            });
        match (read, job_error) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => {
                let text = format!("{e:#}");
                if let Ok(mut slot) = self.failure.lock() {
                    *slot = Some(e);
                }
                Err(sapwood::Error::Read(text))
            }
        }
    }
}
