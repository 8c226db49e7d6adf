"""amount_anomaly's scoring of many transactions at once, each against its own window, in numpy.

``amount_anomaly.score_amounts`` is the specification: one card, one amount after the other, a median and
a MAD per amount. In the detector each transaction arrives with its window (the card's learnt amounts
before it, from ``detectors.operators.with_history``), so scoring is stateless: ``score_windows`` pads the
windows into one matrix and takes every median and MAD by one row-wise sort. Same floating-point
operations in the same order, so the same results to the bit;
``tests/unit/test_amount_histories.py`` holds the two to agreement on random windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class WindowsScored:
    found: np.ndarray            # indices of the anomalous amounts
    median: np.ndarray           # their window's median, MAD, robust z, ratio (capped at 1e9), window size
    mad: np.ndarray
    robust_z: np.ndarray
    ratio: np.ndarray
    history_count: np.ndarray


def _medians(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each row's first ``counts`` values (the rest are +inf), as ``np.median`` computes it."""
    ordered = np.sort(rows, axis=1)
    picked = np.arange(len(rows))
    return (ordered[picked, (counts - 1) // 2] + ordered[picked, counts // 2]) / 2


def score_windows(windows: np.ndarray, lengths: np.ndarray, amounts: np.ndarray, params) -> WindowsScored:
    """Score ``amounts[i]`` against the last ``params.history_size`` of its window: the ``lengths[i]``
    values of ``windows`` (the windows laid end to end, oldest first). ``params``: ``AmountAnomalyParams``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    amounts = np.asarray(amounts, dtype=np.float64)
    ends = np.cumsum(lengths)
    window = np.minimum(lengths, params.history_size)
    # (an empty window has no median: the specification's NaN never alerts either)
    scored = np.flatnonzero((window >= max(params.min_history, 1)) & (amounts >= params.min_amount))
    none = np.empty(0)
    if not len(scored):
        return WindowsScored(np.empty(0, dtype=np.int64), none, none, none, none, np.empty(0, dtype=np.int64))
    n = window[scored]
    columns = np.arange(max(int(n.max()), 1))
    inside = columns[None, :] < n[:, None]
    rows = np.where(inside, windows[np.where(inside, (ends[scored] - n)[:, None] + columns, 0)], np.inf)
    median = _medians(rows, n)
    mad = _medians(np.where(inside, np.abs(rows - median[:, None]), np.inf), n)
    scale = np.maximum(np.maximum(1.4826 * mad, params.min_relative_scale * median), params.min_scale)
    amount = amounts[scored]
    robust_z = (amount - median) / scale
    ratio = np.where(median > 0, amount / np.where(median > 0, median, 1.0), np.inf)
    hit = (robust_z >= params.min_robust_z) & (ratio >= params.min_ratio)
    return WindowsScored(found=scored[hit], median=median[hit], mad=mad[hit], robust_z=robust_z[hit],
                         ratio=np.minimum(ratio[hit], 1e9), history_count=n[hit])
