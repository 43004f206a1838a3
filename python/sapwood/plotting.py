"""Plots of a model, as XGBoost and LightGBM offer them: feature importance, one tree,
and the evaluation history. Needs matplotlib (``pip install sapwood[plot]``);
:func:`to_graphviz` needs nothing and returns DOT text.

:func:`plot_tree` draws the tree with matplotlib itself instead of calling Graphviz's
``dot`` program, so it works wherever matplotlib does (headless CI included); for a
Graphviz rendering, pass :func:`to_graphviz`'s output to Graphviz.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Union

from ._sapwood import ModelError, ParameterError
from .core import Booster, EvalsResult

__all__ = ["plot_importance", "plot_metric", "plot_tree", "to_graphviz"]


def _booster(model: Any) -> Booster:
    """The Booster of a Booster or a fitted scikit-learn estimator."""
    if isinstance(model, Booster):
        return model
    if hasattr(model, "get_booster"):
        booster = model.get_booster()
        if isinstance(booster, Booster):
            return booster
    raise ParameterError(
        f"invalid parameter `booster`: expected a sapwood.Booster or a fitted Sapwood "
        f"estimator, got {type(model).__name__}"
    )


def _axes(ax: Any, figsize: Optional[tuple[float, float]]) -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install 'sapwood[plot]'"
        ) from None
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _fmt(value: float, precision: int) -> str:
    return f"{value:.{precision}g}"


class _Node:
    """One node of a tree in values: a split (``rule`` and children) or a leaf."""

    def __init__(self, index: int, rule: Optional[str], missing_left: bool, value: float,
                 cover: float, left: int, right: int) -> None:
        self.index, self.rule, self.missing_left = index, rule, missing_left
        self.value, self.cover, self.left, self.right = value, cover, left, right


def _tree_nodes(booster: Booster, tree_index: int, precision: int) -> list[_Node]:
    """The nodes of tree ``tree_index`` with their rules written in feature names and
    values, read from the model JSON (split bins index the feature's thresholds)."""
    model = json.loads(booster.to_json())
    trees = model["trees"]
    if not 0 <= tree_index < len(trees):
        raise ParameterError(
            f"invalid parameter `tree_index`: {tree_index} is out of range for a model "
            f"with {len(trees)} trees"
        )
    tree, features = trees[tree_index], model["features"]
    left_bins = {int(node): set(bins) for node, bins in tree.get("categories", [])}
    nodes = []
    for i, feature in enumerate(tree["feature"]):
        rule: Optional[str] = None
        if tree["left"][i] >= 0:
            f = features[feature]
            if i in left_bins:
                levels = f.get("levels", [])
                bins = f.get("level_bins", range(1, len(levels) + 1))
                chosen = [str(lv) for lv, b in zip(levels, bins) if b in left_bins[i]]
                rule = f"{f['name']} in {{{', '.join(chosen)}}}"
            else:
                thresholds = f.get("thresholds", [])
                b = int(tree["split_bin"][i])
                # bin b holds the values up to the (b-1)-th threshold: the engine's rule
                threshold = thresholds[b - 1] if 1 <= b <= len(thresholds) else float("inf")
                rule = f"{f['name']} <= {_fmt(threshold, precision)}"
        nodes.append(
            _Node(i, rule, bool(tree["default_left"][i]), float(tree["value"][i]),
                  float(tree["cover"][i]), int(tree["left"][i]), int(tree["right"][i]))
        )
    if not nodes:
        raise ModelError(f"invalid model: tree {tree_index} has no nodes")
    return nodes


def to_graphviz(
    booster: Any,
    tree_index: int = 0,
    rankdir: str = "TB",
    precision: int = 4,
    show_cover: bool = False,
) -> Any:
    """Tree ``tree_index`` as Graphviz DOT source: split nodes read ``name <= threshold``
    (or ``name in {levels}``), edges ``yes``/``no`` with ``missing`` on the side missing
    values take, leaves ``leaf=value``. Returns a ``graphviz.Source`` when the
    ``graphviz`` Python package is installed, else the DOT text (a ``str``)."""
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ParameterError(
            f"invalid parameter `rankdir`: `{rankdir}` is not TB, LR, BT or RL"
        )
    nodes = _tree_nodes(_booster(booster), tree_index, precision)
    lines = [
        "digraph {",
        f"    graph [rankdir={rankdir}]",
        "    node [fontname=Helvetica]",
    ]
    for n in nodes:
        cover = f"\\ncover={_fmt(n.cover, precision)}" if show_cover else ""
        if n.rule is None:
            label = f"leaf={_fmt(n.value, precision)}{cover}"
            lines.append(f'    {n.index} [label="{_escape(label)}" shape=box]')
            continue
        lines.append(f'    {n.index} [label="{_escape(n.rule)}{cover}" shape=ellipse]')
        yes, no = ("yes, missing", "no") if n.missing_left else ("yes", "no, missing")
        lines.append(f'    {n.index} -> {n.left} [label="{yes}" color="#0000FF"]')
        lines.append(f'    {n.index} -> {n.right} [label="{no}" color="#FF0000"]')
    lines.append("}")
    source = "\n".join(lines) + "\n"
    try:
        import graphviz
    except ImportError:
        return source
    return graphviz.Source(source)


def _escape(text: str) -> str:
    # DOT labels are double-quoted strings; the "\n" line breaks above are kept
    return text.replace('"', '\\"')


def plot_tree(
    booster: Any,
    tree_index: int = 0,
    ax: Any = None,
    precision: int = 3,
    figsize: Optional[tuple[float, float]] = None,
    fontsize: float = 8.0,
) -> Any:
    """Draws tree ``tree_index`` on matplotlib axes (new ones unless ``ax``) and returns
    them. The layout is computed here, not by Graphviz: leaves are spaced evenly left to
    right, each split sits above the middle of its children."""
    nodes = _tree_nodes(_booster(booster), tree_index, precision)
    ax = _axes(ax, figsize)
    x: dict[int, float] = {}
    depth: dict[int, int] = {}
    next_leaf = [0.0]

    def place(i: int, d: int) -> None:
        # the recursion is as deep as the tree, which max_depth bounds
        depth[i] = d
        n = nodes[i]
        if n.rule is None:
            x[i] = next_leaf[0]
            next_leaf[0] += 1.0
            return
        place(n.left, d + 1)
        place(n.right, d + 1)
        x[i] = (x[n.left] + x[n.right]) / 2

    place(0, 0)
    for i in x:
        n = nodes[i]
        if n.rule is not None:
            for child, word, missing in ((n.left, "yes", n.missing_left),
                                         (n.right, "no", not n.missing_left)):
                ax.plot([x[i], x[child]], [-depth[i], -depth[child]], color="0.5", lw=0.8,
                        zorder=1)
                ax.text((x[i] + x[child]) / 2, -(depth[i] + depth[child]) / 2,
                        word + (", missing" if missing else ""), fontsize=fontsize * 0.85,
                        ha="center", va="center", color="0.3", zorder=2)
        label = n.rule if n.rule is not None else f"leaf={_fmt(n.value, precision)}"
        box = {"boxstyle": "round" if n.rule else "square", "fc": "white", "ec": "0.2"}
        ax.text(x[i], -depth[i], label, fontsize=fontsize, ha="center", va="center",
                bbox=box, zorder=3)
    ax.set_xlim(-0.75, max(next_leaf[0] - 0.25, 0.75))
    ax.set_ylim(-max(depth.values()) - 0.5, 0.5)
    ax.set_axis_off()
    return ax


def plot_importance(
    booster: Any,
    ax: Any = None,
    importance_type: str = "weight",
    max_num_features: Optional[int] = None,
    title: str = "Feature importance",
    xlabel: Optional[str] = None,
    ylabel: str = "Features",
    show_values: bool = True,
    precision: int = 3,
    figsize: Optional[tuple[float, float]] = None,
) -> Any:
    """Horizontal bars of feature importance, largest on top, as ``xgboost.plot_importance``:
    ``importance_type`` is ``weight`` (splits; LightGBM's ``split``), ``gain``,
    ``total_gain``, ``cover`` or ``total_cover``. Unused features are left out."""
    scores = _booster(booster).get_score(importance_type=importance_type)
    if not scores:
        raise ModelError("the model has no splits: there is no importance to plot")
    if max_num_features is not None and max_num_features < 1:
        raise ParameterError(
            f"invalid parameter `max_num_features`: {max_num_features} is not positive"
        )
    items = sorted(scores.items(), key=lambda kv: kv[1])
    if max_num_features is not None:
        items = items[-max_num_features:]
    names, values = [k for k, _ in items], [v for _, v in items]
    ax = _axes(ax, figsize)
    ax.barh(range(len(values)), values, align="center", height=0.2)
    if show_values:
        for i, v in enumerate(values):
            ax.text(v, i, " " + _fmt(v, precision), va="center")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.set_title(title)
    ax.set_xlabel(xlabel if xlabel is not None else importance_type)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def plot_metric(
    booster: Union[EvalsResult, Any],
    metric: Optional[str] = None,
    dataset_names: Optional[list[str]] = None,
    ax: Any = None,
    title: str = "Metric during training",
    xlabel: str = "Iterations",
    ylabel: Optional[str] = None,
    figsize: Optional[tuple[float, float]] = None,
) -> Any:
    """One line per evaluation set of ``metric`` (default: the first one recorded) over
    the rounds, as ``lightgbm.plot_metric``. ``booster`` is an evals_result dict
    (``{dataset: {metric: values}}``), a Booster, or a fitted estimator."""
    if isinstance(booster, dict):
        history: EvalsResult = booster
    elif hasattr(booster, "evals_result_"):
        history = booster.evals_result_
    else:
        history = _booster(booster).evals_result()
    if not history:
        raise ModelError("no evaluation history to plot: train with `evals` (or eval_set)")
    names = dataset_names if dataset_names is not None else list(history)
    unknown = [n for n in names if n not in history]
    if unknown:
        raise ParameterError(
            f"invalid parameter `dataset_names`: no evaluation set {unknown}; "
            f"recorded: {list(history)}"
        )
    if metric is None:
        metric = next(iter(history[names[0]]))
    ax = _axes(ax, figsize)
    for name in names:
        if metric not in history[name]:
            raise ParameterError(
                f"invalid parameter `metric`: `{metric}` was not recorded for `{name}`; "
                f"recorded: {list(history[name])}"
            )
        values = history[name][metric]
        ax.plot(range(len(values)), values, label=name)
    ax.legend(loc="best")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel if ylabel is not None else metric)
    ax.grid(True, alpha=0.3)
    return ax
