#!/usr/bin/env python3
"""Writes datasets/<name>/{train,test}.parquet from the CSV splits (deterministic).

Categorical columns (meta.json) become dictionary-encoded string columns, missing values
nulls; everything else keeps the type pandas reads. Compression: zstd.

requires: pandas==3.1.1 pyarrow==21.0.0
"""
import json
import os
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))


def convert(name):
    d = os.path.join(HERE, name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    for split in ("train", "test"):
        df = pd.read_csv(os.path.join(d, f"{split}.csv"))
        for c in meta["categorical"]:
            df[c] = df[c].astype("category")
        table = pa.Table.from_pandas(df, preserve_index=False)
        table = table.replace_schema_metadata(None)
        pq.write_table(table, os.path.join(d, f"{split}.parquet"), compression="zstd",
                       row_group_size=1_000)


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(n for n in os.listdir(HERE) if os.path.exists(os.path.join(HERE, n, "meta.json")))
    for n in names:
        convert(n)
        print("wrote", n)
