"""impossible_travel: two card-present uses of one card further apart than a plane could fly in between.

Operator: ``detectors.operators.pairs_within`` over the card-present transactions (channel ``pos``/``atm`` with a
location): every pair of one card's uses at most ``max_gap_hours`` apart in event time (the job jar's keyed
pair operator, JVM-native), then a native filter on the haversine distance and the implied speed. It finds
what a stream-stream self-join with an event-time range finds and runs unchanged on a static DataFrame.

A pair alerts when the distance exceeds ``min_km`` (GPS noise, neighbouring towns and terminals with
approximate coordinates are ignored) and the implied speed ``km / hours`` exceeds ``max_kmh``. Two uses at
the same instant count as infinitely fast (the speed is computed with ``min_hours`` as the floor of the
gap). The look-back ``max_gap_hours`` bounds what can be caught: a jump of D km is only impossible within
D / max_kmh hours, so pairs further apart in time would never alert anyway once D / max_kmh < max_gap_hours
(with the defaults, jumps up to 4,000 km are judged; any longer jump inside 4 h also alerts).

State: one row per card holding its card-present uses until the watermark passes
``event_time + max_gap_hours``: at most ``max_gap_hours + watermark`` of card-present traffic; a micro-batch
reads and writes only the cards it saw. Rows behind the watermark are dropped and counted in
``numRowsDroppedByWatermark``.

Output: one alert per impossible pair (earlier, later), naming both oldest first; the later use triggers
it. A use that is impossible from two earlier ones gives two alerts (both about the same triggering
transaction); evidence: ``km``, ``hours``, ``kmh``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from detectors.base import Detector, alerts
from detectors.operators import keep, pairs_within

EARTH_RADIUS_KM = 6371.0088


@dataclass(frozen=True)
class ImpossibleTravelParams:
    max_kmh: float = field(default=1000.0, metadata={"range": (100.0, 5000.0)})
    """Airliners cruise at 800-950 km/h: nothing faster is travel, even with a tail wind."""

    min_km: float = field(default=300.0, metadata={"range": (0.0, 20_000.0)})   # half the Earth's circumference
    """Below this, coordinates of terminals and acquirers are too rough (and a fast train or a short
    flight with a tight schedule plausible) to call it impossible."""

    max_gap_hours: float = field(default=4.0, metadata={"range": (0.1, 24.0)})
    """How far back a use is compared: 4 h of card-present history per card covers every jump up to
    4,000 km and keeps the pair state small; a day of it per card is the most worth holding."""

    min_hours: float = field(default=1.0 / 3600, metadata={"range": (1e-6, 1.0)})
    """Gaps are floored at one second so simultaneous uses give a finite (huge) speed."""

    channels: tuple[str, ...] = field(default=("pos", "atm"), metadata={"choices": ("pos", "ecom", "atm")})
    """Only card-present channels have a meaningful terminal location."""


def haversine_km(lat1: Column, lon1: Column, lat2: Column, lon2: Column) -> Column:
    """Great-circle distance in km between two points given in degrees (a native Spark expression)."""
    phi1, phi2 = F.radians(lat1), F.radians(lat2)
    dphi, dlmb = F.radians(lat2 - lat1), F.radians(lon2 - lon1)
    a = F.pow(F.sin(dphi / 2), 2) + F.cos(phi1) * F.cos(phi2) * F.pow(F.sin(dlmb / 2), 2)
    return F.lit(2 * EARTH_RADIUS_KM) * F.asin(F.least(F.lit(1.0), F.sqrt(a)))


def detect(transactions: DataFrame, params: ImpossibleTravelParams) -> DataFrame:
    present = keep(transactions, F.col("channel").isin(*params.channels)
                   & F.col("lat").isNotNull() & F.col("lon").isNotNull())
    pairs = pairs_within(present, key="card_id", max_gap_seconds=params.max_gap_hours * 3600,
                         names=("earlier", "later"))
    km = haversine_km(F.col("earlier.lat"), F.col("earlier.lon"), F.col("later.lat"), F.col("later.lon"))
    hours = (F.unix_micros(F.col("later.event_time"))
             - F.unix_micros(F.col("earlier.event_time"))) / F.lit(3600 * 1e6)
    kmh = km / F.greatest(hours, F.lit(params.min_hours))
    measured = pairs.select("*", km.alias("_km"), hours.alias("_hours"), kmh.alias("_kmh"))
    impossible = measured.filter((F.col("_km") > F.lit(params.min_km)) & (F.col("_kmh") > F.lit(params.max_kmh)))
    return impossible.select(*alerts(
        DETECTOR,
        card_id=F.col("later.card_id"),
        txn_ids=F.array(F.col("earlier.txn_id"), F.col("later.txn_id")),
        event_time=F.col("later.event_time"),
        # 0.5 just above the plane's speed, 1.0 from twice that speed.
        score=F.col("_kmh") / F.lit(2 * params.max_kmh),
        reason=F.format_string("card used %.0f km apart within %.2f h (%.0f km/h)",
                               F.col("_km"), F.col("_hours"), F.col("_kmh")),
        evidence={"km": F.col("_km"), "hours": F.col("_hours"), "kmh": F.col("_kmh")},
        trigger="later",
    ))


DETECTOR = Detector(
    name="impossible_travel",
    version="2.0.0",
    description="consecutive card-present uses further apart than a plane could fly in between",
    # The alert is about hours of travel; ten minutes of out-of-order tolerance costs nothing noticeable.
    watermark="10 minutes",
    params=ImpossibleTravelParams(),
    detect=detect,
    scenarios=("impossible_travel",),
)
