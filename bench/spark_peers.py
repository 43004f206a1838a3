#!/usr/bin/env python3
"""Spark training side by side: sapwood.spark and xgboost.spark on one SparkSession, the
same cached DataFrame, the same trees asked of each.

Generates the synthetic binary task (datasets/make_synthetic.py, 28 features, 2% missing in
three columns) with --rows training rows and a held-out 100,000, reads the training rows
with spark.read.parquet, repartitions them to --workers partitions and caches them (counted
once before any timing, so neither library pays for reading; with as many partitions as
num_workers neither repartitions either), then fits each library --repeat times,
interleaved (the fastest run is shown, with the median: a shared machine only ever adds
time; Spark reuses its Python workers, so each library's first fit also pays for importing
it there). For each it prints the fit's wall time, the bytes that crossed the loopback during
the fit (every byte of the job, all processes: the library's own collective, Spark's RPC,
scheduling and block traffic, the rows handed from executor JVMs to Python workers), and
the held-out AUC of the fitted model's `probability` column from `transform`. For Sapwood
it adds the bytes its collective sent (rank 0's count times the workers) and what they
would have been uncompressed.

The same trees: depth-wise to --depth, eta 0.1, 256 bins, XGBoost with tree_method hist;
--workers barrier tasks for both, one thread each (Sapwood's n_jobs=1; xgboost.spark takes
its threads from spark.task.cpus, set to 1). Both fits also run one small Spark job over
the labels (Sapwood's class count, XGBoost's countDistinct). Not alike: xgboost.spark always
evaluates the training rows every round (its tasks pass the training DMatrix as an eval
set; verbose=False only stops the printing), and hands its tasks pandas frames
(mapInPandas) where Sapwood takes Arrow batches (mapInArrow).

--master is local-cluster[executors,cores,MB] (separate executor JVMs and Python workers,
as the tests use) or local[N]; a barrier stage needs --workers task slots at once.

    python3 bench/spark_peers.py --rows 1000000 --workers 2 --rounds 50 --depth 6
requires: the Python test virtualenv (python/run_tests.sh), whose pins include pyspark and
xgboost-cpu; Java 17.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import sys
import time
import warnings
from typing import Any, Callable, Optional

from peer_data import ROOT, auc, files, timed_fits


def cluster(master: str) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """(executor JVMs, task slots, executor MB) of a local-cluster[n,c,mb] or local[N]
    master; None where the master does not say."""
    m = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]", master)
    if m:
        n, c, mb = (int(g) for g in m.groups())
        return n, n * c, mb
    m = re.fullmatch(r"local\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\]", master)
    if m:
        return None, os.cpu_count() if m.group(1) == "*" else int(m.group(1)), None
    if master == "local":
        return None, 1, None
    return None, None, None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--master", default="local-cluster[2,1,2048]",
                    help="local-cluster[executors,cores,MB] or local[N]")
    a = ap.parse_args()

    executors, slots, executor_mb = cluster(a.master)
    if slots is not None and a.workers > slots:
        sys.exit(f"--workers {a.workers} needs {a.workers} task slots at once (a barrier "
                 f"stage); {a.master} has {slots}")

    import sapwood
    import sapwood.spark
    import xgboost.spark
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    # executors import the driver's sapwood (and this checkout's python/), with this
    # interpreter, as python/tests/test_spark.py arranges it
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(sapwood.__file__))),
             os.path.join(ROOT, "python")]
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    pythonpath = os.pathsep.join(dict.fromkeys(roots))
    os.environ["PYTHONPATH"] = pythonpath  # local[N]: the Python workers inherit it
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    logging.getLogger("XGBoost-PySpark").setLevel(logging.WARNING)
    # pyspark's own warnings about pandas 3 (its Arrow conversions work with it)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")

    train_path, test_path = files(a.rows)
    builder = (
        SparkSession.builder.master(a.master)
        .appName("sapwood-spark-peers")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.task.cpus", "1")
        .config("spark.sql.shuffle.partitions", str(a.workers))
        .config("spark.default.parallelism", str(a.workers))
        .config("spark.executorEnv.PYTHONPATH", pythonpath)
        .config("spark.executorEnv.OMP_NUM_THREADS", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if executor_mb is not None:
        builder = builder.config("spark.executor.memory", f"{executor_mb}m")
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("ERROR")
        if executors is not None:
            # the barrier stages need every slot: wait until the executors have registered
            deadline = time.monotonic() + 120
            status: Any = spark.sparkContext._jsc.sc()
            while (status.getExecutorMemoryStatus().size() < executors + 1
                   and time.monotonic() < deadline):
                time.sleep(0.2)
            if status.getExecutorMemoryStatus().size() < executors + 1:
                sys.exit(f"the executors of {a.master} did not start")

        # read by the executors, never sent from here; cached, so no fit reads Parquet
        train = spark.read.parquet(train_path).repartition(a.workers).cache()
        count = train.count()
        assert count == a.rows, (count, a.rows)
        features = [c for c in train.columns if c != "y"]
        test = spark.read.parquet(test_path)
        print(
            f"{a.rows} rows x {len(features)} features, {a.workers} workers x 1 thread, "
            f"{a.rounds} rounds, depth {a.depth}, eta 0.1, 256 bins; {os.cpu_count()} cores; "
            f"master {a.master}"
        )

        def fit_sapwood() -> tuple[Any, dict[str, Any]]:
            model = sapwood.spark.SapwoodClassifier(
                num_workers=a.workers, features_cols=features, labelCol="y",
                n_estimators=a.rounds, max_depth=a.depth, grow_policy="depthwise",
                learning_rate=0.1, max_bin=256, n_jobs=1,
            ).fit(train)
            extra: dict[str, Any] = {}
            try:
                # rank 0's booster reaches the driver pickled, with its comm stats
                comm = model.getBooster().comm_stats
                extra = {"collective": comm["bytes_sent"] * a.workers,
                         "uncompressed": comm["bytes_before_compression"] * a.workers}
            except (AttributeError, KeyError, TypeError):
                pass
            return model, extra

        def fit_xgboost() -> tuple[Any, dict[str, Any]]:
            # nthread is not a Param of xgboost.spark: it is spark.task.cpus (1, above)
            model = xgboost.spark.SparkXGBClassifier(
                num_workers=a.workers, features_col=features, label_col="y",
                n_estimators=a.rounds, max_depth=a.depth, grow_policy="depthwise",
                learning_rate=0.1, max_bin=256, tree_method="hist", verbose=False,
            ).fit(train)
            return model, {}

        fits: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {
            "sapwood.spark": fit_sapwood, "xgboost.spark": fit_xgboost,
        }
        times, sent, last = timed_fits(fits, a.repeat)

        def score(model: Any) -> float:
            """Held-out AUC of the positive class's probability from transform."""
            out = model.transform(test).select(
                F.col("y").cast("double").alias("y"),
                vector_to_array(F.col("probability"))[1].alias("p"),
            ).toPandas()
            return auc(out["y"].to_numpy(), out["p"].to_numpy())

        print(f"\n| library | fit s (best / median of {a.repeat}) | loopback MB during fit | "
              "held-out AUC | ratio to sapwood's time |")
        print("|---|---|---|---|---|")
        best = {k: min(v) for k, v in times.items()}
        for name in fits:
            model, _ = last[name]
            mb = statistics.median(sent[name]) / 1e6
            print(f"| {name} | {best[name]:.2f} / {statistics.median(times[name]):.2f} | "
                  f"{mb:.1f} | {score(model):.4f} | "
                  f"{best[name] / best['sapwood.spark']:.2f} |")
        _, extra = last["sapwood.spark"]
        if extra:
            print(f"\nsapwood's collective sent {extra['collective'] / 1e6:.2f} MB in all "
                  f"({extra['uncompressed'] / 1e6:.2f} MB uncompressed)")
        train.unpersist()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
