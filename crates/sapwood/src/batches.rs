//! Rows read in batches ([`RowSource`]: a Parquet or CSV file read by row groups, Arrow
//! record batches), binned by the job as they are read: one pass samples the cuts (agreed
//! with the other workers, or the continued model's), one pass bins, so memory holds the
//! bins and one batch rather than every raw value.

use sapwood_core::collective::Collective;
use sapwood_core::data::FeatureMatrix;
use sapwood_core::params::Params;
use sapwood_core::train::{self, JobFacts};

use crate::booster::Booster;
use crate::dataset::{Dataset, Label};
use crate::stream::{BinnedDataset, CutPass};
use crate::{Error, Result};

/// One batch of a [`RowSource`]; its rows follow the previous batch's.
pub struct RowBatch<'a> {
    /// The batch's features (the same columns in every batch).
    pub features: &'a FeatureMatrix<'a>,
    /// Its labels (a training set needs them; an evaluation set for its metrics).
    pub label: Option<Label>,
    /// Its sample weights.
    pub weight: Option<Vec<f32>>,
    /// Its rows' base margins, one per output group and row, row-major (training rows).
    pub base_margin: Option<Vec<f32>>,
    /// Each row's query id (ranking); a query's rows follow one another.
    pub query_ids: Option<Vec<i64>>,
}

/// Rows a job reads in batches, in row order, once per pass (twice for training rows, once
/// for an evaluation set); one batch is held at a time besides the bins. `Sync`, so that a
/// front end can train on a thread of its own.
pub trait RowSource: Sync {
    /// Rows it yields.
    fn n_rows(&self) -> u64;

    /// Adds what every rank of a distributed job must share about its rows (the columns
    /// and their types, say) to `facts`: the ranks agree on them before any cut is
    /// exchanged.
    fn describe(&self, facts: &mut JobFacts);

    /// Calls `each` with every batch, in row order.
    fn for_each_batch(&self, each: &mut dyn FnMut(RowBatch<'_>) -> Result<()>) -> Result<()>;

    /// Whether its query ids name the same query on every rank (a file's column, a user's
    /// `qid`), so that the ranks can check that no query spans two of them; true by default.
    fn global_query_ids(&self) -> bool {
        true
    }
}

/// Adds the features (names, with their kinds) to what the ranks agree on.
pub(crate) fn push_features(facts: &mut JobFacts, names: &[String], categorical: &[bool]) {
    let features: Vec<String> = names
        .iter()
        .zip(categorical)
        .map(|(n, &c)| format!("{n}{}", if c { " (categorical)" } else { "" }))
        .collect();
    facts.push("features", features.join(", "));
}

/// Where the cuts a source is binned with come from.
#[derive(Clone, Copy)]
pub(crate) enum CutsFrom<'a> {
    /// Sampled from these rows with the other workers.
    Agreed,
    /// The training rows' (an evaluation set).
    Like(&'a BinnedDataset),
    /// The model being continued.
    Model(&'a Booster),
}

/// A source binned: its rows (with labels, weights and query groups), their base margins,
/// and the query ids of the first and last row (to check that no query spans two ranks).
pub(crate) struct BinnedSource {
    /// The binned rows.
    pub rows: BinnedDataset,
    /// `groups` base margins per row, when the batches carry them.
    pub base_margin: Option<Vec<f32>>,
    /// The first and last row's query ids (None when the source's ids are its own).
    pub query_ends: Option<[i64; 2]>,
}

/// Reads `source`, rows `row_offset..` of the job's `n_total`, twice (once when the cuts
/// are given) and bins it. Every pass must read the rows the source says it has.
pub(crate) fn bin_source(
    source: &dyn RowSource,
    params: &Params,
    cuts: CutsFrom<'_>,
    (row_offset, n_total): (u64, u64),
    collective: &mut dyn Collective,
) -> Result<BinnedSource> {
    if n_total == 0 {
        return Err(Error::EmptyData(
            "the rows are empty: the source yields none".into(),
        ));
    }
    let mut bin = match cuts {
        CutsFrom::Like(d) => d.bin_like(),
        CutsFrom::Model(b) => b.bin_pass(),
        CutsFrom::Agreed => {
            let mut cut = CutPass::for_shard(params, n_total, row_offset);
            let mut read = 0u64;
            source.for_each_batch(&mut |b| {
                read += b.features.n_rows() as u64;
                cut.push(b.features, b.weight.as_deref())
            })?;
            check_pass(source, "sampling", read)?;
            cut.finish_with(collective)?
        }
    };
    let (mut labelled, mut any_label, mut read, mut batches) = (0u64, false, 0u64, 0usize);
    let mut base: Option<Vec<f32>> = None;
    let mut qids: Option<Vec<i64>> = None;
    source.for_each_batch(&mut |b| {
        let first = batches == 0;
        batches += 1;
        read += b.features.n_rows() as u64;
        extend_alike(&mut base, b.base_margin, first, "base margins")?;
        extend_alike(&mut qids, b.query_ids, first, "query ids")?;
        any_label |= b.label.is_some();
        labelled += match &b.label {
            Some(Label::Values(v)) => v.iter().filter(|x| !x.is_nan()).count() as u64,
            Some(Label::Classes(c)) => c.len() as u64,
            None => 0,
        };
        bin.push(b.features, b.label, b.weight)
            .map_err(|e| match cuts {
                CutsFrom::Model(_) => train::in_init_model("the training data", e),
                _ => e,
            })
    })?;
    check_pass(source, "binning", read)?;
    let mut total = [labelled as i64];
    if !matches!(cuts, CutsFrom::Like(_)) {
        collective.allreduce_sum(&mut total, n_total)?;
    }
    if total[0] == 0 {
        return Err(Error::EmptyData(if any_label {
            "the label has no values (all null)".into()
        } else {
            "the rows have no label".into()
        }));
    }
    let mut rows = bin.finish()?;
    let query_ends = match &qids {
        Some(q) => {
            rows.set_group(q, "query ids")?;
            let ends = q.first().zip(q.last()).map(|(&a, &b)| [a, b]);
            ends.filter(|_| source.global_query_ids())
        }
        None => None,
    };
    Ok(BinnedSource {
        rows,
        base_margin: base,
        query_ends,
    })
}

/// Refuses a pass that read other rows than the source says it has (a file that grew, a
/// reader that lost a batch): the cuts and the bins would describe different rows.
fn check_pass(source: &dyn RowSource, pass: &str, read: u64) -> Result<()> {
    if read != source.n_rows() {
        return Err(Error::SchemaMismatch(format!(
            "the {pass} pass read {read} rows but the source has {}: every pass must read \
             the same rows",
            source.n_rows()
        )));
    }
    Ok(())
}

/// Appends a batch's optional column to what earlier batches gave; every batch must give
/// it or none.
fn extend_alike<T>(
    acc: &mut Option<Vec<T>>,
    part: Option<Vec<T>>,
    first: bool,
    what: &str,
) -> Result<()> {
    match (acc.as_mut(), part) {
        (None, Some(p)) if first => *acc = Some(p),
        (Some(a), Some(p)) => a.extend(p),
        (None, None) => {}
        _ => {
            return Err(Error::SchemaMismatch(format!(
                "batches disagree on their {what}: some carry them, some do not"
            )))
        }
    }
    Ok(())
}

/// Checks that no query spans two ranks, from every rank's first and last query id (ranks
/// without rows skipped).
pub(crate) fn check_queries_whole(
    ends: Option<[i64; 2]>,
    collective: &mut dyn Collective,
) -> Result<()> {
    let mine: Vec<u8> = match ends {
        Some([first, last]) => [first.to_le_bytes(), last.to_le_bytes()].concat(),
        None => Vec::new(),
    };
    let mut previous: Option<(usize, i64)> = None;
    for (rank, b) in collective.allgather(&mine)?.iter().enumerate() {
        if b.len() != 16 {
            continue;
        }
        let id = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let (first, last) = (id(0), id(8));
        if let Some((before, prev_last)) = previous {
            if prev_last == first {
                return Err(Error::QuerySpansRanks {
                    first: before,
                    second: rank,
                });
            }
        }
        previous = Some((rank, last));
    }
    Ok(())
}

/// A stream's training rows and evaluation sets, binned.
pub(crate) struct ReadRows {
    /// The training rows.
    pub train: BinnedSource,
    /// The evaluation sets by name, binned with the training cuts (rank 0 only).
    pub evals: Vec<(String, BinnedDataset)>,
}

impl ReadRows {
    /// The evaluation sets as a job takes them.
    pub fn eval_refs(&self) -> Vec<(&str, &BinnedDataset)> {
        self.evals.iter().map(|(n, d)| (n.as_str(), d)).collect()
    }
}

/// Reads and bins a job's training rows (`row_offset..` of `n_total`) with cuts every
/// worker agrees on, or the continued model's, then, on rank 0, its evaluation sets with
/// the same cuts.
pub(crate) fn read_rows(
    params: &Params,
    train: &dyn RowSource,
    evals: &[(&str, &dyn RowSource)],
    init: Option<&Booster>,
    (row_offset, n_total): (u64, u64),
    collective: &mut dyn Collective,
) -> Result<ReadRows> {
    let cuts = match init {
        Some(b) => CutsFrom::Model(b),
        None => CutsFrom::Agreed,
    };
    let rows = (row_offset, n_total);
    let train = bin_source(train, params, cuts, rows, collective)?;
    let mut binned_evals = Vec::new();
    if collective.rank() == 0 {
        for (name, source) in evals {
            let in_set = |source| Error::InDataset {
                dataset: format!("evaluation set `{name}`"),
                source: Box::new(source),
            };
            let rows = (0, source.n_rows());
            let like = CutsFrom::Like(&train.rows);
            let read = bin_source(*source, params, like, rows, collective).map_err(in_set)?;
            if read.base_margin.is_some() {
                return Err(in_set(Error::EmptyData(
                    "base margins of evaluation sets are not supported: they start at the \
                     model's base margin"
                        .into(),
                )));
            }
            binned_evals.push((name.to_string(), read.rows));
        }
    }
    Ok(ReadRows {
        train,
        evals: binned_evals,
    })
}

/// A dataset in memory as one batch, so that a stream's evaluation sets (or its training
/// rows) may be in memory.
impl RowSource for Dataset<'_> {
    fn n_rows(&self) -> u64 {
        Dataset::n_rows(self) as u64
    }

    fn describe(&self, facts: &mut JobFacts) {
        let kinds: Vec<bool> = self
            .features
            .columns()
            .iter()
            .map(|c| c.is_categorical())
            .collect();
        push_features(facts, self.features.names(), &kinds);
    }

    fn global_query_ids(&self) -> bool {
        // its queries are numbered from 0 on every rank
        false
    }

    fn for_each_batch(&self, each: &mut dyn FnMut(RowBatch<'_>) -> Result<()>) -> Result<()> {
        // a query's index stands for its id: the rows of a query follow one another
        let query_ids = self.queries.as_ref().map(|q| {
            (0..q.len())
                .flat_map(|i| std::iter::repeat_n(i as i64, q.rows(i).len()))
                .collect()
        });
        each(RowBatch {
            features: &self.features,
            label: self.label.clone(),
            weight: self.weight.clone(),
            base_margin: self.base_margin.clone(),
            query_ids,
        })
    }
}
