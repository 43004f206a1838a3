"""Training releases the GIL, and Ctrl-C stops it between rounds."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import sapwood


@pytest.fixture(scope="module")
def big() -> sapwood.Dataset:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20_000, 20)).astype(np.float32)
    return sapwood.Dataset(np.asfortranarray(X), label=X[:, 0] + X[:, 1] * X[:, 2])


def test_training_releases_the_gil(big: sapwood.Dataset) -> None:
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.perf_counter()
    sapwood.train({"n_jobs": 1, "max_depth": 8}, big, 40)
    elapsed = time.perf_counter() - start
    done.set()
    t.join()
    # a thread blocked on the GIL would barely tick; a free one ticks about once a ms
    assert ticks > 0.25 * elapsed * 1000, (ticks, elapsed)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_stops_training_between_rounds(big: sapwood.Dataset) -> None:
    rounds: list[int] = []

    def record(info: sapwood.RoundInfo) -> None:
        rounds.append(info.iteration)
        if info.iteration == 2:
            # as if Ctrl-C were pressed while round 3 trains
            threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        sapwood.train({"max_depth": 8}, big, 100_000, callbacks=[record])
    assert time.perf_counter() - start < 60
    assert 3 <= len(rounds) < 100, rounds
    # the process is healthy afterwards
    b = sapwood.train({}, big, 2)
    assert b.num_boosted_rounds() == 2


def test_threads_give_identical_models(big: sapwood.Dataset) -> None:
    a = sapwood.train({"n_jobs": 1}, big, 5).to_json()
    b = sapwood.train({"n_jobs": 2}, big, 5).to_json()
    assert a == b
