"""amount_anomaly's stateless scoring: every transaction against its own window at once
(``amount_scoring.score_windows``) gives ``score_amounts``'s numbers to the bit. Pure Python."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.amount_anomaly import AmountAnomalyParams, score_amounts
from detectors.amount_scoring import score_windows


def _random_windows(rng: np.random.Generator, size: int):
    """Rows with windows of 0..size+3 amounts (longer than history_size too), some spikes, some zeros."""
    rows = int(rng.integers(1, 40))
    lengths = rng.integers(0, size + 4, rows)
    windows = np.round(rng.lognormal(3, 0.6, int(lengths.sum())), 2)
    if rng.random() < 0.3:
        windows[:] = 20.0                                          # MAD = 0: the scale's floors decide
    amounts = np.round(rng.lognormal(3, 0.6, rows) * np.where(rng.random(rows) < 0.25, 12, 1), 2)
    amounts[rng.random(rows) < 0.05] = 0.0
    return windows, lengths, amounts


# min_history=0 lets the specification take the median of an empty history (NaN, never an alert)
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
def test_scoring_every_window_at_once_agrees_with_scoring_each_amount():
    rng = np.random.default_rng(11)
    alerts = 0
    for case in range(300):
        params = AmountAnomalyParams(history_size=int(rng.integers(1, 9)), min_history=int(rng.integers(0, 5)),
                                     min_robust_z=3.0, min_ratio=2.0, min_amount=float(rng.choice([0.0, 25.0])))
        windows, lengths, amounts = _random_windows(rng, params.history_size)
        got = score_windows(windows, lengths, amounts, params)
        want = []
        ends = np.cumsum(lengths)
        for i, (end, length) in enumerate(zip(ends, lengths)):
            found, _ = score_amounts(windows[end - length:end], amounts[i:i + 1], params)
            want += [(i, *map(float, stats[:4]), int(stats[4])) for _, *stats in found]
        assert [(int(i), *map(float, stats[:4]), int(stats[4])) for i, *stats in
                zip(got.found, got.median, got.mad, got.robust_z, got.ratio, got.history_count)] == want, case
        alerts += len(want)
    assert alerts > 100          # the cases do exercise the alerting path


def test_no_window_no_score():
    got = score_windows(np.empty(0), np.zeros(3, dtype=np.int64), np.array([10.0, 500.0, 0.0]), AmountAnomalyParams())
    assert len(got.found) == 0
