"""Prediction speed of one model in Sapwood, XGBoost and LightGBM.

    python bench/predict.py [--rows 200000] [--trees 100] [--depth 8] [--categorical]

A Sapwood model (binary, 28 numeric features) is exported to XGBoost JSON and LightGBM text,
and each library predicts the same rows with the same trees, from Python, with 1 and 2
threads: Sapwood's `Booster.predict`, XGBoost's `inplace_predict`, LightGBM's `predict`.
Prints rows per second and the ratio of Sapwood's to each peer's (above 1: Sapwood is
faster), and the largest difference of the outputs; `--rust` adds Sapwood's rows per second
from Rust (its own bench, a model of the same shape and bins) and its ratios to the peers'
best turns. The libraries take turns `--repeat` times: rows per second are the best turn's,
and the speed-up is the median of the turns' ratios (each turn's Sapwood time against the
peer's next to it), which a shared machine's slow spells move less than a ratio of two best
times.
`SAPWOOD_PORTABLE=avx2` (or `=1`) in the environment measures Sapwood's paths for CPUs
without AVX-512 (or without AVX2 either).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rust", action="store_true",
                    help="also run the Rust bench (cargo bench -p sapwood --bench predict_synthetic): "
                         "a model of the same shape on the same kind of rows, predicted from Rust")
    ap.add_argument("--leaves", type=int, default=0,
                    help="grow loss-guided trees of this many leaves and no depth limit "
                         "(deeper than 8: the row-at-a-time walk) instead of --depth")
    ap.add_argument("--max-bin", type=int, default=256,
                    help="bins per feature; above 256 the bins are 16-bit")
    ap.add_argument("--categorical", action="store_true",
                    help="two of the 28 features pandas categoricals (30 and 200 levels), so the "
                         "trees have categorical splits; the rows are DataFrames for every library")
    args = ap.parse_args(argv)

    import lightgbm as lgb
    import xgboost as xgb

    import sapwood

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100_000, 28)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + 0.3 * rng.normal(size=len(X)) > 0).astype(np.float32)
    Xp = rng.normal(size=(args.rows, 28)).astype(np.float32)
    if args.categorical:
        X, Xp, y = with_categories(rng, X, Xp, y)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1,
              "max_bin": args.max_bin}
    if args.leaves:
        params.update(grow_policy="lossguide", max_leaves=args.leaves, max_depth=0)
    b = sapwood.train(params, sapwood.Dataset(X, label=y), args.trees, verbose_eval=False)
    tmp = Path(tempfile.mkdtemp())
    b.save_model(tmp / "m.json", format="xgboost")
    b.save_model(tmp / "m.txt", format="lightgbm")
    xb = xgb.Booster(model_file=str(tmp / "m.json"))
    lb = lgb.Booster(model_file=str(tmp / "m.txt"))
    rust = {}
    if args.rust:
        import json
        import subprocess

        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(
            ["cargo", "bench", "-q", "-p", "sapwood", "--bench", "predict_synthetic", "--",
             "--rows", str(args.rows), "--trees", str(args.trees), "--depth", str(args.depth),
             "--repeat", str(args.repeat), "--max-bin", str(args.max_bin)],
            cwd=root, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                rust[r["threads"]] = r["rows_per_second"]
    kind = " (2 categorical)" if args.categorical else ""
    shape = f"{args.leaves} leaves, loss-guided" if args.leaves else f"depth {args.depth}"
    print(f"{args.trees} trees of {shape}, max_bin {args.max_bin}, {args.rows:,} rows x 28 "
          f"features{kind}, {args.repeat} turns")
    print("| threads | library | rows/s | Sapwood's speed-up | max diff |")
    print("|---|---|---|---|---|")
    for threads in (1, 2):
        b.set_param({"nthread": threads})
        xb.set_param({"nthread": threads})
        (t_ours, ours), (t_x, px), (t_l, pl) = in_turns(args.repeat, [
            lambda: b.predict(Xp),
            lambda: xb.inplace_predict(Xp),
            lambda: lb.predict(Xp, num_threads=threads),
        ])
        # the Rust bench's rows per second against the peers' best turns
        s_x, s_l = min(t_x), min(t_l)
        ours = np.asarray(ours, dtype=np.float64)
        for name, t, p in (("Sapwood", t_ours, ours), ("XGBoost inplace_predict", t_x, px),
                           ("LightGBM predict", t_l, pl)):
            diff = float(np.abs(np.asarray(p, dtype=np.float64) - ours).max())
            speedup = float(np.median(np.asarray(t) / np.asarray(t_ours)))
            print(f"| {threads} | {name} | {args.rows / min(t):,.0f} | {speedup:.2f} | {diff:.2g} |",
                  flush=True)
        if threads in rust:
            # its own model of the same shape: no output to compare
            print(f"| {threads} | Sapwood from Rust | {rust[threads]:,.0f} | "
                  f"{rust[threads] * s_x / args.rows:.2f} x XGBoost, "
                  f"{rust[threads] * s_l / args.rows:.2f} x LightGBM | - |", flush=True)
    return 0


def in_turns(repeat: int, fns: list) -> list[tuple[list[float], object]]:
    """Each of `fns` timed `repeat` times, taking turns: (its times, its last output)."""
    times: list[list[float]] = [[] for _ in fns]
    outs: list[object] = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            outs[i] = fn()
            times[i].append(time.perf_counter() - t)
    return list(zip(times, outs))


def with_categories(rng, X, Xp, y):
    """The last two columns of the training and prediction rows as pandas categoricals of 30
    and 200 levels (the prediction rows' with the training rows' categories), and labels
    that depend on them."""
    import pandas as pd

    def frame(a):
        df = pd.DataFrame(a[:, :26], columns=[f"x{i}" for i in range(26)])
        # levels that are not integers: an XGBoost export writes levels that all read as
        # integers as integer categories, which a frame of text categories does not match
        df["c30"] = pd.Categorical(np.char.add("a", rng.integers(0, 30, len(a)).astype(str)))
        df["c200"] = pd.Categorical(np.char.add("b", rng.integers(0, 200, len(a)).astype(str)))
        return df

    X, Xp = frame(X), frame(Xp)
    for c in ("c30", "c200"):
        Xp[c] = pd.Categorical(Xp[c], categories=X[c].cat.categories)
    hit = (X["c30"].cat.codes % 3 == 0).to_numpy() ^ (X["c200"].cat.codes % 7 < 3).to_numpy()
    y = (y.astype(bool) ^ hit).astype(np.float32)
    return X, Xp, y


if __name__ == "__main__":
    sys.exit(main())
