"""
Training on a Dask cluster
==========================

:mod:`sapwood.dask` trains where the data are: every Dask worker holding partitions of
the training set becomes one rank of a training job, histograms are summed across ranks,
and the result is a plain :class:`~sapwood.Booster`. Because row sampling is keyed by the
global row index and histograms are integer sums, the model is **the one single-process
training gives for the same rows in partition order, byte for byte**, whatever the number
of workers or partitions.

This example starts a small local cluster (two workers in this process, so that it runs
anywhere); on a real cluster, connect a ``Client`` to its scheduler instead.
"""

# %%
# A local cluster and a dask DataFrame
# ------------------------------------
import tempfile
from pathlib import Path

import dask.dataframe as dd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster
from sklearn.datasets import make_classification

import sapwood
import sapwood.dask
from sapwood.dask import DaskDataset, DaskSapwoodClassifier
from sapwood import SapwoodClassifier

X, y = make_classification(n_samples=20000, n_features=12, n_informative=6, random_state=0)
frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(y=y)

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address=":0", silence_logs=40)
client = Client(cluster)
ddf = dd.from_pandas(frame, npartitions=4)

# %%
# Train with :func:`sapwood.dask.train`
# -------------------------------------
# A :class:`~sapwood.dask.DaskDataset` persists the partitions on the workers; they are
# never gathered to the client. ``train`` returns the booster and the evaluation history.
params = {"objective": "binary:logistic", "max_depth": 4, "learning_rate": 0.3,
          "subsample": 0.8, "colsample_bytree": 0.8, "seed": 7}
dtrain = DaskDataset(client, ddf.drop(columns="y"), ddf["y"])
print(dtrain)
output = sapwood.dask.train(client, params, dtrain, num_boost_round=40, verbose_eval=False)
distributed_booster = output["booster"]
print(f"bytes exchanged between the ranks: {distributed_booster.comm_stats['bytes_sent']}")

# %%
# The same model as single-process training
# -----------------------------------------
# The same rows, in partition order, trained by :func:`sapwood.train`; both models are
# saved and their files compared.
local_booster = sapwood.train(
    params, sapwood.Dataset(frame.drop(columns="y"), label=frame["y"]), 40,
    verbose_eval=False,
)
with tempfile.TemporaryDirectory() as tmp:
    distributed_booster.save_model(Path(tmp) / "dask.json")
    local_booster.save_model(Path(tmp) / "local.json")
    identical = (Path(tmp) / "dask.json").read_bytes() == (Path(tmp) / "local.json").read_bytes()
print(f"model files identical: {identical}")

# %%
# The scikit-learn estimators
# ---------------------------
# :class:`~sapwood.dask.DaskSapwoodClassifier` takes dask collections in ``fit`` and
# returns dask collections from ``predict_proba``; its ``client`` is set before fitting.
dask_model = DaskSapwoodClassifier(n_estimators=40, max_depth=4, subsample=0.8, random_state=1)
dask_model.client = client
dask_model.fit(ddf.drop(columns="y"), ddf["y"])
proba_dask = dask_model.predict_proba(ddf.drop(columns="y")).compute().to_numpy()[:, 1]

local_model = SapwoodClassifier(n_estimators=40, max_depth=4, subsample=0.8, random_state=1)
local_model.fit(frame.drop(columns="y"), frame["y"])
proba_local = local_model.predict_proba(frame.drop(columns="y"))[:, 1]
print(f"largest difference of the probabilities: {np.max(np.abs(proba_dask - proba_local))}")

client.close()
cluster.close()

# %%
# Feature importance and predictions
# ----------------------------------
# The two boosters' gains match to the last digit, as do their predictions.
gain_dask = distributed_booster.get_score(importance_type="total_gain")
gain_local = local_booster.get_score(importance_type="total_gain")
names = sorted(gain_local, key=gain_local.get)
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
pos = np.arange(len(names))
axes[0].barh(pos - 0.2, [gain_local[n] for n in names], height=0.4, label="sapwood.train")
axes[0].barh(pos + 0.2, [gain_dask[n] for n in names], height=0.4, label="sapwood.dask.train")
axes[0].set_yticks(pos)
axes[0].set_yticklabels(names)
axes[0].set_xlabel("total gain")
axes[0].set_title("Feature importance")
axes[0].legend()
axes[1].scatter(proba_local, proba_dask, s=2, alpha=0.3)
axes[1].plot([0, 1], [0, 1], color="k", lw=0.8)
axes[1].set_xlabel("probability, SapwoodClassifier")
axes[1].set_ylabel("probability, DaskSapwoodClassifier")
axes[1].set_title("Predictions of the two estimators")
fig.tight_layout()
plt.show()
