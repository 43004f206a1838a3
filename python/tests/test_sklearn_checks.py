"""scikit-learn's estimator checks."""

from __future__ import annotations

from typing import Any

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from sapwood import SapwoodClassifier, SapwoodRanker, SapwoodRegressor

#: Checks skipped, with the reason (scikit-learn reports them as expected failures).
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    # Histogram cuts are quantiles of the rows, not of the weighted rows (as in XGBoost's
    # and LightGBM's `hist`): repeating a row moves the cuts, so weights are not exactly
    # equivalent to repetition, although the gradients and hessians are weighted exactly.
    "check_sample_weight_equivalence_on_dense_data": "cuts are unweighted quantiles",
    "check_sample_weight_equivalence_on_sparse_data": "cuts are unweighted quantiles",
}


class OneQueryRanker(SapwoodRanker):
    """``SapwoodRanker`` for scikit-learn's checks, which call ``fit(X, y)`` and never pass
    query groups: with none given, all rows are one query.

    ``SapwoodRanker`` itself refuses ``fit`` without ``group``/``qid``, as XGBoost's
    ``XGBRanker`` and LightGBM's ``LGBMRanker`` do, so none of the checks that fit could run
    on it unchanged (neither peer runs them on its ranker). This adaptation runs them all on
    the ranker's real code path (parameters, cloning, pickling, input validation, NaN and
    sparse input, feature names, predict shapes), one query per dataset being the
    only thing it adds; test_ranking.py tests the groups themselves and the refusal.
    """

    def fit(self, X: Any, y: Any, **kwargs: Any) -> OneQueryRanker:
        if kwargs.get("group") is None and kwargs.get("qid") is None:
            kwargs["group"] = [X.shape[0]] if hasattr(X, "shape") else [len(X)]
        super().fit(X, y, **kwargs)
        return self


@parametrize_with_checks(
    [SapwoodRegressor(n_estimators=10), SapwoodClassifier(n_estimators=10)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_compatible(estimator: object, check: object) -> None:
    check(estimator)  # type: ignore[operator]


@parametrize_with_checks(
    [OneQueryRanker(n_estimators=10)],
    # every check scikit-learn selects for a generic estimator passes on it (there is no
    # ranker estimator type: the regressor's and classifier's checks are not selected)
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_ranker_sklearn_compatible(estimator: object, check: object) -> None:
    check(estimator)  # type: ignore[operator]


def test_the_ranker_needs_groups_where_the_checks_give_none() -> None:
    import numpy as np

    from sapwood import ParameterError

    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 3
    with pytest.raises(ParameterError, match="`group`"):
        SapwoodRanker(n_estimators=2).fit(X, y)
    assert OneQueryRanker(n_estimators=2).fit(X, y).predict(X).shape == (20,)
