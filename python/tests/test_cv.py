"""sapwood.cv: per-round mean and standard deviation over folds, as xgboost.cv."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sapwood

REG = {"objective": "reg:squarederror", "eta": 0.3, "max_depth": 3, "seed": 0}


def _manual(params: dict[str, Any], X: Any, y: Any, folds: list[tuple[Any, Any]], rounds: int) -> dict[str, list[float]]:
    """What cv must return, from a plain loop of sapwood.train over the folds."""
    per_fold: list[dict[str, dict[str, list[float]]]] = []
    for tr, te in folds:
        history: dict[str, dict[str, list[float]]] = {}
        dtr = sapwood.Dataset(X[tr], label=y[tr])
        sapwood.train(
            params, dtr, rounds, evals=[(dtr, "train"), (sapwood.Dataset(X[te], label=y[te]), "test")],
            verbose_eval=False, evals_result=history,
        )
        per_fold.append(history)
    out = {}
    for ds in ("train", "test"):
        for metric in per_fold[0][ds]:
            values = np.array([h[ds][metric] for h in per_fold])
            out[f"{ds}-{metric}-mean"] = list(values.mean(axis=0))
            out[f"{ds}-{metric}-std"] = list(values.std(axis=0))
    return out


def test_cv_equals_manual_loop_on_explicit_folds(regression_data: Any) -> None:
    X, y = regression_data
    rng = np.random.default_rng(5)
    order = rng.permutation(len(y))
    folds = [(np.setdiff1d(order, part), part) for part in np.array_split(order, 4)]
    got = sapwood.cv(REG, sapwood.Dataset(X, label=y), num_boost_round=15, folds=folds)
    assert list(got) == ["train-rmse-mean", "train-rmse-std", "test-rmse-mean", "test-rmse-std"]
    want = _manual(REG, X, y, folds, 15)
    assert got == want  # exact: the same folds give the same models
    assert all(len(v) == 15 for v in got.values())
    assert got["test-rmse-mean"][-1] < got["test-rmse-mean"][0]


def test_cv_with_sklearn_splitter_and_metrics(regression_data: Any) -> None:
    pytest.importorskip("sklearn")
    from sklearn.model_selection import KFold

    X, y = regression_data
    splitter = KFold(n_splits=3, shuffle=True, random_state=1)
    got = sapwood.cv(REG, sapwood.Dataset(X, label=y), 8, folds=splitter, metrics=["mae", "rmse"])
    want = _manual({**REG, "eval_metric": ["mae", "rmse"]}, X, y, list(splitter.split(X)), 8)
    assert got == want
    assert set(got) == {f"{d}-{m}-{s}" for d in ("train", "test") for m in ("mae", "rmse") for s in ("mean", "std")}


def test_cv_default_folds_are_seeded_partitions(regression_data: Any) -> None:
    X, y = regression_data
    d = sapwood.Dataset(X, label=y)
    a = sapwood.cv(REG, d, 5, nfold=5, seed=3)
    assert a == sapwood.cv(REG, d, 5, nfold=5, seed=3)
    assert a != sapwood.cv(REG, d, 5, nfold=5, seed=4)
    # without shuffling the folds are contiguous blocks, as KFold(shuffle=False) makes
    blocks = np.array_split(np.arange(len(y)), 5)
    folds = [(np.setdiff1d(np.arange(len(y)), b), b) for b in blocks]
    assert sapwood.cv(REG, d, 5, nfold=5, shuffle=False) == _manual(REG, X, y, folds, 5)


def test_cv_stratified_keeps_class_shares() -> None:
    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 4))
    y = (rng.random(n) < 0.1).astype(np.float32)  # 10% positives
    params = {"objective": "binary:logistic", "eval_metric": "auc", "seed": 0}
    folds = sapwood.core._make_folds(sapwood.Dataset(X, label=y), 5, True, None, True, 0)
    positives = [int(y[te].sum()) for _, te in folds]
    assert max(positives) - min(positives) <= 1
    assert sorted(np.concatenate([te for _, te in folds]).tolist()) == list(range(n))
    got = sapwood.cv(params, sapwood.Dataset(X, label=y), 5, nfold=5, stratified=True)
    assert got == _manual(params, X, y, folds, 5)


def test_cv_early_stopping_truncates_like_xgboost() -> None:
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] + rng.normal(scale=2.0, size=300)  # noisy: the test error turns up early
    params = {"objective": "reg:squarederror", "eta": 0.5, "max_depth": 6}
    order = rng.permutation(300)
    folds = [(np.setdiff1d(order, p), p) for p in np.array_split(order, 3)]
    full = sapwood.cv(params, sapwood.Dataset(X, label=y), 60, folds=folds)
    stopped = sapwood.cv(params, sapwood.Dataset(X, label=y), 60, folds=folds, early_stopping_rounds=5)
    curve = full["test-rmse-mean"]
    best = int(np.argmin(curve))
    assert len(stopped["test-rmse-mean"]) == best + 1 < 60
    assert all(v == full[k][: best + 1] for k, v in stopped.items())
    # XGBoost's rule on its own run: every list ends at the best round of the mean test
    # metric, which is the last entry
    xs = xgb.cv(params, xgb.DMatrix(X, label=y), 60, folds=folds, early_stopping_rounds=5, as_pandas=False)
    assert set(xs) == set(stopped)
    x_curve = xs["test-rmse-mean"]
    assert int(np.argmin(x_curve)) == len(x_curve) - 1 < 60
    assert all(len(v) == len(x_curve) for v in xs.values())


def test_cv_as_pandas_and_frame_input(mixed_frame: Any) -> None:
    pd = pytest.importorskip("pandas")
    frame, y = mixed_frame
    got = sapwood.cv(REG, sapwood.Dataset(frame, label=y), 4, nfold=3, as_pandas=True)
    assert isinstance(got, pd.DataFrame)
    assert list(got.columns) == ["train-rmse-mean", "train-rmse-std", "test-rmse-mean", "test-rmse-std"]
    assert len(got) == 4


def test_cv_sparse_input() -> None:
    sp = pytest.importorskip("scipy.sparse")
    X = sp.random(300, 10, density=0.3, format="csr", random_state=np.random.default_rng(0))
    y = np.asarray(X.sum(axis=1)).ravel()
    folds = [(np.arange(150, 300), np.arange(150)), (np.arange(150), np.arange(150, 300))]
    got = sapwood.cv(REG, sapwood.Dataset(X, label=y), 5, folds=folds)
    assert got == _manual(REG, X, y, folds, 5)


def test_cv_errors_name_the_parameter(regression_data: Any) -> None:
    X, y = regression_data
    d = sapwood.Dataset(X, label=y)
    with pytest.raises(sapwood.ParameterError, match="nfold"):
        sapwood.cv(REG, d, 3, nfold=1)
    with pytest.raises(sapwood.ParameterError, match="folds"):
        sapwood.cv(REG, d, 3, folds=[(np.arange(10), np.array([10_000]))])
    with pytest.raises(sapwood.DataError, match="label"):
        sapwood.cv(REG, sapwood.Dataset(X), 3)
