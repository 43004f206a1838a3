#!/usr/bin/env python3
"""Dask training side by side: sapwood.dask, xgboost.dask and lightgbm.dask on one
LocalCluster, the same persisted partitions, the same trees asked of each.

Generates the synthetic binary task (datasets/make_synthetic.py, 28 features, 2% missing in
three columns) with --rows training rows and a held-out 100,000, persists it as a dask
DataFrame of --partitions partitions on --workers single-threaded worker processes, then
trains each library --repeat times, interleaved (the fastest run is shown, with the median:
a shared machine only ever adds time). For each it prints the fit's wall time, the bytes
that crossed the loopback during the fit (every byte of the job, all processes: the
library's own collective, Dask's task and data traffic, heartbeats), and the held-out AUC.
For Sapwood it adds the bytes its collective sent (rank 0's count times the workers) and
what they would have been uncompressed.

The same trees: depth-wise to --depth with 256 bins for Sapwood and XGBoost (hist);
LightGBM grows leaf-wise, so it gets num_leaves 2^depth - 1 with max_depth --depth.

    python3 bench/dask_peers.py --rows 1000000 --workers 4 --rounds 50 --depth 6
requires: the Python test virtualenv (python/run_tests.sh), whose pins include dask,
distributed, xgboost-cpu and lightgbm.
"""
from __future__ import annotations

import argparse
import os
import statistics
from typing import Any, Callable

from peer_data import auc, files, timed_fits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()

    import dask.dataframe as dd
    import lightgbm as lgb
    import numpy as np
    import pandas as pd
    import xgboost.dask
    from distributed import Client, LocalCluster, wait

    import sapwood
    import sapwood.dask

    train_path, test_path = files(a.rows)
    test = pd.read_parquet(test_path)
    y_test = test.pop("y").to_numpy()
    print(
        f"{a.rows} rows x {test.shape[1]} features, {a.partitions} partitions, {a.workers} "
        f"workers x 1 thread, {a.rounds} rounds, depth {a.depth}, eta 0.1, 256 bins; "
        f"{os.cpu_count()} cores"
    )
    with LocalCluster(
        n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
        silence_logs=40,
    ) as cluster, Client(cluster) as client:
        client.wait_for_workers(a.workers)
        # read by the workers (row groups of 100,000 rows), never sent from here
        ddf = dd.read_parquet(train_path, split_row_groups=True)
        ddf = ddf.repartition(npartitions=a.partitions).persist()
        wait(ddf)
        X, y = ddf.drop(columns="y"), ddf["y"]
        X, y = X.persist(), y.persist()
        wait([X, y])
        dtest = test

        def fit_sapwood() -> tuple[Any, dict[str, Any]]:
            params = {"objective": "binary:logistic", "max_depth": a.depth, "eta": 0.1,
                      "max_bin": 256, "threads": 1}
            dtrain = sapwood.dask.DaskDataset(client, X, y)
            plan = sapwood.dask._plan(dtrain._rows, dtrain._cuttable, dtrain._locations())
            ranks.add(len(plan))
            out = sapwood.dask.train(client, params, dtrain, a.rounds, verbose_eval=False)
            booster = out["booster"]
            comm = booster.comm_stats
            extra = {"collective": comm["bytes_sent"] * a.workers,
                     "uncompressed": comm["bytes_before_compression"] * a.workers}
            return (lambda frame: booster.predict(frame)), extra

        def fit_xgboost() -> tuple[Any, dict[str, Any]]:
            params = {"objective": "binary:logistic", "max_depth": a.depth, "eta": 0.1,
                      "max_bin": 256, "tree_method": "hist", "nthread": 1}
            dtrain = xgboost.dask.DaskDMatrix(client, X, y)
            out = xgboost.dask.train(client, params, dtrain, a.rounds)
            booster = out["booster"]
            return (lambda frame: booster.inplace_predict(frame)), {}

        def fit_lightgbm() -> tuple[Any, dict[str, Any]]:
            model = lgb.DaskLGBMClassifier(
                client=client, n_estimators=a.rounds, learning_rate=0.1, max_depth=a.depth,
                num_leaves=2**a.depth - 1, max_bin=255, n_jobs=1, verbose=-1,
            )
            model.fit(X, y)
            local = model.to_local()
            return (lambda frame: local.predict_proba(frame)[:, 1]), {}

        fits: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {
            "sapwood.dask": fit_sapwood, "xgboost.dask": fit_xgboost,
            "lightgbm.dask": fit_lightgbm,
        }
        ranks: set[int] = set()
        times, sent, last = timed_fits(fits, a.repeat)
        print(f"\n| library | fit s (best / median of {a.repeat}) | loopback MB during fit | "
              "held-out AUC | ratio to sapwood's time |")
        print("|---|---|---|---|---|")
        best = {k: min(v) for k, v in times.items()}
        for name in fits:
            predict, extra = last[name]
            score = auc(y_test, np.asarray(predict(dtest)))
            mb = statistics.median(sent[name]) / 1e6
            print(f"| {name} | {best[name]:.2f} / {statistics.median(times[name]):.2f} | "
                  f"{mb:.1f} | {score:.4f} | {best[name] / best['sapwood.dask']:.2f} |")
        _, extra = last["sapwood.dask"]
        print(f"\nsapwood trained as {sorted(ranks)} ranks; its collective sent {extra['collective'] / 1e6:.2f} MB in all "
              f"({extra['uncompressed'] / 1e6:.2f} MB uncompressed)")


if __name__ == "__main__":
    main()
