"""
Learning to rank with LambdaMART
================================

:class:`~sapwood.SapwoodRanker` trains LambdaMART (objective ``rank:ndcg``): the rows
come in queries, each row is a document with a graded relevance label (0 to 4 here), and
the model learns a score whose order within each query puts relevant documents first.
Scores of different queries are never compared.

The data are LightGBM's LambdaRank example, bundled in the repository's ``datasets``
folder: 201 training queries and 50 test queries. The queries are given by a ``qid``
column; a query's rows must be contiguous.
"""

# %%
# Load the queries
# ----------------
# The examples run from the documentation's folder; the bundled data sit in the
# repository's ``datasets`` folder above it.
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import sapwood
from sapwood import SapwoodRanker


def find_datasets():
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "datasets" / "lambdarank").is_dir():
            return folder / "datasets"
    raise FileNotFoundError("the repository's datasets folder was not found")


root = find_datasets() / "lambdarank"
train = pd.read_parquet(root / "train.parquet")
test = pd.read_parquet(root / "test.parquet")
features = [c for c in train.columns if c not in ("relevance", "qid")]
print(f"train: {len(train)} rows in {train.qid.nunique()} queries; "
      f"test: {len(test)} rows in {test.qid.nunique()} queries")

# %%
# Train with NDCG@10 watched on both sets
# ---------------------------------------
# ``qid`` gives the query of each training row and ``eval_qid`` those of each evaluation
# set; ``eval_metric="ndcg@10"`` reports NDCG of the top ten documents of each query,
# averaged over queries.
ranker = SapwoodRanker(n_estimators=60, learning_rate=0.1, max_depth=6, n_jobs=2)
ranker.fit(
    train[features], train["relevance"], qid=train["qid"],
    eval_set=[(train[features], train["relevance"]), (test[features], test["relevance"])],
    eval_qid=[train["qid"], test["qid"]],
    eval_names=["train", "test"],
    eval_metric="ndcg@10",
)
history = ranker.evals_result()
print(f"NDCG@10 after {ranker.n_estimators_} rounds: train {history['train']['ndcg@10'][-1]:.4f}, "
      f"test {history['test']['ndcg@10'][-1]:.4f}")

# %%
# NDCG@10 round by round
# ----------------------
ax = sapwood.plot_metric(ranker, metric="ndcg@10", title="LambdaMART: NDCG@10 per round",
                         xlabel="boosting round", ylabel="NDCG@10", figsize=(6.5, 4))
ax.figure.tight_layout()

# %%
# Per-query quality
# -----------------
# ``predict`` gives one score per row; sorting a query's rows by it is the ranking.
# NDCG@10 of one query, computed as the metric does (gain ``2**relevance - 1``; a query
# without relevant documents counts as 1), for the model's order and a random order:
# its mean over the test queries is the ``test`` curve's last value.


def ndcg_at(relevance, score, k=10):
    gain = 2.0 ** relevance - 1
    discount = 1 / np.log2(np.arange(2, min(k, len(gain)) + 2))
    dcg = (gain[np.argsort(-score, kind="stable")][:k] * discount).sum()
    ideal = (np.sort(gain)[::-1][:k] * discount).sum()
    return dcg / ideal if ideal > 0 else 1.0


test = test.assign(score=ranker.predict(test[features]))
rng = np.random.default_rng(0)
model_ndcg, random_ndcg = [], []
for _, q in test.groupby("qid", sort=False):
    relevance = q["relevance"].to_numpy(dtype=float)
    model_ndcg.append(ndcg_at(relevance, q["score"].to_numpy()))
    random_ndcg.append(ndcg_at(relevance, rng.random(len(q))))
print(f"mean NDCG@10 over test queries: model {np.mean(model_ndcg):.4f}, "
      f"random order {np.mean(random_ndcg):.4f}")

fig, ax = plt.subplots(figsize=(6.5, 4))
bins = np.linspace(0, 1, 21)
ax.hist(random_ndcg, bins=bins, alpha=0.6, label="random order")
ax.hist(model_ndcg, bins=bins, alpha=0.6, label="SapwoodRanker")
ax.set_xlabel("NDCG@10 of a test query")
ax.set_ylabel("queries")
ax.set_title("Per-query NDCG@10 on the test set")
ax.legend()
fig.tight_layout()
plt.show()
