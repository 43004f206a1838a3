"""Device selection from Python: ``device="cuda:1"``, ``device=["cuda:0", "cuda:1"]`` and
``"wgpu:0"``; bad forms are parameter errors naming ``device``, a GPU without a driver is
a clear error (never a crash), and the device never changes the model's bytes."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import sapwood


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, np.nan_to_num(X[:, 0]) * 2 + rng.normal(scale=0.1, size=300)


def _train(**run: Any) -> sapwood.Booster:
    X, y = _data()
    return sapwood.train({"max_depth": 4, **run}, sapwood.Dataset(X, label=y), 5)


@pytest.mark.parametrize(
    ("device", "workers", "words"),
    [
        ("cuda:x", 1, "the index after `:` must be a whole number"),
        ("cpu:1", 1, "cpu takes no index"),
        (["cuda:0", "wgpu:1"], 2, "mixes cuda and wgpu"),
        (["cuda:0", "cuda:1"], 3, "lists 2 devices for 3 workers"),
        (["wgpu:0", "wgpu:0"], 1, "lists 2 devices for 1 worker"),
    ],
)
def test_bad_device_forms_are_parameter_errors(device: Any, workers: int, words: str) -> None:
    with pytest.raises(sapwood.ParameterError, match="`device`") as e:
        _train(device=device, workers=workers)
    assert words in str(e.value)
    with pytest.raises(sapwood.ParameterError, match="`device`"):
        sapwood.SapwoodRegressor(n_estimators=2, device=device, workers=workers).fit(*_data())


def _has_driver() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_has_driver(), reason="an NVIDIA driver is installed here")
@pytest.mark.parametrize(("device", "workers"), [("cuda:1", 1), (["cuda:0", "cuda:1"], 2)])
def test_a_cuda_index_without_a_driver_is_a_clear_error(device: Any, workers: int) -> None:
    named = device if isinstance(device, str) else ",".join(device)
    with pytest.raises(sapwood.BackendError, match="NVIDIA driver") as e:
        _train(device=device, workers=workers)
    assert f"requested: {named}" in str(e.value)


def test_wgpu_index_saves_the_cpu_model() -> None:
    cpu = _train().to_json()
    try:
        one = _train(device="wgpu:0").to_json()
    except sapwood.BackendError as e:
        assert "no wgpu adapter found" in str(e)
        assert "SAPWOOD_REQUIRE_ADAPTER" not in os.environ, str(e)
        pytest.skip(str(e))
    assert one == cpu
    assert _train(device=["wgpu:0", "wgpu:0"], workers=2).to_json() == cpu
    X, y = _data()
    est = sapwood.SapwoodRegressor(n_estimators=5, max_depth=4, device=["wgpu:0", "wgpu:0"], workers=2)
    assert np.array_equal(est.fit(X, y).predict(X), sapwood.SapwoodRegressor(n_estimators=5, max_depth=4).fit(X, y).predict(X))
    with pytest.raises(sapwood.ParameterError, match=r"`wgpu:9` requested, but \d+ wgpu adapter"):
        _train(device="wgpu:9")
