"""
Cross-validation and the number of rounds
=========================================

:func:`sapwood.cv` trains one booster per fold and reports, after every round, the mean
and standard deviation of each metric over the training and test folds, as
``xgboost.cv`` does. With ``early_stopping_rounds`` the lists end at the best round, so
their length is the number of rounds to train the final model with.

The data are the 1988 Chilean plebiscite survey, bundled in the repository's
``datasets`` folder: predict a *yes* vote from region, age, sex, education, income and an
attitude score. Three of the columns are pandas categories, used as they are.
"""

# %%
# Load the survey
# ---------------
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

import sapwood


def find_datasets():
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "datasets" / "chile").is_dir():
            return folder / "datasets"
    raise FileNotFoundError("the repository's datasets folder was not found")


root = find_datasets() / "chile"
train = pd.read_parquet(root / "train.parquet")
test = pd.read_parquet(root / "test.parquet")
dtrain = sapwood.Dataset(train.drop(columns="vote"), label=train["vote"])
print(f"{dtrain.num_row()} rows, features {dtrain.feature_names}")

# %%
# Five-fold cross-validation at two learning rates
# ------------------------------------------------
# Stratified folds keep the share of *yes* votes the same in each fold. Training stops
# once the mean test log-loss has not improved for 20 rounds.
results = {}
for eta in (0.3, 0.05):
    params = {"objective": "binary:logistic", "learning_rate": eta, "max_depth": 3,
              "eval_metric": "logloss", "nthread": 2}
    results[eta] = sapwood.cv(params, dtrain, num_boost_round=400, nfold=5, stratified=True,
                              early_stopping_rounds=20, seed=0, as_pandas=True)
    best = results[eta]["test-logloss-mean"]
    print(f"learning rate {eta}: best round {len(best) - 1}, "
          f"test log-loss {best.iloc[-1]:.4f} +/- {results[eta]['test-logloss-std'].iloc[-1]:.4f}")

# %%
# The curves, with one standard deviation over the folds
# ------------------------------------------------------
fig, ax = plt.subplots(figsize=(7, 4.2))
for eta, frame in results.items():
    rounds = np.arange(len(frame))
    for part, style in (("train", ":"), ("test", "-")):
        mean, std = frame[f"{part}-logloss-mean"], frame[f"{part}-logloss-std"]
        line, = ax.plot(rounds, mean, style, label=f"{part}, learning rate {eta}")
        ax.fill_between(rounds, mean - std, mean + std, color=line.get_color(), alpha=0.2)
ax.set_xlabel("boosting round")
ax.set_ylabel("log-loss (mean over 5 folds)")
ax.set_title("Cross-validated log-loss")
ax.legend()
fig.tight_layout()

# %%
# The final model
# ---------------
# Trained on all the training rows for the rounds cross-validation chose, then checked
# once on the held-out test rows.
rounds = len(results[0.05])
final = sapwood.train({"objective": "binary:logistic", "learning_rate": 0.05, "max_depth": 3,
                       "nthread": 2}, dtrain, rounds, verbose_eval=False)
p = final.predict(test.drop(columns="vote"))
print(f"{rounds} rounds; test AUC {roc_auc_score(test['vote'], p):.4f}")
plt.show()
