"""Every input type gives identical predictions; numpy memory is read in place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sapwood


@pytest.fixture(scope="module")
def numeric_model(regression_data: tuple[np.ndarray, np.ndarray]) -> sapwood.Booster:
    X, y = regression_data
    return sapwood.train({"max_depth": 4}, sapwood.Dataset(X, label=y), 20)


def _numeric_inputs(X: np.ndarray) -> dict[str, Any]:
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    return {
        "float64 C": np.ascontiguousarray(X),
        "float64 F": np.asfortranarray(X),
        "float32 C": np.ascontiguousarray(X, dtype=np.float32),
        "float32 F": np.asfortranarray(X, dtype=np.float32),
        "strided view": np.hstack([X, X])[:, : X.shape[1]],
        "list": X.tolist(),
        "pandas": frame,
        "pandas nullable": frame.astype("Float64"),
        "polars": pl.from_numpy(X, schema=names),
        "pyarrow Table": pa.Table.from_pandas(frame),
        "pyarrow RecordBatch": pa.RecordBatch.from_pandas(frame),
        "Dataset": sapwood.Dataset(X),
    }


def test_every_input_type_predicts_identically(
    numeric_model: sapwood.Booster, regression_data: tuple[np.ndarray, np.ndarray]
) -> None:
    X, _ = regression_data
    expected = numeric_model.predict(X)
    for kind, data in _numeric_inputs(X).items():
        np.testing.assert_array_equal(numeric_model.predict(data), expected, err_msg=kind)


def test_every_input_type_trains_identically(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    models = {
        kind: sapwood.train({"max_depth": 3}, sapwood.Dataset(data, label=y), 10).to_json()
        for kind, data in _numeric_inputs(X).items()
        if kind != "Dataset"
    }
    assert len(set(models.values())) == 1, models.keys()


def test_fortran_float32_is_not_copied() -> None:
    X = np.asfortranarray(np.random.default_rng(0).normal(size=(100, 4)), dtype=np.float32)
    d = sapwood.Dataset(X, label=np.zeros(100))
    assert d._native.borrowed_columns == 4
    # C order needs the columns gathered; float64 needs converting
    assert sapwood.Dataset(np.ascontiguousarray(X))._native.borrowed_columns == 0
    assert sapwood.Dataset(np.asfortranarray(X, dtype=np.float64))._native.borrowed_columns == 0
    # a float32 pandas frame hands its columns over without copying them
    frame = pd.DataFrame(X, columns=list("abcd"))
    assert sapwood.Dataset(frame)._native.borrowed_columns == 4
    # the Dataset reads the array in place: a change shows in predictions
    b = sapwood.train({}, sapwood.Dataset(X, label=X[:, 0]), 5)
    before = b.predict(d)
    X[:, 0] += 100
    assert not np.array_equal(b.predict(d), before)


def test_categorical_inputs_agree(mixed_frame: tuple[pd.DataFrame, np.ndarray]) -> None:
    frame, y = mixed_frame
    d = sapwood.Dataset(frame, label=y)
    assert d.categorical == [False, False, False, True, True]
    assert d.feature_names == ["x", "count", "flag", "colour", "size"]
    b = sapwood.train({"max_depth": 4}, d, 30)
    expected = b.predict(frame)
    assert np.corrcoef(expected, y)[0, 1] > 0.95
    as_strings = frame.assign(colour=frame["colour"].astype(object), size=frame["size"].astype(int))
    variants: dict[str, Any] = {
        "pandas": frame,
        "reordered columns": frame[["size", "colour", "flag", "count", "x"]],
        "reordered levels": frame.assign(
            colour=frame["colour"].cat.reorder_categories(["red", "green", "blue"])
        ),
        "strings and ints": as_strings,
        "polars": pl.from_pandas(frame),
        "pyarrow": pa.Table.from_pandas(frame),
    }
    for kind, data in variants.items():
        np.testing.assert_array_equal(b.predict(data), expected, err_msg=kind)
    # categorical features by position on a numpy array
    arr = np.column_stack([frame["x"], frame["size"].astype(int)])
    bn = sapwood.train({}, sapwood.Dataset(arr, label=y, categorical_features=[1]), 10)
    assert sapwood.Dataset(arr, categorical_features=[1]).categorical == [False, True]
    np.testing.assert_array_equal(bn.predict(arr), bn.predict(arr.astype(np.float32)))


def test_different_columns_are_a_clear_error(mixed_frame: tuple[pd.DataFrame, np.ndarray]) -> None:
    frame, y = mixed_frame
    b = sapwood.train({}, sapwood.Dataset(frame, label=y), 5)
    with pytest.raises(sapwood.SchemaMismatchError, match=r"missing \['colour'\]"):
        b.predict(frame.drop(columns="colour"))
    with pytest.raises(sapwood.SchemaMismatchError, match=r"not in training \['extra'\]"):
        b.predict(frame.assign(extra=1.0))
    with pytest.raises(ValueError, match="columns differ"):
        b.predict(frame.rename(columns={"x": "X"}))
    with pytest.raises(sapwood.SchemaMismatchError, match="4 columns"):
        b.predict(np.zeros((3, 4)))


def test_labels_and_weights_of_many_kinds(regression_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression_data
    base = sapwood.train({}, sapwood.Dataset(X, label=y, weight=np.ones(len(y))), 5).to_json()
    for label in (y.tolist(), pd.Series(y), pl.Series(y), pa.array(y), y.reshape(-1, 1)):
        assert sapwood.train({}, sapwood.Dataset(X, label=label), 5).to_json() == base
    yb = y > 0
    for label in (yb, yb.astype(int), pd.Series(yb, dtype="boolean")):
        b = sapwood.train({"objective": "binary:logistic"}, sapwood.Dataset(X, label=label), 5)
        assert b.predict(X).shape == (len(X),)


@pytest.mark.parametrize("rows", [1, 4_095, 4_096, 4_097, 9_000])
def test_row_major_matrices_are_read_block_by_block_into_the_same_columns(rows: int) -> None:
    # C-order matrices are copied to columns a block of 4096 rows at a time
    rng = np.random.default_rng(rows)
    X = rng.normal(size=(rows, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
    want = sapwood.train({"max_depth": 3}, sapwood.Dataset(np.asfortranarray(X), label=y), 5)
    for data in (np.ascontiguousarray(X), np.ascontiguousarray(X, dtype=np.float32)):
        got = sapwood.train({"max_depth": 3}, sapwood.Dataset(data, label=y), 5)
        assert got.to_json() == want.to_json()
        np.testing.assert_array_equal(got.predict(data), want.predict(np.asfortranarray(X)))


def test_booleans_where_numbers_were_trained_are_refused(tmp_path: Any) -> None:
    # a model records what each feature held; read as 0 and 1, booleans given for a
    # numeric feature (or numbers for a boolean one) were predicted silently and wrongly
    import pandas as pd

    rng = np.random.default_rng(5)
    n = 500
    frame = pd.DataFrame({"x": rng.normal(size=n), "b": rng.random(n) < 0.3})
    y = ((frame["x"] > 0) | frame["b"]).astype(int)
    b = sapwood.train({"objective": "binary:logistic"}, sapwood.Dataset(frame, label=y), 5)
    assert b._model.input_types == ["number", "bool"]
    b.predict(frame)  # the training types: accepted
    b.predict(frame.assign(x=frame["x"].astype(np.float32)))  # another width of number
    with pytest.raises(sapwood.SchemaMismatchError, match=r"column `x` holds booleans.*trained on numbers"):
        b.predict(frame.assign(x=frame["x"] > 0))
    with pytest.raises(sapwood.SchemaMismatchError, match=r"column `b` holds numbers.*trained on booleans"):
        b.predict(frame.assign(b=frame["b"].astype(np.float64)))
    # the record survives a file, and the scikit-learn estimators record it too
    b.save_model(tmp_path / "m.json")
    loaded = sapwood.Booster(model_file=tmp_path / "m.json")
    with pytest.raises(sapwood.SchemaMismatchError):
        loaded.predict(frame.assign(x=frame["x"] > 0))
    clf = sapwood.SapwoodClassifier(n_estimators=5).fit(frame, y)
    with pytest.raises(sapwood.SchemaMismatchError):
        clf.predict_proba(frame.assign(x=frame["x"] > 0))
    # plain arrays: a boolean array where a float array was trained
    X = rng.normal(size=(n, 3))
    m = sapwood.train({}, sapwood.Dataset(X, label=X[:, 0]), 3)
    with pytest.raises(sapwood.SchemaMismatchError, match="holds booleans"):
        m.predict(X > 0)


def test_text_and_integer_categories_are_recorded_apart() -> None:
    # text levels stay text on export even where they read as integers ("7"), so the
    # model records text apart from integer categories, from pandas and Arrow alike
    import pandas as pd
    import pyarrow as pa

    from sapwood._data import input_types

    frame = pd.DataFrame({
        "text": pd.Categorical(["7", "12", "7"]),
        "ints": pd.Categorical([7, 12, 7]),
        "objects": pd.Categorical(pd.Series(["a", "b", "a"], dtype=object)),
        "words": ["x", "y", "x"],
        "x": [1.0, 2.0, 3.0],
    })
    assert input_types(frame) == ["strings", "text", "strings", "strings", "number"]
    table = pa.table({
        "text": pa.array(["7", "12", "7"]).dictionary_encode(),
        "ints": pa.array([7, 12, 7]).dictionary_encode(),
        "words": pa.array(["x", "y", "x"]),
        "x": pa.array([1.0, 2.0, 3.0]),
    })
    assert input_types(table) == ["strings", "text", "strings", "number"]
    assert input_types(np.array([["a", "b"]])) == ["strings", "strings"]
