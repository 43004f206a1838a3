"""The scikit-learn regressor and classifier choose their rounds when ``n_estimators`` is
not given: on held-out rows, by the documented procedure, the same on every worker count."""

from __future__ import annotations

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


def best_rounds(params: list, dtrain: sapwood.Dataset, folds: list) -> list[int]:
    """Each held-out fit's best round count, as the documented procedure makes them."""
    out = []
    for fit_rows, held in folds:
        b = sapwood.train(
            [*params, ("n_estimators", 1000)], _subset(dtrain, fit_rows),
            evals=[(_subset(dtrain, held), "held")], early_stopping_rounds=20,
            verbose_eval=False,
        )
        out.append(b.best_iteration + 1)
    return out


def test_a_small_table_takes_the_mean_of_five_folds_grown_by_a_tenth() -> None:
    X, y = smooth(3000, 0.3)
    model = SapwoodRegressor(random_state=7).fit(X, y)
    dtrain = sapwood.Dataset(X, label=y)
    folds = _make_folds(dtrain, 5, False, None, True, 7)
    params = [("objective", "reg:squarederror")]
    best = best_rounds(params, dtrain, folds)
    assert model.n_estimators_ == round(np.mean(best) * 1.1)
    # the choice is not the peers' 100: a smooth target at 0.1 wants more
    assert model.n_estimators_ > 150
    # the final model is trained on every row for that many rounds
    whole = sapwood.train({"n_estimators": model.n_estimators_, "seed": 7}, dtrain)
    assert np.array_equal(model.predict(X), whole.predict(dtrain))


def test_a_classifier_holds_out_rows_stratified_by_class() -> None:
    X, y = smooth(2000, 1.0, seed=1)
    labels = (y > np.quantile(y, 0.9)).astype(int)
    model = SapwoodClassifier().fit(X, labels)
    dtrain = sapwood.Dataset(X, label=labels.astype(np.float32))
    folds = _make_folds(dtrain, 5, True, None, True, 0)
    for _, held in folds:
        # a tenth of the positives in every fold, as stratification deals them
        assert abs(labels[held].mean() - 0.1) < 0.01
    best = best_rounds([("objective", "binary:logistic")], dtrain, folds)
    assert model.n_estimators_ == round(np.mean(best) * 1.1)


def test_a_large_table_holds_out_one_tenth() -> None:
    X, y = smooth(20_000, 2.0, seed=2)
    model = SapwoodRegressor(learning_rate=0.3).fit(X, y)
    dtrain = sapwood.Dataset(X, label=y)
    folds = _make_folds(dtrain, 10, False, None, True, 0)[:1]
    best = best_rounds([("learning_rate", 0.3)], dtrain, folds)
    assert model.n_estimators_ == round(best[0] * 1.1)
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
    assert model.n_estimators_ == 100
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
