//! Training data read in batches and binned in two passes, so memory holds the bins and
//! one batch rather than every raw value.

use std::sync::Arc;

use sapwood_core::collective::{Collective, SingleWorker};
use sapwood_core::data::{
    BinnedMatrix, Bins, BinsRef, CutSample, Cuts, FeatureCuts, FeatureMatrix, HeldRows, RowMajor,
    SparseBins,
};
use sapwood_core::model::select_columns;
use sapwood_core::params::Params;
use sapwood_core::train::agree_cuts;

use crate::dataset::Label;
use crate::schema::check_categorical_levels;
use crate::{Error, Result};

/// The first pass: samples rows (by a hash of their global index) for the cuts.
#[derive(Debug)]
pub struct CutPass {
    params: Params,
    n_total: u64,
    next_row: u64,
    first_row: u64,
    sample: Option<CutSample>,
    names: Option<Vec<String>>,
}

impl CutPass {
    /// A pass over `n_total` rows that will arrive in batches, in order.
    pub fn new(params: &Params, n_total: u64) -> Self {
        Self::for_shard(params, n_total, 0)
    }

    /// A pass over one worker's rows, the first of which has global index `row_offset`
    /// among `n_total` (rows are sampled by global index, so shards agree on the cuts).
    pub fn for_shard(params: &Params, n_total: u64, row_offset: u64) -> Self {
        CutPass {
            params: params.clone(),
            n_total,
            next_row: row_offset,
            first_row: row_offset,
            sample: None,
            names: None,
        }
    }

    /// Samples the next batch of rows.
    pub fn push(&mut self, features: &FeatureMatrix<'_>, weights: Option<&[f32]>) -> Result<()> {
        match &self.names {
            None => self.names = Some(features.names().to_vec()),
            Some(n) if n.as_slice() != features.names() => {
                return Err(Error::SchemaMismatch(
                    "batches have different columns".into(),
                ))
            }
            Some(_) => {}
        }
        let s = CutSample::collect(
            features,
            weights,
            self.next_row,
            self.n_total,
            self.params.seed,
            self.params.bin_sample_rows,
        );
        self.next_row += features.n_rows() as u64;
        self.sample = Some(match self.sample.take() {
            None => s,
            Some(acc) => CutSample::merge(vec![acc, s])?,
        });
        Ok(())
    }

    /// Computes the cuts and starts the binning pass.
    pub fn finish(self) -> Result<BinPass> {
        if self.next_row != self.n_total {
            return Err(Error::EmptyData(format!(
                "expected {} rows but {} arrived",
                self.n_total, self.next_row
            )));
        }
        self.finish_with(&mut SingleWorker)
    }

    /// Gathers every worker's sample, computes the shared cuts and starts the binning pass.
    /// `names` must be given when this worker saw no batch (a shard without rows).
    pub fn finish_with(self, collective: &mut dyn Collective) -> Result<BinPass> {
        let names = self
            .names
            .ok_or_else(|| Error::EmptyData("no batch arrived".into()))?;
        let sample = self.sample.expect("set with the names");
        let cuts = agree_cuts(&sample, &self.params, collective)?;
        let mut pass = BinPass::with_cuts(names, cuts);
        // the cuts come from these very batches: their levels are the training levels
        pass.given_cuts = false;
        pass.expected_rows = (self.next_row - self.first_row) as usize;
        Ok(pass)
    }
}

/// The bins of the batches pushed so far.
#[derive(Debug)]
enum Held {
    /// Row-major (u8 or u16).
    Rows(Bins),
    /// Each feature's rows outside its absent bin and their bins, with the absent bins,
    /// while every batch was sparse enough to be binned by column.
    Columns {
        wide: bool,
        columns: Vec<(Vec<u32>, Vec<u16>)>,
        absent: Vec<u16>,
    },
}

/// The second pass: bins batches with the cuts and keeps their labels and weights.
#[derive(Debug)]
pub struct BinPass {
    names: Vec<String>,
    cuts: Cuts,
    /// bins of every batch so far: row-major in one buffer sized up front, or by column
    /// while every batch was binned so
    bins: Option<Held>,
    rows: usize,
    expected_rows: usize,
    label: Option<Label>,
    weight: Option<Vec<f32>>,
    /// Whether the cuts came from other data (an evaluation set binned like a training
    /// set), whose categorical levels each batch is checked against.
    given_cuts: bool,
}

impl BinPass {
    /// A binning pass with known cuts (an evaluation set binned like a training set).
    pub fn with_cuts(names: Vec<String>, cuts: Cuts) -> Self {
        BinPass {
            names,
            cuts,
            bins: None,
            rows: 0,
            expected_rows: 0,
            label: None,
            weight: None,
            given_cuts: true,
        }
    }

    /// The cuts in use.
    pub fn cuts(&self) -> &Cuts {
        &self.cuts
    }

    /// Bins a batch (columns matched by name) and appends its label and weights.
    pub fn push(
        &mut self,
        features: &FeatureMatrix<'_>,
        label: Option<Label>,
        weight: Option<Vec<f32>>,
    ) -> Result<()> {
        let n = features.n_rows();
        if self.given_cuts {
            check_categorical_levels(self.trained_levels(), features)?;
        }
        let m = select_columns(&self.names, &self.cuts, features)?;
        let part = BinnedMatrix::new(&m, &self.cuts)?;
        let first = self.bins.is_none();
        let reserve = self.expected_rows.max(n) * self.names.len();
        // batches binned by column stay so while every one is and the rows and entries fit
        // the backends' u32 indices; once one is not, what was kept by column is made
        // row-major and every later batch appended row-major
        let by_columns = match (&self.bins, part.bins()) {
            (None, BinsRef::Sparse(s)) => {
                self.rows + n <= u32::MAX as usize && s.entries() <= u32::MAX as usize
            }
            (Some(Held::Columns { columns, .. }), BinsRef::Sparse(s)) => {
                let kept: usize = columns.iter().map(|c| c.0.len()).sum();
                self.rows + n <= u32::MAX as usize && kept + s.entries() <= u32::MAX as usize
            }
            _ => false,
        };
        if let (true, BinsRef::Sparse(s)) = (by_columns, part.bins()) {
            let offset = self.rows as u32;
            let held = self.bins.get_or_insert_with(|| Held::Columns {
                wide: s.wide(),
                columns: vec![(Vec::new(), Vec::new()); s.n_features()],
                absent: s.absent().to_vec(),
            });
            if let Held::Columns {
                wide,
                columns,
                absent,
            } = held
            {
                if *wide != s.wide() || absent.as_slice() != s.absent() {
                    return Err(Error::SchemaMismatch(
                        "batches were binned to different widths".into(),
                    ));
                }
                for (f, (rows, bins)) in columns.iter_mut().enumerate() {
                    let c = s.column(f);
                    rows.extend(
                        c.rows
                            .iter()
                            .map(|&r| (r as usize - c.first) as u32 + offset),
                    );
                    bins.extend_from_slice(c.bins);
                }
            }
        } else {
            if let Some(Held::Columns {
                wide,
                columns,
                absent,
            }) = self.bins.take_if(|h| matches!(h, Held::Columns { .. }))
            {
                let kept = SparseBins::from_columns(self.rows, wide, columns, absent)?;
                let view = kept.rows(0..self.rows);
                // sized for every row to come, as a first row-major batch is
                let room = self.expected_rows.max(self.rows + n) * self.names.len();
                self.bins = Some(Held::Rows(if wide {
                    Bins::U16(view.row_major_with_room(room))
                } else {
                    Bins::U8(view.row_major_with_room(room))
                }));
            }
            let mut held = HeldRows::default();
            match (&mut self.bins, part.bins().row_major(&mut held)) {
                (slot @ None, RowMajor::U8(b)) => {
                    let mut v = Vec::with_capacity(reserve);
                    sapwood_core::huge_pages::advise(&mut v);
                    v.extend_from_slice(b);
                    *slot = Some(Held::Rows(Bins::U8(v)));
                }
                (slot @ None, RowMajor::U16(b)) => {
                    let mut v = Vec::with_capacity(reserve);
                    sapwood_core::huge_pages::advise(&mut v);
                    v.extend_from_slice(b);
                    *slot = Some(Held::Rows(Bins::U16(v)));
                }
                (Some(Held::Rows(Bins::U8(v))), RowMajor::U8(b)) => v.extend_from_slice(b),
                (Some(Held::Rows(Bins::U16(v))), RowMajor::U16(b)) => v.extend_from_slice(b),
                _ => {
                    return Err(Error::SchemaMismatch(
                        "batches were binned to different widths".into(),
                    ))
                }
            }
        }
        self.rows += n;
        match (&mut self.label, label) {
            (slot @ None, Some(l)) if first => *slot = Some(l),
            (Some(Label::Values(a)), Some(Label::Values(b))) => a.extend(b),
            (Some(Label::Classes(a)), Some(Label::Classes(b))) => a.extend(b),
            (None, None) => {}
            _ => {
                return Err(Error::SchemaMismatch(
                    "batches disagree on their label column".into(),
                ))
            }
        }
        match (&mut self.weight, weight) {
            (slot @ None, Some(w)) if first => *slot = Some(w),
            (Some(a), Some(b)) => a.extend(b),
            (None, None) => {}
            _ => {
                return Err(Error::SchemaMismatch(
                    "batches disagree on their weight column".into(),
                ))
            }
        }
        debug_assert!(
            self.label.as_ref().is_none_or(|l| l.len() == self.rows()),
            "{n} rows pushed"
        );
        Ok(())
    }

    /// Each feature's name with its training levels (`None` for numeric features).
    fn trained_levels(&self) -> impl Iterator<Item = (&str, Option<&[String]>)> {
        self.names
            .iter()
            .zip(self.cuts.features())
            .map(|(name, cuts)| match cuts {
                FeatureCuts::Categorical { levels, .. } => (name.as_str(), Some(levels.as_slice())),
                FeatureCuts::Numeric { .. } => (name.as_str(), None),
            })
    }

    fn rows(&self) -> usize {
        self.rows
    }

    /// The binned dataset.
    pub fn finish(self) -> Result<BinnedDataset> {
        Ok(BinnedDataset {
            binned: Arc::new(BinnedMatrix::from_bins(
                self.rows,
                self.names.len(),
                match self.bins {
                    None => Bins::U8(Vec::new()),
                    Some(Held::Rows(b)) => b,
                    Some(Held::Columns {
                        wide,
                        columns,
                        absent,
                    }) => Bins::Sparse(SparseBins::from_columns(self.rows, wide, columns, absent)?),
                },
            )?),
            names: self.names,
            cuts: self.cuts,
            label: self.label,
            weight: self.weight,
            queries: None,
        })
    }
}

/// Rows binned with known cuts, with their label and weights.
#[derive(Debug, Clone)]
pub struct BinnedDataset {
    pub(crate) names: Vec<String>,
    pub(crate) cuts: Cuts,
    pub(crate) binned: Arc<BinnedMatrix>,
    pub(crate) label: Option<Label>,
    pub(crate) weight: Option<Vec<f32>>,
    pub(crate) queries: Option<sapwood_core::rank::Queries>,
}

impl BinnedDataset {
    /// Sets the query each row belongs to, for ranking (see [`crate::Dataset::set_group`]);
    /// `column` names the ids in errors.
    pub fn set_group(&mut self, qid: &[i64], column: &str) -> Result<()> {
        if qid.len() != self.n_rows() {
            return Err(crate::Error::LengthMismatch {
                column: format!("group `{column}`"),
                got: qid.len(),
                expected: self.n_rows(),
            });
        }
        self.queries = Some(sapwood_core::rank::Queries::from_ids(qid, column)?);
        Ok(())
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.binned.n_rows()
    }

    /// Bytes held by the bins.
    pub fn size_bytes(&self) -> usize {
        self.binned.size_bytes()
    }

    /// Feature names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The label, if one was read.
    pub fn label(&self) -> Option<&Label> {
        self.label.as_ref()
    }

    /// A binning pass with this dataset's cuts, for an evaluation set.
    pub fn bin_like(&self) -> BinPass {
        BinPass::with_cuts(self.names.clone(), self.cuts.clone())
    }
}
