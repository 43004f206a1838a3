"""The low-level API, shaped like XGBoost's and LightGBM's: ``Dataset``, ``train`` and
``Booster``."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, NamedTuple, Optional, Protocol, TypeVar, Union

import numpy as np
import numpy.typing as npt

from . import _data, _params, _sapwood
from ._data import CategoricalSpec
from ._params import Params, ParamValue, canonical_param
from ._sapwood import DataError, NativeBooster, NativeData, ParameterError, SchemaMismatchError

__all__ = [
    "Dataset",
    "Booster",
    "train",
    "cv",
    "RoundInfo",
    "Callback",
    "EvalsResult",
    "early_stopping",
    "log_evaluation",
    "record_evaluation",
]

#: Metrics per evaluation set per metric name, one value per round.
EvalsResult = dict[str, dict[str, list[float]]]

PathLike = Union[str, "os.PathLike[str]"]


class RoundInfo(NamedTuple):
    """What a callback learns after each boosting round.

    Attributes
    ----------
    iteration : int
        Zero-based round just completed.
    num_rounds : int
        Rounds requested.
    evaluation : dict of str to dict of str to float
        ``{dataset: {metric: value}}`` after this round, for every set in ``evals``.
    elapsed : float
        Seconds since training started.
    """

    #: Zero-based round just completed.
    iteration: int
    #: Rounds requested.
    num_rounds: int
    #: ``{dataset: {metric: value}}`` after this round.
    evaluation: dict[str, dict[str, float]]
    #: Seconds since training started.
    elapsed: float


class Callback(Protocol):
    """A training callback: any callable taking a :class:`RoundInfo`.

    :func:`train` and the estimators' ``fit`` call every callback after every boosting
    round, in the order given; training stops after the round when one returns True (the
    rounds so far are kept and :attr:`Booster.interrupted` is True). An exception raised by
    a callback stops training and is raised by ``train``. A plain function is a callback::

        def stop_after_a_minute(info: sapwood.RoundInfo) -> bool:
            return info.elapsed > 60

    Ready-made callbacks, named as in LightGBM: :func:`early_stopping`,
    :func:`log_evaluation` and :func:`record_evaluation`.

    Parameters
    ----------
    info : RoundInfo
        The round just completed (``iteration``, 0-based), the rounds requested
        (``num_rounds``), the metrics of every evaluation set after it (``evaluation``,
        ``{dataset: {metric: value}}``) and the seconds since training started
        (``elapsed``).

    Returns
    -------
    bool or None
        True to stop training after this round; False or None to go on.
    """

    def __call__(self, info: RoundInfo) -> Optional[bool]:
        """Called after each round; returning True stops training."""
        ...


class _EarlyStopping:
    """The callback :func:`early_stopping` returns: :func:`train` turns it into the
    engine's early stopping (``early_stopping_rounds``), so the best iteration is kept."""

    def __init__(self, stopping_rounds: int, min_delta: float = 0.0, verbose: bool = False) -> None:
        #: Whether :func:`train` prints the best round when training ends (LightGBM's lines).
        self.verbose = bool(verbose)
        if min_delta != 0:
            raise ParameterError(
                "invalid parameter `min_delta`: Sapwood's early stopping counts any "
                "improvement; leave min_delta at 0"
            )
        if isinstance(stopping_rounds, bool) or int(stopping_rounds) < 1:
            raise ParameterError(
                f"invalid parameter `stopping_rounds`: {stopping_rounds} must be at least 1"
            )
        self.stopping_rounds = int(stopping_rounds)

    def __call__(self, info: RoundInfo) -> Optional[bool]:
        """Does nothing: the engine stops, watching the last metric of the last set."""
        return None

    def __repr__(self) -> str:
        return f"sapwood.early_stopping({self.stopping_rounds})"


def early_stopping(
    stopping_rounds: int, first_metric_only: bool = False, verbose: bool = True,
    min_delta: float = 0.0,
) -> Callback:
    """A callback that stops training when the validation metric stops improving, as
    LightGBM's ``lightgbm.early_stopping``.

    It is the same as ``early_stopping_rounds=stopping_rounds`` in :func:`train` or the
    estimators: the last metric of the last evaluation set must improve at least once every
    ``stopping_rounds`` rounds; :attr:`Booster.best_iteration` and
    :attr:`Booster.best_score` record the best round.

    Parameters
    ----------
    stopping_rounds : int
        Rounds without improvement before training stops (at least 1).
    first_metric_only : bool, default False
        Accepted for LightGBM scripts; Sapwood always watches the **last** metric of the
        last evaluation set (XGBoost's rule), so put the metric to watch last.
    verbose : bool, default True
        When training ends, print the best round and its scores as LightGBM does
        (``Early stopping, best iteration is:`` then ``[21]\tvalid_0's logloss: 0.083``).
    min_delta : float, default 0.0
        Only 0 (any improvement counts) is supported.

    Returns
    -------
    Callback
        A callback to pass in ``callbacks``.
    """
    return _EarlyStopping(stopping_rounds, min_delta, verbose)


def log_evaluation(period: int = 1) -> Callback:
    """A callback printing the metrics every ``period`` rounds (and after the last one),
    as LightGBM's ``lightgbm.log_evaluation``; ``period=0`` prints nothing.

    Lines look like XGBoost's: ``[round]\tset-metric:value\tset-metric:value``.

    Parameters
    ----------
    period : int, default 1
        Rounds between two printed lines; 0 or less prints nothing.

    Returns
    -------
    Callback
        A callback to pass in ``callbacks``.
    """
    if period <= 0:
        return _silent
    return _print_evaluation(int(period))


def _silent(info: RoundInfo) -> None:
    return None


def record_evaluation(eval_result: EvalsResult) -> Callback:
    """A callback filling ``eval_result`` with the metrics history,
    ``{dataset: {metric: [value per round]}}``, as LightGBM's
    ``lightgbm.record_evaluation`` (the dict is emptied first).

    Parameters
    ----------
    eval_result : dict
        The dict to fill.

    Returns
    -------
    Callback
        A callback to pass in ``callbacks``.
    """
    if not isinstance(eval_result, dict):
        raise ParameterError("invalid parameter `eval_result`: expected a dict")
    eval_result.clear()

    def record(info: RoundInfo) -> None:
        for dataset, metrics in info.evaluation.items():
            for metric, value in metrics.items():
                eval_result.setdefault(dataset, {}).setdefault(metric, []).append(value)
        return None

    return record


class Dataset:
    """Training, evaluation or prediction data.

    ``data`` may be a numpy array (float32 or float64, C or Fortran order; a Fortran-
    ordered float32 array is read in place, never copied), a pandas DataFrame (``category``
    and string columns are categorical, nullable dtypes are supported, column names are
    kept), a polars DataFrame, a pyarrow Table or RecordBatch, a scipy.sparse matrix or
    array (any format; absent entries are missing values and stored zeros are zeros, as in
    XGBoost, and the dense matrix is never built), or a list of rows.

    ``label`` holds numbers or class labels (strings, ints or bools); ``weight`` holds
    non-negative sample weights. ``categorical_features`` is ``"auto"`` (detect from
    dtypes) or a list of column names or positions. ``missing`` is a value that stands
    for a missing value in numeric features (XGBoost's ``DMatrix(missing=...)``, e.g.
    ``-999``); NaN and nulls are always missing. ``reference`` (LightGBM's way to bin a
    validation set like its training set) is accepted and not needed: evaluation and
    prediction data are always binned with the model's cuts.

    ``group`` (XGBoost's and LightGBM's) or ``qid`` (XGBoost's) sets the query groups a
    ranking objective (``rank:ndcg``, ``rank:map``, ``rank:pairwise``) and the ranking
    metrics (``ndcg@k``, ``map@k``, ``pre@k``) need: ``group`` is the number of rows of
    each query in row order (adding up to the rows), ``qid`` one query id per row, with
    the rows of a query contiguous (sort by ``qid``; the error names the row where a query
    comes back). With groups, ``weight`` may hold one weight per query (XGBoost's
    ranking weights, spread over the query's rows) or one per row (LightGBM's).

    ``base_margin`` (XGBoost) or ``init_score`` (LightGBM) is each row's starting margin,
    shape ``(n,)``, or ``(n, classes)`` for multiclass models: training starts these rows
    there instead of at the model's base score, and predicting on this Dataset adds the
    trees to it instead of to the model's base score (see :meth:`set_base_margin`).

    The Dataset keeps a reference to numpy arrays it reads in place: changing such an
    array afterwards changes the data (not with ``missing``, which works on a copy).
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        weight: Any = None,
        group: Any = None,
        categorical_features: CategoricalSpec = "auto",
        feature_names: Optional[Sequence[str]] = None,
        missing: Optional[float] = None,
        reference: Optional[Dataset] = None,
        base_margin: Any = None,
        init_score: Any = None,
        qid: Any = None,
    ) -> None:
        if group is not None and qid is not None:
            raise ParameterError(
                "invalid parameter `qid`: given with `group`; give the query groups one way "
                "(`group`: rows per query, `qid`: a query id per row)"
            )
        queries = None
        if group is not None:
            queries = _group_sizes(group)
        elif qid is not None:
            queries = _runs(_qid_array(qid))
        if weight is not None and queries is not None:
            weight = _query_weights(weight, queries)
        if base_margin is not None and init_score is not None:
            raise ParameterError(
                "invalid parameter `init_score`: given with `base_margin`, which is the same "
                "thing (XGBoost's name); give one"
            )
        data = _data.replace_missing(data, missing)
        # kept so that cv() and scale_pos_weight can rebuild it from the original input
        self._source = (data, label, weight, categorical_features, feature_names)
        self._native: NativeData = _data.to_native(
            data,
            label=label,
            weight=weight,
            categorical_features=categorical_features,
            feature_names=feature_names,
        )
        #: What each column holds (``number``, ``bool``, ``strings``, ``text``), recorded
        #: in models trained on it so that prediction refuses booleans where numbers were
        #: trained and exports keep text levels as text.
        self._input_types: Optional[list[str]] = _data.input_types(data)
        #: Each row's base margin as given (``(n,)`` or ``(n, k)``, float32), or None.
        self._base_margin: Optional[npt.NDArray[np.float32]] = None
        if base_margin is not None:
            self.set_base_margin(base_margin)
        elif init_score is not None:
            self.set_init_score(init_score)
        if group is not None:
            self.set_group(group)
        elif qid is not None:
            self.set_qid(qid)

    def set_group(self, group: Any) -> Dataset:
        """Sets (or with None removes) the query groups by their sizes, as XGBoost's and
        LightGBM's ``set_group``.

        Parameters
        ----------
        group : array-like of int or None
            The number of rows of each query, in row order; each at least 1, adding up to
            the rows of the dataset.

        Returns
        -------
        Dataset
            This dataset.

        Raises
        ------
        ParameterError
            A size that is not a whole number >= 1 (the message names its position).
        DataError
            Sizes that do not add up to the rows.
        """
        if group is None:
            self._native.set_group_sizes(None)
            return self
        sizes = _group_sizes(group)
        total, n = int(sizes.sum(dtype=np.int64)), self.num_row()
        if total != n:
            raise DataError(
                f"invalid parameter `group`: the {len(sizes)} query sizes add up to {total} "
                f"rows but the dataset has {n}"
            )
        self._native.set_group_sizes(sizes)
        return self

    def set_qid(self, qid: Any) -> Dataset:
        """Sets the query groups from one query id per row, as XGBoost's ``qid``.

        Parameters
        ----------
        qid : array-like of int
            The query of each row; the rows of a query must be contiguous (sort the data
            by ``qid`` first). Ids need not be sorted or consecutive.

        Returns
        -------
        Dataset
            This dataset.

        Raises
        ------
        ParameterError
            A query that comes back after another query (the message names the row), or
            an id that is not a whole number (NaN included; the message names the row).
        DataError
            Not one id per row.
        """
        self._native.set_qid(_qid_array(qid))
        return self

    def get_group(self) -> Optional[npt.NDArray[np.uint32]]:
        """The number of rows of each query, in row order, or None without groups (as
        XGBoost's and LightGBM's ``get_group``)."""
        return self._native.group_sizes

    def set_base_margin(self, margin: Any) -> Dataset:
        """Sets (or with None removes) each row's base margin, as XGBoost's
        ``DMatrix.set_base_margin``.

        Parameters
        ----------
        margin : array-like or None
            One finite margin per row, shape ``(n,)``; for a multiclass model one per row
            and class, shape ``(n, classes)`` (or flat, row after row). Margins are raw
            scores: log-odds for ``binary:logistic``, log of the mean for log-link
            objectives.

        Returns
        -------
        Dataset
            This dataset.
        """
        self._set_margin(margin, "base_margin", class_major=False)
        return self

    def set_init_score(self, init_score: Any) -> Dataset:
        """Sets (or with None removes) each row's initial score, as LightGBM's
        ``Dataset.set_init_score``: the same as :meth:`set_base_margin`, except that a flat
        multiclass array is read class after class, as LightGBM lays it out.

        Parameters
        ----------
        init_score : array-like or None
            Shape ``(n,)``, or ``(n, classes)``, or flat ``(n * classes,)`` with every
            row's score of class 0 first.

        Returns
        -------
        Dataset
            This dataset.
        """
        self._set_margin(init_score, "init_score", class_major=True)
        return self

    def _set_margin(self, margin: Any, name: str, class_major: bool) -> None:
        if margin is None:
            self._native.set_base_margin(None)
            self._base_margin = None
            return
        arr = _margin_array(margin, self.num_row(), name, class_major)
        try:
            self._native.set_base_margin(np.ascontiguousarray(arr, dtype=np.float32).ravel())
        except ParameterError as e:
            raise ParameterError(str(e).replace("`base_margin`", f"`{name}`")) from None
        self._base_margin = arr

    def get_base_margin(self) -> Optional[npt.NDArray[np.float32]]:
        """Each row's base margin, ``(n,)`` or ``(n, classes)``, or None (XGBoost's
        ``DMatrix.get_base_margin``)."""
        return None if self._base_margin is None else self._base_margin.copy()

    def get_init_score(self) -> Optional[npt.NDArray[np.float32]]:
        """The same as :meth:`get_base_margin` (LightGBM's name)."""
        return self.get_base_margin()

    def get_label(self) -> Optional[npt.NDArray[Any]]:
        """The label as given (float32 for numbers), or None; XGBoost's and LightGBM's
        ``get_label``, for custom objectives and metrics."""
        label = self._source[1]
        if label is None:
            return None
        arr = np.asarray(label).ravel()
        return arr.astype(np.float32) if arr.dtype.kind in "biuf" else arr

    def get_weight(self) -> Optional[npt.NDArray[np.float32]]:
        """The sample weights as float32, or None."""
        weight = self._source[2]
        return None if weight is None else np.asarray(weight, dtype=np.float32).ravel()

    @property
    def feature_names(self) -> list[str]:
        """Feature names, in column order."""
        return self._native.feature_names

    @property
    def categorical(self) -> list[bool]:
        """Whether each feature is categorical."""
        return self._native.categorical

    def num_row(self) -> int:
        """Rows."""
        return self._native.n_rows

    def num_col(self) -> int:
        """Features."""
        return len(self._native.feature_names)

    def __repr__(self) -> str:
        return f"<sapwood.Dataset {self.num_row()} rows x {self.num_col()} features>"


def _whole_numbers(values: Any, name: str, what: str) -> npt.NDArray[np.int64]:
    """A 1-D array of whole numbers as int64; the error names ``name`` and the position
    (``what``: "row" or "query") of the first value that is not one."""
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ParameterError(f"invalid parameter `{name}`: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    try:
        as_float = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise ParameterError(
            f"invalid parameter `{name}`: expected whole numbers, got {arr.dtype} values"
        ) from None
    bad = ~np.isfinite(as_float) | (as_float != np.round(as_float))
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(
            f"invalid parameter `{name}`: {what} {i} is {float(as_float[i])!r}, not a whole number"
        )
    return as_float.astype(np.int64)


def _group_sizes(group: Any) -> npt.NDArray[np.uint32]:
    """Query sizes (``group``) as uint32, each at least 1."""
    sizes = _whole_numbers(group, "group", "query")
    small = sizes < 1
    if small.any():
        i = int(np.argmax(small))
        raise ParameterError(
            f"invalid parameter `group`: query {i} has {sizes[i]} rows; every query needs "
            "at least one"
        )
    if sizes.size and sizes.max() > np.iinfo(np.uint32).max:
        raise ParameterError("invalid parameter `group`: a query has more than 2^32 - 1 rows")
    return sizes.astype(np.uint32)


def _qid_array(qid: Any) -> npt.NDArray[np.int64]:
    """Query ids (``qid``) as contiguous int64."""
    return np.ascontiguousarray(_whole_numbers(qid, "qid", "row"))


def _runs(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    """The lengths of the runs of equal ids (the query sizes of contiguous ``qid``)."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.uint32)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes: npt.NDArray[np.uint32] = np.diff(np.r_[starts, ids.size]).astype(np.uint32)
    return sizes


def _query_weights(weight: Any, sizes: npt.NDArray[np.uint32]) -> Any:
    """Row weights: one weight per query (XGBoost's ranking weights) is spread over the
    query's rows; anything else is returned as given (one per row, LightGBM's)."""
    arr = np.asarray(weight.to_numpy() if hasattr(weight, "to_numpy") else weight)
    rows = int(sizes.sum(dtype=np.int64))
    if arr.ndim == 1 and arr.size == sizes.size and arr.size != rows:
        return np.repeat(arr.astype(np.float32), sizes)
    return weight


def _margin_array(
    margin: Any, n: int, name: str, class_major: bool
) -> npt.NDArray[np.float32]:
    """Per-row margins as float32, ``(n,)`` or ``(n, k)``: a flat array of ``n * k``
    values is read row after row (XGBoost), or class after class when ``class_major``
    (LightGBM's ``init_score``). Errors name the argument ``name``."""
    if _data.is_pandas_frame(margin) or hasattr(margin, "to_numpy"):
        margin = margin.to_numpy()
    try:
        arr = np.array(margin, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ParameterError(f"invalid parameter `{name}`: expected numbers: {e}") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 1 and n > 0 and arr.size != n and arr.size % n == 0:
        k = arr.size // n
        arr = arr.reshape(k, n).T if class_major else arr.reshape(n, k)
    if arr.ndim not in (1, 2) or arr.shape[0] != n:
        raise ParameterError(
            f"invalid parameter `{name}`: shape {arr.shape} for {n} rows: give one value per "
            "row, or (rows, classes) for a multiclass model"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise ParameterError(
            f"invalid parameter `{name}`: row {row} is {arr.reshape(n, -1)[row].tolist()}: "
            "margins must be finite"
        )
    return np.ascontiguousarray(arr)


def _native_of(data: Any, booster: Booster, base_margin: Any = None) -> NativeData:
    """Prediction data for ``booster`` with each row's base margin (``base_margin``, or
    the Dataset's own)."""
    if base_margin is not None and isinstance(data, Dataset):
        raise ParameterError(
            "invalid parameter `base_margin`: the data is a Dataset; set its margin with "
            "Dataset.set_base_margin"
        )
    native = _native_for(data, booster)
    if base_margin is None:
        return native
    arr = _margin_array(base_margin, native.n_rows, "base_margin", class_major=False)
    native.set_base_margin(np.ascontiguousarray(arr, dtype=np.float32).ravel())
    return native


def _native_for(data: Any, booster: Booster) -> NativeData:
    """Prediction data for ``booster``: checks columns against the model and encodes
    categorical features of unnamed input with the model's kinds."""
    trained = booster._model.input_types
    if isinstance(data, Dataset):
        native = data._native
        _check_named_columns(native.feature_names, booster.feature_names)
        if native.feature_names == booster.feature_names:
            _data.check_input_types(trained, booster.feature_names, data._input_types)
        return native
    names = booster.feature_names
    given = _data.input_types(data)
    if given is not None and _data.is_frame(data):
        # a frame's columns are matched by name: compare the model's features only
        by_name = dict(zip(_frame_columns(data), given))
        if all(n in by_name for n in names):
            _data.check_input_types(trained, names, [by_name[n] for n in names])
    elif given is not None:
        _data.check_input_types(trained, names, given)
    levels = booster._model.feature_levels
    categorical = [n for n, lv in zip(names, levels) if lv is not None]
    if _data.is_frame(data):
        columns = _frame_columns(data)
        _check_named_columns(columns, names)
        return _data.to_native(data, categorical_features=[c for c in categorical if c in columns])
    if _data.is_scipy_sparse(data):
        if categorical:
            raise SchemaMismatchError(
                "data does not match the model: sparse input has no categorical features, "
                f"but the model has {categorical}; pass a dense array or a DataFrame"
            )
        if len(data.shape) != 2 or data.shape[1] != len(names):
            raise SchemaMismatchError(
                f"data does not match the model: the sparse data has shape {data.shape} "
                f"but the model was trained on {len(names)} features"
            )
        return _data.to_native(data, feature_names=names)
    arr = data if isinstance(data, np.ndarray) else np.asarray(data)
    if arr.ndim != 2:
        raise DataError(f"expected 2-D data, got an array of shape {arr.shape}")
    if arr.shape[1] != len(names):
        raise SchemaMismatchError(
            f"data does not match the model: the data has {arr.shape[1]} columns but the "
            f"model was trained on {len(names)} features"
        )
    return _data.to_native(arr, categorical_features=categorical, feature_names=names)


class DataIter:
    """Training or evaluation rows read in batches, for data that should not sit in memory
    whole (XGBoost's ``DataIter``): subclass it with :meth:`reset` and :meth:`next`, then
    pass an instance to :func:`train` as ``dtrain`` (its evaluation sets may be
    ``DataIter`` or :class:`Dataset` objects).

    Training reads the training rows three times (to count them, to sample the cuts, to bin
    them) and an evaluation set twice (to count its rows, to bin them), holding one batch at
    a time besides the bins; every pass must yield the same rows in the same order, and
    every batch the same columns. The model is the one the same rows in one
    :class:`Dataset` give, byte for byte.

    ``categorical_features`` and ``missing`` apply to every batch as :class:`Dataset` applies
    them. A custom objective (``obj``), ``scale_pos_weight``, custom metrics on evaluation
    sets read in batches, and :func:`cv` need the rows in memory: give a :class:`Dataset`.
    """

    def __init__(
        self, categorical_features: CategoricalSpec = "auto", missing: Optional[float] = None
    ) -> None:
        self.categorical_features = categorical_features
        self.missing = missing

    def reset(self) -> None:
        """Goes back to the first batch (called before every pass)."""
        raise NotImplementedError("a DataIter subclass must define reset()")

    def next(self, input_data: Callable[..., None]) -> bool:
        """Reads the next batch and hands it over with one call of ``input_data(data,
        label=None, weight=None, base_margin=None, qid=None)`` (``data``: anything
        :class:`Dataset` accepts, a pyarrow RecordBatch or Table, a pandas or polars
        DataFrame, a numpy array...; ``qid``: each row's query id, for ranking). Returns
        True, or False (without calling ``input_data``) when no batch is left."""
        raise NotImplementedError("a DataIter subclass must define next(input_data)")


#: One batch of a :class:`DataIter`: the batch and each row's query id.
_Batch = tuple[Dataset, Optional[npt.NDArray[np.int64]]]


class _Streamed:
    """A :class:`DataIter` as training reads it: the engine's batches over its passes, its
    rows (counted by one pass) and the first batch's column types."""

    def __init__(self, it: DataIter) -> None:
        if not isinstance(it, DataIter):
            raise DataError("expected a sapwood.DataIter")
        self._it = it
        self._input_types: Optional[list[str]] = None
        rows = sum(d.num_row() for d, _ in self._batches())
        self._native = _sapwood.NativeBatches(self._passes, rows)

    def _batches(self) -> Iterable[_Batch]:
        it = self._it
        it.reset()
        while True:
            got: list[_Batch] = []

            def input_data(
                data: Any,
                label: Any = None,
                weight: Any = None,
                base_margin: Any = None,
                qid: Any = None,
                **others: Any,
            ) -> None:
                if others:
                    raise ParameterError(
                        f"invalid parameter `{next(iter(others))}`: DataIter's input_data "
                        "takes data, label, weight, base_margin and qid"
                    )
                d = Dataset(
                    data,
                    label=label,
                    weight=weight,
                    base_margin=base_margin,
                    qid=qid,
                    categorical_features=it.categorical_features,
                    missing=it.missing,
                )
                got.append((d, None if qid is None else _qid_array(qid)))

            if not it.next(input_data):
                return
            if len(got) != 1:
                raise DataError(
                    f"DataIter.next must call input_data once per batch; it called it "
                    f"{len(got)} times"
                )
            if self._input_types is None:
                self._input_types = got[0][0]._input_types
            yield got[0]

    def _passes(
        self,
    ) -> Iterable[tuple[NativeData, Optional[list[int]], Optional[list[float]]]]:
        for d, qid in self._batches():
            margin = d._base_margin
            yield (
                d._native,
                None if qid is None else qid.tolist(),
                None if margin is None else margin.ravel().tolist(),
            )


#: Training data as :func:`train` takes it: in memory or read in batches.
_TrainData = Union[Dataset, _Streamed]


def _frame_columns(data: Any) -> list[str]:
    if _data.is_pandas_frame(data):
        return [str(c) for c in data.columns]
    if hasattr(data, "column_names"):  # pyarrow Table / RecordBatch
        return [str(c) for c in data.column_names]
    return [str(c) for c in data.columns]  # polars


def _check_named_columns(given: Sequence[str], expected: Sequence[str]) -> None:
    """Named prediction data must have exactly the training columns (in any order: the
    engine matches columns by name)."""
    if set(given) == set(expected):
        return
    missing = [c for c in expected if c not in set(given)]
    unexpected = [c for c in given if c not in set(expected)]
    parts = []
    if missing:
        parts.append(f"missing {missing}")
    if unexpected:
        parts.append(f"not in training {unexpected}")
    raise SchemaMismatchError(
        "data does not match the model: the columns differ from training: " + "; ".join(parts)
    )


class Booster:
    """A trained model.

    Make one with :func:`train`, or load one with ``Booster(model_file=path)``,
    ``Booster().load_model(path)`` or ``Booster.from_json(text)``. Boosters pickle as
    their JSON model text.
    """

    def __init__(self, model_file: Optional[PathLike] = None) -> None:
        self._native: Optional[NativeBooster] = None
        #: Threads predictions use (XGBoost's ``set_param({"nthread": n})``); 0: every core.
        self._threads = 0
        #: Every round's metrics when custom metrics were computed in Python.
        self._custom_history: Optional[list[list[tuple[str, str, float]]]] = None
        #: What training exchanged, for a booster that was pickled (it is not in the model).
        self._comm: Optional[dict[str, Any]] = None
        if model_file is not None:
            self.load_model(model_file)

    @classmethod
    def _wrap(cls, native: NativeBooster) -> Booster:
        b = cls()
        b._native = native
        return b

    @property
    def _model(self) -> NativeBooster:
        if self._native is None:
            raise _sapwood.ModelError("invalid model: this Booster holds no model yet")
        return self._native

    # ---- prediction -------------------------------------------------------------------

    def predict(
        self,
        data: Any,
        output_margin: bool = False,
        iteration_range: Optional[tuple[int, int]] = None,
        pred_contribs: bool = False,
        pred_interactions: bool = False,
        pred_leaf: bool = False,
        *,
        base_margin: Any = None,
        num_iteration: Optional[int] = None,
    ) -> npt.NDArray[np.float32]:
        """Predictions, as XGBoost's ``Booster.predict``.

        Parameters
        ----------
        data : Dataset or any input Dataset accepts
            Rows to predict, with the training columns (matched by name when the input
            has names). A categorical feature must be given as categories (strings, a
            pandas ``category`` column...): integer codes for a feature trained on text
            levels raise :class:`SchemaMismatchError`.
        output_margin : bool, default False
            Raw scores (margins) instead of values or probabilities.
        iteration_range : (int, int), optional
            The rounds ``[start, end)`` whose trees are used (half open, as in XGBoost),
            with the base score; ``start`` may be any round before ``end``. ``(0, 0)``
            and None (the default) use **every round trained**, also after early
            stopping, as XGBoost's ``Booster.predict`` does: pass
            ``iteration_range=(0, booster.best_iteration + 1)`` (or slice the booster,
            ``booster[: booster.best_iteration + 1]``) for the best model. The
            scikit-learn estimators' ``predict`` uses the best iteration by default.
        pred_contribs : bool, default False
            SHAP contributions, ``(n, features + 1)`` with the bias last (``(n, classes,
            features + 1)`` for multiclass), summing to the margin.
        pred_interactions : bool, default False
            SHAP interaction values, ``(n, features + 1, features + 1)`` (a class axis
            after the rows for multiclass).
        pred_leaf : bool, default False
            The leaf index of each tree, ``(n, trees)``.
        base_margin : array-like, optional
            Each row's base margin, ``(n,)`` or ``(n, classes)``: the trees are added to
            it instead of to the model's base score (SHAP's bias moves with it). A
            :class:`Dataset` carries its own (``Dataset(..., base_margin=...)``, XGBoost's
            way), used when this is None.
        num_iteration : int, optional
            LightGBM's spelling: the first ``num_iteration`` rounds, the same as
            ``iteration_range=(0, num_iteration)``; 0 or less uses every round. None (the
            default) leaves the choice to ``iteration_range``: every round, not LightGBM's
            best iteration (pass ``booster.best_iteration + 1`` for that).

        Returns
        -------
        numpy.ndarray of float32
            Values (regression), probabilities of the positive class (binary), an
            ``(n, classes)`` array of class probabilities (``multi:softprob``), or the
            class index of each row, shape ``(n,)`` (``multi:softmax``, as XGBoost),
            unless one of the options above asks for something else.
        """
        model = self._model
        total = model.num_rounds
        if num_iteration is not None:
            if iteration_range is not None:
                raise ParameterError(
                    "invalid parameter `num_iteration`: given with `iteration_range`, which says "
                    "the rounds already; give one of them"
                )
            iteration_range = (0, max(int(num_iteration), 0))
        begin, end = (0, 0) if iteration_range is None else iteration_range
        begin, end = int(begin), int(end)
        if end == 0:
            end = total
        if not 0 <= begin < end <= total:
            raise ParameterError(
                f"invalid parameter `iteration_range`: ({begin}, {end}) is not a range of "
                f"rounds within the {total} rounds trained (use (0, 0) for all)"
            )
        if begin > 0:
            # the trees of rounds [begin, end) alone, with the base score (XGBoost's rule)
            model = model.slice(begin, end)
            end = end - begin
        flags = [("contributions", pred_contribs), ("interactions", pred_interactions),
                 ("leaf", pred_leaf)]
        asked = [k for k, on in flags if on]
        if len(asked) > 1 or (asked and output_margin):
            raise ParameterError(
                "invalid parameter `pred_*`: ask for one of output_margin, pred_contribs, "
                "pred_interactions and pred_leaf"
            )
        output = asked[0] if asked else ("margin" if output_margin else "value")
        values, per_row = model.predict(
            _native_of(data, self, base_margin), output, end, self._threads
        )
        groups = model.groups
        if output == "contributions":
            if groups == 1:
                return values.reshape(-1, per_row)
            return values.reshape(-1, groups, per_row // groups)
        if output == "interactions":
            side = int(round((per_row // groups) ** 0.5))
            shape = (-1, side, side) if groups == 1 else (-1, groups, side, side)
            return values.reshape(shape)
        if output == "leaf":
            return values.reshape(-1, per_row)
        return values if per_row == 1 else values.reshape(-1, per_row)

    def set_param(self, params: Union[Mapping[str, Any], str], value: Any = None) -> None:
        """Sets how this booster predicts, as XGBoost's ``Booster.set_param``: the thread
        count (``nthread``, ``n_jobs``, ``num_threads`` or ``threads``; 0 or negative for
        every core). Threads never change a prediction. Model parameters cannot be set on
        a trained model: train another (a ParameterError says so)."""
        pairs = dict(params) if isinstance(params, Mapping) else {str(params): value}
        for key, v in pairs.items():
            if canonical_param(key) != "threads":
                raise ParameterError(
                    f"invalid parameter `{key}`: set_param takes the thread count of "
                    "predictions (nthread); a model parameter needs another training"
                )
            n = int(v) if v is not None else 0
            self._threads = max(n, 0)

    def __getitem__(self, index: Union[int, slice]) -> Booster:
        """The model of some rounds, as XGBoost's model slicing: ``booster[10:20]`` holds
        the trees of rounds 10 to 19 (and the base score), ``booster[:best + 1]`` the
        best model after early stopping, ``booster[i]`` round i alone; a step is allowed
        (``booster[::2]``). The slice has no best iteration."""
        total = self.num_boosted_rounds()
        if isinstance(index, slice):
            start, stop, step = index.indices(total)
            if step < 1:
                raise ParameterError(
                    "invalid parameter `index`: a booster slice needs a positive step"
                )
        elif isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            i = int(index)
            if not -total <= i < total:
                raise IndexError(f"round {i} is out of range for {total} rounds")
            start = i % total
            stop, step = start + 1, 1
        else:
            raise TypeError(f"a Booster is indexed by rounds (an int or a slice), not {index!r}")
        if start >= stop:
            raise ParameterError(
                f"invalid parameter `index`: rounds [{start}, {stop}) hold no round of the "
                f"{total} trained"
            )
        return Booster._wrap(self._model.slice(start, stop, step))

    # ---- files and text ---------------------------------------------------------------

    def save_model(self, fname: PathLike, format: str = "sapwood") -> None:
        """Writes the model; the file is replaced atomically.

        ``format="sapwood"`` (default) writes Sapwood's JSON. ``"xgboost"`` writes XGBoost
        JSON (``xgboost.Booster(model_file=...)``), ``"lightgbm"`` LightGBM text
        (``lightgbm.Booster(model_file=...)``) and ``"onnx"`` an ONNX model
        (``onnxruntime.InferenceSession(path)``: input ``input``, float32 ``[N, features]``;
        outputs ``margin`` and ``prediction``, the objective's output); all predict Sapwood's
        margins. Categorical features are fed to them as codes: a level's index in its
        feature's level list (the XGBoost file's ``sapwood_categories`` attribute, the
        LightGBM file's ``pandas_categorical`` line, the ONNX file's ``sapwood_categories``
        metadata), with levels not in the list as NaN.

        An exported model holds every round trained, as :meth:`predict` uses them (the
        peers predict with every tree of a file); after early stopping a warning says so:
        save ``booster[: booster.best_iteration + 1]`` to export the best model.
        """
        if format == "sapwood":
            self._model.save(os.fspath(fname))
            return
        total = self.num_boosted_rounds()
        self._model.export(os.fspath(fname), format, max(total, 1))
        best = self.best_iteration
        if best is not None and best + 1 < total:
            warnings.warn(
                f"exported all {total} rounds, as Booster.predict uses them; early stopping's "
                f"best round is {best}: save booster[:{best + 1}] to export the best model",
                UserWarning,
                stacklevel=2,
            )

    def load_model(self, fname: PathLike) -> Booster:
        """Reads a model file written by :meth:`save_model` or the CLI."""
        self._native = NativeBooster.load(os.fspath(fname))
        self._comm = None
        return self

    def to_json(self) -> str:
        """The model as JSON text (identical models give identical text)."""
        return self._model.to_json()

    @classmethod
    def from_json(cls, text: Union[str, bytes]) -> Booster:
        """A booster from JSON text written by :meth:`to_json` or :meth:`save_model`."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return cls._wrap(NativeBooster.from_json(text))

    def __getstate__(self) -> dict[str, Any]:
        # The model travels as its JSON bytes, never as code.
        state: dict[str, Any] = {
            "model": None, "history": None, "threads": self._threads, "comm": None
        }
        if self._native is not None:
            state["model"] = self._native.to_json().encode("utf-8")
            state["history"] = self._history_rounds()
            # what training exchanged is not in the model file, but a booster trained on a
            # Dask worker reaches the client pickled and should still say it
            state["comm"] = self.comm_stats
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._native = None
        self._threads = int(state.get("threads", 0))
        self._history = state.get("history")
        self._comm = state.get("comm")
        if state.get("model") is not None:
            self._native = NativeBooster.from_json(state["model"].decode("utf-8"))

    # ---- introspection ----------------------------------------------------------------

    @property
    def feature_names(self) -> list[str]:
        """Feature names, in training order."""
        return self._model.feature_names

    @property
    def classes(self) -> Optional[list[Union[bool, int, str]]]:
        """Class labels of a classification model trained on class labels."""
        return self._model.classes

    @property
    def objective(self) -> str:
        """The objective's name."""
        return self._model.objective

    @property
    def best_iteration(self) -> Optional[int]:
        """The best round (0-based, as in XGBoost) chosen by early stopping, or None.
        LightGBM counts it from 1: its ``best_iteration`` is this plus one."""
        return self._model.best_iteration

    @property
    def best_score(self) -> Optional[float]:
        """The score early stopping watched (the last metric of the last evaluation set)
        at :attr:`best_iteration`, or None without early stopping or history (a loaded
        model keeps no history)."""
        best = self.best_iteration
        history = self._history_rounds()
        if best is None or best >= len(history) or not history[best]:
            return None
        return float(history[best][-1][2])

    def current_iteration(self) -> int:
        """Rounds trained (LightGBM's name for :meth:`num_boosted_rounds`)."""
        return self.num_boosted_rounds()

    def feature_name(self) -> list[str]:
        """Feature names, in training order (LightGBM's name for :attr:`feature_names`)."""
        return self.feature_names

    def trees_to_dataframe(self) -> Any:
        """Every node of every tree as a pandas DataFrame, with XGBoost's columns.

        ``Tree`` (tree index: round × classes + class), ``Node``, ``ID``
        (``"tree-node"``), ``Feature`` (name, or ``"Leaf"``), ``Split`` (numeric splits
        send values ``< Split`` to ``Yes``, as in XGBoost; Sapwood's own rule is ``<=`` the
        threshold :meth:`get_dump` and ``sapwood inspect`` print, and ``Split`` is the next
        float32 above it), ``Yes``, ``No``, ``Missing`` (the IDs of the children and of the
        one missing values go to), ``Gain`` (the split's loss reduction; for a leaf, its
        value, learning rate applied, as in XGBoost), ``Cover`` (the hessian sum of the
        training rows) and ``Category`` (for a categorical split, the levels sent to
        ``Yes``). Leaves have NaN in the split columns.
        """
        import pandas as pd

        nodes = self._model.tree_nodes()
        leaf = np.asarray(nodes["feature"]) < 0
        tree = np.asarray(nodes["tree"], dtype=np.int64)
        node = np.asarray(nodes["node"], dtype=np.int64)
        names = self.feature_names

        def node_id(t: int, n: int) -> Any:
            return f"{t}-{n}" if n >= 0 else np.nan

        threshold = np.asarray(nodes["threshold"], dtype=np.float32)
        split = np.where(
            np.isnan(threshold), np.nan, np.nextafter(threshold, np.float32(np.inf))
        ).astype(np.float64)
        yes = [node_id(t, n) for t, n in zip(tree, nodes["left"])]
        no = [node_id(t, n) for t, n in zip(tree, nodes["right"])]
        missing = [y if d else n for y, n, d in zip(yes, no, nodes["default_left"])]
        return pd.DataFrame(
            {
                "Tree": tree,
                "Node": node,
                "ID": [f"{t}-{n}" for t, n in zip(tree, node)],
                "Feature": ["Leaf" if f < 0 else names[f] for f in nodes["feature"]],
                "Split": split,
                "Yes": yes,
                "No": no,
                "Missing": missing,
                "Gain": np.where(leaf, nodes["value"], nodes["gain"]),
                "Cover": np.asarray(nodes["cover"], dtype=np.float64),
                "Category": [np.nan if c is None else c for c in nodes["categories"]],
            }
        )

    def get_dump(
        self, fmap: str = "", with_stats: bool = False, dump_format: str = "text"
    ) -> list[str]:
        """Each tree as text, in XGBoost's dump formats.

        Parameters
        ----------
        fmap : str, default ""
            Not used: feature names come from the model (accepted for XGBoost scripts;
            anything but "" is refused).
        with_stats : bool, default False
            Add each split's ``gain`` and each node's ``cover`` (hessian sum).
        dump_format : {"text", "json"}, default "text"
            ``"text"``: one line per node, depth-first, indented by depth:
            ``0:[x<=0.5] yes=1,no=2,missing=2`` for a numeric split (values ``<=`` the
            threshold go to ``yes``), ``0:[colour:{red,blue}] yes=1,...`` for a
            categorical split (the levels listed go to ``yes``) and ``1:leaf=0.25`` for a
            leaf (its value, learning rate applied). ``"json"``: one JSON object per tree,
            nested through ``children``, with XGBoost's keys (``nodeid``, ``depth``,
            ``split``, ``split_condition`` or ``split_categories``, ``yes``, ``no``,
            ``missing``, ``leaf``, and ``gain``/``cover`` with stats).

        Returns
        -------
        list of str
            One string per tree, in tree order (round × classes + class).
        """
        import json

        if fmap:
            raise ParameterError(
                "invalid parameter `fmap`: feature maps are not supported; the model "
                "carries its feature names"
            )
        if dump_format not in ("text", "json"):
            raise ParameterError(
                f"invalid parameter `dump_format`: `{dump_format}` is not text or json"
            )
        nodes = self._model.tree_nodes()
        names = self.feature_names
        trees: dict[int, list[int]] = {}
        for row, t in enumerate(nodes["tree"]):
            trees.setdefault(int(t), []).append(row)
        out = []
        for t in range(self.num_trees()):
            rows = trees.get(t, [])

            def describe(n: int, depth: int) -> dict[str, Any]:
                r = rows[n]
                f = int(nodes["feature"][r])
                d: dict[str, Any] = {"nodeid": n, "depth": depth}
                if f < 0:
                    d["leaf"] = float(nodes["value"][r])
                    if with_stats:
                        d["cover"] = float(nodes["cover"][r])
                    return d
                left, right = int(nodes["left"][r]), int(nodes["right"][r])
                d["split"] = names[f]
                if nodes["categories"][r] is not None:
                    d["split_categories"] = list(nodes["categories"][r])
                else:
                    d["split_condition"] = float(np.float32(nodes["threshold"][r]))
                d.update(yes=left, no=right, missing=left if nodes["default_left"][r] else right)
                if with_stats:
                    d["gain"] = float(nodes["gain"][r])
                    d["cover"] = float(nodes["cover"][r])
                d["children"] = [describe(left, depth + 1), describe(right, depth + 1)]
                return d

            if not rows:
                out.append("" if dump_format == "text" else "{}")
                continue
            root = describe(0, 0)
            if dump_format == "json":
                out.append(json.dumps(root))
                continue
            lines: list[str] = []
            stack = [root]
            while stack:
                d = stack.pop()
                pad = "\t" * d["depth"]
                if "leaf" in d:
                    text = f"{pad}{d['nodeid']}:leaf={d['leaf']:.9g}"
                    if with_stats:
                        text += f",cover={d['cover']:.9g}"
                else:
                    if "split_categories" in d:
                        rule = f"{d['split']}:{{{','.join(d['split_categories'])}}}"
                    else:
                        rule = f"{d['split']}<={d['split_condition']:.9g}"
                    text = (
                        f"{pad}{d['nodeid']}:[{rule}] yes={d['yes']},no={d['no']},"
                        f"missing={d['missing']}"
                    )
                    if with_stats:
                        text += f",gain={d['gain']:.9g},cover={d['cover']:.9g}"
                    stack.extend(reversed(d["children"]))
                lines.append(text)
            out.append("\n".join(lines) + "\n")
        return out

    def dump_model(
        self, fout: PathLike, fmap: str = "", with_stats: bool = False, dump_format: str = "text"
    ) -> None:
        """Writes :meth:`get_dump`'s trees to the file ``fout`` (XGBoost's
        ``dump_model``): ``booster[i]:`` before each tree in text, a JSON list in json."""
        dump = self.get_dump(fmap, with_stats, dump_format)
        if dump_format == "json":
            text = "[\n" + ",\n".join(dump) + "]\n"
        else:
            text = "".join(f"booster[{i}]:\n{t}" for i, t in enumerate(dump))
        with open(os.fspath(fout), "w", encoding="utf-8") as f:
            f.write(text)

    def _history_rounds(self) -> list[list[tuple[str, str, float]]]:
        custom: Optional[list[list[tuple[str, str, float]]]] = getattr(
            self, "_custom_history", None
        )
        if custom is not None:
            # custom metrics, computed in Python, joined with the engine's
            return custom
        history = self._model.history if self._native is not None else []
        if not history:
            history = getattr(self, "_history", None) or []
        return history

    @property
    def comm_stats(self) -> dict[str, Any]:
        """Bytes exchanged between workers in training: ``bytes_sent``,
        ``bytes_before_compression``, ``allreduce_calls`` (zeros for one worker),
        ``device_encoded_blocks`` (blocks a GPU backend encoded), ``seconds`` (wall time
        inside collective calls) and ``per_round`` (one such dict per round)."""
        pickled: Optional[dict[str, Any]] = getattr(self, "_comm", None)
        if pickled is not None:
            return pickled
        stats: dict[str, Any] = self._model.comm_stats
        return stats

    @property
    def run_record(self) -> dict[str, Any]:
        """What training actually used, as opposed to what it was asked for: ``workers``,
        ``threads_per_worker`` (each worker's thread-pool size, from ``n_jobs``/``nthread``)
        and ``backends`` (each worker's backend, e.g. ``"cpu"``). Settings that never change
        the model (threads, workers) can be checked only here. Empty for a loaded model."""
        record: dict[str, Any] = self._model.run_record
        return record

    @property
    def interrupted(self) -> bool:
        """Whether a callback stopped training before the last round."""
        return self._model.interrupted

    def num_trees(self) -> int:
        """Trees in the model (rounds × classes for multiclass)."""
        return self._model.num_trees

    def num_boosted_rounds(self) -> int:
        """Rounds trained."""
        return self._model.num_rounds

    def num_features(self) -> int:
        """Features the model was trained on."""
        return len(self._model.feature_names)

    def feature_importance(self, importance_type: str = "gain") -> npt.NDArray[np.float64]:
        """Importance of every feature, in :attr:`feature_names` order (0 for unused
        features), as LightGBM names it: total ``gain`` of its splits or number of splits
        (``split``); XGBoost's names (``weight``, ``total_gain``, ``cover``,
        ``total_cover``) are accepted too."""
        kind = {"split": "weight", "gain": "total_gain"}.get(importance_type, importance_type)
        scores = self._model.feature_importance(kind)
        return np.array([scores.get(n, 0.0) for n in self.feature_names], dtype=np.float64)

    def get_score(self, importance_type: str = "weight") -> dict[str, float]:
        """Importance of the features that are used, by name, as XGBoost names it:
        ``weight`` (splits), ``gain`` (average), ``total_gain``, ``cover`` (average) or
        ``total_cover``; LightGBM's ``split`` is ``weight``."""
        kind = {"split": "weight"}.get(importance_type, importance_type)
        return dict(self._model.feature_importance(kind))

    def evals_result(self) -> EvalsResult:
        """Metrics of every evaluation set after every round:
        ``{dataset: {metric: [value per round]}}``."""
        out: EvalsResult = {}
        for round_metrics in self._history_rounds():
            for dataset, metric, value in round_metrics:
                out.setdefault(dataset, {}).setdefault(metric, []).append(value)
        return out

    def __repr__(self) -> str:
        if self._native is None:
            return "<sapwood.Booster (empty)>"
        return (
            f"<sapwood.Booster {self.objective}, {self.num_boosted_rounds()} rounds, "
            f"{self.num_features()} features>"
        )


def _print_evaluation(period: int) -> Callback:
    """XGBoost's log lines: ``[round]\\tset-metric:value...``, every ``period`` rounds
    and after the last one."""

    def callback(info: RoundInfo) -> None:
        last = info.iteration + 1 == info.num_rounds
        if info.evaluation and (info.iteration % period == 0 or last):
            parts = [
                f"{name}-{metric}:{value:.5f}"
                for name, metrics in info.evaluation.items()
                for metric, value in metrics.items()
            ]
            print(f"[{info.iteration}]\t" + "\t".join(parts), file=sys.stdout, flush=True)
        return None

    return callback


#: A dataset class of evaluation pairs (:class:`Dataset`, or ``sapwood.dask``'s).
_D = TypeVar("_D")


def _eval_pairs(evals: Any, kind: type[_D]) -> list[tuple[_D, str]]:
    """``evals`` as ``(dataset, name)`` pairs of ``kind``, either way round in each pair."""
    what = kind.__name__
    out = []
    for i, item in enumerate(evals or ()):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ParameterError(f"invalid parameter `evals`: expected ({what}, name) pairs")
        a, b = item
        data, name = (a, b) if isinstance(a, kind) else (b, a)
        if not isinstance(data, kind) or not isinstance(name, str):
            raise ParameterError(
                f"invalid parameter `evals`: item {i} is not a ({what}, name) pair"
            )
        out.append((data, name))
    return out


def _with_rounds(
    normalised: _params.Normalised, num_boost_round: int
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The engine's parameters and the names the user gave them, with ``num_boost_round``
    unless ``params`` gives the rounds (which then win over the argument)."""
    pairs = normalised.pairs
    user_names = normalised.user_names
    if not any(canonical_param(k) == "num_rounds" for k, _ in pairs):
        pairs.insert(0, ("num_boost_round", str(int(num_boost_round))))
        user_names["num_rounds"] = "num_boost_round"
    return pairs, user_names


class _GivenCallbacks(NamedTuple):
    """The ``callbacks`` of a training call, sorted out."""

    #: The callbacks to call after every round.
    run: list[Callback]
    #: ``early_stopping_rounds``, from the argument or an :func:`early_stopping` callback.
    stopping_rounds: Optional[int]
    #: Whether an :func:`early_stopping` callback asked for LightGBM's closing lines.
    announce: bool


def _sort_callbacks(
    callbacks: Optional[Sequence[Callback]], early_stopping_rounds: Optional[int]
) -> _GivenCallbacks:
    """``callbacks`` with :func:`early_stopping`'s taken out: the engine stops (so the best
    iteration is kept), and its rounds must agree with ``early_stopping_rounds``."""
    run: list[Callback] = []
    announce = False
    for cb in callbacks or ():
        if isinstance(cb, _EarlyStopping):
            announce = announce or cb.verbose
            if early_stopping_rounds is not None and early_stopping_rounds != cb.stopping_rounds:
                raise ParameterError(
                    "invalid parameter `early_stopping_rounds`: given as "
                    f"{early_stopping_rounds} and as early_stopping({cb.stopping_rounds})"
                )
            early_stopping_rounds = cb.stopping_rounds
        elif not callable(cb):
            raise ParameterError(
                f"invalid parameter `callbacks`: {cb!r} is not callable; a callback takes a "
                "sapwood.RoundInfo"
            )
        else:
            run.append(cb)
    return _GivenCallbacks(run, early_stopping_rounds, announce)


def _with_stopping(
    pairs: list[tuple[str, str]], user_names: dict[str, str], stopping_rounds: Optional[int]
) -> list[tuple[str, str]]:
    """``pairs`` with ``early_stopping_rounds`` set by the argument, which wins over
    ``params``; errors then name the argument."""
    if stopping_rounds is None:
        return pairs
    pairs = [(k, v) for k, v in pairs if canonical_param(k) != "early_stopping_rounds"]
    pairs.append(("early_stopping_rounds", str(int(stopping_rounds))))
    user_names["early_stopping_rounds"] = "early_stopping_rounds"
    return pairs


def _stopping_text(pairs: list[tuple[str, str]]) -> Optional[str]:
    """The value of ``early_stopping_rounds`` in ``pairs``, None when it asks for none."""
    text = next((v for k, v in pairs if canonical_param(k) == "early_stopping_rounds"), None)
    return None if text is None or text in ("", "none", "null") else text


def _require_evals(stopping: Union[int, str, None], evaluated: bool) -> None:
    """Refuses early stopping (``stopping`` rounds, None for none) without an evaluation
    set to watch."""
    if stopping is not None and not evaluated:
        raise ParameterError(
            "invalid parameter `early_stopping_rounds`: early stopping needs at least one "
            "evaluation set in `evals`"
        )


def _printing(verbose_eval: Union[bool, int], evaluated: bool) -> list[Callback]:
    """The callback ``verbose_eval`` asks for (every round for True, every n rounds for an
    int > 0), when there are metrics to print."""
    if verbose_eval is True or (verbose_eval is not False and int(verbose_eval) > 0):
        if evaluated:
            return [_print_evaluation(1 if verbose_eval is True else int(verbose_eval))]
    return []


#: The engine's round callback: ``(round, num_rounds, metrics, elapsed) -> stop``.
_RoundHook = Callable[[int, int, list[tuple[str, str, float]], float], bool]


def _notify(
    callbacks: Sequence[Callback],
    round_: int,
    num_rounds: int,
    metrics: list[tuple[str, str, float]],
    elapsed: float,
) -> bool:
    """Calls every callback with the round's :class:`RoundInfo` (each one, even after
    another asked to stop); whether one asked to stop."""
    evaluation: dict[str, dict[str, float]] = {}
    for dataset, metric, value in metrics:
        evaluation.setdefault(dataset, {})[metric] = value
    info = RoundInfo(round_, num_rounds, evaluation, elapsed)
    stop = False
    for cb in callbacks:
        if cb(info):
            stop = True
    return stop


def _callback_hook(callbacks: list[Callback]) -> Optional[_RoundHook]:
    """The engine's round callback calling ``callbacks`` with a :class:`RoundInfo`."""
    if not callbacks:
        return None

    def hook(
        round_: int, num_rounds: int, metrics: list[tuple[str, str, float]], elapsed: float
    ) -> bool:
        return _notify(callbacks, round_, num_rounds, metrics, elapsed)

    return hook


def train(
    params: Params,
    dtrain: Union[Dataset, DataIter],
    num_boost_round: int = 100,
    evals: Sequence[tuple[Union[Dataset, DataIter], str]] = (),
    early_stopping_rounds: Optional[int] = None,
    callbacks: Optional[Sequence[Callback]] = None,
    verbose_eval: Union[bool, int] = True,
    evals_result: Optional[EvalsResult] = None,
    checkpoint: Optional[PathLike] = None,
    checkpoint_every: int = 10,
    resume: Optional[PathLike] = None,
    *,
    valid_sets: Optional[Sequence[Dataset]] = None,
    valid_names: Optional[Sequence[str]] = None,
    xgb_model: Union[Booster, PathLike, None] = None,
    init_model: Union[Booster, PathLike, None] = None,
    obj: Optional[Objective] = None,
    custom_metric: Optional[CustomMetric] = None,
    feval: Union[Feval, Sequence[Feval], None] = None,
    maximize: Optional[bool] = None,
) -> Booster:
    """Trains a booster, as ``xgboost.train`` (and ``lightgbm.train``).

    Parameters
    ----------
    params : dict or list of (str, value) pairs
        Model parameters and run options (see *Model parameters* and *Run options*
        below), by their names or their XGBoost/LightGBM aliases. A list of pairs may
        repeat ``eval_metric`` to report several metrics (XGBoost's habit). A rounds
        parameter here (``num_boost_round``, ``n_estimators``, ...) wins over the
        ``num_boost_round`` argument. Unknown names raise :class:`ParameterError`
        suggesting the closest one; None values mean the default.
    dtrain : Dataset or DataIter
        Training data with its label (and weights); a :class:`DataIter` is read in
        batches, never whole.
    num_boost_round : int, default 100
        Boosting rounds (one tree per round, one per class per round for multiclass).
    evals : list of (Dataset, str) pairs, default ()
        Datasets reported after every round under the given names; early stopping
        watches the last metric of the last pair. A categorical column of an evaluation
        set must hold the same kind of levels as in ``dtrain``. With a :class:`DataIter`
        as ``dtrain``, an evaluation set may be a :class:`DataIter` too.
    early_stopping_rounds : int, optional
        Stop when the watched metric has not improved for this many rounds; the booster
        keeps every round trained and records :attr:`Booster.best_iteration` and
        :attr:`Booster.best_score` (XGBoost's rule: ``Booster.predict`` uses every round
        unless given ``iteration_range``). Needs ``evals``.
    callbacks : list of Callback, optional
        Called after every round with a :class:`RoundInfo`; one returning True stops
        training. :func:`early_stopping`, :func:`log_evaluation` and
        :func:`record_evaluation` are LightGBM's callbacks of the same names.
    verbose_eval : bool or int, default True
        Print the metrics of ``evals`` every round (True), every n rounds (an int > 0),
        or never (False, 0 or a negative number).
    evals_result : dict, optional
        Filled with the metrics history, ``{dataset: {metric: [value per round]}}``.
    checkpoint : str or os.PathLike, optional
        A file written atomically every ``checkpoint_every`` rounds, from which
        ``resume`` continues.
    checkpoint_every : int, default 10
        Rounds between two checkpoints (at least 1).
    resume : str or os.PathLike, optional
        A checkpoint written by the same job (same data and parameters): training
        continues from it and gives the model an uninterrupted run gives, byte for byte.
    valid_sets : list of Dataset, optional
        LightGBM's way to give evaluation sets: reported after ``evals``, named by
        ``valid_names``.
    valid_names : list of str, optional
        Names of ``valid_sets`` (default ``valid_0``, ``valid_1``, ... as in LightGBM).
    xgb_model : Booster or str or os.PathLike, optional
        A model (or model file) to continue, as XGBoost's ``xgb_model``: its trees are
        kept and ``num_boost_round`` **more** rounds are trained on ``dtrain`` (binned with
        the model's cuts). The objective and its constants, the class count and the
        features must be the model's (the objective is the model's when ``params`` gives
        none). With the same data and parameters, 50 rounds continued by 50 save the bytes
        of 100 rounds in one go (row and column sampling are keyed by round).
    init_model : Booster or str or os.PathLike, optional
        The same, under LightGBM's name; give one of the two.
    obj : callable, optional
        A custom objective, XGBoost's ``obj(preds, dtrain) -> (grad, hess)``: ``preds``
        are the raw margins of the training rows (float32, ``(n,)``, or ``(n, classes)``
        with ``num_class``), ``dtrain`` is the training :class:`Dataset` (``get_label()``,
        ``get_weight()``), and ``grad``, ``hess`` are arrays of the same shape (finite,
        hessians >= 0). Its gradients go through the quantiser the built-in losses use.
        LightGBM's way, ``params["objective"] = fn`` (called the same way), works too.
        Training uses one worker. Without an ``objective`` in ``params`` the model is saved
        as ``reg:squarederror`` with ``base_score=0`` (unless given): it **predicts
        margins**, and loading it needs no code (with ``num_class`` > 1 it is saved as
        ``custom``, LightGBM's name, with one margin per class).
    custom_metric : callable, optional
        XGBoost's ``custom_metric(preds, dmatrix) -> (name, value)`` (or a list of such
        pairs), computed after every round on every evaluation set and reported after the
        built-in metrics in ``evals_result`` and to callbacks. ``preds`` are raw margins
        with a custom objective, else the objective's output (probabilities for
        ``binary:logistic``), ``(n,)`` or ``(n, classes)``. Early stopping then watches it
        (the last metric), lower being better unless ``maximize``.
    feval : callable or list of callables, optional
        LightGBM's ``feval(preds, dataset) -> (name, value, is_higher_better)`` (or a list
        of such triples), reported like ``custom_metric``; ``is_higher_better`` sets the
        direction early stopping watches.
    maximize : bool, optional
        Whether a larger ``custom_metric`` is better (XGBoost's argument), default False.

    Returns
    -------
    Booster
        The trained model, with its evaluation history.

    Raises
    ------
    ParameterError
        An unknown parameter, a value out of range, or a peer setting Sapwood does not
        offer (the message says what it does instead); named as given.
    DataError, LabelError
        Unusable data or labels (the message names the row or column).
    KeyboardInterrupt
        Ctrl-C: training stops after the current round (the GIL is released while
        training).

    Notes
    -----
    **Model parameters** (aliases in brackets; defaults are XGBoost's where it has the
    same parameter):

    - ``objective`` [objective_type]: ``reg:squarederror`` (default; LightGBM's
      ``regression``), ``binary:logistic`` (``binary``), ``multi:softprob``
      (``multiclass``), and the other objectives the engine lists in its errors.
    - ``num_class`` [num_classes]: classes of a multiclass objective (taken from the
      labels when not given).
    - ``quantile_alpha``: the quantile ``reg:quantileerror`` fits, default 0.5.
    - ``huber_slope``: where the Huber losses turn from quadratic to linear, default 1.
    - ``tweedie_variance_power``: the variance power of ``reg:tweedie``, default 1.5.
    - ``num_rounds`` [num_boost_round, n_estimators, num_iterations, rounds]: rounds.
    - ``learning_rate`` [eta, shrinkage_rate]: shrinkage of every leaf, default 0.1 (XGBoost: 0.3).
    - ``max_depth``: maximum depth, default 6; -1 or 0 means no limit (then
      ``max_leaves`` must bound the trees).
    - ``max_leaves`` [num_leaves]: maximum leaves per tree, 0 (default) for no limit.
    - ``grow_policy``: ``depthwise`` (default, level by level) or ``lossguide``
      (best-first, LightGBM's leaf-wise growth).
    - ``max_bin`` [max_bins]: bins per numeric feature, default 256.
    - ``max_cat_bin`` [max_cat_bins]: bins per categorical feature, default 65535: the
      most frequent levels seen at least ``min_category_count`` (default 1) times get one
      each, the rest share one.
    - ``min_child_weight`` [min_sum_hessian_in_leaf]: minimum hessian sum in a child,
      default 1.
    - ``lambda`` [reg_lambda, lambda_l2]: L2 regularisation of leaf values, default 1.
    - ``alpha`` [reg_alpha, lambda_l1]: L1 regularisation, default 0.
    - ``gamma`` [min_split_loss, min_gain_to_split, min_split_gain]: minimum loss
      reduction of a split, default 0.
    - ``max_delta_step``: bound on leaf values before shrinkage, 0 (default) for none
      (``count:poisson``: ``poisson_leaf_bound``); for ``count:poisson`` also the
      hessian's offset (0.7 when 0), as in XGBoost.
    - ``poisson_leaf_bound``: ``count:poisson``'s bound on leaf values when
      ``max_delta_step`` is 0, default 2 (XGBoost's is 0.7).
    - ``min_data_in_leaf`` [min_child_samples]: minimum rows in a child, default 0.
    - ``subsample`` [bagging_fraction]: fraction of rows sampled every round, default 1.
    - ``colsample_bytree`` [feature_fraction]: fraction of features per tree, default 1.
    - ``seed`` [random_state]: seed of every random choice, default 0.
    - ``grad_bits``: 0 (default) for exact integer gradients, 2..16 for low-bit
      quantised training (LightGBM's ``use_quantized_grad``).
    - ``base_score``: the initial prediction, estimated from the labels when not given.
    - ``max_cat_to_onehot``, ``max_cat_threshold``, ``cat_smooth``, ``cat_l2``,
      ``min_data_per_group``, ``min_category_count``: categorical splits, as LightGBM
      and XGBoost name them.
    - ``cat_noise``: how a many-level categorical node estimates the noise in its levels'
      means, ``"measured"`` from its rows (default) or ``"fitted"`` from the levels alone.
    - ``min_data_in_bin``: rows a numeric bin must hold, default 3 (LightGBM's).
    - ``heavy_value_bins``: with more distinct values than bins, a value that alone weighs
      a mean bin is bounded by thresholds on both sides (LightGBM's binning), default true.
    - ``bin_sample_rows`` [bin_construct_sample_cnt, subsample_for_bin]: rows sampled to
      compute the bins.
    - ``eval_metric`` [metric]: metrics reported on ``evals`` (a name, a list, or a
      comma-separated string); the objective's default when not given.
    - ``early_stopping_rounds`` [early_stopping]: as the argument of the same name.
    - ``scale_pos_weight``: weight multiplier of the positive rows of ``dtrain`` (binary
      objectives; XGBoost's meaning: rows whose label is 1, or the second class in sorted
      order for class labels).

    **Run options** (never change the model): ``threads`` [nthread, n_jobs,
    num_threads], ``device`` (``cpu``, ``wgpu``, ``cuda``; one GPU by index, ``"cuda:1"``,
    or a list with one per worker, ``["cuda:0", "cuda:1"]``), ``workers``, ``collective``,
    ``comm_codec``, ``comm_overlap``.

    **Peer settings**: ``tree_method="hist"``, ``booster="gbtree"``,
    ``boosting_type="gbdt"`` (or ``boosting``), ``enable_categorical``, ``deterministic``,
    ``force_col_wise``, ``force_row_wise``, ``validate_parameters``, ``subsample_freq=1``,
    ``verbosity``, ``verbose`` and ``silent`` describe what Sapwood always does: they are
    accepted with a one-time warning. Values that would change the model
    (``tree_method="exact"``, ``boosting_type="dart"``, ``booster="gblinear"``,
    ``subsample_freq`` > 1, ...) raise :class:`ParameterError` saying what Sapwood does
    instead.
    """
    if not isinstance(dtrain, (Dataset, DataIter)):
        raise DataError("dtrain must be a sapwood.Dataset or a sapwood.DataIter")
    normalised = _params.normalise(params)
    pairs, user_names = _with_rounds(normalised, num_boost_round)
    init = _init_booster(xgb_model, init_model)
    objective_fn = _objective_setup(pairs, normalised, obj, init)
    metrics = _custom_metrics(custom_metric, feval, normalised.metric_fns, maximize)
    given = _sort_callbacks(callbacks, early_stopping_rounds)
    pairs = _with_stopping(pairs, user_names, given.stopping_rounds)
    streamed = isinstance(dtrain, DataIter)
    # read once: a generator of pairs would be spent by the first look
    given_evals = list(evals or ())
    in_memory = [*_eval_pairs(_memory_evals(given_evals, streamed), Dataset)]
    eval_sets = [*in_memory, *_valid_sets(valid_sets, valid_names)]
    stopping_text = _stopping_text(pairs)
    _require_evals(stopping_text, bool(eval_sets) or len(in_memory) < len(given_evals))
    if isinstance(dtrain, DataIter):
        _check_streamable(objective_fn, normalised, metrics)
        engine_train: _TrainData = _Streamed(dtrain)
        engine_evals = _engine_evals(given_evals, eval_sets)
    else:
        if normalised.scale_pos_weight is not None:
            objective = normalised.value("objective")
            dtrain = _scale_positive(dtrain, normalised.scale_pos_weight, objective)
        engine_train, engine_evals = dtrain, list(eval_sets)
    run = _CustomRun(
        metrics,
        eval_sets,
        [*given.run, *_printing(verbose_eval, bool(engine_evals))],
        hide_builtin=normalised.disable_default_metric and normalised.value("eval_metric") is None,
        margins=objective_fn is not None,
        objective=next((v for k, v in pairs if canonical_param(k) == "objective"), None),
        first_round=0 if init is None else init.num_boosted_rounds(),
    )
    if run.active and stopping_text is not None:
        # the custom metric is the last one: stopping is decided here, not by the engine
        run.stopping_rounds = int(stopping_text)
        pairs = [(k, v) for k, v in pairs if canonical_param(k) != "early_stopping_rounds"]
    native = _call_engine(
        _EngineCall(pairs, user_names, engine_train, engine_evals, init, objective_fn),
        run,
        None if checkpoint is None else (os.fspath(checkpoint), int(checkpoint_every)),
        None if resume is None else os.fspath(resume),
    )
    booster = Booster._wrap(_with_input_types(native, engine_train))
    if run.active:
        booster._custom_history = run.history
    if given.announce and given.stopping_rounds is not None:
        _announce_best(booster, int(given.stopping_rounds))
    if evals_result is not None:
        evals_result.clear()
        evals_result.update(booster.evals_result())
    return booster


def _memory_evals(evals: list[Any], streamed: bool) -> list[Any]:
    """The in-memory evaluation sets of ``evals`` (all of them unless training is read in
    batches, when the others are :class:`DataIter` objects; malformed entries are kept for
    :func:`_eval_pairs` to name)."""
    batched = [
        isinstance(e, (tuple, list)) and any(isinstance(x, DataIter) for x in e) for e in evals
    ]
    if any(batched) and not streamed:
        raise DataError(
            "an evaluation set is a DataIter but the training data is in memory: give it as "
            "a Dataset"
        )
    return [e for e, b in zip(evals, batched) if not b]


def _engine_evals(
    evals: list[Any], in_memory: list[tuple[Dataset, str]]
) -> list[tuple[_TrainData, str]]:
    """Every evaluation set in ``evals`` order, :class:`DataIter` objects read in batches
    (``in_memory`` holds the others, checked, then the LightGBM-style ``valid_sets``)."""
    out: list[tuple[_TrainData, str]] = []
    memory = iter(in_memory)
    for e in evals:
        it = next((x for x in e if isinstance(x, DataIter)), None)
        if it is None:
            out.append(next(memory))
            continue
        name = next((x for x in e if isinstance(x, str)), None)
        if name is None or len(e) != 2:
            raise ParameterError("invalid parameter `evals`: expected (DataIter, name) pairs")
        out.append((_Streamed(it), name))
    out.extend(memory)
    return out


def _check_streamable(
    objective_fn: Optional[Callable[..., Any]],
    normalised: _params.Normalised,
    metrics: Any,
) -> None:
    """Refuses what needs the training rows in memory when they are read in batches."""
    needs = [
        ("obj", objective_fn is not None),
        ("scale_pos_weight", normalised.scale_pos_weight is not None),
        ("custom_metric", bool(metrics)),
        ("disable_default_eval_metric", normalised.disable_default_metric),
    ]
    for name, given in needs:
        if given:
            raise ParameterError(
                f"invalid parameter `{name}`: it needs the training rows in memory, and a "
                "DataIter reads them in batches; give a Dataset"
            )


def _objective_setup(
    pairs: list[tuple[str, str]],
    normalised: _params.Normalised,
    obj: Optional[Objective],
    init: Optional[Booster],
) -> Optional[Callable[..., Any]]:
    """The custom objective (``obj`` or a callable ``params["objective"]``), with the
    objective settings it and the continued model ``init`` need added to ``pairs``."""
    objective_fn = _custom_objective(obj, normalised.objective_fn)
    if init is not None and normalised.value("objective") is None:
        # XGBoost continues with the model's own configuration
        pairs.append(("objective", init.objective))
    if objective_fn is not None:
        _custom_objective_params(pairs, normalised, init)
    return objective_fn


class _EngineCall(NamedTuple):
    """What the engine trains: parameters (with the names the user gave them), data,
    evaluation sets, the model continued and the custom objective."""

    pairs: list[tuple[str, str]]
    user_names: dict[str, str]
    dtrain: _TrainData
    eval_sets: list[tuple[_TrainData, str]]
    init: Optional[Booster]
    objective_fn: Optional[Callable[..., Any]]


def _call_engine(
    call: _EngineCall,
    run: _CustomRun,
    checkpoint: Optional[tuple[str, int]],
    resume: Optional[str],
) -> NativeBooster:
    """Trains ``call`` in the engine, reporting each round to ``run`` (custom metrics) or
    else straight to the callbacks; parameter errors name the parameters as given."""
    hook = run.on_round if run.active else _callback_hook(run.callbacks)
    native_obj = None
    if call.objective_fn is not None and isinstance(call.dtrain, Dataset):
        native_obj = _native_objective(call.objective_fn, call.dtrain)
    try:
        native = _sapwood.train(
            call.pairs, call.dtrain._native, [(name, d._native) for d, name in call.eval_sets],
            hook, checkpoint, resume,
            None if call.init is None else call.init._model,
            native_obj,
            run.on_metrics if run.active else None,
        )
    except ParameterError as e:
        raise _params.renamed(e, call.user_names) from None
    return run.finish(native) if run.active else native


def _announce_best(booster: "Booster", stopping_rounds: int) -> None:
    """LightGBM's lines when early stopping ends training: the best round (1-based) and
    every score of it."""
    best = booster.best_iteration
    history = booster._history_rounds()
    if best is None or best >= len(history):
        return
    stopped = booster.num_boosted_rounds() - 1 - best >= stopping_rounds
    head = "Early stopping, best iteration is:" if stopped else (
        "Did not meet early stopping. Best iteration is:"
    )
    scores = "\t".join(f"{d}'s {m}: {v:g}" for d, m, v in history[best])
    print(f"{head}\n[{best + 1}]\t{scores}")


def _with_input_types(native: NativeBooster, dtrain: _TrainData) -> NativeBooster:
    """``native`` recording what each column of ``dtrain`` held, so that prediction can
    refuse type drift; every training path (here and Dask's rank 0) records them alike, so
    their models stay byte-identical."""
    types = dtrain._input_types
    if types is None or len(types) != len(native.feature_names):
        return native
    return native.with_input_types(types)


#: XGBoost's custom objective: ``obj(preds, dtrain) -> (grad, hess)``.
Objective = Callable[[npt.NDArray[np.float32], "Dataset"], tuple[Any, Any]]
#: XGBoost's custom metric: ``custom_metric(preds, dmatrix) -> (name, value)``.
CustomMetric = Callable[[npt.NDArray[np.float32], "Dataset"], Any]
#: LightGBM's ``feval(preds, dataset) -> (name, value, is_higher_better)``.
Feval = Callable[[npt.NDArray[np.float32], "Dataset"], Any]


def _init_booster(
    xgb_model: Union[Booster, PathLike, None], init_model: Union[Booster, PathLike, None]
) -> Optional[Booster]:
    """The model to continue, from XGBoost's ``xgb_model`` or LightGBM's ``init_model``."""
    if xgb_model is not None and init_model is not None:
        raise ParameterError(
            "invalid parameter `init_model`: given with `xgb_model`, which is the same "
            "thing (XGBoost's name); give one"
        )
    given, name = (xgb_model, "xgb_model") if xgb_model is not None else (init_model, "init_model")
    if given is None:
        return None
    if isinstance(given, Booster):
        if given._native is None:
            raise ParameterError(f"invalid parameter `{name}`: the Booster holds no model")
        return given
    if isinstance(given, (str, os.PathLike)):
        return Booster(model_file=given)
    raise ParameterError(
        f"invalid parameter `{name}`: expected a Booster or a model file's path, got "
        f"{type(given).__name__}"
    )


def _custom_objective(
    obj: Optional[Objective], from_params: Optional[Callable[..., Any]]
) -> Optional[Callable[..., Any]]:
    if obj is not None and from_params is not None:
        raise ParameterError(
            "invalid parameter `obj`: a custom objective is also given as params "
            "`objective`; give one"
        )
    fn = obj if obj is not None else from_params
    if fn is not None and not callable(fn):
        raise ParameterError(
            "invalid parameter `obj`: expected a callable obj(preds, dtrain) -> (grad, hess)"
        )
    return fn


def _custom_objective_params(
    pairs: list[tuple[str, str]], normalised: _params.Normalised, init: Optional[Booster]
) -> None:
    """The engine's settings for a custom objective: an identity loss (the model predicts
    margins) starting at margin 0, unless the user chose an objective or base score."""
    if normalised.value("objective") is None and init is None:
        classes = normalised.value("num_class")
        multiclass = classes is not None and classes.strip() not in ("", "0", "1")
        # both predict margins: the identity loss, or `custom` with one output per class
        pairs.append(("objective", "custom" if multiclass else "reg:squarederror"))
        if normalised.value("base_score") is None:
            pairs.append(("base_score", "0"))
    if multiclass_text := normalised.value("num_class"):
        if multiclass_text.strip() in ("0", "1"):
            # XGBoost's num_class=1 is one output; the engine only takes it for multiclass
            pairs[:] = [(k, v) for k, v in pairs if canonical_param(k) != "num_class"]


def _native_objective(
    fn: Callable[..., Any], dtrain: Dataset
) -> Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]
]:
    """The engine's side of a custom objective: flat margins in, flat float32 (grad,
    hess) out, checked for shape."""

    def objective(
        margins: npt.NDArray[np.float32], groups: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        preds = margins if groups == 1 else margins.reshape(-1, groups)
        answer = fn(preds, dtrain)
        try:
            grad, hess = answer
        except (TypeError, ValueError):
            raise ParameterError(
                "invalid parameter `obj`: the objective must return (grad, hess), got "
                f"{type(answer).__name__}"
            ) from None
        out = []
        for what, values in (("gradients", grad), ("hessians", hess)):
            arr = np.asarray(values, dtype=np.float32)
            if arr.size != margins.size or (arr.ndim == 2 and arr.shape != preds.shape):
                raise ParameterError(
                    f"invalid parameter `obj`: {what} of shape {arr.shape} for predictions "
                    f"of shape {preds.shape}"
                )
            out.append(np.ascontiguousarray(arr).ravel())
        return out[0], out[1]

    return objective


class _Metric(NamedTuple):
    """A custom metric function, with the peer whose convention it follows."""

    fn: Callable[..., Any]
    #: ``xgboost`` (returns (name, value)) or ``lightgbm`` ((name, value, higher_better)).
    style: str
    #: Whether larger is better (XGBoost's ``maximize``; LightGBM's metrics say it).
    maximize: bool = False


def _custom_metrics(
    custom_metric: Optional[CustomMetric],
    feval: Union[Feval, Sequence[Feval], None],
    from_params: Sequence[Callable[..., Any]],
    maximize: Optional[bool],
) -> list[_Metric]:
    out = []
    if custom_metric is not None:
        if not callable(custom_metric):
            raise ParameterError(
                "invalid parameter `custom_metric`: expected a callable "
                "custom_metric(preds, dmatrix) -> (name, value)"
            )
        out.append(_Metric(custom_metric, "xgboost", bool(maximize)))
    fevals = [] if feval is None else [feval] if callable(feval) else list(feval)
    for f in [*fevals, *from_params]:
        if not callable(f):
            raise ParameterError(
                "invalid parameter `feval`: expected callables feval(preds, dataset) -> "
                "(name, value, is_higher_better)"
            )
        out.append(_Metric(f, "lightgbm"))
    if maximize is not None and custom_metric is None:
        raise ParameterError(
            "invalid parameter `maximize`: it gives the direction of `custom_metric`, "
            "which is not given"
        )
    return out


#: Objectives whose output is exp(margin), the sigmoid or the softmax of the margins.
_LOG_LINK = frozenset(
    {"count:poisson", "poisson", "reg:tweedie", "tweedie", "reg:gamma", "gamma"}
)
_SIGMOID = frozenset({"binary:logistic", "binary"})
_SOFTMAX = frozenset({"multi:softprob", "multiclass", "softmax", "multi:softmax"})


def _transform(objective: Optional[str], margins: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """What a built-in objective predicts from margins, as the peers hand custom metrics."""
    name = (objective or "").strip()
    m = margins.astype(np.float64)
    if name in _SIGMOID:
        out = 1.0 / (1.0 + np.exp(-m))
    elif name in _LOG_LINK:
        out = np.exp(m)
    elif name in _SOFTMAX and m.ndim == 2:
        e = np.exp(m - m.max(axis=1, keepdims=True))
        out = e / e.sum(axis=1, keepdims=True)
    else:
        return margins
    return out.astype(np.float32)


class _CustomRun:
    """Custom metrics during training: computed from each evaluation set's margins after
    every round (the engine hands them over after the round's callback), joined with the
    engine's metrics, shown to callbacks, and watched for early stopping."""

    def __init__(
        self,
        metrics: list[_Metric],
        eval_sets: list[tuple[Dataset, str]],
        callbacks: list[Callback],
        hide_builtin: bool,
        margins: bool,
        objective: Optional[str],
        first_round: int,
    ) -> None:
        self.metrics = metrics
        self.sets = {name: d for d, name in eval_sets}
        self.callbacks = callbacks
        self.hide_builtin = hide_builtin
        self.margins = margins
        self.objective = objective
        self.active = bool(eval_sets) and (bool(metrics) or hide_builtin)
        #: Rounds of the model continued (round numbers count from there).
        self.first_round = first_round
        self.stopping_rounds: Optional[int] = None
        #: The engine's metrics of the round just trained, and its number.
        self.pending: tuple[int, list[tuple[str, str, float]]] = (0, [])
        self.history: list[list[tuple[str, str, float]]] = []
        self.num_rounds = 0
        self.elapsed = 0.0
        self.best: Optional[tuple[int, float]] = None
        self.stopped = False

    def on_round(
        self, round_: int, num_rounds: int, metrics: list[tuple[str, str, float]], elapsed: float
    ) -> bool:
        # the custom metrics of this round come next, in on_metrics
        self.pending = (round_, [] if self.hide_builtin else metrics)
        self.num_rounds, self.elapsed = num_rounds, elapsed
        return False

    def _evaluate(self, name: str, margins: npt.NDArray[np.float32]) -> list[tuple[str, float, bool]]:
        data = self.sets[name]
        n = data.num_row()
        preds = margins if margins.size == n else margins.reshape(n, -1)
        if not self.margins:
            preds = _transform(self.objective, preds)
        out = []
        for metric in self.metrics:
            answer = metric.fn(preds.copy(), data)
            items = answer if isinstance(answer, list) else [answer]
            for item in items:
                try:
                    if metric.style == "xgboost":
                        metric_name, value = item
                        higher = metric.maximize
                    else:
                        metric_name, value, higher = item
                except (TypeError, ValueError):
                    what = "(name, value)" if metric.style == "xgboost" else (
                        "(name, value, is_higher_better)"
                    )
                    arg = "custom_metric" if metric.style == "xgboost" else "feval"
                    raise ParameterError(
                        f"invalid parameter `{arg}`: it must return {what}, got {item!r}"
                    ) from None
                out.append((str(metric_name), float(value), bool(higher)))
        return out

    def on_metrics(self, _round: int, sets: list[tuple[str, npt.NDArray[np.float32]]]) -> bool:
        round_, row = self.pending[0], list(self.pending[1])
        watched: Optional[tuple[float, bool]] = None
        for name, margins in sets:
            computed = self._evaluate(name, margins) if self.metrics else []
            at = max((i + 1 for i, m in enumerate(row) if m[0] == name), default=len(row))
            row[at:at] = [(name, metric, value) for metric, value, _ in computed]
            if computed:
                watched = (computed[-1][1], computed[-1][2])
        self.history.append(row)
        stop = _notify(self.callbacks, round_, self.num_rounds, row, self.elapsed)
        if self.stopping_rounds is not None and watched is not None:
            value, higher = watched
            if self.best is None or (value > self.best[1] if higher else value < self.best[1]):
                self.best = (round_, value)
            if round_ - self.best[0] >= self.stopping_rounds:
                stop = True
        self.stopped = stop
        return stop

    def finish(self, native: NativeBooster) -> NativeBooster:
        """The model with the best iteration the custom metric found (the engine asks the
        metric before each round's stop decision, so it stops at the round asked)."""
        self.history = self.history[: native.num_rounds - self.first_round]
        if self.stopping_rounds is not None and self.best is not None:
            native = native.with_best_iteration(self.best[0])
        return native


def _valid_sets(
    valid_sets: Optional[Sequence[Dataset]], valid_names: Optional[Sequence[str]]
) -> list[tuple[Dataset, str]]:
    """LightGBM's ``valid_sets`` and ``valid_names`` as ``(Dataset, name)`` pairs."""
    if valid_sets is None:
        if valid_names is not None:
            raise ParameterError("invalid parameter `valid_names`: given without `valid_sets`")
        return []
    sets = list(valid_sets)
    names = [f"valid_{i}" for i in range(len(sets))] if valid_names is None else list(valid_names)
    if len(names) != len(sets):
        raise ParameterError(
            f"invalid parameter `valid_names`: {len(names)} names for {len(sets)} valid_sets"
        )
    return list(zip(sets, names))


def _index_parameters() -> None:
    """Adds to :func:`train`'s documentation any engine parameter (or alias) its text does
    not describe yet, so that ``help(sapwood.train)`` names every one."""
    doc = train.__doc__ or ""
    absent = [
        f"``{name}``" + (f" [{', '.join(aliases)}]" if aliases else "")
        for name, aliases in _sapwood.parameter_names()
        if name not in doc or any(a not in doc for a in aliases)
    ]
    if absent:
        train.__doc__ = doc.rstrip() + (
            "\n\n    **Also accepted** (see the engine's documentation): "
            + "; ".join(absent)
            + ".\n"
        )


_index_parameters()


#: Objectives with a positive class (``scale_pos_weight`` applies to them).
_BINARY_OBJECTIVES = frozenset({"binary:logistic", "binary", "logistic", "binary:logitraw"})


def _scale_positive(dtrain: Dataset, factor: float, objective: Optional[str]) -> Dataset:
    """``dtrain`` with the weights of its positive rows multiplied by ``factor`` (XGBoost's
    ``scale_pos_weight``): rows labelled 1, or of the second class of two class labels."""
    if objective is None or objective.strip() not in _BINARY_OBJECTIVES:
        raise ParameterError(
            "invalid parameter `scale_pos_weight`: it weights the positive class of a "
            f"binary objective, but the objective is {objective or 'reg:squarederror'}"
        )
    data, label, weight, categorical, names = dtrain._source
    if isinstance(data, NativeData) or label is None:
        raise ParameterError(
            "invalid parameter `scale_pos_weight`: it needs a Dataset made from data "
            "with a label"
        )
    y = np.asarray(label).ravel()
    if y.dtype.kind in "biuf":
        positive = y == 1
    else:
        classes = sorted(set(y.tolist()))
        if len(classes) != 2:
            raise ParameterError(
                f"invalid parameter `scale_pos_weight`: the label has {len(classes)} "
                "classes, a binary objective needs two"
            )
        positive = y == classes[1]
    w = np.ones(len(y), dtype=np.float32) if weight is None else np.asarray(weight, dtype=np.float32)
    w = np.where(positive, w * np.float32(factor), w).astype(np.float32)
    return Dataset(
        data, label=label, weight=w, categorical_features=categorical, feature_names=names,
        base_margin=dtrain._base_margin, group=dtrain.get_group(),
    )


#: Metrics where a larger value is better (the engine's own rule for early stopping);
#: the ranking metrics also with a cut-off (``ndcg@10``).
_HIGHER_IS_BETTER = frozenset({"auc", "aucpr", "ndcg", "map", "pre"})

#: Cross-validation folds: ``(train_indices, test_indices)`` pairs, or a scikit-learn
#: splitter (anything with ``split(X, y)``).
Folds = Union[Iterable[tuple[Any, Any]], Any]


def _take_rows(data: Any, rows: npt.NDArray[np.intp]) -> Any:
    """Rows ``rows`` of any input :class:`Dataset` accepts, in the same kind of input."""
    if data is None:
        return None
    if isinstance(data, NativeData):
        raise DataError("cv needs a Dataset made from data, not from a NativeData")
    if _data.is_scipy_sparse(data):
        return data.tocsr()[rows]  # COO and DIA cannot index rows; CSR can, sparse to sparse
    if _data.is_pandas_frame(data) or (
        type(data).__module__.startswith("pandas") and hasattr(data, "iloc")
    ):
        return data.iloc[rows]
    module = type(data).__module__
    if module.startswith("polars"):
        return data[rows]
    if _data.is_arrow_like(data):
        import pyarrow as pa

        table = data if hasattr(data, "take") else pa.table(data)
        return table.take(pa.array(rows))
    if isinstance(data, np.ndarray):
        return data[rows]
    return np.asarray(data)[rows] if not isinstance(data, list) else [data[i] for i in rows]


def _query_ids(dtrain: Dataset) -> Optional[npt.NDArray[np.intp]]:
    """Each row's query index, or None without query groups."""
    sizes = dtrain.get_group()
    if sizes is None:
        return None
    return np.repeat(np.arange(len(sizes), dtype=np.intp), np.asarray(sizes, dtype=np.intp))


def _subset(dtrain: Dataset, rows: npt.NDArray[np.intp]) -> Dataset:
    data, label, weight, categorical, names = dtrain._source
    margin = dtrain._base_margin
    queries = _query_ids(dtrain)
    return Dataset(
        _take_rows(data, rows),
        label=_take_rows(label, rows),
        weight=_take_rows(weight, rows),
        categorical_features=categorical,
        feature_names=names,
        base_margin=None if margin is None else margin[rows],
        qid=None if queries is None else queries[rows],
    )


def _query_folds(
    queries: npt.NDArray[np.intp], nfold: int, stratified: bool, shuffle: bool, seed: int
) -> list[tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]:
    """Folds of whole queries, rows in their order, dealt out like rows are."""
    if stratified:
        raise ParameterError(
            "invalid parameter `stratified`: folds of ranking data hold whole queries and "
            "cannot follow a class balance"
        )
    n_queries = int(queries.max()) + 1 if queries.size else 0
    if not 2 <= int(nfold) <= n_queries:
        raise ParameterError(
            f"invalid parameter `nfold`: {nfold} must be in 2..{n_queries} (queries)"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_queries) if shuffle else np.arange(n_queries)
    fold_of_query = np.empty(n_queries, dtype=np.intp)
    for k, part in enumerate(np.array_split(order, int(nfold))):
        fold_of_query[part] = k
    fold_of = fold_of_query[queries]
    everything = np.arange(queries.size)
    return [(everything[fold_of != k], everything[fold_of == k]) for k in range(int(nfold))]


def _make_folds(
    dtrain: Dataset, nfold: int, stratified: bool, folds: Optional[Folds], shuffle: bool, seed: int
) -> list[tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]:
    n = dtrain.num_row()
    label = dtrain._source[1]
    if folds is not None:
        if hasattr(folds, "split"):  # a scikit-learn splitter
            X = np.zeros((n, 1))
            y = None if label is None else np.asarray(label)
            folds = folds.split(X, y)
        out = []
        for i, item in enumerate(folds):
            try:
                tr, te = item
            except (TypeError, ValueError):
                raise ParameterError(
                    f"invalid parameter `folds`: item {i} is not a (train_indices, "
                    "test_indices) pair"
                ) from None
            tr, te = np.asarray(tr, dtype=np.intp), np.asarray(te, dtype=np.intp)
            for part in (tr, te):
                if part.ndim != 1 or part.size == 0 or part.min() < 0 or part.max() >= n:
                    raise ParameterError(
                        f"invalid parameter `folds`: fold {i} holds an empty or out-of-range "
                        f"index list for {n} rows"
                    )
            queries = _query_ids(dtrain)
            if queries is not None:
                for part in (tr, te):
                    # a query's rows must stay together and in order
                    q = queries[part]
                    whole = np.isin(queries, np.unique(q)).sum() == part.size
                    if not whole or np.any(np.diff(part) <= 0):
                        raise ParameterError(
                            f"invalid parameter `folds`: fold {i} splits a query or reorders "
                            "rows; give whole queries in row order (GroupKFold with the "
                            "query ids as groups)"
                        )
            out.append((tr, te))
        if not out:
            raise ParameterError("invalid parameter `folds`: no folds given")
        return out
    queries = _query_ids(dtrain)
    if queries is not None:
        return _query_folds(queries, nfold, stratified, shuffle, seed)
    if not 2 <= int(nfold) <= n:
        raise ParameterError(f"invalid parameter `nfold`: {nfold} must be in 2..{n} (rows)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n) if shuffle else np.arange(n)
    fold_of = np.empty(n, dtype=np.intp)
    if stratified:
        if label is None:
            raise ParameterError("invalid parameter `stratified`: the Dataset has no label")
        y = np.asarray(label).ravel()
        # rows grouped by label (stably, in the shuffled order within a label) are dealt
        # out over the folds in turn: every fold gets its share of each class, and the
        # deal continues from one class to the next, so classes smaller than nfold (or
        # continuous labels, every value its own "class": folds stratified by the sorted
        # label) never leave a fold with all the rows and another with none
        _, classes = np.unique(y[order], return_inverse=True)
        by_class = order[np.argsort(classes, kind="stable")]
        fold_of[by_class] = np.arange(n) % int(nfold)
    else:
        for k, part in enumerate(np.array_split(order, int(nfold))):
            fold_of[part] = k
    everything = np.arange(n)
    return [
        (everything[fold_of != k], np.sort(everything[fold_of == k]))
        for k in range(int(nfold))
    ]


def cv(
    params: Params,
    dtrain: Dataset,
    num_boost_round: int = 10,
    nfold: int = 3,
    stratified: bool = False,
    folds: Optional[Folds] = None,
    metrics: Union[str, Sequence[str]] = (),
    early_stopping_rounds: Optional[int] = None,
    as_pandas: bool = False,
    seed: int = 0,
    shuffle: bool = True,
    *,
    obj: Optional[Objective] = None,
    custom_metric: Optional[CustomMetric] = None,
    feval: Union[Feval, Sequence[Feval], None] = None,
    maximize: Optional[bool] = None,
    fpreproc: Optional[Callable[..., Any]] = None,
    verbose_eval: Union[bool, int, None] = None,
    show_stdv: bool = True,
    callbacks: Optional[Sequence[Callback]] = None,
    return_cvbooster: bool = False,
) -> Any:
    """Cross-validation, as ``xgboost.cv`` (and ``lightgbm.cv``): trains one booster per
    fold and returns the mean and (population) standard deviation over the folds of every
    metric after every round, as ``{"train-rmse-mean": [...], "train-rmse-std": [...],
    "test-rmse-mean": [...], "test-rmse-std": [...]}`` (a pandas DataFrame with those
    columns when ``as_pandas``).

    ``folds`` are ``(train_indices, test_indices)`` pairs or a scikit-learn splitter
    (``KFold``, ``StratifiedKFold``, ``GroupKFold`` without groups...); otherwise
    ``nfold`` folds are made, shuffled with ``seed`` when ``shuffle``, with every class in
    the same proportion in each fold when ``stratified``. With query groups (ranking),
    folds hold whole queries (given ``folds`` must not split one). ``metrics`` replaces
    the ``eval_metric`` of ``params``; ``obj``, ``custom_metric``, ``feval`` and
    ``maximize`` are :func:`train`'s. ``fpreproc(dtrain, dtest, params)`` returns each
    fold's ``(dtrain, dtest, params)``.

    With ``early_stopping_rounds``, the last metric's mean on the test folds must improve
    at least once every that many rounds; the lists end at the best round (their last
    entry), as in XGBoost. ``callbacks`` (callables taking a :class:`RoundInfo`) see each
    round's means, ``{"train": {metric: mean}, "test": {...}}``, and end the lists at the
    round where one returns True. ``verbose_eval`` prints every round's means (every
    ``verbose_eval`` rounds for a number), with their standard deviations when
    ``show_stdv``. ``return_cvbooster`` adds the folds' boosters under ``"cvbooster"``
    (LightGBM's key; not with ``as_pandas``).

    Folds are trained one after another, every round of each (the result is what training
    them together and stopping together would give: a round never depends on later ones).
    Each fold's Dataset is built from the rows of the data ``dtrain`` was made from.
    """
    if not isinstance(dtrain, Dataset):
        raise DataError("dtrain must be a sapwood.Dataset")
    if dtrain._source[1] is None:
        raise DataError("dtrain has no label: cross-validation needs one")
    if return_cvbooster and as_pandas:
        raise ParameterError(
            "invalid parameter `return_cvbooster`: the boosters do not fit a DataFrame; "
            "give as_pandas=False"
        )
    run_params: list[tuple[str, Any]] = (
        [(str(k), v) for k, v in params.items()] if isinstance(params, Mapping) else list(params)
    )
    if metrics:
        run_params = [(k, v) for k, v in run_params if canonical_param(k) != "eval_metric"]
        run_params.append(("eval_metric", [metrics] if isinstance(metrics, str) else list(metrics)))
    histories: list[EvalsResult] = []
    boosters: list[Booster] = []
    for tr, te in _make_folds(dtrain, nfold, stratified, folds, shuffle, seed):
        fold_train, fold_test, fold_params = _subset(dtrain, tr), _subset(dtrain, te), run_params
        if fpreproc is not None:
            fold_train, fold_test, fold_params = fpreproc(fold_train, fold_test, list(run_params))
        history: EvalsResult = {}
        boosters.append(
            train(
                fold_params,
                fold_train,
                num_boost_round,
                evals=[(fold_train, "train"), (fold_test, "test")],
                verbose_eval=False,
                evals_result=history,
                obj=obj,
                custom_metric=custom_metric,
                feval=feval,
                maximize=maximize,
            )
        )
        histories.append(history)
    result = _fold_statistics(histories)
    keep = min((len(v) for v in result.values()), default=0)
    if early_stopping_rounds is not None and histories[0].get("test"):
        metric = list(histories[0]["test"])[-1]
        higher = (
            bool(maximize)
            if maximize is not None and (custom_metric is not None or feval is not None)
            else metric.split("@")[0] in _HIGHER_IS_BETTER
        )
        keep = _cv_best_round(result[f"test-{metric}-mean"], higher, int(early_stopping_rounds))
    keep = _cv_rounds_shown(result, keep, num_boost_round, callbacks, verbose_eval, show_stdv)
    result = {k: v[:keep] for k, v in result.items()}
    if return_cvbooster:
        out: dict[str, Any] = dict(result)
        out["cvbooster"] = boosters
        return out
    if as_pandas:
        import pandas as pd

        return pd.DataFrame(result)
    return result


def _fold_statistics(histories: list[EvalsResult]) -> dict[str, list[float]]:
    """The mean and (population) standard deviation over the folds of every metric after
    every round: ``{"train-rmse-mean": [...], "train-rmse-std": [...], "test-...": ...}``."""
    result: dict[str, list[float]] = {}
    for dataset in ("train", "test"):
        for metric in histories[0].get(dataset, {}):
            per_fold = np.array([h[dataset][metric] for h in histories], dtype=np.float64)
            result[f"{dataset}-{metric}-mean"] = [float(v) for v in per_fold.mean(axis=0)]
            result[f"{dataset}-{metric}-std"] = [float(v) for v in per_fold.std(axis=0)]
    return result


def _cv_best_round(curve: list[float], higher: bool, stopping_rounds: int) -> int:
    """The rounds to keep after early stopping on ``curve`` (the watched mean): up to its
    best round, looking no further than ``stopping_rounds`` rounds past the best."""
    best = 0
    for i, value in enumerate(curve):
        if (value > curve[best]) if higher else (value < curve[best]):
            best = i
        if i - best >= stopping_rounds:
            break
    return best + 1


def _cv_rounds_shown(
    result: dict[str, list[float]],
    keep: int,
    num_boost_round: int,
    callbacks: Optional[Sequence[Callback]],
    verbose_eval: Union[bool, int, None],
    show_stdv: bool,
) -> int:
    """Shows the first ``keep`` rounds' means to ``callbacks`` and prints them as
    ``verbose_eval`` asks; the rounds to keep, fewer when a callback stops."""
    period = 1 if verbose_eval is True else int(verbose_eval or 0)
    for i in range(keep):
        means: list[tuple[str, str, float]] = []
        for key, values in result.items():
            if key.endswith("-mean"):
                dataset, metric = key[: -len("-mean")].split("-", 1)
                means.append((dataset, metric, values[i]))
        stop = _notify(list(callbacks or ()), i, num_boost_round, means, 0.0)
        if period and (i % period == 0 or i == keep - 1 or stop):
            cells = []
            for key, values in result.items():
                if key.endswith("-mean"):
                    name = key[: -len("-mean")]
                    std = result[f"{name}-std"][i]
                    cells.append(f"{name}:{values[i]:.5f}" + (f"+{std:.5f}" if show_stdv else ""))
            print(f"[{i}]\t" + "\t".join(cells))
        if stop:
            return i + 1
    return keep
