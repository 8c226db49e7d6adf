"""Scoring with a model artifact, and why a score is high: used by training's evaluation and by ``ml_score``.

``explain`` is an occlusion attribution, model-agnostic and vectorised: a feature's contribution to a
row's score is how much the score drops when that feature alone is replaced by its training median
(``artifact.baseline``). The features with the largest drops are "the features that drove it most";
the detector puts their values in the alert's evidence. Cost: one extra ``predict_proba`` call over
(features x rows) rows, paid only for the rows above the threshold.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def matrix(frame: pd.DataFrame, features: list[str]) -> np.ndarray:
    return frame[features].to_numpy(dtype=np.float64)


_thread_limits = None


def hold_threads() -> None:
    """Hold OpenMP and BLAS to ``estimators.OPENMP_THREADS`` in this process, once: scikit-learn's gradient
    boosting predicts with a thread per core, and on two cores shared with Spark and the broker its threads
    wait for each other, spinning: many times the CPU of one thread (``python -m bench.ml_rows``,
    docs/performance.md)."""
    global _thread_limits
    if _thread_limits is None:
        from threadpoolctl import threadpool_limits

        from models.estimators import OPENMP_THREADS

        _thread_limits = threadpool_limits(OPENMP_THREADS)


def predict(estimator, X: np.ndarray) -> np.ndarray:
    """Fraud probability (0..1) per row."""
    if len(X) == 0:
        return np.zeros(0)
    hold_threads()
    return estimator.predict_proba(X)[:, 1].astype(np.float64)


def explain(estimator, X: np.ndarray, scores: np.ndarray, features: list[str], baseline: dict[str, float],
            top: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Indices (rows x ``top``) of the features that raised each score most, and their contributions."""
    n, f = X.shape
    if n == 0:
        return np.zeros((0, top), dtype=np.int64), np.zeros((0, top))
    # Every occluded copy in one matrix and one predict call: a call has a fixed cost far above its rows'.
    occluded = np.repeat(X[np.newaxis], f, axis=0)                  # (feature, row, column)
    for j, name in enumerate(features):
        occluded[j, :, j] = baseline.get(name, 0.0)
    drops = (scores[np.newaxis] - predict(estimator, occluded.reshape(f * n, f)).reshape(f, n)).T
    order = np.argsort(-drops, axis=1, kind="stable")[:, :top]
    return order, np.take_along_axis(drops, order, axis=1)
