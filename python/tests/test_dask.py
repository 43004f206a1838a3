"""Training on a Dask cluster (``sapwood.dask``): real ``LocalCluster``s of 2, 3 and 4
worker processes, the bundled datasets split into even, uneven and more partitions than
workers, and the model compared **byte for byte** with single-process ``sapwood.train``
on the same rows in partition order; evaluation history, predictions as dask collections,
the estimators, and a worker killed mid-training making ``train`` raise within
``comm_timeout``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import sapwood  # noqa: E402
from sapwood import SapwoodClassifier, SapwoodRanker, SapwoodRegressor  # noqa: E402
from sapwood.dask import (  # noqa: E402
    DaskDataset,
    DaskSapwoodClassifier,
    DaskSapwoodRanker,
    DaskSapwoodRegressor,
    _assign,
    _coordinator,
    _drop_listener,
    _plan,
    _split,
    _with_input_types,
)

from conftest import REPO, marking_rounds  # noqa: E402

#: Parameters that exercise the hashed samplers: row subsampling, column sampling and
#: cut sampling from fewer rows than the data has.
PARAMS: dict[str, Any] = {
    "max_depth": 4,
    "eta": 0.3,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "bin_sample_rows": 1000,
    "seed": 7,
}
ROUNDS = 12


def bundled(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(train, test)`` of ``datasets/<name>`` (Parquet keeps the category dtypes)."""
    read = lambda part: pd.read_parquet(REPO / "datasets" / name / f"{part}.parquet")  # noqa: E731
    return read("train"), read("test")


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda n: f"{n}workers")
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    """A cluster of 2, 3 or 4 single-threaded worker processes (pytest runs every test of
    one size before starting the next cluster). Work stealing is off, so that a task reading
    partitions :func:`placed` on one worker runs there: stealing once moved one worker's
    tasks to the others, and three of four workers trained."""
    with dask.config.set({"distributed.scheduler.work-stealing": False}), LocalCluster(
        n_workers=request.param, processes=True, threads_per_worker=1,
        dashboard_address=":0", silence_logs=40,
    ) as cluster, Client(cluster) as c:
        c.wait_for_workers(request.param)
        yield c


def workers_of(c: Client) -> int:
    return len(c.scheduler_info()["workers"])


def uneven(frame: pd.DataFrame, sizes: list[int]) -> dd.DataFrame:
    """A dask DataFrame (of a frame with a RangeIndex) whose partitions hold ``sizes`` rows,
    the last one the rest."""
    bounds = np.cumsum([0, *sizes]).tolist()
    return dd.from_pandas(frame, npartitions=1).repartition(divisions=[*bounds, len(frame) - 1])


def sliced(frame: pd.DataFrame, bounds: list[int]) -> dd.DataFrame:
    """A dask DataFrame whose partitions are ``frame``'s rows between consecutive ``bounds``."""
    pieces = [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return dd.from_map(lambda piece: piece, pieces, enforce_metadata=False)


def placed(c: Client, collection: Any) -> Any:
    """``collection`` (a dask DataFrame, Series or Array chunked by rows) with partition
    ``i`` computed on worker ``i % workers``, so that Dask's placement of root tasks (which
    may put every partition on one worker, as it once did in CI) cannot decide how many
    ranks train. Partition ``i`` of X, label and qid land on the same worker."""
    workers = sorted(c.scheduler_info()["workers"])
    array = isinstance(collection, da.Array)
    parts = list(collection.to_delayed().ravel()) if array else collection.to_delayed()
    # impure: every placing computes afresh, under new keys (a retry is a new placement)
    fresh = [dask.delayed(_same, pure=False)(p) for p in parts]
    futures = [c.compute(p, workers=[workers[i % len(workers)]]) for i, p in enumerate(fresh)]
    if not array:
        return dd.from_delayed(futures, meta=collection._meta, divisions=collection.divisions)
    blocks = [
        da.from_delayed(f, shape=(rows, *collection.shape[1:]), dtype=collection.dtype)
        for f, rows in zip(futures, collection.chunks[0])
    ]
    return da.concatenate(blocks, axis=0)


def _same(x: Any) -> Any:
    return x


def partitionings(frame: pd.DataFrame, workers: int) -> dict[str, dd.DataFrame]:
    """The same rows as one partition, one per worker, more partitions than workers, and
    uneven partitions."""
    n = len(frame)
    return {
        "one": dd.from_pandas(frame, npartitions=1),
        "per-worker": dd.from_pandas(frame, npartitions=workers),
        "many": dd.from_pandas(frame, npartitions=2 * workers + 3),
        "uneven": uneven(frame, [n // 50, n // 2, 7, n // 5]),
    }


def single(params: dict[str, Any], X: Any, y: Any, **kw: Any) -> sapwood.Booster:
    """The reference: single-process ``sapwood.train`` on the same rows."""
    return sapwood.train(params, sapwood.Dataset(X, label=y, **kw), ROUNDS, verbose_eval=False)


def dask_train(
    c: Client, params: dict[str, Any], X: Any, y: Any, min_ranks: int = 1, **kw: Any
) -> sapwood.Booster:
    """``sapwood.dask.train``, checking that at least ``min_ranks`` workers take part
    (where more than one must, the partitions are first :func:`placed` on the workers)."""
    # Dask schedules the dataset's packing of each partition where it starts soonest, which
    # for partitions of a few kilobytes may be another worker than the one holding them
    # (CI once saw all three partitions packed on one of two workers): a placement that
    # leaves too few workers holding data is made again, at most three times in all.
    for attempt in range(3):
        Xp, yp, kwp = X, y, kw
        if min_ranks > 1:
            Xp, yp, kwp = placed(c, X), placed(c, y), {k: placed(c, v) for k, v in kw.items()}
        dtrain = DaskDataset(c, Xp, yp, **kwp)
        ranks = len(_plan(dtrain._rows, dtrain._cuttable, dtrain._locations()))
        if ranks >= min_ranks:
            break
    assert ranks >= min_ranks, f"only {ranks} workers hold the {dtrain.npartitions} partitions"
    out = sapwood.dask.train(c, params, dtrain, ROUNDS, verbose_eval=False)
    assert set(out) == {"booster", "history"}
    booster: sapwood.Booster = out["booster"]
    return booster


# ---- the plan (no cluster) -------------------------------------------------------------


def test_runs_are_contiguous_balanced_and_never_cut_a_query() -> None:
    rows = [10, 0, 30, 5, 25, 30]
    runs = _split(rows, [True] * 5, 3)
    assert [p for r in runs for p in r] == list(range(6))
    assert [sum(rows[p] for p in r) for r in runs] == [40, 30, 30]
    # a query spanning partitions 2 and 3 glues them
    glued = _split(rows, [True, True, False, True, True], 3)
    assert all(not ({2, 3} & set(r)) or {2, 3} <= set(r) for r in glued)
    # never more runs than partitions with rows
    assert len(_split([5, 0, 0], [True, True], 4)) == 1


def test_each_run_goes_to_the_worker_holding_most_of_it() -> None:
    assert _assign([[1, 9], [8, 2]]) == [1, 0]
    assert _assign([[5, 5, 0], [0, 7, 1]]) == [0, 1]
    plan = _plan([10, 10, 10, 10], [True] * 3, [{"b"}, {"b"}, {"a"}, {"a"}])
    assert [(r.worker, r.partitions, r.row_offset, r.rows) for r in plan] == [
        ("b", [0, 1], 0, 20),
        ("a", [2, 3], 20, 20),
    ]


# ---- byte identity ---------------------------------------------------------------------


def test_regression_with_categories_is_byte_identical(client: Client) -> None:
    train, _ = bundled("txhousing")
    X, y = train.drop(columns="median"), train["median"].astype(np.float32)
    params = {**PARAMS, "objective": "reg:squarederror"}
    expected = single(params, X, y).to_json()
    frame = X.assign(median=y)
    for kind, ddf in partitionings(frame, workers_of(client)).items():
        # many partitions placed over the workers: every worker trains as a rank (2, 3 or 4)
        ranks = workers_of(client) if kind == "many" else 1
        got = dask_train(client, params, ddf.drop(columns="median"), ddf["median"], ranks)
        assert got.to_json() == expected, f"{kind} partitions: the model differs"
    # both record what each column held, so both refuse type drift at prediction
    assert got._model.input_types == ["strings" if c == "city" else "number" for c in X.columns]
    # string levels, sorted so that every partition sees other cities: agreed by name
    strings = frame.assign(city=frame["city"].astype(str)).sort_values("city", kind="stable")
    strings = strings.reset_index(drop=True)
    expected = single(params, strings.drop(columns="median"), strings["median"]).to_json()
    ddf = dd.from_pandas(strings, npartitions=workers_of(client) + 1)
    got = dask_train(client, params, ddf.drop(columns="median"), ddf["median"])
    assert got.to_json() == expected, "string column: the model differs"
    unknown = dd.from_pandas(frame, npartitions=2)
    unknown["city"] = unknown["city"].cat.as_unknown()
    with pytest.raises(sapwood.DataError, match="unknown categories"):
        DaskDataset(client, unknown.drop(columns="median"), unknown["median"])


def test_binary_classification_from_dask_arrays_is_byte_identical(client: Client) -> None:
    train, _ = bundled("synthetic")
    y = train.pop("y").to_numpy(np.float32)
    X = train.to_numpy(np.float64)
    w = np.random.default_rng(3).uniform(0.5, 2.0, size=len(y)).astype(np.float32)
    params = {**PARAMS, "objective": "binary:logistic"}
    expected = single(params, X, y, weight=w).to_json()
    n = len(y)
    ninth = n // 9
    cases = [(n,), (n // 2, n - n // 2), (100, 3000, 17, n - 3117), (ninth,) * 8 + (n - 8 * ninth,)]
    for chunks in cases:
        got = dask_train(
            client, params, da.from_array(X, chunks=(chunks, -1)),
            da.from_array(y, chunks=(chunks,)), 2 if len(chunks) > 4 else 1,
            weight=da.from_array(w, chunks=(chunks,)),
        )
        assert got.to_json() == expected, f"chunks {chunks}: the model differs"
        if len(chunks) > 4:
            # the booster reached the client pickled, with what its ranks exchanged
            assert got.comm_stats["bytes_sent"] > 0
            assert len(got.comm_stats["per_round"]) == ROUNDS


def test_multiclass_string_labels_estimator_is_byte_identical(client: Client) -> None:
    train, test = bundled("penguins")
    X, y = train.drop(columns="species"), train["species"]
    kw = dict(n_estimators=ROUNDS, max_depth=3, subsample=0.9, random_state=1)
    local = SapwoodClassifier(**kw).fit(X, y)
    for npart in (2, workers_of(client) + 2):
        ddf = dd.from_pandas(train, npartitions=npart)
        model = DaskSapwoodClassifier(**kw)
        model.client = client
        model.fit(ddf.drop(columns="species"), ddf["species"])
        assert model.get_booster().to_json() == local.get_booster().to_json()
        assert list(model.classes_) == list(local.classes_)
        dtest = dd.from_pandas(test.drop(columns="species"), npartitions=3)
        proba = model.predict_proba(dtest).compute()
        Xt = test.drop(columns="species")
        np.testing.assert_array_equal(proba.to_numpy(), local.predict_proba(Xt))
        labels = model.predict(dtest).compute()
        assert list(labels) == list(local.predict(Xt))


def test_ranking_with_queries_across_partitions_is_byte_identical(client: Client) -> None:
    train, test = bundled("lambdarank")
    y = train.pop("relevance").to_numpy(np.float32)
    qid = train["qid"].to_numpy()
    X = train.drop(columns="qid")
    params = {**PARAMS, "objective": "rank:ndcg", "max_depth": 3}
    expected = single(params, X, y, qid=qid).to_json()
    frame = train.assign(relevance=y)
    n, workers = len(frame), workers_of(client)
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    # partition bounds at the query starts nearest to k equal parts
    aligned = lambda k: [int(starts[np.searchsorted(starts, n * j / k)]) for j in range(1, k)]  # noqa: E731
    mixed = [b + 3 * (j % 2) for j, b in enumerate(aligned(2 * workers + 2))]
    cases = {
        "at query starts": (sliced(frame, [0, *aligned(workers + 1), n]), 2),
        # every other bound inside a query: its two partitions stay together
        "some inside queries": (sliced(frame, [0, *mixed, n]), 2),
        # from_pandas cuts inside queries: one rank may get everything
        "all inside queries": (dd.from_pandas(frame, npartitions=7), 1),
    }
    for kind, (ddf, ranks) in cases.items():
        got = dask_train(
            client, params, ddf.drop(columns=["qid", "relevance"]), ddf["relevance"], ranks,
            qid=ddf["qid"],
        )
        assert got.to_json() == expected, f"partitions {kind}: the model differs"
    # the estimator with group sizes, and a qid column of X
    sizes = np.diff(np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True]))
    kw = dict(n_estimators=ROUNDS, max_depth=3, random_state=2)
    local = SapwoodRanker(**kw).fit(X, y, qid=qid)
    ddf = dd.from_pandas(frame, npartitions=5)
    by_group = DaskSapwoodRanker(**kw)
    by_group.client = client
    by_group.fit(ddf.drop(columns=["qid", "relevance"]), ddf["relevance"], group=sizes)
    by_column = DaskSapwoodRanker(**kw)
    by_column.client = client
    by_column.fit(ddf.drop(columns="relevance"), ddf["relevance"])
    assert by_group.get_booster().to_json() == local.get_booster().to_json()
    assert by_column.get_booster().to_json() == local.get_booster().to_json()
    Xt = test.drop(columns=["relevance", "qid"])
    scores = by_column.predict(dd.from_pandas(test.drop(columns="relevance"), npartitions=2))
    np.testing.assert_array_equal(scores.compute().to_numpy(), local.predict(Xt))


# ---- evaluation, prediction, estimators ------------------------------------------------


def test_eval_history_and_early_stopping_come_from_rank_0(client: Client) -> None:
    train, test = bundled("chile")
    X, y = train.drop(columns="vote"), train["vote"].to_numpy(np.float32)
    Xt, yt = test.drop(columns="vote"), test["vote"].to_numpy(np.float32)
    params = {**PARAMS, "objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}
    result: dict[str, Any] = {}
    expected = sapwood.train(
        params, sapwood.Dataset(X, label=y), 60, evals=[(sapwood.Dataset(Xt, label=yt), "test")],
        early_stopping_rounds=3, evals_result=result, verbose_eval=False,
    )
    series = lambda a, k: dd.from_pandas(pd.Series(a), npartitions=k)  # noqa: E731
    dtrain = DaskDataset(client, dd.from_pandas(X, npartitions=5), series(y, 5))
    dtest = DaskDataset(client, dd.from_pandas(Xt, npartitions=2), series(yt, 2))
    out = sapwood.dask.train(
        client, params, dtrain, 60, evals=[(dtest, "test")], early_stopping_rounds=3,
        verbose_eval=False,
    )
    assert out["booster"].to_json() == expected.to_json()
    assert out["history"] == result
    assert out["booster"].best_iteration == expected.best_iteration
    assert out["booster"].num_boosted_rounds() < 60


def test_without_n_estimators_a_dask_estimator_trains_100_rounds(client: Client) -> None:
    # the plain estimators choose their rounds on held-out rows; a Dask job trains
    # XGBoost's 100, as documented
    train, _ = bundled("diabetes")
    ddf = dd.from_pandas(train, npartitions=workers_of(client))
    model = DaskSapwoodRegressor(max_depth=2)
    model.client = client
    model.fit(ddf.drop(columns="target"), ddf["target"])
    assert model.get_booster().num_boosted_rounds() == 100


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_regressor_predictions_equal_the_plain_boosters(client: Client) -> None:
    train, test = bundled("diabetes")
    X, y = train.drop(columns="target"), train["target"]
    kw = dict(n_estimators=ROUNDS, max_depth=3, subsample=0.7, random_state=5)
    local = SapwoodRegressor(**kw).fit(X, y)
    ddf = dd.from_pandas(train, npartitions=workers_of(client) + 1)
    model = DaskSapwoodRegressor(**kw)
    model.client = client
    Xt = test.drop(columns="target")
    dtest = dd.from_pandas(test, npartitions=2)
    model.fit(
        ddf.drop(columns="target"), ddf["target"],
        eval_set=[(dtest.drop(columns="target"), dtest["target"])],
    )
    booster = model.get_booster()
    assert isinstance(booster, sapwood.Booster)
    assert booster.to_json() == local.get_booster().to_json()
    assert list(model.evals_result()["validation_0"]) == ["rmse"]
    pred = model.predict(dd.from_pandas(Xt, npartitions=3))
    assert isinstance(pred, dd.Series)
    np.testing.assert_array_equal(pred.compute().to_numpy(), booster.predict(Xt))
    arr = model.predict(da.from_array(Xt.to_numpy(), chunks=(20, -1)))
    assert isinstance(arr, da.Array)
    np.testing.assert_array_equal(arr.compute(), booster.predict(Xt.to_numpy()))


def _binds(host: str, port: int) -> bool:
    """Whether a socket can bind ``host:port`` here (run on a worker)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _held(dask_worker: Any = None) -> int:
    return len(getattr(dask_worker, "_sapwood_listeners", None) or {})


def test_rank_0s_port_is_held_from_its_announcement_until_a_job_takes_it(
    client: Client,
) -> None:
    """The coordinator's port is bound on rank 0's worker when the job is planned, not
    merely found free: no socket opened before rank 0's task can take it. A finished job
    leaves no listener behind, and one that never ran has its listener closed."""
    worker = next(iter(client.scheduler_info()["workers"]))
    where = _coordinator(client, worker, "held-token", None)
    host, port = where.rsplit(":", 1)[0].strip("[]"), int(where.rsplit(":", 1)[1])
    assert client.run(_binds, host, port, workers=[worker])[worker] is False
    client.run(_drop_listener, "held-token", workers=[worker])
    assert client.run(_binds, host, port, workers=[worker])[worker] is True
    X, y = np.random.default_rng(3).random((300, 4)), np.arange(300) % 7
    dask_train(client, {"max_depth": 3}, da.from_array(X, chunks=100), da.from_array(y, 100))
    assert set(client.run(_held).values()) == {0}


def test_a_tcp_rank_joins_on_its_listener_once() -> None:
    X = np.random.default_rng(4).random((200, 3))
    d = sapwood.Dataset(X, label=X[:, 0])
    listener = sapwood._sapwood.listen("127.0.0.1")
    where = f"127.0.0.1:{listener.port}"
    pairs = [("num_boost_round", "3")]
    train = lambda: sapwood._sapwood.train_tcp(  # noqa: E731
        pairs, d._native, 0, 200, 0, 1, where, "tok", 30.0, None, [], None, listener
    )
    assert sapwood.Booster._wrap(_with_input_types(train(), d)).to_json() == sapwood.train(
        {}, d, 3, verbose_eval=False
    ).to_json()
    with pytest.raises(sapwood.ParameterError, match="`listener`: it was closed or already used"):
        train()


def test_misaligned_labels_name_the_parameter(client: Client) -> None:
    X = da.from_array(np.zeros((100, 3)), chunks=(50, -1))
    y = dd.from_pandas(pd.Series(np.zeros(100)), npartitions=3)
    with pytest.raises(sapwood.DataError, match="`label`"):
        DaskDataset(client, X, y)
    with pytest.raises(sapwood.ParameterError, match="`comm_timeout`"):
        sapwood.dask.train(
            client, {}, DaskDataset(client, X, da.zeros(100, chunks=50)), 2, comm_timeout=-1
        )


# ---- a worker dies or hangs -------------------------------------------------------------


def halves_on(c: Client, values: np.ndarray, workers: list[str], scatter: bool) -> da.Array:
    """``values`` as a dask Array of two row blocks, the first on ``workers[0]`` and the
    second on ``workers[1]``, so that Dask's placement of root tasks (which may put every
    block on one worker) cannot decide it. Scattered blocks die with their worker; the
    others are tasks, which Dask would compute again on that worker."""
    half = len(values) // 2
    blocks = []
    for rows, worker in ((values[:half], workers[0]), (values[half:], workers[1])):
        if scatter:
            future = c.scatter(rows, workers=[worker])
        else:
            future = c.submit(np.copy, rows, workers=[worker])
        blocks.append(da.from_delayed(future, shape=rows.shape, dtype=rows.dtype))
    return da.concatenate(blocks, axis=0)


@pytest.mark.parametrize("how", ["killed", "killed with its rows", "frozen"])
def test_a_lost_worker_makes_fit_raise_within_the_timeout(tmp_path: Path, how: str) -> None:
    """SIGKILL closes the dead worker's connections (the others see it at once); when its
    rows were scattered there they die with it and Dask cancels its rank. SIGSTOP leaves
    the connections open and silent (the others give up after ``comm_timeout``).

    Bounded whatever goes wrong: the rows are placed on both workers (two ranks, checked
    before training), and rank 0's callback stops training ``give_up`` seconds after it
    began, so a loss that is never noticed fails the test instead of training forever."""
    timeout = 10.0
    give_up = 120.0
    marker = tmp_path / "rank0.pid"
    train, _ = bundled("synthetic")
    y = train.pop("y").to_numpy(np.float32)
    X = train.to_numpy(np.float64)
    slow_rounds = marking_rounds(marker, give_up)

    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
        silence_logs=50,
    ) as cluster, Client(cluster) as c:
        c.wait_for_workers(2)
        pid_of: dict[str, int] = c.run(os.getpid)
        workers = sorted(pid_of)
        scatter = how == "killed with its rows"
        X_dask, y_dask = halves_on(c, X, workers, scatter), halves_on(c, y, workers, scatter)
        placed = DaskDataset(c, X_dask, y_dask)
        plan = _plan(placed._rows, placed._cuttable, placed._locations())
        assert sorted(r.worker for r in plan) == workers, f"not two ranks: {plan}"
        lost: dict[str, Any] = {}

        def lose_rank_1() -> None:
            try:
                deadline = time.monotonic() + give_up
                while not marker.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.2)
                (other,) = set(pid_of.values()) - {int(marker.read_text())}
                lost["pid"], lost["at"] = other, time.monotonic()
                os.kill(other, signal.SIGSTOP if how == "frozen" else signal.SIGKILL)
            except Exception as e:  # reported by the test below, not lost with the thread
                lost["error"] = e

        thread = threading.Thread(target=lose_rank_1, daemon=True)
        thread.start()
        try:
            with pytest.raises(sapwood.BackendError) as raised:
                if how != "frozen":
                    model = DaskSapwoodClassifier(
                        n_estimators=100_000, max_depth=3, callbacks=[slow_rounds],
                        comm_timeout=timeout,
                    )
                    model.client = c
                    model.fit(X_dask, y_dask)
                else:
                    sapwood.dask.train(
                        c, {"objective": "binary:logistic", "max_depth": 3},
                        DaskDataset(c, X_dask, y_dask), 100_000, callbacks=[slow_rounds],
                        comm_timeout=timeout, verbose_eval=False,
                    )
            assert "error" not in lost, f"the worker was not lost: {lost.get('error')!r}"
            failed_after = time.monotonic() - lost["at"]
        finally:
            thread.join(5)
            if how == "frozen" and "pid" in lost:
                os.kill(lost["pid"], signal.SIGKILL)
        assert failed_after < timeout + 5, str(raised.value)
        assert "rank 1" in str(raised.value), "the error names the lost rank"
        if how == "frozen":
            # nothing closed: only the silence bound can have ended the job
            assert failed_after > timeout / 2, str(raised.value)
