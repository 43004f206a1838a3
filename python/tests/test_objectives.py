"""Each objective beyond the first three against live XGBoost and LightGBM, with matched
parameters on the bundled dataset that suits it, over FOLDS folds of its rows
(bench/objectives.py holds the cases and prints the full table).

The bar: Sapwood's test metric within TOLERANCE of the better peer's (a fraction of the
metric, which here is an error or a deviance, except AUC and accuracy where the error is
1 - metric). Where a loss is measured to miss that bar, GAPS holds the excess allowed and
why; the objectives guide (docs/guide/objectives.md) lists the same.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from conftest import REPO

spec = importlib.util.spec_from_file_location("bench_objectives", REPO / "bench" / "objectives.py")
assert spec is not None and spec.loader is not None
bench: Any = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

#: Sapwood's error may exceed the better peer's by this fraction of it.
TOLERANCE = 0.005
#: Each case is scored over this many seeded folds of its dataset's train and test rows
#: pooled (bench/objectives.py --folds 5): on one split of a few thousand rows the gaps moved
#: by several percent with each change to binning or to categorical splits (txhousing's
#: pinball loss at alpha 0.9 went 1522.7 -> 1575.5 with the bins of heavy values, while over
#: ten folds it moved by 0.1%), so a bar on one split measured the split.
FOLDS = 5
#: Measured with 100 rounds over FOLDS folds, every library with min_child_weight 1 and no
#: minimum of rows per leaf. Where a peer wins by more than TOLERANCE, each is allowed its
#: measured excess plus 1 point:
GAPS: dict[str, float] = {
    # pinball 1584.0 vs XGBoost 1540.0 (+2.9%; +4.3% with the lower weighted quantile in
    # the leaves); LightGBM 1609.7. Before each node measured its categorical noise, it
    # was 1586.2, and neither cat_smooth 0, cat_l2 0 nor max_cat_threshold 64 closed it
    # (1575.0, 1599.7, 1573.8 then), nor did dropping city (+2.5% then); cat_l2 0 with
    # max_cat_threshold 64 gave 1543.3, but MAE 6020.0 instead of 5934.0
    "reg:quantileerror": 0.040,
    # no peer has this loss with a usable start (XGBoost's starts far from the labels):
    # compared with LightGBM's Huber loss at the same slope, RMSE 9159.2 vs 8938.9 (+2.5%)
    "reg:pseudohubererror": 0.037,
    # 1 - AUC 0.03503 vs LightGBM 0.03366 (+4.1%); XGBoost 0.03480
    "binary:logitraw": 0.051,
    # penguins' 344 rows: Sapwood and XGBoost misclassify 7, LightGBM 4 (its leaf-wise
    # trees; the losses are the same)
    "multi:softmax": 0.77,
    # mean pinball 2026.9 vs XGBoost 2012.2 (+0.7%)
    "reg:quantileerror[0.1,0.5,0.9]": 0.019,
}
ROUNDS = 100


def _error(name: str, value: float) -> float:
    return 1.0 - value if bench.CASES[name][7] else value


@pytest.mark.parametrize("name", list(bench.CASES))
def test_each_objective_matches_the_better_peer(name: str) -> None:
    r = bench.run_case(name, ROUNDS, folds=FOLDS)
    peers = [r[k] for k in ("xgboost", "lightgbm") if k in r]
    # a peer whose own default start fails on this data (XGBoost's pseudo-Huber starts far
    # from labels in the tens of thousands) is not a bar
    best = min(_error(name, v) for v in peers if _error(name, v) < 10 * _error(name, r["sapwood"]))
    ours = _error(name, r["sapwood"])
    allowed = GAPS.get(name, TOLERANCE)
    assert ours <= best * (1 + allowed), (
        f"{name} on {r['dataset']}: {ours:.6g} vs the better peer's {best:.6g} "
        f"({ours / best - 1:+.2%}, allowed {allowed:.1%})"
    )


def test_quantile_regression_covers_alpha_on_held_out_rows_as_well_as_the_peers() -> None:
    """On the training rows coverage is within a point of alpha (tests/objectives.rs); on
    held-out rows every library overfits the tails (100 rounds, alpha 0.1: Sapwood 0.134,
    XGBoost 0.133, LightGBM 0.122), so the bar is the miss of XGBoost, whose depth-wise trees
    match Sapwood's, plus 0.01; LightGBM's leaf-wise trees (better at 0.1, worse at 0.5) are
    reported in the message."""
    import lightgbm as lgb
    import numpy as np
    import xgboost as xgb

    import sapwood

    _, train, test = bench.load("txhousing")
    y_train, y_test = train.pop("median").to_numpy(float), test.pop("median").to_numpy(float)
    for alpha in (0.1, 0.5, 0.9):
        params = {"objective": "reg:quantileerror", "quantile_alpha": alpha, "learning_rate": 0.1}
        b = sapwood.train(params, sapwood.Dataset(train, label=y_train), ROUNDS, verbose_eval=False)
        ours = abs(float(np.mean(y_test <= np.asarray(b.predict(test)))) - alpha)
        xp = {"objective": "reg:quantileerror", "quantile_alpha": alpha, "eta": 0.1,
              "tree_method": "hist", "max_depth": 6, "nthread": 1}
        bx = xgb.train(xp, xgb.DMatrix(train, label=y_train, enable_categorical=True), ROUNDS)
        px = bx.predict(xgb.DMatrix(test, enable_categorical=True))
        lp = {"objective": "quantile", "alpha": alpha, "learning_rate": 0.1, "verbose": -1,
              "num_leaves": 63, "max_depth": 6, "num_threads": 1}
        pl = lgb.train(lp, lgb.Dataset(train, label=y_train), ROUNDS).predict(test)
        xgb_miss, lgb_miss = (abs(float(np.mean(y_test <= p)) - alpha) for p in (px, pl))
        assert ours <= xgb_miss + 0.01, (
            f"alpha {alpha}: coverage misses by {ours:.3f}, XGBoost's by {xgb_miss:.3f} "
            f"(LightGBM's {lgb_miss:.3f})"
        )


#: The exports of each loss the peers have, and whether their predictions must match
#: Sapwood's transformed outputs too (XGBoost derives the link from the objective name).
EXPORTS = {
    "reg:absoluteerror": ("xgboost", "lightgbm"),
    "reg:quantileerror": ("xgboost", "lightgbm"),
    "reg:pseudohubererror": ("xgboost",),
    "huber": ("lightgbm",),
    "count:poisson": ("xgboost", "lightgbm"),
    "reg:tweedie": ("xgboost", "lightgbm"),
    "reg:gamma": ("xgboost", "lightgbm"),
    "binary:logitraw": ("xgboost",),
    "multi:softmax": ("xgboost", "lightgbm"),
}


@pytest.mark.parametrize("name", list(EXPORTS))
def test_exports_of_each_loss_predict_sapwood_outputs(name: str, tmp_path: Any) -> None:
    """The peers' own readers give Sapwood's margins and its outputs (exp for log links,
    the raw margin for logitraw); a loss a format lacks is refused."""
    import lightgbm as lgb
    import numpy as np
    import xgboost as xgb

    import sapwood

    dataset, label, dropped, extra, *_ = bench.CASES[name]
    _, train, test = bench.load(dataset)
    numeric = [c for c in train.columns if str(train[c].dtype) != "category" and c != label]
    train, test = train[numeric + [label]].dropna(subset=[label]), test[numeric]
    y = train.pop(label)
    for c in dropped:
        train.pop(c)
        test.pop(c)
    if name == "multi:softmax":
        y = y.map({c: i for i, c in enumerate(sorted(y.unique()))})
    params = {"objective": name, "max_depth": 4, **extra}
    b = sapwood.train(params, sapwood.Dataset(train, label=y.to_numpy(float)), 10, verbose_eval=False)
    X = test.to_numpy(np.float32)
    margins = np.asarray(b.predict(test, output_margin=True), dtype=np.float64)
    outputs = np.asarray(b.predict(test), dtype=np.float64)
    for fmt in ("xgboost", "lightgbm"):
        path = tmp_path / f"m.{fmt}"
        if fmt not in EXPORTS[name]:
            with pytest.raises(Exception, match="cannot be exported"):
                b.save_model(path, format=fmt)
            continue
        b.save_model(path, format=fmt)
        if fmt == "xgboost":
            xb = xgb.Booster(model_file=str(path))
            dm = xgb.DMatrix(X, feature_names=list(test.columns))
            raw = xb.predict(dm, output_margin=True)
            out = xb.predict(dm)
        else:
            lb = lgb.Booster(model_file=str(path))
            raw = lb.predict(X, raw_score=True)
            out = lb.predict(X)
            if name == "multi:softmax":
                out = np.asarray(out).argmax(axis=1)
        scale = np.maximum(1.0, np.abs(margins))
        assert np.max(np.abs(np.asarray(raw, dtype=np.float64).reshape(margins.shape) - margins) / scale) <= 1e-5, fmt
        if name == "multi:softmax" and fmt == "xgboost":
            out = np.asarray(out)  # XGBoost's multi:softmax predicts the class index
        rel = np.abs(np.asarray(out, dtype=np.float64).reshape(outputs.shape) - outputs) / np.maximum(1.0, np.abs(outputs))
        assert rel.max() <= 1e-4, f"{name} via {fmt}: outputs differ by {rel.max()}"
