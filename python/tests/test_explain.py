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
