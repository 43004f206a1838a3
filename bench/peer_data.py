"""What the distributed peer benchmarks (dask_peers.py, spark_peers.py) share: the synthetic
task's Parquet files, the loopback byte counter and the held-out AUC."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loopback_bytes() -> int:
    """Bytes sent on the loopback so far (all processes of this network namespace)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, counters = line.partition(":")
            if name.strip() == "lo":
                return int(counters.split()[8])
    raise RuntimeError("no loopback in /proc/net/dev")


def auc(y, p) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def files(rows: int) -> list[str]:
    """The training and held-out Parquet files (100,000 held-out rows), generated once."""
    out = []
    for n, name in ((rows, "train"), (100_000, "test")):
        path = os.path.join(tempfile.gettempdir(), f"sapwood-dask-bench-{name}-{n}.parquet")
        if not os.path.exists(path):
            # the held-out rows come from other seeds: the generator seeds per row group
            subprocess.run(
                [sys.executable, os.path.join(ROOT, "datasets", "make_synthetic.py"), "--rows",
                 str(n), "--out", path] + (["--seed", "1000"] if name == "test" else []),
                check=True,
            )
        out.append(path)
    return out


def timed_fits(
    fits: dict[str, Callable[[], Any]], repeat: int
) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, Any]]:
    """Runs every fit `repeat` times, interleaved (a shared machine only ever adds time, and
    to every library alike); each fit's seconds, the loopback bytes sent during it, and
    each library's last result."""
    times: dict[str, list[float]] = {k: [] for k in fits}
    sent: dict[str, list[int]] = {k: [] for k in fits}
    last: dict[str, Any] = {}
    for _ in range(repeat):
        for name, fit in fits.items():
            before, t0 = loopback_bytes(), time.perf_counter()
            last[name] = fit()
            times[name].append(time.perf_counter() - t0)
            sent[name].append(loopback_bytes() - before)
    return times, sent, last
