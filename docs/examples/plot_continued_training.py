"""
Early stopping and continued training
=====================================

Two ways to decide how many rounds a model gets:

* **early stopping** trains until the score of a validation set has not improved for a
  number of rounds, and remembers the best round;
* **continued training** adds rounds to an existing model (``xgb_model=`` in
  :func:`sapwood.train` and ``fit``, or LightGBM's name ``init_model=``), from a
  :class:`~sapwood.Booster`, a fitted estimator or a model file.

Continuing is exact: with the same data and parameters, 50 rounds continued by 50 give
the very model that 100 rounds in one go give, byte for byte, row sampling included.
"""

# %%
# Data
# ----
# Friedman's regression problem, with noise, split into training and validation rows.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from sklearn.datasets import make_friedman1
from sklearn.model_selection import train_test_split

import sapwood
from sapwood import SapwoodRegressor

X, y = make_friedman1(n_samples=4000, noise=1.0, random_state=0)
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.25, random_state=0)

# %%
# Early stopping
# --------------
# ``early_stopping_rounds`` watches the last metric of the last evaluation set. The
# estimator keeps every round trained and predicts with the best one by default.
model = SapwoodRegressor(
    n_estimators=1000, learning_rate=0.1, max_depth=4, subsample=0.8,
    early_stopping_rounds=20, random_state=3, n_jobs=2,
)
model.fit(X_train, y_train, eval_set=[(X_train, y_train), (X_valid, y_valid)],
          eval_names=["train", "valid"])
print(f"stopped after {model.n_estimators_} rounds; best round {model.best_iteration} "
      f"with validation RMSE {model.best_score:.4f}")

history = model.evals_result()
fig, ax = plt.subplots(figsize=(6.5, 4))
for name in ("train", "valid"):
    ax.plot(history[name]["rmse"], label=name)
ax.axvline(model.best_iteration, color="k", ls="--", lw=0.8, label="best round")
ax.set_xlabel("boosting round")
ax.set_ylabel("RMSE")
ax.set_title("Early stopping on the validation set")
ax.legend()
fig.tight_layout()

# %%
# Continued training, byte for byte
# ---------------------------------
# The low-level API: 50 rounds, saved to a file, then 50 more from that file. The
# result is compared with 100 rounds trained at once, as saved model files.
params = {"objective": "reg:squarederror", "learning_rate": 0.1, "max_depth": 4,
          "subsample": 0.8, "seed": 3, "nthread": 2}
dtrain = sapwood.Dataset(X_train, label=y_train)
dvalid = sapwood.Dataset(X_valid, label=y_valid)
evals = [(dtrain, "train"), (dvalid, "valid")]

first_part, second_part = {}, {}
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    first = sapwood.train(params, dtrain, 50, evals=evals, evals_result=first_part,
                          verbose_eval=False)
    first.save_model(tmp / "first.json")
    # 50 more rounds on top of the saved model
    continued = sapwood.train(params, dtrain, 50, evals=evals, evals_result=second_part,
                              verbose_eval=False, xgb_model=tmp / "first.json")
    continued.save_model(tmp / "continued.json")
    at_once = sapwood.train(params, dtrain, 100, verbose_eval=False)
    at_once.save_model(tmp / "at_once.json")
    same = (tmp / "continued.json").read_bytes() == (tmp / "at_once.json").read_bytes()
print(f"rounds: {continued.num_boosted_rounds()}; identical files: {same}")

# %%
# The continued run reports its own rounds: its history starts where the first left off.
fig, ax = plt.subplots(figsize=(6.5, 4))
for name, colour in (("train", "tab:blue"), ("valid", "tab:orange")):
    ax.plot(range(50), first_part[name]["rmse"], color=colour, label=f"{name}, first 50")
    ax.plot(range(50, 100), second_part[name]["rmse"], color=colour, ls="--",
            label=f"{name}, continued")
ax.axvline(49.5, color="0.5", lw=0.8)
ax.set_xlabel("boosting round")
ax.set_ylabel("RMSE")
ax.set_title("Training continued from a saved model")
ax.legend()
fig.tight_layout()

# %%
# Continuing an estimator
# -----------------------
# ``fit(..., xgb_model=previous)`` adds ``n_estimators`` rounds to a fitted estimator.
# Here the early-stopped model's best rounds are continued by 30 rounds at a smaller
# learning rate (continuing may change the learning rate, not the objective or features).
best = model.get_booster()[: model.best_iteration + 1]
finer = SapwoodRegressor(n_estimators=30, learning_rate=0.02, max_depth=4, n_jobs=2)
finer.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], xgb_model=best)
print(f"{finer.n_estimators_} rounds; validation RMSE {model.best_score:.4f} -> "
      f"{finer.evals_result()['validation_0']['rmse'][-1]:.4f}")
plt.show()
