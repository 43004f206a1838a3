"""
Binary classification and SHAP values
=====================================

A :class:`~sapwood.SapwoodClassifier` learns to tell malignant from benign tumours in
scikit-learn's breast-cancer data. Sapwood computes exact TreeSHAP contributions itself:
``predict(X, pred_contrib=True)`` gives one column per feature plus a bias column, and each
row sums to the model's raw score (its log-odds).

The summary plot below is drawn with matplotlib alone from that matrix: one row per
feature, one dot per sample, placed by its contribution and coloured by the feature's
value. (With the ``shap`` package installed, ``sapwood.TreeExplainer(model)`` gives the
same values to SHAP's own plots.)
"""

# %%
# Train a classifier
# ------------------
# A quarter of the rows is held out to measure accuracy and AUC.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split

from sapwood import SapwoodClassifier

data = load_breast_cancer(as_frame=True)
X, y = data.data, data.target
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

model = SapwoodClassifier(n_estimators=100, learning_rate=0.1, max_depth=3, n_jobs=2)
model.fit(X_train, y_train)
proba = model.predict_proba(X_test)[:, 1]
print(f"accuracy {accuracy_score(y_test, proba > 0.5):.3f}, AUC {roc_auc_score(y_test, proba):.3f}")

# %%
# SHAP contributions
# ------------------
# The last column is the bias (the expected log-odds); the other columns follow the
# features' order. Feature contributions plus the bias give the raw score exactly.
contrib = model.predict(X_test, pred_contrib=True)
margin = model.predict(X_test, output_margin=True)
print("contributions shape:", contrib.shape)
print("largest |sum - margin|:", float(np.max(np.abs(contrib.sum(axis=1) - margin))))

shap_values = contrib[:, :-1]
names = np.asarray(X.columns)

# %%
# Summary (beeswarm) plot
# -----------------------
# Features are ranked by their mean absolute contribution; points are spread vertically
# a little so that their density shows.
top = np.argsort(np.abs(shap_values).mean(axis=0))[::-1][:10]
rng = np.random.default_rng(0)
fig, ax = plt.subplots(figsize=(7, 5))
for row, j in enumerate(top[::-1]):
    values = X_test.iloc[:, j].to_numpy()
    lo, hi = np.percentile(values, [5, 95])
    colour = np.clip((values - lo) / (hi - lo + 1e-12), 0, 1)
    jitter = rng.normal(scale=0.08, size=len(values))
    points = ax.scatter(shap_values[:, j], row + jitter, c=colour, cmap="coolwarm", s=10)
ax.axvline(0, color="0.5", lw=0.8)
ax.set_yticks(range(len(top)))
ax.set_yticklabels(names[top[::-1]])
ax.set_xlabel("SHAP value (contribution to the log-odds of benign)")
ax.set_title("Ten most influential features")
fig.colorbar(points, ax=ax, label="feature value (low to high)", ticks=[0, 1])
fig.tight_layout()

# %%
# One prediction explained
# ------------------------
# The contributions of a single sample show why it got its score.
i = 0
order = np.argsort(np.abs(shap_values[i]))[::-1][:8]
fig, ax = plt.subplots(figsize=(7, 4))
ax.barh(range(len(order)), shap_values[i, order][::-1],
        color=["tab:red" if v < 0 else "tab:blue" for v in shap_values[i, order][::-1]])
ax.set_yticks(range(len(order)))
ax.set_yticklabels(names[order][::-1])
ax.set_xlabel("SHAP value (log-odds)")
ax.set_title(f"Sample {i}: bias {contrib[i, -1]:.2f}, raw score {margin[i]:.2f}")
fig.tight_layout()
plt.show()
