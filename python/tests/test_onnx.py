"""Export to ONNX: onnxruntime, running the exported TreeEnsembleRegressor, must predict
Sapwood's margins on every bundled dataset (with its missing values and categories), for
each objective's output operator, and route every bin boundary as Sapwood does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sapwood
from conftest import REPO, load_bundled

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

#: Every bundled dataset (a directory of ``datasets/`` with a ``meta.json``), seattlepets'
#: 13,492-level column included: categorical splits are balanced searches, so onnxruntime
#: (which crashed on the chains of thousands of equalities written before) loads them all.
DATASETS = sorted(p.parent.name for p in (REPO / "datasets").glob("*/meta.json"))
OBJECTIVES = {
    "binary": "binary:logistic",
    "regression": "reg:squarederror",
    "multiclass": "multi:softprob",
    "ranking": "rank:ndcg",
    "survival": "survival:cox",
}
ROUNDS = 20
#: Margins must agree to 1e-5 relative to max(1, |margin|) (the bar of test_export.py):
#: onnxruntime adds the same f32 leaf values in Sapwood's order, so in practice they are
#: bit-identical; the tolerance only covers a runtime that sums trees in another order.
TOL = 1e-5


def _session(path: Path, threads: int = 0) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _codes(b: sapwood.Booster, frame: Any) -> np.ndarray:
    """The rows as the exported model takes them: numeric values as f32, categorical levels
    as their index in the model's level list (unknown levels and missing values as NaN)."""
    import pandas as pd

    names = b._model.feature_names
    levels = b._model.feature_levels
    out = np.empty((len(frame), len(names)), dtype=np.float32)
    for j, (name, lv) in enumerate(zip(names, levels)):
        col = frame[name]
        if lv is None:
            out[:, j] = col.to_numpy(dtype=np.float32, na_value=np.nan)
        else:
            index = {level: k for k, level in enumerate(lv)}
            out[:, j] = [np.nan if pd.isna(v) else index.get(str(v), np.nan) for v in col]
    return out


def _load(name: str) -> tuple[dict[str, Any], Any, Any]:
    """``load_bundled``, or the Parquet files of a dataset bundled without CSV."""
    import pandas as pd

    if (REPO / "datasets" / name / "train.csv").exists():
        return load_bundled(name)
    meta = json.loads((REPO / "datasets" / name / "meta.json").read_text())
    train = pd.read_parquet(REPO / "datasets" / name / "train.parquet")
    test = pd.read_parquet(REPO / "datasets" / name / "test.parquet")
    for c in meta["categorical"]:
        levels = sorted(train[c].dropna().unique())
        train[c] = pd.Categorical(train[c], categories=levels)
        test[c] = pd.Categorical(test[c], categories=levels)
    return meta, train, test


def _trained(name: str, objective: str | None = None, **params: Any) -> tuple[sapwood.Booster, Any]:
    """A model of ``name`` and the rows to check: test rows plus training rows, with some
    values blanked (missing) and an unseen level, so default directions are exercised."""
    import pandas as pd

    meta, train, test = _load(name)
    label = meta["label"]
    y = train.pop(label)
    test.pop(label)
    group = meta.get("group")
    qid = None
    if group:
        qid = train.pop(group).to_numpy()
        test.pop(group)
    y_fit: Any = y.astype(str).tolist() if meta["label_kind"] == "string" else y
    objective = objective or OBJECTIVES[meta["task"]]
    p = {"objective": objective, "max_depth": 5, **params}
    try:
        b = sapwood.train(p, sapwood.Dataset(train, label=y_fit, qid=qid), ROUNDS)
    except Exception as e:  # an objective this build does not train yet
        if "survival:cox" in objective and "cox" in str(e).lower():
            pytest.skip(f"{name}: {e}")
        raise
    rows = pd.concat([test, train.iloc[:2000]], ignore_index=True)
    for i, c in enumerate(meta["categorical"]):
        rows[c] = rows[c].cat.add_categories(["never seen"])
        rows.loc[i::7, c] = np.nan
        rows.loc[i + 3::11, c] = "never seen"
    numeric = [c for c in rows.columns if c not in meta["categorical"]]
    for i, c in enumerate(numeric[:3]):
        rows.loc[i::13, c] = np.nan
    return b, rows


def _check(what: str, got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    absolute = float(np.abs(got - want).max())
    worst = float((np.abs(got - want) / np.maximum(1.0, np.abs(want))).max())
    print(f"{what}: max abs diff {absolute:.3g}, relative {worst:.3g}")
    assert worst <= TOL, f"{what}: {worst}"
    return absolute


def _export(b: sapwood.Booster, path: Path) -> Any:
    """Writes the ONNX file, checks it with onnx's own checker and protobuf reader, and
    returns the parsed model."""
    b.save_model(path, format="onnx")
    data = path.read_bytes()
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    # protobuf writes fields in number order: a hand-encoded file that re-serialises to
    # the same bytes has every field where onnx.proto puts it
    assert model.SerializeToString() == data
    return model


@pytest.mark.parametrize("name", DATASETS)
def test_onnxruntime_predicts_sapwood_margins(name: str, tmp_path: Path) -> None:
    b, rows = _trained(name)
    X = _codes(b, rows)
    want = np.asarray(b.predict(rows, output_margin=True), dtype=np.float64)
    model = _export(b, tmp_path / "m.onnx")
    for threads in (1, 0):
        margin, prediction = _session(tmp_path / "m.onnx", threads).run(None, {"input": X})
        absolute = _check(f"{name} onnx margin ({threads or 'all'} threads)", margin, want)
        if threads == 1:
            # one thread sums each row's trees in order, as Sapwood: the same f32 sums
            assert absolute == 0.0, f"{name}: margins differ by {absolute}"
    output = np.asarray(b.predict(rows), dtype=np.float64)
    _check(f"{name} onnx prediction", prediction, output)
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["sapwood_feature_names"]) == list(b._model.feature_names)
    levels = dict(zip(b._model.feature_names, b._model.feature_levels))
    assert json.loads(meta["sapwood_categories"]) == {k: v for k, v in levels.items() if v is not None}


@pytest.mark.parametrize(
    ("name", "objective", "op"),
    [
        ("chile", "binary:logitraw", "Identity"),
        ("penguins", "multi:softmax", "ArgMax"),
        ("txhousing", "count:poisson", "Exp"),
        ("diamonds", "reg:gamma", "Exp"),
        ("diamonds", "reg:tweedie", "Exp"),
        ("txhousing", "reg:absoluteerror", "Identity"),
        ("chile", "binary:logistic", "Sigmoid"),
        ("digits", "multi:softprob", "Softmax"),
    ],
)
def test_each_objective_exports_its_output(name: str, objective: str, op: str, tmp_path: Path) -> None:
    b, rows = _trained(name, objective)
    X = _codes(b, rows)
    model = _export(b, tmp_path / "m.onnx")
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["TreeEnsembleRegressor", op]
    margin, prediction = _session(tmp_path / "m.onnx", 1).run(None, {"input": X})
    want = np.asarray(b.predict(rows, output_margin=True), dtype=np.float64)
    assert _check(f"{name} {objective} margin", margin, want) == 0.0
    output = np.asarray(b.predict(rows), dtype=np.float64)
    if objective == "multi:softmax":
        # the class index, first largest margin first, as Sapwood
        assert prediction.dtype == np.int64
        assert np.array_equal(prediction, output.reshape(-1))
    else:
        _check(f"{name} {objective} prediction", prediction, output)


def test_every_bin_boundary_routes_as_in_sapwood(tmp_path: Path) -> None:
    """Rows at, just below and just above every threshold of every feature (and NaN): the
    f32 comparison must send each where Sapwood's bins do."""
    rng = np.random.default_rng(3)
    n = 3000
    X = rng.normal(size=(n, 4)).astype(np.float32)
    X[:, 1] = np.round(X[:, 1] * 3)  # ties: thresholds on exact values
    X[:, 2] = np.float32(1e-30) * rng.integers(-3, 4, size=n)  # tiny values around 0
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * 0.5 + (np.nan_to_num(X[:, 2]) > 0)
    b = sapwood.train({"max_depth": 6, "max_bin": 64}, sapwood.Dataset(X, label=y), 30)
    features = json.loads(b.to_json())["features"]
    probes = []
    for j, f in enumerate(features):
        # the shortest decimal of an f32 read as f64 rounds back to the same f32
        thresholds = [t for t in f["thresholds"] if isinstance(t, (int, float))]
        for t in np.asarray(thresholds, dtype=np.float32):
            for v in (np.nextafter(t, np.float32(-np.inf)), t, np.nextafter(t, np.float32(np.inf))):
                row = X[rng.integers(n)].copy()
                row[j] = v
                probes.append(row)
        row = X[0].copy()
        row[j] = np.nan
        probes.append(row)
    P = np.asarray(probes, dtype=np.float32)
    assert len(P) > 100
    model = _export(b, tmp_path / "m.onnx")
    (margin, _) = _session(tmp_path / "m.onnx", 1).run(None, {"input": P})
    want = np.asarray(b.predict(P, output_margin=True), dtype=np.float32).reshape(margin.shape)
    assert np.array_equal(margin.view(np.uint32), want.view(np.uint32)), np.abs(margin - want).max()
    # the probes do sit on the boundaries: the same trees with `x < T` misroute some
    modes = next(a for a in model.graph.node[0].attribute if a.name == "nodes_modes")
    modes.strings[:] = [b"BRANCH_LT" if m == b"BRANCH_LEQ" else m for m in modes.strings]
    (tmp_path / "lt.onnx").write_bytes(model.SerializeToString())
    (lt, _) = _session(tmp_path / "lt.onnx", 1).run(None, {"input": P})
    assert not np.array_equal(lt, want)


def test_export_is_atomic_and_errors_write_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    b = sapwood.train({}, sapwood.Dataset(X, label=X[:, 0]), 3)
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old contents")
    b.save_model(out, format="ONNX")
    assert not out.read_bytes().startswith(b"old")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    with pytest.raises(Exception):
        b.save_model(tmp_path / "missing-dir" / "m.onnx", format="onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    # a constant label grows trees that are a single leaf each: the root is a leaf
    flat = sapwood.train({}, sapwood.Dataset(X, label=np.full(100, 0.25)), 3)
    flat.save_model(tmp_path / "flat.onnx", format="onnx")
    (margin, _) = _session(tmp_path / "flat.onnx").run(None, {"input": X.astype(np.float32)})
    want = np.asarray(flat.predict(X, output_margin=True), dtype=np.float32).reshape(margin.shape)
    assert np.array_equal(margin, want) and np.allclose(margin, 0.25)
