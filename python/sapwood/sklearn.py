"""scikit-learn estimators: ``SapwoodRegressor`` and ``SapwoodClassifier``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from . import _data
from ._data import CategoricalSpec
from ._sapwood import LabelError
from .core import Booster, Dataset, EvalsResult, ParamValue, train

__all__ = ["SapwoodRegressor", "SapwoodClassifier"]

EvalSet = Sequence[tuple[Any, Any]]


def _threads(n_jobs: Optional[int]) -> int:
    """joblib's convention to the engine's thread count (0 means every core)."""
    if n_jobs is None or n_jobs == -1:
        return 0
    if n_jobs < 0:
        return max((os.cpu_count() or 1) + 1 + n_jobs, 1)
    return int(n_jobs)


class _SapwoodModel(BaseEstimator):  # type: ignore[misc]
    """Parameters, fitting and prediction shared by the regressor and the classifier."""

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        learning_rate: float = 0.3,
        max_depth: int = 6,
        max_leaves: int = 0,
        grow_policy: str = "depthwise",
        max_bin: int = 256,
        min_data_in_bin: int = 1,
        min_child_weight: float = 1.0,
        min_child_samples: int = 0,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        gamma: float = 0.0,
        max_delta_step: float = 0.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        grad_bits: int = 0,
        max_cat_to_onehot: int = 4,
        max_cat_threshold: int = 32,
        categorical_features: CategoricalSpec = "auto",
        eval_metric: Union[str, Sequence[str], None] = None,
        early_stopping_rounds: Optional[int] = None,
        importance_type: str = "gain",
        random_state: Union[int, np.random.RandomState, None] = None,
        n_jobs: Optional[int] = None,
        device: str = "cpu",
        workers: int = 1,
        verbose: Union[bool, int] = False,
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
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.importance_type = importance_type
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.device = device
        self.workers = workers
        self.verbose = verbose

    # ---- helpers ----------------------------------------------------------------------

    def _engine_params(self) -> dict[str, ParamValue]:
        seed = self.random_state
        if seed is None:
            seed = 0
        elif not isinstance(seed, (int, np.integer)):
            seed = int(check_random_state(seed).randint(np.iinfo(np.int32).max))
        return {
            "num_rounds": self.n_estimators,
            "learning_rate": self.learning_rate,
            "max_depth": self.max_depth,
            "max_leaves": self.max_leaves,
            "grow_policy": self.grow_policy,
            "max_bin": self.max_bin,
            "min_data_in_bin": self.min_data_in_bin,
            "min_child_weight": self.min_child_weight,
            "min_data_in_leaf": self.min_child_samples,
            "lambda": self.reg_lambda,
            "alpha": self.reg_alpha,
            "gamma": self.gamma,
            "max_delta_step": self.max_delta_step,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "grad_bits": self.grad_bits,
            "max_cat_to_onehot": self.max_cat_to_onehot,
            "max_cat_threshold": self.max_cat_threshold,
            "eval_metric": self.eval_metric,
            "seed": int(seed),
            "threads": _threads(self.n_jobs),
            "device": self.device,
            "workers": self.workers,
        }

    def _check_X(self, X: Any, reset: bool) -> Any:
        """Checks feature names and counts the scikit-learn way; DataFrames and Arrow
        tables pass unchanged (their categorical columns survive), other inputs become
        float32/float64 arrays without a copy where possible."""
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
        params: dict[str, ParamValue],
        sample_weight: Any,
        eval_set: Optional[EvalSet],
        eval_sample_weight: Optional[Sequence[Any]],
        encode: Any,
    ) -> None:
        X = self._check_X(X, reset=True)
        if sample_weight is not None:
            sample_weight = column_or_1d(np.asarray(sample_weight, dtype=np.float32))
        dtrain = Dataset(
            X, label=y, weight=sample_weight, categorical_features=self.categorical_features
        )
        evals = []
        for i, (Xe, ye) in enumerate(eval_set or ()):
            we = eval_sample_weight[i] if eval_sample_weight is not None else None
            Xe = self._check_X(Xe, reset=False)
            evals.append(
                (
                    Dataset(
                        Xe,
                        label=encode(column_or_1d(ye)),
                        weight=we,
                        categorical_features=self.categorical_features,
                    ),
                    f"validation_{i}",
                )
            )
        result: EvalsResult = {}
        self._Booster = train(
            params,
            dtrain,
            evals=evals,
            early_stopping_rounds=self.early_stopping_rounds,
            verbose_eval=self.verbose if evals else False,
            evals_result=result,
        )
        self.evals_result_ = result

    def _raw_predict(self, X: Any, output_margin: bool = False) -> npt.NDArray[np.float32]:
        check_is_fitted(self, "_Booster")
        X = self._check_X(X, reset=False)
        booster: Booster = self._Booster
        return booster.predict(X, output_margin=output_margin)

    def _contributions(self, X: Any) -> npt.NDArray[np.float32]:
        """SHAP contributions as LightGBM's ``predict(X, pred_contrib=True)`` lays them
        out: ``(n, (features + 1) * groups)``, each group's bias after its features."""
        check_is_fitted(self, "_Booster")
        X = self._check_X(X, reset=False)
        booster: Booster = self._Booster
        c = booster.predict(X, pred_contribs=True)
        return c.reshape(c.shape[0], -1)

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
        """The best round chosen by early stopping, or None."""
        return self.get_booster().best_iteration

    @property
    def n_estimators_(self) -> int:
        """Rounds trained."""
        return self.get_booster().num_boosted_rounds()

    @property
    def feature_importances_(self) -> npt.NDArray[np.float64]:
        """Importances (``importance_type``) normalised to sum to 1."""
        scores = self.get_booster().feature_importance(self.importance_type)
        total = scores.sum()
        return scores / total if total > 0 else scores

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags


class SapwoodRegressor(RegressorMixin, _SapwoodModel):  # type: ignore[misc]
    """Gradient-boosted trees for regression (squared error), scikit-learn style.

    Parameters follow XGBoost's scikit-learn names; see :func:`sapwood.train` for their
    meaning. ``n_jobs`` is the number of threads (None or -1: every core); ``device`` and
    ``workers`` choose the backend and never change the model.
    """

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Optional[EvalSet] = None,
        eval_sample_weight: Optional[Sequence[Any]] = None,
    ) -> SapwoodRegressor:
        """Trains on ``X``, ``y``; ``eval_set`` is a list of ``(X, y)`` pairs reported
        each round (early stopping watches the last one)."""
        y_arr = _regression_target(y)
        params = self._engine_params()
        params["objective"] = "reg:squarederror"
        self._fit(X, y_arr, params, sample_weight, eval_set, eval_sample_weight, _regression_target)
        return self

    def predict(
        self, X: Any, output_margin: bool = False, pred_contrib: bool = False
    ) -> npt.NDArray[np.float32]:
        """Predicted values; ``pred_contrib`` gives SHAP contributions (LightGBM's layout)."""
        if pred_contrib:
            return self._contributions(X)
        return self._raw_predict(X, output_margin)


def _regression_target(y: Any) -> npt.NDArray[np.float32]:
    # NaN labels are left in: the engine refuses them with LabelError naming the row
    arr = column_or_1d(y, warn=True)
    try:
        return np.asarray(arr, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise LabelError(f"regression labels must be numbers: {e}") from None


class SapwoodClassifier(ClassifierMixin, _SapwoodModel):  # type: ignore[misc]
    """Gradient-boosted trees for binary and multiclass classification, scikit-learn
    style. ``classes_`` may be of any type numpy can sort (strings, ints, bools, ...).

    Parameters follow XGBoost's scikit-learn names; see :class:`SapwoodRegressor`.
    """

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Optional[EvalSet] = None,
        eval_sample_weight: Optional[Sequence[Any]] = None,
    ) -> SapwoodClassifier:
        """Trains on ``X``, ``y``; ``eval_set`` is a list of ``(X, y)`` pairs reported
        each round (early stopping watches the last one)."""
        y_arr = column_or_1d(y, warn=True)
        check_classification_targets(y_arr)
        classes, codes = np.unique(y_arr, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"SapwoodClassifier needs at least two classes in y, found {len(classes)} class"
            )
        self.classes_ = classes
        self.n_classes_ = len(classes)
        params = self._engine_params()
        if self.n_classes_ == 2:
            params["objective"] = "binary:logistic"
        else:
            params["objective"] = "multi:softprob"
            params["num_class"] = self.n_classes_
        self._fit(
            X, codes.astype(np.float32), params, sample_weight, eval_set, eval_sample_weight,
            self._encode,
        )
        return self

    def _encode(self, y: Any) -> npt.NDArray[np.float32]:
        """Class labels to the codes used in training; unseen classes are refused."""
        y = np.asarray(y)
        classes: npt.NDArray[Any] = self.classes_
        index: npt.NDArray[np.intp] = np.clip(np.searchsorted(classes, y), 0, len(classes) - 1)
        unseen = classes[index] != y
        if np.any(unseen):
            row = int(np.argmax(unseen))
            raise LabelError(
                f"label at row {row} is {y[row]}: this class was not in the training labels"
            )
        return index.astype(np.float32)

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        """Class probabilities, one column per class in ``classes_`` order."""
        p = self._raw_predict(X).astype(np.float64)
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p

    def predict(self, X: Any, output_margin: bool = False, pred_contrib: bool = False) -> Any:
        """The most probable class of each row (raw scores with ``output_margin``, SHAP
        contributions in LightGBM's layout with ``pred_contrib``)."""
        if pred_contrib:
            return self._contributions(X)
        if output_margin:
            return self._raw_predict(X, output_margin=True)
        p = self._raw_predict(X)
        index = (p > 0.5).astype(np.intp) if p.ndim == 1 else np.argmax(p, axis=1)
        return self.classes_[index]
