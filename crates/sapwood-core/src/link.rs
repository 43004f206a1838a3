//! What margins become: probabilities (the logistic function, softmax) and classes,
//! in f64, shared by objectives' outputs, metrics and prediction.

/// The logistic function in f64, for outputs and metrics.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Softmax of `margins` into `out`, in f64, for outputs and metrics.
pub fn softmax(margins: &[f32], out: &mut [f64]) {
    let max = margins
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let mut sum = 0.0;
    for (o, &m) in out.iter_mut().zip(margins) {
        *o = (m as f64 - max).exp();
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// Index of the largest value; the first one on ties.
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}
