"""scipy.sparse input: absent entries are missing values, stored zeros are zeros (as in
XGBoost), and the dense matrix is never built."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import sapwood

sp = pytest.importorskip("scipy.sparse")

PARAMS = {"objective": "reg:squarederror", "eta": 0.3, "max_depth": 4, "seed": 0}


def _sparse_problem(n: int = 500, m: int = 8, density: float = 0.3, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    """A CSR matrix with some explicitly stored zeros, its dense twin (NaN where absent,
    0.0 where a zero is stored) and a label that depends on both presence and value."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, m)) < density
    values = rng.normal(size=(n, m))
    values[rng.random((n, m)) < 0.2] = 0.0  # stored zeros among the present entries
    rows, cols = np.nonzero(mask)
    csr = sp.csr_matrix((values[rows, cols], (rows, cols)), shape=(n, m))
    assert csr.nnz == mask.sum()  # the zeros are stored, not dropped
    dense = np.full((n, m), np.nan)
    dense[rows, cols] = values[rows, cols]
    y = np.where(mask[:, 0], values[:, 0] * 2, -1.0) + np.where(mask[:, 1], 1.0, 0.0)
    y = y + (np.where(mask[:, 2], values[:, 2], 0.0) == 0.0) * 0.5
    return csr, dense, y


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr_array"])
def test_sparse_training_equals_dense_with_nan(fmt: str) -> None:
    csr, dense, y = _sparse_problem()
    X = sp.csr_array(csr) if fmt == "csr_array" else csr.asformat(fmt)
    from_sparse = sapwood.train(PARAMS, sapwood.Dataset(X, label=y), 20)
    from_dense = sapwood.train(PARAMS, sapwood.Dataset(dense, label=y), 20)
    assert from_sparse.to_json() == from_dense.to_json()
    np.testing.assert_array_equal(from_sparse.predict(X), from_dense.predict(dense))
    np.testing.assert_array_equal(from_dense.predict(X), from_dense.predict(dense))


def test_stored_zeros_are_values_not_missing() -> None:
    # one column, present everywhere, stored zero vs. absent on alternate rows: a model
    # that told zero from missing apart must see the two groups differ
    n = 200
    rows = np.arange(0, n, 2)
    X = sp.csc_matrix((np.zeros(rows.size), (rows, np.zeros(rows.size, dtype=int))), shape=(n, 1))
    assert X.nnz == rows.size
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    booster = sapwood.train({**PARAMS, "min_child_weight": 0}, sapwood.Dataset(X, label=y), 5)
    p = booster.predict(X)
    assert np.all(p[::2] > 0.5) and np.all(p[1::2] < -0.5)
    dense = np.where(np.arange(n) % 2 == 0, 0.0, np.nan)[:, None]
    np.testing.assert_array_equal(p, booster.predict(dense))


def test_sparse_semantics_match_xgboost() -> None:
    """XGBoost gives a CSR matrix and its NaN-dense twin the same predictions; Sapwood
    does the same, and tracks XGBoost's accuracy on it."""
    xgb = pytest.importorskip("xgboost")
    csr, dense, y = _sparse_problem(n=2000, seed=3)
    params = {"objective": "reg:squarederror", "eta": 0.3, "max_depth": 4, "tree_method": "hist"}
    xb_sparse = xgb.train(params, xgb.DMatrix(csr, label=y), 30)
    xb_dense = xgb.train(params, xgb.DMatrix(dense, label=y, missing=np.nan), 30)
    np.testing.assert_allclose(
        xb_sparse.predict(xgb.DMatrix(csr)), xb_dense.predict(xgb.DMatrix(dense)), rtol=1e-5, atol=1e-5
    )
    sw_params = {k: v for k, v in params.items() if k != "tree_method"}
    sw = sapwood.train(sw_params, sapwood.Dataset(csr, label=y), 30)
    sw_mse = float(np.mean((sw.predict(csr) - y) ** 2))
    xb_mse = float(np.mean((xb_sparse.predict(xgb.DMatrix(csr)) - y) ** 2))
    assert sw_mse <= 1.5 * xb_mse + 1e-3


def test_sparse_feature_names_label_and_weight() -> None:
    csr, dense, y = _sparse_problem()
    w = np.linspace(0.5, 2.0, csr.shape[0])
    names = [f"c{j}" for j in range(csr.shape[1])]
    ds = sapwood.Dataset(csr, label=y, weight=w, feature_names=names)
    assert ds.feature_names == names and ds.num_row() == csr.shape[0]
    assert ds.categorical == [False] * csr.shape[1]
    a = sapwood.train(PARAMS, ds, 10)
    b = sapwood.train(PARAMS, sapwood.Dataset(dense, label=y, weight=w, feature_names=names), 10)
    assert a.to_json() == b.to_json()


def test_sparse_errors_name_the_problem() -> None:
    csr, _, y = _sparse_problem()
    with pytest.raises(sapwood.ParameterError, match="categorical_features"):
        sapwood.Dataset(csr, label=y, categorical_features=[0])
    booster = sapwood.train(PARAMS, sapwood.Dataset(csr, label=y), 3)
    with pytest.raises(sapwood.SchemaMismatchError, match="8 features"):
        booster.predict(csr[:, :5])


def test_pipeline_one_hot_encoder_classifier() -> None:
    pytest.importorskip("sklearn")
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(1)
    n = 600
    colour = rng.choice(["red", "green", "blue", "grey"], size=n)
    shape = rng.choice(["round", "square"], size=n)
    X = np.column_stack([colour, shape])
    y = ((colour == "red") | ((colour == "blue") & (shape == "round"))).astype(int)
    pipe = Pipeline(
        [("onehot", OneHotEncoder()), ("model", sapwood.SapwoodClassifier(n_estimators=30))]
    )
    encoded = pipe[:-1].fit_transform(X)
    assert sp.issparse(encoded) and encoded.format == "csr"  # the default this is about
    pipe.fit(X, y)
    assert (pipe.predict(X) == y).mean() == 1.0
    proba = pipe.predict_proba(X)
    assert proba.shape == (n, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    # the estimator on the sparse encoding equals the estimator on its dense twin, where
    # the one-hot zeros are absent entries and so NaN
    dense = encoded.toarray()
    dense[dense == 0] = np.nan
    on_dense = sapwood.SapwoodClassifier(n_estimators=30).fit(dense, y)
    np.testing.assert_array_equal(pipe[-1].predict_proba(encoded), on_dense.predict_proba(dense))


def test_regressor_fit_predict_sparse() -> None:
    pytest.importorskip("sklearn")
    csr, dense, y = _sparse_problem()
    a = sapwood.SapwoodRegressor(n_estimators=15).fit(csr, y)
    b = sapwood.SapwoodRegressor(n_estimators=15).fit(dense, y)
    np.testing.assert_array_equal(a.predict(csr), b.predict(dense))
    np.testing.assert_array_equal(a.predict(csr.tocsc()), b.predict(dense))


def test_sparse_input_is_never_densified() -> None:
    # 100,000 x 200 at 0.05% density: the dense float64 matrix is 160 MB and float32
    # per-column copies made in numpy 80 MB; the sparse path stays far below either
    n, m = 100_000, 200
    X = sp.random(n, m, density=0.0005, format="csr", random_state=np.random.default_rng(0))
    y = np.asarray(X.sum(axis=1)).ravel()
    tracemalloc.start()
    try:
        ds = sapwood.Dataset(X, label=y)
        booster = sapwood.train({**PARAMS, "max_depth": 3}, ds, 2)
        booster.predict(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"peak Python-side allocation {peak / 2**20:.1f} MiB"
