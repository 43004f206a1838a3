"""A model saved from Python predicts identically in the command-line interface, and a
model trained by the CLI predicts identically in Python.

The CLI is expected to accept::

    sapwood train --data train.parquet --label y --model model.json
    sapwood predict --model model.json --data x.parquet --out predictions.parquet

with predictions in a float column named ``prediction`` (one column per class for
multiclass models is not covered here). The test skips when the binary is not built.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import sapwood

from conftest import cli_binary

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

CLI = cli_binary()
pytestmark = pytest.mark.skipif(
    CLI is None,
    reason="the `sapwood` CLI is not built (cargo build --release -p sapwood-cli, or set SAPWOOD_CLI)",
)


def _run(*args: str) -> None:
    done = subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def _frame(tmp_path: Path) -> tuple[np.ndarray, np.ndarray, Path]:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 4)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] ** 2).astype(np.float32)
    path = tmp_path / "train.parquet"
    cols = {f"f{i}": X[:, i] for i in range(4)}
    pq.write_table(pa.table({**cols, "y": y}), path)
    return X, y, path


def _predictions(path: Path) -> np.ndarray:
    table = pq.read_table(path)
    return np.asarray(table.column(table.column_names[-1]).to_numpy(), dtype=np.float32)


def test_python_model_in_cli(tmp_path: Path) -> None:
    X, y, data = _frame(tmp_path)
    b = sapwood.train({"max_depth": 4}, sapwood.Dataset(X, label=y), 20)
    b.save_model(tmp_path / "m.json")
    _run("predict", "--model", str(tmp_path / "m.json"), "--data", str(data), "--out", str(tmp_path / "p.parquet"))
    np.testing.assert_array_equal(_predictions(tmp_path / "p.parquet"), b.predict(X))


def test_cli_model_in_python(tmp_path: Path) -> None:
    X, y, data = _frame(tmp_path)
    _run("train", "--data", str(data), "--label", "y", "--model", str(tmp_path / "m.json"))
    _run("predict", "--model", str(tmp_path / "m.json"), "--data", str(data), "--out", str(tmp_path / "p.parquet"))
    b = sapwood.Booster(model_file=tmp_path / "m.json")
    np.testing.assert_array_equal(b.predict(X), _predictions(tmp_path / "p.parquet"))
