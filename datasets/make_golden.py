#!/usr/bin/env python3
# requires: xgboost-cpu==3.2.0 lightgbm==4.7.0 numpy==2.4.6 pandas==3.1.1 scikit-learn==1.9.1
# (full pinned list: datasets/requirements-golden.txt; scikit-learn is only used to
#  cross-check the hand-written metrics below)
"""Train XGBoost and LightGBM on every datasets/<name>/train.csv, evaluate on
test.csv, and write tests/golden/quality.json.

Both libraries run single-threaded with fixed seeds and no row/column
subsampling, so the output is reproducible for the pinned versions.

Metrics (computed here in numpy, cross-checked against scikit-learn):
  binary:      auc (ties get half credit), logloss (p clipped to [1e-15, 1-1e-15])
  regression:  rmse
  multiclass:  mlogloss (p of the true class clipped to >= 1e-15), merror (argmax,
               first maximum wins)

Usage:  python datasets/make_golden.py [--out tests/golden/quality.json] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

ROUNDS = 200
SEED = 0
EPS = 1e-15

XGB_PARAMS = {
    "tree_method": "hist",
    "max_depth": 6,
    "max_bin": 256,
    "learning_rate": 0.1,
    "reg_lambda": 1.0,
    "min_child_weight": 1.0,
    "nthread": 1,
    "seed": SEED,
    # everything else is XGBoost's default (reg_alpha=0, gamma=0, subsample=1,
    # colsample_*=1, grow_policy=depthwise, max_cat_to_onehot default, base_score
    # estimated from the training labels)
}

LGB_PARAMS = {
    "max_depth": 6,
    "num_leaves": 63,
    "max_bin": 255,
    "learning_rate": 0.1,
    "min_data_in_leaf": 20,
    "num_threads": 1,
    "seed": SEED,
    "deterministic": True,
    "force_col_wise": True,
    "verbosity": -1,
    # everything else is LightGBM's default (lambda_l2=0, min_sum_hessian_in_leaf=1e-3,
    # no bagging, feature_fraction=1, max_cat_to_onehot=4, cat_smooth=10, cat_l2=10,
    # min_data_per_group=100, max_cat_threshold=32, boost_from_average=true)
}

OBJECTIVES = {
    "binary": {"xgboost": "binary:logistic", "lightgbm": "binary"},
    "regression": {"xgboost": "reg:squarederror", "lightgbm": "regression"},
    "multiclass": {"xgboost": "multi:softprob", "lightgbm": "multiclass"},
}


# --------------------------------------------------------------------------
# Data loading
# --------------------------------------------------------------------------

def load(name):
    d = os.path.join(HERE, name)
    with open(os.path.join(d, "meta.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    cat = meta["categorical"]
    label = meta["label"]

    def read(split):
        # Only empty fields are missing; categorical columns are read as strings.
        dtypes = {c: str for c in cat}
        if meta["label_kind"] == "string":
            dtypes[label] = str
        return pd.read_csv(os.path.join(d, f"{split}.csv"), dtype=dtypes,
                           keep_default_na=False, na_values=[""])

    train, test = read("train"), read("test")
    features = [c for c in train.columns if c != label]
    # Category levels: sorted levels seen in train (test-only levels become missing).
    for c in cat:
        levels = sorted(train[c].dropna().unique().tolist())
        train[c] = pd.Categorical(train[c], categories=levels)
        test[c] = pd.Categorical(test[c], categories=levels)
    for c in features:
        if c not in cat:
            train[c] = train[c].astype(np.float64)
            test[c] = test[c].astype(np.float64)

    if meta["task"] == "regression":
        y_tr = train[label].to_numpy(np.float64)
        y_te = test[label].to_numpy(np.float64)
        classes = None
    else:
        classes = sorted(train[label].unique().tolist())
        index = {k: i for i, k in enumerate(classes)}
        y_tr = train[label].map(index).to_numpy(np.int64)
        y_te = test[label].map(index).to_numpy(np.int64)
    return meta, train[features], y_tr, test[features], y_te, classes


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------

def auc(y, p):
    y = np.asarray(y)
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    ranks = np.empty(len(p), dtype=np.float64)
    i = 0
    while i < len(ps):  # average ranks over ties
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    n_pos = int((y == 1).sum())
    n_neg = len(y) - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def logloss(y, p):
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0 - EPS)
    return float(-np.mean(np.where(y == 1, np.log(p), np.log(1.0 - p))))


def rmse(y, p):
    return float(np.sqrt(np.mean((np.asarray(p, np.float64) - y) ** 2)))


def mlogloss(y, P):
    pt = np.clip(P[np.arange(len(y)), y], EPS, None)
    return float(-np.mean(np.log(pt)))


def merror(y, P):
    return float(np.mean(np.argmax(P, axis=1) != y))


def metrics(task, y, pred):
    if task == "binary":
        return {"auc": auc(y, pred), "logloss": logloss(y, pred)}
    if task == "regression":
        return {"rmse": rmse(y, pred)}
    return {"mlogloss": mlogloss(y, pred), "merror": merror(y, pred)}


def crosscheck(task, y, pred, m):
    from sklearn import metrics as skm
    if task == "binary":
        assert abs(m["auc"] - skm.roc_auc_score(y, pred)) < 1e-12
        assert abs(m["logloss"] - skm.log_loss(y, np.clip(pred, EPS, 1 - EPS))) < 1e-9
    elif task == "regression":
        assert abs(m["rmse"] - np.sqrt(skm.mean_squared_error(y, pred))) < 1e-9 * max(1, m["rmse"])
    else:
        P = np.clip(pred, EPS, None)
        P = P / P.sum(axis=1, keepdims=True)
        assert abs(m["mlogloss"] - skm.log_loss(y, P, labels=list(range(pred.shape[1])))) < 1e-6
        assert abs(m["merror"] - (1 - skm.accuracy_score(y, pred.argmax(1)))) < 1e-12


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------

def run_xgboost(task, Xtr, ytr, Xte, n_class):
    import xgboost as xgb
    params = dict(XGB_PARAMS, objective=OBJECTIVES[task]["xgboost"])
    if task == "multiclass":
        params["num_class"] = n_class
    dtr = xgb.DMatrix(Xtr, label=ytr, enable_categorical=True, missing=np.nan, nthread=1)
    dte = xgb.DMatrix(Xte, enable_categorical=True, missing=np.nan, nthread=1)
    booster = xgb.train(params, dtr, num_boost_round=ROUNDS)
    pred = booster.predict(dte)
    cfg = json.loads(booster.save_config())
    tp = cfg["learner"]["gradient_booster"]["tree_train_param"]
    info = {
        "max_cat_to_onehot": int(tp["max_cat_to_onehot"]),
        "max_cat_threshold": int(tp["max_cat_threshold"]),
        "base_score": cfg["learner"]["learner_model_param"]["base_score"],
    }
    return np.asarray(pred, dtype=np.float64), info


def run_lightgbm(task, Xtr, ytr, Xte, n_class, cat):
    import lightgbm as lgb
    params = dict(LGB_PARAMS, objective=OBJECTIVES[task]["lightgbm"])
    if task == "multiclass":
        params["num_class"] = n_class
    dtr = lgb.Dataset(Xtr, label=ytr, categorical_feature=cat if cat else "auto",
                      params={"max_bin": LGB_PARAMS["max_bin"], "verbosity": -1})
    booster = lgb.train(params, dtr, num_boost_round=ROUNDS)
    pred = booster.predict(Xte, num_threads=1)
    return np.asarray(pred, dtype=np.float64), {}


def main(argv=None):
    import lightgbm
    import sklearn
    import xgboost

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "quality.json"))
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)

    names = sorted(d for d in os.listdir(HERE)
                   if os.path.isfile(os.path.join(HERE, d, "meta.json")))
    if args.only:
        names = [n for n in names if n in args.only]

    results = {}
    for name in names:
        meta, Xtr, ytr, Xte, yte, classes = load(name)
        task, cat = meta["task"], meta["categorical"]
        n_class = len(classes) if classes else None
        entry = {"task": task, "label": meta["label"],
                 "rows": {"train": len(ytr), "test": len(yte)},
                 "categorical": cat}
        if classes is not None:
            entry["classes"] = classes
        for lib in ("xgboost", "lightgbm"):
            if lib == "xgboost":
                pred, info = run_xgboost(task, Xtr, ytr, Xte, n_class)
            else:
                pred, info = run_lightgbm(task, Xtr, ytr, Xte, n_class, cat)
            m = metrics(task, yte, pred)
            crosscheck(task, yte, pred, m)
            entry[lib] = m
            if info:
                entry[lib + "_info"] = info
            print(f"{name:15s} {lib:9s} " +
                  " ".join(f"{k}={v:.6g}" for k, v in m.items()), flush=True)
        results[name] = entry

    out = {
        "params": {
            "rounds": ROUNDS,
            "xgboost": dict(XGB_PARAMS, enable_categorical=True, missing="NaN",
                            objective={t: o["xgboost"] for t, o in OBJECTIVES.items()},
                            num_class="number of classes (multiclass only)",
                            max_cat_to_onehot="library default (value used: see "
                                              "datasets.<name>.xgboost_info)"),
            "lightgbm": dict(LGB_PARAMS,
                             objective={t: o["lightgbm"] for t, o in OBJECTIVES.items()},
                             num_class="number of classes (multiclass only)",
                             categorical_feature="meta.json 'categorical' columns "
                                                 "(pandas category dtype)"),
            "data": "categorical columns as pandas category dtype with levels = sorted "
                    "train levels; empty CSV fields -> NaN; class labels encoded in "
                    "sorted order",
            "metrics": {"auc": "ties get half credit",
                        "logloss": f"p clipped to [{EPS}, 1-{EPS}]",
                        "mlogloss": f"p(true class) clipped to >= {EPS}",
                        "merror": "argmax (first maximum) != label",
                        "rmse": "sqrt(mean squared error)"},
        },
        "versions": {
            "xgboost": xgboost.__version__,
            "lightgbm": lightgbm.__version__,
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "scikit-learn": sklearn.__version__,
            "python": sys.version.split()[0],
        },
        "datasets": results,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as fh:
        json.dump(out, fh, indent=2)
        fh.write("\n")
    print("wrote", os.path.relpath(args.out, REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
