//! Quantile cuts: per-feature bin boundaries that do not depend on how rows are sharded.
//!
//! Rows enter the sample by a hash of (seed, global row index), each worker contributes its
//! sampled rows, the samples are gathered, and the cuts are computed from their union in a
//! canonical (sorted) order. One worker and N workers therefore bin identically.

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::matrix::{Column, FeatureMatrix, MISSING_CATEGORY};
use crate::error::{Error, Result};
use crate::hash::{hash32, SampleRate, Stream};
use crate::wire::{ByteReader, PutBytes};

/// How many bins the cuts of one feature may have, and how many sampled rows a bin needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinLimits {
    /// Bins of a numeric feature, the missing-value bin included.
    pub max_bin: usize,
    /// Bins of a categorical feature, the missing-value and shared rare-level bins included.
    pub max_cat_bin: usize,
    /// Sampled rows a numeric bin holds before the next one starts.
    pub min_data_in_bin: usize,
    /// Sampled rows a level needs for a bin of its own.
    pub min_category_count: usize,
    /// Whether a numeric value that alone weighs a mean bin gets a bin of its own.
    pub heavy_value_bins: bool,
}

impl From<&crate::params::Params> for BinLimits {
    fn from(p: &crate::params::Params) -> Self {
        BinLimits {
            max_bin: p.max_bin,
            // 0: how models saved before `max_cat_bin` binned categorical features
            max_cat_bin: if p.max_cat_bin == 0 {
                p.max_bin.min(u16::MAX as usize)
            } else {
                p.max_cat_bin
            },
            min_data_in_bin: p.min_data_in_bin,
            min_category_count: p.min_category_count,
            heavy_value_bins: p.heavy_value_bins,
        }
    }
}

impl Default for BinLimits {
    /// The limits of the default parameters.
    fn default() -> Self {
        BinLimits::from(&crate::params::Params::default())
    }
}

/// Bin boundaries of one feature. Bin 0 is always the missing-value bin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FeatureCuts {
    /// A real-valued feature: value v falls in bin 1 + #{t in thresholds : t < v}.
    Numeric {
        /// Strictly increasing split points.
        #[serde(with = "crate::floats")]
        thresholds: Vec<f32>,
    },
    /// A categorical feature: each kept level has its own bin, rare levels share one.
    Categorical {
        /// Level names, indexed by code.
        levels: Vec<String>,
        /// Bin of each level code; 0 for levels never seen while binning (they go the
        /// missing way).
        level_bins: Vec<u16>,
        /// Bins of this feature, the missing bin included.
        n_bins: u16,
    },
}

impl FeatureCuts {
    /// Bins of this feature, the missing bin included.
    pub fn n_bins(&self) -> usize {
        match self {
            FeatureCuts::Numeric { thresholds } => thresholds.len() + 2,
            FeatureCuts::Categorical { n_bins, .. } => *n_bins as usize,
        }
    }

    /// What makes these cuts unusable, if anything: thresholds that do not strictly
    /// increase or are too many for 16-bit bins, or category bins that disagree.
    pub fn problem(&self) -> Option<&'static str> {
        match self {
            FeatureCuts::Numeric { thresholds } => {
                if thresholds.iter().any(|t| t.is_nan())
                    || thresholds.windows(2).any(|w| w[0] >= w[1])
                {
                    Some("thresholds are not strictly increasing")
                } else if thresholds.len() > 65_534 {
                    Some("too many thresholds")
                } else {
                    None
                }
            }
            FeatureCuts::Categorical {
                levels,
                level_bins,
                n_bins,
            } => (levels.len() != level_bins.len()
                || *n_bins == 0
                || level_bins.iter().any(|b| b >= n_bins))
            .then_some("inconsistent category bins"),
        }
    }

    /// Whether the feature is categorical.
    pub fn is_categorical(&self) -> bool {
        matches!(self, FeatureCuts::Categorical { .. })
    }

    /// The bin of a real value (NaN is missing).
    #[inline]
    pub fn bin_value(thresholds: &[f32], v: f32) -> u16 {
        if v.is_nan() {
            0
        } else {
            1 + thresholds.partition_point(|&t| t < v) as u16
        }
    }

    /// The bin of a categorical code (missing and unseen codes go to bin 0).
    #[inline]
    pub fn bin_code(level_bins: &[u16], code: u32) -> u16 {
        if code == MISSING_CATEGORY {
            0
        } else {
            level_bins.get(code as usize).copied().unwrap_or(0)
        }
    }

    /// The value-space threshold of numeric split bin `b` (bins <= b go left):
    /// +inf for the split that sends every non-missing value left.
    pub fn split_threshold(thresholds: &[f32], b: u16) -> f32 {
        if b as usize <= thresholds.len() && b >= 1 {
            thresholds[b as usize - 1]
        } else {
            f32::INFINITY
        }
    }
}

/// Cuts of every feature, with each feature's offset in a histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct Cuts {
    features: Vec<FeatureCuts>,
    offsets: Vec<u32>,
}

impl Cuts {
    /// Cuts from per-feature boundaries.
    pub fn new(features: Vec<FeatureCuts>) -> Self {
        let mut offsets = Vec::with_capacity(features.len() + 1);
        let mut acc = 0u32;
        offsets.push(0);
        for f in &features {
            acc += f.n_bins() as u32;
            offsets.push(acc);
        }
        Cuts { features, offsets }
    }

    /// Per-feature boundaries.
    pub fn features(&self) -> &[FeatureCuts] {
        &self.features
    }

    /// Feature `f`'s boundaries.
    pub fn feature(&self, f: usize) -> &FeatureCuts {
        &self.features[f]
    }

    /// Features.
    pub fn n_features(&self) -> usize {
        self.features.len()
    }

    /// Start of each feature's bins in a histogram, plus the total at the end.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Bins over all features: the length of a histogram in bins.
    pub fn total_bins(&self) -> usize {
        *self.offsets.last().unwrap_or(&0) as usize
    }

    /// The largest bin count of any feature.
    pub fn max_feature_bins(&self) -> usize {
        self.features.iter().map(|f| f.n_bins()).max().unwrap_or(0)
    }

    /// A compact byte encoding (exact float bits), for sending cuts computed on one worker
    /// to the others.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u64(self.features.len() as u64);
        for f in &self.features {
            match f {
                FeatureCuts::Numeric { thresholds } => {
                    out.put_u8(0);
                    out.put_u64(thresholds.len() as u64);
                    for &t in thresholds {
                        out.put_f32(t);
                    }
                }
                FeatureCuts::Categorical {
                    levels,
                    level_bins,
                    n_bins,
                } => {
                    out.put_u8(1);
                    out.put_u64(levels.len() as u64);
                    for l in levels {
                        out.put_u64(l.len() as u64);
                        out.extend_from_slice(l.as_bytes());
                    }
                    out.put_u64(level_bins.len() as u64);
                    for &b in level_bins {
                        out.put_u16(b);
                    }
                    out.put_u16(*n_bins);
                }
            }
        }
        out
    }

    /// Decodes [`Cuts::to_bytes`]; malformed input is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(bytes, "message of bin cuts");
        let n = r.u64()? as usize;
        // every length is checked against the bytes left before anything is reserved
        let len = |r: &mut ByteReader<'_>, item: usize| -> Result<usize> {
            let len = r.u64()?;
            if len > (r.rest().len() / item) as u64 {
                return Err(r.malformed(format!("{len} items past the end")));
            }
            Ok(len as usize)
        };
        // a feature takes at least a tag and a length
        if n > r.rest().len() / 9 {
            return Err(r.malformed(format!("{n} features past the end")));
        }
        let mut features = Vec::with_capacity(n);
        let mut total = 0u64;
        for _ in 0..n {
            let f = match r.u8()? {
                0 => {
                    let k = len(&mut r, 4)?;
                    let thresholds = (0..k).map(|_| r.f32()).collect::<Result<Vec<_>>>()?;
                    FeatureCuts::Numeric { thresholds }
                }
                1 => {
                    let k = len(&mut r, 8)?;
                    let mut levels = Vec::with_capacity(k);
                    for _ in 0..k {
                        let l = len(&mut r, 1)?;
                        let s = std::str::from_utf8(r.take(l)?)
                            .map_err(|_| r.malformed("a level name is not UTF-8"))?;
                        levels.push(s.to_owned());
                    }
                    let k = len(&mut r, 2)?;
                    let level_bins = (0..k).map(|_| r.u16()).collect::<Result<Vec<_>>>()?;
                    FeatureCuts::Categorical {
                        levels,
                        level_bins,
                        n_bins: r.u16()?,
                    }
                }
                t => return Err(r.malformed(format!("feature tag {t}"))),
            };
            if let Some(p) = f.problem() {
                return Err(r.malformed(format!("feature {}: {p}", features.len())));
            }
            total += f.n_bins() as u64;
            features.push(f);
        }
        r.finish()?;
        if total > u32::MAX as u64 {
            return Err(r.malformed(format!("{total} bins in all")));
        }
        Ok(Cuts::new(features))
    }

    /// Computes cuts from a gathered sample within `limits`.
    pub fn from_sample(sample: &CutSample, limits: &BinLimits) -> Result<Self> {
        let features = sample
            .features
            .par_iter()
            .map(|f| match f {
                FeatureSample::Numeric(values) => numeric_cuts(values, limits),
                FeatureSample::Categorical(counts) => {
                    categorical_cuts(counts, limits.max_cat_bin, limits.min_category_count)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Cuts::new(features))
    }
}

/// Sampled values of one feature.
#[derive(Debug, Clone, PartialEq)]
enum FeatureSample {
    /// (value, weight) pairs of sampled non-missing rows.
    Numeric(Vec<(f32, f32)>),
    /// Sampled rows per level name (unweighted, so sums are exact in any order; keyed by
    /// name, so workers and batches with different level dictionaries merge exactly).
    Categorical(BTreeMap<String, u64>),
}

/// Rows sampled for the cuts, mergeable across workers.
#[derive(Debug, Clone, PartialEq)]
pub struct CutSample {
    features: Vec<FeatureSample>,
}

/// The rate at which rows enter the binning sample, the same on every worker.
pub fn cut_sample_rate(n_total: u64, sample_rows: usize) -> SampleRate {
    SampleRate::new(sample_rows as f64 / n_total.max(1) as f64)
}

impl CutSample {
    /// Samples this worker's rows (global indices `row_offset..`) by hash.
    pub fn collect(
        matrix: &FeatureMatrix<'_>,
        weights: Option<&[f32]>,
        row_offset: u64,
        n_total: u64,
        seed: u64,
        sample_rows: usize,
    ) -> Self {
        let rate = cut_sample_rate(n_total, sample_rows);
        let rows: Vec<usize> = (0..matrix.n_rows())
            .into_par_iter()
            .filter(|&i| {
                rate.keeps_all()
                    || rate.keeps(hash32(seed, Stream::CutSample, 0, row_offset + i as u64))
            })
            .collect();
        let w = |i: usize| weights.map_or(1.0, |w| w[i]);
        let features = matrix
            .columns()
            .par_iter()
            .map(|col| match col {
                Column::Numeric(v) => FeatureSample::Numeric(
                    rows.iter()
                        .filter(|&&i| !v[i].is_nan())
                        .map(|&i| (v[i], w(i)))
                        .collect(),
                ),
                // the sampled rows' entries, found by the hash `rows` was drawn with
                Column::Sparse { len, .. } => FeatureSample::Numeric(
                    col.sparse_entries(0..*len)
                        .into_iter()
                        .flatten()
                        .filter(|&(i, v)| {
                            !v.is_nan()
                                && (rate.keeps_all()
                                    || rate.keeps(hash32(
                                        seed,
                                        Stream::CutSample,
                                        0,
                                        row_offset + i as u64,
                                    )))
                        })
                        .map(|(i, v)| (v, w(i)))
                        .collect(),
                ),
                Column::Categorical { codes, levels } => {
                    let mut counts = vec![0u64; levels.len()];
                    for &i in &rows {
                        let c = codes[i];
                        if c != MISSING_CATEGORY {
                            counts[c as usize] += 1;
                        }
                    }
                    FeatureSample::Categorical(
                        levels
                            .iter()
                            .zip(counts)
                            .filter(|&(_, c)| c > 0)
                            .map(|(l, c)| (l.clone(), c))
                            .collect(),
                    )
                }
            })
            .collect();
        CutSample { features }
    }

    /// The union of several workers' samples, in canonical order.
    pub fn merge(parts: Vec<CutSample>) -> Result<Self> {
        let mut it = parts.into_iter();
        let mut acc = it
            .next()
            .ok_or_else(|| Error::EmptyData("no sample to merge".into()))?;
        for part in it {
            if part.features.len() != acc.features.len() {
                return Err(Error::Collective(
                    "workers disagree on the number of features".into(),
                ));
            }
            for (a, b) in acc.features.iter_mut().zip(part.features) {
                match (a, b) {
                    (FeatureSample::Numeric(x), FeatureSample::Numeric(y)) => x.extend(y),
                    (FeatureSample::Categorical(x), FeatureSample::Categorical(y)) => {
                        for (level, c) in y {
                            *x.entry(level).or_insert(0) += c;
                        }
                    }
                    _ => {
                        return Err(Error::Collective(
                            "workers disagree on which features are categorical".into(),
                        ))
                    }
                }
            }
        }
        Ok(acc)
    }

    /// A compact byte encoding, for gathering samples across workers.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u64(self.features.len() as u64);
        for f in &self.features {
            match f {
                FeatureSample::Numeric(v) => {
                    out.put_u8(0);
                    out.put_u64(v.len() as u64);
                    for &(x, w) in v {
                        out.put_f32(x);
                        out.put_f32(w);
                    }
                }
                FeatureSample::Categorical(counts) => {
                    out.put_u8(1);
                    out.put_u64(counts.len() as u64);
                    for (l, &c) in counts {
                        out.put_u64(l.len() as u64);
                        out.extend_from_slice(l.as_bytes());
                        out.put_u64(c);
                    }
                }
            }
        }
        out
    }

    /// Decodes [`CutSample::to_bytes`]; malformed input is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(bytes, "cut sample");
        let n = r.u64()? as usize;
        let mut features = Vec::with_capacity(n.min(1 << 20));
        for _ in 0..n {
            match r.u8()? {
                0 => {
                    let len = r.u64()? as usize;
                    let mut v = Vec::with_capacity(len.min(1 << 24));
                    for _ in 0..len {
                        let x = r.f32()?;
                        let w = r.f32()?;
                        v.push((x, w));
                    }
                    features.push(FeatureSample::Numeric(v));
                }
                1 => {
                    let len = r.u64()? as usize;
                    let mut counts = BTreeMap::new();
                    for _ in 0..len {
                        let l = r.u64()? as usize;
                        let s = String::from_utf8(r.take(l)?.to_vec())
                            .map_err(|_| Error::Collective("sample level is not UTF-8".into()))?;
                        counts.insert(s, r.u64()?);
                    }
                    features.push(FeatureSample::Categorical(counts));
                }
                t => return Err(Error::Collective(format!("bad sample tag {t}"))),
            }
        }
        r.finish()?;
        Ok(CutSample { features })
    }
}

/// A split point t with a <= t < b.
fn midpoint(a: f32, b: f32) -> f32 {
    let m = ((a as f64 + b as f64) * 0.5) as f32;
    if m >= b || m < a || m.is_nan() {
        a
    } else {
        m
    }
}

/// Numeric cuts: one bin per distinct sampled value while they fit, a bin closing only once it
/// holds `min_data_in_bin` sampled rows (LightGBM's rule, which keeps thresholds off values a
/// handful of rows own); else bins of balanced weight, where a value that alone weighs a
/// mean bin gets a bin of its own.
fn numeric_cuts(values: &[(f32, f32)], limits: &BinLimits) -> Result<FeatureCuts> {
    let mut v = values.to_vec();
    // a total order on (value, weight) makes the weight sums below independent of which
    // worker contributed which rows
    crate::data::radix::sort_pairs(&mut v);
    // (value, weight, sampled rows)
    let mut distinct: Vec<(f32, f64, usize)> = Vec::new();
    for (x, w) in v {
        // -0.0 and 0.0 are one value
        match distinct.last_mut() {
            Some(last) if last.0 == x => {
                last.1 += w as f64;
                last.2 += 1;
            }
            _ => distinct.push((x, w as f64, 1)),
        }
    }
    let min_rows = limits.min_data_in_bin.max(1);
    let value_bins = limits.max_bin - 1;
    let m = distinct.len();
    let mut thresholds = Vec::new();
    if m <= value_bins {
        let mut rows = 0;
        for pair in distinct.windows(2) {
            rows += pair[0].2;
            if rows >= min_rows {
                thresholds.push(midpoint(pair[0].0, pair[1].0));
                rows = 0;
            }
        }
    } else {
        // as in LightGBM, many distinct values only cap the bin count at rows / min_data_in_bin
        let value_bins = value_bins.min(values.len() / min_rows).max(2);
        let total: f64 = distinct.iter().map(|d| d.1).sum();
        // A value many rows share (a round price, a salary converted from one currency) is
        // often where the label changes: as in LightGBM, one that weighs a mean bin is
        // bounded by thresholds on both sides, and the other values share the other bins.
        // (a sample whose weights are all zero has no mean bin, and no heavy value)
        let heavy: Vec<bool> = distinct
            .iter()
            .map(|d| limits.heavy_value_bins && total > 0.0 && d.1 >= total / value_bins as f64)
            .collect();
        let mut light_left: f64 = distinct
            .iter()
            .zip(&heavy)
            .filter(|(_, &h)| !h)
            .map(|(d, _)| d.1)
            .sum();
        let mut light_bins = value_bins.saturating_sub(heavy.iter().filter(|&&h| h).count());
        let mut mean = light_left / light_bins.max(1) as f64;
        let mut acc = 0.0;
        for i in 0..m - 1 {
            acc += distinct[i].1;
            if !heavy[i] {
                light_left -= distinct[i].1;
            }
            // while no more values are left than bins, each takes one
            let fill = m - 1 - i < value_bins - thresholds.len();
            // a bin that holds half a mean ends before a heavy value rather than take it in
            let close = fill || heavy[i] || acc >= mean || (heavy[i + 1] && acc >= 0.5 * mean);
            if close {
                thresholds.push(midpoint(distinct[i].0, distinct[i + 1].0));
                if thresholds.len() + 1 >= value_bins {
                    break;
                }
                if !heavy[i] {
                    light_bins = light_bins.saturating_sub(1);
                    mean = light_left / light_bins.max(1) as f64;
                }
                acc = 0.0;
            }
        }
    }
    thresholds.dedup();
    Ok(FeatureCuts::Numeric { thresholds })
}

fn categorical_cuts(
    sampled: &BTreeMap<String, u64>,
    max_cat_bin: usize,
    min_count: usize,
) -> Result<FeatureCuts> {
    if !(3..=u16::MAX as usize).contains(&max_cat_bin) {
        return Err(Error::param(
            "max_cat_bin",
            format!("{max_cat_bin} must be in 3..=65535"),
        ));
    }
    // the levels of the cuts are the sampled ones in name order: canonical however rows
    // were sharded or batched
    let levels: Vec<String> = sampled.keys().cloned().collect();
    let counts: Vec<u64> = sampled.values().copied().collect();
    let mut seen: Vec<usize> = (0..levels.len()).filter(|&c| counts[c] > 0).collect();
    // most frequent first; code breaks ties
    seen.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let room = max_cat_bin - 2;
    let (mut kept, mut rare) = (Vec::new(), Vec::new());
    for (rank, &c) in seen.iter().enumerate() {
        if rank < room && counts[c] >= min_count as u64 {
            kept.push(c);
        } else {
            rare.push(c);
        }
    }
    kept.sort_unstable();
    rare.sort_unstable();
    let mut level_bins = vec![0u16; levels.len()];
    for (i, &c) in kept.iter().enumerate() {
        level_bins[c] = (i + 1) as u16;
    }
    let mut n_bins = kept.len() + 1;
    if !rare.is_empty() {
        n_bins += 1;
        for &c in &rare {
            level_bins[c] = (kept.len() + 1) as u16;
        }
    }
    Ok(FeatureCuts::Categorical {
        levels: levels.to_vec(),
        level_bins,
        n_bins: n_bins as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn sample_of(values: Vec<f32>) -> CutSample {
        let m = FeatureMatrix::new(vec!["x".into()], vec![Column::Numeric(Cow::Owned(values))])
            .unwrap();
        let n = m.n_rows() as u64;
        CutSample::collect(&m, None, 0, n, 0, usize::MAX)
    }

    /// The thresholds of one numeric feature's cuts within `limits`.
    fn thresholds_of(values: Vec<f32>, limits: BinLimits) -> Vec<f32> {
        let cuts = Cuts::from_sample(&sample_of(values), &limits).unwrap();
        let FeatureCuts::Numeric { thresholds } = cuts.feature(0) else {
            panic!()
        };
        thresholds.clone()
    }

    #[test]
    fn cuts_survive_their_byte_encoding_and_refuse_damaged_bytes() {
        let cuts = Cuts::new(vec![
            FeatureCuts::Numeric {
                thresholds: vec![-1.5, -0.0, f32::MIN_POSITIVE, 7.25],
            },
            FeatureCuts::Categorical {
                levels: vec!["rouge".into(), "vert".into(), "".into()],
                level_bins: vec![1, 0, 2],
                n_bins: 3,
            },
            FeatureCuts::Numeric { thresholds: vec![] },
        ]);
        let bytes = cuts.to_bytes();
        let back = Cuts::from_bytes(&bytes).unwrap();
        assert_eq!(back, cuts);
        let bits = |c: &Cuts| match c.feature(0) {
            FeatureCuts::Numeric { thresholds } => {
                thresholds.iter().map(|t| t.to_bits()).collect::<Vec<_>>()
            }
            _ => unreachable!("feature 0 is numeric"),
        };
        assert_eq!(bits(&back), bits(&cuts));
        assert_eq!(back.offsets(), cuts.offsets());
        for cut in 0..bytes.len() {
            assert!(
                Cuts::from_bytes(&bytes[..cut]).is_err(),
                "prefix of {cut} bytes"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Cuts::from_bytes(&longer).is_err());
        let mut tag = bytes.clone();
        tag[8] = 9;
        let e = Cuts::from_bytes(&tag).unwrap_err().to_string();
        assert!(e.contains("feature tag 9 in a message of bin cuts"), "{e}");
        // cuts that would misbin: thresholds out of order, a level's bin past the bins
        for broken in [
            FeatureCuts::Numeric {
                thresholds: vec![1.0, 1.0],
            },
            FeatureCuts::Categorical {
                levels: vec!["a".into()],
                level_bins: vec![2],
                n_bins: 2,
            },
        ] {
            let e = Cuts::from_bytes(&Cuts::new(vec![broken]).to_bytes()).unwrap_err();
            assert!(e.to_string().contains("feature 0: "), "{e}");
        }
        // a length far past the message is refused before anything is reserved
        let mut huge = bytes;
        huge[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Cuts::from_bytes(&huge).is_err());
    }

    #[test]
    fn few_distinct_values_get_one_bin_each() {
        // with a bin for every value seen (XGBoost's habit; the default asks 3 rows a bin)
        let cuts = Cuts::from_sample(
            &sample_of(vec![3.0, 1.0, 2.0, 2.0, f32::NAN]),
            &BinLimits {
                min_data_in_bin: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let FeatureCuts::Numeric { thresholds } = cuts.feature(0) else {
            panic!()
        };
        assert_eq!(thresholds, &[1.5, 2.5]);
        assert_eq!(FeatureCuts::bin_value(thresholds, 1.0), 1);
        assert_eq!(FeatureCuts::bin_value(thresholds, 2.0), 2);
        assert_eq!(FeatureCuts::bin_value(thresholds, 3.0), 3);
        assert_eq!(FeatureCuts::bin_value(thresholds, f32::NAN), 0);
    }

    #[test]
    fn min_data_in_bin_merges_rare_values_with_their_neighbours() {
        // every bin holds at least 3 sampled rows; 5, 6 and 7 share the last one
        let values = vec![1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0, 6.0, 7.0];
        let thresholds = &thresholds_of(
            values.clone(),
            BinLimits {
                min_data_in_bin: 3,
                ..Default::default()
            },
        );
        assert_eq!(thresholds, &[2.5, 4.5]);
        let mut counts = [0usize; 4];
        for v in &values {
            counts[FeatureCuts::bin_value(thresholds, *v) as usize] += 1;
        }
        assert_eq!(counts, [0, 3, 4, 3]);
        // above max_bin, the bin count is capped at rows / min_data_in_bin
        let many: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let thresholds = &thresholds_of(
            many.clone(),
            BinLimits {
                min_data_in_bin: 10,
                ..Default::default()
            },
        );
        assert!(thresholds.len() < 100, "{}", thresholds.len());
        let mut counts = vec![0usize; thresholds.len() + 2];
        for v in many {
            counts[FeatureCuts::bin_value(thresholds, v) as usize] += 1;
        }
        assert!(counts[1..].iter().all(|&c| c >= 10), "{counts:?}");
    }

    #[test]
    fn by_default_a_bin_holds_three_sampled_rows_as_in_lightgbm() {
        // 30 values seen once each: a bin apiece with XGBoost's habit (1), ten with the
        // default, as LightGBM bins them
        let values: Vec<f32> = (0..30).map(|i| i as f32).collect();
        let default = &thresholds_of(
            values.clone(),
            BinLimits::from(&crate::params::Params::default()),
        );
        assert_eq!(default.len(), 9, "{default:?}");
        let each = &thresholds_of(
            values,
            BinLimits {
                min_data_in_bin: 1,
                ..Default::default()
            },
        );
        assert_eq!(each.len(), 29);
    }

    #[test]
    fn many_values_respect_max_bin_and_balance() {
        let values: Vec<f32> = (0..10_000).map(|i| ((i * 7919) % 10_000) as f32).collect();
        let cuts = Cuts::from_sample(
            &sample_of(values.clone()),
            &BinLimits {
                max_bin: 16,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(cuts.feature(0).n_bins() <= 16);
        let FeatureCuts::Numeric { thresholds } = cuts.feature(0) else {
            panic!()
        };
        let mut counts = vec![0usize; 16];
        for v in values {
            counts[FeatureCuts::bin_value(thresholds, v) as usize] += 1;
        }
        let nonzero: Vec<_> = counts.iter().copied().filter(|&c| c > 0).collect();
        assert_eq!(nonzero.len(), 15);
        assert!(
            nonzero.iter().all(|&c| (600..=700).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn a_value_many_rows_share_gets_a_bin_of_its_own() {
        // 9,000 distinct values and one, 4,500.25, that 1,000 rows share: over 15 value
        // bins a mean bin weighs 667, so the shared value must be bounded on both sides
        // (balanced bins would put it in with about 300 of its neighbours)
        let shared = 4_500.25f32;
        let mut values: Vec<f32> = (0..9_000).map(|i| i as f32).collect();
        values.extend(std::iter::repeat_n(shared, 1_000));
        let limits = BinLimits {
            max_bin: 16,
            ..Default::default()
        };
        let thresholds = &thresholds_of(values.clone(), limits);
        assert!(thresholds.len() < 16, "{}", thresholds.len());
        let bin = FeatureCuts::bin_value(thresholds, shared);
        let in_bin = values
            .iter()
            .filter(|&&v| FeatureCuts::bin_value(thresholds, v) == bin)
            .count();
        assert_eq!(in_bin, 1_000, "{thresholds:?}");
        // balanced bins alone (models saved before the rule) put neighbours in with it
        let balanced = &thresholds_of(
            values.clone(),
            BinLimits {
                heavy_value_bins: false,
                ..limits
            },
        );
        let bin_then = FeatureCuts::bin_value(balanced, shared);
        assert!(
            values
                .iter()
                .filter(|&&v| FeatureCuts::bin_value(balanced, v) == bin_then)
                .count()
                > 1_100
        );
        // the other bins still balance the other values: none holds twice its share
        let mut counts = vec![0usize; thresholds.len() + 2];
        for &v in &values {
            counts[FeatureCuts::bin_value(thresholds, v) as usize] += 1;
        }
        let share = 9_000 / (thresholds.len() - 1);
        assert!(
            counts[1..]
                .iter()
                .enumerate()
                .all(|(b, &c)| b + 1 == bin as usize || c <= 2 * share),
            "{counts:?}"
        );
    }

    #[test]
    fn a_sample_of_no_weight_has_no_heavy_value() {
        // every sampled row weighs 0: no mean bin, so no value is heavy (nor a panic)
        let values: Vec<f32> = (0..1_000).map(|i| (i % 300) as f32).collect();
        let n = values.len();
        let m = FeatureMatrix::new(vec!["x".into()], vec![Column::Numeric(Cow::Owned(values))])
            .unwrap();
        let sample = CutSample::collect(&m, Some(&vec![0.0; n]), 0, n as u64, 0, usize::MAX);
        let cuts = Cuts::from_sample(
            &sample,
            &BinLimits {
                max_bin: 16,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(cuts.feature(0).n_bins() <= 16);
    }

    #[test]
    fn sharded_samples_give_identical_cuts() {
        let values: Vec<f32> = (0..50_000)
            .map(|i| ((i as f32) * 0.37).sin() * 100.0)
            .collect();
        let m = FeatureMatrix::new(vec!["x".into()], vec![Column::Numeric(Cow::Owned(values))])
            .unwrap();
        let whole = CutSample::collect(&m, None, 0, 50_000, 9, 5_000);
        let parts = [
            CutSample::collect(&m.slice_rows(0..12_345), None, 0, 50_000, 9, 5_000),
            CutSample::collect(
                &m.slice_rows(12_345..50_000),
                None,
                12_345,
                50_000,
                9,
                5_000,
            ),
        ];
        let merged = CutSample::merge(
            parts
                .iter()
                .map(|p| CutSample::from_bytes(&p.to_bytes()).unwrap())
                .collect(),
        )
        .unwrap();
        assert_eq!(
            Cuts::from_sample(
                &whole,
                &BinLimits {
                    max_bin: 64,
                    ..Default::default()
                }
            )
            .unwrap(),
            Cuts::from_sample(
                &merged,
                &BinLimits {
                    max_bin: 64,
                    ..Default::default()
                }
            )
            .unwrap()
        );
    }

    #[test]
    fn categorical_levels_are_capped_by_max_cat_bin_not_max_bin() {
        // 300 levels, level i seen i + 1 times: more levels than max_bin allows bins
        let codes: Vec<u32> = (0..300u32).flat_map(|i| vec![i; i as usize + 1]).collect();
        let levels: Vec<String> = (0..300).map(|i| format!("l{i:03}")).collect();
        let n = codes.len() as u64;
        let m = FeatureMatrix::new(
            vec!["c".into()],
            vec![Column::Categorical {
                codes: codes.into(),
                levels,
            }],
        )
        .unwrap();
        let s = CutSample::collect(&m, None, 0, n, 0, usize::MAX);
        let cuts_of = |limits: &BinLimits| Cuts::from_sample(&s, limits);
        let bins_of = |limits: &BinLimits| cuts_of(limits).unwrap().feature(0).n_bins();
        let once = BinLimits {
            min_category_count: 1,
            ..Default::default()
        };
        // every level its own bin past max_bin, plus the missing bin
        assert_eq!(
            bins_of(&BinLimits {
                max_bin: 16,
                ..once
            }),
            301
        );
        // by default every level seen has a bin; with min_category_count 3 levels 0 and 1,
        // seen once and twice, share the rare bin
        assert_eq!(bins_of(&BinLimits::default()), 301);
        assert_eq!(
            bins_of(&BinLimits {
                min_category_count: 3,
                ..Default::default()
            }),
            300
        );
        // the parameters of a model saved before max_cat_bin: max_bin caps the levels too
        let legacy = crate::params::Params {
            max_bin: 16,
            max_cat_bin: 0,
            min_category_count: 1,
            ..Default::default()
        };
        assert_eq!(bins_of(&BinLimits::from(&legacy)), 16);
        let capped = cuts_of(&BinLimits {
            max_cat_bin: 10,
            ..once
        })
        .unwrap();
        let FeatureCuts::Categorical {
            level_bins, n_bins, ..
        } = capped.feature(0)
        else {
            panic!()
        };
        // the 8 most frequent levels keep a bin each; the other 292 share the last one
        assert_eq!(*n_bins, 10);
        assert!(level_bins[292..].iter().all(|&b| (1..=8).contains(&b)));
        assert!(level_bins[..292].iter().all(|&b| b == 9));
        let refused = cuts_of(&BinLimits {
            max_cat_bin: 2,
            ..once
        });
        assert!(refused.unwrap_err().to_string().contains("max_cat_bin"));
    }

    #[test]
    fn rare_levels_share_a_bin_and_unseen_levels_are_missing() {
        let codes = vec![0u32, 0, 0, 1, 1, 1, 2, MISSING_CATEGORY];
        let levels: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let m = FeatureMatrix::new(
            vec!["c".into()],
            vec![Column::Categorical {
                codes: codes.into(),
                levels,
            }],
        )
        .unwrap();
        let s = CutSample::collect(&m, None, 0, 8, 0, usize::MAX);
        let cuts = Cuts::from_sample(
            &s,
            &BinLimits {
                min_category_count: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let FeatureCuts::Categorical {
            levels,
            level_bins,
            n_bins,
        } = cuts.feature(0)
        else {
            panic!()
        };
        // only sampled levels enter the cuts; `c` (one row) shares the "other" bin
        assert_eq!(levels, &["a", "b", "c"]);
        assert_eq!(level_bins, &[1, 2, 3]);
        assert_eq!(*n_bins, 4);
        // binning matches levels by name: `d` was never seen and goes to the missing bin
        let binned = crate::data::BinnedMatrix::new(&m, &cuts).unwrap();
        let bins: Vec<u16> = (0..8).map(|r| binned.bin(r, 0)).collect();
        assert_eq!(bins, vec![1, 1, 1, 2, 2, 2, 3, 0]);
        let other_order = FeatureMatrix::new(
            vec!["c".into()],
            vec![Column::Categorical {
                codes: vec![0u32, 1, 2, 3].into(),
                levels: ["d", "c", "b", "a"].iter().map(|s| s.to_string()).collect(),
            }],
        )
        .unwrap();
        let binned = crate::data::BinnedMatrix::new(&other_order, &cuts).unwrap();
        let bins: Vec<u16> = (0..4).map(|r| binned.bin(r, 0)).collect();
        assert_eq!(bins, vec![0, 3, 2, 1]);
    }

    #[test]
    fn truncated_sample_bytes_are_an_error() {
        let b = sample_of(vec![1.0, 2.0]).to_bytes();
        assert!(CutSample::from_bytes(&b[..b.len() - 3]).is_err());
    }
}
