"""The low-level API, shaped like XGBoost's and LightGBM's: ``Dataset``, ``train`` and
``Booster``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np
import numpy.typing as npt

from . import _data, _sapwood
from ._data import CategoricalSpec
from ._sapwood import DataError, NativeBooster, NativeData, ParameterError, SchemaMismatchError

__all__ = ["Dataset", "Booster", "train", "cv", "RoundInfo", "Callback", "EvalsResult"]

#: Metrics per evaluation set per metric name, one value per round.
EvalsResult = dict[str, dict[str, list[float]]]

#: Parameter values: numbers, names, or lists of names (``eval_metric``).
ParamValue = Union[str, int, float, bool, None, Sequence[str]]

PathLike = Union[str, "os.PathLike[str]"]


class RoundInfo(NamedTuple):
    """What a callback learns after each boosting round."""

    #: Zero-based round just completed.
    iteration: int
    #: Rounds requested.
    num_rounds: int
    #: ``{dataset: {metric: value}}`` after this round.
    evaluation: dict[str, dict[str, float]]
    #: Seconds since training started.
    elapsed: float


#: A training callback: called after every round; returning True stops training.
Callback = Callable[[RoundInfo], Optional[bool]]


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
    dtypes) or a list of column names or positions. ``group`` (ranking) is not supported.

    The Dataset keeps a reference to numpy arrays it reads in place: changing such an
    array afterwards changes the data.
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        weight: Any = None,
        group: Any = None,
        categorical_features: CategoricalSpec = "auto",
        feature_names: Optional[Sequence[str]] = None,
    ) -> None:
        if group is not None:
            raise ParameterError(
                "invalid parameter `group`: ranking objectives are not supported"
            )
        # kept so that cv() can take row subsets of the original input
        self._source = (data, label, weight, categorical_features, feature_names)
        self._native: NativeData = _data.to_native(
            data,
            label=label,
            weight=weight,
            categorical_features=categorical_features,
            feature_names=feature_names,
        )

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


_ALIASES: Optional[dict[str, str]] = None


def canonical_param(name: str) -> Optional[str]:
    """The engine's name of a parameter given by name or alias, or None if unknown."""
    global _ALIASES
    if _ALIASES is None:
        _ALIASES = {}
        for canonical, aliases in _sapwood.parameter_names():
            _ALIASES[canonical] = canonical
            for a in aliases:
                _ALIASES[a] = canonical
    return _ALIASES.get(name.strip().replace("-", "_"))


#: Keys accepted for compatibility and ignored: they only tune logging, and Sapwood does
#: not log.
_IGNORED_KEYS = frozenset({"verbosity", "verbose", "silent"})


def _param_text(value: ParamValue) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in value)
    return str(value)


def param_pairs(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """Parameters as the ``(name, text)`` pairs the engine parses; ``None`` means the
    engine's default."""
    return [
        (str(k), _param_text(v))
        for k, v in params.items()
        if v is not None and str(k) not in _IGNORED_KEYS
    ]


def _native_of(data: Any, booster: Booster) -> NativeData:
    """Prediction data for ``booster``: checks columns against the model and encodes
    categorical features of unnamed input with the model's kinds."""
    if isinstance(data, Dataset):
        native = data._native
        _check_named_columns(native.feature_names, booster.feature_names)
        return native
    names = booster.feature_names
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
    ) -> npt.NDArray[np.float32]:
        """Predictions: values (regression), probabilities of the positive class
        (binary), or an ``(n, classes)`` array of class probabilities (multiclass).

        ``output_margin`` gives raw scores. ``iteration_range=(0, k)`` uses the first k
        rounds (``(0, 0)`` means all); by default all rounds, or through the best
        iteration when early stopping chose one. As in XGBoost, ``pred_contribs`` gives SHAP
        contributions, ``(n, features + 1)`` with the bias last (``(n, classes,
        features + 1)`` for multiclass), summing to the margin; ``pred_interactions`` SHAP
        interaction values, ``(n, features + 1, features + 1)`` (a class axis after the
        rows for multiclass); ``pred_leaf`` the leaf index of each tree, ``(n, trees)``.
        """
        model = self._model
        rounds: Optional[int] = None
        if iteration_range is not None:
            begin, end = iteration_range
            if begin != 0:
                raise ParameterError(
                    "invalid parameter `iteration_range`: only ranges starting at 0 "
                    "are supported"
                )
            rounds = None if end == 0 else int(end)
        flags = [("contributions", pred_contribs), ("interactions", pred_interactions),
                 ("leaf", pred_leaf)]
        asked = [k for k, on in flags if on]
        if len(asked) > 1 or (asked and output_margin):
            raise ParameterError(
                "invalid parameter `pred_*`: ask for one of output_margin, pred_contribs, "
                "pred_interactions and pred_leaf"
            )
        output = asked[0] if asked else ("margin" if output_margin else "value")
        values, per_row = model.predict(_native_of(data, self), output, rounds)
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

    # ---- files and text ---------------------------------------------------------------

    def save_model(self, fname: PathLike, format: str = "sapwood") -> None:
        """Writes the model; the file is replaced atomically.

        ``format="sapwood"`` (default) writes Sapwood's JSON. ``"xgboost"`` writes XGBoost
        JSON (``xgboost.Booster(model_file=...)``) and ``"lightgbm"`` LightGBM text
        (``lightgbm.Booster(model_file=...)``); both predict Sapwood's margins. Categorical
        features are fed to them as codes: a level's index in its feature's level list (the
        XGBoost file's ``sapwood_categories`` attribute, the LightGBM file's
        ``pandas_categorical`` line), with levels not in the list as NaN.
        """
        if format == "sapwood":
            self._model.save(os.fspath(fname))
        else:
            self._model.export(os.fspath(fname), format)

    def load_model(self, fname: PathLike) -> Booster:
        """Reads a model file written by :meth:`save_model` or the CLI."""
        self._native = NativeBooster.load(os.fspath(fname))
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
        state: dict[str, Any] = {"model": None, "history": None}
        if self._native is not None:
            state["model"] = self._native.to_json().encode("utf-8")
            state["history"] = self._native.history
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._native = None
        self._history = state.get("history")
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
        """The best round (0-based) chosen by early stopping, or None."""
        return self._model.best_iteration

    @property
    def comm_stats(self) -> dict[str, Any]:
        """Bytes exchanged between workers in training: ``bytes_sent``,
        ``bytes_before_compression``, ``allreduce_calls`` (zeros for one worker) and
        ``per_round`` (one such dict per round)."""
        return self._model.comm_stats

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
        history = self._model.history if self._native is not None else []
        if not history:
            history = getattr(self, "_history", None) or []
        out: EvalsResult = {}
        for round_metrics in history:
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


def _evals(evals: Any) -> list[tuple[str, NativeData]]:
    out = []
    for i, item in enumerate(evals or ()):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ParameterError(
                "invalid parameter `evals`: expected (Dataset, name) pairs"
            )
        a, b = item
        data, name = (a, b) if isinstance(a, Dataset) else (b, a)
        if not isinstance(data, Dataset) or not isinstance(name, str):
            raise ParameterError(
                f"invalid parameter `evals`: item {i} is not a (Dataset, name) pair"
            )
        out.append((name, data._native))
    return out


def train(
    params: Mapping[str, ParamValue],
    dtrain: Dataset,
    num_boost_round: int = 100,
    evals: Sequence[tuple[Dataset, str]] = (),
    early_stopping_rounds: Optional[int] = None,
    callbacks: Optional[Sequence[Callback]] = None,
    verbose_eval: Union[bool, int] = True,
    evals_result: Optional[EvalsResult] = None,
    checkpoint: Optional[PathLike] = None,
    checkpoint_every: int = 10,
    resume: Optional[PathLike] = None,
) -> Booster:
    """Trains a booster.

    ``params`` use XGBoost or LightGBM names (``eta``, ``max_depth``, ``num_leaves``,
    ``reg_lambda``, ``n_jobs``, ``device``, ...); unknown names raise
    :class:`ParameterError` suggesting the closest one. A rounds parameter in ``params``
    (``num_boost_round``, ``n_estimators``, ...) wins over ``num_boost_round``.

    ``evals`` are ``(Dataset, name)`` pairs reported every round; early stopping
    (``early_stopping_rounds``) watches the last metric of the last pair. ``callbacks``
    are called after every round with a :class:`RoundInfo` and stop training by
    returning True. ``verbose_eval`` prints metrics every round (True) or every n
    rounds (an int). ``evals_result``, if given, is filled with the metrics history.

    ``checkpoint`` is a file written atomically every ``checkpoint_every`` rounds;
    ``resume`` continues from a checkpoint written by the same job (same data and
    parameters) and gives the model an uninterrupted run gives, byte for byte.

    The GIL is released while training; Ctrl-C stops training after the current round
    and raises ``KeyboardInterrupt``.
    """
    if not isinstance(dtrain, Dataset):
        raise DataError("dtrain must be a sapwood.Dataset")
    pairs = param_pairs(params)
    if not any(canonical_param(k) == "num_rounds" for k, _ in pairs):
        pairs.insert(0, ("num_rounds", str(int(num_boost_round))))
    if early_stopping_rounds is not None:
        pairs.append(("early_stopping_rounds", str(int(early_stopping_rounds))))
    native_evals = _evals(evals)
    wants_stopping = any(canonical_param(k) == "early_stopping_rounds" and v not in ("", "none", "null") for k, v in pairs)
    if wants_stopping and not native_evals:
        raise ParameterError(
            "invalid parameter `early_stopping_rounds`: early stopping needs at least "
            "one evaluation set in `evals`"
        )
    all_callbacks: list[Callback] = list(callbacks or ())
    if verbose_eval and native_evals:
        period = 1 if verbose_eval is True else int(verbose_eval)
        all_callbacks.append(_print_evaluation(max(period, 1)))
    hook: Optional[Callable[[int, int, list[tuple[str, str, float]], float], bool]] = None
    if all_callbacks:

        def hook(round_: int, num_rounds: int, metrics: list[tuple[str, str, float]], elapsed: float) -> bool:
            evaluation: dict[str, dict[str, float]] = {}
            for dataset, metric, value in metrics:
                evaluation.setdefault(dataset, {})[metric] = value
            info = RoundInfo(round_, num_rounds, evaluation, elapsed)
            stop = False
            for cb in all_callbacks:
                if cb(info):
                    stop = True
            return stop

    ck = None if checkpoint is None else (os.fspath(checkpoint), int(checkpoint_every))
    native = _sapwood.train(
        pairs, dtrain._native, native_evals, hook, ck,
        None if resume is None else os.fspath(resume),
    )
    booster = Booster._wrap(native)
    if evals_result is not None:
        evals_result.clear()
        evals_result.update(booster.evals_result())
    return booster


#: Metrics where a larger value is better (the engine's own rule for early stopping).
_HIGHER_IS_BETTER = frozenset({"auc"})

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


def _subset(dtrain: Dataset, rows: npt.NDArray[np.intp]) -> Dataset:
    data, label, weight, categorical, names = dtrain._source
    return Dataset(
        _take_rows(data, rows),
        label=_take_rows(label, rows),
        weight=_take_rows(weight, rows),
        categorical_features=categorical,
        feature_names=names,
    )


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
            out.append((tr, te))
        if not out:
            raise ParameterError("invalid parameter `folds`: no folds given")
        return out
    if not 2 <= int(nfold) <= n:
        raise ParameterError(f"invalid parameter `nfold`: {nfold} must be in 2..{n} (rows)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n) if shuffle else np.arange(n)
    fold_of = np.empty(n, dtype=np.intp)
    if stratified:
        if label is None:
            raise ParameterError("invalid parameter `stratified`: the Dataset has no label")
        y = np.asarray(label).ravel()
        # each class is dealt out over the folds in turn, so every fold gets its share
        _, classes = np.unique(y[order], return_inverse=True)
        seen = np.zeros(classes.max() + 1, dtype=np.intp)
        for pos, c in zip(order, classes):
            fold_of[pos] = seen[c] % nfold
            seen[c] += 1
    else:
        for k, part in enumerate(np.array_split(order, int(nfold))):
            fold_of[part] = k
    everything = np.arange(n)
    return [
        (everything[fold_of != k], np.sort(everything[fold_of == k]))
        for k in range(int(nfold))
    ]


def cv(
    params: Mapping[str, ParamValue],
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
) -> Any:
    """Cross-validation, as ``xgboost.cv``: trains one booster per fold and returns the
    mean and (population) standard deviation over the folds of every metric after every
    round, as ``{"train-rmse-mean": [...], "train-rmse-std": [...], "test-rmse-mean":
    [...], "test-rmse-std": [...]}`` (a pandas DataFrame with those columns when
    ``as_pandas``).

    ``folds`` are ``(train_indices, test_indices)`` pairs or a scikit-learn splitter
    (``KFold``, ``StratifiedKFold``, ``GroupKFold`` without groups...); otherwise
    ``nfold`` folds are made, shuffled with ``seed`` when ``shuffle``, with every class in
    the same proportion in each fold when ``stratified``. ``metrics`` replaces the
    ``eval_metric`` of ``params``. With ``early_stopping_rounds``, the last metric's mean
    on the test folds must improve at least once every that many rounds; the lists end at
    the best round (their last entry), as in XGBoost.

    Each fold's Dataset is built from the rows of the data ``dtrain`` was made from.
    """
    if not isinstance(dtrain, Dataset):
        raise DataError("dtrain must be a sapwood.Dataset")
    if dtrain._source[1] is None:
        raise DataError("dtrain has no label: cross-validation needs one")
    run_params = dict(params)
    if metrics:
        run_params = {k: v for k, v in run_params.items() if canonical_param(k) != "eval_metric"}
        run_params["eval_metric"] = [metrics] if isinstance(metrics, str) else list(metrics)
    histories: list[EvalsResult] = []
    for tr, te in _make_folds(dtrain, nfold, stratified, folds, shuffle, seed):
        history: EvalsResult = {}
        train(
            run_params,
            _subset(dtrain, tr),
            num_boost_round,
            evals=[(_subset(dtrain, tr), "train"), (_subset(dtrain, te), "test")],
            verbose_eval=False,
            evals_result=history,
        )
        histories.append(history)
    result: dict[str, list[float]] = {}
    for dataset in ("train", "test"):
        for metric in histories[0].get(dataset, {}):
            per_fold = np.array([h[dataset][metric] for h in histories], dtype=np.float64)
            result[f"{dataset}-{metric}-mean"] = [float(v) for v in per_fold.mean(axis=0)]
            result[f"{dataset}-{metric}-std"] = [float(v) for v in per_fold.std(axis=0)]
    if early_stopping_rounds is not None and histories[0].get("test"):
        # Every fold ran all rounds, so stopping afterwards on the mean curve gives what
        # stopping all folds together would: the rounds kept never depend on later ones.
        metric = list(histories[0]["test"])[-1]
        curve = result[f"test-{metric}-mean"]
        higher = metric in _HIGHER_IS_BETTER
        best = 0
        for i, value in enumerate(curve):
            if (value > curve[best]) if higher else (value < curve[best]):
                best = i
            if i - best >= int(early_stopping_rounds):
                break
        result = {k: v[: best + 1] for k, v in result.items()}
    if as_pandas:
        import pandas as pd

        return pd.DataFrame(result)
    return result
