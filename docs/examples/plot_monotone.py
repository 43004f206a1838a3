"""
Monotone constraints
====================

Domain knowledge often says which way a feature acts: a larger house is not cheaper, all
else equal. A model trained on noisy data does not know this and its partial dependence
wiggles. ``monotone_constraints`` enforces it: ``1`` makes the prediction non-decreasing in
a feature, ``-1`` non-increasing, ``0`` leaves it free. It is given by feature name (a dict,
for named columns) or by position (a tuple, one entry per feature).

Below, the same regressor is trained with and without constraints, and the partial
dependence of both constrained features is compared.
"""

# %%
# Noisy data with a known direction
# ---------------------------------
# The price rises with ``size`` and falls with ``age``; ``rooms`` is correlated with
# ``size`` and the noise is large, so an unconstrained model picks up spurious dips.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.inspection import PartialDependenceDisplay
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

from sapwood import SapwoodRegressor

rng = np.random.default_rng(1)
n = 1500
size = rng.uniform(40, 200, n)
age = rng.uniform(0, 80, n)
rooms = np.round(size / 30 + rng.normal(0, 1, n)).clip(1, None)
price = 1.5 * size + 40 * np.log1p(size) - 0.8 * age + 5 * rooms + rng.normal(0, 40, n)
X = pd.DataFrame({"size": size, "age": age, "rooms": rooms})
X_train, X_test, y_train, y_test = train_test_split(X, price, test_size=0.3, random_state=0)

# %%
# With and without constraints
# ----------------------------
# ``monotone_constraints`` is an engine parameter, given by keyword.
common = dict(n_estimators=200, learning_rate=0.1, max_depth=5, n_jobs=2)
free = SapwoodRegressor(**common).fit(X_train, y_train)
constrained = SapwoodRegressor(monotone_constraints={"size": 1, "age": -1}, **common)
constrained.fit(X_train, y_train)

for name, model in (("unconstrained", free), ("constrained", constrained)):
    rmse = mean_squared_error(y_test, model.predict(X_test)) ** 0.5
    print(f"{name:14s} test RMSE {rmse:.2f}")

# %%
# Checking the constraint
# -----------------------
# Sweep ``size`` over a grid for every test row, the other features held: the
# constrained model never goes down.
grid = np.linspace(40, 200, 60)
for name, model in (("unconstrained", free), ("constrained", constrained)):
    drops = 0
    for _, row in X_test.head(100).iterrows():
        sweep = pd.DataFrame({"size": grid, "age": row["age"], "rooms": row["rooms"]})
        drops += int(np.sum(np.diff(model.predict(sweep)) < 0))
    print(f"{name:14s} decreasing steps along size: {drops}")

# %%
# Partial dependence
# ------------------
# scikit-learn's :class:`~sklearn.inspection.PartialDependenceDisplay` averages the
# predictions over the data with one feature set to each grid value; the thin lines are
# single rows (ICE curves).
fig, axes = plt.subplots(2, 2, figsize=(9, 7), sharey="col")
for row, (name, model) in enumerate((("unconstrained", free), ("constrained", constrained))):
    PartialDependenceDisplay.from_estimator(
        model, X_test, ["size", "age"], kind="both", subsample=40, random_state=0,
        ax=axes[row], ice_lines_kw={"alpha": 0.15}, pd_line_kw={"color": "tab:red"},
    )
    axes[row, 0].set_ylabel(f"predicted price\n({name})")
fig.suptitle("Partial dependence with and without monotone constraints")
fig.tight_layout()
plt.show()
