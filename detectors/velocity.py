"""velocity (card testing): a burst of many small e-commerce charges on one card within minutes.

Operator: a native event-time session-window aggregation (``session_window``) keyed by card over the
small charges only, in append mode. A burst is a chain of small charges on one card, each within
``max_gap_seconds`` of the previous one; the alert fires once per burst, when the watermark passes the
end of the burst (last charge + gap), so a burst of twelve charges is one alert, not eight. With the
defaults a qualifying burst is at least five charges at most 3 minutes apart, so its first five charges
lie within 12 minutes.

State: one partial aggregate per open burst, holding its (event_time, txn_id) pairs; it is emitted and
dropped as soon as the watermark passes the burst's end, so the state holds at most
``max_gap_seconds + watermark`` of event time of small charges. Being JVM-native, it does not pay
per-card Python overhead and holds up at 100k+ distinct cards. Late rows are dropped by the aggregation
and counted in ``numRowsDroppedByWatermark``.

Output: ``txn_ids`` are the burst's charges ordered by event time (then txn_id); ``event_time`` and the
trigger context (merchant, terminal, amount...) are the last charge's; evidence: ``count``,
``total_amount``, ``span_seconds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.base import TRIGGER_COLUMNS, Detector, alerts
from detectors.ops import keep


@dataclass(frozen=True)
class VelocityParams:
    max_amount: float = field(default=5.00, metadata={"range": (0.01, 10_000.0)})
    """Card testers probe with tiny amounts (a few units) that holders rarely notice."""

    channels: tuple[str, ...] = field(default=("ecom",), metadata={"choices": ("pos", "ecom", "atm")})
    """Testing stolen card data happens online; card-present small charges (parking, transit) are noise."""

    min_count: int = field(default=5, metadata={"range": (2, 1000)})
    """Three or four small online charges in minutes happen (app stores, top-ups); five is a script."""

    max_gap_seconds: float = field(default=180.0, metadata={"range": (1.0, 3600.0)})
    """Scripts fire every few seconds to a minute; three minutes of silence ends a burst, which keeps
    alerts timely (a burst alerts gap + watermark after its last charge) and state small."""


def detect(transactions: DataFrame, params: VelocityParams) -> DataFrame:
    small = keep(transactions, (F.col("amount") <= F.lit(params.max_amount)) & F.col("channel").isin(*params.channels))
    bursts = (small
              .groupBy(F.col("card_id"),
                       F.session_window(F.col("event_time"), f"{int(params.max_gap_seconds * 1000)} milliseconds"))
              .agg(F.array_sort(F.collect_list(F.struct(F.col("event_time"), F.col("txn_id")))).alias("charges"),
                   F.count(F.lit(1)).alias("count"),
                   F.sum("amount").alias("total_amount"),
                   F.min("event_time").alias("first_time"),
                   F.max("event_time").alias("last_time"),
                   F.first("currency").alias("currency"),
                   # the last charge (the trigger), by the same order as the charges
                   F.max_by(F.struct(*TRIGGER_COLUMNS), F.struct("event_time", "txn_id")).alias("last"))
              .filter(F.col("count") >= F.lit(params.min_count)))
    span_seconds = (F.unix_micros(F.col("last_time")) - F.unix_micros(F.col("first_time"))) / F.lit(1e6)
    return bursts.select(*alerts(
        DETECTOR,
        card_id=F.col("card_id"),
        txn_ids=F.transform(F.col("charges"), lambda c: c["txn_id"]),
        event_time=F.col("last_time"),
        # 0.5 at the threshold, approaching 1 as the burst grows (0.75 one charge over, 0.875 two over...).
        score=F.lit(1.0) - F.pow(F.lit(0.5), F.col("count") - F.lit(params.min_count) + F.lit(1)),
        reason=F.format_string("%d small online charges (total %.2f %s) on one card within %.0f s",
                               F.col("count"), F.col("total_amount"), F.col("currency"), span_seconds),
        evidence={"count": F.col("count"), "total_amount": F.col("total_amount"),
                  "span_seconds": span_seconds},
        trigger="last",
    ))


DETECTOR = Detector(
    name="velocity",
    version="1.0.0",
    description="card testing: a burst of small e-commerce charges on one card within minutes",
    # A burst is reported gap + watermark after its last charge: two minutes keeps that near five
    # minutes, while absorbing normal producer lag and partition skew.
    watermark="2 minutes",
    params=VelocityParams(),
    detect=detect,
    scenarios=("card_testing",),
)
