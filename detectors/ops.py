"""Small DataFrame helpers for detectors (PySpark and the job jar's pair operator, no I/O)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def keep(transactions: DataFrame, condition: Column) -> DataFrame:
    """``transactions.filter(condition)`` that does not slow the watermark down.

    Spark's optimizer pushes a filter below ``withWatermark`` when the predicate does not reference the
    event-time column (and splits ANDed predicates to push the parts it can). The watermark is then
    computed only from the rows that pass the filter: a detector looking at small e-commerce charges would
    see event time advance only when such a charge arrives, so its windows would close late (or, in a
    test, never) and rows it ignores would never count as late. Wrapping the condition in a single
    expression that references ``event_time`` keeps the filter above the watermark, so every transaction
    advances event time, as the runner's ``withWatermark`` intends. On a static DataFrame it is a plain
    filter.
    """
    return transactions.filter(F.when(condition, F.col("event_time")).isNotNull())


def pairs_within(rows: DataFrame, *, key: str, max_gap_seconds: float, names: tuple[str, str],
                 time: str = "event_time", id: str = "txn_id") -> DataFrame:
    """Every pair of ``rows`` with the same ``key`` at most ``max_gap_seconds`` apart in ``time``.

    One row per pair, two struct columns named by ``names`` (earlier, later), each holding a row of
    ``rows``: the earlier has the smaller ``time``, or the smaller ``id`` at equal times; rows with the same
    ``id`` never pair. It finds what this self-join finds::

        a, b = rows.alias(names[0]), rows.alias(names[1])
        a.join(b, (a[key] == b[key]) & (b[time] >= a[time]) & (b[time] <= a[time] + max_gap)
                  & (a[id] != b[id]) & ((b[time] > a[time]) | (b[id] > a[id])))

    but as one keyed operator (``fraud.spark.RecentPairs`` in the job's jar, Spark's
    ``flatMapGroupsWithState``): on a stream each key keeps only its rows that can still pair (until the
    watermark passes ``time + max_gap``), in one state row, and a micro-batch reads and writes only the keys
    it touches, where a self-join keeps both sides and Spark plans both every micro-batch. Rows behind the
    watermark are dropped, as the join drops them. The fields are read as ``F.col(f"{names[1]}.amount")``.
    """
    session = rows.sparkSession
    pairs = session.sparkContext._jvm.fraud.spark.RecentPairs.pairs(
        rows._jdf, key, time, id, int(round(max_gap_seconds * 1e6)), names[0], names[1])
    return DataFrame(pairs, session)
