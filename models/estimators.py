"""The candidate models, each a small factory; every one handles the class imbalance (~1 % fraud).

* ``logistic_regression``: standardised features, ``class_weight='balanced'``.
* ``random_forest``: 100 trees, ``class_weight='balanced_subsample'``, ``n_jobs`` <= 2.
* ``hist_gradient_boosting``: histogram gradient boosting, ``class_weight='balanced'``, small trees
  (7 leaves, 150 rounds at 0.05).
* ``soft_vote_lr_hgb``: the mean probability of the logistic regression and the gradient boosting
  (scikit-learn's ``VotingClassifier(voting='soft')``): the regression's smooth ranking of the bulk (AUC)
  with the trees' sharp top (AP, CP@100).
* ``balanced_bagging``: decision trees each fitted on every fraud of the training set plus an equal-size
  random sample of legitimate ones (random under-sampling per bag, as imbalanced-learn's
  ``BalancedBaggingClassifier``); scores are the bags' mean probability. Written here to avoid a
  dependency for forty lines.

Hyper-parameters were chosen on the validation folds of seeds 1-3 only (mean over 12 validation weeks,
AUC ROC / AP / CP@100): histogram gradient boosting with 7 leaves and 150 rounds .874 / .694 / .308 against
.872 / .708 / .305 with 15 leaves and 300 rounds; the soft vote .877 / .691 / .310, the best CP@100 of all.

Random forests use at most ``N_JOBS`` processes; OpenMP (gradient boosting) and BLAS are held to
``OPENMP_THREADS`` by ``threadpoolctl`` in ``models.training.fit``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier, VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

N_JOBS = 2
OPENMP_THREADS = 1   # HistGradientBoosting on the shared 2 cores: 3.6 s with 1 thread, 75 s with 2 (load 10)


class BalancedBaggingClassifier(ClassifierMixin, BaseEstimator):
    def __init__(self, estimator=None, n_estimators: int = 50, ratio: float = 1.0, random_state: int = 0):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.ratio = ratio                     # legitimate rows per fraud in each bag
        self.random_state = random_state

    def fit(self, X, y):
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y).astype(int)
        rng = np.random.default_rng(self.random_state)
        pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        n_neg = min(len(neg), max(1, int(round(len(pos) * self.ratio))))
        base = self.estimator if self.estimator is not None else DecisionTreeClassifier(max_depth=8)
        self.estimators_ = []
        for i in range(self.n_estimators):
            rows = np.concatenate([rng.choice(pos, len(pos), replace=True), rng.choice(neg, n_neg, replace=False)])
            model = clone(base).set_params(random_state=int(rng.integers(2**31)))
            self.estimators_.append(model.fit(X[rows], y[rows]))
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X):
        X = np.asarray(X, dtype=np.float64)
        p = np.mean([m.predict_proba(X)[:, 1] for m in self.estimators_], axis=0)
        return np.column_stack([1 - p, p])

    def predict(self, X):
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(int)


def logistic_regression(seed: int):
    return make_pipeline(StandardScaler(), LogisticRegression(C=0.1, class_weight="balanced", max_iter=2000))


def random_forest(seed: int):
    return RandomForestClassifier(n_estimators=100, max_depth=15, min_samples_leaf=5,
                                  class_weight="balanced_subsample", n_jobs=N_JOBS, random_state=seed)


def hist_gradient_boosting(seed: int):
    return HistGradientBoostingClassifier(learning_rate=0.05, max_iter=150, max_leaf_nodes=7,
                                          min_samples_leaf=100, l2_regularization=1.0,
                                          class_weight="balanced", early_stopping=False, random_state=seed)


def soft_vote_lr_hgb(seed: int):
    return VotingClassifier([("logistic_regression", logistic_regression(seed)),
                             ("hist_gradient_boosting", hist_gradient_boosting(seed))], voting="soft")


def balanced_bagging(seed: int):
    return BalancedBaggingClassifier(DecisionTreeClassifier(max_depth=8, min_samples_leaf=5),
                                     n_estimators=50, ratio=1.0, random_state=seed)


def small_hist_gradient_boosting(seed: int):
    """A quick model for tests: a few seconds on a few simulated days."""
    return HistGradientBoostingClassifier(learning_rate=0.1, max_iter=60, max_leaf_nodes=15,
                                          class_weight="balanced", early_stopping=False, random_state=seed)


CANDIDATES: dict[str, Callable[[int], object]] = {
    "logistic_regression": logistic_regression,
    "random_forest": random_forest,
    "hist_gradient_boosting": hist_gradient_boosting,
    "balanced_bagging": balanced_bagging,
    "soft_vote_lr_hgb": soft_vote_lr_hgb,
}
EXTRA: dict[str, Callable[[int], object]] = {"small_hist_gradient_boosting": small_hist_gradient_boosting}


def make(name: str, seed: int):
    factory = CANDIDATES.get(name) or EXTRA.get(name)
    if factory is None:
        raise ValueError(f"unknown model {name!r}; known: {', '.join([*CANDIDATES, *EXTRA])}")
    return factory(seed)
