"""The scikit-learn regressor and classifier choose their rounds, and whether a leaf must
hold 20 rows, when ``n_estimators`` is not given: on held-out rows, by the documented
procedure, the same on every worker count."""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np
import pytest

import sapwood
from sapwood import SapwoodClassifier, SapwoodRanker, SapwoodRegressor
from sapwood.core import _make_folds, _subset


def smooth(n: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3] + noise * rng.normal(size=n)
    return X, y


def reference(
    params: list[tuple[str, Any]], dtrain: sapwood.Dataset, folds: list, leaf_rows: list,
    higher: bool = False,
) -> tuple[int, Optional[int]]:
    """The documented choice: for each leaf minimum, held-out fits of at most 1000 rounds
    with patience 20; the better mean held-out score wins (the lower loss, or the higher
    score where `higher`; the first on a tie), its mean best round count grown by 1.1."""
    sign = -1.0 if higher else 1.0
    best = None
    for leaves in leaf_rows:
        extra = [] if leaves is None else [("min_child_samples", leaves)]
        rounds, scores = [], []
        for fit_rows, held in folds:
            b = sapwood.train(
                [*params, *extra, ("n_estimators", 1000)], _subset(dtrain, fit_rows),
                evals=[(_subset(dtrain, held), "held")], early_stopping_rounds=20,
                verbose_eval=False,
            )
            rounds.append(b.best_iteration + 1)
            scores.append(b.best_score)
        if best is None or sign * np.mean(scores) < best[0]:
            best = (sign * np.mean(scores), round(np.mean(rounds) * 1.1), leaves)
    assert best is not None
    return best[1], best[2]


def leaf_rows_of(model: Any) -> int:
    return int(json.loads(model.get_booster().to_json())["params"]["min_data_in_leaf"])


def test_a_small_table_takes_the_mean_of_five_folds() -> None:
    X, y = smooth(3000, 0.3)
    model = SapwoodRegressor(random_state=7).fit(X, y)
    dtrain = sapwood.Dataset(X, label=y)
    folds = _make_folds(dtrain, 5, False, None, True, 7)
    rounds, leaves = reference([], dtrain, folds, [None, 20])
    assert (model.n_estimators_, leaf_rows_of(model)) == (rounds, leaves or 0)
    # the choice is not the peers' 100: a smooth target at 0.1 wants more
    assert model.n_estimators_ > 150
    # the final model is trained on every row with that setting
    extra = {} if leaves is None else {"min_child_samples": leaves}
    whole = sapwood.train({"n_estimators": rounds, "seed": 7, **extra}, dtrain)
    assert np.array_equal(model.predict(X), whole.predict(dtrain))


def test_small_leaves_that_overfit_are_bounded_and_ones_that_fit_are_not() -> None:
    # few rows, a plain signal under heavy-tailed noise: leaves of a row or two fit the
    # noise's outliers
    rng = np.random.default_rng(8)
    X = rng.normal(size=(400, 6))
    y = X[:, 0] + rng.standard_t(2, size=400)
    noisy = SapwoodRegressor().fit(X, y)
    assert leaf_rows_of(noisy) == 20
    # a label a rare pattern of a few rows sets: leaves must be small to find it
    X = rng.integers(0, 2, size=(3000, 8)).astype(float)
    rare = (X[:, :5].sum(axis=1) == 5)
    y = np.where(rare, 50.0, 0.0) + 0.1 * rng.normal(size=3000)
    assert 50 <= rare.sum() <= 150
    exact = SapwoodRegressor().fit(X, y)
    assert leaf_rows_of(exact) == 0
    # a leaf minimum of the caller's own is kept, and only the rounds are chosen
    assert leaf_rows_of(SapwoodRegressor(min_child_samples=5).fit(X, y)) == 5
    assert leaf_rows_of(SapwoodRegressor(min_data_in_leaf=0).fit(X[:400], y[:400])) == 0


def test_a_classifier_holds_out_rows_stratified_by_class() -> None:
    X, y = smooth(2000, 1.0, seed=1)
    labels = (y > np.quantile(y, 0.9)).astype(int)
    model = SapwoodClassifier().fit(X, labels)
    dtrain = sapwood.Dataset(X, label=labels.astype(np.float32))
    folds = _make_folds(dtrain, 5, True, None, True, 0)
    for _, held in folds:
        # a tenth of the positives in every fold, as stratification deals them
        assert abs(labels[held].mean() - 0.1) < 0.01
    rounds, leaves = reference([("objective", "binary:logistic")], dtrain, folds, [None, 20])
    assert (model.n_estimators_, leaf_rows_of(model)) == (rounds, leaves or 0)


def test_a_watched_metric_that_grows_is_maximised() -> None:
    X, y = smooth(1000, 1.5, seed=6)
    labels = (y > 0).astype(int)
    model = SapwoodClassifier(eval_metric="auc").fit(X, labels)
    dtrain = sapwood.Dataset(X, label=labels.astype(np.float32))
    folds = _make_folds(dtrain, 5, True, None, True, 0)
    params = [("objective", "binary:logistic"), ("eval_metric", "auc")]
    rounds, leaves = reference(params, dtrain, folds, [None, 20], higher=True)
    assert (model.n_estimators_, leaf_rows_of(model)) == (rounds, leaves or 0)


def test_a_large_table_holds_out_one_tenth() -> None:
    X, y = smooth(20_000, 2.0, seed=2)
    model = SapwoodRegressor(learning_rate=0.3).fit(X, y)
    dtrain = sapwood.Dataset(X, label=y)
    folds = _make_folds(dtrain, 10, False, None, True, 0)[:1]
    rounds, leaves = reference([("learning_rate", 0.3)], dtrain, folds, [None, 20])
    assert (model.n_estimators_, leaf_rows_of(model)) == (rounds, leaves or 0)
    # noisy labels at a fast rate stop early
    assert model.n_estimators_ < 100


def test_the_choice_is_the_same_on_every_worker_count() -> None:
    X, y = smooth(1500, 0.5, seed=3)
    one = SapwoodRegressor(workers=1).fit(X, y)
    two = SapwoodRegressor(workers=2).fit(X, y)
    assert one.n_estimators_ == two.n_estimators_
    assert one.get_booster().to_json() == two.get_booster().to_json()


@pytest.mark.parametrize(
    "given",
    [
        {"n_estimators": 100},
        {"num_boost_round": 100},
        {"early_stopping_rounds": 1000},
    ],
)
def test_given_rounds_or_own_early_stopping_train_as_xgboost(given: dict) -> None:
    X, y = smooth(1500, 0.3, seed=4)
    fit_args = {}
    if "early_stopping_rounds" in given:
        fit_args = {"eval_set": [(X[:300], y[:300])]}
    model = SapwoodRegressor(**given).fit(X, y, **fit_args)
    assert model.n_estimators_ == 100 and leaf_rows_of(model) == 0
    if not fit_args:
        whole = sapwood.train({"n_estimators": 100}, sapwood.Dataset(X, label=y))
        assert np.array_equal(model.predict(X), whole.predict(sapwood.Dataset(X)))


def test_a_ranker_a_tiny_table_and_a_continued_model_train_100_rounds() -> None:
    X, y = smooth(1500, 0.3, seed=5)
    qid = np.repeat(np.arange(50), 30)
    assert SapwoodRanker().fit(X, (y > 0).astype(int), qid=qid).n_estimators_ == 100
    assert SapwoodRegressor().fit(X[:40], y[:40]).n_estimators_ == 100
    first = SapwoodRegressor(n_estimators=10).fit(X, y)
    assert SapwoodRegressor().fit(X, y, xgb_model=first).n_estimators_ == 110
