"""scikit-learn's estimator checks."""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from sapwood import SapwoodClassifier, SapwoodRegressor

#: Checks skipped, with the reason (scikit-learn reports them as expected failures).
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    # Histogram cuts are quantiles of the rows, not of the weighted rows (as in XGBoost's
    # and LightGBM's `hist`): repeating a row moves the cuts, so weights are not exactly
    # equivalent to repetition, although the gradients and hessians are weighted exactly.
    "check_sample_weight_equivalence_on_dense_data": "cuts are unweighted quantiles",
    "check_sample_weight_equivalence_on_sparse_data": "cuts are unweighted quantiles",
}


@parametrize_with_checks(
    [SapwoodRegressor(n_estimators=10), SapwoodClassifier(n_estimators=10)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_compatible(estimator: object, check: object) -> None:
    check(estimator)  # type: ignore[operator]
