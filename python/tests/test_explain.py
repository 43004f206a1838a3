"""Explanations from Python: SHAP contributions, interactions, leaf indices and importance
kinds, with XGBoost's and LightGBM's argument names and layouts."""

from __future__ import annotations

import numpy as np
import pytest

import sapwood


def _data(n: int = 400, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[rng.random(n) < 0.1, 3] = np.nan
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + 0.1 * rng.normal(size=n)
    return X, y.astype(np.float32)


def test_contributions_sum_to_the_margin_in_xgboost_layout() -> None:
    X, y = _data()
    b = sapwood.train({"max_depth": 4}, sapwood.Dataset(X, label=y), 25)
    c = b.predict(X, pred_contribs=True)
    assert c.shape == (len(X), 6) and c.dtype == np.float32
    np.testing.assert_allclose(c.sum(axis=1), b.predict(X, output_margin=True), rtol=1e-5, atol=1e-5)
    # features the model never splits on get nothing
    used = set(b.get_score("weight"))
    for j, name in enumerate(b.feature_names):
        if name not in used:
            assert np.all(c[:, j] == 0.0)
    inter = b.predict(X[:20], pred_interactions=True)
    assert inter.shape == (20, 6, 6)
    np.testing.assert_allclose(inter.sum(axis=2), c[:20], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inter[:, :5, :5], inter[:, :5, :5].transpose(0, 2, 1), atol=1e-6)


def test_multiclass_contributions_have_a_class_axis_and_leaves_one_column_per_tree() -> None:
    X, _ = _data(300)
    y = np.argmax(X[:, :3], axis=1)
    b = sapwood.train({"objective": "multi:softprob", "max_depth": 3}, sapwood.Dataset(X, label=y), 8)
    c = b.predict(X, pred_contribs=True)
    assert c.shape == (300, 3, 6)
    np.testing.assert_allclose(c.sum(axis=2), b.predict(X, output_margin=True), rtol=1e-5, atol=1e-5)
    leaves = b.predict(X, pred_leaf=True)
    assert leaves.shape == (300, b.num_trees())
    assert np.all(leaves == np.round(leaves)) and leaves.min() >= 0


def test_sklearn_pred_contrib_follows_lightgbm() -> None:
    X, y = _data()
    reg = sapwood.SapwoodRegressor(n_estimators=20, max_depth=3).fit(X, y)
    c = reg.predict(X, pred_contrib=True)
    assert c.shape == (len(X), 6)
    np.testing.assert_allclose(c.sum(axis=1), reg.predict(X), rtol=1e-5, atol=1e-5)
    yc = (y > np.median(y)).astype(int)
    clf = sapwood.SapwoodClassifier(n_estimators=20, max_depth=3).fit(X, yc)
    assert clf.predict(X, pred_contrib=True).shape == (len(X), 6)


def test_one_explanation_at_a_time() -> None:
    X, y = _data(100)
    b = sapwood.train({}, sapwood.Dataset(X, label=y), 3)
    with pytest.raises(sapwood.ParameterError, match="pred_"):
        b.predict(X, pred_contribs=True, pred_leaf=True)


def test_importance_kinds_follow_xgboost_and_lightgbm_names() -> None:
    X, y = _data()
    b = sapwood.train({"max_depth": 4}, sapwood.Dataset(X, label=y), 25)
    weight, gain, total_gain = b.get_score("weight"), b.get_score("gain"), b.get_score("total_gain")
    cover, total_cover = b.get_score("cover"), b.get_score("total_cover")
    assert set(weight) == set(gain) == set(total_gain) == set(cover) == set(total_cover)
    for f in weight:
        assert weight[f] == int(weight[f]) >= 1
        assert gain[f] == pytest.approx(total_gain[f] / weight[f])
        assert cover[f] == pytest.approx(total_cover[f] / weight[f])
    assert b.get_score("split") == weight
    # LightGBM's names: split counts and total gain, in feature order
    names = b.feature_names
    np.testing.assert_allclose(b.feature_importance("split"), [weight.get(n, 0.0) for n in names])
    np.testing.assert_allclose(b.feature_importance("gain"), [total_gain.get(n, 0.0) for n in names])


def test_checkpoints_resume_to_the_same_model_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = _data(1500)
    Xv, yv = _data(400, seed=4)
    params = {"eta": 0.3, "subsample": 0.8, "colsample_bytree": 0.8, "seed": 5}
    dtrain, dvalid = sapwood.Dataset(X, label=y), sapwood.Dataset(Xv, label=yv)
    evals = [(dvalid, "valid")]
    ck = tmp_path / "ck.json"
    whole = sapwood.train(params, dtrain, 30, evals=evals, early_stopping_rounds=5,
                          verbose_eval=False, checkpoint=ck, checkpoint_every=4)
    assert ck.exists()
    # stop early by a callback, leaving a checkpoint behind, then resume from it
    partial = tmp_path / "partial.json"
    sapwood.train(params, dtrain, 30, evals=evals, early_stopping_rounds=5, verbose_eval=False,
                  checkpoint=partial, checkpoint_every=2,
                  callbacks=[lambda info: info.iteration >= 5])
    resumed = sapwood.train(params, dtrain, 30, evals=evals, early_stopping_rounds=5,
                            verbose_eval=False, resume=partial)
    assert resumed.to_json() == whole.to_json()
    with pytest.raises(sapwood.SapwoodError, match="another job"):
        sapwood.train({**params, "seed": 6}, dtrain, 30, evals=evals, early_stopping_rounds=5,
                      verbose_eval=False, resume=partial)


# ---- SHAP's own TreeExplainer ----------------------------------------------------------


def test_shaps_tree_explainer_gives_pred_contribs_beside_xgboosts() -> None:
    """``sapwood.TreeExplainer(model)`` is SHAP's own explainer (``shap.TreeExplainer``
    refuses Sapwood models by type): its values equal ``pred_contribs`` and
    ``pred_interactions`` within the README's SHAP tolerance, and its outputs have the
    shapes and types SHAP gives for an XGBoost model of the same data, side by side."""
    shap = pytest.importorskip("shap")
    xgb = pytest.importorskip("xgboost")

    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 5)).astype(np.float32)
    X[::9, 2] = np.nan  # missing values take each split's default side
    y = (X[:, 0] + np.nan_to_num(X[:, 2]) + 0.3 * rng.normal(size=600) > 0).astype(int)
    booster = sapwood.train({"objective": "binary:logistic", "max_depth": 4},
                            sapwood.Dataset(X, label=y), 20)
    peer = shap.TreeExplainer(xgb.train({"objective": "binary:logistic", "max_depth": 4},
                                        xgb.DMatrix(X, label=y), 20))
    ours = sapwood.TreeExplainer(booster)
    values = ours.shap_values(X)
    contribs = booster.predict(X, pred_contribs=True)
    assert values.shape == peer.shap_values(X).shape == (600, 5)
    assert np.max(np.abs(values - contribs[:, :-1])) <= 4.2e-7
    assert np.ndim(ours.expected_value) == np.ndim(peer.expected_value) == 0
    assert abs(ours.expected_value - float(contribs[0, -1])) <= 4.2e-7
    inter = ours.shap_interaction_values(X[:40])
    assert inter.shape == peer.shap_interaction_values(X[:40]).shape == (40, 5, 5)
    np.testing.assert_allclose(inter, booster.predict(X[:40], pred_interactions=True)[:, :-1, :-1],
                               atol=1e-6)
    explanation = ours(X)
    assert explanation.values.shape == (600, 5)
    np.testing.assert_allclose(explanation.base_values, contribs[:, -1], atol=4.2e-7)


def test_tree_explainer_of_estimators_multiclass_and_categoricals() -> None:
    shap = pytest.importorskip("shap")
    pd = pytest.importorskip("pandas")
    from sklearn.datasets import load_iris

    from sapwood import SapwoodClassifier, SapwoodRegressor

    # multiclass: one column of values per class, as SHAP gives for the peers
    X, y = load_iris(return_X_y=True)
    clf = SapwoodClassifier(n_estimators=15).fit(X, y)
    values = sapwood.TreeExplainer(clf).shap_values(X)
    contribs = clf.get_booster().predict(X, pred_contribs=True)  # (n, classes, features + 1)
    assert values.shape == (150, 4, 3)
    assert np.max(np.abs(values - contribs[:, :, :-1].transpose(0, 2, 1))) <= 4.2e-7
    # an estimator after early stopping is explained at its best iteration, as it predicts
    rng = np.random.default_rng(1)
    Xr = rng.normal(size=(800, 4))
    yr = Xr[:, 0] + rng.normal(size=800)
    reg = SapwoodRegressor(n_estimators=300, learning_rate=0.3, early_stopping_rounds=5)
    reg.fit(Xr[:600], yr[:600], eval_set=[(Xr[600:], yr[600:])], verbose=False)
    best = reg.get_booster().best_iteration
    assert best is not None and best + 1 < reg.get_booster().num_boosted_rounds()
    explainer = sapwood.TreeExplainer(reg)
    total = explainer.shap_values(Xr).sum(axis=1) + explainer.expected_value
    np.testing.assert_allclose(total, reg.predict(Xr), atol=2e-5)
    # SHAP's tree format has no category sets: refused, naming what does explain them
    frame = pd.DataFrame({"c": pd.Categorical(rng.choice(list("abcd"), 800)), "x": Xr[:, 0]})
    cat = SapwoodRegressor(n_estimators=5).fit(frame, yr + (frame["c"] == "a") * 3)
    with pytest.raises(sapwood.ParameterError, match="categorical split.*pred_contribs"):
        sapwood.TreeExplainer(cat)
    del shap
