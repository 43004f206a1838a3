"""Reference values of every metric in sapwood-core's `metric.rs`, from scikit-learn and
SciPy rather than from Sapwood's formulas, on small fixed inputs with and without weights.

Run from the repository root with the test virtualenv (scikit-learn, SciPy, NumPy):

    /tmp/sapwood-pyvenv/bin/python tests/metric_refs/make_refs.py

It rewrites `tests/metric_refs/refs.json`, which `crates/sapwood-core/tests/metric_refs.rs`
checks `Metric::evaluate` against. Inputs are f32 values written exactly (Sapwood reads f32
margins, labels and weights); metric inputs follow `Metric::evaluate`: predicted values for
the plain regression metrics, log-means for the Poisson, gamma and Tweedie metrics, margins
for classification. Metric constants take Sapwood's defaults (`quantile_alpha` 0.5,
`huber_slope` 1, Tweedie variance power 1.5) unless the name carries one (`@1.2`).
"""

import json
from pathlib import Path

import numpy as np
import scipy
import scipy.stats
import sklearn
from sklearn import metrics as skm

OUT = Path(__file__).with_name("refs.json")
N = 40


def f32(a):
    """Values exactly representable as f32, as float64."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def sigmoid(m):
    return 1.0 / (1.0 + np.exp(-m))


def softmax(m):
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def wmean(v, w):
    return float(np.average(v, weights=w))


def regression_refs(y, p, w):
    return {
        "rmse": float(np.sqrt(skm.mean_squared_error(y, p, sample_weight=w))),
        "rmsle": float(np.sqrt(skm.mean_squared_log_error(y, p, sample_weight=w))),
        "mae": float(skm.mean_absolute_error(y, p, sample_weight=w)),
        "mape": float(skm.mean_absolute_percentage_error(y, p, sample_weight=w)),
        "quantile": float(skm.mean_pinball_loss(y, p, alpha=0.5, sample_weight=w)),
        # no library has the pseudo-Huber error: its definition, slope 1
        "mphe": wmean(np.sqrt(1.0 + (p - y) ** 2) - 1.0, w),
    }


def tweedie_nloglik(y, mu, w, rho):
    # Tweedie's deviance is 2 (y^(2-r) / ((1-r)(2-r)) - y mu^(1-r) / (1-r) + mu^(2-r) / (2-r));
    # the negative log-likelihood XGBoost reports drops the term without mu
    dev = skm.mean_tweedie_deviance(y, mu, sample_weight=w, power=rho)
    return float(dev / 2.0 - wmean(y ** (2.0 - rho) / ((1.0 - rho) * (2.0 - rho)), w))


def log_link_refs(y, m, w, counts):
    mu = np.exp(m)
    refs = {
        "tweedie-nloglik": tweedie_nloglik(y, mu, w, 1.5),
        "tweedie-nloglik@1.2": tweedie_nloglik(y, mu, w, float(np.float32(1.2))),
    }
    if counts:
        refs["poisson-nloglik"] = -wmean(scipy.stats.poisson.logpmf(y, mu), w)
    else:
        # shape 1: an exponential distribution with mean mu
        refs["gamma-nloglik"] = -wmean(scipy.stats.gamma.logpdf(y, a=1.0, scale=mu), w)
        refs["gamma-deviance"] = float(skm.mean_gamma_deviance(y, mu, sample_weight=w))
    return refs


def binary_refs(y, m, w):
    return {
        "logloss": float(skm.log_loss(y, sigmoid(m), sample_weight=w, labels=[0, 1])),
        "error": 1.0 - float(skm.accuracy_score(y, m > 0, sample_weight=w)),
        "auc": float(skm.roc_auc_score(y, m, sample_weight=w)),
        "aucpr": float(skm.average_precision_score(y, m, sample_weight=w)),
    }


def multiclass_refs(y, m, w, k):
    ww = np.ones(len(y)) if w is None else w
    # one-vs-rest AUC of each class's margin, weighted by the class's total weight
    aucs = [skm.roc_auc_score(y == c, m[:, c], sample_weight=w) for c in range(k)]
    prevalence = [ww[y == c].sum() for c in range(k)]
    return {
        "mlogloss": float(skm.log_loss(y, softmax(m), sample_weight=w, labels=list(range(k)))),
        "merror": 1.0 - float(skm.accuracy_score(y, m.argmax(axis=1), sample_weight=w)),
        "auc": float(np.average(aucs, weights=prevalence)),
    }


def main():
    rng = np.random.default_rng(20240601)
    weights = f32(np.round(rng.uniform(0.25, 3.0, N) * 16) / 16)
    cases = []

    def add(name, groups, labels, margins, refs_of):
        for w in (None, weights):
            cases.append(
                {
                    "name": name + (" weighted" if w is not None else ""),
                    "groups": groups,
                    "labels": labels.tolist(),
                    "margins": margins.reshape(-1).tolist(),
                    "weights": None if w is None else w.tolist(),
                    "expected": refs_of(w),
                }
            )

    # regression: positive labels and predictions (rmsle, mape)
    y = f32(np.round(rng.uniform(0.5, 10.0, N) * 8) / 8)
    p = f32(np.clip(y + np.round(rng.normal(0.0, 1.5, N) * 16) / 16, 0.125, None))
    add("regression", 1, y, p, lambda w: regression_refs(y, p, w))

    # counts and log-means: Poisson and Tweedie (zeros included)
    y = f32(rng.poisson(2.0, N))
    m = f32(np.round(rng.uniform(-1.0, 2.0, N) * 16) / 16)
    add("counts", 1, y, m, lambda w: log_link_refs(y, m, w, counts=True))

    # positive values and log-means: gamma and Tweedie
    y = f32(np.round(rng.gamma(2.0, 1.5, N) * 16 + 1) / 16)
    m = f32(np.round(rng.uniform(-0.5, 2.0, N) * 16) / 16)
    add("positive", 1, y, m, lambda w: log_link_refs(y, m, w, counts=False))

    # binary: margins on a grid of 0.25, so scores tie (AUC's half credit, AUC-PR's groups)
    y = f32(rng.integers(0, 2, N))
    m = f32(np.round((rng.normal(0.0, 1.5, N) + (y - 0.5)) * 4) / 4)
    add("binary", 1, y, m, lambda w: binary_refs(y, m, w))

    # three classes, no tied maxima (a class offset of 1/64 breaks them)
    k = 3
    y = rng.integers(0, k, N)
    m = np.round(rng.normal(0.0, 1.0, (N, k)) * 8) / 8 + np.arange(k) / 64
    m[np.arange(N), y] += 0.5
    m = f32(m)
    assert all(len(set(row)) == k for row in m.tolist())
    add("multiclass", k, f32(y), m, lambda w: multiclass_refs(y, m, w, k))

    out = {
        "made_by": "tests/metric_refs/make_refs.py",
        "versions": {
            "scikit-learn": sklearn.__version__,
            "scipy": scipy.__version__,
            "numpy": np.__version__,
        },
        "cases": cases,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
