"""SHAP contributions (and interaction values) of one model in Sapwood, XGBoost and LightGBM.

    python bench/explain.py [--rows 10000] [--trees 100] [--depth 6] [--threads 2]

A Sapwood model is trained on a synthetic binary task (28 numeric features, like the
benchmarks' HIGGS-shaped data), exported to XGBoost JSON and LightGBM text, and each library
explains the same rows with the same trees: Sapwood's `pred_contribs`, XGBoost's
`pred_contribs` (its CPU TreeSHAP) and LightGBM's `pred_contrib`. Prints seconds, the ratio
to Sapwood, and the largest difference from Sapwood's values (they must agree: the trees are
the same). Best of `--repeat` runs each; this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np


def data(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 28)).astype(np.float32)
    score = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + np.abs(X[:, 3]) - 0.7 + 0.5 * X[:, 4:10].sum(axis=1) / 3
    y = (score + 0.3 * rng.normal(size=rows) > 0).astype(np.float32)
    return X, y


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--interaction-rows", type=int, default=1_000)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    import lightgbm as lgb
    import xgboost as xgb

    import sapwood

    X, y = data(50_000, 1)
    Xe, _ = data(args.rows, 2)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1,
              "threads": args.threads}
    b = sapwood.train(params, sapwood.Dataset(X, label=y), args.trees, verbose_eval=False)
    tmp = Path(tempfile.mkdtemp())
    b.save_model(tmp / "m.json", format="xgboost")
    b.save_model(tmp / "m.txt", format="lightgbm")
    xb = xgb.Booster(model_file=str(tmp / "m.json"))
    xb.set_param({"nthread": args.threads})
    lb = lgb.Booster(model_file=str(tmp / "m.txt"))
    names = [f"f{i}" for i in range(X.shape[1])]
    print(f"{args.trees} trees of depth {args.depth}, {args.rows:,} rows x 28 features, "
          f"{args.threads} threads, best of {args.repeat}")
    print("| output | library | seconds | ratio to Sapwood | max diff from Sapwood |")
    print("|---|---|---|---|---|")
    ours_s, ours = best_of(args.repeat, lambda: b.predict(Xe, pred_contribs=True))
    ours = np.asarray(ours, dtype=np.float64)
    dm = xgb.DMatrix(Xe, feature_names=names, nthread=args.threads)
    rows = [("contributions", "Sapwood", ours_s, ours)]
    s, v = best_of(args.repeat, lambda: xb.predict(dm, pred_contribs=True))
    rows.append(("contributions", "XGBoost", s, v))
    s, v = best_of(args.repeat, lambda: lb.predict(Xe, pred_contrib=True, num_threads=args.threads))
    rows.append(("contributions", "LightGBM", s, v))
    small = Xe[: args.interaction_rows]
    ours_i_s, ours_i = best_of(1, lambda: b.predict(small, pred_interactions=True))
    ours_i = np.asarray(ours_i, dtype=np.float64)
    rows.append(("interactions", "Sapwood", ours_i_s, ours_i))
    dms = xgb.DMatrix(small, feature_names=names, nthread=args.threads)
    s, v = best_of(1, lambda: xb.predict(dms, pred_interactions=True))
    rows.append(("interactions", "XGBoost", s, v))
    base = {"contributions": ours_s, "interactions": ours_i_s}
    want = {"contributions": ours, "interactions": ours_i}
    for output, lib, s, v in rows:
        diff = float(np.abs(np.asarray(v, dtype=np.float64).reshape(want[output].shape) - want[output]).max())
        print(f"| {output} | {lib} | {s:.3f} | {s / base[output]:.2f} | {diff:.2g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
