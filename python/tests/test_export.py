"""Export to XGBoost JSON and LightGBM text: the peers' own readers must predict Sapwood's
margins on every bundled dataset (with its missing values and categories), and XGBoost's
TreeSHAP on the exported model must match Sapwood's contributions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sapwood
from conftest import load_bundled

DATASETS = [
    "breast_cancer", "chile", "diabetes", "diamonds", "digits", "penguins", "synthetic", "txhousing",
]
OBJECTIVES = {"binary": "binary:logistic", "regression": "reg:squarederror", "multiclass": "multi:softprob"}
ROUNDS = 20
#: What the README quotes, held exactly: XGBoost sums the same f32 leaf values in the same
#: order (bit-identical); LightGBM sums them in f64 (≤ 1.6e-6 relative to max(1, |margin|)
#: on the bundled datasets, diamonds' prices the worst); onnxruntime's multi-threaded sums
#: differ by f32 rounding (≤ 1.2e-6); SHAP values by ≤ 4.2e-7 relative to the row.
TOL = {"xgboost": 0.0, "lightgbm": 1.6e-6, "onnx": 1.2e-6}
SHAP_TOL = 4.2e-7


def _trained(name: str) -> tuple[sapwood.Booster, Any, np.ndarray, dict[str, Any]]:
    """A model of ``name`` and the rows to check: test rows plus training rows, with some
    categorical values blanked (missing) so the default directions are exercised."""
    import pandas as pd

    meta, train, test = load_bundled(name)
    label = meta["label"]
    y = train.pop(label)
    test.pop(label)
    y_fit: Any = y.astype(str).tolist() if meta["label_kind"] == "string" else y
    params = {"objective": OBJECTIVES[meta["task"]], "max_depth": 5}
    b = sapwood.train(params, sapwood.Dataset(train, label=y_fit), ROUNDS)
    rows = pd.concat([test, train.iloc[:2000]], ignore_index=True)
    for i, c in enumerate(meta["categorical"]):
        rows.loc[i::7, c] = np.nan
    return b, rows, _codes(b, rows), meta


def _codes(b: sapwood.Booster, frame: Any) -> np.ndarray:
    """The rows as the exported models take them: numeric values as f32, categorical levels
    as their index in the model's level list (unknown levels and missing values as NaN)."""
    names = b._model.feature_names
    levels = b._model.feature_levels
    out = np.empty((len(frame), len(names)), dtype=np.float32)
    for j, (name, lv) in enumerate(zip(names, levels)):
        col = frame[name]
        if lv is None:
            out[:, j] = col.to_numpy(dtype=np.float32, na_value=np.nan)
        else:
            index = {level: k for k, level in enumerate(lv)}
            out[:, j] = [index.get(str(v), np.nan) if not pd_isna(v) else np.nan for v in col]
    return out


def pd_isna(v: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


def _feature_types(b: sapwood.Booster) -> list[str]:
    return ["q" if lv is None else "c" for lv in b._model.feature_levels]


def _check(name: str, got: np.ndarray, want: np.ndarray, fmt: str) -> float:
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    diff = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    worst = float(diff.max())
    print(f"{name} {fmt}: max abs diff {np.abs(got - want).max():.3g}, relative {worst:.3g}")
    assert worst <= TOL[fmt], f"{name} {fmt}: {worst}"
    return worst


@pytest.mark.parametrize("name", DATASETS)
def test_exported_models_predict_sapwood_margins(name: str, tmp_path: Path) -> None:
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    b, rows, X, meta = _trained(name)
    want = np.asarray(b.predict(rows, output_margin=True), dtype=np.float64)

    b.save_model(tmp_path / "m.xgb.json", format="xgboost")
    xb = xgb.Booster(model_file=str(tmp_path / "m.xgb.json"))
    dm = xgb.DMatrix(X, feature_names=list(b._model.feature_names),
                     feature_types=_feature_types(b), enable_categorical=True)
    _check(name, xb.predict(dm, output_margin=True), want, "xgboost")

    b.save_model(tmp_path / "m.lgb.txt", format="lightgbm")
    lb = lgb.Booster(model_file=str(tmp_path / "m.lgb.txt"))
    _check(name, lb.predict(X, raw_score=True), want, "lightgbm")

    # XGBoost's TreeSHAP on the export (node covers as sum_hessian) = Sapwood's contributions
    theirs = np.asarray(xb.predict(dm, pred_contribs=True), dtype=np.float64)
    ours = np.asarray(b.predict(rows, pred_contribs=True), dtype=np.float64)
    # XGBoost sums contributions in f32 (Sapwood in f64): its error is relative to the
    # size of the row's terms, so each row is scaled by its largest contribution (>= 1)
    scale = np.maximum(1.0, np.abs(ours).max(axis=-1, keepdims=True))
    worst = float((np.abs(theirs.reshape(ours.shape) - ours) / scale).max())
    print(f"{name} xgboost pred_contribs: max diff relative to the row {worst:.3g}")
    assert worst <= SHAP_TOL, f"{name}: contributions differ by {worst}"

    # the shap package's TreeExplainer reads the exported XGBoost file with its own parser
    # and its own TreeSHAP (numeric features: it does not take XGBoost's categorical splits).
    # In a child process: shap's numba in the same process makes onnxruntime (test_onnx)
    # crash when it creates a session.
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("shap") is None:
        pytest.skip("shap is not installed")
    if meta["categorical"]:
        return

    np.save(tmp_path / "X.npy", np.asarray(X, dtype=np.float64))
    script = (
        "import sys, numpy as np, shap, xgboost as xgb\n"
        "b = xgb.Booster(model_file=sys.argv[1])\n"
        "e = shap.TreeExplainer(b)\n"
        "np.save(sys.argv[3], np.asarray(e.shap_values(np.load(sys.argv[2])), dtype=np.float64))\n"
        "np.save(sys.argv[4], np.asarray(e.expected_value, dtype=np.float64))\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.xgb.json"), str(tmp_path / "X.npy"),
         str(tmp_path / "values.npy"), str(tmp_path / "bias.npy")],
        check=True,
    )
    values = np.load(tmp_path / "values.npy")
    bias = np.load(tmp_path / "bias.npy")
    groups = ours.shape[1] if ours.ndim == 3 else 1
    if groups == 1:
        values = values.reshape(len(X), -1)
        got = np.concatenate([values, np.broadcast_to(bias, (len(X), 1))], axis=1)
    else:
        # shap gives (rows, features, classes): Sapwood's layout is (rows, classes, features + 1)
        values = np.moveaxis(values.reshape(len(X), -1, groups), 2, 1)
        got = np.concatenate([values, np.broadcast_to(bias.reshape(1, groups, 1), (len(X), groups, 1))], axis=2)
    worst = float((np.abs(got.reshape(ours.shape) - ours) / scale).max())
    print(f"{name} shap.TreeExplainer: max diff relative to the row {worst:.3g}")
    assert worst <= SHAP_TOL, f"{name}: shap.TreeExplainer differs by {worst}"


def test_categorical_mapping_is_written_into_both_files(tmp_path: Path) -> None:
    import json

    b, _, _, meta = _trained("penguins")
    b.save_model(tmp_path / "x.json", format="xgboost")
    learner = json.loads((tmp_path / "x.json").read_text())["learner"]
    cats = json.loads(learner["attributes"]["sapwood_categories"])
    levels = dict(zip(b._model.feature_names, b._model.feature_levels))
    assert cats == {c: levels[c] for c in meta["categorical"]}
    b.save_model(tmp_path / "l.txt", format="lightgbm")
    last = (tmp_path / "l.txt").read_text().splitlines()[-1]
    assert last.startswith("pandas_categorical:")
    assert json.loads(last.split(":", 1)[1]) == [levels[c] for c in b._model.feature_names if levels[c]]


def test_bad_formats_are_errors_and_write_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    b = sapwood.train({}, sapwood.Dataset(X, label=X[:, 0]), 3)
    with pytest.raises(Exception, match="unknown export format"):
        b.save_model(tmp_path / "out", format="pmml")
    assert list(tmp_path.iterdir()) == []
    b.save_model(tmp_path / "x.json", format="XGBoost")
    assert (tmp_path / "x.json").exists()


def _decimal_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 features with three decimals (1.857, ...): most are not f32 values, and the
    f32 thresholds the model learns are the f32 roundings of such values."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-3000, 3000, size=(n, 4)) / 1000.0
    y = (X[:, 0] + 0.5 * X[:, 1] - X[:, 2] * X[:, 3] > 0.1).astype(np.float64)
    return X, y


def test_float64_inputs_route_in_every_export_as_in_sapwood(tmp_path: Path) -> None:
    # LightGBM compares the float64 input with the threshold in the file; Sapwood rounds the
    # input to f32 first. A threshold written as the f32 value widened to f64 sent x = 1.857
    # (just above its f32 rounding) the other way. XGBoost rounds inputs to f32 as Sapwood
    # does; the ONNX model takes float32 (the documented cast).
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y = _decimal_rows(6000, 11)
    assert X.dtype == np.float64
    assert (X.astype(np.float32).astype(np.float64) != X).mean() > 0.9
    b = sapwood.train({"objective": "binary:logistic", "max_depth": 6, "max_bin": 255},
                      sapwood.Dataset(X, label=y), 30)
    want = np.asarray(b.predict(X, output_margin=True), dtype=np.float64)
    b.save_model(tmp_path / "m.lgb.txt", format="lightgbm")
    lb = lgb.Booster(model_file=str(tmp_path / "m.lgb.txt"))
    _check("float64 rows", lb.predict(X, raw_score=True), want, "lightgbm")
    b.save_model(tmp_path / "m.xgb.json", format="xgboost")
    xb = xgb.Booster(model_file=str(tmp_path / "m.xgb.json"))
    _check("float64 rows", xb.predict(xgb.DMatrix(X, feature_names=list(b._model.feature_names)), output_margin=True), want, "xgboost")
    ort = pytest.importorskip("onnxruntime")
    b.save_model(tmp_path / "m.onnx", format="onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    margin, _ = session.run(None, {"input": X.astype(np.float32)})
    _check("float64 rows", margin, want, "onnx")


def test_an_early_stopped_model_exports_the_rounds_predict_uses(tmp_path: Path) -> None:
    # Booster.predict uses every round, as XGBoost's does: the export holds every round and
    # says so in one warning naming the best round and how to export it; the slice
    # booster[: best + 1] exports the best model, predicting what predict does with that
    # range, in each format
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    ort = pytest.importorskip("onnxruntime")
    X, y = _decimal_rows(6000, 12)
    Xv, yv = _decimal_rows(2000, 13)
    yv[::3] = 1 - yv[::3]  # noisy validation labels: the best round comes early
    b = sapwood.train({"objective": "binary:logistic", "learning_rate": 0.8},
                      sapwood.Dataset(X, label=y), 400,
                      evals=[(sapwood.Dataset(Xv, label=yv), "valid")],
                      early_stopping_rounds=3, verbose_eval=False)
    best, total = b.best_iteration, b.num_boosted_rounds()
    assert best is not None and best + 1 < total
    names = list(b._model.feature_names)

    def margins(path: Path, fmt: str) -> np.ndarray:
        if fmt == "lightgbm":
            return np.asarray(lgb.Booster(model_file=str(path)).predict(X, raw_score=True))
        if fmt == "xgboost":
            xb = xgb.Booster(model_file=str(path))
            return np.asarray(xb.predict(xgb.DMatrix(X, feature_names=names), output_margin=True))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, {"input": X.astype(np.float32)})[0])

    every = np.asarray(b.predict(X, output_margin=True), dtype=np.float64)
    best_only = np.asarray(b.predict(X, output_margin=True, iteration_range=(0, best + 1)),
                           dtype=np.float64)
    assert np.abs(every - best_only).max() > 0.1
    for fmt in ("lightgbm", "xgboost", "onnx"):
        path = tmp_path / f"all.{fmt}"
        with pytest.warns(UserWarning, match=rf"exported all {total} rounds.*booster\[:{best + 1}\]"):
            b.save_model(path, format=fmt)
        _check("every round", margins(path, fmt), every, fmt)
        path = tmp_path / f"best.{fmt}"
        b[: best + 1].save_model(path, format=fmt)
        _check("through the best round", margins(path, fmt), best_only, fmt)


def test_exports_predict_pandas_categoricals_in_any_order_of_levels(tmp_path: Path) -> None:
    """A pandas frame whose categories are listed in another order than training's, or
    declare a level training never saw: the XGBoost export carries XGBoost 3's category
    container, so XGBoost re-codes the frame itself and predicts Sapwood's margins (it
    mispredicted by up to 0.9 in probability); a declared unseen level is refused by
    XGBoost with its own error, not mispredicted. LightGBM's export (pandas_categorical)
    predicts them too. Text and integer levels; non-ASCII text levels, which XGBoost 3.2
    itself cannot re-code, must come in the model's order."""
    import pandas as pd

    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(7)
    n = 3000
    for words in (["zebra", "apple", "mango", "kiwi", "nandu"],
                  ["zèbre", "apple", "mango", "kiwi", "Ñandú"]):
        frame = pd.DataFrame({
            "word": pd.Categorical(rng.choice(words, n), categories=words),
            "size": pd.Categorical(rng.choice([30, 4, 17, 8], n)),
            "x": rng.normal(size=n),
        })
        effect = dict(zip(words, [2.0, -1.0, 0.5, 0.0, 1.5]))
        y = (frame["word"].map(effect).astype(float) + (frame["size"] == 17) * 1.5
             + frame["x"] + rng.normal(size=n) > 1).astype(int)
        b = sapwood.train({"objective": "binary:logistic", "max_depth": 4},
                          sapwood.Dataset(frame, label=y), 20)
        want = np.asarray(b.predict(frame, output_margin=True), dtype=np.float64)
        b.save_model(tmp_path / "m.json", format="xgboost")
        b.save_model(tmp_path / "m.txt", format="lightgbm")
        xb = xgb.Booster(model_file=str(tmp_path / "m.json"))
        lb = lgb.Booster(model_file=str(tmp_path / "m.txt"))
        ascii = all(w.isascii() for w in words)
        levels = dict(zip(b._model.feature_names, b._model.feature_levels))
        in_model_order = frame.assign(
            word=frame["word"].cat.reorder_categories(levels["word"]),
            size=frame["size"].cat.reorder_categories([int(v) for v in levels["size"]]),
        )
        reordered = frame.assign(
            word=frame["word"].cat.reorder_categories(list(reversed(levels["word"]))),
            size=frame["size"].cat.reorder_categories([30, 17, 8, 4]),
        )
        for rows in (frame, reordered, in_model_order):
            _check("pandas categoricals", lb.predict(rows, raw_score=True), want, "lightgbm")
            if ascii or rows is in_model_order:
                got = xb.predict(xgb.DMatrix(rows, enable_categorical=True), output_margin=True)
                _check("pandas categoricals", got, want, "xgboost")
        if ascii:
            # a declared level training never saw: XGBoost refuses some ("not in the
            # training set"; which depends on where its lookup lands) and re-codes the rest
            # of the frame right; never a silent misprediction of known levels
            for extra in ("durian", "zzz"):
                unseen = frame.assign(word=frame["word"].cat.add_categories([extra]))
                np.testing.assert_array_equal(b.predict(unseen, output_margin=True), want)
                try:
                    got = xb.predict(xgb.DMatrix(unseen, enable_categorical=True),
                                     output_margin=True)
                except xgb.core.XGBoostError as e:
                    assert "not in the training set" in str(e)
                else:
                    _check("declared unseen level", got, want, "xgboost")


def test_text_categories_that_look_like_integers_export_as_text(tmp_path: Path) -> None:
    """Categories of text whose levels all read as integers ("7", "12", "305", as IDs
    read as strings) stay text in both exports: the peers read the same frame's
    categories as text and must find them in the model (XGBoost refused the frame when
    the export wrote them as integers). Integer categories still export as integers."""
    import pandas as pd

    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(11)
    n = 2000
    ids = ["7", "12", "305", "41", "9"]
    for column, kind in (
        (pd.Categorical(rng.choice(ids, n)), "strings"),
        (pd.Categorical(rng.choice([7, 12, 305, 41, 9], n)), "text"),
    ):
        frame = pd.DataFrame({"id": column, "x": rng.normal(size=n)})
        code = pd.Series(column).cat.codes.to_numpy()
        y = ((code % 2) * 1.5 + frame["x"] + rng.normal(size=n) > 0.7).astype(int)
        b = sapwood.train({"objective": "binary:logistic", "max_depth": 3},
                          sapwood.Dataset(frame, label=y), 15)
        assert b._model.input_types == [kind, "number"]
        want = np.asarray(b.predict(frame, output_margin=True), dtype=np.float64)
        b.save_model(tmp_path / "m.json", format="xgboost")
        b.save_model(tmp_path / "m.txt", format="lightgbm")
        xb = xgb.Booster(model_file=str(tmp_path / "m.json"))
        got = xb.inplace_predict(frame, predict_type="margin")
        _check(f"{kind} categories", got, want, "xgboost")
        got = xb.predict(xgb.DMatrix(frame, enable_categorical=True), output_margin=True)
        _check(f"{kind} categories", got, want, "xgboost")
        lb = lgb.Booster(model_file=str(tmp_path / "m.txt"))
        _check(f"{kind} categories", lb.predict(frame, raw_score=True), want, "lightgbm")
