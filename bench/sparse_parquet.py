#!/usr/bin/env python3
"""The wide sparse task from a Parquet file: `sapwood train` against LightGBM and XGBoost
reading the same file with pyarrow.

The file holds the training rows of `task_speed.py --task sparse` (100,000 rows x 5,000
float columns at 0.5% density, absent entries null, row groups of 25,000 rows) and the
label column `y`. Sapwood reads it with its CLI (`sapwood train`: reading, binning and
training in one process). The peers have no Parquet reader of their own, so each reads
the file as a user would: `pyarrow.parquet.read_table`, then every column's valid entries
gathered into a `scipy.sparse` CSR matrix (null is absent), then the library's Dataset
(LightGBM) or QuantileDMatrix (XGBoost) and training. Each runs in its own process; the
seconds are the whole run from the file to the trained model (for Sapwood the CLI's wall
time, for the peers from the read to the end of training), and the memory is the
process's peak RSS. Matched settings as `task_speed.py`: 100 rounds, learning rate 0.1,
depth 6 (LightGBM 63 leaves), L2 1, min child hessian 1, 256 bins, 2 threads.

    python3 bench/sparse_parquet.py [--sapwood target/release/sapwood] [--repeat R]
        [--data-dir DIR] [--threads T] [--rounds N]

requires: numpy, scipy, pyarrow, lightgbm==4.7.0, xgboost==3.2.0, the sapwood CLI
(`cargo build --release -p sapwood-cli`) and the sapwood package (for the task's data).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_parquet(data_dir: str) -> str:
    """The task's training rows and label as a Parquet file under `data_dir` (made once)."""
    path = os.path.join(data_dir, "x.parquet")
    if os.path.exists(path):
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    if not os.path.exists(os.path.join(data_dir, "x.npz")):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import task_speed

        task_speed.make("sparse", data_dir)
    x = sp.load_npz(os.path.join(data_dir, "x.npz")).tocsc()
    y = np.load(os.path.join(data_dir, "y.npy"))
    n = x.shape[0]
    columns, names = [], []
    for f in range(x.shape[1]):
        lo, hi = x.indptr[f], x.indptr[f + 1]
        values = np.zeros(n, dtype=np.float32)
        valid = np.zeros(n, dtype=bool)
        values[x.indices[lo:hi]] = x.data[lo:hi]
        valid[x.indices[lo:hi]] = True
        columns.append(pa.array(values, mask=~valid))
        names.append(f"f{f}")
    columns.append(pa.array(y.astype(np.float32)))
    names.append("y")
    pq.write_table(pa.table(columns, names=names), path, row_group_size=25_000)
    return path


def read_csr(path: str):
    """The file's feature columns as a CSR matrix of their valid entries, and the label:
    read 250 columns at a time (100 MB decoded), as a user minding memory would."""
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    file = pq.ParquetFile(path)
    names = [c for c in file.schema_arrow.names if c != "y"]
    y = file.read(columns=["y"]).column("y").to_numpy()
    n = len(y)
    rows, cols, vals = [], [], []
    for lo in range(0, len(names), 250):
        table = file.read(columns=names[lo:lo + 250])
        for j, name in enumerate(table.column_names):
            column = table.column(name).combine_chunks()
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            at = np.flatnonzero(valid)
            if at.size:
                rows.append(at.astype(np.int32))
                cols.append(np.full(at.size, lo + j, dtype=np.int32))
                vals.append(column.to_numpy(zero_copy_only=False)[at].astype(np.float32))
        del table
    x = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, len(names)))
    return x, y


def run_peer(args: argparse.Namespace) -> None:
    """Reads the file, trains one peer and prints one JSON line."""
    start = time.perf_counter()
    x, y = read_csr(args.file)
    read = time.perf_counter() - start
    if args.library == "lightgbm":
        import lightgbm as lgb

        params = {"objective": "binary", "learning_rate": 0.1, "num_leaves": 63,
                  "max_depth": 6, "max_bin": 255, "lambda_l2": 1.0,
                  "min_sum_hessian_in_leaf": 1.0, "min_data_in_leaf": 0,
                  "num_threads": args.threads, "verbosity": -1}
        ds = lgb.Dataset(x, label=y, params={"max_bin": 255, "verbosity": -1})
        lgb.train(params, ds, num_boost_round=args.rounds)
        version = lgb.__version__
    else:
        import xgboost as xgb

        params = {"objective": "binary:logistic", "tree_method": "hist", "max_depth": 6,
                  "learning_rate": 0.1, "reg_lambda": 1.0, "min_child_weight": 1.0,
                  "max_bin": 256, "nthread": args.threads}
        dm = xgb.QuantileDMatrix(x, label=y, max_bin=256)
        xgb.train(params, dm, num_boost_round=args.rounds)
        version = xgb.__version__
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"library": f"{args.library} {version}", "seconds": round(seconds, 3),
                      "read_seconds": round(read, 3), "peak_rss_mib": round(rss, 1)}))


def run_sapwood(cli: str, path: str, threads: int, rounds: int) -> dict:
    """`sapwood train` on the file: its wall seconds and peak RSS."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        done = subprocess.run(
            [cli, "train", "--data", path, "--label", "y", "--objective", "binary:logistic",
             "--rounds", str(rounds), "--max-depth", "6", "--learning-rate", "0.1",
             "--threads", str(threads), "--model", os.path.join(out, "model.json")],
            check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    version = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout
    log = (done.stdout + done.stderr).strip().splitlines()
    return {"library": version.strip().splitlines()[0] if version.strip() else "sapwood",
            "seconds": round(seconds, 3), "peak_rss_mib": rss,
            "log": next((line for line in log if line.startswith("trained")), "")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sapwood", default="target/release/sapwood")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "sapwood-sparse"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--library", choices=["sapwood", "lightgbm", "xgboost"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.library == "sapwood":
        print(json.dumps(run_sapwood(args.sapwood, args.file, args.threads, args.rounds)))
        return
    if args.library:
        run_peer(args)
        return
    os.makedirs(args.data_dir, exist_ok=True)
    path = write_parquet(args.data_dir)
    for r in range(args.repeat):
        # each in a process of its own, so that its peak RSS is its own
        rows = []
        for lib in ["sapwood", "xgboost", "lightgbm"]:
            out = subprocess.run(
                [sys.executable, __file__, "--library", lib, "--file", path,
                 "--sapwood", args.sapwood, "--threads", str(args.threads),
                 "--rounds", str(args.rounds)],
                check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
        sapwood = rows[0]
        print(f"sparse Parquet (run {r + 1}): {path}, {args.rounds} rounds, depth 6 / 63 leaves, "
              f"{args.threads} threads")
        print(f"{'library':<20} {'seconds':>8} {'peak MiB':>9} {'time ratio':>11} "
              f"{'memory ratio':>13}")
        for row in rows:
            print(f"{row['library']:<20} {row['seconds']:>8.2f} {row['peak_rss_mib']:>9.0f} "
                  f"{sapwood['seconds'] / row['seconds']:>11.2f} "
                  f"{sapwood['peak_rss_mib'] / row['peak_rss_mib']:>13.2f}")
        print(f"sapwood: {sapwood['log']}")
    print("ratios: sapwood's over the library's; below 1 means sapwood is faster or smaller")


if __name__ == "__main__":
    main()
