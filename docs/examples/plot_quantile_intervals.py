"""
Prediction intervals with quantile regression
=============================================

``reg:quantileerror`` fits a quantile of the target instead of its mean. Given a list,
``quantile_alpha=[0.05, 0.5, 0.95]``, one model fits all of them at once: each boosting
round grows one tree per quantile, and ``predict`` returns one column per quantile, in
the order given. The 5% and 95% quantiles bound a 90% prediction interval, and the 50%
quantile is the median.

The noise below grows with ``x``, so a good interval widens from left to right.
"""

# %%
# Data with growing noise
# -----------------------
import matplotlib.pyplot as plt
import numpy as np

from sapwood import SapwoodRegressor

rng = np.random.default_rng(0)


def make(n):
    x = rng.uniform(0, 10, size=n)
    y = np.sin(x) * 2 + 0.5 * x + rng.normal(size=n) * (0.2 + 0.25 * x)
    return x.reshape(-1, 1), y


X_train, y_train = make(3000)
X_test, y_test = make(2000)

# %%
# Three quantiles, one model
# --------------------------
alphas = [0.05, 0.5, 0.95]
model = SapwoodRegressor(
    objective="reg:quantileerror",
    quantile_alpha=alphas,
    n_estimators=100,
    learning_rate=0.1,
    max_depth=3,
    n_jobs=2,
)
model.fit(X_train, y_train)
pred = model.predict(X_test)
print("prediction shape:", pred.shape)

# the share of held-out targets at or below each fitted quantile should be close to alpha
for k, alpha in enumerate(alphas):
    print(f"alpha {alpha:.2f}: share of targets below the prediction {np.mean(y_test <= pred[:, k]):.3f}")
inside = np.mean((y_test >= pred[:, 0]) & (y_test <= pred[:, 2]))
print(f"coverage of the 90% interval: {inside:.3f}")

# %%
# The interval
# ------------
grid = np.linspace(0, 10, 400).reshape(-1, 1)
band = model.predict(grid)
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.scatter(X_test[:, 0], y_test, s=3, color="0.6", alpha=0.5, label="held-out rows")
ax.fill_between(grid[:, 0], band[:, 0], band[:, 2], color="tab:blue", alpha=0.25,
                label="90% interval (5% to 95% quantile)")
ax.plot(grid[:, 0], band[:, 1], color="tab:blue", label="median (50% quantile)")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_title("Quantile regression: three quantiles from one model")
ax.legend(loc="upper left")
fig.tight_layout()

# %%
# Interval width
# --------------
# The width follows the noise, which grows linearly with ``x`` here (its true 90% width
# is ``2 * 1.645 * (0.2 + 0.25 x)``).
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(grid[:, 0], band[:, 2] - band[:, 0], label="fitted")
ax.plot(grid[:, 0], 2 * 1.645 * (0.2 + 0.25 * grid[:, 0]), ls="--", color="k", label="true")
ax.set_xlabel("x")
ax.set_ylabel("width of the 90% interval")
ax.legend()
fig.tight_layout()
plt.show()
