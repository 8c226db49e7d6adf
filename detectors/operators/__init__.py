"""The detectors' operators: a filter that keeps the watermark whole (``keep``) and the keyed stateful
operators, Java classes of this folder (``java/fraud/spark``, Spark's ``flatMapGroupsWithState``, built into
the job's jar) called from PySpark: every pair of a key's rows within a gap (``pairs_within``), every row
with its key's recent history (``with_history``), and each burst of a key's rows once it is long enough
(``bursts``). Their state is one packed row per key (``PackedState``, ``StateCodec``: versioned, with the
carried columns' fingerprint). Tests: tests/integration/operators/."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def _micros(seconds: float) -> int:
    return int(round(seconds * 1e6))


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
        rows._jdf, key, time, id, _micros(max_gap_seconds), names[0], names[1])
    return DataFrame(pairs, session)


def with_history(rows: DataFrame, *, key: str, value: str, max_entries: int = 0, min_gap_seconds: float = 0.0,
                 keep_seconds: float = 0.0, idle_seconds: float, time: str = "event_time", id: str = "txn_id",
                 names: tuple[str, str] = ("history_ms", "history_values")) -> DataFrame:
    """``rows`` with two array columns named by ``names``: the event times (epoch ms) and the ``value``\\ s
    of the key's history when the row came, oldest learnt first. Scoring a row against its key's recent
    past is then a stateless step (``mapInPandas``), which a query may hold any number of.

    A key's rows of one micro-batch are taken in event-time order, ties by ``id``, after those of earlier
    micro-batches (arrival order across batches). Each is emitted with the entries learnt before it; then
    it is learnt unless its time is less than ``min_gap_seconds`` from the key's newest event time so far
    (a burst counts once) or its value is null. The history keeps the last ``max_entries`` (0: all) and
    forgets entries ``keep_seconds`` or more older than the key's newest (0: never); on a stream the key
    is forgotten when the watermark passes its newest event time plus ``idle_seconds``, and rows behind
    the watermark are dropped. On a static DataFrame each key starts empty.

    One keyed operator (``fraud.spark.RecentHistory`` in the job's jar, Spark's ``flatMapGroupsWithState``):
    one state row per key, read and written only when the key has rows.
    """
    session = rows.sparkSession
    history = session.sparkContext._jvm.fraud.spark.RecentHistory.history(
        rows._jdf, key, time, id, value, int(max_entries), _micros(min_gap_seconds), _micros(keep_seconds),
        _micros(idle_seconds), names[0], names[1])
    return DataFrame(history, session)


def bursts(rows: DataFrame, *, key: str, min_count: int, max_gap_seconds: float, value: str,
           time: str = "event_time", id: str = "txn_id", prefix: str = "burst_") -> DataFrame:
    """Every row of a burst of at least ``min_count`` rows of its ``key``, reported once, as soon as the
    burst is that long.

    A burst is a chain of a key's rows each less than ``max_gap_seconds`` after the previous one: the rows
    ``session_window(time, max_gap)`` groups by ``key``. Rows are taken in event-time order, ties by ``id``
    (within a micro-batch; across micro-batches in arrival order). A row joins every burst it is within
    the gap of, merging them; when that burst has at least ``min_count`` rows the row is emitted with the
    burst's rows not reported yet, itself included: the row that makes a burst of twelve five long reports
    the first five, and each of the seven after it reports itself. Five columns are added, named from
    ``prefix``: ``ids`` (the ids reported, by time, then id) and the burst's so far: ``count``, ``total``
    (the sum of its rows' ``value``, nulls as 0), ``first_ms`` and ``last_ms`` (epoch ms).

    Where the session window reports a burst only when the watermark passes its last row plus the gap
    (minutes of event time after it reached its size), this reports its rows in the micro-batch that
    brings them. One keyed operator (``fraud.spark.Bursts`` in the job's jar): one state row per key with
    its open bursts (bounds, count, total and the rows not reported yet), dropped when the watermark
    passes a burst's last row plus the gap; rows behind the watermark are dropped. On a static DataFrame
    each key starts with no burst.
    """
    session = rows.sparkSession
    found = session.sparkContext._jvm.fraud.spark.Bursts.bursts(
        rows._jdf, key, time, id, value, int(min_count), _micros(max_gap_seconds), prefix)
    return DataFrame(found, session)


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
