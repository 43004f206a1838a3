"""scikit-learn estimators: ``SapwoodRegressor``, ``SapwoodClassifier`` and
``SapwoodRanker``."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, NamedTuple, Optional, TypeVar, Union

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from . import _data, _params
from ._data import CategoricalSpec
from ._sapwood import DataError, LabelError, ParameterError
from .core import (
    _HIGHER_IS_BETTER,
    Booster,
    Callback,
    Dataset,
    EvalsResult,
    _EarlyStopping,
    _make_folds,
    _subset,
    train,
)

__all__ = ["SapwoodRegressor", "SapwoodClassifier", "SapwoodRanker"]

EvalSet = Sequence[tuple[Any, Any]]


def _threads(n_jobs: Optional[int]) -> int:
    """joblib's convention to the engine's thread count (0 means every core)."""
    if n_jobs is None or n_jobs == -1:
        return 0
    if n_jobs < 0:
        return max((os.cpu_count() or 1) + 1 + n_jobs, 1)
    return int(n_jobs)


#: The constructor's engine parameters with the engine's name of each (the estimator
#: passes its own names, so errors name them).
_ENGINE_NAMED = (
    "n_estimators", "learning_rate", "max_depth", "max_leaves", "grow_policy", "max_bin",
    "min_data_in_bin", "min_child_weight", "min_child_samples", "reg_lambda", "reg_alpha",
    "gamma", "max_delta_step", "subsample", "colsample_bytree", "grad_bits",
    "max_cat_to_onehot", "max_cat_threshold", "random_state", "n_jobs", "device", "workers",
)


class _SapwoodModel(BaseEstimator):  # type: ignore[misc]
    """Parameters, fitting and prediction shared by the regressor and the classifier."""

    #: Whether ``n_estimators=None`` has ``fit`` choose the rounds (and, unless given,
    #: ``min_child_samples``) on held-out rows (:func:`_chosen_setting`); where not, it
    #: means :data:`DEFAULT_ROUNDS`.
    _chooses_rounds: bool = False

    def __init__(
        self,
        *,
        n_estimators: Optional[int] = None,
        learning_rate: float = 0.1,
        max_depth: int = 6,
        max_leaves: int = 0,
        grow_policy: str = "depthwise",
        max_bin: int = 256,
        min_data_in_bin: int = 3,
        min_child_weight: float = 1.0,
        min_child_samples: Optional[int] = None,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        gamma: float = 0.0,
        max_delta_step: float = 0.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        grad_bits: int = 0,
        max_cat_to_onehot: int = 4,
        max_cat_threshold: int = 64,
        categorical_features: CategoricalSpec = "auto",
        objective: Union[str, Callable[..., Any], None] = None,
        eval_metric: Union[str, Sequence[str], None] = None,
        early_stopping_rounds: Optional[int] = None,
        scale_pos_weight: Optional[float] = None,
        class_weight: Union[dict[Any, float], str, None] = None,
        missing: Optional[float] = None,
        callbacks: Optional[Sequence[Callback]] = None,
        importance_type: str = "gain",
        random_state: Union[int, np.random.RandomState, None] = None,
        n_jobs: Optional[int] = None,
        device: Union[str, Sequence[str]] = "cpu",
        workers: int = 1,
        verbose: Union[bool, int] = False,
        **kwargs: Any,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.max_bin = max_bin
        self.min_data_in_bin = min_data_in_bin
        self.min_child_weight = min_child_weight
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.grad_bits = grad_bits
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        self.categorical_features = categorical_features
        self.objective = objective
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.scale_pos_weight = scale_pos_weight
        self.class_weight = class_weight
        self.missing = missing
        self.callbacks = callbacks
        self.importance_type = importance_type
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.device = device
        self.workers = workers
        self.verbose = verbose
        self._extra_params: list[str] = []
        self._set_extra(kwargs)

    # ---- parameters -------------------------------------------------------------------

    def _set_extra(self, extra: dict[str, Any]) -> None:
        """Keeps engine (and peer) parameters given by keyword beyond the constructor's
        own. Their names are checked by ``fit`` (scikit-learn's rule: constructors and
        ``set_params`` never raise), with the engine's "did you mean" message."""
        for name, value in extra.items():
            setattr(self, name, value)
            if name not in self._extra_params:
                self._extra_params.append(name)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The estimator's parameters, including engine parameters given by keyword
        (``SapwoodClassifier(cat_smooth=5).get_params()["cat_smooth"] == 5``)."""
        params: dict[str, Any] = super().get_params(deep=deep)
        for name in getattr(self, "_extra_params", ()):
            params[name] = getattr(self, name)
        return params

    def set_params(self, **params: Any) -> Any:
        """Sets parameters: the constructor's, or any engine parameter by name or alias
        (checked by ``fit``: unknown names raise :class:`~sapwood.ParameterError`)."""
        own = set(super().get_params(deep=False))
        extra = {k: v for k, v in params.items() if k not in own and "__" not in k}
        rest = {k: v for k, v in params.items() if k not in extra}
        if rest:
            super().set_params(**rest)
        self._set_extra(extra)
        return self

    def _seed(self) -> int:
        """The engine's seed of ``random_state`` (None is 0)."""
        seed = self.random_state
        if seed is None:
            return 0
        if not isinstance(seed, (int, np.integer)):
            return int(check_random_state(seed).randint(np.iinfo(np.int32).max))
        return int(seed)

    def _given(self, own: str) -> bool:
        """Whether the constructor parameter ``own`` was given, itself or by an alias."""
        canonical = _params.canonical_param(own)
        return getattr(self, own) is not None or any(
            _params.canonical_param(n) == canonical for n in self._extra_params
        )

    def _engine_params(self) -> list[tuple[str, Any]]:
        """The engine's parameters, named as given to this estimator (so errors name
        them); keyword parameters win over the constructor's defaults, and a parameter
        set both ways to different values is an error."""
        seed = self._seed()
        if isinstance(self.n_estimators, (int, np.integer)) and self.n_estimators < 1:
            raise ParameterError(
                f"invalid parameter `n_estimators`: {self.n_estimators} must be at least 1"
            )
        named: dict[str, Any] = {name: getattr(self, name) for name in _ENGINE_NAMED}
        named["random_state"] = int(seed)
        named["eval_metric"] = self.eval_metric
        named["n_jobs"] = _threads(self.n_jobs)
        defaults = {
            k: v.default for k, v in inspect.signature(_SapwoodModel.__init__).parameters.items()
        }
        extra = {name: getattr(self, name) for name in self._extra_params}
        for name, value in extra.items():
            canonical = _params.canonical_param(name)
            for own in list(named):
                if canonical is not None and _params.canonical_param(own) == canonical:
                    if getattr(self, own) != defaults[own]:
                        raise ParameterError(
                            f"invalid parameter `{name}`: given twice, as `{own}` and as `{name}`"
                        )
                    del named[own]
        return [*named.items(), *extra.items()]

    def _base_score_given(self) -> bool:
        return any(_params.canonical_param(n) == "base_score" for n in self._extra_params)

    def _check_X(self, X: Any, reset: bool) -> Any:
        """Checks feature names and counts the scikit-learn way; DataFrames and Arrow
        tables pass unchanged (their categorical columns survive), other inputs become
        float32/float64 arrays without a copy where possible. ``missing`` values become
        NaN."""
        if self.missing is not None:
            X = _data.replace_missing(X, self.missing)
        if _data.is_frame(X):
            validate_data(self, X, skip_check_array=True, reset=reset)
            return X
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float32, np.float64],
            ensure_all_finite="allow-nan",
            # kept sparse: absent entries are missing values (see Dataset)
            accept_sparse=True,
            order=None,
        )

    def _fit(
        self,
        X: Any,
        y: npt.NDArray[Any],
        params: list[tuple[str, Any]],
        sample_weight: Any,
        fit_args: _FitArgs,
        encode: Any,
    ) -> None:
        """Trains the booster on ``X``, ``y`` (training targets) and the evaluation sets of
        ``fit_args`` (their labels made targets by ``encode``)."""
        if callable(fit_args.eval_metric):
            raise ParameterError(
                "invalid parameter `eval_metric`: custom metric functions are not "
                "supported; give metric names (rmse, logloss, auc, ...)"
            )
        dtrain = self._train_dataset(X, y, sample_weight, fit_args)
        evals = [
            (self._eval_dataset(spec, encode, fit_args.eval_margins_name), spec.name)
            for spec in fit_args.evaluation_sets()
        ]
        options = self._train_options(params, fit_args, bool(evals))
        result: EvalsResult = {}
        obj = None
        if callable(self.objective):
            obj = _sklearn_objective(self.objective, y)
        init = fit_args.init_model
        if isinstance(init, _SapwoodModel):
            init = init.get_booster()
        own_stopping = options.early_stopping_rounds is not None or any(
            isinstance(cb, _EarlyStopping) for cb in options.callbacks
        )
        chosen = self._chooses_rounds and not self._given("n_estimators")
        if chosen and not (own_stopping or init is not None or obj is not None):
            leaf_rows = None if self._given("min_child_samples") else CHOICE_LEAF_ROWS
            setting = _chosen_setting(
                options.params, dtrain, isinstance(self, ClassifierMixin), self._seed(),
                leaf_rows,
            )
            options = options._replace(params=setting.params(options.params))
        self._Booster = train(
            options.params,
            dtrain,
            evals=evals,
            early_stopping_rounds=options.early_stopping_rounds,
            callbacks=options.callbacks,
            verbose_eval=options.verbose_eval,
            evals_result=result,
            init_model=init,
            obj=obj,
        )
        self.evals_result_ = _with_lightgbm_keys(result)

    def _train_dataset(
        self, X: Any, y: npt.NDArray[Any], sample_weight: Any, fit_args: _FitArgs
    ) -> Dataset:
        """The training :class:`~sapwood.Dataset`: ``X`` checked (it sets the features
        the estimator expects), with weights, queries and starting margins."""
        X = self._check_X(X, reset=True)
        if sample_weight is not None:
            sample_weight = column_or_1d(np.asarray(sample_weight, dtype=np.float32))
        group, qid = fit_args.queries
        dtrain = Dataset(
            X, label=y, weight=sample_weight, categorical_features=self.categorical_features,
            group=group, qid=qid,
        )
        margin_name, margin = fit_args.margin
        _set_margin(dtrain, margin, margin_name == "init_score")
        return dtrain

    def _eval_dataset(self, spec: _EvalSpec, encode: Any, margins_name: str) -> Dataset:
        """An evaluation set's :class:`~sapwood.Dataset`; errors of its labels or queries
        name the set."""
        Xe = self._check_X(spec.X, reset=False)
        try:
            labels = encode(column_or_1d(spec.y))
        except LabelError as e:
            raise LabelError(f"eval_set {spec.position} (`{spec.name}`): {e}") from None
        try:
            de = Dataset(
                Xe, label=labels, weight=spec.weight,
                categorical_features=self.categorical_features, group=spec.group, qid=spec.qid,
            )
        except (ParameterError, DataError) as e:
            if spec.group is None and spec.qid is None:
                raise
            which = "eval_group" if spec.group is not None else "eval_qid"
            raise type(e)(f"{which} of eval_set {spec.position} (`{spec.name}`): {e}") from None
        _set_margin(de, spec.margin, margins_name == "eval_init_score")
        return de

    def _train_options(
        self, params: list[tuple[str, Any]], fit_args: _FitArgs, evaluated: bool
    ) -> _TrainOptions:
        """The training options of ``fit``'s arguments, which replace the constructor's
        (its callbacks run after the constructor's)."""
        if fit_args.eval_metric is not None:
            params = [(k, v) for k, v in params if _params.canonical_param(k) != "eval_metric"]
            params.append(("eval_metric", fit_args.eval_metric))
        stopping = fit_args.early_stopping_rounds
        if stopping is None:
            stopping = self.early_stopping_rounds
        verbose = self.verbose if fit_args.verbose is None else fit_args.verbose
        return _TrainOptions(
            params,
            stopping,
            [*(self.callbacks or ()), *(fit_args.callbacks or ())],
            verbose if evaluated else False,
        )

    def _ranking_objective(self, group: Any, qid: Any, weights: str, custom: Optional[str]) -> Any:
        """A ranker's objective, once its settings are checked: the queries given one way,
        no class weights (``weights`` says how a ranker weights rows instead), a ranking
        objective. ``custom``, when given, is the reason a callable objective is refused;
        otherwise a callable is refused as not a ranking objective."""
        if group is None and qid is None:
            raise ParameterError(
                "invalid parameter `group`: a ranker needs the query of every row: give "
                "`group` (rows per query) or `qid` (a query id per row)"
            )
        if group is not None and qid is not None:
            raise ParameterError(
                "invalid parameter `qid`: given with `group`; give the queries one way"
            )
        for name in ("class_weight", "scale_pos_weight"):
            if getattr(self, name) is not None:
                raise ParameterError(
                    f"invalid parameter `{name}`: it weights classes of a classification; "
                    f"give a ranker `sample_weight` {weights}"
                )
        objective = self.objective if self.objective is not None else "rank:ndcg"
        if callable(objective) and custom is not None:
            raise ParameterError(f"invalid parameter `objective`: {custom}")
        if callable(objective) or str(objective).strip().lower() not in _RANKING_OBJECTIVES:
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is not a ranking objective; "
                "use rank:ndcg (lambdarank), rank:map or rank:pairwise"
            )
        return objective

    def _predicting(
        self, X: Any, iteration_range: Optional[tuple[int, int]]
    ) -> tuple[Any, Booster, Optional[tuple[int, int]]]:
        """What every prediction starts with: ``X`` checked, the booster set to the
        estimator's ``n_jobs`` (as both peers' estimators predict), and the rounds, by
        default the best iteration after early stopping (XGBoost's estimators' rule)."""
        check_is_fitted(self, "_Booster")
        X = self._check_X(X, reset=False)
        booster: Booster = self._Booster
        booster.set_param({"nthread": _threads(self.n_jobs)})
        if iteration_range is None and booster.best_iteration is not None:
            iteration_range = (0, booster.best_iteration + 1)
        return X, booster, iteration_range

    def _raw_predict(
        self,
        X: Any,
        output_margin: bool = False,
        iteration_range: Optional[tuple[int, int]] = None,
        base_margin: Any = None,
    ) -> npt.NDArray[np.float32]:
        X, booster, iteration_range = self._predicting(X, iteration_range)
        return booster.predict(
            X, output_margin=output_margin, iteration_range=iteration_range,
            base_margin=base_margin,
        )

    def _contributions(
        self, X: Any, iteration_range: Optional[tuple[int, int]] = None
    ) -> npt.NDArray[np.float32]:
        """SHAP contributions as LightGBM's ``predict(X, pred_contrib=True)`` lays them
        out: ``(n, (features + 1) * groups)``, each group's bias after its features; of
        the rounds ``iteration_range``, by default the best iteration's."""
        X, booster, rounds = self._predicting(X, iteration_range)
        c = booster.predict(X, pred_contribs=True, iteration_range=rounds)
        return c.reshape(c.shape[0], -1)

    def _rounds(
        self,
        iteration_range: Optional[tuple[int, int]],
        num_iteration: Optional[int],
        start_iteration: int,
    ) -> Optional[tuple[int, int]]:
        """LightGBM's ``start_iteration``/``num_iteration`` as XGBoost's ``iteration_range``,
        by LightGBM's rules: ``num_iteration`` None uses the best iteration when there is
        one and ``start_iteration`` is 0, else every round from ``start_iteration``; 0 or
        less uses every round from ``start_iteration``."""
        start = max(int(start_iteration or 0), 0)
        if num_iteration is None and start == 0:
            return iteration_range
        if iteration_range is not None:
            raise ParameterError(
                "invalid parameter `num_iteration`: given with `iteration_range`, which says "
                "the same (XGBoost's name); give one"
            )
        rounds = self.get_booster().num_boosted_rounds()
        if num_iteration is None or int(num_iteration) <= 0:
            end = rounds
        else:
            end = start + int(num_iteration)
        return (min(start, rounds), min(end, rounds))

    def apply(
        self, X: Any, iteration_range: Optional[tuple[int, int]] = None
    ) -> npt.NDArray[Any]:
        """The leaf each row reaches in each tree, ``(n, trees)`` (XGBoost's ``apply``;
        LightGBM's ``predict(X, pred_leaf=True)``); after early stopping the trees up to
        the best iteration unless ``iteration_range`` says otherwise."""
        X, booster, iteration_range = self._predicting(X, iteration_range)
        leaves: npt.NDArray[Any] = booster.predict(
            X, pred_leaf=True, iteration_range=iteration_range
        )
        return leaves

    def save_model(self, fname: Any, format: str = "sapwood") -> None:
        """Writes the trained booster to ``fname`` (XGBoost's estimator method; see
        :meth:`sapwood.Booster.save_model` for ``format``). A classifier's ``classes_`` are
        not in the file: :meth:`load_model` gives ``0 .. n_classes - 1``, as XGBoost's."""
        self.get_booster().save_model(fname, format=format)

    def load_model(self, fname: Any) -> Any:
        """Reads a booster saved by :meth:`save_model` (or :meth:`sapwood.Booster.save_model`)
        into this estimator, which can then predict (XGBoost's estimator method)."""
        booster = Booster(model_file=fname)
        self._Booster = booster
        self.n_features_in_ = booster.num_features()
        names = list(booster.feature_names)
        if names != [f"f{i}" for i in range(len(names))]:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.evals_result_ = _with_lightgbm_keys({})
        self._loaded(booster)
        return self

    def _loaded(self, booster: Booster) -> None:
        """What a subclass learns from a loaded booster (a classifier: its classes)."""

    # ---- fitted attributes ------------------------------------------------------------

    def get_booster(self) -> Booster:
        """The trained :class:`~sapwood.Booster`."""
        check_is_fitted(self, "_Booster")
        return self._Booster

    @property
    def booster_(self) -> Booster:
        """The trained :class:`~sapwood.Booster`."""
        return self.get_booster()

    @property
    def best_iteration_(self) -> Optional[int]:
        """The best round (0-based) chosen by early stopping, or None."""
        return self.get_booster().best_iteration

    @property
    def best_iteration(self) -> Optional[int]:
        """The best round (0-based) chosen by early stopping, or None (XGBoost's name)."""
        return self.get_booster().best_iteration

    @property
    def best_score(self) -> Optional[float]:
        """The watched score at the best iteration, or None (XGBoost's name)."""
        return self.get_booster().best_score

    @property
    def best_score_(self) -> dict[str, dict[str, float]]:
        """Every metric of every evaluation set at the best iteration (the last round
        without early stopping), LightGBM's ``best_score_``."""
        booster = self.get_booster()
        best = booster.best_iteration
        at = -1 if best is None else best
        return _with_lightgbm_keys({
            name: {metric: values[at] for metric, values in metrics.items()}
            for name, metrics in self.evals_result_.items()
        })

    def evals_result(self) -> EvalsResult:
        """The metrics history, ``{set: {metric: [value per round]}}`` (XGBoost's
        method; ``evals_result_`` is the same dict)."""
        check_is_fitted(self, "_Booster")
        result: EvalsResult = self.evals_result_
        return result

    @property
    def n_estimators_(self) -> int:
        """Rounds trained."""
        return self.get_booster().num_boosted_rounds()

    @property
    def feature_importances_(self) -> npt.NDArray[np.float64]:
        """Importances normalised to sum to 1, as XGBoost's estimators give them:
        ``importance_type`` is read as XGBoost reads it (``gain`` and ``cover`` average over
        a feature's splits, ``total_gain``, ``total_cover``, ``weight`` the split count) and
        LightGBM's ``split`` is ``weight``. LightGBM's estimators give ``gain`` as the
        total, unnormalised: ``importance_type="total_gain"`` ranks features as it does."""
        booster = self.get_booster()
        kind = {"split": "weight"}.get(self.importance_type, self.importance_type)
        used = booster.get_score(kind)
        scores = np.array([used.get(n, 0.0) for n in booster.feature_names], dtype=np.float64)
        total = scores.sum()
        return scores / total if total > 0 else scores

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags


#: A metric's value, or its values round by round.
_V = TypeVar("_V")

#: LightGBM's names of metrics that Sapwood reports under XGBoost's names.
_LIGHTGBM_METRICS = {
    "binary_logloss": "logloss",
    "binary_error": "error",
    "multi_logloss": "mlogloss",
    "multi_error": "merror",
    "l1": "mae",
    "mean_absolute_error": "mae",
    "l2_root": "rmse",
    "root_mean_squared_error": "rmse",
    "mean_absolute_percentage_error": "mape",
    "average_precision": "aucpr",
    "poisson": "poisson-nloglik",
    "gamma": "gamma-nloglik",
    "tweedie": "tweedie-nloglik",
}


class _PeerKeys(dict[str, Any]):
    """A dict that also answers LightGBM's names of its keys (``valid_0`` for
    ``validation_0``, ``binary_logloss`` for ``logloss``), so that LightGBM's evaluation
    code reads XGBoost-named results; iteration, ``keys()`` and equality see only the
    names stored."""

    def _stored(self, key: Any) -> Any:
        if isinstance(key, str):
            m = re.fullmatch(r"valid_(\d+)", key)
            if m is not None:
                return f"validation_{m.group(1)}"
            return _LIGHTGBM_METRICS.get(key, key)
        return key

    def __missing__(self, key: Any) -> Any:
        stored = self._stored(key)
        if stored != key and dict.__contains__(self, stored):
            return self[stored]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or dict.__contains__(self, self._stored(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default


def _with_lightgbm_keys(result: Mapping[str, Mapping[str, _V]]) -> dict[str, dict[str, _V]]:
    """``{set: {metric: value}}`` answering LightGBM's names too (see :class:`_PeerKeys`)."""
    return _PeerKeys({name: _PeerKeys(metrics) for name, metrics in result.items()})


def _eval_xy(eval_set: Optional[EvalSet], eval_X: Any, eval_y: Any) -> Optional[EvalSet]:
    """LightGBM 4.7's ``eval_X``/``eval_y`` (one set, or a tuple of sets each) as the
    ``eval_set`` pairs XGBoost and older LightGBM take."""
    if eval_X is None and eval_y is None:
        return eval_set
    if eval_X is None or eval_y is None:
        given, missing = ("eval_X", "eval_y") if eval_y is None else ("eval_y", "eval_X")
        raise ParameterError(f"invalid parameter `{given}`: given without `{missing}`")
    if eval_set is not None:
        raise ParameterError(
            "invalid parameter `eval_X`: given with `eval_set`, which is the same thing "
            "(the older name); give one"
        )
    xs = list(eval_X) if isinstance(eval_X, tuple) else [eval_X]
    ys = list(eval_y) if isinstance(eval_y, tuple) else [eval_y]
    if len(xs) != len(ys):
        raise ParameterError(
            f"invalid parameter `eval_y`: {len(ys)} sets of labels for {len(xs)} sets of "
            "features in `eval_X`"
        )
    return list(zip(xs, ys))


class _FitArgs:
    """What ``fit`` takes beyond the data, under XGBoost's and LightGBM's names."""

    def __init__(
        self,
        eval_set: Optional[EvalSet],
        eval_sample_weight: Optional[Sequence[Any]],
        sample_weight_eval_set: Optional[Sequence[Any]],
        eval_names: Optional[Sequence[str]],
        eval_metric: Union[str, Sequence[str], None],
        early_stopping_rounds: Optional[int],
        verbose: Union[bool, int, None],
        callbacks: Optional[Sequence[Callback]],
        base_margin: Any = None,
        init_score: Any = None,
        base_margin_eval_set: Optional[Sequence[Any]] = None,
        eval_init_score: Optional[Sequence[Any]] = None,
        xgb_model: Any = None,
        init_model: Any = None,
        queries: tuple[Any, Any] = (None, None),
        eval_group: Optional[Sequence[Any]] = None,
        eval_qid: Optional[Sequence[Any]] = None,
    ) -> None:
        #: The training rows' ``(group, qid)`` (ranking; at most one is given).
        self.queries = queries
        self.eval_group = eval_group
        self.eval_qid = eval_qid
        for xgb_name, xgb_value, lgb_name, lgb_value in (
            ("base_margin", base_margin, "init_score", init_score),
            ("base_margin_eval_set", base_margin_eval_set, "eval_init_score", eval_init_score),
            ("xgb_model", xgb_model, "init_model", init_model),
        ):
            if xgb_value is not None and lgb_value is not None:
                raise ParameterError(
                    f"invalid parameter `{lgb_name}`: given with `{xgb_name}`, which is the "
                    "same thing (XGBoost's name); give one"
                )
        #: The training rows' margins, under the name given.
        self.margin: tuple[str, Any] = (
            ("init_score", init_score) if init_score is not None else ("base_margin", base_margin)
        )
        self.margins_list = eval_init_score if eval_init_score is not None else base_margin_eval_set
        self.eval_margins_name = (
            "eval_init_score" if eval_init_score is not None else "base_margin_eval_set"
        )
        self.init_model = init_model if init_model is not None else xgb_model
        if eval_sample_weight is not None and sample_weight_eval_set is not None:
            raise ParameterError(
                "invalid parameter `sample_weight_eval_set`: given with `eval_sample_weight`, "
                "which is the same thing (LightGBM's name); give one"
            )
        self.eval_set = eval_set
        self.weights = eval_sample_weight if eval_sample_weight is not None else sample_weight_eval_set
        self.weights_name = (
            "eval_sample_weight" if eval_sample_weight is not None else "sample_weight_eval_set"
        )
        self.eval_names = eval_names
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.verbose = verbose
        self.callbacks = callbacks

    def eval_weights(self, n: int) -> list[Any]:
        """One weight array (or None) per evaluation set."""
        if self.weights is None:
            return [None] * n
        weights = list(self.weights)
        if len(weights) != n:
            raise ParameterError(
                f"invalid parameter `{self.weights_name}`: {len(weights)} weight arrays for "
                f"{n} evaluation sets"
            )
        return weights

    def eval_margins(self, n: int) -> list[Any]:
        """One margin array (or None) per evaluation set."""
        if self.margins_list is None:
            return [None] * n
        margins = list(self.margins_list)
        if len(margins) != n:
            raise ParameterError(
                f"invalid parameter `{self.eval_margins_name}`: {len(margins)} margin arrays "
                f"for {n} evaluation sets"
            )
        return margins

    def eval_queries(self, n: int) -> list[tuple[Any, Any]]:
        """One ``(group, qid)`` pair per evaluation set (both None without groups)."""
        out: list[tuple[Any, Any]] = [(None, None)] * n
        for name, given in (("eval_group", self.eval_group), ("eval_qid", self.eval_qid)):
            if given is None:
                continue
            items = list(given)
            if len(items) != n:
                raise ParameterError(
                    f"invalid parameter `{name}`: {len(items)} arrays for {n} evaluation sets"
                )
            for i, item in enumerate(items):
                if item is None:
                    continue
                if out[i][0] is not None:
                    raise ParameterError(
                        f"invalid parameter `eval_qid`: evaluation set {i} also has "
                        "`eval_group`; give its queries one way"
                    )
                out[i] = (item, None) if name == "eval_group" else (None, item)
        return out

    def names(self, n: int) -> list[str]:
        """The evaluation sets' names: ``eval_names`` or XGBoost's ``validation_i``."""
        if self.eval_names is None:
            return [f"validation_{i}" for i in range(n)]
        names = [str(x) for x in self.eval_names]
        if len(names) != n or len(set(names)) != n:
            raise ParameterError(
                f"invalid parameter `eval_names`: {names} are not {n} distinct names, one "
                "per evaluation set"
            )
        return names

    def evaluation_sets(
        self, queries: Optional[list[tuple[Any, Any]]] = None
    ) -> Iterator[_EvalSpec]:
        """Each evaluation set with its weight, margin, name and queries (``queries``, one
        ``(group, qid)`` per set, in place of ``eval_group``/``eval_qid``); the lists are
        checked against the sets before the first, each pair as it comes."""
        eval_set = list(self.eval_set or ())
        n = len(eval_set)
        weights = self.eval_weights(n)
        margins = self.eval_margins(n)
        names = self.names(n)
        queries = self.eval_queries(n) if queries is None else queries
        for i, pair in enumerate(eval_set):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ParameterError(
                    f"invalid parameter `eval_set`: item {i} is not an (X, y) pair"
                )
            group, qid = queries[i]
            yield _EvalSpec(i, pair[0], pair[1], weights[i], margins[i], names[i], group, qid)


class _EvalSpec(NamedTuple):
    """One evaluation set as ``fit`` was given it."""

    position: int
    X: Any
    y: Any
    weight: Any
    margin: Any
    name: str
    group: Any
    qid: Any


#: Rounds where ``n_estimators`` is None but the rounds are not chosen (XGBoost's
#: default): for a ranker, with early stopping of the caller's own, a model to continue, a
#: custom objective, or too few rows to hold some out.
DEFAULT_ROUNDS = 100
#: Fewest rows the rounds are chosen on.
CHOICE_MIN_ROWS = 50
#: Below this many rows the setting is chosen by :data:`CHOICE_FOLDS`-fold
#: cross-validation; from it, on one held-out tenth.
CHOICE_CV_ROWS = 20_000
#: Folds of the cross-validation that chooses the setting of a small table.
CHOICE_FOLDS = 5
#: Most rounds a held-out fit may take.
CHOICE_MAX_ROUNDS = 1000
#: Rounds without improvement on the held-out rows that end a held-out fit.
CHOICE_PATIENCE = 20
#: The final fit's rounds per best held-out round (it trains on more rows).
CHOICE_GROWTH = 1.1
#: The fewest rows a leaf may hold that the choice tries beside none (XGBoost's habit):
#: LightGBM's default ``min_data_in_leaf``.
CHOICE_LEAF_ROWS = 20


class _Setting(NamedTuple):
    """What :func:`_chosen_setting` chose: the rounds, and the fewest rows a leaf may hold
    (None: the engine's default, none)."""

    rounds: int
    leaf_rows: Optional[int] = None

    def params(self, params: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """``params`` with this setting in place of their own."""
        out = _rounds_set(params, self.rounds)
        if self.leaf_rows is not None:
            out = [(k, v) for k, v in out if _params.canonical_param(k) != "min_data_in_leaf"]
            out.append(("min_child_samples", self.leaf_rows))
        return out


def _rounds_set(params: list[tuple[str, Any]], rounds: int) -> list[tuple[str, Any]]:
    """``params`` with their rounds (under any alias) set to ``rounds``."""
    kept = [(k, v) for k, v in params if _params.canonical_param(k) != "num_rounds"]
    return [*kept, ("n_estimators", int(rounds))]


def _chosen_setting(
    params: list[tuple[str, Any]],
    dtrain: Dataset,
    stratified: bool,
    seed: int,
    leaf_rows: Optional[int],
) -> _Setting:
    """The rounds (and, given ``leaf_rows``, the fewest rows a leaf may hold: none or
    that many) to train on all of ``dtrain`` when ``n_estimators`` is None.

    Rows are held out, seeded and stratified by class for a classifier: below
    :data:`CHOICE_CV_ROWS` rows each of :data:`CHOICE_FOLDS` folds in turn, else one
    tenth. Each held-out fit trains up to :data:`CHOICE_MAX_ROUNDS` rounds on the other
    rows until the watched metric (the last ``eval_metric``, else the objective's) on the
    held-out rows has not improved for :data:`CHOICE_PATIENCE` rounds. The leaf minimum
    whose fits scored better on average is kept (none on a tie), and the mean of its best
    round counts, grown by :data:`CHOICE_GROWTH` for the larger data, is the rounds.

    Why: learning rates, depths and tables differ in how many rounds they want (at 0.1,
    100 rounds underfit a 20,000-row count table that XGBoost's 0.3 fits, and overfit a
    4,000-row one), and in whether small leaves overfit (a 2,930-row house-price table
    wants LightGBM's 20 rows a leaf, a count table with rare large counts loses 11% with
    it), so no fixed setting serves them all. One tenth of a small table is too few rows
    to choose on, so small tables take the folds' mean. The rows held out depend on
    ``seed`` and the data alone, so the choice is the same on every backend and worker
    count.
    """
    n = dtrain.num_row()
    if n < CHOICE_MIN_ROWS:
        return _Setting(DEFAULT_ROUNDS)
    folds = _make_folds(
        dtrain, CHOICE_FOLDS if n < CHOICE_CV_ROWS else 10, stratified, None, True, seed
    )
    if n >= CHOICE_CV_ROWS:
        folds = folds[:1]
    # each leaf rule trains on the same folds: their datasets are made once
    parts = [(_subset(dtrain, fit_rows), _subset(dtrain, held)) for fit_rows, held in folds]
    best: Optional[tuple[float, _Setting]] = None
    for leaves in (None, leaf_rows) if leaf_rows is not None else (None,):
        rounds, scores, higher = [], [], False
        for fit, held in parts:
            history: EvalsResult = {}
            booster = train(
                _Setting(CHOICE_MAX_ROUNDS, leaves).params(params),
                fit,
                evals=[(held, "held_out")],
                early_stopping_rounds=CHOICE_PATIENCE,
                verbose_eval=False,
                evals_result=history,
            )
            # early stopping watches the last metric, and its name says which way is better
            watched = list(history["held_out"])[-1]
            higher = watched.split("@")[0] in _HIGHER_IS_BETTER
            # early stopping always names a best round; a run without one used every round
            r = booster.best_iteration
            rounds.append(booster.num_boosted_rounds() if r is None else r + 1)
            scores.append(float(booster.best_score or 0.0))
        score = -float(np.mean(scores)) if higher else float(np.mean(scores))
        setting = _Setting(max(1, round(float(np.mean(rounds)) * CHOICE_GROWTH)), leaves)
        if best is None or score < best[0]:
            best = (score, setting)
    assert best is not None
    return best[1]


class _TrainOptions(NamedTuple):
    """What ``fit`` trains with besides the data (see :meth:`_SapwoodModel._train_options`)."""

    params: list[tuple[str, Any]]
    early_stopping_rounds: Optional[int]
    callbacks: list[Callback]
    verbose_eval: Union[bool, int]


def _set_margin(dataset: Dataset, margin: Any, lightgbm: bool) -> None:
    """Gives ``dataset`` its rows' starting margins, read as the peer whose name was used
    reads them (LightGBM's ``init_score`` is class after class)."""
    if margin is None:
        return
    if lightgbm:
        dataset.set_init_score(margin)
    else:
        dataset.set_base_margin(margin)


def _ranking_params(
    params: list[tuple[str, Any]], objective: Any, eval_at: Union[int, Sequence[int], None],
    feature_weights: Any,
) -> list[tuple[str, Any]]:
    """A ranker's parameters: ``params`` with ``feature_weights``, the objective and
    LightGBM's ``eval_at`` cut-offs."""
    _add_feature_weights(params, feature_weights)
    params.append(("objective", objective))
    if eval_at is not None:
        params.append(("eval_at", [eval_at] if isinstance(eval_at, int) else list(eval_at)))
    return params


def _learn_classes(
    model: _SapwoodModel, labels: npt.NDArray[Any], name: str
) -> npt.NDArray[np.intp]:
    """Sets a classifier's ``classes_`` from the labels (``name`` is its class, for the
    error of a single class); the code of each label."""
    kinds = _label_kinds(labels)
    if len(kinds) > 1:
        raise LabelError(
            f"class labels mix types ({', '.join(sorted(kinds))}): give every label as "
            "the same type (all strings or all numbers)"
        )
    check_classification_targets(labels)
    classes, codes = np.unique(labels, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"{name} needs at least two classes in y, found {len(classes)} class"
        )
    model.classes_ = classes
    model.n_classes_ = len(classes)
    model._classes_kinds = kinds
    return codes


def _add_feature_weights(params: list[tuple[str, Any]], weights: Any) -> None:
    """XGBoost's ``fit(feature_weights=...)``: each feature's relative chance to be drawn by
    the column-sampling fractions, as the ``feature_weights`` parameter."""
    if weights is None:
        return
    w = np.asarray(weights, dtype=np.float64).ravel()
    if any(_params.canonical_param(k) == "feature_weights" for k, _ in params):
        raise ParameterError(
            "invalid parameter `feature_weights`: given to the constructor and to fit; give "
            "it once"
        )
    params.append(("feature_weights", [float(v) for v in w]))


#: The estimator ``fit`` returns (the class it is called on).
_M = TypeVar("_M", bound="_XYModel")


class _XYModel(_SapwoodModel):
    """The regressor's and the classifier's ``fit``, in XGBoost's and LightGBM's
    signature; each says how its labels become training targets, its objective and its
    row weights."""

    # a tenth of a ranking table's queries is too few to choose on: NDCG@10 over 20
    # queries of the bundled LambdaRank set chose 0.745 where 100 rounds score 0.773
    _chooses_rounds = True

    def fit(
        self: _M,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Optional[EvalSet] = None,
        eval_sample_weight: Optional[Sequence[Any]] = None,
        *,
        sample_weight_eval_set: Optional[Sequence[Any]] = None,
        eval_names: Optional[Sequence[str]] = None,
        eval_metric: Union[str, Sequence[str], None] = None,
        early_stopping_rounds: Optional[int] = None,
        verbose: Union[bool, int, None] = None,
        callbacks: Optional[Sequence[Callback]] = None,
        base_margin: Any = None,
        init_score: Any = None,
        base_margin_eval_set: Optional[Sequence[Any]] = None,
        eval_init_score: Optional[Sequence[Any]] = None,
        xgb_model: Any = None,
        init_model: Any = None,
        feature_weights: Any = None,
        eval_X: Any = None,
        eval_y: Any = None,
    ) -> _M:
        """Trains on ``X``, ``y``.

        Parameters
        ----------
        X : array-like, DataFrame, Arrow table or sparse matrix
            Training data (see :class:`sapwood.Dataset`).
        y : array-like
            Labels.
        sample_weight : array-like, optional
            Non-negative row weights.
        eval_set : list of (X, y) pairs, optional
            Sets reported after every round; early stopping watches the last one.
        eval_sample_weight : list of array-like, optional
            Weights of each evaluation set (LightGBM's name).
        sample_weight_eval_set : list of array-like, optional
            The same under XGBoost's name; give one of the two.
        eval_names : list of str, optional
            Names of the evaluation sets in ``evals_result_`` (default ``validation_0``,
            ``validation_1``, ...).
        eval_metric : str or list of str, optional
            Metrics reported on the evaluation sets; replaces the constructor's.
        early_stopping_rounds : int, optional
            Replaces the constructor's ``early_stopping_rounds``.
        verbose : bool or int, optional
            Print the metrics every round (True) or every n rounds; False prints
            nothing. None (default) uses the constructor's ``verbose``.
        callbacks : list of Callback, optional
            Called after every round, after the constructor's ``callbacks`` (see
            :class:`sapwood.Callback`; ``sapwood.early_stopping`` and
            ``sapwood.log_evaluation`` are LightGBM's callbacks).
        base_margin : array-like, optional
            Each training row's starting margin, ``(n,)`` or ``(n, classes)`` (XGBoost's
            name; see :meth:`sapwood.Dataset.set_base_margin`). Predictions on other rows
            start from the model's base score unless ``predict`` is given a
            ``base_margin`` too.
        init_score : array-like, optional
            The same under LightGBM's name (a flat multiclass array is read class after
            class, as LightGBM does); give one of the two.
        base_margin_eval_set : list of array-like, optional
            The margins of each evaluation set (XGBoost's name).
        eval_init_score : list of array-like, optional
            The same under LightGBM's name; give one of the two.
        xgb_model : Booster, estimator or str, optional
            A model (a :class:`sapwood.Booster`, a fitted Sapwood estimator, or a model
            file) to continue: ``n_estimators`` more rounds are trained (XGBoost's
            ``xgb_model``; see :func:`sapwood.train`).
        init_model : Booster, estimator or str, optional
            The same under LightGBM's name; give one of the two.
        feature_weights : array-like, optional
            Each feature's relative chance to be drawn by ``colsample_bytree``,
            ``colsample_bylevel`` and ``colsample_bynode`` (XGBoost's ``fit`` argument;
            the ``feature_weights`` parameter).
        eval_X : array-like or tuple of array-like, optional
            LightGBM 4.7's evaluation sets' features: one set, or a tuple of sets; with
            ``eval_y`` the same as ``eval_set=list(zip(eval_X, eval_y))``.
        eval_y : array-like or tuple of array-like, optional
            Their labels, one for each set of ``eval_X``.

        Returns
        -------
        self
        """
        y_given, target = self._targets(y)
        params = self._engine_params()
        _add_feature_weights(params, feature_weights)
        params.extend(self._objective_params())
        weight = self._fit_weight(y_given, target, sample_weight)
        eval_set = _eval_xy(eval_set, eval_X, eval_y)
        args = _FitArgs(
            eval_set, eval_sample_weight, sample_weight_eval_set, eval_names, eval_metric,
            early_stopping_rounds, verbose, callbacks, base_margin, init_score,
            base_margin_eval_set, eval_init_score, xgb_model, init_model,
        )
        self._fit(X, target, params, weight, args, self._encode)
        return self

    def _targets(self, y: Any) -> tuple[npt.NDArray[Any], npt.NDArray[np.float32]]:
        """The labels as given (1-D) and as training targets, once the settings are
        checked against the estimator's task (a classifier learns its classes here)."""
        raise NotImplementedError

    def _objective_params(self) -> list[tuple[str, Any]]:
        """The engine's objective parameters for the labels seen by :meth:`_targets`."""
        raise NotImplementedError

    def _fit_weight(
        self, y: npt.NDArray[Any], target: npt.NDArray[np.float32], sample_weight: Any
    ) -> Any:
        """The training rows' weights: ``sample_weight`` (a classifier weights classes too)."""
        return sample_weight

    def _encode(self, y: Any) -> npt.NDArray[np.float32]:
        """An evaluation set's labels as training targets."""
        raise NotImplementedError


class SapwoodRegressor(RegressorMixin, _XYModel):  # type: ignore[misc]
    """Gradient-boosted trees for regression, scikit-learn style.

    Parameters follow XGBoost's scikit-learn names (``n_estimators``,
    ``learning_rate``, ``max_depth``, ``reg_lambda``, ...; see :func:`sapwood.train` for
    their meaning); any other engine parameter, or its XGBoost/LightGBM alias, may be given
    by keyword (``num_leaves=31``, ``cat_smooth=10``, ``min_category_count=5``) and is
    validated by name with the engine's "did you mean" message. ``n_estimators=None`` (the
    default) chooses the rounds on held-out rows, and with them (unless
    ``min_child_samples`` is given) whether a leaf must hold 20 rows or any number: five
    folds below 20,000 rows, else one held-out tenth, each fit up to 1,000 rounds until
    its metric stops improving for 20; the better leaf rule is kept and every row trained
    for 1.1 times its mean best count (100 rounds and no minimum with early stopping of
    your own, a model to continue or a custom objective; ``n_estimators_`` says how
    many). A number trains exactly that many rounds, as XGBoost. ``objective`` is a
    regression objective (default ``reg:squarederror``), or a custom objective as both
    peers take it, ``objective(y_true, y_pred) -> (grad, hess)`` (with LightGBM's third
    argument ``weight`` or XGBoost's keyword ``sample_weight`` when the function takes
    them): ``y_pred`` are raw margins, ``(n,)`` (``(n, classes)`` for a multiclass
    classifier); the model then predicts margins (see :func:`sapwood.train`'s ``obj``). ``max_depth=-1`` means no depth
    limit (with ``max_leaves``/``num_leaves`` bounding the trees). ``missing`` is a value
    standing for a missing value (XGBoost's ``missing=``). ``n_jobs`` is the number of
    threads (None or -1: every core); ``device`` (``"cuda:1"``, or one per worker:
    ``["cuda:0", "cuda:1"]``) and ``workers`` choose the backend and never change the model. ``callbacks`` are called after every round (see
    :class:`sapwood.Callback`). Peer settings that change nothing here
    (``tree_method="hist"``, ``boosting_type="gbdt"``, ``verbosity``...) are accepted
    with a one-time warning.
    """

    def _targets(self, y: Any) -> tuple[npt.NDArray[Any], npt.NDArray[np.float32]]:
        y_arr = _regression_target(y)
        if self.class_weight is not None:
            raise ParameterError(
                "invalid parameter `class_weight`: class weights are for SapwoodClassifier"
            )
        if self.scale_pos_weight is not None:
            raise ParameterError(
                "invalid parameter `scale_pos_weight`: it weights the positive class of a "
                "binary classification; use SapwoodClassifier"
            )
        objective = self.objective if self.objective is not None else "reg:squarederror"
        if not callable(objective) and _is_classification(objective):
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is a classification objective; "
                "use SapwoodClassifier"
            )
        return y_arr, y_arr

    def _objective_params(self) -> list[tuple[str, Any]]:
        if callable(self.objective):
            # a custom objective trains an identity loss from margin 0 (sapwood.train)
            return []
        return [("objective", self.objective if self.objective is not None else "reg:squarederror")]

    def _encode(self, y: Any) -> npt.NDArray[np.float32]:
        return _regression_target(y)

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        pred_contrib: bool = False,
        iteration_range: Optional[tuple[int, int]] = None,
        *,
        base_margin: Any = None,
        raw_score: bool = False,
        pred_leaf: bool = False,
        num_iteration: Optional[int] = None,
        start_iteration: int = 0,
    ) -> npt.NDArray[np.float32]:
        """Predicted values; ``pred_contrib`` gives SHAP contributions (LightGBM's
        layout). After early stopping the best iteration is used unless
        ``iteration_range`` (rounds ``[start, end)``, as in XGBoost) says otherwise.
        ``base_margin`` (XGBoost's) gives each row's starting margin, ``(n,)``: the trees
        are added to it instead of to the model's base score. A model fitted with a
        custom ``objective`` predicts margins. LightGBM's ``raw_score``, ``pred_leaf``,
        ``start_iteration`` and ``num_iteration`` are taken too."""
        output_margin = output_margin or raw_score
        iteration_range = self._rounds(iteration_range, num_iteration, start_iteration)
        if pred_leaf:
            return self.apply(X, iteration_range)
        if pred_contrib:
            return self._contributions(X, iteration_range)
        return self._raw_predict(X, output_margin, iteration_range, base_margin)


def _sklearn_objective(fn: Any, y: npt.NDArray[Any]) -> Any:
    """The peers' scikit-learn objective ``fn(y_true, y_pred) -> (grad, hess)`` as
    :func:`sapwood.train`'s ``obj``: LightGBM's ``fn(y_true, y_pred, weight)`` and
    XGBoost's ``fn(y_true, y_pred, *, sample_weight)`` get the training weights."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    keyword = signature is not None and "sample_weight" in signature.parameters
    positional = 0
    if signature is not None:
        positional = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "sample_weight"
            for p in signature.parameters.values()
        )
    y_true = np.asarray(y)

    def obj(preds: npt.NDArray[np.float32], dtrain: Dataset) -> Any:
        if keyword:
            return fn(y_true, preds, sample_weight=dtrain.get_weight())
        if positional >= 3:
            return fn(y_true, preds, dtrain.get_weight())
        return fn(y_true, preds)

    return obj


def _is_classification(objective: str) -> bool:
    name = str(objective).strip().lower()
    return name.startswith(("binary", "multi")) or name in {"softmax", "multiclassova", "ova"}


def _regression_target(y: Any) -> npt.NDArray[np.float32]:
    # NaN labels are left in: the engine refuses them with LabelError naming the row
    arr = column_or_1d(y, warn=True)
    try:
        return np.asarray(arr, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise LabelError(f"regression labels must be numbers: {e}") from None


def _label_kinds(y: npt.NDArray[Any]) -> set[str]:
    """The kinds of class labels in ``y``: ``number``, ``str`` or ``bool``."""
    if y.dtype.kind == "b":
        return {"bool"}
    if y.dtype.kind in "iuf":
        return {"number"}
    if y.dtype.kind in "US":
        return {"str"}
    kinds = set()
    for v in y.tolist():
        if isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, (int, float, np.number)):
            kinds.add("number")
        else:
            kinds.add(type(v).__name__)
    return kinds


class SapwoodClassifier(ClassifierMixin, _XYModel):  # type: ignore[misc]
    """Gradient-boosted trees for binary and multiclass classification, scikit-learn
    style. ``classes_`` may be of any one type numpy can sort (strings, ints, bools, ...).

    Parameters are those of :class:`SapwoodRegressor`. ``objective`` is chosen from the
    classes when None (``binary:logistic`` for two, ``multi:softprob`` for more); a custom
    ``objective(y_true, y_pred)`` gets the class codes (0, 1, ...) and raw margins, and
    ``predict_proba`` gives the sigmoid (softmax) of the margins, as XGBoost's classifier;
    ``class_weight`` weights rows by class, as scikit-learn means it (a dict ``{class:
    weight}`` or ``"balanced"``: ``n_samples / (n_classes * count(class))``);
    ``scale_pos_weight`` multiplies the weight of the positive class (``classes_[1]``) of a
    binary problem, as in XGBoost. Both multiply ``sample_weight`` and apply to the
    training rows only.
    """

    def _targets(self, y: Any) -> tuple[npt.NDArray[Any], npt.NDArray[np.float32]]:
        y_arr = column_or_1d(y, warn=True)
        codes = _learn_classes(self, y_arr, "SapwoodClassifier")
        return y_arr, codes.astype(np.float32)

    def _objective_params(self) -> list[tuple[str, Any]]:
        """The objective (and class count) for the classes found."""
        objective = self.objective
        if callable(objective):
            # as XGBoost's classifier: the margins' sigmoid or softmax are the probabilities
            start = [] if self._base_score_given() else [
                ("base_score", 0.5 if self.n_classes_ == 2 else 0.0)
            ]
            if self.n_classes_ == 2:
                return [("objective", "binary:logistic"), *start]
            return [("objective", "multi:softprob"), ("num_class", self.n_classes_), *start]
        if objective is None:
            if self.n_classes_ == 2:
                return [("objective", "binary:logistic")]
            return [("objective", "multi:softprob"), ("num_class", self.n_classes_)]
        if not _is_classification(objective):
            raise ParameterError(
                f"invalid parameter `objective`: {objective} is not a classification "
                "objective; use SapwoodRegressor"
            )
        if str(objective).strip().lower().startswith("binary"):
            if self.n_classes_ != 2:
                raise ParameterError(
                    f"invalid parameter `objective`: {objective} is for two classes but y "
                    f"has {self.n_classes_}; use multi:softprob"
                )
            return [("objective", objective)]
        return [("objective", objective), ("num_class", self.n_classes_)]

    def _fit_weight(self, y: npt.NDArray[Any], codes: npt.NDArray[Any], sample_weight: Any) -> Any:
        """``sample_weight`` times ``class_weight`` and ``scale_pos_weight``."""
        if self.class_weight is None and self.scale_pos_weight is None:
            return sample_weight
        w = (
            np.ones(len(y), dtype=np.float64)
            if sample_weight is None
            else column_or_1d(np.asarray(sample_weight, dtype=np.float64)).copy()
        )
        if self.class_weight is not None:
            try:
                w *= compute_sample_weight(self.class_weight, y)
            except ValueError as e:
                raise ParameterError(f"invalid parameter `class_weight`: {e}") from None
        if self.scale_pos_weight is not None:
            spw = float(self.scale_pos_weight)
            if not (np.isfinite(spw) and spw > 0):
                raise ParameterError(
                    f"invalid parameter `scale_pos_weight`: {self.scale_pos_weight} must be a "
                    "finite number > 0"
                )
            if self.n_classes_ != 2:
                raise ParameterError(
                    "invalid parameter `scale_pos_weight`: it weights the positive class of "
                    f"a binary problem, but y has {self.n_classes_} classes; use class_weight"
                )
            w[codes == 1] *= spw
        return w.astype(np.float32)

    def _encode(self, y: Any) -> npt.NDArray[np.float32]:
        """Class labels to the codes used in training; unseen classes and labels of
        another type than the training labels are refused."""
        y = np.asarray(y)
        kinds = _label_kinds(y)
        trained = getattr(self, "_classes_kinds", kinds)
        if not kinds <= trained:
            raise LabelError(
                f"labels are {', '.join(sorted(kinds))} but the training labels are "
                f"{', '.join(sorted(trained))} (classes {list(self.classes_)[:5]})"
            )
        classes: npt.NDArray[Any] = self.classes_
        index: npt.NDArray[np.intp] = np.clip(np.searchsorted(classes, y), 0, len(classes) - 1)
        unseen = classes[index] != y
        if np.any(unseen):
            row = int(np.argmax(unseen))
            raise LabelError(
                f"label at row {row} is {y[row]}: this class was not in the training labels"
            )
        return index.astype(np.float32)

    def predict_proba(
        self,
        X: Any,
        iteration_range: Optional[tuple[int, int]] = None,
        *,
        base_margin: Any = None,
        raw_score: bool = False,
        pred_leaf: bool = False,
        num_iteration: Optional[int] = None,
        start_iteration: int = 0,
    ) -> npt.NDArray[np.float64]:
        """Class probabilities, one column per class in ``classes_`` order; after early
        stopping from the best iteration unless ``iteration_range`` (rounds ``[start,
        end)``) says otherwise. ``base_margin`` gives each row's starting margin, ``(n,)``
        or ``(n, classes)`` (XGBoost's argument). With a custom ``objective`` the
        probabilities are the sigmoid (softmax) of the margins, as in XGBoost. LightGBM's
        ``raw_score`` (margins), ``pred_leaf``, ``start_iteration`` and ``num_iteration``
        are taken too."""
        iteration_range = self._rounds(iteration_range, num_iteration, start_iteration)
        if pred_leaf:
            return self.apply(X, iteration_range)
        if raw_score:
            return self._raw_predict(
                X, output_margin=True, iteration_range=iteration_range, base_margin=base_margin
            ).astype(np.float64)
        if self._predicts_classes():
            # multi:softmax predicts class indices; its probabilities are the margins' softmax
            m = self._raw_predict(
                X, output_margin=True, iteration_range=iteration_range, base_margin=base_margin
            )
            m = m.astype(np.float64) - m.max(axis=1, keepdims=True)
            e = np.exp(m)
            proba: npt.NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
            return proba
        p = self._raw_predict(
            X, iteration_range=iteration_range, base_margin=base_margin
        ).astype(np.float64)
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        # the engine's float32 probabilities sum to 1 only within ~1e-7: in float64 each row
        # is made to sum to 1 within float64's rounding, as scikit-learn's metrics check
        multi: npt.NDArray[np.float64] = p / p.sum(axis=1, keepdims=True)
        return multi

    def _loaded(self, booster: Booster) -> None:
        groups = int(booster._model.groups)
        labels = booster.classes
        classes = np.asarray(labels) if labels else np.arange(max(groups, 2))
        if booster.objective not in ("binary:logistic", "binary:logitraw") and groups < 2:
            raise ParameterError(
                f"invalid parameter `fname`: the model's objective `{booster.objective}` is "
                "not a classification objective; load it into SapwoodRegressor"
            )
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self._classes_kinds = _label_kinds(classes)

    def _predicts_classes(self) -> bool:
        """Whether the booster's predictions are class indices (``multi:softmax``)."""
        return self.get_booster().objective == "multi:softmax"

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        pred_contrib: bool = False,
        iteration_range: Optional[tuple[int, int]] = None,
        *,
        base_margin: Any = None,
        raw_score: bool = False,
        pred_leaf: bool = False,
        num_iteration: Optional[int] = None,
        start_iteration: int = 0,
    ) -> Any:
        """The most probable class of each row (raw scores with ``output_margin``, SHAP
        contributions in LightGBM's layout with ``pred_contrib``); ``iteration_range`` and
        ``base_margin`` as in :meth:`predict_proba`. LightGBM's ``raw_score``,
        ``pred_leaf``, ``start_iteration`` and ``num_iteration`` are taken too."""
        output_margin = output_margin or raw_score
        iteration_range = self._rounds(iteration_range, num_iteration, start_iteration)
        if pred_leaf:
            return self.apply(X, iteration_range)
        if pred_contrib:
            return self._contributions(X, iteration_range)
        if output_margin:
            return self._raw_predict(
                X, output_margin=True, iteration_range=iteration_range, base_margin=base_margin
            )
        p = self._raw_predict(X, iteration_range=iteration_range, base_margin=base_margin)
        if self._predicts_classes():
            index = p.astype(np.intp)
        else:
            index = (p > 0.5).astype(np.intp) if p.ndim == 1 else np.argmax(p, axis=1)
        return self.classes_[index]


#: The ranking objectives (XGBoost's names and LightGBM's ``lambdarank``).
_RANKING_OBJECTIVES = frozenset({"rank:ndcg", "rank:map", "rank:pairwise", "lambdarank"})

#: Why :class:`SapwoodRanker` refuses a custom objective.
_NO_CUSTOM_RANKING = (
    "custom objectives are not supported by SapwoodRanker (a callable gets no query groups); "
    "use rank:ndcg, rank:map or rank:pairwise"
)


def _qid_column(X: Any, qid: Any) -> tuple[Any, Any]:
    """XGBoost's convention: a pandas DataFrame's ``qid`` column holds the query ids (so
    that scikit-learn's utilities, which pass only ``X`` and ``y``, keep them); it is
    taken out of the features."""
    if _data.is_pandas_frame(X) and "qid" in X.columns:
        if qid is not None:
            raise ParameterError(
                "invalid parameter `qid`: given, and X also has a `qid` column; give one"
            )
        return X.drop(columns="qid"), X["qid"].to_numpy()
    return X, qid


def _eval_qid_columns(
    eval_set: Optional[EvalSet],
    eval_group: Optional[Sequence[Any]],
    eval_qid: Optional[Sequence[Any]],
) -> tuple[list[Any], Optional[Sequence[Any]]]:
    """The evaluation sets with their DataFrames' ``qid`` columns taken out, and
    ``eval_qid`` with those columns' query ids (unless ``eval_group`` gives the queries)."""
    sets = list(eval_set or ())
    if eval_group is None:
        # a DataFrame's `qid` column gives an evaluation set's queries, as in training
        qids = list(eval_qid) if eval_qid is not None else [None] * len(sets)
        for i, pair in enumerate(sets):
            if isinstance(pair, (tuple, list)) and len(pair) == 2 and i < len(qids):
                Xe, qids[i] = _qid_column(pair[0], qids[i])
                sets[i] = (Xe, pair[1])
        if any(q is not None for q in qids):
            eval_qid = qids
    return sets, eval_qid


class SapwoodRanker(_SapwoodModel):
    """Gradient-boosted trees for learning to rank (LambdaMART), scikit-learn style, as
    XGBoost's ``XGBRanker`` and LightGBM's ``LGBMRanker``.

    Parameters are those of :class:`SapwoodRegressor`, but ``n_estimators=None`` means 100
    rounds (a tenth of the queries is too few to choose the rounds on). ``objective`` is a
    ranking objective: ``rank:ndcg`` (default; LightGBM's ``lambdarank``), ``rank:map`` or
    ``rank:pairwise``. The ranking parameters are given by keyword under XGBoost's names
    (``lambdarank_num_pair_per_sample``, default 32, LightGBM's
    ``lambdarank_truncation_level``; ``lambdarank_pair_method="topk"``; ``ndcg_exp_gain``;
    ``lambdarank_normalization``; LightGBM's ``label_gain``, a list of gains by label). The default evaluation metric is ``ndcg`` (``map`` for
    ``rank:map``); ``eval_metric="ndcg@10"`` (or ``map@k``, ``pre@k``) sets a cut-off.

    ``fit`` needs the query of every row: ``group`` (rows per query, in row order) or
    ``qid`` (one id per row, the rows of a query contiguous), or a ``qid`` column of a
    pandas ``X`` (XGBoost's convention, which scikit-learn's utilities keep; it is not a
    feature). ``predict`` returns one score per row: sort a query's rows by it,
    highest first. ``predict`` needs no groups.
    """

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        group: Any = None,
        qid: Any = None,
        sample_weight: Any = None,
        eval_set: Optional[EvalSet] = None,
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
        base_margin: Any = None,
        init_score: Any = None,
        base_margin_eval_set: Optional[Sequence[Any]] = None,
        eval_init_score: Optional[Sequence[Any]] = None,
        xgb_model: Any = None,
        init_model: Any = None,
        feature_weights: Any = None,
        eval_X: Any = None,
        eval_y: Any = None,
    ) -> SapwoodRanker:
        """Trains on ``X``, ``y`` with the queries ``group`` or ``qid``.

        Every argument after ``y`` is a keyword, as in XGBoost's ``XGBRanker.fit``
        (LightGBM's ``LGBMRanker.fit`` takes ``sample_weight`` third: a positional call
        written for it fails here instead of reading weights as groups).

        Parameters
        ----------
        X : array-like, DataFrame, Arrow table or sparse matrix
            Training data (see :class:`sapwood.Dataset`); a pandas DataFrame may hold the
            query ids in a ``qid`` column instead of ``qid``.
        y : array-like
            Relevance labels (numbers >= 0, higher is more relevant).
        group : array-like of int, optional
            Rows of each query, in row order (XGBoost's and LightGBM's ``group``).
        qid : array-like of int, optional
            The query of each row (XGBoost's ``qid``); a query's rows must be contiguous
            (the error names the row where a query comes back). Give ``group`` or ``qid``.
        sample_weight : array-like, optional
            One weight per query (XGBoost's ranking weights) or one per row (LightGBM's).
        eval_set : list of (X, y) pairs, optional
            Sets reported after every round; early stopping watches the last one.
        eval_group : list of array-like, optional
            The query sizes of each evaluation set (ranking metrics are computed per
            query; a set without groups is one query).
        eval_qid : list of array-like, optional
            The query ids of each evaluation set; give ``eval_group`` or ``eval_qid``
            for each set.
        eval_sample_weight : list of array-like, optional
            Weights of each evaluation set (LightGBM's name).
        sample_weight_eval_set : list of array-like, optional
            The same under XGBoost's name; give one of the two.
        eval_names : list of str, optional
            Names of the evaluation sets in ``evals_result_`` (default ``validation_0``,
            ...).
        eval_metric : str or list of str, optional
            Metrics reported on the evaluation sets (``ndcg``, ``ndcg@10``, ``map@5``,
            ``pre@3``, ...); replaces the constructor's.
        eval_at : int or list of int, optional
            LightGBM's cut-offs: ``ndcg`` (``map`` for ``rank:map``) is reported at each,
            as ``ndcg@k``.
        early_stopping_rounds : int, optional
            Replaces the constructor's ``early_stopping_rounds``; a ranking metric is
            better when higher.
        verbose : bool or int, optional
            Print the metrics every round (True) or every n rounds.
        callbacks : list of Callback, optional
            Called after every round (see :class:`sapwood.Callback`).
        base_margin : array-like, optional
            Each training row's starting score (XGBoost's name).
        init_score : array-like, optional
            The same under LightGBM's name; give one of the two.
        base_margin_eval_set : list of array-like, optional
            The starting scores of each evaluation set (XGBoost's name).
        eval_init_score : list of array-like, optional
            The same under LightGBM's name.
        xgb_model : Booster, estimator or str, optional
            A model to continue: ``n_estimators`` more rounds are trained.
        init_model : Booster, estimator or str, optional
            The same under LightGBM's name; give one of the two.
        feature_weights : array-like, optional
            Each feature's relative chance to be drawn by the ``colsample_*`` parameters.
        eval_X : array-like or tuple of array-like, optional
            LightGBM 4.7's evaluation sets' features (with ``eval_y``, as ``eval_set``).
        eval_y : array-like or tuple of array-like, optional
            Their labels, one for each set of ``eval_X``.

        Returns
        -------
        SapwoodRanker
            This estimator, fitted.

        Raises
        ------
        ParameterError
            Neither ``group`` nor ``qid`` given, both given, a non-ranking
            ``objective``, or a query that comes back after another (naming the row).
        DataError
            ``group`` sizes that do not add up to the rows.
        """
        X, qid = _qid_column(X, qid)
        objective = self._ranking_objective(group, qid, "per query or per row", _NO_CUSTOM_RANKING)
        y_arr = _regression_target(y)
        params = _ranking_params(self._engine_params(), objective, eval_at, feature_weights)
        eval_set = _eval_xy(eval_set, eval_X, eval_y)
        eval_set, eval_qid = _eval_qid_columns(eval_set, eval_group, eval_qid)
        args = _FitArgs(
            eval_set or None, eval_sample_weight, sample_weight_eval_set, eval_names,
            eval_metric, early_stopping_rounds, verbose, callbacks, base_margin, init_score,
            base_margin_eval_set, eval_init_score, xgb_model, init_model,
            queries=(group, qid), eval_group=eval_group, eval_qid=eval_qid,
        )
        self._fit(X, y_arr, params, sample_weight, args, _regression_target)
        return self

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        pred_contrib: bool = False,
        iteration_range: Optional[tuple[int, int]] = None,
        *,
        base_margin: Any = None,
        raw_score: bool = False,
        pred_leaf: bool = False,
        num_iteration: Optional[int] = None,
        start_iteration: int = 0,
    ) -> npt.NDArray[np.float32]:
        """One ranking score per row (higher ranks first; compare scores within a
        query). A pandas ``X``'s ``qid`` column is dropped, as in fitting.

        Parameters
        ----------
        X : array-like, DataFrame, Arrow table or sparse matrix
            Rows to score.
        output_margin : bool, default False
            The same scores (a ranking model's output is its margin); XGBoost's argument.
        pred_contrib : bool, default False
            SHAP contributions instead, in LightGBM's layout.
        iteration_range : tuple of int, optional
            Rounds ``[start, end)``; after early stopping the best iteration is the
            default.
        base_margin : array-like, optional
            Each row's starting score.
        raw_score : bool, default False
            The same scores (LightGBM's argument).
        pred_leaf : bool, default False
            The leaf each row reaches in each tree instead (as :meth:`apply`).
        num_iteration : int, optional
            LightGBM's rounds to use, from ``start_iteration`` (None: the best iteration if
            any and ``start_iteration`` is 0; <= 0: every round); give this or
            ``iteration_range``.
        start_iteration : int, default 0
            LightGBM's first round to use.

        Returns
        -------
        numpy.ndarray
            float32 scores, shape ``(n,)`` (``(n, features + 1)`` with ``pred_contrib``).
        """
        X, _ = _qid_column(X, None)
        output_margin = output_margin or raw_score
        iteration_range = self._rounds(iteration_range, num_iteration, start_iteration)
        if pred_leaf:
            return self.apply(X, iteration_range)
        if pred_contrib:
            return self._contributions(X, iteration_range)
        return self._raw_predict(X, output_margin, iteration_range, base_margin)
