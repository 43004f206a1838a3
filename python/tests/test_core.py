"""The low-level API: Dataset, train, Booster."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import sapwood


def _booster(X: np.ndarray, y: np.ndarray, **kw: object) -> sapwood.Booster:
    return sapwood.train({"eta": 0.1, "max_depth": 4}, sapwood.Dataset(X, label=y), 30, verbose_eval=False, **kw)  # type: ignore[arg-type]


def test_train_predict_shapes(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    b = _booster(X, y)
    p = b.predict(X)
    assert p.shape == (len(X),) and p.dtype == np.float32
    assert np.corrcoef(p, y)[0, 1] > 0.95
    assert b.num_trees() == 30 and b.num_boosted_rounds() == 30
    assert b.feature_names == [f"f{i}" for i in range(6)]
    assert b.best_iteration is None
    assert b.objective == "reg:squarederror"


def test_multiclass_probabilities_and_string_classes() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    names = np.array(["ant", "bee", "cat"])
    y = names[np.argmax(X, axis=1)]
    b = sapwood.train({"objective": "multi:softprob"}, sapwood.Dataset(X, label=y), 20)
    p = b.predict(X)
    assert p.shape == (300, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    assert b.classes == ["ant", "bee", "cat"]
    assert (names[p.argmax(axis=1)] == y).mean() > 0.9
    assert b.num_trees() == 60


def test_output_margin_and_iteration_range(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    yb = (y > 0).astype(np.float32)
    b = sapwood.train({"objective": "binary:logistic"}, sapwood.Dataset(X, label=yb), 20)
    margin = b.predict(X, output_margin=True)
    np.testing.assert_allclose(1 / (1 + np.exp(-margin)), b.predict(X), rtol=1e-5, atol=1e-6)
    first5 = b.predict(X, iteration_range=(0, 5))
    b5 = sapwood.train({"objective": "binary:logistic"}, sapwood.Dataset(X, label=yb), 5)
    np.testing.assert_array_equal(first5, b5.predict(X))
    np.testing.assert_array_equal(b.predict(X, iteration_range=(0, 0)), b.predict(X))
    with pytest.raises(sapwood.ParameterError, match="iteration_range"):
        b.predict(X, iteration_range=(0, 50))


def test_early_stopping_history_and_verbose(
    regression_data: tuple[np.ndarray, np.ndarray], capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = regression_data
    dtrain = sapwood.Dataset(X[:400], label=y[:400])
    dvalid = sapwood.Dataset(X[400:], label=y[400:])
    result: sapwood.EvalsResult = {}
    b = sapwood.train(
        {"eta": 0.5, "eval_metric": ["rmse", "mae"]},
        dtrain,
        500,
        evals=[(dtrain, "train"), (dvalid, "valid")],
        early_stopping_rounds=5,
        verbose_eval=10,
        evals_result=result,
    )
    assert b.best_iteration is not None and b.num_boosted_rounds() < 500
    assert b.num_boosted_rounds() == b.best_iteration + 6
    assert set(result) == {"train", "valid"} and set(result["valid"]) == {"rmse", "mae"}
    assert len(result["valid"]["mae"]) == b.num_boosted_rounds()
    assert b.evals_result() == result
    best = int(np.argmin(result["valid"]["mae"]))
    assert best == b.best_iteration
    # as in XGBoost, Booster.predict uses every round unless told otherwise (the
    # estimators use the best iteration); (0, 0) is every round too
    every = sapwood.train({"eta": 0.5}, dtrain, b.num_boosted_rounds()).predict(X)
    np.testing.assert_array_equal(b.predict(X), every)
    np.testing.assert_array_equal(b.predict(X, iteration_range=(0, 0)), every)
    assert not np.array_equal(b.predict(X, iteration_range=(0, best + 1)), every)
    out = capsys.readouterr().out
    assert out.startswith("[0]\ttrain-rmse:") and "\n[10]\t" in out


def test_callbacks_see_rounds_and_can_stop(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    seen: list[sapwood.RoundInfo] = []

    def cb(info: sapwood.RoundInfo) -> bool:
        seen.append(info)
        return info.iteration == 6

    d = sapwood.Dataset(X, label=y)
    b = sapwood.train({}, d, 50, evals=[(d, "train")], callbacks=[cb], verbose_eval=False)
    assert b.num_boosted_rounds() == 7 and b.interrupted
    assert [s.iteration for s in seen] == list(range(7))
    assert set(seen[0].evaluation["train"]) == {"rmse"}

    def boom(info: sapwood.RoundInfo) -> None:
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        sapwood.train({}, d, 50, callbacks=[boom])


def test_save_load_json_pickle(tmp_path: Path, regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    b = _booster(X, y)
    path = tmp_path / "model.json"
    b.save_model(path)
    loaded = sapwood.Booster(model_file=path)
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))
    assert sapwood.Booster().load_model(str(path)).to_json() == b.to_json()
    assert sapwood.Booster.from_json(b.to_json().encode()).to_json() == b.to_json()
    state = b.__getstate__()
    assert isinstance(state["model"], bytes)  # the model travels as JSON bytes
    again = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(again.predict(X), b.predict(X))


def test_feature_importance(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    b = _booster(X, y)
    for kind in ("gain", "split", "cover"):
        imp = b.feature_importance(kind)
        assert imp.shape == (6,) and (imp >= 0).all() and imp.sum() > 0
    gain = b.feature_importance("gain")
    assert gain.argmax() == 0  # y depends most on f0
    assert set(b.get_score("split")) <= set(b.feature_names)
    with pytest.raises(sapwood.ParameterError, match="importance_type"):
        b.feature_importance("bogus")


def test_same_model_for_any_thread_count(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    d = sapwood.Dataset(X, label=y)
    one = sapwood.train({"n_jobs": 1}, d, 20).to_json()
    two = sapwood.train({"nthread": 2}, d, 20).to_json()
    assert one == two
