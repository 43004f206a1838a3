//! `survival:cox`: gradients and likelihood of Cox proportional hazards.
//!
//! A label is a survival time, negative when the row is censored (XGBoost's convention). A
//! row's gradient depends on every row still at risk at its time, so the gradients of a
//! job are computed over all of its rows: each worker gathers every worker's times,
//! weights and margins (once for the first two, each round for the margins) and computes
//! the same global pass, in one fixed order (time, then global row), so the bits do not
//! depend on how rows are sharded. Ties use Breslow's approximation: every row whose time
//! equals an event's time is in that event's risk set.

use crate::collective::Collective;
use crate::detmath;
use crate::error::{Error, Result};
use crate::objective::MIN_HESSIAN;

/// Rows sorted by survival time: the order every Cox pass walks in.
#[derive(Debug, Clone, PartialEq)]
pub struct RiskOrder {
    /// Row indices by |label| ascending, then by row.
    order: Vec<u32>,
    /// Where each run of equal times ends in `order` (exclusive), one entry per run.
    ends: Vec<u32>,
}

impl RiskOrder {
    /// The order of rows with labels `labels`.
    pub fn new(labels: &[f32]) -> Self {
        let mut order: Vec<u32> = (0..labels.len() as u32).collect();
        order.sort_by(|&a, &b| {
            labels[a as usize]
                .abs()
                .total_cmp(&labels[b as usize].abs())
                .then(a.cmp(&b))
        });
        let mut ends = Vec::new();
        for i in 1..=order.len() {
            let end = i == order.len()
                || labels[order[i] as usize].abs() != labels[order[i - 1] as usize].abs();
            if end {
                ends.push(i as u32);
            }
        }
        RiskOrder { order, ends }
    }

    /// Sums of e^margin over each run's risk set (the rows whose time is at least the
    /// run's), per run, from the latest time back.
    fn risk_sums(&self, hazards: &[f64]) -> Vec<f64> {
        let mut sums = vec![0.0f64; self.ends.len()];
        let mut acc = 0.0f64;
        for r in (0..self.ends.len()).rev() {
            let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
            for &i in &self.order[start..self.ends[r] as usize] {
                acc += hazards[i as usize];
            }
            sums[r] = acc;
        }
        sums
    }

    /// The runs with their rows, earliest first.
    fn runs(&self) -> impl Iterator<Item = (usize, &[u32])> {
        self.ends.iter().enumerate().map(move |(r, &end)| {
            let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
            (r, &self.order[start..end as usize])
        })
    }
}

/// Gradients and hessians of the negative partial log-likelihood for every row, weighted
/// by row after the risk sums (as XGBoost weights them); returns the largest |g| and h.
pub fn gradients(
    order: &RiskOrder,
    labels: &[f32],
    weights: Option<&[f32]>,
    margins: &[f32],
    out: &mut [[f32; 2]],
) -> [f32; 2] {
    let hazards: Vec<f64> = margins.iter().map(|&m| detmath::exp(m as f64)).collect();
    let sums = order.risk_sums(&hazards);
    // a = Σ 1/S and b = Σ 1/S² over the events up to and including each run's time
    let (mut a, mut b) = (0.0f64, 0.0f64);
    let mut max = [0.0f32; 2];
    for (r, rows) in order.runs() {
        let events = rows.iter().filter(|&&i| labels[i as usize] > 0.0).count() as f64;
        a += events / sums[r];
        b += events / (sums[r] * sums[r]);
        for &i in rows {
            let i = i as usize;
            let e = hazards[i];
            let event = if labels[i] > 0.0 { 1.0 } else { 0.0 };
            let w = weights.map_or(1.0, |w| w[i] as f64);
            let g = ((e * a - event) * w) as f32;
            let h = ((e * a - e * e * b).max(MIN_HESSIAN as f64) * w) as f32;
            max[0] = max[0].max(g.abs());
            max[1] = max[1].max(h);
            out[i] = [g, h];
        }
    }
    max
}

/// `cox-nloglik`: the negative partial log-likelihood per event, Σ (ln S(t) - m) / events
/// (unweighted, as XGBoost's); NaN when no row is an event.
pub fn neg_log_likelihood(labels: &[f32], margins: &[f32]) -> f64 {
    let order = RiskOrder::new(labels);
    let hazards: Vec<f64> = margins.iter().map(|&m| (m as f64).exp()).collect();
    let sums = order.risk_sums(&hazards);
    let (mut total, mut events) = (0.0f64, 0usize);
    for (r, rows) in order.runs() {
        for &i in rows {
            if labels[i as usize] > 0.0 {
                total += sums[r].ln() - margins[i as usize] as f64;
                events += 1;
            }
        }
    }
    if events == 0 {
        f64::NAN
    } else {
        total / events as f64
    }
}

/// Every worker's rows, gathered once: the Cox loss computes its gradients over the whole
/// job, then each worker keeps its own rows.
#[derive(Debug, Clone)]
pub struct GlobalRows {
    labels: Vec<f32>,
    weights: Option<Vec<f32>>,
    order: RiskOrder,
    /// The first global row of each rank's shard, in rank order, and its length.
    shards: Vec<(u64, usize)>,
    /// This worker's rank.
    rank: usize,
}

fn floats(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
}

impl GlobalRows {
    /// Gathers the labels and weights of every worker (this one holds `labels` from global
    /// row `row_offset`).
    pub fn gather(
        labels: &[f32],
        weights: Option<&[f32]>,
        row_offset: u64,
        collective: &mut dyn Collective,
    ) -> Result<Self> {
        let mut mine = Vec::with_capacity(17 + labels.len() * 8);
        mine.extend_from_slice(&row_offset.to_le_bytes());
        mine.extend_from_slice(&(labels.len() as u64).to_le_bytes());
        mine.push(weights.is_some() as u8);
        for &y in labels {
            mine.extend_from_slice(&y.to_le_bytes());
        }
        for &w in weights.unwrap_or(&[]) {
            mine.extend_from_slice(&w.to_le_bytes());
        }
        let gathered = collective.allgather(&mine)?;
        let mut shards = Vec::with_capacity(gathered.len());
        let (mut all_labels, mut all_weights) = (Vec::new(), Vec::new());
        let mut weighted = false;
        for (rank, g) in gathered.iter().enumerate() {
            let bad = || Error::Collective(format!("rank {rank} sent a malformed Cox shard"));
            if g.len() < 17 {
                return Err(bad());
            }
            let offset = u64::from_le_bytes(g[..8].try_into().expect("8 bytes"));
            let n = u64::from_le_bytes(g[8..16].try_into().expect("8 bytes")) as usize;
            let has_w = g[16] == 1;
            let body = &g[17..];
            if body.len() != n * 4 * (1 + has_w as usize) {
                return Err(bad());
            }
            weighted |= has_w;
            all_labels.extend(floats(&body[..n * 4]));
            if has_w {
                all_weights.extend(floats(&body[n * 4..]));
            } else {
                all_weights.extend(std::iter::repeat_n(1.0f32, n));
            }
            shards.push((offset, n));
        }
        // workers without rows hold no place in the order
        let placed: Vec<&(u64, usize)> = shards.iter().filter(|s| s.1 > 0).collect();
        if placed.windows(2).any(|w| w[0].0 + w[0].1 as u64 != w[1].0) {
            return Err(Error::Collective(
                "survival:cox needs the workers' shards in row order, back to back".into(),
            ));
        }
        Ok(GlobalRows {
            order: RiskOrder::new(&all_labels),
            labels: all_labels,
            weights: weighted.then_some(all_weights),
            shards,
            rank: collective.rank(),
        })
    }

    /// This worker's gradients from its `margins`: every worker's margins are gathered and
    /// the whole job's gradients computed; returns the largest |g| and h over the job (the
    /// same on every worker).
    pub fn gradients(
        &self,
        margins: &[f32],
        collective: &mut dyn Collective,
        out: &mut [[f32; 2]],
    ) -> Result<[f32; 2]> {
        let bytes: Vec<u8> = margins.iter().flat_map(|m| m.to_le_bytes()).collect();
        let gathered = collective.allgather(&bytes)?;
        let mut all = Vec::with_capacity(self.labels.len());
        for (rank, (g, &(_, n))) in gathered.iter().zip(&self.shards).enumerate() {
            if g.len() != n * 4 {
                return Err(Error::Collective(format!(
                    "rank {rank} sent {} margin bytes for {n} rows",
                    g.len()
                )));
            }
            all.extend(floats(g));
        }
        let mut grad = vec![[0.0f32; 2]; all.len()];
        let max = gradients(
            &self.order,
            &self.labels,
            self.weights.as_deref(),
            &all,
            &mut grad,
        );
        let start: usize = self.shards[..self.rank].iter().map(|s| s.1).sum();
        out.copy_from_slice(&grad[start..start + out.len()]);
        Ok(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The negative partial log-likelihood with Breslow ties, straight from its definition.
    fn brute_loss(labels: &[f32], margins: &[f64]) -> f64 {
        let mut total = 0.0;
        for (i, &y) in labels.iter().enumerate() {
            if y > 0.0 {
                let s: f64 = labels
                    .iter()
                    .zip(margins)
                    .filter(|(yj, _)| yj.abs() >= y)
                    .map(|(_, m)| m.exp())
                    .sum();
                total += s.ln() - margins[i];
            }
        }
        total
    }

    #[test]
    fn gradients_and_hessians_are_the_derivatives_of_the_partial_likelihood() {
        // ties between events, between an event and a censored row, and censored rows
        let labels = [3.0f32, -2.0, 2.0, 5.0, 2.0, -5.0, 1.0, 4.0];
        let margins = [0.3f32, -0.4, 0.1, 0.7, -0.2, 0.0, 0.5, -0.6];
        let order = RiskOrder::new(&labels);
        let mut out = vec![[0.0f32; 2]; labels.len()];
        gradients(&order, &labels, None, &margins, &mut out);
        let m: Vec<f64> = margins.iter().map(|&v| v as f64).collect();
        let eps = 1e-5;
        for i in 0..labels.len() {
            let at = |d: f64| {
                let mut v = m.clone();
                v[i] += d;
                brute_loss(&labels, &v)
            };
            let g = (at(eps) - at(-eps)) / (2.0 * eps);
            let h = (at(eps) - 2.0 * at(0.0) + at(-eps)) / (eps * eps);
            assert!(
                (out[i][0] as f64 - g).abs() < 1e-5,
                "g {i}: {:?} vs {g}",
                out[i]
            );
            // the diagonal of the Hessian
            assert!(
                (out[i][1] as f64 - h).abs() < 1e-3,
                "h {i}: {:?} vs {h}",
                out[i]
            );
        }
        let per_event = brute_loss(&labels, &m) / 6.0;
        assert!((neg_log_likelihood(&labels, &margins) - per_event).abs() < 1e-12);
    }

    #[test]
    fn weights_scale_each_rows_gradient() {
        let labels = [1.0f32, -2.0, 3.0];
        let margins = [0.1f32, 0.2, -0.3];
        let order = RiskOrder::new(&labels);
        let (mut plain, mut weighted) = (vec![[0.0f32; 2]; 3], vec![[0.0f32; 2]; 3]);
        gradients(&order, &labels, None, &margins, &mut plain);
        gradients(
            &order,
            &labels,
            Some(&[2.0, 1.0, 0.5]),
            &margins,
            &mut weighted,
        );
        for (i, w) in [2.0f32, 1.0, 0.5].iter().enumerate() {
            assert_eq!(weighted[i][0], (plain[i][0] as f64 * *w as f64) as f32);
        }
    }
}
