"""double_swipe: the same card, merchant and amount twice within a minute of event time.

Operator: ``detectors.operators.pairs_within``, every pair of one card's transactions at most ``max_gap`` apart
in event time (the job jar's keyed pair operator, JVM-native, no Python worker), then a native filter on
the same merchant and amount. It finds what a stream-stream self-join with an event-time range finds and
runs unchanged on a static DataFrame.

State: one row per card holding its transactions until the watermark passes ``event_time + max_gap``, so
the state holds at most ``max_gap + watermark`` of event time; a micro-batch reads and writes only the
cards it saw. Rows behind the watermark are dropped and counted in ``numRowsDroppedByWatermark``.

Output: one alert per ordered pair of duplicates, naming both transactions oldest first (ties in event time
broken by ``txn_id``); the triggering transaction is the second one. Three identical swipes within the
window give three pairs (1-2, 1-3, 2-3): every duplicate is named, at the cost of one extra alert.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.base import Detector, alerts
from detectors.operators import keep, pairs_within


@dataclass(frozen=True)
class DoubleSwipeParams:
    max_gap_seconds: float = field(default=60.0, metadata={"range": (1.0, 3600.0)})
    """A terminal or gateway retry lands within seconds; a minute covers slow retries, while a real
    second purchase of the exact same amount at the same merchant is rarely that quick. At most an hour: a
    repeat later than that is a new purchase, and the pair state holds gap + watermark."""

    min_amount: float = field(default=0.0, metadata={"range": (0.0, 100_000.0)})
    """Every amount counts by default: even small duplicate charges are real money to the holder."""


def detect(transactions: DataFrame, params: DoubleSwipeParams) -> DataFrame:
    txns = keep(transactions, F.col("amount") >= F.lit(params.min_amount))
    pairs = pairs_within(txns, key="card_id", max_gap_seconds=params.max_gap_seconds, names=("first", "second"))
    pairs = pairs.filter((F.col("first.merchant_id") == F.col("second.merchant_id"))
                         & (F.col("first.amount") == F.col("second.amount")))
    gap_seconds = (F.unix_micros(F.col("second.event_time"))
                   - F.unix_micros(F.col("first.event_time"))) / F.lit(1e6)
    max_gap = F.lit(float(params.max_gap_seconds))
    return pairs.select(*alerts(
        DETECTOR,
        card_id=F.col("second.card_id"),
        txn_ids=F.array(F.col("first.txn_id"), F.col("second.txn_id")),
        event_time=F.col("second.event_time"),
        # The closer the two swipes, the surer the duplicate: 1.0 at 0 s, 0.5 at the window's edge.
        score=F.lit(1.0) - F.lit(0.5) * gap_seconds / max_gap,
        reason=F.format_string("same card, merchant and amount (%.2f %s) %.1f s apart",
                               F.col("second.amount"), F.col("second.currency"), gap_seconds),
        evidence={"gap_seconds": gap_seconds, "amount": F.col("second.amount")},
        trigger="second",
    ))


DETECTOR = Detector(
    name="double_swipe",
    version="2.0.0",
    description="same card, merchant and amount within a minute of event time",
    # Transactions of one card arrive in order (key = card_id); two minutes absorbs producer retries and
    # cross-partition skew while keeping about three minutes of transactions in the pair state.
    watermark="2 minutes",
    params=DoubleSwipeParams(),
    detect=detect,
    scenarios=("double_swipe",),
)
