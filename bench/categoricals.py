"""High-cardinality categorical columns: native splits against integer codes and against
dropping the column, with XGBoost's and LightGBM's native handling beside.

    python bench/categoricals.py [--rounds 100] [--only flights] [--json out.json]

Every library runs with its *default* parameters (only the objective, the number of
rounds and one seed are set), because the question is what a new user gets. For each
study column of each dataset (datasets/make_categoricals.py), Sapwood trains three ways:
the column native (categorical), the column as integer codes (its sorted training levels
numbered 0.., unseen levels missing), and the column dropped; the dataset's other
categorical columns stay native in all three. XGBoost (`enable_categorical`) and LightGBM
(pandas `category`) train once with the column native. The table gives the held-out
metric (AUC for binary, RMSE for regression; the mean over 5 seeded folds of train + test
together) and the total fit time; `margin` is how far native
is ahead of the better of codes and dropped (positive = native better).
python/tests/test_categoricals.py asserts the same comparison.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATASETS = ["flights", "movielens", "seattlepets", "loans"]
WAYS = ["native", "codes", "dropped"]


def load(name: str) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """(meta, train, test) of datasets/<name>; categorical columns as plain strings."""
    d = REPO / "datasets" / name
    meta = json.loads((d / "meta.json").read_text())
    train, test = (pd.read_parquet(d / f"{part}.parquet") for part in ("train", "test"))
    for c in meta["categorical"]:
        for frame in (train, test):
            frame[c] = frame[c].astype(object)
    return meta, train, test


def with_levels(meta: dict[str, Any], train: pd.DataFrame, test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Copies with pandas ``category`` columns of the sorted training levels (unseen: missing)."""
    train, test = train.copy(), test.copy()
    for c in meta["categorical"]:
        levels = sorted(train[c].dropna().astype(str).unique())
        for frame in (train, test):
            values = frame[c].astype(object)
            frame[c] = pd.Categorical(values.where(values.isin(levels), None), categories=levels)
    return train, test


def folds(meta: dict[str, Any], train: pd.DataFrame, test: pd.DataFrame, k: int) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """The bundled split when k = 1, else k seeded folds of train + test together."""
    if k == 1:
        return [with_levels(meta, train, test)]
    rows = pd.concat([train, test], ignore_index=True)
    fold = np.random.Generator(np.random.PCG64(17)).permutation(len(rows)) % k
    return [with_levels(meta, rows[fold != i], rows[fold == i]) for i in range(k)]


def features(meta: dict[str, Any], frame: pd.DataFrame, column: str, way: str) -> pd.DataFrame:
    """The feature frame with `column` native, as integer codes or dropped."""
    x = frame.drop(columns=[meta["label"]])
    if way == "dropped":
        return x.drop(columns=[column])
    if way == "codes":
        codes = x[column].cat.codes.astype(np.float64)
        x[column] = codes.where(codes >= 0, np.nan)
    return x


def metric(task: str, y: np.ndarray, p: np.ndarray) -> float:
    """AUC (ties half) for binary, RMSE for regression."""
    if task == "regression":
        return float(np.sqrt(np.mean((np.asarray(p, np.float64) - y) ** 2)))
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sorted_p = np.asarray(p)[order]
    # average ranks over ties
    _, start, counts = np.unique(sorted_p, return_index=True, return_counts=True)
    for s, c in zip(start, counts):
        ranks[order[s : s + c]] = s + (c + 1) / 2.0
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def better(task: str, a: float, b: float) -> float:
    """How far `a` is ahead of `b` (positive = better) in the metric's own direction."""
    return a - b if task == "binary" else b - a


def sapwood_fit(task: str, rounds: int, params: dict[str, Any] | None = None) -> Callable[..., Any]:
    """A trainer: (x_train, y_train, x_test) -> test predictions, with Sapwood's defaults."""
    import sapwood

    objective = "binary:logistic" if task == "binary" else "reg:squarederror"

    def fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        b = sapwood.train({"objective": objective, **(params or {})}, sapwood.Dataset(xt, label=yt),
                          rounds, verbose_eval=False)
        return np.asarray(b.predict(sapwood.Dataset(xv)))

    return fit


def xgboost_fit(task: str, rounds: int) -> Callable[..., Any]:
    """XGBoost with its defaults and native categoricals."""
    import xgboost as xgb

    objective = "binary:logistic" if task == "binary" else "reg:squarederror"

    def fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        d = xgb.DMatrix(xt, label=yt, enable_categorical=True)
        b = xgb.train({"objective": objective, "tree_method": "hist", "seed": 0}, d, rounds)
        return b.predict(xgb.DMatrix(xv, enable_categorical=True))

    return fit


def lightgbm_fit(task: str, rounds: int) -> Callable[..., Any]:
    """LightGBM with its defaults and native categoricals (pandas category)."""
    import lightgbm as lgb

    objective = "binary" if task == "binary" else "regression"

    def fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        d = lgb.Dataset(xt, label=yt)
        b = lgb.train({"objective": objective, "seed": 0, "verbose": -1}, d, rounds)
        return b.predict(xv)

    return fit


def timed(fit: Callable[..., Any], *args: Any) -> tuple[np.ndarray, float]:
    t = time.perf_counter()
    p = fit(*args)
    return p, time.perf_counter() - t


def run_case(name: str, column: str, rounds: int, peers: bool = True,
             params: dict[str, Any] | None = None, k: int = 5) -> dict[str, Any]:
    """Mean held-out metric and total time of every way for one study column, over `k` folds."""
    meta, train, test = load(name)
    task, label = meta["task"], meta["label"]
    out: dict[str, Any] = {"dataset": name, "column": column, "task": task,
                           "levels": meta["levels"][column],
                           "metric": "auc" if task == "binary" else "rmse", "folds": k}
    trainers = {way: sapwood_fit(task, rounds, params) for way in WAYS}
    if peers:
        trainers.update(xgboost=xgboost_fit(task, rounds), lightgbm=lightgbm_fit(task, rounds))
    scores: dict[str, list[float]] = {w: [] for w in trainers}
    times = dict.fromkeys(trainers, 0.0)
    for tr, te in folds(meta, train, test, k):
        yt, yv = tr[label].to_numpy(np.float64), te[label].to_numpy(np.float64)
        for way, fit in trainers.items():
            how = way if way in WAYS else "native"
            p, t = timed(fit, features(meta, tr, column, how), yt, features(meta, te, column, how))
            scores[way].append(metric(task, yv, p))
            times[way] += t
    for way in trainers:
        out[way], out[way + "_s"] = float(np.mean(scores[way])), times[way]
    out["native_folds"] = scores["native"]
    best_other = [max(a, b) if task == "binary" else min(a, b)
                  for a, b in zip(scores["codes"], scores["dropped"])]
    out["margin"] = better(task, out["native"], max(out["codes"], out["dropped"])
                           if task == "binary" else min(out["codes"], out["dropped"]))
    # the fold-to-fold spread of native minus the better other way, for "within noise"
    diffs = [better(task, n, o) for n, o in zip(scores["native"], best_other)]
    out["margin_sd"] = float(np.std(diffs, ddof=1)) if k > 1 else float("nan")
    return out


def cases(only: list[str] | None = None) -> list[tuple[str, str]]:
    """(dataset, study column) pairs."""
    out = []
    for name in DATASETS:
        if only and name not in only:
            continue
        meta = json.loads((REPO / "datasets" / name / "meta.json").read_text())
        out.extend((name, c) for c in meta["study"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--folds", type=int, default=5, help="1: the bundled train/test split")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--set", nargs="*", default=[], help="extra Sapwood params key=value")
    ap.add_argument("--json")
    a = ap.parse_args()
    params = dict(kv.split("=", 1) for kv in a.set)
    print(f"default parameters, {a.rounds} rounds, {a.folds} fold(s); "
          f"Sapwood extra params: {params or 'none'}")
    head = (f"{'dataset':<12} {'column':<12} {'levels':>6} {'metric':<5} {'native':>8} "
            f"{'codes':>8} {'dropped':>8} {'margin':>8} {'xgboost':>8} {'lightgbm':>8}  "
            "time s (native/codes/dropped/xgb/lgb)")
    print(head)
    rows = []
    for name, column in cases(a.only):
        r = run_case(name, column, a.rounds, peers=not a.no_peers, params=params, k=a.folds)
        rows.append(r)
        peers = (f"{r['xgboost']:8.4f} {r['lightgbm']:8.4f}" if "xgboost" in r
                 else f"{'-':>8} {'-':>8}")
        times = "/".join(f"{r[k + '_s']:.1f}" for k in WAYS + ["xgboost", "lightgbm"] if k in r)
        print(f"{name:<12} {column:<12} {r['levels']:>6} {r['metric']:<5} {r['native']:8.4f} "
              f"{r['codes']:8.4f} {r['dropped']:8.4f} {r['margin']:+8.4f} {r['margin_sd']:7.4f} {peers}  {times}",
              flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
