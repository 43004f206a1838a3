//! Leaf weight and gain: XGBoost's second-order formulas with L1, L2 and max_delta_step.

use crate::params::Params;

/// Splits must reduce the loss by more than this (XGBoost's `kRtEps`).
pub const MIN_SPLIT_GAIN: f64 = 1e-6;

/// How a node with many categorical levels estimates the noise in its levels' means, which
/// sets how far their means shrink toward the node's (`cat_noise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
pub enum CatNoise {
    /// The intercept of a line through the levels' squared deviations against their
    /// hessians: models saved before the choice existed read as this. It cannot tell noise
    /// from signal where every level holds about the same hessian (ID-like columns).
    #[default]
    #[serde(rename = "fitted")]
    Fitted,
    /// Measured from the node's rows: their squared gradients less what the levels' means
    /// explain. Nodes whose levels differ far beyond that noise also scan more levels.
    #[serde(rename = "measured")]
    Measured,
}

/// The parameters split finding needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitParams {
    /// L2 on weights.
    pub lambda: f64,
    /// L1 on weights.
    pub alpha: f64,
    /// Weight clip; 0 for none.
    pub max_delta_step: f64,
    /// Minimum child hessian.
    pub min_child_weight: f64,
    /// Minimum loss reduction.
    pub gamma: f64,
    /// Minimum estimated rows per child.
    pub min_data_in_leaf: usize,
    /// One-vs-rest below this many levels.
    pub max_cat_to_onehot: usize,
    /// Levels per categorical split.
    pub max_cat_threshold: usize,
    /// Hessian smoothing when ordering levels.
    pub cat_smooth: f64,
    /// Extra L2 for many-level categorical splits.
    pub cat_l2: f64,
    /// Minimum estimated rows per group of levels.
    pub min_data_per_group: usize,
    /// How many-level categorical nodes estimate their noise.
    pub cat_noise: CatNoise,
}

impl SplitParams {
    /// The split-related subset of `params`.
    pub fn from_params(p: &Params) -> Self {
        SplitParams {
            lambda: p.lambda,
            alpha: p.alpha,
            max_delta_step: p.leaf_delta_bound(),
            min_child_weight: p.min_child_weight,
            gamma: p.gamma,
            min_data_in_leaf: p.min_data_in_leaf,
            max_cat_to_onehot: p.max_cat_to_onehot,
            max_cat_threshold: p.max_cat_threshold,
            cat_smooth: p.cat_smooth,
            cat_l2: p.cat_l2,
            min_data_per_group: p.min_data_per_group,
            cat_noise: p.cat_noise,
        }
    }
}

fn threshold_l1(g: f64, alpha: f64) -> f64 {
    if g > alpha {
        g - alpha
    } else if g < -alpha {
        g + alpha
    } else {
        0.0
    }
}

/// The optimal leaf weight for sums (g, h): -T(g, alpha) / (h + lambda), clipped.
pub fn leaf_weight(g: f64, h: f64, p: &SplitParams, lambda: f64) -> f64 {
    if h + lambda <= 0.0 {
        return 0.0;
    }
    let w = -threshold_l1(g, p.alpha) / (h + lambda);
    if p.max_delta_step > 0.0 {
        w.clamp(-p.max_delta_step, p.max_delta_step)
    } else {
        w
    }
}

/// Twice the loss reduction of a leaf with sums (g, h) at weight `w` (a bounded one, where
/// monotone constraints keep it from its optimum).
pub fn leaf_gain_at(g: f64, h: f64, w: f64, p: &SplitParams, lambda: f64) -> f64 {
    -(2.0 * g * w + (h + lambda) * w * w) - 2.0 * p.alpha * w.abs()
}

/// Twice the loss reduction of a leaf with sums (g, h) at its optimal weight.
pub fn leaf_gain(g: f64, h: f64, p: &SplitParams, lambda: f64) -> f64 {
    if h + lambda <= 0.0 {
        return 0.0;
    }
    if p.max_delta_step == 0.0 {
        let t = threshold_l1(g, p.alpha);
        t * t / (h + lambda)
    } else {
        leaf_gain_at(g, h, leaf_weight(g, h, p, lambda), p, lambda)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn weight_minimises_the_regularised_objective(g in -100.0f64..100.0, h in 0.01f64..100.0, alpha in 0.0f64..5.0, mds in prop_oneof![Just(0.0), 0.1f64..3.0]) {
            let p = SplitParams { alpha, max_delta_step: mds, ..SplitParams::from_params(&Params::default()) };
            let obj = |w: f64| g * w + 0.5 * (h + p.lambda) * w * w + alpha * w.abs();
            let w = leaf_weight(g, h, &p, p.lambda);
            // brute force over a fine grid within the clip
            let lim = if mds > 0.0 { mds } else { 200.0 };
            let best = (-20_000..=20_000).map(|i| i as f64 / 20_000.0 * lim).map(obj).fold(f64::INFINITY, f64::min);
            prop_assert!(obj(w) <= best + 1e-6);
            // and the gain is -2 x the objective at the optimum
            prop_assert!((leaf_gain(g, h, &p, p.lambda) + 2.0 * obj(w)).abs() < 1e-6 * (1.0 + obj(w).abs()));
        }
    }
}
