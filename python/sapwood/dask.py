"""Training on a Dask cluster, as ``xgboost.dask``: :class:`DaskDataset`, :func:`train` and
the estimators :class:`DaskSapwoodRegressor`, :class:`DaskSapwoodClassifier` and
:class:`DaskSapwoodRanker` (``pip install sapwood[dask]``).

Partitions are trained where they are. Every Dask worker holding training data becomes
one rank of a TCP job and trains one **contiguous run of partitions** (in partition
order), so that the ranks' rows follow one another in rank order: row sampling and cut
sampling hash global row indices and histograms are integer sums, so the model is the
one :func:`sapwood.train` saves for all the rows in partition order, byte for byte, for
any number of workers and partitions.

How the runs are chosen: the partitions are persisted, their lengths and locations
(``client.who_has``) are read, the partitions are cut into as many runs as there are
workers holding data, balanced by rows (a query of a ranking set is never cut), and each
run goes to the worker already holding most of its rows. A partition that is not on its
run's worker is **moved there by Dask** when the training task starts, as any task
dependency is. Evaluation sets are reported by rank 0 only: their partitions are moved
to rank 0's worker.

Rank 0 is the coordinator: it listens on a port of its worker's host, bound when the job
is planned and held for rank 0's task, and every rank presents a random token. A rank whose worker dies, or that is silent longer than
``comm_timeout`` seconds, ends every other rank with an error, and :func:`train` (or
``fit``) raises it.
"""

from __future__ import annotations

import secrets
from concurrent.futures import CancelledError
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, Optional, TypedDict, TypeVar, Union

import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import numpy.typing as npt
from dask.delayed import delayed
from distributed import Client, Future, get_worker
from distributed.comm.addressing import get_address_host
from sklearn.base import ClassifierMixin, RegressorMixin

from . import _data, _params, _sapwood
from ._data import CategoricalSpec
from ._params import Params, canonical_param
from ._sapwood import DataError, LabelError, ParameterError
from .core import (
    Booster,
    Callback,
    Dataset,
    EvalsResult,
    _callback_hook,
    _eval_pairs,
    _group_sizes,
    _printing,
    _require_evals,
    _sort_callbacks,
    _stopping_text,
    _with_input_types,
    _with_rounds,
    _with_stopping,
)
from .sklearn import (
    SapwoodClassifier,
    SapwoodRanker,
    SapwoodRegressor,
    _add_feature_weights,
    _FitArgs,
    _is_classification,
    _learn_classes,
    _ranking_params,
    _SapwoodModel,
)

__all__ = [
    "DaskDataset",
    "TrainingOutput",
    "train",
    "DaskSapwoodRegressor",
    "DaskSapwoodClassifier",
    "DaskSapwoodRanker",
]

#: The default of ``comm_timeout``: the longest wait for a peer, in seconds.
DEFAULT_COMM_TIMEOUT = 60.0

#: distributed's module functions and Client methods, many of them unannotated: called
#: through ``Any`` so that ``mypy --strict`` checks this module without exceptions.
_dist: Any = distributed


class TrainingOutput(TypedDict):
    """What :func:`train` returns, as ``xgboost.dask.train``: the model and its metrics."""

    #: The trained model, a plain :class:`sapwood.Booster`.
    booster: Booster
    #: ``{dataset: {metric: [value per round]}}`` of the evaluation sets.
    history: EvalsResult


# ---- partitions ------------------------------------------------------------------------


class _Part(NamedTuple):
    """One partition's rows as they sit on a worker."""

    data: Any
    label: Optional[npt.NDArray[Any]]
    weight: Optional[npt.NDArray[np.float32]]
    qid: Optional[npt.NDArray[np.int64]]


class _Summary(NamedTuple):
    """What the client learns of a partition: its rows and first and last query ids."""

    rows: int
    first_qid: Optional[int]
    last_qid: Optional[int]


def _column(values: Any, name: str, index: int, rows: int) -> Optional[npt.NDArray[Any]]:
    """A partition's label, weight or qid as a 1-D array of ``rows`` values."""
    if values is None:
        return None
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(
            f"invalid parameter `{name}`: partition {index} has shape {arr.shape}; expected "
            "one value per row"
        )
    if arr.shape[0] != rows:
        raise DataError(
            f"invalid parameter `{name}`: partition {index} has {arr.shape[0]} values for "
            f"{rows} rows; give `{name}` the partitions of the data"
        )
    return arr


def _pack(index: int, data: Any, label: Any, weight: Any, qid: Any) -> _Part:
    """Checks that a partition's columns line up with its rows and packs them."""
    rows = int(data.shape[0])
    w = _column(weight, "weight", index, rows)
    q = _column(qid, "qid", index, rows)
    return _Part(
        data=data,
        label=_column(label, "label", index, rows),
        weight=None if w is None else w.astype(np.float32),
        qid=None if q is None else q.astype(np.int64),
    )


def _summarise(part: _Part) -> _Summary:
    """A partition's length and the query ids at its ends."""
    rows = int(part.data.shape[0])
    if part.qid is None or rows == 0:
        return _Summary(rows, None, None)
    return _Summary(rows, int(part.qid[0]), int(part.qid[-1]))


def _blocks(collection: Any) -> list[Any]:
    """The partitions (row blocks) of a dask collection, as delayed objects."""
    c: Any = collection
    if isinstance(collection, da.Array):
        if c.ndim == 2 and len(c.chunks[1]) > 1:
            c = c.rechunk({1: -1})
        return list(np.asarray(c.to_delayed()).reshape(len(c.chunks[0]), -1)[:, 0])
    return list(c.to_delayed())


def _rechunk_rows(values: Any, chunks: tuple[int, ...]) -> Any:
    """A dask Array cut into row blocks of ``chunks`` rows."""
    return values.rechunk({0: chunks})


def _blocks_of_rows(array: Any) -> Any:
    """A 2-D dask Array with every column in each block."""
    return array.rechunk({1: -1}) if len(array.chunks[1]) > 1 else array


def _is_dask(value: Any) -> bool:
    return isinstance(value, (da.Array, dd.DataFrame, dd.Series))


def _check_frame(data: Any) -> None:
    """Category columns must list the same levels, in the same order, in every partition
    (the order of a category's levels is part of the model)."""
    import pandas as pd

    for name, dtype in data.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype) and not data[name].cat.known:
            raise DataError(
                f"invalid parameter `data`: feature `{name}` is a category column with "
                "unknown categories; call `.categorize()` or `.cat.as_known()` on the dask "
                "DataFrame first, so that every partition has the same levels"
            )


class DaskDataset:
    """Training or evaluation data on a Dask cluster, as ``xgboost.dask.DaskDMatrix``.

    ``data`` is a dask DataFrame or a 2-D dask Array; ``label``, ``weight`` and ``qid``
    are dask Series, Arrays or one-column DataFrames with the same partitions (one value
    per row). The partitions are persisted on the cluster when the dataset is made and
    stay there while it lives; they are never gathered to the client.

    Category columns need known categories (the same levels in every partition: use
    ``ddf.categorize()``); string columns are categorical as in :class:`sapwood.Dataset`
    (the workers agree on their levels by name). ``categorical_features``,
    ``feature_names`` and ``missing`` are as in :class:`sapwood.Dataset`.

    A ranking set gives ``qid`` (the query of every row) or ``group`` (query sizes in row
    order, a numpy array). A query may span partitions: the runs of partitions given to
    the workers never cut a query. A query's rows must be contiguous, as in
    :class:`sapwood.Dataset`; each worker checks its own rows, so a query that comes back in
    a later worker's rows is not detected.
    """

    def __init__(
        self,
        client: Client,
        data: Any,
        label: Any = None,
        weight: Any = None,
        *,
        qid: Any = None,
        group: Any = None,
        categorical_features: CategoricalSpec = "auto",
        feature_names: Optional[Sequence[str]] = None,
        missing: Optional[float] = None,
    ) -> None:
        if not isinstance(client, Client):
            raise ParameterError(
                "invalid parameter `client`: expected a distributed.Client, got "
                f"{type(client).__name__}"
            )
        if isinstance(data, dd.DataFrame):
            _check_frame(data)
            n_features = len(data.columns)
        elif isinstance(data, da.Array) and data.ndim == 2:
            n_features = int(data.shape[1])
        else:
            raise DataError(
                "invalid parameter `data`: expected a dask DataFrame or a 2-D dask Array, got "
                f"{type(data).__name__}"
            )
        if qid is not None and group is not None:
            raise ParameterError(
                "invalid parameter `qid`: given with `group`; give the queries one way"
            )
        if feature_names is not None and len(feature_names) != n_features:
            raise ParameterError(
                f"invalid parameter `feature_names`: {len(feature_names)} names for "
                f"{n_features} features"
            )
        self.client = client
        self.categorical_features = categorical_features
        self.feature_names = None if feature_names is None else [str(n) for n in feature_names]
        self.missing = missing
        self.n_features = n_features
        self.has_label = label is not None
        data_blocks = _blocks(data)
        columns: dict[str, list[Any]] = {}
        for name, values in (("label", label), ("weight", weight), ("qid", qid)):
            if values is None:
                continue
            if not _is_dask(values):
                raise DataError(
                    f"invalid parameter `{name}`: expected a dask collection partitioned like "
                    f"the data, got {type(values).__name__}"
                )
            if isinstance(values, da.Array) and isinstance(data, da.Array):
                values = _rechunk_rows(values, data.chunks[0])
            blocks = _blocks(values)
            if len(blocks) != len(data_blocks):
                raise DataError(
                    f"invalid parameter `{name}`: {len(blocks)} partitions for the data's "
                    f"{len(data_blocks)}; give it the data's partitions"
                )
            columns[name] = blocks
        none = [None] * len(data_blocks)
        packed = [
            delayed(_pack)(i, x, y, w, q)
            for i, (x, y, w, q) in enumerate(
                zip(
                    data_blocks,
                    columns.get("label", none),
                    columns.get("weight", none),
                    columns.get("qid", none),
                )
            )
        ]
        #: One future per partition, holding its rows where Dask put them.
        c: Any = client
        self._parts: list[Future[_Part]] = c.compute(packed)
        _dist.wait(self._parts)
        summaries: list[_Summary] = c.gather(c.map(_summarise, self._parts))
        self._rows = [s.rows for s in summaries]
        self._group = None if group is None else _group_array(group, sum(self._rows))
        #: Whether a run of partitions may end after each partition but the last.
        self._cuttable = _cuttable(summaries, self._group)

    def num_row(self) -> int:
        """Rows."""
        return sum(self._rows)

    def num_col(self) -> int:
        """Features."""
        return self.n_features

    @property
    def npartitions(self) -> int:
        """Partitions."""
        return len(self._parts)

    def __repr__(self) -> str:
        return (
            f"<sapwood.dask.DaskDataset {self.num_row()} rows x {self.num_col()} features, "
            f"{self.npartitions} partitions>"
        )

    def _locations(self) -> list[set[str]]:
        """The workers holding each partition."""
        c: Any = self.client
        who_has = c.who_has(self._parts)
        return [set(who_has.get(f.key, ())) for f in self._parts]

    def _group_sizes(self, start: int, stop: int) -> Optional[npt.NDArray[np.uint32]]:
        """The sizes of the queries of rows ``start..stop`` (which never cut a query)."""
        if self._group is None:
            return None
        ends = np.cumsum(self._group, dtype=np.int64)
        first = int(np.searchsorted(ends, start, side="right"))
        last = int(np.searchsorted(ends, stop, side="left"))
        return self._group[first : last + 1] if stop > start else self._group[:0]


def _group_array(group: Any, rows: int) -> npt.NDArray[np.uint32]:
    """Query sizes as uint32, checked against the rows."""
    sizes = _group_sizes(group)
    total = int(sizes.sum(dtype=np.int64))
    if total != rows:
        raise DataError(
            f"invalid parameter `group`: the {len(sizes)} query sizes add up to {total} rows "
            f"but the data has {rows}"
        )
    return sizes


def _cuttable(summaries: Sequence[_Summary], group: Optional[npt.NDArray[np.uint32]]) -> list[bool]:
    """For each partition boundary (after partition i, i < last), whether a run may end
    there: never inside a query (of ``group`` sizes, or of the partitions' query ids)."""
    n = len(summaries)
    out = [True] * max(n - 1, 0)
    if group is not None:
        ends = set(np.cumsum(group, dtype=np.int64).tolist())
        at = 0
        for i in range(n - 1):
            at += summaries[i].rows
            out[i] = at == 0 or at in ends
        return out
    last: Optional[int] = None
    for i in range(n - 1):
        if summaries[i].last_qid is not None:
            last = summaries[i].last_qid
        nxt = next((s.first_qid for s in summaries[i + 1 :] if s.rows), None)
        out[i] = last is None or nxt is None or last != nxt
    return out


# ---- the plan: which worker trains which partitions ------------------------------------


class _Run(NamedTuple):
    """One rank's share: its worker and its partitions, contiguous and in order."""

    worker: str
    partitions: list[int]
    row_offset: int
    rows: int


def _split(rows: Sequence[int], cuttable: Sequence[bool], k: int) -> list[list[int]]:
    """At most ``k`` contiguous runs of partitions, each with rows, balanced by rows, cut
    only where ``cuttable``; every partition is in one run."""
    # units: partitions glued where a run may not end, with their rows
    units: list[list[int]] = [[0]]
    for i in range(1, len(rows)):
        if cuttable[i - 1]:
            units.append([i])
        else:
            units[-1].append(i)
    sizes = [sum(rows[p] for p in u) for u in units]
    # empty units join the unit before them (or, at the start, the first one with rows)
    merged: list[list[int]] = []
    merged_rows: list[int] = []
    pending: list[int] = []
    for u, s in zip(units, sizes):
        if s == 0 and merged:
            merged[-1].extend(u)
        elif s == 0:
            pending.extend(u)
        else:
            merged.append(pending + u)
            merged_rows.append(s)
            pending = []
    if not merged:
        return [pending]
    k = max(1, min(k, len(merged)))
    total = sum(merged_rows)
    bounds = np.cumsum([0, *merged_rows]).tolist()
    cuts = [0]
    for j in range(1, k):
        target = total * j / k
        lo, hi = cuts[-1] + 1, len(merged) - (k - j)
        best = min(range(lo, hi + 1), key=lambda c: (abs(bounds[c] - target), c))
        cuts.append(best)
    cuts.append(len(merged))
    return [
        [p for unit in merged[a:b] for p in unit] for a, b in zip(cuts[:-1], cuts[1:])
    ]


def _assign(gain: Sequence[Sequence[int]]) -> list[int]:
    """A distinct column for each row maximising the total gain (rows <= columns): the
    Hungarian algorithm, O(rows² × columns)."""
    n, m = len(gain), len(gain[0])
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    match, way = [0] * (m + 1), [0] * (m + 1)
    for i in range(1, n + 1):
        match[0], j0 = i, 0
        minv, used = [inf] * (m + 1), [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = match[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -gain[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    out = [0] * n
    for j in range(1, m + 1):
        if match[j]:
            out[match[j] - 1] = j - 1
    return out


def _plan(rows: Sequence[int], cuttable: Sequence[bool], holders: Sequence[set[str]]) -> list[_Run]:
    """The ranks in order: runs of partitions balanced by rows, one per worker holding
    data, each given to the worker that already holds most of its rows."""
    workers = sorted(set().union(*holders)) if holders else []
    if not workers:
        raise DataError(
            "invalid parameter `dtrain`: its partitions are on no Dask worker (were its "
            "workers lost?)"
        )
    runs = _split(rows, cuttable, len(workers))
    gain = [[sum(rows[p] for p in run if w in holders[p]) for w in workers] for run in runs]
    chosen = _assign(gain)
    out, offset = [], 0
    for run, col in zip(runs, chosen):
        n = sum(rows[p] for p in run)
        out.append(_Run(workers[col], run, offset, n))
        offset += n
    return out


# ---- the training task -----------------------------------------------------------------


class _Meta(NamedTuple):
    """How a dataset's partitions become a :class:`sapwood.Dataset`."""

    categorical_features: CategoricalSpec
    feature_names: Optional[list[str]]
    missing: Optional[float]


def _meta(d: DaskDataset) -> _Meta:
    return _Meta(d.categorical_features, d.feature_names, d.missing)


def _concat(values: list[Any]) -> Any:
    """Partitions' values (frames or arrays) one after another."""
    if len(values) == 1:
        return values[0]
    if _data.is_pandas_frame(values[0]):
        import pandas as pd

        return pd.concat(values, axis=0, ignore_index=True)
    return np.concatenate(values, axis=0)


def _local_dataset(
    parts: list[_Part], meta: _Meta, group: Optional[npt.NDArray[np.uint32]]
) -> Dataset:
    """A :class:`sapwood.Dataset` of partitions, in order."""
    labels = [p.label for p in parts if p.label is not None]
    weights = [p.weight for p in parts if p.weight is not None]
    qids = [p.qid for p in parts if p.qid is not None]
    return Dataset(
        _concat([p.data for p in parts]),
        label=_concat(labels) if labels else None,
        weight=_concat(weights) if weights else None,
        group=group,
        qid=_concat(qids) if qids and group is None else None,
        categorical_features=meta.categorical_features,
        feature_names=meta.feature_names,
        missing=meta.missing,
    )


class _Job(NamedTuple):
    """What every rank is told: the parameters and how to reach the others."""

    pairs: list[tuple[str, str]]
    user_names: dict[str, str]
    world: int
    n_total: int
    coordinator: str
    token: str
    timeout: float
    bind: Optional[str]


def _train_rank(
    job: _Job,
    rank: int,
    row_offset: int,
    parts: list[_Part],
    meta: _Meta,
    group: Optional[npt.NDArray[np.uint32]],
    evals: list[tuple[str, list[_Part], _Meta, Optional[npt.NDArray[np.uint32]]]],
    callbacks: list[Callback],
) -> Optional[Booster]:
    """Trains one rank on its Dask worker; rank 0 returns the booster, the others None."""
    dtrain = _local_dataset(parts, meta, group)
    native_evals = [(name, _local_dataset(p, m, g)._native) for name, p, m, g in evals]
    pairs = list(job.pairs)
    if not any(canonical_param(k) == "threads" for k, _ in pairs):
        # as xgboost.dask: as many threads as the worker runs tasks at once
        pairs.append(("threads", str(_worker_threads())))
    listener = None
    if rank == 0:
        listener = (getattr(get_worker(), _LISTENERS, None) or {}).pop(job.token, None)
    try:
        native = _sapwood.train_tcp(
            pairs, dtrain._native, row_offset, job.n_total, rank, job.world, job.coordinator,
            job.token, job.timeout, job.bind, native_evals, _callback_hook(callbacks),
            listener,
        )
    except ParameterError as e:
        raise _params.renamed(e, job.user_names) from None
    return Booster._wrap(_with_input_types(native, dtrain)) if rank == 0 else None


def _worker_threads() -> int:
    """Threads of the Dask worker running this task."""
    worker: Any = get_worker()
    threads: Any = getattr(worker.state, "nthreads", None) or worker.nthreads
    return max(int(threads or 1), 1)


#: The attribute of a Dask worker holding rank 0's listeners until its task takes them.
_LISTENERS = "_sapwood_listeners"


def _listen(token: str, bind: Optional[str], dask_worker: Any = None) -> int:
    """Binds rank 0's listener on this worker and keeps it there, under the job's token,
    for rank 0's task; returns its port. Bound now, not merely found free: a free port can
    be taken by any socket opened before the task would bind it."""
    listener = _sapwood.listen(get_address_host(dask_worker.address), bind)
    held: dict[str, Any] = getattr(dask_worker, _LISTENERS, None) or {}
    held[token] = listener
    setattr(dask_worker, _LISTENERS, held)
    return listener.port


def _drop_listener(token: str, dask_worker: Any = None) -> None:
    """Closes the job's listener if rank 0's task never took it."""
    listener = (getattr(dask_worker, _LISTENERS, None) or {}).pop(token, None)
    if listener is not None:
        listener.close()


def _release_listener(client: Client, worker: str, token: str) -> None:
    """Closes the job's listener on rank 0's worker if its task never took it. A worker that
    is gone took its listener with it, and is not waited for; nothing here may replace the
    job's own error."""
    try:
        if worker in client.scheduler_info()["workers"]:
            client.run(_drop_listener, token, workers=[worker], on_error="ignore")
    except Exception:  # noqa: BLE001 - the job's error, if any, is the one to raise
        pass


def _coordinator(client: Client, worker: str, token: str, bind: Optional[str]) -> str:
    """``host:port`` rank 0 listens on: its worker's host and the port of the listener
    bound there for the job (see :func:`_listen`)."""
    port = client.run(_listen, token, bind, workers=[worker])[worker]
    host = get_address_host(worker)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _timeout(comm_timeout: Optional[float], pairs: list[tuple[str, str]]) -> float:
    """``comm_timeout`` seconds: the argument, else the parameter, else 60."""
    given = next((v for k, v in pairs if canonical_param(k) == "comm_timeout"), None)
    value: Any = comm_timeout if comm_timeout is not None else given
    if value is None:
        return DEFAULT_COMM_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ParameterError(
            f"invalid parameter `comm_timeout`: {value!r} is not a number of seconds"
        ) from None
    if not (np.isfinite(seconds) and seconds > 0):
        raise ParameterError(
            f"invalid parameter `comm_timeout`: {value!r} must be a finite number of seconds > 0"
        )
    return seconds


def _run_job(client: Client, futures: list[Future[Optional[Booster]]]) -> Optional[Booster]:
    """Waits for every rank; the first error ends the job and is raised. A rank whose
    worker died never finishes (its task waits for a worker that is gone) or is cancelled
    (when the partitions it needed died with the worker): the other ranks' errors, bounded
    by the timeout, end the job in the first case, the cancellation in the second."""
    try:
        pending = list(futures)
        while pending:
            try:
                _dist.wait(pending, return_when="FIRST_COMPLETED")
            except CancelledError:
                pass  # the cancelled future is named below
            for f in pending:
                if f.status == "error":
                    f.result()  # raises the rank's error
                if f.status in ("cancelled", "lost"):
                    rank = futures.index(f)
                    raise _sapwood.BackendError(
                        f"rank {rank} of the Dask training job was {f.status} (its worker, or "
                        f"the worker holding its partitions, was lost); task {f.key}"
                    )
            pending = [f for f in pending if f.status != "finished"]
        result: Optional[Booster] = futures[0].result()
        return result
    finally:
        c: Any = client
        c.cancel([f for f in futures if f.status not in ("finished", "error")])


# ---- the public training function ------------------------------------------------------


def _train_pairs(
    params: Params,
    num_boost_round: int,
    early_stopping_rounds: Optional[int],
    callbacks: Optional[Sequence[Callback]],
) -> tuple[list[tuple[str, str]], dict[str, str], list[Callback], Optional[int]]:
    """The engine's parameters, as :func:`sapwood.train` writes them, with the callbacks
    to run and the rounds of early stopping."""
    normalised = _params.normalise(params)
    for given, name in (
        (normalised.objective_fn, "objective"),
        (normalised.metric_fns or None, "eval_metric"),
        (normalised.scale_pos_weight, "scale_pos_weight"),
    ):
        if given is not None:
            raise ParameterError(
                f"invalid parameter `{name}`: a custom objective or metric and "
                "scale_pos_weight are not supported by sapwood.dask; use built-in ones and "
                "sample weights"
            )
    pairs, user_names = _with_rounds(normalised, num_boost_round)
    sorted_callbacks = _sort_callbacks(callbacks, early_stopping_rounds)
    pairs = _with_stopping(pairs, user_names, sorted_callbacks.stopping_rounds)
    stopping = _stopping_text(pairs)
    rounds = None if stopping is None else int(stopping)
    try:
        _sapwood.check_params(pairs)
    except ParameterError as e:
        raise _params.renamed(e, user_names) from None
    return pairs, user_names, sorted_callbacks.run, rounds


def train(
    client: Client,
    params: Params,
    dtrain: DaskDataset,
    num_boost_round: int = 100,
    *,
    evals: Sequence[tuple[DaskDataset, str]] = (),
    early_stopping_rounds: Optional[int] = None,
    callbacks: Optional[Sequence[Callback]] = None,
    verbose_eval: Union[bool, int] = True,
    evals_result: Optional[EvalsResult] = None,
    comm_timeout: Optional[float] = None,
    bind: Optional[str] = None,
) -> TrainingOutput:
    """Trains a booster on a Dask cluster, as ``xgboost.dask.train``; returns
    ``{"booster": Booster, "history": evals_result}``.

    The model is the one :func:`sapwood.train` saves for the same rows in partition order,
    byte for byte (see the module's description for how partitions become ranks).

    Parameters
    ----------
    client : distributed.Client
        The cluster's client (synchronous).
    params : dict or list of (str, value) pairs
        As :func:`sapwood.train`'s. Custom objectives and metrics (Python functions) and
        ``scale_pos_weight`` are not supported; ``workers`` must stay 1 (each Dask worker
        is one worker). ``threads`` defaults to the Dask worker's threads.
    dtrain : DaskDataset
        Training data with its label.
    num_boost_round : int, default 100
        Boosting rounds.
    evals : list of (DaskDataset, str) pairs, default ()
        Datasets reported after every round under the given names (by rank 0, to whose
        worker their partitions are moved); early stopping watches the last metric of the
        last pair.
    early_stopping_rounds : int, optional
        As :func:`sapwood.train`'s.
    callbacks : list of Callback, optional
        Called after every round on rank 0, **in its Dask worker's process** (they are
        pickled there): one returning True stops every rank. Read the metrics from the
        returned ``history`` rather than from a callback's side effects.
    verbose_eval : bool or int, default True
        Print the metrics every round (or every n rounds) on rank 0's worker.
    evals_result : dict, optional
        Filled with the metrics history, as in :func:`sapwood.train`.
    comm_timeout : float, optional
        The longest wait for a peer, in seconds (default: the ``comm_timeout`` parameter,
        else 60): a worker that dies or goes silent makes ``train`` raise within it.
    bind : str, optional
        The IP address the ranks' listeners bind (default: loopback for a loopback
        cluster, else every interface).

    Returns
    -------
    dict
        ``{"booster": Booster, "history": {dataset: {metric: [value per round]}}}``.

    Raises
    ------
    ParameterError
        An unknown parameter or a value out of range (named as given).
    DataError, LabelError
        Unusable data or labels.
    BackendError
        A worker died or went silent, or a rank could not reach another.
    """
    if not isinstance(dtrain, DaskDataset):
        raise DataError("invalid parameter `dtrain`: expected a sapwood.dask.DaskDataset")
    if not dtrain.has_label:
        raise DataError("invalid parameter `dtrain`: the training DaskDataset has no label")
    pairs, user_names, run, stopping = _train_pairs(
        params, num_boost_round, early_stopping_rounds, callbacks
    )
    eval_sets = _eval_pairs(evals, DaskDataset)
    _require_evals(stopping, bool(eval_sets))
    run.extend(_printing(verbose_eval, bool(eval_sets)))
    timeout = _timeout(comm_timeout, pairs)
    plan = _plan(dtrain._rows, dtrain._cuttable, dtrain._locations())
    token = secrets.token_hex(16)
    coordinator = _coordinator(client, plan[0].worker, token, bind)
    try:
        job = _Job(
            pairs=pairs,
            user_names=user_names,
            world=len(plan),
            n_total=dtrain.num_row(),
            coordinator=coordinator,
            token=token,
            timeout=timeout,
            bind=bind,
        )
        eval_args = [
            (name, d._parts, _meta(d), d._group_sizes(0, d.num_row())) for d, name in eval_sets
        ]
        futures = [
            client.submit(
                _train_rank,
                job,
                rank,
                r.row_offset,
                [dtrain._parts[p] for p in r.partitions],
                _meta(dtrain),
                dtrain._group_sizes(r.row_offset, r.row_offset + r.rows),
                eval_args if rank == 0 else [],
                run if rank == 0 else [],
                workers=[r.worker],
                allow_other_workers=False,
                pure=False,
            )
            for rank, r in enumerate(plan)
        ]
        booster = _run_job(client, futures)
    finally:
        _release_listener(client, plan[0].worker, token)
    if booster is None:
        raise _sapwood.InternalError("internal error (please report it): rank 0 returned no model")
    history = booster.evals_result()
    if evals_result is not None:
        evals_result.clear()
        evals_result.update(history)
    return {"booster": booster, "history": history}


# ---- estimators ------------------------------------------------------------------------


def _predict_part(part: Any, estimator: Any, method: str, kwargs: dict[str, Any]) -> Any:
    """Predicts one partition with a plain estimator's ``method``."""
    out = getattr(estimator, method)(part, **kwargs)
    if _data.is_pandas_frame(part):
        import pandas as pd

        if out.ndim == 1:
            return pd.Series(out, index=part.index)
        return pd.DataFrame(out, index=part.index)
    return out


class _DaskModel(_SapwoodModel):
    """Fitting on Dask and predicting partition by partition, shared by the estimators."""

    #: The plain estimator predictions are made with.
    _local_class: type[_SapwoodModel] = SapwoodRegressor

    @property
    def client(self) -> Client:
        """The Dask client ``fit`` and ``predict`` use (default: the current client)."""
        client: Optional[Client] = getattr(self, "_client", None)
        if client is None:
            client = _dist.default_client()
        return client

    @client.setter
    def client(self, client: Client) -> None:
        self._client = client

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = dict(super().__getstate__())
        state.pop("_client", None)
        return state

    def _comm_timeout(self) -> Optional[float]:
        value = getattr(self, "comm_timeout", None)
        return None if value is None else float(value)

    def _dask_params(self) -> list[tuple[str, Any]]:
        """The engine's parameters; without ``n_jobs`` each rank uses its worker's threads."""
        params = self._engine_params()
        if self.n_jobs is None:
            params = [(k, v) for k, v in params if k != "n_jobs"]
        return params

    def _dataset(
        self, X: Any, y: Any, weight: Any, name: str, qid: Any = None, group: Any = None
    ) -> DaskDataset:
        if not isinstance(X, (dd.DataFrame, da.Array)):
            raise DataError(
                f"invalid parameter `{name}`: expected a dask DataFrame or dask Array, got "
                f"{type(X).__name__}; use the sapwood.sklearn estimators for local data"
            )
        return DaskDataset(
            self.client, X, y, weight, qid=qid, group=group,
            categorical_features=self.categorical_features, missing=self.missing,
        )

    def _fit_dask(
        self,
        X: Any,
        y: Any,
        params: list[tuple[str, Any]],
        sample_weight: Any,
        fit_args: _FitArgs,
        eval_queries: Optional[list[tuple[Any, Any]]] = None,
        encode: Callable[[Any], Any] = lambda y: y,
    ) -> None:
        """Trains the booster on the cluster, as the plain estimators' ``_fit`` trains it
        locally (``eval_queries``: one ``(group, qid)`` per evaluation set)."""
        group, qid = fit_args.queries
        dtrain = self._dataset(X, y, sample_weight, "X", qid=qid, group=group)
        evals = [
            (
                self._dataset(
                    e.X, encode(e.y), e.weight, f"eval_set[{e.position}]", qid=e.qid, group=e.group
                ),
                e.name,
            )
            for e in fit_args.evaluation_sets(eval_queries or None)
        ]
        options = self._train_options(params, fit_args, bool(evals))
        result: EvalsResult = {}
        out = train(
            self.client, options.params, dtrain, evals=evals,
            early_stopping_rounds=options.early_stopping_rounds, callbacks=options.callbacks,
            verbose_eval=options.verbose_eval, evals_result=result,
            comm_timeout=self._comm_timeout(),
        )
        self._Booster = out["booster"]
        self.evals_result_ = result
        self.n_features_in_ = dtrain.num_col()
        if isinstance(X, dd.DataFrame):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _builtin_objective(self) -> Optional[str]:
        """The ``objective`` given; a callable (a custom objective, which the Dask
        estimators do not support) is refused."""
        objective = self.objective
        if callable(objective):
            raise ParameterError(
                "invalid parameter `objective`: custom objectives are not supported by the "
                "Dask estimators"
            )
        return objective

    def _local(self) -> Any:
        """A plain estimator with this one's parameters and model, for one partition."""
        local = self._local_class()
        local.set_params(**self.get_params(deep=False))
        for name in ("_Booster", "evals_result_", "n_features_in_", "feature_names_in_",
                     "classes_", "n_classes_", "_classes_kinds"):
            if hasattr(self, name):
                setattr(local, name, getattr(self, name))
        return local

    def _map_predict(
        self, X: Any, method: str, columns: int, dtype: np.dtype[Any], **kwargs: Any
    ) -> Any:
        """``method`` of the plain estimator on every partition: a dask Array for a dask
        Array, a dask Series (DataFrame for several columns) for a dask DataFrame."""
        self.get_booster()
        local = self._local()
        if isinstance(X, dd.DataFrame):
            import pandas as pd

            meta: Any = (
                pd.Series([], dtype=dtype)
                if columns == 0
                else pd.DataFrame({i: pd.Series([], dtype=dtype) for i in range(columns)})
            )
            frame: Any = X
            return frame.map_partitions(_predict_part, local, method, kwargs, meta=meta)
        if isinstance(X, da.Array):
            X = _blocks_of_rows(X)
            if columns == 0:
                return X.map_blocks(
                    _predict_part, local, method, kwargs, drop_axis=1, dtype=dtype
                )
            return X.map_blocks(
                _predict_part, local, method, kwargs, chunks=(X.chunks[0], (columns,)),
                dtype=dtype,
            )
        raise DataError(
            "invalid parameter `X`: expected a dask DataFrame or dask Array, got "
            f"{type(X).__name__}"
        )

    def _output_columns(self) -> int:
        """Columns of ``predict``'s output: 0 for one value per row."""
        groups = self.get_booster()._model.groups
        return 0 if groups == 1 else groups


#: The Dask estimator ``fit`` returns (the class it is called on).
_DM = TypeVar("_DM", bound="_DaskXYModel")


class _DaskXYModel(_DaskModel):
    """The Dask regressor's and classifier's ``fit``; each checks its settings and labels
    and says its objective and how its labels become training targets."""

    def fit(
        self: _DM,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Any = None,
        eval_sample_weight: Optional[Sequence[Any]] = None,
        *,
        sample_weight_eval_set: Optional[Sequence[Any]] = None,
        eval_names: Optional[Sequence[str]] = None,
        eval_metric: Union[str, Sequence[str], None] = None,
        early_stopping_rounds: Optional[int] = None,
        verbose: Union[bool, int, None] = None,
        callbacks: Optional[Sequence[Callback]] = None,
        feature_weights: Any = None,
    ) -> _DM:
        """Trains on dask ``X`` and labels ``y`` (and ``sample_weight``, ``eval_set`` pairs
        and their weights, all dask collections); the other arguments are the plain
        estimator's (:meth:`SapwoodRegressor.fit`)."""
        self._check_targets(y)
        params = self._dask_params()
        _add_feature_weights(params, feature_weights)
        params.extend(self._dask_objective_params())
        args = _FitArgs(
            eval_set,
            eval_sample_weight if eval_sample_weight is not None else sample_weight_eval_set,
            None, eval_names, eval_metric, early_stopping_rounds, verbose, callbacks,
        )
        y = self._encode_dask(y)
        self._fit_dask(X, y, params, sample_weight, args, encode=self._encode_dask)
        return self

    def _check_targets(self, y: Any) -> None:
        """Checks the settings against the estimator's task, and learns what the labels
        tell (a classifier's classes)."""
        raise NotImplementedError

    def _dask_objective_params(self) -> list[tuple[str, Any]]:
        """The engine's objective parameters."""
        raise NotImplementedError

    def _encode_dask(self, y: Any) -> Any:
        """Dask labels as training targets."""
        return y


class DaskSapwoodRegressor(RegressorMixin, _DaskXYModel):  # type: ignore[misc]
    """:class:`~sapwood.sklearn.SapwoodRegressor` trained on a Dask cluster (as
    ``xgboost.dask.DaskXGBRegressor``): ``fit`` takes dask DataFrames or Arrays and trains
    the partitions where they are (see :mod:`sapwood.dask`); ``predict`` returns a dask
    collection; :meth:`get_booster` the plain :class:`sapwood.Booster`. Parameters are the
    regressor's, plus ``comm_timeout`` (keyword; seconds, default 60): a worker that dies
    makes ``fit`` raise within it. The ``client`` attribute is the Dask client (default:
    the current one). Custom objectives are not supported.
    """

    _local_class = SapwoodRegressor

    def _check_targets(self, y: Any) -> None:
        if self.class_weight is not None or self.scale_pos_weight is not None:
            raise ParameterError(
                "invalid parameter `class_weight`: class weights are for classifiers"
            )
        given = self._builtin_objective()
        objective = given if given is not None else "reg:squarederror"
        if _is_classification(objective):
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is a classification objective; "
                "use DaskSapwoodClassifier"
            )

    def _dask_objective_params(self) -> list[tuple[str, Any]]:
        return [("objective", self.objective if self.objective is not None else "reg:squarederror")]

    def predict(
        self, X: Any, output_margin: bool = False, iteration_range: Optional[tuple[int, int]] = None
    ) -> Any:
        """Predicted values of every partition, a dask collection (see
        :meth:`SapwoodRegressor.predict`)."""
        return self._map_predict(
            X, "predict", self._output_columns(), np.dtype(np.float32),
            output_margin=output_margin, iteration_range=iteration_range,
        )


def _encode_part(part: Any, classes: npt.NDArray[Any]) -> Any:
    """A partition's class labels as their codes (float32), unseen classes refused."""
    values = np.asarray(part.to_numpy() if hasattr(part, "to_numpy") else part).ravel()
    index = np.clip(np.searchsorted(classes, values), 0, len(classes) - 1)
    unseen = classes[index] != values
    if np.any(unseen):
        row = int(np.argmax(unseen))
        raise LabelError(
            f"invalid parameter `y`: label {values[row]!r} (row {row} of its partition) is "
            "not a class of the training labels"
        )
    codes = index.astype(np.float32)
    if hasattr(part, "index") and hasattr(part, "to_numpy"):
        import pandas as pd

        return pd.Series(codes, index=part.index)
    return codes


def _dist_unique(labels: Any) -> Any:
    """The distinct values of a dask Array (lazy)."""
    unique: Any = da.unique
    return unique(labels.ravel())


class DaskSapwoodClassifier(ClassifierMixin, _DaskXYModel):  # type: ignore[misc]
    """:class:`~sapwood.sklearn.SapwoodClassifier` trained on a Dask cluster (as
    ``xgboost.dask.DaskXGBClassifier``); the classes are found with one pass over the
    labels. ``predict`` and ``predict_proba`` return dask collections. Parameters are the
    classifier's, plus ``comm_timeout`` (keyword, seconds). ``class_weight``,
    ``scale_pos_weight`` and custom objectives are not supported (give ``sample_weight``).
    """

    _local_class = SapwoodClassifier

    def _check_targets(self, y: Any) -> None:
        for name in ("class_weight", "scale_pos_weight"):
            if getattr(self, name) is not None:
                raise ParameterError(
                    f"invalid parameter `{name}`: not supported by the Dask estimators; give "
                    "`sample_weight`"
                )
        self._builtin_objective()
        if isinstance(y, dd.DataFrame):
            y = y.iloc[:, 0]
        if not isinstance(y, (dd.Series, da.Array)):
            raise DataError(
                f"invalid parameter `y`: expected a dask collection, got {type(y).__name__}"
            )
        labels: Any = y
        found = labels.unique() if isinstance(y, dd.Series) else _dist_unique(labels)
        _learn_classes(self, np.asarray(found.compute()).ravel(), "DaskSapwoodClassifier")

    def _dask_objective_params(self) -> list[tuple[str, Any]]:
        params: list[tuple[str, Any]] = self._local()._objective_params()
        return params

    def _encode_dask(self, y: Any) -> Any:
        """Dask class labels as their codes, partition by partition."""
        if isinstance(y, dd.DataFrame):
            y = y.iloc[:, 0]
        labels: Any = y
        if isinstance(y, dd.Series):
            return labels.map_partitions(_encode_part, self.classes_, meta=(y.name, np.float32))
        if isinstance(y, da.Array):
            return labels.ravel().map_blocks(_encode_part, self.classes_, dtype=np.float32)
        raise DataError(
            f"invalid parameter `y`: expected a dask collection, got {type(y).__name__}"
        )

    def predict_proba(self, X: Any, iteration_range: Optional[tuple[int, int]] = None) -> Any:
        """Class probabilities of every partition, one column per class, a dask collection
        (see :meth:`SapwoodClassifier.predict_proba`)."""
        return self._map_predict(
            X, "predict_proba", self.n_classes_, np.dtype(np.float64),
            iteration_range=iteration_range,
        )

    def predict(
        self, X: Any, output_margin: bool = False, iteration_range: Optional[tuple[int, int]] = None
    ) -> Any:
        """The most probable class of every row (margins with ``output_margin``), a dask
        collection."""
        if output_margin:
            return self._map_predict(
                X, "predict", self._output_columns(), np.dtype(np.float32),
                output_margin=True, iteration_range=iteration_range,
            )
        return self._map_predict(
            X, "predict", 0, self.classes_.dtype, iteration_range=iteration_range
        )


class DaskSapwoodRanker(_DaskModel):
    """:class:`~sapwood.sklearn.SapwoodRanker` trained on a Dask cluster (as
    ``xgboost.dask.DaskXGBRanker``). ``fit`` takes ``qid`` (a dask collection partitioned
    like ``X``, or a ``qid`` column of a dask DataFrame ``X``) or ``group`` (query sizes in
    row order, a numpy array); a query's rows must be contiguous and may span partitions.
    Parameters are the ranker's, plus ``comm_timeout`` (keyword, seconds).
    """

    _local_class = SapwoodRanker

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        group: Any = None,
        qid: Any = None,
        sample_weight: Any = None,
        eval_set: Any = None,
        eval_group: Optional[Sequence[Any]] = None,
        eval_qid: Optional[Sequence[Any]] = None,
        eval_sample_weight: Optional[Sequence[Any]] = None,
        sample_weight_eval_set: Optional[Sequence[Any]] = None,
        eval_names: Optional[Sequence[str]] = None,
        eval_metric: Union[str, Sequence[str], None] = None,
        eval_at: Union[int, Sequence[int], None] = None,
        early_stopping_rounds: Optional[int] = None,
        verbose: Union[bool, int, None] = None,
        callbacks: Optional[Sequence[Callback]] = None,
        feature_weights: Any = None,
    ) -> DaskSapwoodRanker:
        """Trains on dask ``X``, relevance ``y`` and the queries ``qid`` or ``group``;
        arguments as :meth:`SapwoodRanker.fit`'s (dask collections for the data)."""
        X, qid = _qid_column(X, qid)
        objective = self._ranking_objective(group, qid, "per row", custom=None)
        params = _ranking_params(self._dask_params(), objective, eval_at, feature_weights)
        eval_set, queries = _eval_queries(eval_set, eval_group, eval_qid)
        args = _FitArgs(
            eval_set,
            eval_sample_weight if eval_sample_weight is not None else sample_weight_eval_set,
            None, eval_names, eval_metric, early_stopping_rounds, verbose, callbacks,
            queries=(group, qid),
        )
        self._fit_dask(X, y, params, sample_weight, args, eval_queries=queries)
        return self

    def predict(
        self, X: Any, output_margin: bool = False, iteration_range: Optional[tuple[int, int]] = None
    ) -> Any:
        """One ranking score per row, a dask collection (a dask DataFrame's ``qid`` column
        is dropped)."""
        X, _ = _qid_column(X, None)
        return self._map_predict(
            X, "predict", 0, np.dtype(np.float32), output_margin=output_margin,
            iteration_range=iteration_range,
        )


def _eval_queries(
    eval_set: Any, eval_group: Optional[Sequence[Any]], eval_qid: Optional[Sequence[Any]]
) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """The evaluation sets with their dask DataFrames' ``qid`` columns taken out, and each
    set's ``(group, qid)``."""
    eval_set = list(eval_set or ())
    queries: list[tuple[Any, Any]] = [(None, None)] * len(eval_set)
    for name, given in (("eval_group", eval_group), ("eval_qid", eval_qid)):
        if given is not None and len(list(given)) != len(eval_set):
            raise ParameterError(
                f"invalid parameter `{name}`: {len(list(given))} arrays for "
                f"{len(eval_set)} evaluation sets"
            )
    for i, pair in enumerate(eval_set):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ParameterError(
                f"invalid parameter `eval_set`: item {i} is not an (X, y) pair"
            )
        eq = None if eval_qid is None else list(eval_qid)[i]
        eg = None if eval_group is None else list(eval_group)[i]
        Xe, eq = _qid_column(pair[0], eq)
        eval_set[i] = (Xe, pair[1])
        queries[i] = (eg, eq)
    return eval_set, queries


def _qid_column(X: Any, qid: Any) -> tuple[Any, Any]:
    """A dask DataFrame's ``qid`` column as the query ids, taken out of the features
    (XGBoost's convention, as :class:`~sapwood.sklearn.SapwoodRanker` follows it)."""
    if isinstance(X, dd.DataFrame) and "qid" in X.columns:
        if qid is not None:
            raise ParameterError(
                "invalid parameter `qid`: given, and X also has a `qid` column; give one"
            )
        return X.drop(columns="qid"), X["qid"]
    return X, qid

