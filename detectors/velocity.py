"""velocity (card testing): a burst of many small e-commerce charges on one card within minutes.

Operator: ``detectors.operators.bursts`` (keyed JVM state, ``fraud.spark.Bursts`` in the job's jar) over the
small charges only. A burst is a chain of small charges on one card, each less than ``max_gap_seconds``
after the previous one (what ``session_window`` groups). Once a burst has ``min_count`` charges, every
charge of it is reported once, while the script is still running: the charge that makes it five long
(with the defaults) raises one alert naming the first five, and each later charge one alert naming
itself, with the burst's count so far (its score grows with it). A case groups them per card.

Why not the session window (this detector's operator until 1.x): its aggregate comes out only when the
watermark passes the burst's end (last charge + gap), minutes of event time after the fifth charge and
behind the slowest watermark of the query (impossible_travel's 10 minutes), which made velocity the
slowest rule detector in ``make demo``; a card tester's charges were all through before it alerted.

State: one row per card with open bursts (bounds, count, total and the charges not reported yet), dropped
when the watermark passes a burst's last charge plus the gap, so the state holds about
``max_gap_seconds + watermark`` of event time of small charges. Late rows are dropped by the operator and
counted in ``numRowsDroppedByWatermark``.

Output: ``txn_ids`` are the charges reported, by event time (then txn_id); ``event_time`` and the trigger
context (merchant, terminal, amount...) are the reporting charge's; evidence: the burst's ``count``,
``total_amount`` and ``span_seconds`` so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.base import TRIGGER_COLUMNS, Detector, alerts
from detectors.operators import bursts, keep


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
    state small (a burst is kept gap + watermark after its last charge)."""


def detect(transactions: DataFrame, params: VelocityParams) -> DataFrame:
    small = keep(transactions, (F.col("amount") <= F.lit(params.max_amount)) & F.col("channel").isin(*params.channels))
    found = bursts(small.select("card_id", "event_time", "txn_id", *TRIGGER_COLUMNS),
                   key="card_id", min_count=params.min_count, max_gap_seconds=params.max_gap_seconds,
                   value="amount")
    span_seconds = (F.col("burst_last_ms") - F.col("burst_first_ms")) / F.lit(1e3)
    return found.select(*alerts(
        DETECTOR,
        card_id=F.col("card_id"),
        txn_ids=F.col("burst_ids"),
        event_time=F.col("event_time"),
        # 0.5 at the threshold, approaching 1 as the burst grows (0.75 one charge over, 0.875 two over...).
        score=F.lit(1.0) - F.pow(F.lit(0.5), F.col("burst_count") - F.lit(params.min_count) + F.lit(1)),
        reason=F.format_string("%d small online charges (total %.2f %s) on one card within %.0f s",
                               F.col("burst_count"), F.col("burst_total"), F.col("currency"), span_seconds),
        evidence={"count": F.col("burst_count"), "total_amount": F.col("burst_total"),
                  "span_seconds": span_seconds},
    ))


DETECTOR = Detector(
    name="velocity",
    version="2.0.0",
    description="card testing: a burst of small e-commerce charges on one card within minutes",
    # How late a charge may arrive and still count; a burst's state lasts gap + watermark after its
    # last charge.
    watermark="2 minutes",
    params=VelocityParams(),
    detect=detect,
    scenarios=("card_testing",),
)
