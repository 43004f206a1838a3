"""
Categorical features and missing values
=======================================

Sapwood reads pandas ``category`` (and string) columns as categorical features and
splits them by sets of levels (``island in {Dream}``), with no one-hot encoding; NaN in a
numeric column and a missing category are missing values, which every split sends to the
side learned in training. Class labels may be strings.

The Palmer penguins, bundled in the repository's ``datasets`` folder, have all three: two
categorical columns (``island``, ``sex``), a few missing measurements, and the species as
strings. :func:`sapwood.plot_tree` and :func:`sapwood.plot_importance` show what the model
learned.
"""

# %%
# Load the penguins
# -----------------
# The examples run from the documentation's folder; the bundled data sit in the
# repository's ``datasets`` folder above it. Parquet keeps the ``category`` dtypes.
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.metrics import accuracy_score

import sapwood
from sapwood import SapwoodClassifier


def find_datasets():
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "datasets" / "penguins").is_dir():
            return folder / "datasets"
    raise FileNotFoundError("the repository's datasets folder was not found")


root = find_datasets() / "penguins"
train = pd.read_parquet(root / "train.parquet")
test = pd.read_parquet(root / "test.parquet")
X_train, y_train = train.drop(columns="species"), train["species"]
X_test, y_test = test.drop(columns="species"), test["species"]
print(X_train.dtypes)
print("missing values per column:", X_train.isna().sum().to_dict())

# %%
# Train on the frame as it is
# ---------------------------
# ``categorical_features="auto"`` (the default) takes the ``category`` columns as
# categorical.
model = SapwoodClassifier(n_estimators=30, learning_rate=0.3, max_depth=3, n_jobs=2)
model.fit(X_train, y_train)
booster = model.get_booster()
print("classes:", list(model.classes_))
print(f"test accuracy: {accuracy_score(y_test, model.predict(X_test)):.3f}")

# %%
# One tree
# --------
# A multiclass model grows one tree per class per round: tree ``1`` is the first
# round's tree of the second class, Chinstrap. Its splits read ``feature <= threshold``
# or ``feature in {levels}``; ``missing`` marks the side that missing values take; leaves
# hold raw-score contributions.
fig, ax = plt.subplots(figsize=(10, 4.5))
sapwood.plot_tree(booster, tree_index=1, ax=ax, fontsize=8)
ax.set_title("Round 0, class Chinstrap")
fig.tight_layout()

# %%
# Feature importance
# ------------------
# ``total_gain`` adds up the loss reduction of every split on a feature; ``weight``
# counts the splits.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
sapwood.plot_importance(booster, importance_type="total_gain", ax=axes[0],
                        title="Total gain", precision=3)
sapwood.plot_importance(booster, importance_type="weight", ax=axes[1],
                        title="Number of splits", ylabel="")
fig.tight_layout()
plt.show()
