"""
Multiclass classification
=========================

Hand-written digits, eight by eight pixels, in ten classes. With more than two classes
:class:`~sapwood.SapwoodClassifier` picks the ``multi:softprob`` objective by itself: each
boosting round grows one tree per class, and ``predict_proba`` returns one column per
class (in the order of ``classes_``).

A confusion matrix shows which digits the model mixes up, and the evaluation history of
a held-out set shows how the multiclass log-loss falls round after round.
"""

# %%
# Data and model
# --------------
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.metrics import ConfusionMatrixDisplay, accuracy_score
from sklearn.model_selection import train_test_split

import sapwood
from sapwood import SapwoodClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=0
)

model = SapwoodClassifier(n_estimators=60, learning_rate=0.2, max_depth=4, n_jobs=2)
# the held-out set is evaluated after every round (multi-class log-loss and error rate)
model.fit(X_train, y_train, eval_set=[(X_test, y_test)], eval_metric=["mlogloss", "merror"])

print("objective:", model.get_booster().objective)
print("classes:", model.classes_)
pred = model.predict(X_test)
print(f"test accuracy: {accuracy_score(y_test, pred):.3f}")

# %%
# Confusion matrix
# ----------------
# Rows are the true digits, columns the predicted ones: off-diagonal cells are errors.
fig, ax = plt.subplots(figsize=(6, 5.5))
ConfusionMatrixDisplay.from_predictions(y_test, pred, ax=ax, colorbar=False)
ax.set_title("Digits: confusion matrix on held-out rows")
fig.tight_layout()

# %%
# Training history
# ----------------
# :func:`sapwood.plot_metric` draws a metric of ``evals_result_`` round by round.
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
sapwood.plot_metric(model, metric="mlogloss", ax=axes[0], title="Multiclass log-loss")
sapwood.plot_metric(model, metric="merror", ax=axes[1], title="Error rate")
for ax in axes:
    ax.set_xlabel("boosting round")
fig.tight_layout()
plt.show()
