"""SHAP's own ``TreeExplainer`` on Sapwood models.

SHAP recognises XGBoost, LightGBM and scikit-learn models by their type, and also reads any
tree ensemble given as a dict of arrays. :func:`shap_model` writes a Sapwood model in that
form, and :func:`TreeExplainer` hands it to ``shap.TreeExplainer``, so ``shap_values``,
``expected_value``, ``shap_interaction_values`` and every SHAP plot work as they do for the
peers, and the values equal ``predict(X, pred_contribs=True)``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from ._sapwood import ParameterError
from .core import Booster


def _booster_and_rounds(model: Any, iteration_range: Optional[tuple[int, int]]) -> Any:
    """The booster of ``model`` (a Booster or a fitted estimator) and the rounds to
    explain: ``iteration_range``, else what the model's ``predict`` uses (an estimator's
    best iteration after early stopping, a Booster's every round)."""
    if isinstance(model, Booster):
        booster = model
        default = (0, booster.num_boosted_rounds())
    elif hasattr(model, "get_booster"):
        booster = model.get_booster()
        best = booster.best_iteration
        end = booster.num_boosted_rounds() if best is None else best + 1
        default = (0, end)
    else:
        raise ParameterError(
            f"invalid parameter `model`: {type(model).__name__} is not a sapwood.Booster or "
            "a fitted Sapwood estimator"
        )
    start, end = iteration_range if iteration_range is not None else default
    if not (0 <= start < end <= booster.num_boosted_rounds()):
        raise ParameterError(
            f"invalid parameter `iteration_range`: ({start}, {end}) is not a range of the "
            f"model's {booster.num_boosted_rounds()} rounds"
        )
    return booster, start, end


def shap_model(model: Any, iteration_range: Optional[tuple[int, int]] = None) -> dict[str, Any]:
    """``model`` (a :class:`sapwood.Booster` or a fitted estimator) as the dict of arrays
    that ``shap.TreeExplainer`` reads: one entry per tree with its children, the feature and
    ``<=`` threshold of each split, where missing values go, each node's cover and value
    (a split's value is its leaves' cover-weighted mean); a multiclass tree's values have a
    column per class, zero but for its own. The base score is added to each class's first
    tree, so ``expected_value`` includes it. Models with categorical splits are refused:
    SHAP's tree format has no category sets.

    Parameters
    ----------
    model : Booster or fitted SapwoodRegressor, SapwoodClassifier or SapwoodRanker
        The model to explain.
    iteration_range : (int, int), optional
        Rounds ``[start, end)``; by default what ``predict`` uses.

    Returns
    -------
    dict
        ``{"trees": [...], "base_offset": 0.0, "input_dtype": float32, ...}``.
    """
    booster, start, end = _booster_and_rounds(model, iteration_range)
    k = max(int(booster._model.groups), 1)
    base = json.loads(booster.to_json())["base_margin"]
    nodes = booster._model.tree_nodes()
    tree_of = np.asarray(nodes["tree"], dtype=np.int64)
    node_of = np.asarray(nodes["node"], dtype=np.int64)
    # every node once, by (tree, node): each tree is then one slice
    by_tree = np.lexsort((node_of, tree_of))
    bounds = np.searchsorted(tree_of[by_tree], np.arange(tree_of.max(initial=-1) + 2))
    first, last = start * k, end * k
    trees = []
    for t in range(first, last):
        order = by_tree[bounds[t]:bounds[t + 1]]
        cats = [nodes["categories"][i] for i in order]
        if any(c is not None for c in cats):
            raise ParameterError(
                f"invalid parameter `model`: tree {t} has a categorical split, which SHAP's "
                "tree format cannot hold; use predict(X, pred_contribs=True), which explains "
                "categorical splits too"
            )
        left = np.asarray([nodes["left"][i] for i in order], dtype=np.int32)
        right = np.asarray([nodes["right"][i] for i in order], dtype=np.int32)
        default_left = np.asarray([nodes["default_left"][i] for i in order], dtype=bool)
        feature = np.asarray([nodes["feature"][i] for i in order], dtype=np.int32)
        threshold = np.asarray([nodes["threshold"][i] for i in order], dtype=np.float64)
        cover = np.asarray([nodes["cover"][i] for i in order], dtype=np.float64)
        leaf_value = np.asarray([nodes["value"][i] for i in order], dtype=np.float64)
        if t < first + k:
            leaf_value = leaf_value + float(base[t % k])
        value = leaf_value.copy()
        # children have higher ids than their parent: fill the splits from the bottom up
        for n in range(len(order) - 1, -1, -1):
            if left[n] >= 0:
                w = cover[left[n]] + cover[right[n]]
                value[n] = (
                    (cover[left[n]] * value[left[n]] + cover[right[n]] * value[right[n]]) / w
                    if w > 0
                    else 0.5 * (value[left[n]] + value[right[n]])
                )
        values = np.zeros((len(order), k))
        values[:, t % k] = value
        is_leaf = left < 0
        trees.append(
            {
                "children_left": np.where(is_leaf, -1, left).astype(np.int32),
                "children_right": np.where(is_leaf, -1, right).astype(np.int32),
                "children_default": np.where(
                    is_leaf, -1, np.where(default_left, left, right)
                ).astype(np.int32),
                "feature": np.where(is_leaf, -2, feature).astype(np.int32),
                "threshold": np.where(is_leaf, -2.0, threshold),
                "value": values,
                "node_sample_weight": cover,
            }
        )
    return {
        "trees": trees,
        "base_offset": 0.0,
        "tree_output": "raw_value",
        "objective": None,
        # inputs are compared as float32, as Sapwood bins them
        "input_dtype": np.float32,
        "internal_dtype": np.float64,
    }


def TreeExplainer(  # noqa: N802 (SHAP's name, so scripts read the same)
    model: Any, data: Any = None, *, iteration_range: Optional[tuple[int, int]] = None,
    **kwargs: Any,
) -> Any:
    """``shap.TreeExplainer`` of a Sapwood model, in one line: ``explainer =
    sapwood.TreeExplainer(model)``, then ``explainer.shap_values(X)``,
    ``explainer.expected_value``, ``explainer.shap_interaction_values(X)``,
    ``explainer(X)`` and SHAP's plots, as for XGBoost and LightGBM models. Needs the
    ``shap`` package.

    Parameters
    ----------
    model : Booster or fitted SapwoodRegressor, SapwoodClassifier or SapwoodRanker
        The model to explain (see :func:`shap_model`).
    data : array-like, optional
        Background data, passed to ``shap.TreeExplainer``.
    iteration_range : (int, int), optional
        Rounds ``[start, end)``; by default what ``predict`` uses.
    **kwargs
        Further arguments of ``shap.TreeExplainer`` (``feature_perturbation``, ...).

    Returns
    -------
    shap.TreeExplainer
        SHAP's explainer; its values are in margin units (log-odds for classifiers).
    """
    try:
        import shap  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "sapwood.TreeExplainer needs the shap package (pip install shap)"
        ) from None
    booster, _, _ = _booster_and_rounds(model, iteration_range)
    explainer = shap.TreeExplainer(shap_model(model, iteration_range), data, **kwargs)
    expected = np.asarray(explainer.expected_value)
    if expected.size == 1:
        # one output: a number, as SHAP gives for XGBoost's and LightGBM's models
        explainer.expected_value = float(expected.reshape(()))
    if getattr(explainer, "feature_names", None) is None:
        try:
            explainer.feature_names = list(booster.feature_names)
        except AttributeError:
            pass
    return explainer
