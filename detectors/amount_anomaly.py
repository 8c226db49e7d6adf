"""amount_anomaly: an amount far outside the card's own recent history (robust statistics).

For every transaction, the card's last ``history_size`` amounts give a median and a MAD (median absolute
deviation); the transaction alerts when its robust z-score ``(amount - median) / scale`` is at least
``min_robust_z`` *and* it is at least ``min_ratio`` times the median *and* at least ``min_amount``. The
scale is ``max(1.4826 * MAD, min_relative_scale * median, min_scale)``, so a card that always pays the
same amount (MAD = 0) does not alert on a slightly different one. A card with fewer than ``min_history``
earlier transactions never alerts: with little history there is no "own" behaviour to deviate from, and
the other detectors still watch it. Every amount, anomalous or not, joins the history (the median and MAD
shrug off the occasional outlier), except one that comes less than ``history_min_gap_seconds`` after the
card's previous transaction: a burst of rapid charges (a card-testing script, a terminal retry, a double
swipe) is one observation of the card's behaviour, not ten, so it cannot swamp the median of a young
card's history. Such a charge is still scored.

Operator: ``detectors.operators.with_history`` (keyed JVM state, ``fraud.spark.RecentHistory`` in the job's jar)
hands each transaction over with its card's window: the last ``history_size`` amounts learnt before it.
Scoring is then stateless, in pandas (``mapInPandas``): every window's median and MAD at once
(``detectors/amount_scoring.py``, held to ``score_amounts`` by a unit test).
Why keyed state and not native operators: the statistic is over the card's last *N transactions* (not a
time window), and the history must outlive any window (a card used weekly still has a history). A native
formulation would be a self-join of every transaction with the card's earlier ones over the whole history
horizon followed by a per-transaction percentile aggregation: its state would be every transaction of the
horizon (days) instead of one small array per card. Why not Python state (``applyInPandasWithState``, this
detector's operator until 3.x): Spark allows one per query, and it paid a Python call per group and batch,
so cards had to share bucket rows that were rewritten whole every batch. The state is one row per card, at
most ``history_size`` amounts and the newest event time, written only when the card has transactions, and
forgotten ``history_ttl_hours`` of event time after its last transaction; rows behind the watermark are
dropped (and counted) by the operator.

On a static DataFrame (tests, backtests) every card starts with no history, so both paths compute the same
alerts for the same ordered input. Within a micro-batch a card's transactions are taken in event-time order;
a transaction arriving in a later batch than newer ones of the same card (allowed within the watermark)
joins the history in arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.amount_scoring import score_windows
from detectors.base import TRIGGER_COLUMNS, TRIGGER_DDL, Detector, alerts
from detectors.operators import with_history


@dataclass(frozen=True)
class AmountAnomalyParams:
    history_size: int = field(default=40, metadata={"range": (5, 500)})
    """Forty purchases span weeks for a typical card: recent enough to follow changing habits, enough
    for a stable median; and the per-card state stays a 40-element array."""

    min_history: int = field(default=10, metadata={"range": (1, 500)})
    """Below ten earlier purchases in the history (rapid repeats count once, see
    ``history_min_gap_seconds``) a median/MAD is too noisy to call anything far outside it."""

    min_robust_z: float = field(default=6.0, metadata={"range": (1.0, 100.0)})
    """Six robust standard deviations: far beyond the 3-3.5 used for outliers in clean data, because
    purchase amounts are heavy-tailed."""

    min_ratio: float = field(default=6.0, metadata={"range": (1.0, 1000.0)})
    """A stolen card is drained with amounts an order of magnitude above the usual; 6x leaves margin
    below that while ignoring the occasional bigger shop (2-4x)."""

    min_amount: float = field(default=25.0, metadata={"range": (0.0, 100_000.0)})
    """An anomaly below this costs the holder less than an analyst's minute; not worth an alert."""

    min_relative_scale: float = field(default=0.1, metadata={"range": (0.0, 1.0)})
    """The scale is at least 10% of the median: cards paying nearly constant amounts have MAD ~ 0."""

    min_scale: float = field(default=1.0, metadata={"range": (0.01, 1000.0)})   # never 0: it divides
    """And at least one currency unit, for the same reason on tiny amounts."""

    history_min_gap_seconds: float = field(default=120.0, metadata={"range": (0.0, 86_400.0)})
    """An amount joins the history only if it comes at least two minutes after the card's previous
    transaction. People do not shop twice within two minutes; card-testing scripts (5-12 charges under
    3.00, seconds apart), terminal retries and double swipes do. Without this rule a card-testing burst
    became most of a young card's history, its median collapsed to ~2.00 and the holder's next ordinary
    purchase looked like a 20x spike: 125 of the 129 false positives of the seed-11 backtest (300k
    transactions). It also keeps a fraudster from dragging the median down with a quick series of tiny
    charges before a large one. Only the first charge of a burst is learnt."""

    history_ttl_hours: float = field(default=24.0 * 30, metadata={"range": (1.0, 24.0 * 366)})
    """A card's history is forgotten after 30 days without a transaction (event time): that bounds the
    state to the cards active in the last month."""


# The scored transaction's own columns (its id, time and trigger context), then the statistics.
_CARRIED = ["card_id", "txn_id", "event_time", *TRIGGER_COLUMNS]
OUTPUT_SCHEMA = ("card_id string, txn_id string, event_time timestamp, " + TRIGGER_DDL
                 + ", median double, mad double, robust_z double, ratio double, history_count long")
_OUTPUT_COLUMNS = [part.split()[0] for part in OUTPUT_SCHEMA.split(", ")]
_STATISTICS = ["median", "mad", "robust_z", "ratio", "history_count"]


def score_amounts(history: np.ndarray, amounts: np.ndarray, params: AmountAnomalyParams,
                  times_ms: np.ndarray | None = None, previous_ms: int | None = None
                  ) -> tuple[list[tuple[int, float, float, float, float, int]], np.ndarray]:
    """Score ``amounts`` (one card, in order) against ``history`` and each other.

    ``times_ms`` are the amounts' event times (epoch ms) and ``previous_ms`` the newest event time of the
    card's transactions before them (``None``: none): an amount less than ``history_min_gap_seconds`` after the
    transaction before it is scored but not added to the history. Without ``times_ms`` every amount joins.
    Returns the anomalies as ``(index, median, mad, robust_z, ratio, history_count)`` and the new history
    (the last ``history_size`` amounts learnt). The specification, amount by amount; the detector learns
    with ``detectors.operators.with_history`` and scores with ``amount_scoring.score_windows``.
    """
    found = []
    past = list(history.astype(float)[-params.history_size:])
    min_gap_ms = params.history_min_gap_seconds * 1000.0
    for i, amount in enumerate(amounts.astype(float)):
        if len(past) >= params.min_history and amount >= params.min_amount:
            window = np.asarray(past)
            median = float(np.median(window))
            mad = float(np.median(np.abs(window - median)))
            scale = max(1.4826 * mad, params.min_relative_scale * median, params.min_scale)
            robust_z = (amount - median) / scale
            ratio = amount / median if median > 0 else float("inf")
            if robust_z >= params.min_robust_z and ratio >= params.min_ratio:
                found.append((i, median, mad, robust_z, min(ratio, 1e9), len(past)))
        learn = True
        if times_ms is not None:
            now = int(times_ms[i])
            # In event-time order the previous transaction is the newest one seen; one arriving out of
            # order in a later micro-batch is compared with that newest one, hence the absolute gap.
            learn = previous_ms is None or abs(now - previous_ms) >= min_gap_ms
            previous_ms = now if previous_ms is None else max(previous_ms, now)
        if learn:
            past.append(amount)
            if len(past) > params.history_size:
                del past[0]
    return found, np.asarray(past, dtype=float)


_HISTORY = "history_amounts"


def _score_function(params: AmountAnomalyParams):
    def score(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from models.features import ragged

        for pdf in frames:
            lengths, windows = ragged(pdf[_HISTORY], np.float64)
            scored = score_windows(windows, lengths, pdf["amount"].to_numpy(dtype=np.float64), params)
            if len(scored.found):
                out = pdf.iloc[scored.found][_CARRIED].reset_index(drop=True)
                yield out.assign(**{name: getattr(scored, name) for name in _STATISTICS})

    return score


def detect(transactions: DataFrame, params: AmountAnomalyParams) -> DataFrame:
    windows = with_history(
        transactions.select(*_CARRIED), key="card_id", value="amount", max_entries=params.history_size,
        min_gap_seconds=params.history_min_gap_seconds, idle_seconds=params.history_ttl_hours * 3600,
        names=("history_ms", _HISTORY))
    found = windows.drop("history_ms").mapInPandas(_score_function(params), OUTPUT_SCHEMA)
    return found.select(*alerts(
        DETECTOR,
        card_id=F.col("card_id"),
        txn_ids=F.array(F.col("txn_id")),
        event_time=F.col("event_time"),
        # 0.5 at the z threshold, approaching 1 at twice and beyond.
        score=F.lit(0.5) + F.lit(0.5) * (F.col("robust_z") - F.lit(params.min_robust_z)) / F.lit(params.min_robust_z),
        reason=F.format_string("amount %.2f %s is %.1fx the card's median %.2f over its last %d purchases "
                               "(robust z %.1f)", F.col("amount"), F.col("currency"), F.col("ratio"),
                               F.col("median"), F.col("history_count"), F.col("robust_z")),
        evidence={"amount": F.col("amount"), "median": F.col("median"), "mad": F.col("mad"),
                  "robust_z": F.col("robust_z"), "ratio": F.col("ratio"),
                  "history_count": F.col("history_count")},
    ))


DETECTOR = Detector(
    name="amount_anomaly",
    # 1.1.0: charges less than history_min_gap_seconds after the previous one no longer join the history.
    # 2.0.0: state kept per bucket of cards (same alerts; checkpoints of 1.x cannot be resumed).
    # 3.0.0: 8 state buckets instead of 64 (same alerts; checkpoints of 2.x cannot be resumed).
    # 4.0.0: keyed JVM state per card (detectors.operators.with_history) and stateless scoring (same alerts;
    # checkpoints of 3.x cannot be resumed).
    version="4.0.0",
    description="an amount far outside the card's own recent history (median/MAD)",
    # History is taken in arrival order, so keep out-of-order tolerance modest: two minutes.
    watermark="2 minutes",
    params=AmountAnomalyParams(),
    detect=detect,
    scenarios=("amount_spike",),
)
