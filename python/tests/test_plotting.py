"""Plots (matplotlib, Agg backend) and Graphviz DOT export."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import sapwood

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture()
def model(regression_data: Any) -> tuple[sapwood.Booster, np.ndarray]:
    X, y = regression_data
    names = ["a", "b", "c", "d", "e", "f"]
    d = sapwood.Dataset(X, label=y, feature_names=names)
    b = sapwood.train({"max_depth": 3, "seed": 0}, d, 5, evals=[(d, "train")], verbose_eval=False)
    return b, X


def _walk(dot: str, row: dict[str, float]) -> int:
    """The leaf a row reaches by following the DOT text's rules."""
    labels = dict(re.findall(r'^\s*(\d+) \[label="([^"]*)"', dot, re.M))
    edges: dict[str, dict[str, str]] = {}
    for src, dst, lab in re.findall(r'^\s*(\d+) -> (\d+) \[label="([^"]*)"', dot, re.M):
        edges.setdefault(src, {})[lab.split(",")[0]] = dst
        if "missing" in lab:
            edges[src]["missing"] = dst
    node = "0"
    while not labels[node].startswith("leaf="):
        name, threshold = labels[node].split(" <= ")
        v = row[name]
        side = "missing" if np.isnan(v) else ("yes" if v <= float(threshold) else "no")
        node = edges[node][side]
    return int(node)


def test_to_graphviz_rules_route_rows_like_the_model(model: Any) -> None:
    booster, X = model
    leaves = booster.predict(X, pred_leaf=True)
    for t in range(booster.num_trees()):
        dot = sapwood.to_graphviz(booster, tree_index=t, precision=9)
        text = dot if isinstance(dot, str) else dot.source
        assert text.startswith("digraph {") and text.rstrip().endswith("}")
        for i in range(0, len(X), 7):
            row = dict(zip(booster.feature_names, X[i].astype(np.float32).tolist()))
            assert _walk(text, row) == leaves[i, t]


def test_to_graphviz_names_features_and_leaf_values(model: Any) -> None:
    booster, _ = model
    text = str(sapwood.to_graphviz(booster, 0, rankdir="LR", show_cover=True))
    assert "rankdir=LR" in text and "leaf=" in text and "cover=" in text
    used = set(re.findall(r'label="(\w+) <=', text))
    assert used and used <= set(booster.feature_names)
    with pytest.raises(sapwood.ParameterError, match="tree_index"):
        sapwood.to_graphviz(booster, tree_index=99)
    with pytest.raises(sapwood.ParameterError, match="rankdir"):
        sapwood.to_graphviz(booster, rankdir="up")


def test_to_graphviz_categorical_split(mixed_frame: Any) -> None:
    frame, y = mixed_frame
    b = sapwood.train({"max_depth": 2, "seed": 0}, sapwood.Dataset(frame, label=y), 3)
    text = "".join(str(sapwood.to_graphviz(b, t)) for t in range(3))
    assert re.search(r"(colour|size) in \{[^}]+\}", text)


def test_plot_importance(model: Any) -> None:
    booster, _ = model
    ax = sapwood.plot_importance(booster, max_num_features=3)
    scores = booster.get_score("weight")
    top = sorted(scores, key=lambda k: scores[k])[-3:]
    assert [t.get_text() for t in ax.get_yticklabels()] == top
    widths = [p.get_width() for p in ax.patches]
    assert widths == [scores[k] for k in top]
    plt.close("all")
    ax = sapwood.plot_importance(booster, importance_type="gain")
    assert ax.get_xlabel() == "gain"
    plt.close("all")


def test_plot_importance_sklearn_estimator(regression_data: Any) -> None:
    pytest.importorskip("sklearn")
    X, y = regression_data
    est = sapwood.SapwoodRegressor(n_estimators=5).fit(X, y)
    ax = sapwood.plot_importance(est)
    assert len(ax.patches) == len(est.get_booster().get_score())
    plt.close("all")
    with pytest.raises(sapwood.ParameterError, match="booster"):
        sapwood.plot_importance(object())


def test_plot_tree_draws_every_node(model: Any) -> None:
    booster, _ = model
    fig, ax = plt.subplots()
    out = sapwood.plot_tree(booster, tree_index=1, ax=ax)
    assert out is ax
    text = str(sapwood.to_graphviz(booster, 1, precision=3))
    n_nodes = len(re.findall(r"^\s*\d+ \[label=", text, re.M))
    boxes = [t for t in ax.texts if t.get_bbox_patch() is not None]
    assert len(boxes) == n_nodes
    fig.canvas.draw()  # renders headless
    plt.close("all")


def test_plot_metric(model: Any) -> None:
    booster, _ = model
    ax = sapwood.plot_metric(booster)
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), booster.evals_result()["train"]["rmse"])
    assert ax.get_ylabel() == "rmse"
    plt.close("all")
    ax = sapwood.plot_metric({"train": {"rmse": [3, 2]}, "valid": {"rmse": [3, 2.5]}})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "valid"]
    plt.close("all")
    with pytest.raises(sapwood.ParameterError, match="metric"):
        sapwood.plot_metric(booster, metric="auc")
    with pytest.raises(sapwood.ModelError, match="evaluation history"):
        sapwood.plot_metric({})
