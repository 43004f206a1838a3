"""Type hints: ``mypy --strict`` on an example using the public API, and stubtest
comparing ``_sapwood.pyi`` with the native module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]

pytest.importorskip("mypy")


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=PYTHON_DIR, timeout=600
    )


def test_mypy_strict_on_example_and_package() -> None:
    done = _mypy("mypy", "--strict", "--no-incremental", "examples/typed_usage.py", "sapwood")
    assert done.returncode == 0, done.stdout + done.stderr


def test_stubs_match_the_native_module() -> None:
    done = _mypy("mypy.stubtest", "sapwood._sapwood", "--ignore-missing-stub")
    assert done.returncode == 0, done.stdout + done.stderr


def test_example_runs() -> None:
    done = subprocess.run([sys.executable, "examples/typed_usage.py"], capture_output=True, text=True, cwd=PYTHON_DIR)
    assert done.returncode == 0, done.stderr
