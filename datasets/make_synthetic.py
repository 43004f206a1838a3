#!/usr/bin/env python3
"""A large deterministic synthetic binary task as Parquet (HIGGS-like shape: 28 features).

    python3 datasets/make_synthetic.py --rows 10000000 --out /tmp/synthetic-10m.parquet
    python3 datasets/make_synthetic.py --rows 1000000 --classes 4 --categorical 50 --out m.parquet

Bell-shaped features (sums of uniforms), a nonlinear signal with interactions, labels drawn
from a logistic of it, 2% missing values in three columns. Written in row groups of
`--row-group` rows, one group at a time, so memory stays small; the same arguments give the
same file (numpy's PCG64 with a fixed seed per row group). `--classes K` makes the label a
class in 0..K (quantiles of the signal, with noise); `--categorical L` adds a string column
`cat` with L levels (zipf-like frequencies, 5% missing) whose level shifts the signal.

requires: numpy==2.4.6 pyarrow==21.0.0
"""
import argparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def group(rows, features, seed, classes=2, levels=0):
    rng = np.random.Generator(np.random.PCG64(seed))
    x = rng.random((rows, features, 3), dtype=np.float32).sum(axis=2) - 1.5
    f = lambda j: x[:, j % features]
    signal = (1.2 * f(0) * f(1) - 0.8 * np.abs(f(2)) + np.sin(2 * f(3)) + 0.6 * f(4) - 0.5 * f(5) * f(6) * f(7)
              + 0.4 * (f(8) > 0.3) - 0.3 * f(9) ** 2 + 0.2 * f(10) + 0.5 * np.tanh(f(11) + f(12)))
    cols = {}
    if levels > 0:
        # level k has weight 1/(k+1); its effect is a fixed function of k
        w = 1.0 / np.arange(1, levels + 1)
        cat = rng.choice(levels, size=rows, p=w / w.sum())
        signal = signal + 0.8 * np.sin(1.7 * cat)
        names = np.array([f"L{k}" for k in range(levels)], dtype=object)[cat]
        names[rng.random(rows) < 0.05] = None
        cols["cat"] = pa.array(names, type=pa.string())
    if classes > 2:
        edges = np.array([-0.8, -0.2, 0.3, 0.8, 1.2, 1.6, 2.0][: classes - 1])
        y = np.searchsorted(edges, signal + 0.3 * rng.standard_normal(rows)).astype(np.int8)
    else:
        p = 1.0 / (1.0 + np.exp(-2.0 * signal))
        y = (rng.random(rows) < p).astype(np.int8)
    for j in (13, 17, 21):
        if j < features:
            x[rng.random(rows) < 0.02, j] = np.nan
    cols.update({f"f{j:02d}": pa.array(x[:, j]) for j in range(features)})
    cols["y"] = pa.array(y)
    return pa.table(cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--row-group", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--classes", type=int, default=2, help="2 (binary) up to 8")
    ap.add_argument("--categorical", type=int, default=0, help="levels of a string column")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not 2 <= a.classes <= 8:
        ap.error("--classes must be in 2..8")
    writer = None
    for i, start in enumerate(range(0, a.rows, a.row_group)):
        t = group(min(a.row_group, a.rows - start), a.features, a.seed * 1_000_003 + i,
                  a.classes, a.categorical)
        if writer is None:
            writer = pq.ParquetWriter(a.out, t.schema, compression="zstd")
        writer.write_table(t, row_group_size=a.row_group)
    writer.close()


if __name__ == "__main__":
    main()
