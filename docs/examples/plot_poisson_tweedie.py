"""
Counts and positive targets: Poisson and Tweedie
================================================

When the target is a count (claims, visits, clicks), squared error is a poor loss: it
treats a miss of 2 on an expected count of 1 like a miss of 2 on an expected count of 100,
and its predictions can go negative. ``count:poisson`` fits the logarithm of the expected
count, so predictions stay positive and the loss scales with the mean; ``reg:tweedie``
(with ``tweedie_variance_power`` between 1 and 2) does the same for targets that are
zero or positive, such as insurance losses.

The data below are simulated, so the true expected count of every row is known and the
three models can be compared against it.
"""

# %%
# Simulated counts
# ----------------
# The expected count is ``exp(f(x))`` for a smooth ``f`` of four features; the observed
# count is a Poisson draw around it (many zeros, a long right tail).
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import mean_poisson_deviance
from sklearn.model_selection import train_test_split

from sapwood import SapwoodRegressor

rng = np.random.default_rng(0)
n = 6000
X = rng.uniform(-1, 1, size=(n, 4))
log_mu = -0.5 + 1.2 * X[:, 0] + 0.8 * np.sin(3 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3]
mu = np.exp(log_mu)
y = rng.poisson(mu).astype(float)
print(f"share of zeros: {np.mean(y == 0):.2f}, largest count: {y.max():.0f}")

X_train, X_test, y_train, y_test, mu_train, mu_test = train_test_split(
    X, y, mu, test_size=0.3, random_state=0
)

# %%
# Three objectives, the same trees
# --------------------------------
# Only the objective changes. The Poisson and Tweedie models predict the expected value
# (the exponential of their raw score).
common = dict(n_estimators=150, learning_rate=0.1, max_depth=3, n_jobs=2)
models = {
    "reg:squarederror": SapwoodRegressor(objective="reg:squarederror", **common),
    "count:poisson": SapwoodRegressor(objective="count:poisson", **common),
    "reg:tweedie (p=1.5)": SapwoodRegressor(
        objective="reg:tweedie", tweedie_variance_power=1.5, **common
    ),
}
predictions = {}
for name, model in models.items():
    model.fit(X_train, y_train)
    p = model.predict(X_test)
    predictions[name] = p
    # Poisson deviance needs positive predictions: squared error may give negative ones
    deviance = mean_poisson_deviance(y_test, np.clip(p, 1e-6, None))
    print(f"{name:22s} min prediction {p.min():7.3f}   Poisson deviance {deviance:.4f}")

# %%
# Predictions against the true expected count
# -------------------------------------------
# A perfect model would put every point on the black line, the identity (the
# horizontal axis is logarithmic). Squared error is noisier for small counts and may
# fall below zero.
fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), sharex=True, sharey=True)
for ax, (name, p) in zip(axes, predictions.items()):
    ax.scatter(mu_test, p, s=4, alpha=0.4)
    line = np.geomspace(mu_test.min(), mu_test.max(), 50)
    ax.plot(line, line, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_title(name)
    ax.set_xlabel("true expected count")
axes[0].set_ylabel("predicted count")
fig.tight_layout()

# %%
# Calibration by decile
# ---------------------
# Rows are grouped by predicted value; each group's mean prediction is compared with
# its mean observed count.
fig, ax = plt.subplots(figsize=(5.5, 4.5))
for name, p in predictions.items():
    bins = np.quantile(p, np.linspace(0, 1, 11))
    which = np.clip(np.searchsorted(bins, p, side="right") - 1, 0, 9)
    mean_pred = [p[which == k].mean() for k in range(10)]
    mean_obs = [y_test[which == k].mean() for k in range(10)]
    ax.plot(mean_pred, mean_obs, marker="o", label=name)
ax.plot([0, max(mean_obs)], [0, max(mean_obs)], color="k", lw=0.8, ls="--")
ax.set_xlabel("mean predicted count (decile)")
ax.set_ylabel("mean observed count")
ax.set_title("Calibration on held-out rows")
ax.legend()
fig.tight_layout()
plt.show()
