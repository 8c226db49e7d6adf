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

Operator: Python state, ``applyInPandasWithState`` with ``GroupStateTimeout.EventTimeTimeout``.
Why not native: the statistic is over the card's last *N transactions* (not a time window), and the
history must outlive any window (a card used weekly still has a history). A native formulation would be
a stream-stream self-join of every transaction with the card's earlier ones over the whole history
horizon followed by a per-transaction percentile aggregation: its state would be every transaction of
the horizon (days) instead of one small array per card, and Spark cannot finalise an aggregation keyed
by txn_id after a join without an extra time window. So Python state it is, kept lean: at most
``history_size`` amounts and the last event time per card, the card forgotten ``history_ttl_hours`` of
event time after its last transaction.

Grouped by bucket, not by card: Spark's Python stateful operators pay about 0.5-0.85 ms per group per
micro-batch (docs/architecture.md, "Spark costs that shaped the design"), so one group per card took
this detector to ~1.4k transactions/s at 100k
cards. The state is grouped by ``pmod(hash(card_id), state_buckets)``; a bucket's row holds all its
cards (``common/keyed_histories.py``), its event-time timeout is due when its longest-idle card is to
be forgotten, and each call forgets the cards idle past the TTL. Rows behind the previous batch's
watermark are filtered (and counted) by the operator because the timeout is event-time based; a row that
slips between that and the current watermark never sets a timeout behind it
(``common/state_timeouts.py``). State rows in Spark's progress are buckets, not cards. A bucket's cards are
scored together by array operations (``detectors/amount_scoring.py``, held to ``score_amounts`` by a
unit test), not card by card in Python.

On a static DataFrame (tests, backtests) the same bucket function runs through ``applyInPandas`` with
empty starting histories, so both paths compute the same alerts for the same ordered input. Within a
micro-batch a card's transactions are taken in event-time order; a transaction arriving in a later batch
than newer ones of the same card (allowed within the watermark) joins the history in arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from common import pyspark_compat
from common.keyed_histories import STATE_SCHEMA, KeyedHistories as CardHistories
from detectors.amount_scoring import score_cards
from detectors.base import TRIGGER_COLUMNS, TRIGGER_DDL, Detector, alerts
from common.state_timeouts import timeout_after

pyspark_compat.install()   # PySpark 4.0.0 worker bug in applyInPandasWithState; see common/pyspark_compat.py


@dataclass(frozen=True)
class AmountAnomalyParams:
    history_size: int = 40
    """Forty purchases span weeks for a typical card: recent enough to follow changing habits, enough
    for a stable median; and the per-card state stays a 40-element array."""

    min_history: int = 10
    """Below ten earlier purchases in the history (rapid repeats count once, see
    ``history_min_gap_seconds``) a median/MAD is too noisy to call anything far outside it."""

    min_robust_z: float = 6.0
    """Six robust standard deviations: far beyond the 3-3.5 used for outliers in clean data, because
    purchase amounts are heavy-tailed."""

    min_ratio: float = 6.0
    """A stolen card is drained with amounts an order of magnitude above the usual; 6x leaves margin
    below that while ignoring the occasional bigger shop (2-4x)."""

    min_amount: float = 25.0
    """An anomaly below this costs the holder less than an analyst's minute; not worth an alert."""

    min_relative_scale: float = 0.1
    """The scale is at least 10% of the median: cards paying nearly constant amounts have MAD ~ 0."""

    min_scale: float = 1.0
    """And at least one currency unit, for the same reason on tiny amounts."""

    history_min_gap_seconds: float = 120.0
    """An amount joins the history only if it comes at least two minutes after the card's previous
    transaction. People do not shop twice within two minutes; card-testing scripts (5-12 charges under
    3.00, seconds apart), terminal retries and double swipes do. Without this rule a card-testing burst
    became most of a young card's history, its median collapsed to ~2.00 and the holder's next ordinary
    purchase looked like a 20x spike: 125 of the 129 false positives of the seed-11 backtest (300k
    transactions). It also keeps a fraudster from dragging the median down with a quick series of tiny
    charges before a large one. Only the first charge of a burst is learnt."""

    history_ttl_hours: float = 24.0 * 30
    """A card's history is forgotten after 30 days without a transaction (event time): that bounds the
    state to the cards active in the last month."""

    state_buckets: int = 8
    """Cards share 8 state rows (by a hash of card_id): Spark's Python state pays per group per
    micro-batch (Spark's call plus pandas' fixed cost of a bucket's sort and slices), so per-card groups
    cost ~1 minute per 100k-card batch; a live batch touches every bucket, so fewer buckets cost less
    (docs/performance.md, "Real time in make demo"). Raise it on a cluster with more cores than buckets.
    Changing it needs a fresh checkpoint."""


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
    (the last ``history_size`` amounts learnt). The specification, amount by amount; the detector runs
    ``amount_scoring.score_cards``, which computes the same numbers for a whole bucket of cards at once.
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


def _event_ms(pdf: pd.DataFrame) -> np.ndarray:
    """Event times as epoch milliseconds (naive timestamps are UTC, Spark's session time zone here)."""
    times = pdf["event_time"]
    if getattr(times.dtype, "tz", None) is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    return times.to_numpy(dtype="datetime64[ms]").astype(np.int64)


def score_bucket(histories: CardHistories, pdf: pd.DataFrame, params: AmountAnomalyParams) -> pd.DataFrame | None:
    """Score the transactions of many cards against their histories and learn them (``histories`` is updated).

    Each card's transactions are taken in event-time order, ties by txn_id; the numbers are
    ``score_amounts``'s, computed for all cards at once (``detectors/amount_scoring.py``). Returns the
    anomalies (the scored transaction's ``_CARRIED`` columns and the statistics) or None.
    """
    if not len(pdf):
        return None
    pdf = pdf.assign(_ms=_event_ms(pdf)).sort_values(["card_id", "_ms", "txn_id"], kind="stable")
    cards = pdf["card_id"].to_numpy()
    starts = np.concatenate(([0], np.flatnonzero(cards[1:] != cards[:-1]) + 1))
    distinct = cards[starts].tolist()
    history, lengths, previous_ms, known = histories.lookup(distinct)
    scored = score_cards(history, lengths, previous_ms, known, np.diff(np.append(starts, len(pdf))),
                         pdf["_ms"].to_numpy(dtype=np.int64), pdf["amount"].to_numpy(dtype=float), params)
    histories.put_many(distinct, scored.history, scored.history_lengths, scored.last_ms)
    if not len(scored.found):
        return None
    out = pdf.iloc[scored.found][_CARRIED].reset_index(drop=True)
    return out.assign(**{name: getattr(scored, name) for name in _STATISTICS})


def _streaming_function(params: AmountAnomalyParams):
    ttl_ms = int(params.history_ttl_hours * 3600 * 1000)

    def per_bucket(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        pyspark_compat.install()              # no-op once installed; makes the worker import this module first
        histories = CardHistories.decode(state.get) if state.exists else CardHistories()
        frames = [] if state.hasTimedOut else [f for f in frames if len(f)]
        out = score_bucket(histories, pd.concat(frames, ignore_index=True), params) if frames else None
        # No transaction for history_ttl_hours of event time: forget the card (not one seen just now).
        histories.forget_idle(state.getCurrentWatermarkMs() - ttl_ms)
        if len(histories) == 0:
            state.remove()
        else:
            state.update(histories.encode())
            # Called again when the longest-idle card is due to be forgotten.
            state.setTimeoutTimestamp(timeout_after(state, histories.oldest_last_ms() + ttl_ms))
        if out is not None:
            yield out

    return per_bucket


def _static_function(params: AmountAnomalyParams):
    def per_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        out = score_bucket(CardHistories(), pdf, params) if len(pdf) else None
        return pd.DataFrame(columns=_OUTPUT_COLUMNS) if out is None else out

    return per_bucket


def detect(transactions: DataFrame, params: AmountAnomalyParams) -> DataFrame:
    bucket = F.pmod(F.hash("card_id"), F.lit(params.state_buckets)).alias("bucket")
    grouped = transactions.select(*_CARRIED, bucket).groupBy("bucket")
    if transactions.isStreaming:
        found = grouped.applyInPandasWithState(_streaming_function(params), OUTPUT_SCHEMA, STATE_SCHEMA,
                                               "append", GroupStateTimeout.EventTimeTimeout)
    else:
        found = grouped.applyInPandas(_static_function(params), OUTPUT_SCHEMA)
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
    version="3.0.0",
    description="an amount far outside the card's own recent history (median/MAD)",
    # History is taken in arrival order, so keep out-of-order tolerance modest: two minutes.
    watermark="2 minutes",
    params=AmountAnomalyParams(),
    detect=detect,
    scenarios=("amount_spike",),
)
