#!/usr/bin/env python3
"""Builds the survival and learning-to-rank datasets: datasets/gbsg2 and datasets/lambdarank.

Deterministic (running it twice writes the same bytes) and offline:

* gbsg2: the German Breast Cancer Study Group 2 trial (686 patients), read from the
  `lifelines/datasets/gbsg2.csv` file inside the lifelines 0.30.3 wheel from PyPI (pass its
  path). The label `survival` is the recurrence-free time in days, negative when censored
  (`cens` = 0), as XGBoost's `survival:cox` reads it. 80/20 split, seeded.
* lambdarank: LightGBM's learning-to-rank example (`examples/lambdarank/rank.{train,test}`
  with their `.query` files, commit bae0b7ba9 of microsoft/LightGBM; 300 features, graded
  relevance 0-4, 201 training and 50 test queries). The libsvm rows become dense columns
  `f001`..`f300` (absent entries are 0, as LightGBM reads them) with a `qid` column; the
  splits are LightGBM's own.

Usage: python datasets/make_survival_ranking.py LIFELINES_WHEEL LIGHTGBM_LAMBDARANK_DIR
requires: numpy pandas pyarrow (the versions of make_parquet.py)
"""
import io
import json
import os
import sys
import zipfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, frames, meta, categorical, csv=True, group=None):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    for split, df in frames.items():
        if csv:
            df.to_csv(os.path.join(d, f"{split}.csv"), index=False, lineterminator="\n")
        table_df = df.copy()
        for c in categorical:
            table_df[c] = table_df[c].astype("category")
        table = pa.Table.from_pandas(table_df, preserve_index=False).replace_schema_metadata(None)
        path = os.path.join(d, f"{split}.parquet")
        if group is None:
            pq.write_table(table, path, compression="zstd", row_group_size=1_000)
            continue
        # row groups of whole queries (about 1,000 rows): MPI ranks read whole row groups,
        # and a query must not span two ranks
        with pq.ParquetWriter(path, table.schema, compression="zstd") as w:
            ids = df[group].to_numpy()
            start = 0
            while start < len(ids):
                end = min(start + 1_000, len(ids))
                while end < len(ids) and ids[end] == ids[end - 1]:
                    end += 1
                w.write_table(table.slice(start, end - start))
                start = end
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def gbsg2(wheel):
    with zipfile.ZipFile(wheel) as z:
        raw = pd.read_csv(io.BytesIO(z.read("lifelines/datasets/gbsg2.csv")))
    df = raw.drop(columns=["time", "cens"]).copy()
    df["survival"] = np.where(raw["cens"] == 1, raw["time"], -raw["time"]).astype(np.int64)
    rng = np.random.Generator(np.random.PCG64(20261201))
    order = rng.permutation(len(df))
    n_test = int(round(0.2 * len(df)))
    test, train = df.iloc[order[:n_test]], df.iloc[order[n_test:]]
    categorical = ["horTh", "menostat", "tgrade"]
    meta = {
        "name": "gbsg2",
        "task": "survival",
        "label": "survival",
        "label_kind": "numeric",
        "categorical": categorical,
        "features": [c for c in df.columns if c != "survival"],
        "missing_counts": {},
        "source": "lifelines 0.30.3 (PyPI wheel): lifelines/datasets/gbsg2.csv",
        "citation": "M. Schumacher et al. (1994), Randomized 2x2 trial evaluating hormonal "
                    "treatment and the duration of chemotherapy in node-positive breast cancer "
                    "patients, J. Clinical Oncology 12(10); German Breast Cancer Study Group",
        "licence": "MIT (lifelines); the data are also in R's TH.data package (GPL-2)",
        "rows": {"train": len(train), "test": len(test)},
        "split": "80/20, numpy PCG64 seed 20261201",
        "notes": "label = recurrence-free survival time in days, negative when censored "
                 f"({int((df['survival'] > 0).sum())} events of {len(df)})",
    }
    write("gbsg2", {"train": train, "test": test}, meta, categorical)


def read_libsvm(path, n_features):
    labels, rows = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            labels.append(int(float(parts[0])))
            row = np.zeros(n_features)
            for p in parts[1:]:
                k, v = p.split(":")
                row[int(k)] = float(v)
            rows.append(row)
    return np.array(labels), np.vstack(rows)


def lambdarank(folder):
    n_features = 301  # indices 0..300 occur
    frames = {}
    counts = {}
    for split in ("train", "test"):
        y, x = read_libsvm(os.path.join(folder, f"rank.{split}"), n_features)
        sizes = [int(s) for s in open(os.path.join(folder, f"rank.{split}.query")).read().split()]
        assert sum(sizes) == len(y), (split, sum(sizes), len(y))
        start = 0 if split == "train" else 1_000
        qid = np.repeat(np.arange(start, start + len(sizes)), sizes)
        df = pd.DataFrame({f"f{j:03d}": x[:, j] for j in range(n_features)})
        df = df.loc[:, (df != 0).any(axis=0)] if split == "train" else df
        frames[split] = (df, y, qid)
        counts[split] = (len(y), len(sizes))
    keep = list(frames["train"][0].columns)
    out = {}
    for split, (df, y, qid) in frames.items():
        df = df[keep].copy()
        df.insert(0, "qid", qid)
        df.insert(0, "relevance", y)
        out[split] = df
    meta = {
        "name": "lambdarank",
        "task": "ranking",
        "label": "relevance",
        "label_kind": "numeric",
        "group": "qid",
        "categorical": [],
        "features": keep,
        "missing_counts": {},
        "source": "microsoft/LightGBM examples/lambdarank/rank.{train,test} and .query "
                  "(commit bae0b7ba9)",
        "citation": "LightGBM's LambdaRank example data (G. Ke et al. (2017), LightGBM: A Highly "
                    "Efficient Gradient Boosting Decision Tree, NeurIPS)",
        "licence": "MIT (LightGBM)",
        "rows": {"train": counts["train"][0], "test": counts["test"][0]},
        "queries": {"train": counts["train"][1], "test": counts["test"][1]},
        "split": "LightGBM's own train/test files",
        "notes": "dense f000..f300 columns that are non-zero somewhere in train; absent libsvm "
                 "entries are 0; relevance 0-4",
    }
    # Parquet only: the dense CSV would be 3.6 MB
    write("lambdarank", out, meta, [], csv=False, group="qid")


if __name__ == "__main__":
    gbsg2(sys.argv[1])
    lambdarank(sys.argv[2])
    print("wrote gbsg2 and lambdarank")
