"""Shared fixtures: small synthetic problems and the repository's bundled datasets."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

#: The repository root (python/tests/ -> ../..).
REPO = Path(__file__).resolve().parents[2]


def load_bundled(name: str) -> tuple[dict[str, Any], Any, Any]:
    """``(meta, train, test)`` of ``datasets/<name>`` as pandas frames; categorical
    columns get the ``category`` dtype with the sorted training levels, as in the golden
    runs."""
    import pandas as pd

    meta = json.loads((REPO / "datasets" / name / "meta.json").read_text())
    read = lambda part: pd.read_csv(  # noqa: E731
        REPO / "datasets" / name / f"{part}.csv", keep_default_na=False, na_values=[""]
    )
    train, test = read("train"), read("test")
    for c in meta["categorical"]:
        levels = sorted(train[c].dropna().unique())
        train[c] = pd.Categorical(train[c], categories=levels)
        test[c] = pd.Categorical(test[c], categories=levels)
    return meta, train, test


@pytest.fixture(scope="session")
def regression_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    X = rng.normal(size=(600, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) * 2 + np.sin(np.nan_to_num(X[:, 1])) + rng.normal(scale=0.1, size=600)
    return X, y


@pytest.fixture(scope="session")
def mixed_frame() -> tuple[Any, np.ndarray]:
    """A pandas frame with numeric, nullable, boolean, string and category columns."""
    import pandas as pd

    rng = np.random.default_rng(7)
    n = 400
    colour = rng.choice(["red", "green", "blue"], size=n)
    size = rng.integers(0, 5, size=n)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n).astype(np.float32),
            "count": pd.array(rng.integers(0, 10, size=n), dtype="Int64"),
            "flag": rng.random(n) < 0.5,
            "colour": pd.Categorical(colour),
            "size": pd.Categorical(size),
        }
    )
    frame.loc[::17, "count"] = pd.NA
    frame.loc[::23, "colour"] = np.nan
    y = (
        frame["x"].to_numpy()
        + (colour == "red") * 2.0
        + size * 0.5
        + frame["flag"].to_numpy() * 1.0
    ).astype(np.float32)
    return frame, y


def cli_binary() -> Path | None:
    """The `sapwood` command-line binary: the one `SAPWOOD_CLI` names (scripts/test.sh sets it
    to the binary its cargo run built; a missing file is then an error, not a skip), else the
    newest build under `CARGO_TARGET_DIR` (default `target/`), if any."""
    env = os.environ.get("SAPWOOD_CLI")
    if env:
        if not Path(env).exists():
            raise FileNotFoundError(f"SAPWOOD_CLI names {env}, which does not exist")
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    built = [p for p in (target / "release" / "sapwood", target / "debug" / "sapwood") if p.exists()]
    return max(built, key=lambda p: p.stat().st_mtime) if built else None


def marking_rounds(marker: Path, give_up: float) -> Callable[[Any], bool]:
    """A round callback for the tests that kill a rank mid-training: run on rank 0, it
    writes its process id to ``marker`` at round 3 (whole, then renamed, so that it is never
    read half-written), slows every round by 50 ms so training outlasts the kill, and stops
    training ``give_up`` seconds after it was made, so a loss that is never noticed fails
    the test instead of training forever."""
    started = time.time()

    def slow_rounds(info: Any) -> bool:
        if info.iteration == 3:
            partial = marker.with_suffix(".partial")
            partial.write_text(str(os.getpid()))
            partial.replace(marker)
        time.sleep(0.05)
        return time.time() - started > give_up

    return slow_rounds
