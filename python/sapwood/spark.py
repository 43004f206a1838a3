"""Training on a Spark cluster, as ``xgboost.spark``: the ``pyspark.ml`` estimators
:class:`SapwoodClassifier`, :class:`SapwoodRegressor` and :class:`SapwoodRanker`, whose
fitted models (:class:`SapwoodClassificationModel`, :class:`SapwoodRegressionModel`,
:class:`SapwoodRankingModel`) are Spark ML Transformers (``pip install sapwood[spark]``;
pyspark 4.1 or newer, Java 17).

``fit`` runs **one Spark barrier stage** of ``num_workers`` tasks
(``DataFrame.mapInArrow(..., barrier=True)``): each task is one rank of a Sapwood TCP job
(the collective :mod:`sapwood.dask` uses) and hands its partition to the engine as the
Arrow record batches Spark gives it. The tasks learn each other's row counts, rank 0's
address (a port it has already bound) and a fresh random token through
``BarrierTaskContext.allGather``: no fixed port, no shared file.

Which rows each rank trains, in which order, decides the model (row sampling and cut
sampling hash global row indices), so it is fixed, and logged when data is moved:

- **Regression and classification.** A DataFrame with ``num_workers`` partitions is
  trained as it is: rank ``i`` trains partition ``i``. Otherwise it is repartitioned to
  ``num_workers`` partitions **in its own row order** (a range partitioning on the rows'
  positions, then sorted within partitions), so the ranks' rows follow one another in
  the DataFrame's order either way.
- **Ranking.** The rows are range-partitioned by query id (a query is never cut) and
  sorted within partitions by query id, then by their position in the DataFrame: the
  order is the rows stably sorted by ``qidCol``.

The model is then the one :func:`sapwood.train` (or the scikit-learn estimator of the
same name with the same parameters) saves for those rows in that order, byte for byte,
for any ``num_workers``: ``df.toPandas()`` is that order for the first case, and
``df.toPandas().sort_values(qid, kind="stable")`` for ranking. Empty partitions train
nothing (the ranks are the non-empty partitions, in order).

``transform`` adds Spark ML's columns through an Arrow UDF (the booster is broadcast
once per model): ``prediction`` for every model, and for classifiers ``probability`` and
``rawPrediction`` (vectors; a binary model's raw prediction is ``[-margin, margin]``).
``pred_contrib_col`` and ``pred_leaf_col`` add SHAP contributions
(:meth:`sapwood.Booster.predict` with ``pred_contribs=True``, flattened) and leaf
indices as vectors.

A rank whose executor dies, or that is silent longer than ``comm_timeout`` seconds, ends
every other rank with an error, and ``fit`` raises :class:`sapwood.BackendError` naming
the rank; the failed stage is not retried (Spark never retries a failed barrier result
stage) and no model is returned.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import pickle
import re
import secrets
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple, Optional, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pyspark import BarrierTaskContext, TaskContext
from pyspark.ml import Estimator, Model
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (
    HasFeaturesCol,
    HasLabelCol,
    HasPredictionCol,
    HasProbabilityCol,
    HasRawPredictionCol,
    HasValidationIndicatorCol,
    HasWeightCol,
)
from pyspark.ml.util import (
    DefaultParamsReadable,
    DefaultParamsReader,
    DefaultParamsWritable,
    DefaultParamsWriter,
    MLReadable,
    MLReader,
    MLWritable,
    MLWriter,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import _params, _sapwood
from ._params import canonical_param
from ._sapwood import BackendError, DataError, ParameterError
from .core import (
    Booster,
    Callback,
    Dataset,
    _callback_hook,
    _print_evaluation,
    _with_input_types,
)
from .sklearn import (
    DEFAULT_ROUNDS,
    SapwoodClassifier as _LocalClassifier,
    SapwoodRanker as _LocalRanker,
    SapwoodRegressor as _LocalRegressor,
    _is_classification,
    _RANKING_OBJECTIVES,
    _SapwoodModel,
)

__all__ = [
    "SapwoodClassifier",
    "SapwoodRegressor",
    "SapwoodRanker",
    "SapwoodClassificationModel",
    "SapwoodRegressionModel",
    "SapwoodRankingModel",
]

#: The default of ``comm_timeout``: the longest wait for a peer, in seconds.
DEFAULT_COMM_TIMEOUT = 60.0

_log = logging.getLogger("sapwood.spark")

#: Column names used inside the training and prediction plans (never a user's column).
_FEATURES = "__sapwood_features"
_LABEL = "__sapwood_label"
_WEIGHT = "__sapwood_weight"
_QID = "__sapwood_qid"
_POS = "__sapwood_position"
_OUT = "__sapwood_output"

#: Where a saved model keeps its Sapwood model file, under the model's directory.
_MODEL_FILE = "model/sapwood.json"

_M = TypeVar("_M", bound="_SapwoodSparkModel")


# ---- parameters ------------------------------------------------------------------------


def _identity(value: Any) -> Any:
    return value


#: The scikit-learn estimators' constructor parameters, with their defaults: each is a
#: Spark Param of the same name (``callbacks`` and ``class_weight`` are handled apart).
_SKLEARN_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(_SapwoodModel.__init__).parameters.items()
    if p.kind is p.KEYWORD_ONLY and name not in ("callbacks", "class_weight")
}
# a Spark job trains the rounds (and leaf minimum) it is given: the plain estimators'
# choice on held-out rows needs every row in one process
_SKLEARN_DEFAULTS["n_estimators"] = DEFAULT_ROUNDS
_SKLEARN_DEFAULTS["min_child_samples"] = 0

#: Engine parameters a Spark estimator sets itself (or that a rank cannot take).
_MANAGED = frozenset({"num_class", "collective", "comm_timeout", "objective"})


def _engine_extras() -> list[str]:
    """The engine's parameters that no constructor parameter of the scikit-learn
    estimators covers (``cat_smooth``, ``monotone_constraints``, ...), canonical names."""
    covered = {canonical_param(n) for n in _SKLEARN_DEFAULTS} - {None}
    return [
        name
        for name, _aliases in _sapwood.parameter_names()
        if name not in covered and name not in _MANAGED
    ]


_EXTRAS: list[str] = _engine_extras()


class _SapwoodParams(
    HasFeaturesCol, HasLabelCol, HasWeightCol, HasPredictionCol, HasValidationIndicatorCol
):
    """The Params every Sapwood Spark estimator and model has."""

    features_cols: Param[list[str]] = Param(
        Params._dummy(),
        "features_cols",
        "numeric, boolean or string (categorical) columns used as features, instead of the "
        "vector column featuresCol",
        typeConverter=TypeConverters.toListString,
    )
    num_workers: Param[int] = Param(
        Params._dummy(),
        "num_workers",
        "Spark tasks (Sapwood ranks) training in one barrier stage",
        typeConverter=TypeConverters.toInt,
    )
    comm_timeout: Param[float] = Param(
        Params._dummy(),
        "comm_timeout",
        "the longest wait for a peer rank, in seconds",
        typeConverter=TypeConverters.toFloat,
    )
    pred_contrib_col: Param[str] = Param(
        Params._dummy(),
        "pred_contrib_col",
        "transform adds each row's SHAP contributions (a vector) under this name",
        typeConverter=TypeConverters.toString,
    )
    pred_leaf_col: Param[str] = Param(
        Params._dummy(),
        "pred_leaf_col",
        "transform adds each row's leaf index in every tree (a vector) under this name",
        typeConverter=TypeConverters.toString,
    )
    callbacks: Param[Any] = Param(
        Params._dummy(),
        "callbacks",
        "callables taking a sapwood.RoundInfo, run after every round on rank 0's executor "
        "(not saved)",
        typeConverter=_identity,
    )

    def _init_defaults(self) -> None:
        self._setDefault(
            featuresCol="features", labelCol="label", predictionCol="prediction",
            num_workers=1, comm_timeout=DEFAULT_COMM_TIMEOUT, **_SKLEARN_DEFAULTS,
        )

    def _set_params(self, kwargs: dict[str, Any]) -> None:
        """Sets Params by name; an engine alias (``eta``, ``num_leaves``) sets the Param of
        its engine name; unknown names are refused with the engine's suggestion."""
        for name, value in kwargs.items():
            target = self._param_name(name)
            if target == "callbacks" and value is not None:
                if not all(callable(cb) for cb in value):
                    raise ParameterError(
                        "invalid parameter `callbacks`: every callback must be callable"
                    )
                value = list(value)
            self._set(**{target: value})

    def _param_name(self, name: str) -> str:
        if self.hasParam(name):
            return name
        canonical = canonical_param(name)
        if canonical is not None:
            for own in (*_SKLEARN_DEFAULTS, *_EXTRAS):
                if canonical_param(own) == canonical and self.hasParam(own):
                    return own
        _params.check_name(name)  # raises, with "did you mean", for unknown names
        raise ParameterError(
            f"invalid parameter `{name}`: not a parameter of {type(self).__name__}"
        )

    def _value(self, name: str) -> Any:
        param = self.getParam(name)
        return self.getOrDefault(param) if self.isDefined(param) else None


def _add_engine_params() -> None:
    """One Spark Param per scikit-learn constructor parameter and per other engine
    parameter, under the same names (added to the class so that every instance, copy and
    reader sees them)."""
    for name in _SKLEARN_DEFAULTS:
        setattr(
            _SapwoodParams,
            name,
            Param(Params._dummy(), name, f"as in sapwood.SapwoodRegressor ({name})", _identity),
        )
    for name in _EXTRAS:
        setattr(
            _SapwoodParams,
            name,
            Param(Params._dummy(), name, f"the engine parameter {name} (see sapwood.train)",
                  _identity),
        )


_add_engine_params()


# ---- the training job ------------------------------------------------------------------


class _Job(NamedTuple):
    """What every task is told."""

    pairs: list[tuple[str, str]]
    user_names: dict[str, str]
    vector: bool
    features: list[str]
    categorical_features: Any
    missing: Optional[float]
    has_weight: bool
    has_qid: bool
    timeout: float
    threads: Optional[int]
    evals: Optional[Any]
    callbacks: list[Callback]
    print_period: int


def _rows_of(table: pa.Table, vector: bool, features: list[str]) -> Any:
    """The features of an Arrow table: an (n, d) float64 matrix from an array column, or
    the table of the feature columns."""
    if not vector:
        return table.select(features)
    column = table.column(_FEATURES).combine_chunks() if table.num_rows else None
    if column is None:
        return np.zeros((0, 0), dtype=np.float64)
    if column.null_count:
        raise DataError("invalid parameter `featuresCol`: a row has no feature vector (null)")
    offsets = column.offsets.to_numpy()
    widths = np.diff(offsets)
    if widths.size and np.any(widths != widths[0]):
        row = int(np.argmax(widths != widths[0]))
        raise DataError(
            f"invalid parameter `featuresCol`: feature vectors of {widths[0]} and "
            f"{widths[row]} values (row {row} of a partition); every row needs the same size"
        )
    values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    width = int(widths[0]) if widths.size else 0
    return np.ascontiguousarray(values.reshape(len(column), width))


def _dataset(table: pa.Table, job: _Job) -> Dataset:
    """A :class:`sapwood.Dataset` of a task's rows."""
    label = table.column(_LABEL).to_numpy(zero_copy_only=False).astype(np.float32)
    weight = None
    if job.has_weight:
        weight = table.column(_WEIGHT).to_numpy(zero_copy_only=False).astype(np.float32)
    qid = None
    if job.has_qid:
        qid = table.column(_QID).to_numpy(zero_copy_only=False).astype(np.int64)
    return Dataset(
        _rows_of(table, job.vector, job.features), label=label, weight=weight, qid=qid,
        categorical_features=job.categorical_features, missing=job.missing,
    )


def _task_host(context: Any, partition: int) -> str:
    """The host of the executor running a barrier task."""
    address = str(context.getTaskInfos()[partition].address)
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
    if host.startswith("[") and "]" in host:
        host = host[1 : host.index("]")]
    return host


def _train_task(job: _Job, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One barrier task: one rank of the TCP job. Rank 0 yields the pickled booster."""
    context: Any = BarrierTaskContext.get()
    partition = int(context.partitionId())
    rank = -1
    listener = None
    try:
        collected = list(batches)
        table = pa.Table.from_batches(collected) if collected else None
        rows = 0 if table is None else table.num_rows
        # every task learns every partition's rows: the ranks are the non-empty partitions
        counts = [int(m) for m in context.allGather(str(rows))]
        ranked = [p for p, n in enumerate(counts) if n > 0]
        if not ranked:
            raise DataError("invalid parameter `dataset`: there are no training rows")
        rank = ranked.index(partition) if rows else -1
        # rank 0 announces where it listens and the job's token
        first = ranked[0]
        announce = ""
        if partition == first:
            host = _task_host(context, partition)
            # bound now and kept: a port merely found free could be taken by any socket
            # opened before training binds it (allGather's own connection, for one)
            listener = _sapwood.listen(host)
            port = listener.port
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            announce = json.dumps({"coordinator": where, "token": secrets.token_hex(16)})
        told = json.loads(context.allGather(announce)[first])
        if table is None:
            return
        offset = sum(counts[:partition])
        dtrain = _dataset(table, job)
        del table, collected
        pairs = list(job.pairs)
        if not any(canonical_param(k) == "threads" for k, _ in pairs):
            pairs.append(("threads", str(job.threads or int(context.cpus()) or 1)))
        evals = []
        callbacks = list(job.callbacks) if rank == 0 else []
        if rank == 0 and job.evals is not None:
            valid = pa.ipc.open_stream(job.evals.value).read_all()
            evals.append(("validation_0", _dataset(valid, job)._native))
            if job.print_period > 0:
                callbacks.append(_print_evaluation(job.print_period))
        try:
            native = _sapwood.train_tcp(
                pairs, dtrain._native, offset, sum(counts), rank, len(ranked),
                told["coordinator"], told["token"], job.timeout, None, evals, _callback_hook(callbacks),
                listener,
            )
        except ParameterError as e:
            raise _params.renamed(e, job.user_names) from None
        if rank == 0:
            booster = Booster._wrap(_with_input_types(native, dtrain))
            blob = pickle.dumps(booster, protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_arrays([pa.array([blob], pa.binary())], names=["model"])
    except Exception as e:
        # marked, so that the driver raises the same kind of error naming the rank
        who = f"rank {rank}" if rank >= 0 else f"partition {partition}"
        raise RuntimeError(
            f"[sapwood.spark {who}] {type(e).__name__}: {e} [/sapwood.spark]"
        ) from e
    finally:
        if listener is not None:
            listener.close()


_MARK = re.compile(
    r"\[sapwood\.spark (rank -?\d+|partition \d+)\] (\w+): (.*?) \[/sapwood\.spark\]", re.S
)
_LOST_TASK = re.compile(r"ResultTask\(\d+, (\d+)\)")
#: Spark's reason for a lost task (an executor that died) or an aborted stage.
_REASON = re.compile(r"ExecutorLostFailure[^\n]*|Job aborted due to stage failure:[^\n]*")


def _job_error(error: Exception) -> Exception:
    """A Spark job failure as the Sapwood error a rank raised, or a BackendError naming
    the task (rank) Spark lost."""
    text = str(error)
    found = _MARK.search(text)
    if found:
        who, kind, message = found.groups()
        cls = getattr(_sapwood, kind, None)
        if not (isinstance(cls, type) and issubclass(cls, _sapwood.SapwoodError)):
            cls = BackendError
        if cls is ParameterError or cls is DataError or issubclass(cls, DataError):
            return cls(message)
        return cls(f"{message} (reported by {who} of the Spark training job)")
    lost = _LOST_TASK.search(text)
    reasons = [m.group(0).strip() for m in _REASON.finditer(text)]
    if reasons:
        first = " ".join(dict.fromkeys(reasons))
    else:
        first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    first = first[:800]
    if lost:
        p = lost.group(1)
        return BackendError(
            f"the Spark training task of partition {p} (rank {p} unless an earlier partition "
            f"was empty: the ranks are the non-empty partitions) failed: {first}"
        )
    return BackendError(f"the Spark training job failed: {first}")


# ---- the estimators --------------------------------------------------------------------


def _spark(dataset: DataFrame) -> SparkSession:
    session: SparkSession = dataset.sparkSession
    return session


class _SapwoodSparkEstimator(
    _SapwoodParams,
    Estimator["_SapwoodSparkModel"],
    DefaultParamsWritable,
    DefaultParamsReadable[Any],
):
    """Fitting shared by the three estimators."""

    _local_class: type[_SapwoodModel] = _LocalRegressor
    _model_class: type[_SapwoodSparkModel]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._init_defaults()
        self._set_params(kwargs)

    def setParams(self, **kwargs: Any) -> Any:  # noqa: N802 (Spark's naming)
        """Sets Params by name (engine aliases accepted, as in the constructor)."""
        self._set_params(kwargs)
        return self

    def write(self) -> MLWriter:
        """A writer of the estimator's Params (``callbacks`` cannot be saved)."""
        if self._value("callbacks"):
            raise ParameterError(
                "invalid parameter `callbacks`: Python callbacks cannot be saved; unset them "
                "before saving"
            )
        return super().write()

    # ---- checks on the driver ---------------------------------------------------------

    def _local(self) -> _SapwoodModel:
        """The scikit-learn estimator with these parameters, which writes the engine's
        parameters exactly as single-process training does."""
        kwargs: dict[str, Any] = {name: self._value(name) for name in _SKLEARN_DEFAULTS}
        for name in _EXTRAS:
            if self.isSet(self.getParam(name)):
                kwargs[name] = self._value(name)
        local = self._local_class(**kwargs)
        return local

    def _objective_params(
        self, local: _SapwoodModel, dataset: Optional[DataFrame]
    ) -> list[tuple[str, Any]]:
        """The objective's parameters; for the classifier a provisional class count when
        ``dataset`` is None (checking the parameters before any Spark job)."""
        raise NotImplementedError

    def _pairs(
        self, local: _SapwoodModel, objective: list[tuple[str, Any]], validation: bool
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        """The engine's parameters, checked here before any task starts."""
        for name in ("scale_pos_weight",):
            if self._value(name) is not None:
                raise ParameterError(
                    f"invalid parameter `{name}`: not supported by sapwood.spark; give weightCol"
                )
        if callable(self._value("objective")):
            raise ParameterError(
                "invalid parameter `objective`: custom objectives are not supported by "
                "sapwood.spark"
            )
        params = local._engine_params()
        if self._value("n_jobs") is None:
            # as xgboost.spark: each rank uses its task's cores
            params = [(k, v) for k, v in params if k != "n_jobs"]
        params.extend(objective)
        stopping = self._value("early_stopping_rounds")
        if stopping is not None:
            params.append(("early_stopping_rounds", int(stopping)))
            if not validation:
                raise ParameterError(
                    "invalid parameter `early_stopping_rounds`: early stopping needs "
                    "validation rows: set validationIndicatorCol"
                )
        normalised = _params.normalise(params)
        if normalised.objective_fn is not None or normalised.metric_fns:
            raise ParameterError(
                "invalid parameter `eval_metric`: custom metrics are not supported by "
                "sapwood.spark"
            )
        pairs, user_names = normalised.pairs, normalised.user_names
        workers = next((v for k, v in pairs if canonical_param(k) == "workers"), "1")
        if str(workers).strip() != "1":
            raise ParameterError(
                f"invalid parameter `workers`: {workers}; each Spark task trains as one "
                "worker: set num_workers"
            )
        try:
            _sapwood.check_params(pairs)
        except ParameterError as e:
            raise _params.renamed(e, user_names) from None
        return pairs, user_names

    def _check_settings(self) -> tuple[int, float]:
        workers = self._value("num_workers")
        if not isinstance(workers, int) or workers < 1:
            raise ParameterError(f"invalid parameter `num_workers`: {workers} must be at least 1")
        timeout = self._value("comm_timeout")
        if timeout is None or not (math.isfinite(float(timeout)) and float(timeout) > 0):
            raise ParameterError(
                f"invalid parameter `comm_timeout`: {timeout!r} must be a finite number of "
                "seconds > 0"
            )
        return workers, float(timeout)

    def _columns(self, dataset: DataFrame) -> tuple[bool, list[str], list[Any]]:
        """Whether the features are one vector (or array) column, the feature names, and
        the selected columns of the training plan."""
        names = set(dataset.columns)
        given = self._value("features_cols") if self.isSet(self.getParam("features_cols")) else None
        selected: list[Any] = []
        if given:
            missing = [c for c in given if c not in names]
            if missing:
                raise DataError(
                    f"invalid parameter `features_cols`: no column {missing[0]!r} in the "
                    f"DataFrame (columns {sorted(names)})"
                )
            selected = [F.col(c) for c in given]
            return False, list(given), selected
        features = self.getFeaturesCol()
        if features not in names:
            raise DataError(
                f"invalid parameter `featuresCol`: no column {features!r} in the DataFrame; "
                "give a vector column or features_cols"
            )
        dtype = dataset.schema[features].dataType
        if isinstance(dtype, T.ArrayType):
            column = F.col(features).cast("array<double>")
        elif type(dtype).__name__ == "VectorUDT":
            column = vector_to_array(F.col(features))
        else:
            raise DataError(
                f"invalid parameter `featuresCol`: column {features!r} is {dtype.simpleString()}, "
                "not a vector; use features_cols for scalar columns"
            )
        return True, [], [column.alias(_FEATURES)]

    def _column(self, dataset: DataFrame, param: str, what: str) -> Optional[str]:
        """The name in a column Param, checked to exist; None when unset or empty."""
        p = self.getParam(param)
        name = self.getOrDefault(p) if self.isDefined(p) else None
        if not name:
            return None
        if name not in dataset.columns:
            raise DataError(f"invalid parameter `{param}`: no {what} column {name!r} in the DataFrame")
        return str(name)

    def _fit(self, dataset: DataFrame) -> _SapwoodSparkModel:
        num_workers, timeout = self._check_settings()
        vector, features, selected = self._columns(dataset)
        label = self._column(dataset, "labelCol", "label")
        if label is None:
            raise DataError("invalid parameter `labelCol`: a label column is needed")
        weight = self._column(dataset, "weightCol", "weight")
        qid = self._column(dataset, "qidCol", "query id") if self.hasParam("qidCol") else None
        indicator = self._column(dataset, "validationIndicatorCol", "validation indicator")
        if self.hasParam("qidCol") and qid is None:
            raise ParameterError(
                "invalid parameter `qidCol`: a ranker needs the query id of every row"
            )
        frame = dataset.select(
            *selected,
            F.col(label).cast("double").alias(_LABEL),
            *([F.col(weight).cast("double").alias(_WEIGHT)] if weight else []),
            *([F.col(qid).cast("long").alias(_QID)] if qid else []),
            *([F.col(indicator).cast("boolean").alias("__sapwood_valid")] if indicator else []),
        )
        if indicator:
            valid_frame = frame.filter(F.col("__sapwood_valid")).drop("__sapwood_valid")
            frame = frame.filter(~F.col("__sapwood_valid")).drop("__sapwood_valid")
        local = self._local()
        # every parameter is checked before the first Spark job (the classifier's objective
        # needs one, to count the classes)
        self._pairs(local, self._objective_params(local, None), indicator is not None)
        objective = self._objective_params(local, frame)
        pairs, user_names = self._pairs(local, objective, indicator is not None)
        spark = _spark(dataset)
        evals = None
        if indicator:
            valid = valid_frame.toArrow()
            if qid:
                valid = valid.take(pc.sort_indices(valid, [(_QID, "ascending")]))
            if valid.num_rows == 0:
                raise DataError(
                    "invalid parameter `validationIndicatorCol`: no row is marked for "
                    "validation"
                )
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, valid.schema) as writer:
                writer.write_table(valid)
            evals = spark.sparkContext.broadcast(sink.getvalue().to_pybytes())
        frame = self._arrange(frame, num_workers, qid is not None)
        verbose = self._value("verbose")
        period = 1 if verbose is True else int(verbose or 0)
        job = _Job(
            pairs=pairs,
            user_names=user_names,
            vector=vector,
            features=features,
            categorical_features=self._value("categorical_features"),
            missing=self._value("missing"),
            has_weight=weight is not None,
            has_qid=qid is not None,
            timeout=timeout,
            threads=self._value("n_jobs"),
            evals=evals,
            callbacks=list(self._value("callbacks") or ()),
            print_period=period,
        )
        trained = frame.mapInArrow(
            functools.partial(_train_task, job), "model binary", barrier=True
        )
        try:
            rows = trained.collect()
        except Exception as e:  # a Py4J or Spark error: the failed rank's error
            raise _job_error(e) from None
        finally:
            if evals is not None:
                evals.unpersist()
        if len(rows) != 1:
            raise _sapwood.InternalError(
                f"internal error (please report it): {len(rows)} models came back"
            )
        booster: Booster = pickle.loads(rows[0]["model"])
        model = self._model_class._with_booster(booster)
        self._copyValues(model)
        return model

    def _arrange(self, frame: DataFrame, num_workers: int, ranking: bool) -> DataFrame:
        """The training rows in ``num_workers`` partitions, in the order that decides the
        model (see the module's description)."""
        current = frame.rdd.getNumPartitions()
        if ranking:
            _log.info(
                "sapwood.spark: range-partitioning %d partitions into num_workers=%d by "
                "query id (a query is never cut), sorted by query id then position",
                current, num_workers,
            )
            positioned = frame.withColumn(_POS, F.monotonically_increasing_id())
            return (
                positioned.repartitionByRange(num_workers, F.col(_QID))
                .sortWithinPartitions(_QID, _POS)
                .drop(_POS)
            )
        if current == num_workers:
            return frame
        _log.info(
            "sapwood.spark: repartitioning %d partitions into num_workers=%d, keeping the "
            "rows' order", current, num_workers,
        )
        positioned = frame.withColumn(_POS, F.monotonically_increasing_id())
        return (
            positioned.repartitionByRange(num_workers, F.col(_POS))
            .sortWithinPartitions(_POS)
            .drop(_POS)
        )


class SapwoodRegressor(_SapwoodSparkEstimator):
    """Gradient-boosted trees for regression on a Spark cluster: a ``pyspark.ml``
    Estimator whose ``fit`` trains ``num_workers`` Spark tasks as the ranks of one job.

    Params: ``featuresCol`` (a vector or array column; default ``features``) or
    ``features_cols`` (numeric, boolean or string columns; strings are categorical),
    ``labelCol``, ``weightCol``, ``validationIndicatorCol`` (rows marked true are the
    evaluation set ``validation_0``, reported and watched by ``early_stopping_rounds``;
    gathered on the driver), ``predictionCol``, ``num_workers`` (default 1),
    ``comm_timeout`` (seconds, default 60), ``pred_contrib_col``, ``pred_leaf_col``, and
    every parameter of :class:`sapwood.SapwoodRegressor` and of the engine under the
    same names (``n_estimators``, ``max_depth``, ``cat_smooth``, ...; aliases such as
    ``eta`` or ``num_leaves`` set the Param of their engine name). ``callbacks`` run on
    rank 0's executor. See :mod:`sapwood.spark` for how rows become ranks.
    """

    _local_class = _LocalRegressor

    def _objective_params(
        self, local: _SapwoodModel, dataset: Optional[DataFrame]
    ) -> list[tuple[str, Any]]:
        objective = self._value("objective") or "reg:squarederror"
        if not callable(objective) and _is_classification(str(objective)):
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is a classification objective; "
                "use sapwood.spark.SapwoodClassifier"
            )
        return [("objective", objective)]


class SapwoodClassifier(_SapwoodSparkEstimator, HasProbabilityCol, HasRawPredictionCol):
    """Gradient-boosted trees for binary and multiclass classification on a Spark
    cluster. Labels are class indices ``0 .. k-1`` (as ``StringIndexer`` makes them);
    ``k`` is the largest label plus one. ``transform`` adds ``prediction`` (the class
    index), ``probability`` and ``rawPrediction`` (vectors). Other Params are
    :class:`SapwoodRegressor`'s.
    """

    _local_class = _LocalClassifier

    def _init_defaults(self) -> None:
        super()._init_defaults()
        self._setDefault(probabilityCol="probability", rawPredictionCol="rawPrediction")

    def _objective_params(
        self, local: _SapwoodModel, dataset: Optional[DataFrame]
    ) -> list[tuple[str, Any]]:
        objective = self._value("objective")
        if objective is not None and not _is_classification(str(objective)):
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is not a classification "
                "objective; use sapwood.spark.SapwoodRegressor"
            )
        if dataset is None:
            n_classes = 3 if str(objective or "").strip().lower().startswith(("multi", "softmax")) else 2
            setattr(local, "n_classes_", n_classes)
            provisional: list[tuple[str, Any]] = getattr(local, "_objective_params")()
            return provisional
        label = F.col(_LABEL)
        row = dataset.agg(
            F.min(label).alias("low"),
            F.max(label).alias("high"),
            F.sum((label.isNull() | (label != F.floor(label))).cast("long")).alias("bad"),
        ).collect()[0]
        if row["high"] is None:
            raise DataError("invalid parameter `dataset`: there are no training rows")
        if row["bad"] or row["low"] < 0:
            raise DataError(
                "invalid parameter `labelCol`: class labels must be whole numbers 0 .. k-1 "
                "(index string labels with pyspark.ml.feature.StringIndexer)"
            )
        n_classes = max(int(row["high"]) + 1, 2)
        setattr(local, "n_classes_", n_classes)
        setattr(local, "classes_", np.arange(n_classes))
        params: list[tuple[str, Any]] = getattr(local, "_objective_params")()
        return params


class SapwoodRanker(_SapwoodSparkEstimator):
    """Learning to rank (LambdaMART) on a Spark cluster. ``qidCol`` names the query id
    column (whole numbers); the rows are arranged by query id (see
    :mod:`sapwood.spark`), so a query's rows may sit anywhere in the DataFrame.
    ``eval_at`` sets LightGBM's metric cut-offs. Other Params are
    :class:`SapwoodRegressor`'s; ``prediction`` is the ranking score.
    """

    qidCol: Param[str] = Param(
        Params._dummy(), "qidCol", "query id column name", typeConverter=TypeConverters.toString
    )
    eval_at: Param[Any] = Param(
        Params._dummy(), "eval_at", "ranking metric cut-offs (LightGBM's eval_at)", _identity
    )

    _local_class = _LocalRanker

    def _init_defaults(self) -> None:
        super()._init_defaults()
        self._setDefault(qidCol="qid")

    def _objective_params(
        self, local: _SapwoodModel, dataset: Optional[DataFrame]
    ) -> list[tuple[str, Any]]:
        objective = self._value("objective") or "rank:ndcg"
        if str(objective).strip().lower() not in _RANKING_OBJECTIVES:
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is not a ranking objective; "
                "use rank:ndcg (lambdarank), rank:map or rank:pairwise"
            )
        out: list[tuple[str, Any]] = [("objective", objective)]
        at = self._value("eval_at") if self.isSet(self.eval_at) else None
        if at is not None:
            out.append(("eval_at", [at] if isinstance(at, int) else list(at)))
        return out


# ---- the models ------------------------------------------------------------------------


#: Each Python worker's boosters, by the key of their broadcast: parsed once.
_BOOSTERS: dict[str, Booster] = {}


class _Output(NamedTuple):
    """What a prediction batch computes, and how rows reach the booster."""

    broadcast: Any
    key: str
    vector: bool
    features: list[str]
    missing: Optional[float]
    kind: str
    contrib: bool
    leaf: bool


def _booster_of(out: _Output) -> Booster:
    key = out.key
    booster = _BOOSTERS.get(key)
    if booster is None:
        booster = Booster.from_json(out.broadcast.value)
        context = TaskContext.get()
        booster.set_param("nthread", int(context.cpus()) if context is not None else 1)
        while len(_BOOSTERS) >= 8:  # a long-lived worker keeps the latest models only
            del _BOOSTERS[next(iter(_BOOSTERS))]
        _BOOSTERS[key] = booster
    return booster


def _list_column(values: npt.NDArray[Any]) -> pa.Array:
    """An (n, k) array as an Arrow list<double> column."""
    n = values.shape[0]
    flat = np.ascontiguousarray(values, dtype=np.float64).reshape(n, -1)
    width = flat.shape[1]
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32), pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array(flat.ravel(), pa.float64()))


def _predict_batch(out: _Output, column: pa.Array) -> pa.Array:
    """Spark ML's prediction columns of one Arrow batch, as one struct column."""
    booster = _booster_of(out)
    if out.vector:
        X: Any = _rows_of(pa.table({_FEATURES: column}), True, [])
    else:
        X = pa.RecordBatch.from_struct_array(column)
    if out.missing is not None:
        from . import _data

        X = _data.replace_missing(X, out.missing)
    best = booster.best_iteration
    rounds = None if best is None else (0, best + 1)
    arrays: list[pa.Array] = []
    names: list[str] = []
    if out.kind == "classifier":
        margin = booster.predict(X, output_margin=True, iteration_range=rounds).astype(np.float64)
        p = booster.predict(X, iteration_range=rounds).astype(np.float64)
        if p.ndim == 1:
            proba = np.column_stack([1.0 - p, p])
            raw = np.column_stack([-margin, margin])
            label = (p > 0.5).astype(np.float64)
        else:
            proba = p / p.sum(axis=1, keepdims=True)
            raw = margin
            label = np.argmax(p, axis=1).astype(np.float64)
        arrays += [pa.array(label, pa.float64()), _list_column(proba), _list_column(raw)]
        names += ["prediction", "probability", "rawPrediction"]
    else:
        score = booster.predict(X, output_margin=out.kind == "ranker", iteration_range=rounds)
        arrays.append(pa.array(score.astype(np.float64), pa.float64()))
        names.append("prediction")
    if out.contrib:
        arrays.append(_list_column(booster.predict(X, pred_contribs=True, iteration_range=rounds)))
        names.append("contrib")
    if out.leaf:
        arrays.append(_list_column(booster.predict(X, pred_leaf=True, iteration_range=rounds)))
        names.append("leaf")
    return pa.StructArray.from_arrays(arrays, names=names)


def _predict_batches(out: _Output, batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
    for column in batches:
        yield _predict_batch(out, column)


class _SapwoodSparkModel(_SapwoodParams, Model, MLWritable, MLReadable[Any]):
    """Prediction and persistence shared by the three models."""

    _kind = "regressor"

    def __init__(self) -> None:
        super().__init__()
        self._init_defaults()
        self._booster: Optional[Booster] = None
        self._broadcast: Any = None

    @classmethod
    def _with_booster(cls: type[_M], booster: Booster) -> _M:
        model = cls()
        model._booster = booster
        return model

    def getBooster(self) -> Booster:  # noqa: N802 (Spark's naming)
        """The trained model, a plain :class:`sapwood.Booster`."""
        if self._booster is None:
            raise _sapwood.ModelError("invalid model: this model holds no booster")
        return self._booster

    def get_booster(self) -> Booster:
        """The trained model, a plain :class:`sapwood.Booster` (as the scikit-learn
        estimators name it)."""
        return self.getBooster()

    @property
    def booster(self) -> Booster:
        """The trained model, a plain :class:`sapwood.Booster`."""
        return self.getBooster()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_broadcast"] = None
        return state

    def _output_type(self) -> T.StructType:
        fields = []
        if self._kind == "classifier":
            fields += [
                T.StructField("prediction", T.DoubleType()),
                T.StructField("probability", T.ArrayType(T.DoubleType())),
                T.StructField("rawPrediction", T.ArrayType(T.DoubleType())),
            ]
        else:
            fields.append(T.StructField("prediction", T.DoubleType()))
        if self._value("pred_contrib_col"):
            fields.append(T.StructField("contrib", T.ArrayType(T.DoubleType())))
        if self._value("pred_leaf_col"):
            fields.append(T.StructField("leaf", T.ArrayType(T.DoubleType())))
        return T.StructType(fields)

    def _shared_booster(self, spark: SparkSession) -> tuple[Any, str]:
        """The booster, broadcast once per model, and the key executors cache it by."""
        if self._broadcast is None:
            text = self.getBooster().to_json()
            self._broadcast = (spark.sparkContext.broadcast(text), secrets.token_hex(8))
        shared: tuple[Any, str] = self._broadcast
        return shared

    def _transform(self, dataset: DataFrame) -> DataFrame:
        from pyspark.sql.pandas.functions import arrow_udf

        names = set(dataset.columns)
        given = self._value("features_cols") if self.isSet(self.getParam("features_cols")) else None
        if given:
            missing = [c for c in given if c not in names]
            if missing:
                raise DataError(f"invalid parameter `features_cols`: no column {missing[0]!r}")
            source: Any = F.struct(*[F.col(c) for c in given])
            vector = False
        else:
            features = self.getFeaturesCol()
            if features not in names:
                raise DataError(f"invalid parameter `featuresCol`: no column {features!r}")
            dtype = dataset.schema[features].dataType
            if isinstance(dtype, T.ArrayType):
                source = F.col(features).cast("array<double>")
            else:
                source = vector_to_array(F.col(features))
            vector = True
        broadcast, key = self._shared_booster(_spark(dataset))
        out = _Output(
            broadcast=broadcast,
            key=key,
            vector=vector,
            features=list(given or ()),
            missing=self._value("missing"),
            kind=self._kind,
            contrib=bool(self._value("pred_contrib_col")),
            leaf=bool(self._value("pred_leaf_col")),
        )
        def predict(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
            return _predict_batches(out, batches)

        # typed by its hints (iterator of arrays); pyspark's stubs only list explicit types
        make: Any = arrow_udf
        udf: Any = make(predict, returnType=self._output_type())
        frame = dataset.withColumn(_OUT, udf(source))
        columns: list[tuple[str, Any]] = [(self.getPredictionCol(), F.col(f"{_OUT}.prediction"))]
        if self._kind == "classifier":
            columns += [
                (self._value("probabilityCol"), array_to_vector(F.col(f"{_OUT}.probability"))),
                (self._value("rawPredictionCol"), array_to_vector(F.col(f"{_OUT}.rawPrediction"))),
            ]
        if out.contrib:
            columns.append((self._value("pred_contrib_col"), array_to_vector(F.col(f"{_OUT}.contrib"))))
        if out.leaf:
            columns.append((self._value("pred_leaf_col"), array_to_vector(F.col(f"{_OUT}.leaf"))))
        columns = [(name, col) for name, col in columns if name]
        frame = frame.withColumns(dict(columns))
        return frame.drop(_OUT)

    # ---- persistence ------------------------------------------------------------------

    def write(self) -> MLWriter:
        """A writer saving the Params (metadata) and the Sapwood model file."""
        return _ModelWriter(self)

    @classmethod
    def read(cls) -> MLReader[Any]:
        """A reader of models saved with ``write().save(path)``."""
        return _ModelReader(cls)


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The Hadoop FileSystem and Path of ``path`` (any file system Spark reaches)."""
    jvm: Any = spark.sparkContext._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    context: Any = spark.sparkContext
    conf = context._jsc.hadoopConfiguration()
    return jpath.getFileSystem(conf), jpath


def _write_file(spark: SparkSession, path: str, data: bytes) -> None:
    """Writes ``data`` at ``path`` whole: to a temporary name, then renamed."""
    fs, final = _hadoop_path(spark, path)
    jvm: Any = spark.sparkContext._jvm
    partial = jvm.org.apache.hadoop.fs.Path(path + ".partial")
    stream = fs.create(partial, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
    if not fs.rename(partial, final):
        raise _sapwood.SapwoodIOError(f"could not write the model file {path}")


def _read_file(spark: SparkSession, path: str) -> bytes:
    fs, jpath = _hadoop_path(spark, path)
    if not fs.exists(jpath):
        raise _sapwood.SapwoodFileNotFoundError(f"no Sapwood model file at {path}")
    jvm: Any = spark.sparkContext._jvm
    stream = fs.open(jpath)
    try:
        data: bytes = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data)


def _join(path: str, name: str) -> str:
    return path.rstrip("/") + "/" + name


class _ModelWriter(MLWriter):
    """Saves a model: its Sapwood model file first, then Spark ML's metadata (so a
    directory with metadata always has a whole model)."""

    def __init__(self, instance: _SapwoodSparkModel) -> None:
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:  # noqa: N802 (Spark's naming)
        """Writes the model file and the metadata."""
        model = self.instance
        text = model.getBooster().to_json().encode("utf-8")
        _write_file(self.sparkSession, _join(path, _MODEL_FILE), text)
        params = {
            p.name: v for p, v in model._paramMap.items() if p.name != "callbacks"
        }
        if model.isSet(model.callbacks):
            warnings.warn("sapwood.spark: callbacks are not saved", UserWarning, stacklevel=2)
        DefaultParamsWriter.saveMetadata(
            model, path, self.sparkSession,
            extraMetadata={"sapwoodModelFile": _MODEL_FILE}, paramMap=params,
        )


class _ModelReader(MLReader[Any]):
    """Loads a model saved by :class:`_ModelWriter`."""

    def __init__(self, cls: type[_SapwoodSparkModel]) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> Any:
        """The model saved at ``path``."""
        metadata = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        text = _read_file(self.sparkSession, _join(path, metadata.get("sapwoodModelFile", _MODEL_FILE)))
        model = self.cls._with_booster(Booster.from_json(text))
        model._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(model, metadata)
        return model


class SapwoodRegressionModel(_SapwoodSparkModel):
    """A fitted :class:`SapwoodRegressor`: ``transform`` adds ``prediction``;
    :meth:`getBooster` is the :class:`sapwood.Booster`; ``write().save(path)`` and
    ``SapwoodRegressionModel.load(path)`` persist it."""

    _kind = "regressor"


class SapwoodClassificationModel(_SapwoodSparkModel, HasProbabilityCol, HasRawPredictionCol):
    """A fitted :class:`SapwoodClassifier`: ``transform`` adds ``prediction`` (the class
    index), ``probability`` and ``rawPrediction`` (vectors)."""

    _kind = "classifier"

    def _init_defaults(self) -> None:
        super()._init_defaults()
        self._setDefault(probabilityCol="probability", rawPredictionCol="rawPrediction")

    @property
    def numClasses(self) -> int:  # noqa: N802 (Spark's naming)
        """The number of classes."""
        groups = int(self.getBooster()._model.groups)
        return max(groups, 2)


class SapwoodRankingModel(_SapwoodSparkModel):
    """A fitted :class:`SapwoodRanker`: ``transform`` adds ``prediction``, the ranking
    score (sort a query's rows by it, highest first)."""

    qidCol: Param[str] = SapwoodRanker.qidCol
    eval_at: Param[Any] = SapwoodRanker.eval_at

    _kind = "ranker"

    def _init_defaults(self) -> None:
        super()._init_defaults()
        self._setDefault(qidCol="qid")


SapwoodRegressor._model_class = SapwoodRegressionModel
SapwoodClassifier._model_class = SapwoodClassificationModel
SapwoodRanker._model_class = SapwoodRankingModel
