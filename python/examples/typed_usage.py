"""Type-checked usage of the public API (``mypy --strict`` runs on this file in the tests)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import sapwood
from sapwood.sklearn import SapwoodClassifier, SapwoodRanker


def fit_and_predict(X: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    history: sapwood.EvalsResult = {}
    dtrain = sapwood.Dataset(X, label=y, feature_names=[f"x{i}" for i in range(X.shape[1])])

    def stop_early(info: sapwood.RoundInfo) -> bool:
        return info.elapsed > 60.0

    booster: sapwood.Booster = sapwood.train(
        {"eta": 0.1, "max_depth": 4, "eval_metric": ["rmse"]},
        dtrain,
        num_boost_round=20,
        evals=[(dtrain, "train")],
        callbacks=[stop_early],
        verbose_eval=False,
        evals_result=history,
    )
    best: int | None = booster.best_iteration
    gain: npt.NDArray[np.float64] = booster.feature_importance("gain")
    assert best is None and gain.shape == (X.shape[1],) and booster.num_trees() == 20
    try:
        sapwood.train({"max_dept": 3}, dtrain)
    except sapwood.ParameterError as e:
        message: str = str(e)
        assert "max_depth" in message
    return booster.predict(X, iteration_range=(0, 10))


def classify(X: npt.NDArray[np.float64], labels: list[str]) -> list[str]:
    clf = SapwoodClassifier(n_estimators=10, n_jobs=1).fit(X, labels)
    proba: npt.NDArray[np.float64] = clf.predict_proba(X)
    assert proba.shape[1] == len(set(labels))
    return [str(c) for c in clf.predict(X)]


def rank(X: npt.NDArray[np.float64], relevance: npt.NDArray[np.float64], qid: list[int]) -> float:
    dtrain = sapwood.Dataset(X, label=relevance, qid=qid)
    sizes: npt.NDArray[np.uint32] | None = dtrain.get_group()
    assert sizes is not None and int(sizes.sum()) == X.shape[0]
    ranker = SapwoodRanker(n_estimators=5, n_jobs=1).fit(
        X, relevance, qid=qid, eval_set=[(X, relevance)], eval_qid=[qid], eval_metric="ndcg@3"
    )
    scores: npt.NDArray[np.float32] = ranker.predict(X)
    assert scores.shape == (X.shape[0],)
    return ranker.evals_result_["validation_0"]["ndcg@3"][-1]


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    print(fit_and_predict(X, X[:, 0] * 2)[:3])
    print(classify(X, ["a" if v > 0 else "b" for v in X[:, 1]])[:3])
    print(rank(X, (np.abs(X[:, 0]) > 1).astype(np.float64), [i // 10 for i in range(100)]))
