"""Sapwood: gradient-boosted decision trees with bit-identical models on every backend.

The low-level API mirrors XGBoost and LightGBM::

    import sapwood
    dtrain = sapwood.Dataset(X, label=y)
    booster = sapwood.train({"objective": "binary:logistic", "eta": 0.1}, dtrain, 200)
    p = booster.predict(X_test)

scikit-learn estimators live in :mod:`sapwood.sklearn` (``SapwoodRegressor``,
``SapwoodClassifier``, ``SapwoodRanker``) and are re-exported here when scikit-learn is
installed.

Every error Sapwood raises derives from :class:`SapwoodError`; errors about parameters,
data, labels and models are also ``ValueError``, a missing file is also
``FileNotFoundError``.
"""

from __future__ import annotations

from ._sapwood import (
    BackendError,
    DataError,
    InternalError,
    LabelError,
    ModelError,
    ParameterError,
    SapwoodError,
    SapwoodFileNotFoundError,
    SapwoodIOError,
    SchemaMismatchError,
    __version__,
)
from .core import (
    Booster,
    Callback,
    DataIter,
    Dataset,
    EvalsResult,
    RoundInfo,
    cv,
    early_stopping,
    log_evaluation,
    record_evaluation,
    train,
)
from ._shap import TreeExplainer, shap_model
from .plotting import plot_importance, plot_metric, plot_tree, to_graphviz

__all__ = [
    "BackendError",
    "Booster",
    "Callback",
    "DataError",
    "DataIter",
    "Dataset",
    "EvalsResult",
    "InternalError",
    "LabelError",
    "ModelError",
    "ParameterError",
    "RoundInfo",
    "SapwoodClassifier",
    "TreeExplainer",
    "SapwoodError",
    "SapwoodFileNotFoundError",
    "SapwoodIOError",
    "SapwoodRanker",
    "SapwoodRegressor",
    "SchemaMismatchError",
    "__version__",
    "cv",
    "early_stopping",
    "log_evaluation",
    "plot_importance",
    "plot_metric",
    "plot_tree",
    "record_evaluation",
    "shap_model",
    "to_graphviz",
    "train",
]


def __getattr__(name: str) -> object:
    # The estimators need scikit-learn, an optional dependency: import it on first use.
    if name in ("SapwoodRegressor", "SapwoodClassifier", "SapwoodRanker"):
        from . import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'sapwood' has no attribute {name!r}")
