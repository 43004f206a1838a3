"""Learning to rank from Python: query groups on ``sapwood.Dataset`` (``group=`` sizes or
``qid=`` ids), ``SapwoodRanker``, ranking metrics in ``evals_result`` and early stopping on
them, the determinism contract for 1 and 3 workers, and held-out NDCG@10 against live
XGBoost (``XGBRanker``, ``rank:ndcg`` with ``lambdarank_pair_method="topk"``) and LightGBM
(``LGBMRanker``, ``lambdarank``) with matched parameters.

Real queries: ``datasets/lambdarank`` (LightGBM's LambdaRank example, bundled with its
provenance) in ``test_real_queries_rank_as_well_as_the_better_peer``. The other tests use a
**synthetic** set generated here, larger and with known structure: queries of 5 to 40 documents, query-level features shared by a
query's rows, document features whose relevance depends on the query (interactions), graded
labels 0-4 with label noise, and a few uninformative features.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import sapwood
from sapwood import SapwoodRanker

#: Matched settings of the three libraries (as bench/objectives.py matches them).
ROUNDS = 100
DEPTH = 6
ETA = 0.1
BINS = 256
#: XGBoost's top-k truncation, Sapwood's default; LightGBM's lambdarank_truncation_level.
PAIRS = 32
#: Sapwood's held-out NDCG@10 may be below the better peer's by this fraction of it.
TOLERANCE = 0.01
#: Measured (100 rounds, this data): Sapwood 0.8543, XGBoost 0.8506, LightGBM 0.8723, so
#: Sapwood is 0.4% above XGBoost, whose LambdaMART (top-k pairs, per-query normalisation)
#: it follows, and 2.1% below LightGBM. The gap is LightGBM's lambdarank gradients, not its
#: trees: LightGBM with num_leaves=64 scores the same 0.8723, Sapwood grown leaf-wise with 63
#: leaves the same 0.8543, and XGBoost leaf-wise 0.8506. LightGBM scales each query's lambdas
#: by log2(1 + sum|lambda|) / sum|lambda| (lambdarank_norm; off, it scores 0.8588) and
#: truncates pairs by its own rule. Against the better peer the bar is that excess plus 1
#: point; against XGBoost it is TOLERANCE.
GAP_TO_LIGHTGBM = 0.031


def ltr_data(
    n_queries: int, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """``(X, relevance, qid)`` of a synthetic learning-to-rank set, rows sorted by query."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 41, size=n_queries)
    qid = np.repeat(np.arange(n_queries, dtype=np.int64) * 7 + 1000, sizes)
    n = int(sizes.sum())
    query_feats = np.repeat(rng.normal(size=(n_queries, 3)), sizes, axis=0)
    doc = rng.normal(size=(n, 8))
    noise = rng.normal(size=(n, 3))
    # relevance: a nonlinear score whose weights move with the query's features
    score = (
        doc[:, 0] * (1.0 + query_feats[:, 0])
        + np.sin(2.0 * doc[:, 1])
        + doc[:, 2] * doc[:, 3]
        - 0.5 * np.abs(doc[:, 4] - query_feats[:, 1])
        + 0.3 * doc[:, 5] * query_feats[:, 2]
        + rng.normal(scale=0.6, size=n)
    )
    # grade within each query: the top documents of a query are the relevant ones
    labels = np.zeros(n, dtype=np.float32)
    start = 0
    for s in sizes:
        part = score[start : start + s]
        ranks = np.argsort(np.argsort(-part))
        frac = ranks / s
        labels[start : start + s] = np.select(
            [frac < 0.05, frac < 0.15, frac < 0.3, frac < 0.5], [4, 3, 2, 1], 0
        )
        start += s
    X = np.hstack([query_feats, doc, noise])
    return X, labels, qid


def ndcg_at(
    scores: npt.NDArray[Any], labels: npt.NDArray[Any], qid: npt.NDArray[Any], k: int,
    gains: Any = None,
) -> float:
    """Mean NDCG@k over queries (gain 2^rel - 1, or ``gains[rel]``; log2 discount), written
    here so that the three libraries are scored by the same code; ties in a score keep row
    order."""
    gain = (lambda r: 2.0**r - 1.0) if gains is None else (lambda r: np.asarray(gains)[r.astype(int)])
    out = []
    bounds = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True])
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    for a, b in zip(bounds[:-1], bounds[1:]):
        rel, s = labels[a:b].astype(np.float64), np.asarray(scores[a:b], dtype=np.float64)
        ideal = np.sort(rel)[::-1][:k]
        idcg = float((gain(ideal) * discount[: ideal.size]).sum())
        if idcg == 0.0:
            continue
        got = rel[np.argsort(-s, kind="stable")][:k]
        out.append(float((gain(got) * discount[: got.size]).sum()) / idcg)
    return float(np.mean(out))


@pytest.fixture(scope="module")
def ltr() -> dict[str, Any]:
    X, y, q = ltr_data(600, seed=1)
    Xt, yt, qt = ltr_data(300, seed=2)
    return {"X": X, "y": y, "qid": q, "X_test": Xt, "y_test": yt, "qid_test": qt}


def sizes_of(qid: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, qid.size])


def test_held_out_ndcg_at_10_is_within_one_percent_of_the_better_peer(ltr: dict[str, Any]) -> None:
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y, q = ltr["X"], ltr["y"], ltr["qid"]
    Xt, yt, qt = ltr["X_test"], ltr["y_test"], ltr["qid_test"]
    ours = SapwoodRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, max_bin=BINS,
        lambdarank_num_pair_per_sample=PAIRS, n_jobs=1,
    ).fit(X, y, qid=q)
    theirs_x = xgb.XGBRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, max_bin=BINS,
        tree_method="hist", objective="rank:ndcg", lambdarank_pair_method="topk",
        lambdarank_num_pair_per_sample=PAIRS, n_jobs=1,
    ).fit(X, y, qid=q)
    theirs_l = lgb.LGBMRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, num_leaves=63, learning_rate=ETA, max_bin=BINS - 1,
        objective="lambdarank", lambdarank_truncation_level=PAIRS, reg_lambda=1.0,
        min_child_weight=1.0, min_child_samples=0, n_jobs=1, verbose=-1, deterministic=True,
    ).fit(X, y, group=sizes_of(q))
    scores = {
        "sapwood": ndcg_at(ours.predict(Xt), yt, qt, 10),
        "xgboost": ndcg_at(theirs_x.predict(Xt), yt, qt, 10),
        "lightgbm": ndcg_at(theirs_l.predict(Xt), yt, qt, 10),
    }
    print("held-out NDCG@10:", {k: round(v, 4) for k, v in scores.items()})
    best = max(scores["xgboost"], scores["lightgbm"])
    assert scores["sapwood"] >= scores["xgboost"] * (1.0 - TOLERANCE), scores
    assert scores["sapwood"] >= best * (1.0 - GAP_TO_LIGHTGBM), scores
    # and the engine's own ndcg@10 on the held-out queries is the same number
    history: sapwood.EvalsResult = {}
    sapwood.train(
        {"objective": "rank:ndcg", "max_depth": DEPTH, "eta": ETA, "max_bin": BINS,
         "eval_metric": "ndcg@10"},
        sapwood.Dataset(X, label=y, qid=q), ROUNDS,
        evals=[(sapwood.Dataset(Xt, label=yt, qid=qt), "test")], verbose_eval=False,
        evals_result=history,
    )
    assert history["test"]["ndcg@10"][-1] == pytest.approx(scores["sapwood"], rel=1e-4)


def test_label_gain_is_lightgbms_table_of_gains(ltr: dict[str, Any]) -> None:
    X, y, q = ltr["X"], ltr["y"], ltr["qid"]
    Xt, yt, qt = ltr["X_test"], ltr["y_test"], ltr["qid_test"]
    table = [0.0, 0.0, 1.0, 10.0, 30.0]
    matched = dict(n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, max_bin=BINS,
                   lambdarank_num_pair_per_sample=PAIRS, n_jobs=1)

    def fit(**extra: Any) -> SapwoodRanker:
        return SapwoodRanker(**matched, **extra).fit(
            X, y, qid=q, eval_set=[(Xt, yt)], eval_qid=[qt], eval_metric="ndcg@10")

    default, exp, own = fit(), fit(label_gain=[0, 1, 3, 7, 15]), fit(label_gain=table)
    # LightGBM's default table is 2^label - 1: the default model's predictions, bit for bit
    assert np.array_equal(default.predict(Xt), exp.predict(Xt))
    assert not np.array_equal(default.predict(Xt), own.predict(Xt)), "label_gain was ignored"
    # the reported ndcg@10 uses the table, as LightGBM's metric does
    curve = own.evals_result_["validation_0"]["ndcg@10"]
    assert curve[-1] == pytest.approx(ndcg_at(own.predict(Xt), yt, qt, 10, table), rel=1e-6)
    assert curve[-1] != pytest.approx(ndcg_at(own.predict(Xt), yt, qt, 10), rel=1e-3)
    # a label the table has no gain for is refused with its row, a table that decreases by name
    with pytest.raises(ValueError, match="label_gain.*row|row.*label_gain"):
        SapwoodRanker(n_estimators=2, label_gain=[0, 1, 3]).fit(X, y, qid=q)
    with pytest.raises(ValueError, match="label_gain.*decrease"):
        SapwoodRanker(n_estimators=2, label_gain=[0, 1, 3, 2, 9]).fit(X, y, qid=q)
    # continued training keeps the gains: the continuing run gives the model's table
    data = sapwood.Dataset(X, label=y, qid=q)
    first = sapwood.train({"objective": "rank:ndcg", "label_gain": table}, data, 3)
    with pytest.raises(ValueError, match="label_gain"):
        sapwood.train({"objective": "rank:ndcg"}, data, 3, xgb_model=first)
    sapwood.train({"objective": "rank:ndcg", "label_gain": table}, data, 3, xgb_model=first)
    # trained for the table, it ranks by the table as well as LightGBM given the same table
    lgb = pytest.importorskip("lightgbm")
    theirs = lgb.LGBMRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, num_leaves=63, learning_rate=ETA, max_bin=BINS - 1,
        objective="lambdarank", lambdarank_truncation_level=PAIRS, reg_lambda=1.0,
        min_child_weight=1.0, min_child_samples=0, n_jobs=1, verbose=-1, deterministic=True,
        label_gain=table,
    ).fit(X, y, group=sizes_of(q))
    ours_score = ndcg_at(own.predict(Xt), yt, qt, 10, table)
    theirs_score = ndcg_at(theirs.predict(Xt), yt, qt, 10, table)
    print("held-out NDCG@10 by the table:", round(ours_score, 4), "LightGBM", round(theirs_score, 4))
    assert ours_score >= theirs_score * (1.0 - GAP_TO_LIGHTGBM)


def test_lightgbms_pair_hessian_takes_lightgbms_steps(ltr: dict[str, Any]) -> None:
    """``lambdarank_hessian="lightgbm"`` (p(1 - p)·|Δ| for a pair instead of XGBoost's
    2p(1 - p)·|Δ|) is what leaves the default 2% behind LightGBM on this data: with it the
    held-out NDCG@10 is LightGBM's (measured 0.8712, default 0.8543, LightGBM 0.8723).
    On the bundled LambdaRank queries XGBoost's ranks better, so it stays the default."""
    lgb = pytest.importorskip("lightgbm")
    X, y, q = ltr["X"], ltr["y"], ltr["qid"]
    Xt, yt, qt = ltr["X_test"], ltr["y_test"], ltr["qid_test"]

    def ours(**extra: Any) -> float:
        r = SapwoodRanker(n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, max_bin=BINS,
                          lambdarank_num_pair_per_sample=PAIRS, n_jobs=1, **extra).fit(X, y, qid=q)
        return ndcg_at(r.predict(Xt), yt, qt, 10)

    theirs = lgb.LGBMRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, num_leaves=63, learning_rate=ETA, max_bin=BINS - 1,
        objective="lambdarank", lambdarank_truncation_level=PAIRS, reg_lambda=1.0,
        min_child_weight=1.0, min_child_samples=0, n_jobs=1, verbose=-1, deterministic=True,
    ).fit(X, y, group=sizes_of(q))
    peer = ndcg_at(theirs.predict(Xt), yt, qt, 10)
    default, lightgbms = ours(), ours(lambdarank_hessian="lightgbm")
    assert lightgbms >= peer * (1.0 - 0.005), (lightgbms, peer)
    assert lightgbms - default > 0.01 * peer, (default, lightgbms)
    assert ours(lambdarank_hessian="xgboost") == default


def test_a_ranker_continued_keeps_its_pair_hessian(ltr: dict[str, Any]) -> None:
    """A ranking model trained with LightGBM's pair hessian and continued without naming
    one trains on with it: 10 + 10 rounds save the bytes of 20."""
    X, y, q = ltr["X"][:3000], ltr["y"][:3000], ltr["qid"][:3000]
    data = sapwood.Dataset(X, label=y, qid=q)
    params = {"objective": "rank:ndcg", "max_depth": 4, "nthread": 2}
    lgbs = {**params, "lambdarank_hessian": "lightgbm"}
    first = sapwood.train(lgbs, data, 10, verbose_eval=False)
    continued = sapwood.train(params, data, 10, xgb_model=first, verbose_eval=False)
    straight = sapwood.train(lgbs, data, 20, verbose_eval=False)
    assert continued.to_json() == straight.to_json()
    assert sapwood.train(params, data, 20, verbose_eval=False).to_json() != straight.to_json()


def test_one_and_three_workers_save_the_same_model(ltr: dict[str, Any]) -> None:
    X, y, q = ltr["X"], ltr["y"], ltr["qid"]
    params = {"objective": "rank:ndcg", "max_depth": DEPTH, "eta": ETA, "subsample": 0.8}
    models = [
        sapwood.train({**params, "workers": w}, sapwood.Dataset(X, label=y, qid=q), 20).to_json()
        for w in (1, 3)
    ]
    assert models[0] == models[1]
    ranker = [
        SapwoodRanker(n_estimators=10, workers=w, objective="rank:map")
        .fit(X, y, group=sizes_of(q)).get_booster().to_json()
        for w in (1, 3)
    ]
    assert ranker[0] == ranker[1]


def test_ndcg_at_k_is_recorded_and_early_stopping_watches_it(ltr: dict[str, Any]) -> None:
    X, y, q = ltr["X"][:3000], ltr["y"][:3000], ltr["qid"][:3000]
    Xt, yt, qt = ltr["X_test"], ltr["y_test"], ltr["qid_test"]
    ranker = SapwoodRanker(n_estimators=400, learning_rate=0.5, max_depth=8).fit(
        X, y, qid=q, eval_set=[(X, y), (Xt, yt)], eval_qid=[q, qt],
        eval_metric=["map@5", "ndcg@10"], early_stopping_rounds=10,
    )
    result = ranker.evals_result_
    assert set(result) == {"validation_0", "validation_1"}
    assert list(result["validation_1"]) == ["map@5", "ndcg@10"]
    curve = result["validation_1"]["ndcg@10"]
    best = ranker.best_iteration_
    assert best is not None and ranker.n_estimators_ < 400, "never stopped"
    # higher is better: the best round is the first maximum, and ten rounds followed it
    assert best == int(np.argmax(curve))
    assert len(curve) == best + 11
    assert ranker.best_score == pytest.approx(curve[best])
    # predict uses the best iteration, and its NDCG@10 is the recorded one
    assert ndcg_at(ranker.predict(Xt), yt, qt, 10) == pytest.approx(curve[best], rel=1e-4)
    # LightGBM's eval_at names ndcg@k per cut-off
    lgb_style = SapwoodRanker(n_estimators=3).fit(
        X, y, group=sizes_of(q), eval_set=[(Xt, yt)], eval_group=[sizes_of(qt)], eval_at=[1, 5]
    )
    assert list(lgb_style.evals_result_["validation_0"]) == ["ndcg@1", "ndcg@5"]


def test_group_sizes_qid_and_a_qid_column_train_the_same_model(ltr: dict[str, Any]) -> None:
    pd = pytest.importorskip("pandas")
    X, y, q = ltr["X"][:2000], ltr["y"][:2000], ltr["qid"][:2000]
    by_qid = sapwood.Dataset(X, label=y, qid=q)
    by_group = sapwood.Dataset(X, label=y, group=sizes_of(q))
    assert np.array_equal(by_qid.get_group(), sizes_of(q))
    params = {"objective": "rank:ndcg", "max_depth": 4}
    a = sapwood.train(params, by_qid, 5).to_json()
    assert sapwood.train(params, by_group, 5).to_json() == a
    late = sapwood.Dataset(X, label=y).set_group(list(sizes_of(q)))
    assert sapwood.train(params, late, 5).to_json() == a
    # XGBoost's convention: a DataFrame's `qid` column holds the queries and is no feature
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    ranker = SapwoodRanker(n_estimators=5, max_depth=4).fit(frame.assign(qid=q), y)
    assert ranker.n_features_in_ == X.shape[1]
    plain = SapwoodRanker(n_estimators=5, max_depth=4).fit(frame, y, qid=q)
    assert ranker.get_booster().to_json() == plain.get_booster().to_json()
    assert np.array_equal(ranker.predict(frame.assign(qid=q)), plain.predict(frame))
    # one weight per query (XGBoost) is the same as that weight on each of its rows
    per_query = np.linspace(0.5, 2.0, len(sizes_of(q))).astype(np.float32)
    per_row = np.repeat(per_query, sizes_of(q))
    w_query = SapwoodRanker(n_estimators=5).fit(X, y, qid=q, sample_weight=per_query)
    w_row = SapwoodRanker(n_estimators=5).fit(X, y, qid=q, sample_weight=per_row)
    assert w_query.get_booster().to_json() == w_row.get_booster().to_json()


def test_bad_groups_are_errors_naming_the_argument_and_row() -> None:
    X, y, q = ltr_data(20, seed=3)
    back = int(np.flatnonzero(q != q[0])[0]) + 2  # inside the second query
    bad = q.copy()
    bad[back] = q[0]
    with pytest.raises(sapwood.ParameterError, match=rf"`qid`, row {back}: query {q[0]} appears again"):
        sapwood.Dataset(X, label=y, qid=bad)
    with pytest.raises(sapwood.ParameterError, match=rf"`qid`.*row {back}"):
        SapwoodRanker(n_estimators=2).fit(X, y, qid=bad)
    nan_qid = q.astype(np.float64)
    nan_qid[7] = np.nan
    with pytest.raises(sapwood.ParameterError, match=r"`qid`: row 7 is nan"):
        sapwood.Dataset(X, label=y, qid=nan_qid)
    with pytest.raises(sapwood.DataError, match=r"`qid`: 3 query ids for \d+ rows"):
        sapwood.Dataset(X, label=y, qid=q[:3])
    sizes = sizes_of(q)
    with pytest.raises(sapwood.DataError, match=rf"`group`: the {len(sizes)} query sizes add up to {len(y) - 1} rows but the dataset has {len(y)}"):
        sapwood.Dataset(X, label=y, group=np.r_[sizes[:-1], sizes[-1] - 1])
    with pytest.raises(sapwood.ParameterError, match=r"`group`: query 2 has 0 rows"):
        sapwood.Dataset(X, label=y, group=np.r_[sizes[:2], 0, sizes[2:]])
    with pytest.raises(sapwood.ParameterError, match=r"`qid`: given with `group`"):
        sapwood.Dataset(X, label=y, group=sizes, qid=q)
    with pytest.raises(sapwood.ParameterError, match=r"`group`: a ranker needs the query of every row"):
        SapwoodRanker().fit(X, y)
    with pytest.raises(sapwood.DataError, match=r"eval_group of eval_set 0 \(`validation_0`\): .*`group`"):
        SapwoodRanker(n_estimators=2).fit(
            X, y, group=sizes, eval_set=[(X, y)], eval_group=[sizes[:-1]]
        )
    with pytest.raises(sapwood.ParameterError, match=rf"eval_qid of eval_set 0 .*row {back}"):
        SapwoodRanker(n_estimators=2).fit(X, y, qid=q, eval_set=[(X, y)], eval_qid=[bad])
    with pytest.raises(sapwood.ParameterError, match=r"`objective`: reg:squarederror is not a ranking"):
        SapwoodRanker(objective="reg:squarederror").fit(X, y, qid=q)
    # a ranking objective without groups names them
    with pytest.raises(sapwood.SapwoodError, match=r"group"):
        sapwood.train({"objective": "rank:ndcg"}, sapwood.Dataset(X, label=y), 2)
    # a failed set_group leaves the groups as they were
    d = sapwood.Dataset(X, label=y, qid=q)
    with pytest.raises(sapwood.DataError):
        d.set_group([1, 2])
    assert np.array_equal(d.get_group(), sizes)
    assert d.set_group(None).get_group() is None


def test_every_ranking_objective_trains_and_reports_its_metric(ltr: dict[str, Any]) -> None:
    X, y, q = ltr["X"][:2000], ltr["y"][:2000], ltr["qid"][:2000]
    Xt, yt, qt = ltr["X_test"], ltr["y_test"], ltr["qid_test"]
    for objective, metric in (("rank:ndcg", "ndcg"), ("lambdarank", "ndcg"),
                              ("rank:map", "map"), ("rank:pairwise", "ndcg")):
        history: sapwood.EvalsResult = {}
        booster = sapwood.train(
            {"objective": objective, "eval_metric": [metric, "pre@3"]},
            sapwood.Dataset(X, label=y, qid=q), 10,
            evals=[(sapwood.Dataset(Xt, label=yt, qid=qt), "test")], verbose_eval=False,
            evals_result=history,
        )
        curve = history["test"][metric]
        assert curve[-1] > curve[0], (objective, curve)
        assert 0.0 < history["test"]["pre@3"][-1] <= 1.0
        assert booster.predict(Xt).shape == (len(yt),)


XGB_SCRIPT = """
import xgboost as xgb
ranker = xgb.XGBRanker(n_estimators=20, max_depth=4, eval_metric="ndcg@5")
ranker.fit(X, y, qid=qid, eval_set=[(X_test, y_test)], eval_qid=[qid_test], verbose=False)
result = ranker.evals_result()["validation_0"]["ndcg@5"][-1]
dtrain = xgb.DMatrix(X, label=y, qid=qid)
booster = xgb.train({"objective": "rank:ndcg", "max_depth": 4}, dtrain, 5)
scores = booster.predict(xgb.DMatrix(X_test))
"""

#: LightGBM names evaluation sets ``valid_0``, Sapwood (as XGBoost) ``validation_0``: the
#: README lists that difference, and the script reads whichever is there.
LGB_SCRIPT = """
import lightgbm as lgb
ranker = lgb.LGBMRanker(n_estimators=20, max_depth=4, num_leaves=15)
ranker.fit(X, y, group=group, eval_set=[(X_test, y_test)], eval_group=[group_test],
           eval_at=[5])
result = ranker.evals_result_["valid_0" if "valid_0" in ranker.evals_result_ else "validation_0"]["ndcg@5"][-1]
booster = lgb.train({"objective": "lambdarank", "max_depth": 4, "verbose": -1},
                    lgb.Dataset(X, label=y, group=group), 5)
scores = booster.predict(X_test)
"""


@pytest.mark.parametrize("column, script", [(0, XGB_SCRIPT), (1, LGB_SCRIPT)], ids=["xgboost", "lightgbm"])
def test_peer_ranking_scripts_run_with_the_readme_swaps(
    ltr: dict[str, Any], column: int, script: str
) -> None:
    from test_peer_habits import _for_sapwood

    n, m = 3000, 1500
    scope: dict[str, Any] = {
        "X": ltr["X"][:n], "y": ltr["y"][:n], "qid": ltr["qid"][:n],
        "group": sizes_of(ltr["qid"][:n]), "X_test": ltr["X_test"][:m],
        "y_test": ltr["y_test"][:m], "qid_test": ltr["qid_test"][:m],
        "group_test": sizes_of(ltr["qid_test"][:m]),
    }
    ported = _for_sapwood(script, column)
    assert "sapwood" in ported and ("xgb." not in ported and "lgb." not in ported)
    exec(ported, scope)  # noqa: S102 - the scripts are this file's own text
    assert 0.5 < scope["result"] <= 1.0
    assert np.asarray(scope["scores"]).shape == (m,)


def _real_queries() -> tuple[Any, ...]:
    """LightGBM's LambdaRank example (datasets/lambdarank: 201 training and 50 test queries,
    300 features, relevance 0-4), split as LightGBM ships it."""
    import pandas as pd

    from conftest import REPO

    out: list[Any] = []
    for part in ("train", "test"):
        d = pd.read_parquet(REPO / "datasets" / "lambdarank" / f"{part}.parquet")
        y = d.pop("relevance").to_numpy(np.float32)
        q = d.pop("qid").to_numpy()
        out += [d.to_numpy(np.float64), y, q]
    return tuple(out)


def test_real_queries_rank_as_well_as_the_better_peer() -> None:
    """On real queries with top-k pairs, held-out NDCG@10 within half a percent of the
    better peer (measured: Sapwood 0.7419, XGBoost 0.7407, LightGBM 0.7378). With `mean`
    pairs (random partners) the score moves with the seed (Sapwood 0.726 to 0.750 over
    seeds 0-2; XGBoost's draws do not follow random_state: 0.7451), so the mean over five
    seeds must be within 1.5% of XGBoost's."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y, q, Xt, yt, qt = _real_queries()
    common = dict(n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=ETA, max_bin=BINS, n_jobs=1)
    ours = SapwoodRanker(lambdarank_num_pair_per_sample=PAIRS, **common).fit(X, y, qid=q)
    theirs_x = xgb.XGBRanker(
        tree_method="hist", objective="rank:ndcg", lambdarank_pair_method="topk",
        lambdarank_num_pair_per_sample=PAIRS, **common,
    ).fit(X, y, qid=q)
    theirs_l = lgb.LGBMRanker(
        n_estimators=ROUNDS, max_depth=DEPTH, num_leaves=63, learning_rate=ETA, max_bin=BINS - 1,
        objective="lambdarank", lambdarank_truncation_level=PAIRS, reg_lambda=1.0,
        min_child_weight=1.0, min_child_samples=0, n_jobs=1, verbose=-1, deterministic=True,
    ).fit(X, y, group=sizes_of(q))
    scores = {
        name: ndcg_at(m.predict(Xt), yt, qt, 10)
        for name, m in (("sapwood", ours), ("xgboost", theirs_x), ("lightgbm", theirs_l))
    }
    print("real queries, held-out NDCG@10 (topk):", {k: round(v, 4) for k, v in scores.items()})
    assert scores["sapwood"] >= max(scores["xgboost"], scores["lightgbm"]) * (1 - 0.005), scores
    mean = [
        ndcg_at(
            SapwoodRanker(lambdarank_pair_method="mean", random_state=seed, **common)
            .fit(X, y, qid=q).predict(Xt), yt, qt, 10,
        )
        for seed in range(5)
    ]
    theirs = ndcg_at(
        xgb.XGBRanker(tree_method="hist", objective="rank:ndcg", lambdarank_pair_method="mean",
                      **common).fit(X, y, qid=q).predict(Xt), yt, qt, 10,
    )
    print("real queries, held-out NDCG@10 (mean pairs):", np.round(mean, 4), round(theirs, 4))
    assert float(np.mean(mean)) >= theirs * (1 - 0.015), (mean, theirs)
