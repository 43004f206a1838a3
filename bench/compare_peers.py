#!/usr/bin/env python3
"""Sapwood beside XGBoost `hist` and LightGBM on the same synthetic binary task.

Runs the Rust bench (which also writes the data), then each peer in its own process, and
prints train seconds, peak RSS and test AUC with ratios against Sapwood. Timings are only
comparable within one run: the machine is shared.

    python3 bench/compare_peers.py --rows 1000000 --rounds 100 --depth 8 --threads 2

`--load N` runs N busy-loop processes beside each library's training (started before it,
stopped after it), as on a machine shared with other jobs: every library meets the same load.

requires: numpy, xgboost==3.2.0 (or xgboost-cpu), lightgbm==4.7.0
"""
import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def load(data_dir, features):
    import numpy as np

    def rd(name):
        return np.fromfile(os.path.join(data_dir, name), dtype="<f4")

    x = rd("train_x.f32").reshape(-1, features)
    tx = rd("test_x.f32").reshape(-1, features)
    return x, rd("train_y.f32"), tx, rd("test_y.f32")


def auc(scores, labels):
    import numpy as np

    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    # average ranks over ties
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i : j + 1] = (i + j) / 2.0 + 1.0
        i = j + 1
    pos = y > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def run_peer(args):
    x, y, tx, ty = load(args.data_dir, args.features)
    if args.peer == "xgboost":
        import xgboost as xgb

        cats = {"feature_types": ["q"] * (args.features - 2) + ["c", "c"], "enable_categorical": True} \
            if args.categorical else {}
        start = time.perf_counter()
        d = xgb.QuantileDMatrix(x, label=y, max_bin=256, **cats)
        params = {
            "objective": "binary:logistic",
            "tree_method": "hist",
            "max_depth": args.depth,
            "max_bin": 256,
            "eta": 0.1,
            "lambda": 1.0,
            "min_child_weight": 1.0,
            "nthread": args.threads,
        }
        if args.leaves:
            params.update({"grow_policy": "lossguide", "max_leaves": args.leaves, "max_depth": 0})
        booster = xgb.train(params, d, num_boost_round=args.rounds)
        seconds = time.perf_counter() - start
        p = booster.predict(xgb.DMatrix(tx, **cats))
        version = xgb.__version__
    else:
        import lightgbm as lgb

        start = time.perf_counter()
        cats = [args.features - 2, args.features - 1] if args.categorical else "auto"
        d = lgb.Dataset(x, label=y, categorical_feature=cats, params={"max_bin": 255, "verbosity": -1})
        params = {
            "objective": "binary",
            "max_depth": args.depth,
            "num_leaves": args.leaves or 2 ** args.depth - 1,
            "max_bin": 255,
            "learning_rate": 0.1,
            "lambda_l2": 1.0,
            "min_sum_hessian_in_leaf": 1.0,
            "min_data_in_leaf": 0,
            "num_threads": args.threads,
            "verbosity": -1,
        }
        if args.leaves:
            params["max_depth"] = -1
        if args.grad_bits:
            # LightGBM's quantised training (Shi et al., NeurIPS 2022) with its leaves refit
            # from exact gradients, as Sapwood's low-bit mode refits them
            params.update({"use_quantized_grad": True, "quant_train_renew_leaf": True})
        booster = lgb.train(params, d, num_boost_round=args.rounds)
        seconds = time.perf_counter() - start
        p = booster.predict(tx)
        version = lgb.__version__
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"library": f"{args.peer} {version}", "train_seconds": round(seconds, 3),
                      "peak_rss_mib": round(rss, 1), "test_auc": round(auc(p, ty), 6)}))


@contextlib.contextmanager
def busy(n):
    """`n` processes that spin on a core each until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--grad-bits", type=int, default=0)
    ap.add_argument("--streamed", action="store_true",
                    help="Sapwood bins the rows batch by batch as they are made (as `sapwood train` "
                         "bins a Parquet file), never holding them all; the peers load every row")
    ap.add_argument("--categorical", action="store_true",
                    help="the last two features categorical (30 and 200 levels, 2%% missing each), "
                         "given to every library as categorical")
    ap.add_argument("--load", type=int, default=0,
                    help="busy-loop processes that run beside every library's training")
    ap.add_argument("--python", default=sys.executable, help="interpreter with xgboost and lightgbm")
    ap.add_argument("--peer")
    ap.add_argument("--data-dir")
    args = ap.parse_args()
    if args.peer:
        return run_peer(args)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as data_dir:
        common = ["--rows", str(args.rows), "--test-rows", str(args.test_rows), "--features", str(args.features),
                  "--rounds", str(args.rounds), "--depth", str(args.depth), "--leaves", str(args.leaves),
                  "--threads", str(args.threads)]
        cmd = ["cargo", "bench", "-q", "-p", "sapwood", "--bench", "train_synthetic", "--"] + common + \
              ["--grad-bits", str(args.grad_bits), "--data-dir", data_dir] + \
              (["--streamed"] if args.streamed else []) + (["--categorical"] if args.categorical else [])
        # built first, so that the load runs beside the training alone, not beside cargo
        subprocess.run(["cargo", "bench", "--no-run", "-q", "-p", "sapwood", "--bench", "train_synthetic"],
                       cwd=root, check=True, capture_output=True)
        with busy(args.load):
            out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
        results = [json.loads(out.strip().splitlines()[-1])]
        for peer in ["xgboost", "lightgbm"]:
            with busy(args.load):
                out = subprocess.run([args.python, os.path.abspath(__file__), "--peer", peer, "--data-dir", data_dir]
                                     + common + ["--grad-bits", str(args.grad_bits)] + (["--categorical"] if args.categorical else []),
                                     check=True, capture_output=True, text=True).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    shape = f"{args.leaves} leaves, no depth limit" if args.leaves else f"depth {args.depth}"
    print(f"synthetic binary task: {args.rows} rows x {args.features} features, {args.rounds} rounds, "
          f"{shape}, {args.threads} threads, sapwood grad_bits {args.grad_bits or 'exact'}"
          + (" (LightGBM use_quantized_grad, quant_train_renew_leaf)" if args.grad_bits else ""))
    if args.categorical:
        print("the last two features are categorical (30 and 200 levels, 2% missing each) in every library")
    if args.load:
        print(f"{args.load} busy-loop processes ran beside every library's training")
    if args.streamed:
        print("sapwood binned the rows as they were made (never all in memory); the peers hold every row")
    print(f"{'library':<18}{'train s':>10}{'peak MiB':>10}{'test AUC':>10}{'time ratio':>12}{'mem ratio':>11}"
          f"{'AUC - ours':>12}")
    ours = results[0]
    for r in results:
        print(f"{r['library']:<18}{r['train_seconds']:>10.2f}{r['peak_rss_mib']:>10.0f}{r['test_auc']:>10.4f}"
              f"{ours['train_seconds'] / r['train_seconds']:>12.2f}{ours['peak_rss_mib'] / r['peak_rss_mib']:>11.2f}"
              f"{r['test_auc'] - ours['test_auc']:>+12.4f}")
    print("ratios are sapwood / library: below 1 means sapwood is faster or smaller; Sapwood's "
          "test AUC should be within 0.002 of each peer's")


if __name__ == "__main__":
    main()
