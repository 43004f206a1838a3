"""Prediction from file to file: `sapwood predict` on a Parquet file beside XGBoost's Python.

    python bench/predict_file.py [--rows 1000000] [--trees 100] [--depth 8] [--categorical]
                                 [--repeat 3] [--threads 2]

One binary model (28 features, trained by Sapwood on 100,000 rows and exported to XGBoost
JSON) predicts `--rows` rows held in a Parquet file:

- Sapwood: `sapwood predict --model m.json --data rows.parquet --out p.parquet`, the release
  CLI built by this script (`cargo build --release -p sapwood-cli`, or `--cli PATH`), timed from start to exit:
  process start, model load, reading, binning, walking and writing the predictions included;
- XGBoost: `pyarrow.parquet.read_table` of the same file, the columns to a NumPy matrix (or a
  pandas DataFrame with `--categorical`), then `Booster.inplace_predict`, timed in Python
  after the model is loaded (no interpreter start, no import and no writing counted).

`--categorical` makes the last two features categorical (30 and 200 levels, strings in the
file, dictionary-encoded) and leaves 5% of every numeric feature missing. Prints each run's
seconds, the ratio of Sapwood's time to XGBoost's (below 1: Sapwood is faster) and the
largest difference of the predictions. `RAYON_NUM_THREADS` / `nthread` are `--threads`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np


def frame(rng: np.random.Generator, n: int, categorical: bool):
    """`n` rows of the 28 features as a pandas DataFrame, and their labels."""
    import pandas as pd

    x = rng.normal(size=(n, 28)).astype(np.float32)
    y = x[:, 0] * x[:, 1] + np.sin(x[:, 2]) + 0.3 * rng.normal(size=n)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(28)])
    if categorical:
        c30 = rng.integers(0, 30, n)
        c200 = rng.integers(0, 200, n)
        y = y + (c30 % 3 == 0) - (c200 % 7 < 3)
        levels30 = [f"a{i}" for i in range(30)]
        levels200 = [f"b{i}" for i in range(200)]
        df["f26"] = pd.Categorical.from_codes(np.where(rng.random(n) < 0.02, -1, c30), levels30)
        df["f27"] = pd.Categorical.from_codes(np.where(rng.random(n) < 0.02, -1, c200), levels200)
        for i in range(26):
            df.loc[rng.random(n) < 0.05, f"f{i}"] = np.nan
    return df, (y > 0).astype(np.float32)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cli", type=Path,
                    help="a sapwood binary to run instead of building target/release/sapwood")
    ap.add_argument("--categorical", action="store_true",
                    help="the last two features categorical (30 and 200 levels), 5%% of every "
                         "numeric value missing")
    args = ap.parse_args(argv)

    import pyarrow as pa
    import pyarrow.parquet as pq
    import xgboost as xgb

    import sapwood

    root = Path(__file__).resolve().parent.parent
    cli = args.cli
    if cli is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "sapwood-cli"], cwd=root,
                       check=True)
        cli = root / "target" / "release" / "sapwood"

    rng = np.random.default_rng(0)
    train, y = frame(rng, 100_000, args.categorical)
    rows, _ = frame(rng, args.rows, args.categorical)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1}
    booster = sapwood.train(params, sapwood.Dataset(train, label=y), args.trees, verbose_eval=False)
    tmp = Path(tempfile.mkdtemp())
    booster.save_model(tmp / "m.json")
    booster.save_model(tmp / "x.json", format="xgboost")
    data = tmp / "rows.parquet"
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), data)
    out = tmp / "p.parquet"

    xb = xgb.Booster(model_file=str(tmp / "x.json"))
    xb.set_param({"nthread": args.threads})

    def xgboost_predict():
        table = pq.read_table(data)
        if args.categorical:
            return xb.inplace_predict(table.to_pandas())
        return xb.inplace_predict(np.column_stack([c.to_numpy() for c in table.columns]))

    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    cmd = [str(cli), "predict", "--model", str(tmp / "m.json"), "--data", str(data),
           "--out", str(out)]
    kind = " (2 categorical, 5% missing)" if args.categorical else ""
    print(f"{args.trees} trees of depth {args.depth}, {args.rows:,} rows x 28 features{kind}, "
          f"{args.threads} threads, Parquet {data.stat().st_size / 2**20:.0f} MiB")
    print("| run | sapwood predict (file to file) | XGBoost read + inplace_predict | ratio | max diff |")
    print("|---|---|---|---|---|")
    for run in range(1, args.repeat + 1):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        s_ours = time.perf_counter() - t
        t = time.perf_counter()
        px = xgboost_predict()
        s_x = time.perf_counter() - t
        ours = pq.read_table(out).column("prediction").to_numpy().astype(np.float64)
        diff = float(np.abs(np.asarray(px, dtype=np.float64) - ours).max())
        print(f"| {run} | {s_ours:.3f} s | {s_x:.3f} s | {s_ours / s_x:.2f} | {diff:.2g} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
