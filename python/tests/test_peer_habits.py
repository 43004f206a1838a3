"""Habits of XGBoost and LightGBM users (issue #20): the same short scripts, written for
XGBoost and for LightGBM, run against Sapwood with only the names python/README.md's
table swaps, and give comparable quality; then one test per habit the scripts do not show.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import roc_auc_score
from sklearn.utils.class_weight import compute_sample_weight

import sapwood
from sapwood import SapwoodClassifier, SapwoodRegressor

README = Path(__file__).resolve().parents[1] / "README.md"

#: Sapwood's test error (1 - AUC) may exceed the peer's by this fraction, plus SLACK (on
#: ~60 test rows one misordered pair moves the AUC by ~1e-3).
ERROR_FRACTION = 0.5
SLACK = 0.005


def _swaps(column: int) -> dict[str, str]:
    """``{peer name: Sapwood name}`` from the README's table (column 0: XGBoost, 1:
    LightGBM)."""
    swaps = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.match(r"`(import )?sapwood", cells[2]):
            peer = cells[column].strip("`")
            if peer:
                swaps[peer] = cells[2].strip("`")
    assert swaps, "the README's table of names is missing"
    return swaps


def _for_sapwood(script: str, column: int) -> str:
    """``script`` with the README's swaps applied (longest names first)."""
    swaps = _swaps(column)
    for peer in sorted(swaps, key=len, reverse=True):
        script = re.sub(rf"\b{re.escape(peer)}\b", swaps[peer], script)
    return script


@pytest.fixture(scope="module")
def binary() -> dict[str, Any]:
    """Breast cancer split in train/valid/test, as arrays with -999 for 3% of the values
    (XGBoost's `missing=` habit) and as frames with a text category column."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    holes = X.copy()
    holes[rng.random(X.shape) < 0.03] = -999.0
    frame = pd.DataFrame(X[:, :10], columns=[f"c{i}" for i in range(10)])
    frame["size"] = pd.Categorical(np.where(X[:, 3] > np.median(X[:, 3]), "large", "small"))
    parts = {"train": slice(0, 380), "valid": slice(380, 470), "test": slice(470, None)}
    data: dict[str, Any] = {}
    for name, rows in parts.items():
        data[f"X_{name}"] = holes[rows]
        data[f"F_{name}"] = frame.iloc[rows].reset_index(drop=True)
        data[f"y_{name}"] = y[rows]
    return data


def _run(script: str, namespace: dict[str, Any]) -> dict[str, Any]:
    ns = dict(namespace)
    with warnings.catch_warnings():
        # the peers' own deprecation notes and Sapwood's one-time notes on no-op settings
        warnings.simplefilter("ignore")
        exec(compile(script, "<script>", "exec"), ns)
    return ns


def _comparable(ours: float, theirs: float, what: str) -> None:
    assert 1 - ours <= (1 - theirs) * (1 + ERROR_FRACTION) + SLACK, (
        f"{what}: Sapwood AUC {ours:.5f} vs peer {theirs:.5f}"
    )


XGB_SKLEARN = """
import xgboost as xgb
clf = xgb.XGBClassifier(n_estimators=300, learning_rate=0.1, max_depth=4, tree_method="hist",
                        missing=-999.0, scale_pos_weight=1.5, eval_metric="logloss",
                        early_stopping_rounds=10, n_jobs=1, random_state=0, verbosity=0)
clf.fit(X_train, y_train, eval_set=[(X_train, y_train), (X_valid, y_valid)],
        sample_weight_eval_set=[np.ones(len(y_train)), np.ones(len(y_valid))], verbose=False)
proba = clf.predict_proba(X_test)[:, 1]
booster = clf.get_booster()
best = booster.best_iteration
first = clf.predict_proba(X_test, iteration_range=(0, best + 1))[:, 1]
history = clf.evals_result()
score = booster.best_score
rounds = booster.num_boosted_rounds()
params = clf.get_params()
"""

XGB_LEARNING_API = """
import xgboost as xgb
dtrain = xgb.DMatrix(X_train, label=y_train, missing=-999.0)
dvalid = xgb.DMatrix(X_valid, label=y_valid, missing=-999.0)
dtest = xgb.DMatrix(X_test, missing=-999.0)
params = [("objective", "binary:logistic"), ("eta", 0.1), ("max_depth", 4),
          ("tree_method", "hist"), ("eval_metric", "logloss"), ("eval_metric", "auc"),
          ("nthread", 1), ("seed", 0)]
history = {}
bst = xgb.train(params, dtrain, 300, evals=[(dtrain, "train"), (dvalid, "valid")],
                early_stopping_rounds=10, evals_result=history, verbose_eval=False)
best = bst.best_iteration
proba = bst.predict(dtest, iteration_range=(0, best + 1))
every = bst.predict(dtest)
middle = bst.predict(dtest, iteration_range=(3, 8), output_margin=True)
sliced = bst[3:8].predict(dtest, output_margin=True)
score = bst.best_score
rounds = bst.num_boosted_rounds()
frame = bst.trees_to_dataframe()
dump = bst.get_dump(with_stats=True)
gain = bst.get_score(importance_type="gain")
"""

LGB_SKLEARN = """
import lightgbm as lgb
clf = lgb.LGBMClassifier(n_estimators=300, learning_rate=0.1, num_leaves=15, max_depth=-1,
                         min_child_samples=10, subsample=0.8, subsample_freq=1,
                         colsample_bytree=0.9, class_weight="balanced", boosting_type="gbdt",
                         objective="binary", random_state=0, n_jobs=1, verbose=-1)
clf.fit(F_train, y_train, eval_set=[(F_valid, y_valid)], eval_names=["valid"],
        eval_metric="auc",
        callbacks=[lgb.early_stopping(10, verbose=False), lgb.log_evaluation(0)])
proba = clf.predict_proba(F_test)[:, 1]
importances = clf.feature_importances_
rounds = clf.booster_.current_iteration()
names = clf.booster_.feature_name()
"""

LGB_LEARNING_API = """
import lightgbm as lgb
dtrain = lgb.Dataset(F_train, label=y_train)
dvalid = lgb.Dataset(F_valid, label=y_valid, reference=dtrain)
params = {"objective": "binary", "metric": ["binary_logloss", "auc"], "learning_rate": 0.1,
          "num_leaves": 15, "max_depth": -1, "min_data_in_leaf": 10, "boosting_type": "gbdt",
          "verbose": -1, "seed": 0, "num_threads": 1}
record = {}
bst = lgb.train(params, dtrain, num_boost_round=300, valid_sets=[dvalid],
                valid_names=["valid"],
                callbacks=[lgb.early_stopping(10, verbose=False), lgb.record_evaluation(record)])
proba = bst.predict(F_test)
split = bst.feature_importance("split")
"""


def test_xgboost_sklearn_script(binary: dict[str, Any]) -> None:
    theirs = _run(XGB_SKLEARN, {"np": np, **binary})
    ours = _run(_for_sapwood(XGB_SKLEARN, 0), {"np": np, **binary})
    assert "sapwood.SapwoodClassifier" in _for_sapwood(XGB_SKLEARN, 0)
    _comparable(
        roc_auc_score(binary["y_test"], ours["proba"]),
        roc_auc_score(binary["y_test"], theirs["proba"]),
        "XGBClassifier script",
    )
    # early stopping: the estimator predicts with the best iteration, like XGBoost's
    assert ours["best"] is not None and ours["rounds"] == ours["best"] + 11
    np.testing.assert_array_equal(ours["proba"], ours["first"])
    assert set(ours["history"]) == {"validation_0", "validation_1"}
    assert ours["score"] == ours["history"]["validation_1"]["logloss"][ours["best"]]
    # the peer parameters reached get_params, as XGBoost's do
    assert ours["params"]["tree_method"] == "hist" and ours["params"]["verbosity"] == 0


def test_xgboost_learning_api_script(binary: dict[str, Any]) -> None:
    theirs = _run(XGB_LEARNING_API, {**binary})
    ours = _run(_for_sapwood(XGB_LEARNING_API, 0), {**binary})
    _comparable(
        roc_auc_score(binary["y_test"], ours["proba"]),
        roc_auc_score(binary["y_test"], theirs["proba"]),
        "xgb.train script",
    )
    assert set(ours["history"]["valid"]) == set(theirs["history"]["valid"]) == {"logloss", "auc"}
    # XGBoost's rules: early stopping watched the last metric (auc) of the last set, and
    # predict without iteration_range used every round
    auc = ours["history"]["valid"]["auc"]
    assert ours["score"] == auc[ours["best"]] == max(auc)
    assert ours["rounds"] == ours["best"] + 11
    assert not np.array_equal(ours["every"], ours["proba"])
    # a range starting past 0 is the slice's prediction, as in XGBoost
    np.testing.assert_array_equal(ours["middle"], ours["sliced"])
    np.testing.assert_allclose(theirs["middle"], theirs["sliced"], rtol=1e-6)
    assert list(ours["frame"].columns) == list(theirs["frame"].columns)
    assert ours["dump"][0].startswith("0:[") and "gain=" in ours["dump"][0]
    assert set(ours["gain"]) <= {f"f{i}" for i in range(30)}


def test_lightgbm_sklearn_script(binary: dict[str, Any]) -> None:
    theirs = _run(LGB_SKLEARN, {**binary})
    ours = _run(_for_sapwood(LGB_SKLEARN, 1), {**binary})
    _comparable(
        roc_auc_score(binary["y_test"], ours["proba"]),
        roc_auc_score(binary["y_test"], theirs["proba"]),
        "LGBMClassifier script",
    )
    assert ours["importances"].shape == theirs["importances"].shape == (11,)
    assert ours["names"] == theirs["names"]
    assert 10 < ours["rounds"] < 300


def test_lightgbm_learning_api_script(binary: dict[str, Any]) -> None:
    theirs = _run(LGB_LEARNING_API, {**binary})
    ours = _run(_for_sapwood(LGB_LEARNING_API, 1), {**binary})
    _comparable(
        roc_auc_score(binary["y_test"], ours["proba"]),
        roc_auc_score(binary["y_test"], theirs["proba"]),
        "lgb.train script",
    )
    # the metrics under Sapwood's names (README), one value per round
    assert set(ours["record"]["valid"]) == {"logloss", "auc"}
    assert len(ours["record"]["valid"]["auc"]) == ours["bst"].num_boosted_rounds()
    assert ours["split"].shape == theirs["split"].shape == (11,)


# ---- parameters ---------------------------------------------------------------------


def test_kwargs_reach_the_engine_and_survive_clone_and_pickle(binary: dict[str, Any]) -> None:
    F, y = binary["F_train"], binary["y_train"]
    clf = SapwoodClassifier(n_estimators=20, min_category_count=5, cat_smooth=3.0, num_leaves=7,
                            grow_policy="lossguide", max_depth=-1)
    assert clf.get_params()["cat_smooth"] == 3.0 and clf.get_params()["num_leaves"] == 7
    twin = clone(clf)
    assert twin.get_params() == clf.get_params() and twin is not clf
    twin.set_params(cat_smooth=5.0, lambda_l1=0.5)
    assert twin.get_params()["cat_smooth"] == 5.0 and twin.get_params()["lambda_l1"] == 0.5
    assert clf.get_params()["cat_smooth"] == 3.0
    clf.fit(F, y)
    import json

    saved = json.loads(clf.get_booster().to_json())["params"]
    assert saved["min_category_count"] == 5 and saved["cat_smooth"] == 3.0
    assert saved["max_leaves"] == 7 and saved["max_depth"] == 0
    # the same model by the engine's own names
    direct = sapwood.train(
        {"objective": "binary:logistic", "min_category_count": 5, "cat_smooth": 3.0,
         "max_leaves": 7, "grow_policy": "lossguide", "max_depth": 0},
        sapwood.Dataset(F, label=y), 20,
    )
    np.testing.assert_array_equal(clf.predict_proba(F)[:, 1], direct.predict(F))
    again = pickle.loads(pickle.dumps(clf))
    assert again.get_params() == clf.get_params()
    # typos are caught when fitting, with the engine's message
    with pytest.raises(sapwood.ParameterError, match="^unknown parameter `cat_smoth`; did you mean `cat_smooth`\\?$"):
        SapwoodClassifier(cat_smoth=1.0).fit(F, y)
    with pytest.raises(sapwood.ParameterError, match="given twice, as `max_leaves` and as `num_leaves`"):
        SapwoodClassifier(max_leaves=5, num_leaves=7).fit(F, y)


def test_objective_names_of_both_peers() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    a = SapwoodClassifier(n_estimators=5, objective="binary").fit(X, y)
    b = SapwoodClassifier(n_estimators=5, objective="binary:logistic").fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with pytest.raises(sapwood.ParameterError, match="`objective`.*use SapwoodClassifier"):
        SapwoodRegressor(objective="binary:logistic").fit(X, y)
    with pytest.raises(sapwood.ParameterError, match="`objective`.*use SapwoodRegressor"):
        SapwoodClassifier(objective="reg:squarederror").fit(X, y)
    Xi, yi = load_iris(return_X_y=True)
    with pytest.raises(sapwood.ParameterError, match="`objective`: binary.*has 3"):
        SapwoodClassifier(objective="binary").fit(Xi, yi)
    m = SapwoodClassifier(n_estimators=5, objective="multiclass").fit(Xi, yi)
    assert m.get_booster().objective == "multi:softprob" and m.predict_proba(Xi).shape == (150, 3)
    r = SapwoodRegressor(n_estimators=5, objective="regression").fit(Xi, yi.astype(float))
    assert r.get_booster().objective == "reg:squarederror"


def test_alpha_means_what_lightgbm_means_beside_its_objective_names() -> None:
    """``objective="quantile", alpha=0.9`` is LightGBM's 0.9 quantile (it used to be read as
    XGBoost's L1 penalty: the median was fitted, coverage 0.51), and LightGBM's own code
    path, run side by side, covers the same; with XGBoost's objective name ``alpha`` stays
    its L1 penalty; the two readings at once are refused, naming both."""
    import lightgbm as lgb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 4))
    y = X[:, 0] + rng.normal(size=3000) * (1 + np.abs(X[:, 1]))
    ours = SapwoodRegressor(objective="quantile", alpha=0.9, n_estimators=60).fit(X, y)
    peer = lgb.LGBMRegressor(objective="quantile", alpha=0.9, n_estimators=60, verbose=-1)
    peer.fit(X, y)
    coverage = [float(np.mean(y <= m.predict(X))) for m in (ours, peer)]
    assert abs(coverage[0] - 0.9) < 0.03 and abs(coverage[0] - coverage[1]) < 0.03, coverage
    import json

    saved = json.loads(ours.get_booster().to_json())["params"]
    assert (saved["quantile_alpha"], saved["alpha"]) in (([0.9], 0.0), (0.9, 0.0)), saved
    b = sapwood.train({"objective": "quantile", "alpha": 0.1, "reg_alpha": 2.0},
                      sapwood.Dataset(X, label=y), 40, verbose_eval=False)
    assert abs(float(np.mean(y <= b.predict(X))) - 0.1) < 0.03
    # XGBoost's spelling of the objective: alpha is the L1 penalty, the quantile its own
    x = sapwood.train({"objective": "reg:quantileerror", "alpha": 0.9},
                      sapwood.Dataset(X, label=y), 40, verbose_eval=False)
    assert abs(float(np.mean(y <= x.predict(X))) - 0.5) < 0.03
    with pytest.raises(sapwood.ParameterError, match=r"`alpha`.*quantile_alpha.*L1"):
        SapwoodRegressor(objective="quantile", alpha=0.9, quantile_alpha=0.5).fit(X, y)


def test_feature_importances_mean_what_xgboosts_estimators_mean() -> None:
    """``importance_type="gain"`` is average gain over a feature's splits, normalised, as in
    XGBoost's estimators (it was total gain, which ranks features differently): checked
    against XGBoost's own estimator and booster side by side, for every type."""
    import xgboost as xgb

    X, y = load_breast_cancer(return_X_y=True)
    for kind in ("gain", "total_gain", "weight", "cover", "total_cover"):
        peer = xgb.XGBClassifier(n_estimators=20, importance_type=kind).fit(X, y)
        ours = SapwoodClassifier(n_estimators=20, importance_type=kind).fit(X, y)
        for model in (peer, ours):
            score = model.get_booster().get_score(importance_type=kind)
            names = model.get_booster().feature_names or [f"f{i}" for i in range(X.shape[1])]
            want = np.array([score.get(n, 0.0) for n in names])
            np.testing.assert_allclose(model.feature_importances_, want / want.sum(), rtol=1e-6,
                                       err_msg=f"{type(model).__name__} {kind}")
    # LightGBM's `split` is XGBoost's `weight`
    a = SapwoodClassifier(n_estimators=20, importance_type="split").fit(X, y)
    b = SapwoodClassifier(n_estimators=20, importance_type="weight").fit(X, y)
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    # average and total gain differ here, so the comparison above has teeth
    g = SapwoodClassifier(n_estimators=20, importance_type="gain").fit(X, y).feature_importances_
    t = SapwoodClassifier(n_estimators=20, importance_type="total_gain").fit(X, y).feature_importances_
    assert np.max(np.abs(g - t)) > 0.01


def test_multiclass_probabilities_sum_to_one_for_scikit_learns_metrics() -> None:
    """Each row of ``predict_proba`` sums to 1 within float64's rounding, so scikit-learn's
    ``log_loss`` takes it without "The y_prob values do not sum to one" (the engine's float32
    probabilities summed to 1 within 4.4e-8 only)."""
    from sklearn.metrics import log_loss

    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    X = X + rng.normal(scale=0.3, size=X.shape)
    p = SapwoodClassifier(n_estimators=30).fit(X, y).predict_proba(X)
    assert p.dtype == np.float64
    assert np.max(np.abs(p.sum(axis=1) - 1.0)) <= 4 * np.finfo(np.float64).eps
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_loss(y, p)


def test_num_leaves_alone_says_that_trees_still_grow_depth_wise() -> None:
    """``num_leaves=63`` alone (LightGBM's habit) keeps depth-wise growth at depth 6; one
    warning says so and how to grow LightGBM's leaf-wise trees, which then have the leaves
    LightGBM's own estimator grows side by side."""
    import lightgbm as lgb

    from sapwood import _params

    X, y = load_breast_cancer(return_X_y=True)
    _params._warned.discard("num_leaves")
    with pytest.warns(UserWarning, match=r"num_leaves=7.*depth-wise.*lossguide"):
        SapwoodClassifier(n_estimators=3, num_leaves=7).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _params._warned.discard("num_leaves")
        ours = SapwoodClassifier(n_estimators=3, num_leaves=7, grow_policy="lossguide",
                                 max_depth=-1).fit(X, y)
    peer = lgb.LGBMClassifier(n_estimators=3, num_leaves=7, verbose=-1).fit(X, y)
    leaves = [t["num_leaves"] for t in peer.booster_.dump_model()["tree_info"]]
    ours_leaves = [int((ours.get_booster().trees_to_dataframe().query(f"Tree == {i}")["Feature"]
                        == "Leaf").sum()) for i in range(3)]
    assert ours_leaves == leaves == [7, 7, 7], (ours_leaves, leaves)


def test_lightgbm_evaluation_code_runs_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    """LightGBM's evaluation habits, its own estimator side by side: ``eval_X``/``eval_y``
    (LightGBM 4.7), ``evals_result_["valid_0"]["binary_logloss"]`` and
    ``best_score_``, and ``early_stopping`` printing the best iteration when it stops."""
    import lightgbm as lgb

    X, y = load_breast_cancer(return_X_y=True)
    Xt, yt, Xv, yv = X[:400], y[:400], X[400:], y[400:]
    peer = lgb.LGBMClassifier(n_estimators=300, learning_rate=0.3, verbose=-1)
    ours = SapwoodClassifier(n_estimators=300, learning_rate=0.3)
    lines = {}
    for model, stopper in ((peer, lgb.early_stopping(10)), (ours, sapwood.early_stopping(10))):
        model.fit(Xt, yt, eval_X=(Xv,), eval_y=(yv,), eval_metric="binary_logloss",
                  callbacks=[stopper])
        curve = model.evals_result_["valid_0"]["binary_logloss"]
        assert 10 < len(curve) < 300
        assert 0 < model.best_score_["valid_0"]["binary_logloss"] < 0.3
        assert "valid_0" in model.evals_result_
        lines[model is ours] = capsys.readouterr().out
    assert lines[True].startswith("Early stopping, best iteration is:\n["), lines
    assert "valid_0" in lines[False] and "binary_logloss" in lines[False], lines
    best = ours.get_booster().best_iteration
    assert f"[{best + 1}]\tvalidation_0's logloss: " in lines[True], lines
    # LightGBM's rounds after early stopping: num_iteration None is the best iteration,
    # <= 0 every round, and start_iteration alone every round from there (LightGBM keeps
    # only the rounds up to the best, so there "every round" is the best iteration)
    for model in (peer, ours):
        best = model.predict(Xv, raw_score=True)
        every = model.predict(Xv, raw_score=True, num_iteration=-1)
        later = model.predict(Xv, raw_score=True, start_iteration=3)
        assert not np.allclose(later, every)
        assert np.allclose(best, every) == (model is peer)
    full = ours.get_booster().predict(Xv, output_margin=True)
    np.testing.assert_array_equal(ours.predict(Xv, raw_score=True, num_iteration=-1), full)
    np.testing.assert_array_equal(
        ours.predict(Xv, raw_score=True, start_iteration=3),
        ours.get_booster().predict(Xv, output_margin=True,
                                   iteration_range=(3, ours.get_booster().num_boosted_rounds())))
    # pred_contrib follows the rounds asked for too
    contrib = ours.predict(Xv, pred_contrib=True, num_iteration=4)
    np.testing.assert_allclose(contrib.sum(axis=1),
                               ours.predict(Xv, raw_score=True, num_iteration=4), atol=1e-5)
    # one set without the tuple, and the two spellings together refused
    ours.fit(Xt, yt, eval_X=Xv, eval_y=yv)
    assert list(ours.evals_result_) == ["validation_0"]
    with pytest.raises(sapwood.ParameterError, match="`eval_X`: given with `eval_set`"):
        ours.fit(Xt, yt, eval_X=Xv, eval_y=yv, eval_set=[(Xv, yv)])
    with pytest.raises(sapwood.ParameterError, match="`eval_X`: given without `eval_y`"):
        ours.fit(Xt, yt, eval_X=Xv)
    # the ranker takes them too, a frame's qid column giving the evaluation queries
    from sapwood import SapwoodRanker

    frame = pd.DataFrame(X[:, :5], columns=[f"c{i}" for i in range(5)])
    frame["qid"] = np.arange(len(X)) // 20
    rt, rv = frame.iloc[:400], frame.iloc[400:]
    ranker = SapwoodRanker(n_estimators=5).fit(rt, y[:400], eval_X=(rv,), eval_y=(y[400:],))
    assert len(ranker.evals_result_["valid_0"]["ndcg"]) == 5
    assert ranker.predict(rv, pred_leaf=True).shape == (len(rv), 5)


def test_estimator_methods_of_both_peers(tmp_path: Path) -> None:
    """``save_model``/``load_model`` and ``apply`` (XGBoost's estimators), ``raw_score``,
    ``pred_leaf``, ``num_iteration`` and ``start_iteration`` (LightGBM's), each checked
    against the peer's own estimator doing the same, or Sapwood's equivalent call."""
    import lightgbm as lgb
    import xgboost as xgb

    X, y = load_breast_cancer(return_X_y=True)
    ours = SapwoodClassifier(n_estimators=12).fit(X, y)
    booster = ours.get_booster()
    # XGBoost: save_model / load_model / apply, on both estimators side by side
    peer = xgb.XGBClassifier(n_estimators=12).fit(X, y)
    for model, cls in ((peer, xgb.XGBClassifier), (ours, SapwoodClassifier)):
        path = tmp_path / f"{cls.__name__}.json"
        model.save_model(path)
        back = cls()
        back.load_model(path)
        np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        np.testing.assert_array_equal(back.classes_, [0, 1])
        assert not hasattr(back, "feature_names_in_")
        assert model.apply(X).shape == (len(X), 12)
    np.testing.assert_array_equal(ours.apply(X), booster.predict(X, pred_leaf=True))
    reg = SapwoodRegressor(n_estimators=5).fit(X, y.astype(float))
    reg.save_model(tmp_path / "r.json")
    np.testing.assert_array_equal(SapwoodRegressor().load_model(tmp_path / "r.json").predict(X),
                                  reg.predict(X))
    with pytest.raises(sapwood.ParameterError, match="load it into SapwoodRegressor"):
        SapwoodClassifier().load_model(tmp_path / "r.json")
    # LightGBM: predict's raw_score, pred_leaf, num_iteration and start_iteration
    lgbm = lgb.LGBMClassifier(n_estimators=12, verbose=-1).fit(X, y)
    for model in (lgbm, ours):
        raw = model.predict(X, raw_score=True)
        assert raw.shape == (len(X),) and raw.min() < 0 < raw.max()
        np.testing.assert_array_equal(model.predict_proba(X, raw_score=True), raw)
        assert model.predict(X, pred_leaf=True).shape == (len(X), 12)
        first = model.predict(X, raw_score=True, num_iteration=4)
        later = model.predict(X, raw_score=True, start_iteration=4)
        assert not np.allclose(first, raw) and not np.allclose(later, raw)
    np.testing.assert_array_equal(ours.predict(X, raw_score=True),
                                  booster.predict(X, output_margin=True))
    np.testing.assert_array_equal(ours.predict(X, raw_score=True, num_iteration=4),
                                  booster.predict(X, output_margin=True, iteration_range=(0, 4)))
    np.testing.assert_array_equal(
        ours.predict(X, raw_score=True, start_iteration=4, num_iteration=3),
        booster.predict(X, output_margin=True, iteration_range=(4, 7)))
    np.testing.assert_array_equal(ours.predict(X, pred_leaf=True, num_iteration=4),
                                  booster.predict(X, pred_leaf=True, iteration_range=(0, 4)))
    with pytest.raises(sapwood.ParameterError, match="`num_iteration`: given with `iteration_range`"):
        ours.predict(X, num_iteration=3, iteration_range=(0, 3))
    # and LightGBM's Booster: num_iteration counts rounds from the first, <= 0 is every round
    lgb_booster = lgbm.booster_
    for n in (4, 0, -1):
        theirs = lgb_booster.predict(X, raw_score=True, num_iteration=n)
        mine = booster.predict(X, output_margin=True, num_iteration=n)
        assert mine.shape == theirs.shape
        full = n <= 0
        np.testing.assert_array_equal(
            mine, booster.predict(X, output_margin=True, iteration_range=(0, 0 if full else n)))
        assert np.allclose(theirs, lgb_booster.predict(X, raw_score=True)) == full
    with pytest.raises(sapwood.ParameterError, match="`num_iteration`: given with `iteration_range`"):
        booster.predict(X, num_iteration=3, iteration_range=(0, 3))


def test_scale_pos_weight_is_a_weight_on_the_positive_rows() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    w = np.where(y == 1, 3.0, 1.0)
    scaled = SapwoodClassifier(n_estimators=10, scale_pos_weight=3.0).fit(X, y)
    weighted = SapwoodClassifier(n_estimators=10).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(scaled.predict_proba(X), weighted.predict_proba(X))
    # the learning API, with class labels: the second class is the positive one
    labels = np.where(y == 1, "benign", "malignant")
    b = sapwood.train({"objective": "binary:logistic", "scale_pos_weight": 3.0},
                      sapwood.Dataset(X, label=labels), 10)
    c = sapwood.train({"objective": "binary:logistic"},
                      sapwood.Dataset(X, label=labels, weight=np.where(labels == "malignant", 3.0, 1.0)), 10)
    np.testing.assert_array_equal(b.predict(X), c.predict(X))
    # it moves probabilities up, as in XGBoost
    import xgboost as xgb

    plain = SapwoodClassifier(n_estimators=10).fit(X, y).predict_proba(X)[:, 1].mean()
    xplain = xgb.XGBClassifier(n_estimators=10, n_jobs=1).fit(X, y).predict_proba(X)[:, 1].mean()
    xscaled = xgb.XGBClassifier(n_estimators=10, n_jobs=1, scale_pos_weight=3.0).fit(X, y)
    assert scaled.predict_proba(X)[:, 1].mean() > plain
    assert xscaled.predict_proba(X)[:, 1].mean() > xplain
    with pytest.raises(sapwood.ParameterError, match="`scale_pos_weight`.*3 classes"):
        Xi, yi = load_iris(return_X_y=True)
        SapwoodClassifier(scale_pos_weight=2.0).fit(Xi, yi)
    with pytest.raises(sapwood.ParameterError, match="`scale_pos_weight`.*reg:squarederror"):
        sapwood.train({"scale_pos_weight": 2.0}, sapwood.Dataset(X, label=y), 2)


def test_class_weight_has_scikit_learns_meaning() -> None:
    X, y = load_iris(return_X_y=True)
    keep = np.r_[0:50, 50:70, 100:150]  # an unbalanced problem
    X, y = X[keep], y[keep]
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    for class_weight in ("balanced", {"setosa": 1.0, "versicolor": 4.0, "virginica": 0.5}):
        ours = SapwoodClassifier(n_estimators=10, class_weight=class_weight).fit(X, labels)
        expected = compute_sample_weight(class_weight, labels)
        manual = SapwoodClassifier(n_estimators=10).fit(X, labels, sample_weight=expected)
        np.testing.assert_allclose(ours.predict_proba(X), manual.predict_proba(X), rtol=1e-6)
    with pytest.raises(sapwood.ParameterError, match="`class_weight`"):
        SapwoodRegressor(class_weight="balanced").fit(X, y.astype(float))


def test_missing_sentinel_equals_nan() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(1)
    holes = rng.random(X.shape) < 0.05
    nan, sentinel = np.where(holes, np.nan, X), np.where(holes, -999.0, X)
    a = SapwoodClassifier(n_estimators=10).fit(nan, y).predict_proba(nan)
    b = SapwoodClassifier(n_estimators=10, missing=-999.0).fit(sentinel, y).predict_proba(sentinel)
    np.testing.assert_array_equal(a, b)
    frame = pd.DataFrame(sentinel)
    d = sapwood.Dataset(frame, label=y, missing=-999)
    m = sapwood.train({"objective": "binary:logistic"}, d, 10)
    np.testing.assert_array_equal(m.predict(nan), SapwoodClassifier(n_estimators=10).fit(nan, y).get_booster().predict(nan))
    # without the sentinel -999 is a number, and the model differs
    c = SapwoodClassifier(n_estimators=10).fit(sentinel, y).predict_proba(sentinel)
    assert not np.array_equal(a, c)


def test_max_depth_minus_one_means_no_limit() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    deep = SapwoodRegressor(n_estimators=1, max_depth=-1, num_leaves=64, grow_policy="lossguide").fit(X, y)
    frame = deep.get_booster().trees_to_dataframe()
    depth = {0: 0}
    for _, r in frame[frame.Feature != "Leaf"].iterrows():
        for child in (r.Yes, r.No):
            depth[int(child.split("-")[1])] = depth[int(r.Node)] + 1
    assert max(depth.values()) > 6  # deeper than the default depth
    assert (frame.Feature == "Leaf").sum() == 64
    with pytest.raises(sapwood.ParameterError, match="`max_depth`: -1.*num_leaves"):
        SapwoodRegressor(max_depth=-1).fit(X, y)


def test_peer_settings_warn_once_or_say_what_sapwood_does() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    d = sapwood.Dataset(X, label=y)
    from sapwood import _params

    _params._warned.clear()
    for setting in ({"tree_method": "hist"}, {"boosting_type": "gbdt"}, {"booster": "gbtree"},
                    {"verbosity": 0}, {"silent": True}):
        name = next(iter(setting))
        with pytest.warns(UserWarning, match=f"`{name}.*has no effect"):
            sapwood.train(setting, d, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once only
            sapwood.train(setting, d, 2)
    for setting, instead in (
        ({"tree_method": "exact"}, "histograms"),
        ({"boosting_type": "dart"}, "DART"),
        ({"boosting_type": "goss"}, "GOSS"),
        ({"booster": "gblinear"}, "linear"),
        ({"subsample": 0.5, "subsample_freq": 5}, "every round"),
    ):
        with pytest.raises(sapwood.ParameterError, match=f"`{list(setting)[-1]}`.*{instead}"):
            sapwood.train(setting, d, 2)
    # the estimators take them by keyword, with the same outcome
    with pytest.raises(sapwood.ParameterError, match="`tree_method`: `exact`"):
        SapwoodClassifier(tree_method="exact").fit(X, y)
    plain = SapwoodClassifier(n_estimators=5).fit(X, y).predict_proba(X)
    peer = SapwoodClassifier(n_estimators=5, tree_method="hist", booster="gbtree").fit(X, y)
    np.testing.assert_array_equal(peer.predict_proba(X), plain)


def test_fit_arguments_of_both_peers(capsys: pytest.CaptureFixture[str]) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, ytr, Xva, yva = X[:400], y[:400], X[400:], y[400:]
    seen: list[int] = []
    clf = SapwoodClassifier(n_estimators=30, eval_metric="logloss",
                            callbacks=[lambda info: seen.append(info.iteration)])
    clf.fit(Xtr, ytr, eval_set=[(Xtr, ytr), (Xva, yva)], eval_names=["fit", "holdout"],
            eval_metric=["auc", "error"], verbose=10,
            sample_weight_eval_set=[np.ones(400), np.full(len(yva), 2.0)])
    out = capsys.readouterr().out
    assert out.count("\n") == 4 and "holdout-auc" in out and "[10]" in out  # rounds 0, 10, 20, 29
    assert seen == list(range(30))
    assert set(clf.evals_result_) == {"fit", "holdout"}
    assert set(clf.evals_result_["holdout"]) == {"auc", "error"}  # fit's metrics win
    clf.fit(Xtr, ytr, eval_set=[(Xva, yva)], verbose=False)
    assert capsys.readouterr().out == ""
    # a callback stops training, from the constructor or from fit
    stop = SapwoodClassifier(n_estimators=30).fit(Xtr, ytr, callbacks=[lambda i: i.iteration == 4])
    assert stop.n_estimators_ == 5
    with pytest.raises(sapwood.ParameterError, match="`sample_weight_eval_set`"):
        clf.fit(Xtr, ytr, eval_set=[(Xva, yva)], eval_sample_weight=[None],
                sample_weight_eval_set=[None])
    # LightGBM's callbacks: early stopping and recording
    record: sapwood.EvalsResult = {}
    es = SapwoodClassifier(n_estimators=500, learning_rate=0.5).fit(
        Xtr, ytr, eval_set=[(Xva, yva)],
        callbacks=[sapwood.early_stopping(5), sapwood.record_evaluation(record)])
    assert es.best_iteration_ is not None and es.n_estimators_ == es.best_iteration_ + 6
    assert len(record["validation_0"]["logloss"]) == es.n_estimators_


def test_params_as_a_list_of_pairs() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    d = sapwood.Dataset(X, label=y)
    result: sapwood.EvalsResult = {}
    pairs = [("objective", "binary:logistic"), ("eval_metric", "auc"), ("eval_metric", "logloss")]
    b = sapwood.train(pairs, d, 5, evals=[(d, "train")], evals_result=result, verbose_eval=False)
    assert list(result["train"]) == ["auc", "logloss"]
    same = sapwood.train({"objective": "binary:logistic"}, d, 5)
    np.testing.assert_array_equal(b.predict(X), same.predict(X))
    with pytest.raises(sapwood.ParameterError, match="`params`: item 0"):
        sapwood.train([("eta",)], d, 2)  # type: ignore[list-item]


# ---- Booster ------------------------------------------------------------------------


def test_iteration_range_and_slicing_match_xgboost() -> None:
    import xgboost as xgb

    X, y = load_breast_cancer(return_X_y=True)
    b = sapwood.train({"objective": "binary:logistic", "max_depth": 3}, sapwood.Dataset(X, label=y), 20)
    # the model exported to XGBoost predicts the same margins for every range XGBoost takes
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/m.json"
        b[5:15].save_model(path, format="xgboost")
        xb = xgb.Booster(model_file=path)
    ours = b.predict(X, iteration_range=(5, 15), output_margin=True)
    dx = xgb.DMatrix(X, feature_names=b.feature_names)
    np.testing.assert_allclose(ours, xb.predict(dx, output_margin=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ours, b[5:15].predict(X, output_margin=True))
    np.testing.assert_array_equal(b.predict(X, iteration_range=(5, 15)), b[5:15].predict(X))
    # the parts of a split range add up to the whole (less the base score counted twice)
    whole = b.predict(X, output_margin=True)
    head = b.predict(X, iteration_range=(0, 5), output_margin=True)
    tail = b.predict(X, iteration_range=(5, 20), output_margin=True)
    only_base = head + tail - whole
    np.testing.assert_allclose(only_base, only_base[0], atol=1e-5)
    assert b[::2].num_boosted_rounds() == 10 and b[3].num_boosted_rounds() == 1
    assert b[:].to_json() != "" and b[-1].num_trees() == 1
    with pytest.raises(sapwood.ParameterError, match="iteration_range"):
        b.predict(X, iteration_range=(10, 5))
    with pytest.raises(sapwood.ParameterError, match="iteration_range"):
        b.predict(X, iteration_range=(0, 21))
    with pytest.raises(IndexError):
        b[20]
    # predict_proba takes it too
    clf = SapwoodClassifier(n_estimators=20, max_depth=3).fit(X, y)
    np.testing.assert_array_equal(
        clf.predict_proba(X, iteration_range=(5, 15))[:, 1],
        clf.get_booster()[5:15].predict(X),
    )


def test_trees_to_dataframe_get_dump_and_get_score_match_xgboost() -> None:
    import tempfile

    import xgboost as xgb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4))
    y = X[:, 0] * 2 + np.sin(X[:, 1])
    b = sapwood.train({"max_depth": 3}, sapwood.Dataset(X, label=y), 4)
    with tempfile.TemporaryDirectory() as tmp:
        b.save_model(f"{tmp}/m.json", format="xgboost")
        xb = xgb.Booster(model_file=f"{tmp}/m.json")
    ours, theirs = b.trees_to_dataframe(), xb.trees_to_dataframe()
    assert list(ours.columns) == list(theirs.columns)
    for column in ("Tree", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert ours[column].tolist() == theirs[column].tolist(), column
    np.testing.assert_allclose(ours["Split"], theirs["Split"], rtol=1e-7)
    np.testing.assert_allclose(ours["Cover"], theirs["Cover"], rtol=1e-6)
    # gains of splits; leaf values of the trees after the first (the export folds the base
    # score into the first tree's leaves)
    splits = ours.Feature != "Leaf"
    np.testing.assert_allclose(ours["Gain"][splits], theirs["Gain"][splits], rtol=1e-6)
    later = ~splits & (ours.Tree > 0)
    np.testing.assert_allclose(ours["Gain"][later], theirs["Gain"][later], rtol=1e-6)
    for kind in ("weight", "gain", "total_gain", "cover", "total_cover"):
        got, want = b.get_score(importance_type=kind), xb.get_score(importance_type=kind)
        assert set(got) == set(want), kind
        for f in got:
            assert got[f] == pytest.approx(want[f], rel=1e-6), (kind, f)
    dump, xdump = b.get_dump(with_stats=True), xb.get_dump(with_stats=True)
    assert len(dump) == len(xdump) == 4
    # the same nodes in the same order, with the same children and stats
    strip = lambda text: re.sub(r"[<=]+[-0-9.e]+|leaf=[-0-9.e]+|gain=[-0-9.e]+", "", text)  # noqa: E731
    assert [strip(t) for t in dump[1:]] == [strip(t) for t in xdump[1:]]
    assert "cover=" not in b.get_dump()[0]
    import json

    tree = json.loads(b.get_dump(dump_format="json", with_stats=True)[0])
    assert tree["split"] == "f0" and len(tree["children"]) == 2 and "gain" in tree


def test_best_score_and_best_iteration() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    dtr, dva = sapwood.Dataset(X[:400], label=y[:400]), sapwood.Dataset(X[400:], label=y[400:])
    result: sapwood.EvalsResult = {}
    b = sapwood.train({"objective": "binary:logistic", "eta": 0.5, "eval_metric": ["auc", "logloss"]},
                      dtr, 300, evals=[(dva, "valid")], early_stopping_rounds=5,
                      evals_result=result, verbose_eval=False)
    assert b.best_iteration is not None
    assert b.best_score == result["valid"]["logloss"][b.best_iteration] == min(result["valid"]["logloss"])
    again = pickle.loads(pickle.dumps(b))
    assert again.best_score == b.best_score
    assert sapwood.train({}, dtr, 3).best_score is None


# ---- messages -----------------------------------------------------------------------


def test_mixed_label_types_are_a_clear_error() -> None:
    X = np.arange(24.0).reshape(12, 2)
    with pytest.raises(sapwood.LabelError, match="mix types"):
        SapwoodClassifier(n_estimators=2).fit(X, np.array(["a", 1] * 6, dtype=object))
    with pytest.raises(sapwood.LabelError, match="eval_set 0.*labels are number but the training labels are str"):
        SapwoodClassifier(n_estimators=2).fit(X, ["a", "b"] * 6, eval_set=[(X, [0, 1] * 6)])


def test_n_estimators_zero_names_n_estimators() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(sapwood.ParameterError, match="^invalid parameter `n_estimators`: 0"):
        SapwoodClassifier(n_estimators=0).fit(X, y)
    with pytest.raises(sapwood.ParameterError, match="^invalid parameter `num_boost_round`"):
        sapwood.train({}, sapwood.Dataset(X, label=y), 0)
    with pytest.raises(sapwood.ParameterError, match="^invalid parameter `n_estimators`"):
        sapwood.train({"n_estimators": 0}, sapwood.Dataset(X, label=y))


def _documented(doc: str) -> set[str]:
    """Names documented in a numpydoc Parameters section (``name : type`` lines)."""
    return set(re.findall(r"^\s{0,8}(\w+) :", doc, flags=re.M))


def test_help_documents_every_argument_and_parameter() -> None:
    import inspect

    for fn in (sapwood.train, sapwood.early_stopping, sapwood.log_evaluation,
               sapwood.record_evaluation, sapwood.Booster.predict, sapwood.Booster.get_dump):
        doc = inspect.getdoc(fn) or ""
        args = [p for p in inspect.signature(fn).parameters if p != "self"]
        assert "Parameters\n----------" in doc, fn.__name__
        assert set(args) <= _documented(doc), (fn.__name__, set(args) - _documented(doc))
    # every engine parameter and alias appears in train's documentation
    doc = inspect.getdoc(sapwood.train) or ""
    for canonical, aliases in sapwood._sapwood.parameter_names():
        for name in (canonical, *aliases):
            assert f"{name}" in doc, name
    callback_doc = inspect.getdoc(sapwood.Callback) or ""
    assert "Parameters\n----------" in callback_doc and "info : RoundInfo" in callback_doc
    assert "Returns\n-------" in callback_doc
    assert {"iteration", "num_rounds", "evaluation", "elapsed"} <= _documented(
        inspect.getdoc(sapwood.RoundInfo) or ""
    )
    for est in (SapwoodClassifier, SapwoodRegressor):
        fit_doc = inspect.getdoc(est.fit) or ""
        fit_args = [p for p in inspect.signature(est.fit).parameters if p != "self"]
        assert set(fit_args) <= _documented(fit_doc), set(fit_args) - _documented(fit_doc)


# ---- the silent wrong result ------------------------------------------------------------


def test_integer_codes_for_a_text_category_raise_schema_mismatch() -> None:
    import lightgbm as lgb
    import xgboost as xgb

    rng = np.random.default_rng(0)
    colour = rng.choice(["blue", "green", "red"], size=400)
    x = rng.normal(size=400)
    y = (colour == "red") * 2.0 + x
    train = pd.DataFrame({"colour": pd.Categorical(colour), "x": x})
    codes = pd.DataFrame({"colour": train["colour"].cat.codes.astype("int64"), "x": x})
    model = SapwoodRegressor(n_estimators=10).fit(train, y)
    booster = model.get_booster()
    for predict in (model.predict, booster.predict):
        with pytest.raises(sapwood.SchemaMismatchError, match="`colour` holds numbers \\(0, 1, 2\\) but was trained as text categories \\(blue, green, red\\)"):
            predict(codes)
    with pytest.raises(sapwood.SchemaMismatchError, match="`colour`"):
        booster.predict(codes.to_numpy())
    with pytest.raises(sapwood.SchemaMismatchError, match="`colour`"):
        booster.predict(sapwood.Dataset(codes, categorical_features=["colour"]))
    # the peers refuse it too
    with pytest.raises(Exception):
        lgb.LGBMRegressor(n_estimators=5, verbose=-1).fit(train, y).predict(codes)
    with pytest.raises(Exception):
        xgb.XGBRegressor(n_estimators=5, enable_categorical=True).fit(train, y).predict(codes)
    # the text values themselves, as strings or categories in another order, predict alike
    as_text = pd.DataFrame({"colour": colour.astype(object), "x": x})
    np.testing.assert_array_equal(model.predict(as_text), model.predict(train))


def test_multi_softmax_predicts_class_indices_like_xgboost() -> None:
    import xgboost as xgb

    X, y = load_iris(return_X_y=True)
    d = sapwood.Dataset(X, label=y)
    softmax = sapwood.train({"objective": "multi:softmax", "max_depth": 3}, d, 10)
    softprob = sapwood.train({"objective": "multi:softprob", "max_depth": 3}, d, 10)
    theirs = xgb.train({"objective": "multi:softmax", "num_class": 3, "max_depth": 3},
                       xgb.DMatrix(X, label=y), 10).predict(xgb.DMatrix(X))
    ours = softmax.predict(X)
    assert ours.shape == theirs.shape == (150,)
    # the same trees as softprob (the same loss): the class of highest probability
    np.testing.assert_array_equal(ours, softprob.predict(X).argmax(axis=1))
    assert (ours == y).mean() > 0.95 and (theirs == y).mean() > 0.95
    assert softmax.predict(X, output_margin=True).shape == (150, 3)
    clf = SapwoodClassifier(n_estimators=10, max_depth=3, objective="multi:softmax")
    names = np.array(["a", "b", "c"])
    clf.fit(X, names[y])
    assert (clf.predict(X) == names[softprob.predict(X).argmax(axis=1)]).all()
    np.testing.assert_allclose(clf.predict_proba(X), softprob.predict(X), rtol=1e-5, atol=1e-6)
