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


def test_cv_stratified_on_continuous_or_rare_labels_fills_every_fold(regression_data: Any) -> None:
    # every value of a continuous label is its own class: dealt out class by class with one
    # running count, the folds are the label's sorted order dealt in turn, every fold is
    # a fifth of the rows (each class used to start at fold 0: fold 0 held every row and
    # its training set none, "the training dataset has no rows")
    X, y = regression_data
    n = len(y)
    folds = sapwood.core._make_folds(sapwood.Dataset(X, label=y), 5, True, None, True, 0)
    sizes = [len(te) for _, te in folds]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n
    assert sorted(np.concatenate([te for _, te in folds]).tolist()) == list(range(n))
    # stratified by the sorted label: each fold's label distribution matches the whole
    for _, te in folds:
        assert abs(float(np.median(y[te])) - float(np.median(y))) < 0.2 * float(np.std(y))
    got = sapwood.cv(REG, sapwood.Dataset(X, label=y), 3, nfold=5, stratified=True)
    assert len(got["test-rmse-mean"]) == 3
    # three classes of two rows each and nfold 5: no fold is left without training rows
    y3 = np.array([0, 0, 1, 1, 2, 2] * 5, dtype=np.float32)
    folds = sapwood.core._make_folds(sapwood.Dataset(np.ones((30, 1)), label=y3), 5, True, None, True, 1)
    assert all(len(tr) > 0 and len(te) == 6 for tr, te in folds)


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


def test_cv_prints_calls_back_and_returns_boosters_as_the_peers(regression_data: Any, capsys: Any) -> None:
    X, y = regression_data
    d = sapwood.Dataset(X, label=y)
    full = sapwood.cv(REG, d, num_boost_round=12, nfold=3)
    capsys.readouterr()
    seen: list[sapwood.RoundInfo] = []

    def stop_at_round_5(info: sapwood.RoundInfo) -> bool:
        seen.append(info)
        return info.iteration == 5

    got = sapwood.cv(REG, d, num_boost_round=12, nfold=3, verbose_eval=2, callbacks=[stop_at_round_5])
    out = capsys.readouterr().out.splitlines()
    # every other round and the last one kept, with means and standard deviations
    assert [line.split("\t")[0] for line in out] == ["[0]", "[2]", "[4]", "[5]"]
    mean, std = full["test-rmse-mean"][4], full["test-rmse-std"][4]
    assert f"test-rmse:{mean:.5f}+{std:.5f}" in out[2]
    # the callback saw the means of each round and its stop ended the lists there
    assert [i.iteration for i in seen] == list(range(6))
    assert seen[3].evaluation["test"]["rmse"] == full["test-rmse-mean"][3]
    assert got == {k: v[:6] for k, v in full.items()}
    sapwood.cv(REG, d, num_boost_round=3, nfold=3, verbose_eval=True, show_stdv=False)
    assert "+" not in capsys.readouterr().out
    # LightGBM's return_cvbooster: one booster per fold, each predicting like its history
    res = sapwood.cv(REG, d, num_boost_round=4, nfold=3, return_cvbooster=True)
    assert len(res["cvbooster"]) == 3 and all(b.num_boosted_rounds() == 4 for b in res["cvbooster"])
    with pytest.raises(sapwood.ParameterError, match="return_cvbooster"):
        sapwood.cv(REG, d, num_boost_round=2, as_pandas=True, return_cvbooster=True)


def test_cv_takes_custom_objectives_metrics_and_fpreproc(regression_data: Any) -> None:
    X, y = regression_data
    d = sapwood.Dataset(X, label=y)

    def squared(preds: Any, dtrain: sapwood.Dataset) -> tuple[Any, Any]:
        return preds - dtrain.get_label(), np.ones_like(preds)

    def mae(preds: Any, dmat: sapwood.Dataset) -> tuple[str, float]:
        return "my-mae", float(np.mean(np.abs(preds - dmat.get_label())))

    calls: list[int] = []

    def prep(dtr: sapwood.Dataset, dte: sapwood.Dataset, params: Any) -> Any:
        calls.append(dtr.num_row() + dte.num_row())
        return dtr, dte, params

    got = sapwood.cv({**REG, "base_score": 0}, d, num_boost_round=6, nfold=3, obj=squared,
                     custom_metric=mae, fpreproc=prep)
    assert calls == [len(y)] * 3
    built_in = sapwood.cv({**REG, "base_score": 0}, d, num_boost_round=6, nfold=3)
    # the custom squared error trains the built-in models; its metric is reported too
    assert got["test-rmse-mean"] == built_in["test-rmse-mean"]
    assert len(got["test-my-mae-mean"]) == 6 and got["test-my-mae-mean"][-1] < got["test-my-mae-mean"][0]


def test_cv_of_ranking_data_keeps_queries_whole() -> None:
    rng = np.random.default_rng(3)
    sizes = rng.integers(3, 12, size=40)
    qid = np.repeat(np.arange(40) * 3 + 100, sizes)
    X = rng.normal(size=(qid.size, 4))
    y = np.clip((X[:, 0] + 0.3 * rng.normal(size=qid.size)) * 1.5 + 1.5, 0, 4).astype(int)
    d = sapwood.Dataset(X, label=y, qid=qid)
    params = {"objective": "rank:ndcg", "eval_metric": "ndcg@5", "max_depth": 3}
    got = sapwood.cv(params, d, num_boost_round=5, nfold=4, seed=1)
    assert len(got["test-ndcg@5-mean"]) == 5
    # the same folds by hand: whole queries, dealt out as cv deals them
    order = np.random.default_rng(1).permutation(40)
    query_of_row = np.repeat(np.arange(40), sizes)
    manual = []
    for part in np.array_split(order, 4):
        te = np.flatnonzero(np.isin(query_of_row, part))
        tr = np.flatnonzero(~np.isin(query_of_row, part))
        h: dict[str, Any] = {}
        dtr = sapwood.Dataset(X[tr], label=y[tr], qid=qid[tr])
        sapwood.train(params, dtr, 5, evals=[(dtr, "train"), (sapwood.Dataset(X[te], label=y[te], qid=qid[te]), "test")],
                      verbose_eval=False, evals_result=h)
        manual.append(h["test"]["ndcg@5"])
    assert got["test-ndcg@5-mean"] == pytest.approx(list(np.mean(manual, axis=0)), rel=1e-12)
    with pytest.raises(sapwood.ParameterError, match="splits a query"):
        sapwood.cv(params, d, num_boost_round=2, folds=[(np.arange(5, qid.size), np.arange(5))])
    with pytest.raises(sapwood.ParameterError, match="stratified"):
        sapwood.cv(params, d, num_boost_round=2, stratified=True)
