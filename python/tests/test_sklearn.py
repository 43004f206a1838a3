"""The scikit-learn estimators beyond scikit-learn's own checks."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from sklearn.base import ClassifierMixin, RegressorMixin, clone
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import cross_val_score

import sapwood
from sapwood import SapwoodClassifier, SapwoodRegressor


def test_binary_and_multiclass_with_any_label_type() -> None:
    X, y = load_iris(return_X_y=True)
    for labels in (y, np.array(["setosa", "versicolor", "virginica"])[y], y.astype(float)):
        clf = SapwoodClassifier(n_estimators=20).fit(X, labels)
        assert list(clf.classes_) == sorted(set(labels.tolist()))
        proba = clf.predict_proba(X)
        assert proba.shape == (150, 3)
        np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
        assert (clf.predict(X) == labels).mean() > 0.95
        assert clf.predict(X).dtype == labels.dtype
    Xb, yb = load_breast_cancer(return_X_y=True)
    for labels in (yb.astype(bool), np.where(yb == 1, "benign", "malignant")):
        clf = SapwoodClassifier(n_estimators=20).fit(Xb, labels)
        assert clf.get_booster().objective == "binary:logistic"
        assert clf.predict_proba(Xb).shape == (len(yb), 2)
        assert (clf.predict(Xb) == labels).mean() > 0.95


def test_eval_set_early_stopping_and_attributes() -> None:
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    Xtr, ytr, Xva, yva = X[:400], y[:400], X[400:], y[400:]
    clf = SapwoodClassifier(n_estimators=1000, learning_rate=0.3, early_stopping_rounds=10, eval_metric="logloss")
    clf.fit(Xtr, ytr, eval_set=[(Xva, yva)])
    assert clf.best_iteration_ is not None and clf.n_estimators_ < 1000
    assert list(clf.evals_result_) == ["validation_0"]
    assert clf.n_features_in_ == 30
    assert list(clf.feature_names_in_) == list(X.columns)
    imp = clf.feature_importances_
    assert imp.shape == (30,) and abs(imp.sum() - 1) < 1e-9
    assert clf.get_booster().feature_names == list(X.columns)
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(Xva[X.columns[::-1]])
    with pytest.raises(ValueError, match="features"):
        clf.predict(Xva.to_numpy()[:, :5])


def test_params_clone_pickle() -> None:
    reg = SapwoodRegressor(n_estimators=15, max_depth=3, n_jobs=1, random_state=3)
    assert reg.get_params()["max_depth"] == 3
    reg.set_params(max_depth=4)
    twin = clone(reg)
    assert twin.get_params() == reg.get_params()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = X[:, 0] * 3
    reg.fit(X, y)
    blob = pickle.dumps(reg)
    # the model travels as its JSON bytes (no code): the JSON text is inside the pickle
    assert reg.get_booster().to_json().encode() in blob
    again = pickle.loads(blob)
    np.testing.assert_array_equal(again.predict(X), reg.predict(X))
    np.testing.assert_array_equal(twin.fit(X, y).predict(X), reg.predict(X))
    scores = cross_val_score(SapwoodRegressor(n_estimators=20), X, y, cv=3)
    assert scores.mean() > 0.9


def test_dataframes_with_categories(mixed_frame: tuple[pd.DataFrame, np.ndarray]) -> None:
    frame, y = mixed_frame
    reg = SapwoodRegressor(n_estimators=30).fit(frame, y)
    p = reg.predict(frame)
    np.testing.assert_array_equal(reg.predict(pl.from_pandas(frame)), p)
    assert list(reg.feature_names_in_) == list(frame.columns)
    with pytest.raises(ValueError):
        reg.predict(frame.drop(columns="colour"))


def test_n_jobs_device_workers_reach_the_engine() -> None:
    X = np.random.default_rng(0).normal(size=(50, 2))
    y = X[:, 0]
    one = SapwoodRegressor(n_estimators=5, n_jobs=1).fit(X, y)
    two = SapwoodRegressor(n_estimators=5, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(one.predict(X), two.predict(X))
    # the models are equal whatever the threads: the run record shows the setting arrived
    assert one.get_booster().run_record["threads_per_worker"] == [1]
    assert two.get_booster().run_record["threads_per_worker"] == [2]
    three = SapwoodRegressor(n_estimators=5, n_jobs=1, workers=3).fit(X, y)
    record = three.get_booster().run_record
    assert record["workers"] == 3 and record["threads_per_worker"] == [1, 1, 1]
    assert record["backends"] == ["cpu"] * 3
    with pytest.raises(sapwood.SapwoodError, match="`device`"):
        SapwoodRegressor(device="tpu").fit(X, y)
    with pytest.raises(sapwood.SapwoodError, match="`workers`"):
        SapwoodRegressor(workers=0).fit(X, y)


def test_bad_inputs() -> None:
    X = np.zeros((6, 2))
    with pytest.raises(sapwood.LabelError, match="NaN"):
        SapwoodRegressor().fit(X, [1, 2, np.nan, 4, 5, 6])
    with pytest.raises(ValueError, match="two classes"):
        SapwoodClassifier().fit(X, [1] * 6)
    with pytest.raises(ValueError):
        SapwoodRegressor().fit(X, [1, 2, 3])
    # any engine parameter is a keyword; unknown names are refused by fit, by name
    with pytest.raises(sapwood.ParameterError, match="^unknown parameter `bogus`$"):
        SapwoodRegressor(bogus=1).fit(X, np.arange(6.0))
    with pytest.raises(sapwood.ParameterError, match="grow_policy"):
        SapwoodRegressor(grow_policy="sideways").fit(X, np.arange(6.0))
    clf = SapwoodClassifier(n_estimators=2).fit(np.arange(12.0).reshape(6, 2), [0, 1] * 3)
    with pytest.raises(sapwood.LabelError, match="not in the training labels"):
        SapwoodClassifier(n_estimators=2).fit(X, [0, 1] * 3, eval_set=[(X, [0, 1, 2] * 2)])
    assert clf.predict(X).shape == (6,)


def test_sklearn_estimators_exported() -> None:
    # `from sapwood import SapwoodRegressor` and `sapwood.SapwoodRegressor` both go through
    # sapwood's lazy __getattr__, so comparing them would compare an object with itself:
    # check instead, in a fresh interpreter, that importing sapwood does not import
    # scikit-learn and that the names resolve to the classes defined in sapwood.sklearn
    import subprocess
    import sys

    code = (
        "import sys, sapwood\n"
        "assert 'sklearn' not in sys.modules and 'sapwood.sklearn' not in sys.modules\n"
        "import sapwood.sklearn as sk\n"
        "for name in ('SapwoodRegressor', 'SapwoodClassifier', 'SapwoodRanker'):\n"
        "    cls = getattr(sapwood, name)\n"
        "    assert cls.__module__ == 'sapwood.sklearn' and cls is getattr(sk, name)\n"
        "    assert name in sapwood.__all__\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    est: Any = sapwood.SapwoodRegressor
    assert issubclass(est, RegressorMixin) and not issubclass(est, ClassifierMixin)
    assert issubclass(SapwoodClassifier, ClassifierMixin)
    ranker: Any = sapwood.SapwoodRanker
    assert not issubclass(ranker, (RegressorMixin, ClassifierMixin))
    with pytest.raises(AttributeError, match="SapwoodForest"):
        sapwood.SapwoodForest  # noqa: B018
