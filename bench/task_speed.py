#!/usr/bin/env python3
"""Training time of Sapwood, XGBoost `hist` and LightGBM on tasks other than binary:
multiclass with many classes and ranking with long queries.

- `multiclass`: 200,000 rows x 28 features, 50 classes (each class a random direction;
  the label is the class whose direction scores highest, with noise).
- `ranking`: 200 queries of 1,000 documents (200,000 rows x 28 features), relevance 0-4
  from a noisy function of the features; NDCG objectives (rank:ndcg, lambdarank) with
  pairs truncated at 32 for every library.
- `sparse`: wide sparse binary data, 100,000 training rows x 5,000 features at 0.5%
  density as a `scipy.sparse` CSR matrix: 2,000 one-hot columns (10 categorical fields of
  200 levels, one level set a row) and 3,000 text-like columns (term weights of about 15
  terms a row drawn from a Zipf law). The label is a noisy logistic function of a few
  hundred columns, some in pairs. Absent entries are zeros to LightGBM and missing to
  Sapwood and XGBoost (their CSR conventions), which all three split alike. Held-out AUC.

Matched settings: 100 rounds, learning rate 0.1, depth 6 (LightGBM 63 leaves), 256 bins,
L2 1, min child hessian 1, `--threads` threads. Each library trains in its own process
(peak RSS is that process's); the data is made once and shared as .npy files. Prints train
seconds (binning included, as each library's own Dataset/DMatrix building), peak RSS, the
held-out score (multi log loss; NDCG@10) and Sapwood's time over each peer's.

    python3 bench/task_speed.py [--task multiclass|ranking|sparse|all] [--rounds N]
        [--threads T] [--repeat R] [--min-data-in-bin M]

`--min-data-in-bin M` sets Sapwood's and LightGBM's `min_data_in_bin` (sampled rows a numeric
bin must hold; 3 by default in both, as LightGBM's; XGBoost has none and bins every distinct
value while they fit, as Sapwood does with 1). Unset, each library keeps its default.

requires: numpy, sapwood (the Python package), xgboost==3.2.0 (or xgboost-cpu),
lightgbm==4.7.0
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

FEATURES = 28


def make_sparse(data_dir: str, rng: np.random.Generator) -> None:
    """Writes the wide sparse task's CSR matrices and labels under `data_dir`."""
    import scipy.sparse as sp

    n = 125_000
    fields, levels, terms, per_row = 10, 200, 3_000, 15
    onehot_cols = (np.arange(fields) * levels)[None, :] + rng.integers(0, levels, (n, fields))
    zipf = 1.0 / np.arange(1, terms + 1) ** 0.9
    words = rng.choice(terms, size=(n, per_row), p=zipf / zipf.sum())
    text_cols = fields * levels + words
    cols = np.concatenate([onehot_cols, text_cols], axis=1)
    vals = np.concatenate([np.ones((n, fields)),
                           rng.uniform(0.1, 1.0, (n, per_row))], axis=1).astype(np.float32)
    rows = np.repeat(np.arange(n), cols.shape[1])
    x = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(n, fields * levels + terms))
    x.sum_duplicates()
    weights = np.zeros(x.shape[1], dtype=np.float32)
    chosen = rng.choice(x.shape[1], 400, replace=False)
    weights[chosen] = rng.standard_normal(400).astype(np.float32) * 1.5
    signal = np.asarray(x @ weights).ravel()
    a, b = chosen[:50], chosen[50:100]
    inter = np.asarray((x[:, a].multiply(x[:, b])).sum(axis=1)).ravel() * 3.0
    logit = signal + inter - np.median(signal + inter) + 0.5 * rng.standard_normal(n)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    split = 100_000
    sp.save_npz(os.path.join(data_dir, "x.npz"), x[:split].tocsr())
    sp.save_npz(os.path.join(data_dir, "tx.npz"), x[split:].tocsr())
    np.save(os.path.join(data_dir, "y.npy"), y[:split])
    np.save(os.path.join(data_dir, "ty.npy"), y[split:])


def make(task: str, data_dir: str, seed: int = 7) -> None:
    """Writes train/test arrays (and query sizes for ranking) of `task` under `data_dir`."""
    rng = np.random.default_rng(seed)
    if task == "sparse":
        make_sparse(data_dir, rng)
        return
    n_train, n_test = 200_000, 50_000
    x = rng.standard_normal((n_train + n_test, FEATURES)).astype(np.float32)
    if task == "multiclass":
        classes = 50
        directions = rng.standard_normal((FEATURES, classes)).astype(np.float32)
        scores = x @ directions + 2.0 * rng.standard_normal((len(x), classes)).astype(np.float32)
        y = scores.argmax(axis=1).astype(np.float32)
        groups = None
    else:
        docs = 1_000
        signal = np.sin(x[:, 0] * 1.5) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] - 0.3 * np.abs(x[:, 4])
        signal = signal + 0.8 * rng.standard_normal(len(x))
        # relevance by quantile within the whole set: most documents irrelevant, few top
        cuts = np.quantile(signal, [0.5, 0.8, 0.93, 0.98])
        y = np.searchsorted(cuts, signal).astype(np.float32)
        groups = np.full((n_train + n_test) // docs, docs, dtype=np.int64)
    np.save(os.path.join(data_dir, "x.npy"), x[:n_train])
    np.save(os.path.join(data_dir, "tx.npy"), x[n_train:])
    np.save(os.path.join(data_dir, "y.npy"), y[:n_train])
    np.save(os.path.join(data_dir, "ty.npy"), y[n_train:])
    if groups is not None:
        split = n_train // docs
        np.save(os.path.join(data_dir, "g.npy"), groups[:split])
        np.save(os.path.join(data_dir, "tg.npy"), groups[split:])


def mlogloss(p: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log likelihood of the true classes."""
    picked = np.clip(p[np.arange(len(y)), y.astype(np.int64)], 1e-15, 1.0)
    return float(-np.log(picked).mean())


def auc(p: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve, tied scores sharing their mean rank (Mann-Whitney), in
    numpy: importing scikit-learn to score would raise the process's peak memory after
    training by more than some libraries' training takes."""
    _, inverse, counts = np.unique(p, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = (ends - counts + 1 + ends) / 2.0
    ranks = mean_rank[inverse]
    pos = y == 1
    n1 = float(pos.sum())
    n0 = float(len(y)) - n1
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def ndcg10(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> float:
    """Mean NDCG@10 (gains 2^rel - 1) over queries with a relevant document."""
    out, start, discount = [], 0, 1.0 / np.log2(np.arange(2, 12))
    for size in groups:
        rel, s = labels[start : start + size], scores[start : start + size]
        start += size
        ideal = np.sort(rel)[::-1][:10]
        idcg = float(((2.0**ideal - 1.0) * discount[: ideal.size]).sum())
        if idcg > 0:
            got = rel[np.argsort(-s, kind="stable")][:10]
            out.append(float(((2.0**got - 1.0) * discount[: got.size]).sum()) / idcg)
    return float(np.mean(out))


def run_library(args: argparse.Namespace) -> None:
    """Trains one library on the task's files and prints one JSON line."""
    d = args.data_dir
    ranking, sparse = args.task == "ranking", args.task == "sparse"
    if sparse:
        import scipy.sparse as sp

        x, tx = (sp.load_npz(os.path.join(d, f"{n}.npz")) for n in ("x", "tx"))
        y, ty = (np.load(os.path.join(d, f"{n}.npy")) for n in ("y", "ty"))
    else:
        x, y, tx, ty = (np.load(os.path.join(d, f"{n}.npy")) for n in ("x", "y", "tx", "ty"))
    g = np.load(os.path.join(d, "g.npy")) if ranking else None
    tg = np.load(os.path.join(d, "tg.npy")) if ranking else None
    # Sapwood and XGBoost take the same parameter names
    params = {"max_depth": 6, "learning_rate": 0.1, "reg_lambda": 1.0, "min_child_weight": 1.0,
              "max_bin": 256, "nthread": args.threads}
    if ranking:
        params.update(objective="rank:ndcg", lambdarank_pair_method="topk",
                      lambdarank_num_pair_per_sample=32)
    elif sparse:
        params.update(objective="binary:logistic")
    else:
        params.update(objective="multi:softprob", num_class=50)
    if args.library == "sapwood":
        if args.min_data_in_bin is not None:
            params["min_data_in_bin"] = args.min_data_in_bin
        import sapwood

        start = time.perf_counter()
        booster = sapwood.train(params, sapwood.Dataset(x, label=y, group=g),
                                num_boost_round=args.rounds, verbose_eval=False)
        seconds = time.perf_counter() - start
        p = booster.predict(sapwood.Dataset(tx))
        version = sapwood.__version__
    elif args.library == "xgboost":
        import xgboost as xgb

        params["tree_method"] = "hist"
        start = time.perf_counter()
        dm = xgb.QuantileDMatrix(x, label=y, max_bin=256)
        if ranking:
            dm.set_group(g)
        booster = xgb.train(params, dm, num_boost_round=args.rounds)
        seconds = time.perf_counter() - start
        p = booster.predict(xgb.DMatrix(tx))
        version = xgb.__version__
    else:
        import lightgbm as lgb

        params = {"learning_rate": 0.1, "num_leaves": 63, "max_depth": 6, "max_bin": 255,
                  "lambda_l2": 1.0, "min_sum_hessian_in_leaf": 1.0, "min_data_in_leaf": 0,
                  "num_threads": args.threads, "verbosity": -1}
        if ranking:
            params.update(objective="lambdarank", lambdarank_truncation_level=32)
        elif sparse:
            params.update(objective="binary")
        else:
            params.update(objective="multiclass", num_class=50)
        ds_params = {"max_bin": 255, "verbosity": -1}
        if args.min_data_in_bin is not None:
            ds_params["min_data_in_bin"] = args.min_data_in_bin
        start = time.perf_counter()
        ds = lgb.Dataset(x, label=y, group=g, params=ds_params)
        booster = lgb.train(params, ds, num_boost_round=args.rounds)
        seconds = time.perf_counter() - start
        p = booster.predict(tx)
        version = lgb.__version__
    if ranking:
        score = ndcg10(np.asarray(p), ty, tg)
    elif sparse:
        score = auc(np.asarray(p, dtype=np.float64), ty)
    else:
        score = mlogloss(np.asarray(p), ty)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"library": f"{args.library} {version}", "train_seconds": round(seconds, 3),
                      "peak_rss_mib": round(rss, 1), "score": round(score, 5)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=["multiclass", "ranking", "sparse", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs of every library, one table each")
    ap.add_argument("--min-data-in-bin", type=int,
                    help="Sapwood's and LightGBM's min_data_in_bin (default: each library's own)")
    ap.add_argument("--library", help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.library:
        run_library(args)
        return
    tasks = ["multiclass", "ranking", "sparse"] if args.task == "all" else [args.task]
    for task in tasks:
        with tempfile.TemporaryDirectory() as data_dir:
            make(task, data_dir)
            for run in range(args.repeat):
                results = []
                for library in ["sapwood", "xgboost", "lightgbm"]:
                    cmd = [sys.executable, os.path.abspath(__file__), "--library", library,
                           "--data-dir", data_dir, "--task", task, "--rounds", str(args.rounds),
                           "--threads", str(args.threads)]
                    if args.min_data_in_bin is not None:
                        cmd += ["--min-data-in-bin", str(args.min_data_in_bin)]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                    results.append(json.loads(out.strip().splitlines()[-1]))
                what = {"multiclass": "50 classes, 200,000 rows x 28 features, held-out multi "
                                      "log loss",
                        "ranking": "200 queries of 1,000 documents, 28 features, held-out "
                                   "NDCG@10",
                        "sparse": "binary, 100,000 rows x 5,000 features at 0.5% density "
                                  "(CSR), held-out AUC"}[task]
                bins = ("" if args.min_data_in_bin is None
                        else f", min_data_in_bin {args.min_data_in_bin}")
                print(f"{task} (run {run + 1}): {what}; {args.rounds} rounds, depth 6 / 63 "
                      f"leaves, {args.threads} threads{bins}")
                print(f"{'library':<18}{'train s':>10}{'peak MiB':>10}{'score':>10}{'time ratio':>12}")
                ours = results[0]
                for r in results:
                    print(f"{r['library']:<18}{r['train_seconds']:>10.2f}{r['peak_rss_mib']:>10.0f}"
                          f"{r['score']:>10.4f}{ours['train_seconds'] / r['train_seconds']:>12.2f}")
                sys.stdout.flush()
    print("time ratio: sapwood's train seconds over the library's; below 1 means sapwood is faster")


if __name__ == "__main__":
    main()
