"""Training releases the GIL, and Ctrl-C stops it between rounds."""

from __future__ import annotations

import os
import signal
import sys
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
    # Ordering, not rate: with a switch interval far longer than the test, the trainer
    # thread keeps the GIL until it blocks, so this thread can run Python before training
    # ends only if `train` released the GIL; one that held it would let this thread run
    # only after `train` returned and `finished` was set.
    inside = threading.Event()
    finished = threading.Event()

    def trainer() -> None:
        inside.set()
        sapwood.train({"n_jobs": 1, "max_depth": 8}, big, 40)
        finished.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        t = threading.Thread(target=trainer)
        t.start()
        assert inside.wait(60)
        ran_while_training = not finished.is_set()
        t.join()
    finally:
        sys.setswitchinterval(interval)
    assert finished.is_set()
    assert ran_while_training, "this thread ran only after training ended"


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_stops_training_between_rounds(big: sapwood.Dataset) -> None:
    rounds: list[int] = []

    def record(info: sapwood.RoundInfo) -> None:
        rounds.append(info.iteration)
        if info.iteration == 2:
            # as if Ctrl-C were pressed while round 3 trains
            threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()

    # Ctrl-C as a user gets it, whatever an earlier test in this process left installed
    # (one CI run saw the signal have no effect: the 100,000 rounds ran to the end)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            sapwood.train({"max_depth": 8}, big, 100_000, callbacks=[record])
        assert time.perf_counter() - start < 60
        assert 3 <= len(rounds) < 100, (rounds[:5], len(rounds), previous)
    finally:
        signal.signal(signal.SIGINT, previous)
    # the process is healthy afterwards
    b = sapwood.train({}, big, 2)
    assert b.num_boosted_rounds() == 2


def test_threads_give_identical_models(big: sapwood.Dataset) -> None:
    a = sapwood.train({"n_jobs": 1}, big, 5)
    b = sapwood.train({"nthread": 2}, big, 5)
    assert a.to_json() == b.to_json()
    # equal models whatever the threads: the run record shows each setting arrived
    assert a.run_record["threads_per_worker"] == [1]
    assert b.run_record["threads_per_worker"] == [2]


def test_set_param_sets_the_threads_of_predictions_only() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = X[:, 0] * X[:, 1] + X[:, 2]
    b = sapwood.train({"max_depth": 4}, sapwood.Dataset(X, label=y), 20, verbose_eval=False)
    every = b.predict(X)
    b.set_param({"nthread": 1})
    assert b._threads == 1
    np.testing.assert_array_equal(b.predict(X), every)
    one_thread = b.predict(X, pred_contribs=True)
    b.set_param("n_jobs", 2)
    assert b._threads == 2
    np.testing.assert_array_equal(b.predict(X, pred_contribs=True), one_thread)
    with pytest.raises(sapwood.ParameterError, match="max_depth"):
        b.set_param({"max_depth": 3})


def _predict_in_child(model: "sapwood.SapwoodClassifier", X: np.ndarray, out: "object") -> None:
    out.put(model.predict_proba(X))  # type: ignore[attr-defined]


def test_a_child_forked_after_fit_predicts() -> None:
    # fork copies only the calling thread: a pool made in the parent (by fit and by a first
    # predict) has no threads in the child, where work handed to it used to wait forever.
    # The extension makes its pool again in a child; the child's predictions equal the
    # parent's, and it ends within the limit instead of hanging.
    import multiprocessing

    rng = np.random.default_rng(3)
    X = rng.normal(size=(12_000, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = sapwood.SapwoodClassifier(n_estimators=10, max_depth=4).fit(X, y)
    want = model.predict_proba(X)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_predict_in_child, args=(model, X, queue))
    child.start()
    try:
        got = queue.get(timeout=120)
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, want)


def test_a_billion_rounds_with_early_stopping_stop_early() -> None:
    # nothing is reserved per round: n_estimators=10**9 asked for 80 GB up front and
    # killed the interpreter
    rng = np.random.default_rng(4)
    X = rng.normal(size=(3_000, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    model = sapwood.SapwoodClassifier(
        n_estimators=10**9, learning_rate=1.0, early_stopping_rounds=2
    ).fit(X[:2000], y[:2000], eval_set=[(X[2000:], y[2000:])])
    assert model.get_booster().num_boosted_rounds() < 1000
