"""Test-set quality against XGBoost and LightGBM with matched parameters: on the
repository's datasets (golden metrics in tests/golden/quality.json) and, trained live, on
scikit-learn's bundled datasets.

The bar is a fraction of the peer's *error*: 1 - AUC for AUC, the metric itself for rmse
and mlogloss. Sapwood's error may exceed the peer's by at most TOLERANCE (3%) of it. (A
fraction of the metric was lax where the metric is near 1: 0.5% of an AUC of 0.999 allows
six times the peer's error.) Exact training (``grad_bits=0``) and 8-bit gradients
(``grad_bits=8``) are held to the same bar; the largest excess measured when this was set
was 2.3% of the peer's error (synthetic, AUC, against XGBoost).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.model_selection import KFold, StratifiedKFold

import sapwood

from conftest import REPO, load_bundled

#: Sapwood's error may exceed the peer's by this fraction of the peer's error.
TOLERANCE = 0.03
#: Where Sapwood is known to miss the bar, the excess allowed instead (also in
#: python/README.md): on breast_cancer (569 rows, 5-fold CV) XGBoost's 1 - AUC is 0.00435
#: and Sapwood's 0.0059 (+35%, exact and 8-bit alike): 0.0015 of AUC, a few misordered
#: pairs per fold, which the former bar (0.5% of the AUC) did not show.
KNOWN_GAPS: dict[tuple[str, str], float] = {("breast_cancer", "xgboost"): 0.40}
#: Gradient modes held to the bar: exact integer gradients and 8-bit quantised ones.
GRAD_BITS = [0, 8]
GOLDEN = json.loads((REPO / "tests" / "golden" / "quality.json").read_text())
OBJECTIVES = {"binary": "binary:logistic", "regression": "reg:squarederror", "multiclass": "multi:softprob"}
METRICS = {"binary": "auc", "regression": "rmse", "multiclass": "mlogloss"}

#: XGBoost's parameters of the golden runs (hist, depth 6, 256 bins, lr 0.1, 200 rounds),
#: and its binning: a bin for every distinct value while they fit (min_data_in_bin 1).
XGB_MATCHED = {"max_depth": 6, "max_bin": 256, "eta": 0.1, "reg_lambda": 1.0, "min_child_weight": 1.0,
               "min_data_in_bin": 1}
#: LightGBM's: leaf-wise, 63 leaves, depth 6, 255 bins, 20 rows per leaf, and LightGBM's
#: defaults lambda_l2 = 0, min_sum_hessian_in_leaf = 1e-3 and min_data_in_bin = 3.
LGB_MATCHED = {
    "grow_policy": "lossguide", "max_leaves": 63, "max_depth": 6, "max_bin": 255, "eta": 0.1,
    "min_data_in_leaf": 20, "reg_lambda": 0.0, "min_child_weight": 1e-3, "min_data_in_bin": 3,
}


def _error(metric: str, value: float) -> float:
    """The error a metric measures: 1 - AUC, or the metric (rmse, mlogloss) itself."""
    return 1.0 - value if metric == "auc" else value


def _check(metric: str, ours: float, theirs: float, what: str, tolerance: float = TOLERANCE) -> None:
    e_ours, e_theirs = _error(metric, ours), _error(metric, theirs)
    assert e_ours <= e_theirs * (1 + tolerance), (
        f"{what}: {metric} {ours:.6f} vs {theirs:.6f} (error {e_ours:.6g} vs {e_theirs:.6g}, "
        f"{e_ours / e_theirs - 1:+.2%} of the peer's)"
    )


def _bundled_score(name: str, matched: dict[str, Any]) -> tuple[str, float]:
    meta, train, test = load_bundled(name)
    label = meta["label"]
    task = meta["task"]
    y_train, y_test = train.pop(label), test.pop(label)
    if meta["label_kind"] == "string":
        y_train, y_test = y_train.astype(str).tolist(), y_test.astype(str).tolist()
    dtrain = sapwood.Dataset(train, label=y_train)
    dtest = sapwood.Dataset(test, label=y_test)
    metric = METRICS[task]
    params = {"objective": OBJECTIVES[task], "eval_metric": metric, **matched}
    b = sapwood.train(params, dtrain, 200, evals=[(dtest, "test")], verbose_eval=False)
    return metric, b.evals_result()["test"][metric][-1]


#: A fixed test split under this many rows moves by more than 0.5% with the split alone
#: (penguins: 69 test rows, where LightGBM itself scores 0.161 or 0.229 with
#: min_data_in_bin 1 or 3), so those datasets are compared by 5-fold CV against live runs.
#: digits' 359 test rows too: at LightGBM's settings its log loss there went 0.0543 ->
#: 0.0638 with LightGBM's softmax hessian (LightGBM 0.0584), while over 5 folds the
#: hessian took it 0.0803 -> 0.0788 (LightGBM 0.0805).
SMALL_TEST_ROWS = 400
BUNDLED = sorted(GOLDEN["datasets"])


@pytest.mark.parametrize("grad_bits", GRAD_BITS)
@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_datasets(name: str, library: str, grad_bits: int) -> None:
    meta, train, test = load_bundled(name)
    matched = {**(XGB_MATCHED if library == "xgboost" else LGB_MATCHED), "grad_bits": grad_bits}
    if meta["rows"]["test"] < SMALL_TEST_ROWS:
        import pandas as pd

        frame = pd.concat([train, test], ignore_index=True)
        y = frame.pop(meta["label"])
        if meta["task"] != "regression":
            y = y.map({c: i for i, c in enumerate(sorted(y.unique()))})
        _cv(name, frame, y.to_numpy(), meta["task"], library, grad_bits)
        return
    metric, ours = _bundled_score(name, matched)
    what = f"{name} vs {library}, grad_bits={grad_bits}"
    _check(metric, ours, GOLDEN["datasets"][name][library][metric], what)


def _metric(metric: str, y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    if metric == "auc":
        return float(roc_auc_score(y, p))
    if metric == "rmse":
        return float(np.sqrt(np.mean((p - y) ** 2)))
    return float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y.astype(int)], 1e-15, None))))


SKLEARN_SETS: dict[str, tuple[Callable[..., Any], str]] = {
    "breast_cancer": (load_breast_cancer, "binary"),
    "diabetes": (load_diabetes, "regression"),
    "digits": (load_digits, "multiclass"),
}


def _live_model(library: str, task: str) -> Any:
    if library == "xgboost":
        import xgboost as xgb

        kind = xgb.XGBRegressor if task == "regression" else xgb.XGBClassifier
        return kind(
            tree_method="hist", max_depth=6, max_bin=256, learning_rate=0.1, n_estimators=200,
            reg_lambda=1.0, min_child_weight=1.0, n_jobs=1, random_state=0,
            enable_categorical=True,
        )
    import lightgbm as lgb

    kind = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
    return kind(
        max_depth=6, num_leaves=63, max_bin=255, learning_rate=0.1, n_estimators=200,
        min_child_samples=20, n_jobs=1, random_state=0, deterministic=True, verbose=-1,
    )


@pytest.mark.parametrize("grad_bits", GRAD_BITS)
@pytest.mark.parametrize(
    ("name", "library"),
    [
        ("breast_cancer", "xgboost"),
        ("breast_cancer", "lightgbm"),
        ("diabetes", "xgboost"),
        ("diabetes", "lightgbm"),
        ("digits", "xgboost"),
        ("digits", "lightgbm"),
    ],
)
def test_sklearn_datasets_live(name: str, library: str, grad_bits: int) -> None:
    loader, task = SKLEARN_SETS[name]
    X, y = loader(return_X_y=True)
    _cv(name, X, y, task, library, grad_bits)


def _cv(name: str, X: Any, y: np.ndarray, task: str, library: str, grad_bits: int) -> None:
    """Mean test metric over 5 folds: single splits of these small sets (a few hundred
    rows) move by more than 0.5% with the split alone."""
    folds = (KFold if task == "regression" else StratifiedKFold)(5, shuffle=True, random_state=0)
    metric = METRICS[task]
    matched = {**(XGB_MATCHED if library == "xgboost" else LGB_MATCHED), "grad_bits": grad_bits}
    rows = (lambda idx: X.iloc[idx]) if hasattr(X, "iloc") else (lambda idx: X[idx])
    ours_scores, theirs_scores = [], []
    for tr, te in folds.split(X, y):
        theirs_model = _live_model(library, task).fit(rows(tr), y[tr])
        ours_model = sapwood.train(
            {"objective": OBJECTIVES[task], **matched}, sapwood.Dataset(rows(tr), label=y[tr]), 200
        )
        if task == "regression":
            theirs_p = theirs_model.predict(rows(te))
        else:
            proba = theirs_model.predict_proba(rows(te))
            theirs_p = proba[:, 1] if task == "binary" else proba
        ours_scores.append(_metric(metric, y[te], ours_model.predict(rows(te)).astype(np.float64)))
        theirs_scores.append(_metric(metric, y[te], np.asarray(theirs_p, dtype=np.float64)))
    ours, theirs = float(np.mean(ours_scores)), float(np.mean(theirs_scores))
    print(f"{name} {library} grad_bits={grad_bits} {metric}: sapwood {ours:.6f} {library} {theirs:.6f}")
    tolerance = KNOWN_GAPS.get((name, library), TOLERANCE)
    _check(metric, ours, theirs, f"{name} vs {library}, grad_bits={grad_bits} (5-fold CV)", tolerance)


def test_lightgbms_multiclass_hessian_takes_lightgbms_steps() -> None:
    """The default ``multiclass_hessian="lightgbm"`` (K/(K - 1) · p(1 - p) instead of
    XGBoost's 2p(1 - p)) gives LightGBM's multiclass log loss at matched settings, on ten
    classes where XGBoost's smaller steps leave it several percent behind after 30 rounds;
    the gradients' factor, not the trees, makes the difference."""
    lgb = pytest.importorskip("lightgbm")
    from sklearn.metrics import log_loss

    rng = np.random.default_rng(0)
    n, f, k = 12_000, 10, 10
    x = rng.normal(size=(n, f)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(f, k)) + 1.5 * rng.gumbel(size=(n, k)), axis=1)
    y = y.astype(np.float32)
    train, test = slice(0, 9_000), slice(9_000, None)

    def sapwood_loss(hessian: str | None) -> float:
        params = {"objective": "multi:softprob", "num_class": k, "max_depth": 6,
                  "learning_rate": 0.1, "nthread": 2}
        if hessian is not None:
            params["multiclass_hessian"] = hessian
        b = sapwood.train(params, sapwood.Dataset(x[train], label=y[train]), 30,
                          verbose_eval=False)
        return log_loss(y[test], b.predict(x[test]).reshape(-1, k), labels=range(k))

    model = lgb.train(
        {"objective": "multiclass", "num_class": k, "num_leaves": 63, "max_depth": 6,
         "learning_rate": 0.1, "lambda_l2": 1.0, "min_sum_hessian_in_leaf": 1.0,
         "min_data_in_leaf": 0, "verbosity": -1, "num_threads": 2},
        lgb.Dataset(x[train], label=y[train]), 30)
    peer = log_loss(y[test], model.predict(x[test]), labels=range(k))
    default, xgboosts = sapwood_loss(None), sapwood_loss("xgboost")
    # measured 2026-12-05: 1.5377 (lightgbm), 1.6040 (xgboost), LightGBM 1.5389
    assert default <= 1.01 * peer, (default, peer)
    assert xgboosts - default > 0.02 * peer, (default, xgboosts)
    assert sapwood_loss("lightgbm") == default


def test_a_model_continued_keeps_its_softmax_hessian() -> None:
    """A model trained with XGBoost's hessian (the default before LightGBM's) and continued
    without naming one trains on with XGBoost's: 10 + 10 rounds save the bytes of 20."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2_000, 5)).astype(np.float32)
    y = np.argmax(x[:, :4] + rng.gumbel(size=(2_000, 4)), axis=1).astype(np.float32)
    data = sapwood.Dataset(x, label=y)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 4, "nthread": 2}
    old = {**params, "multiclass_hessian": "xgboost"}
    first = sapwood.train(old, data, 10, verbose_eval=False)
    continued = sapwood.train(params, data, 10, xgb_model=first, verbose_eval=False)
    straight = sapwood.train(old, data, 20, verbose_eval=False)
    assert continued.to_json() == straight.to_json()
    assert sapwood.train(params, data, 20, verbose_eval=False).to_json() != straight.to_json()


def test_a_model_continued_keeps_its_poisson_leaf_bound() -> None:
    """A count:poisson model trained with XGBoost's leaf bound of 0.7 (the bound before it
    was 2) and continued without naming one trains on with 0.7: 10 + 10 rounds save the
    bytes of 20, which differ from 20 rounds at the default bound (the bound binds here: a
    few rows hold counts a hundred times the others')."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2_000, 5)).astype(np.float32)
    y = rng.poisson(np.exp(x[:, 0] + 0.5 * x[:, 1])).astype(np.float32)
    y[::97] *= 100
    data = sapwood.Dataset(x, label=y)
    params = {"objective": "count:poisson", "max_depth": 4, "learning_rate": 0.3, "nthread": 2}
    old = {**params, "poisson_leaf_bound": 0.7}
    first = sapwood.train(old, data, 10, verbose_eval=False)
    continued = sapwood.train(params, data, 10, xgb_model=first, verbose_eval=False)
    straight = sapwood.train(old, data, 20, verbose_eval=False)
    assert continued.to_json() == straight.to_json()
    assert sapwood.train(params, data, 20, verbose_eval=False).to_json() != straight.to_json()
