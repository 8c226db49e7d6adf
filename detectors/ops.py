"""Small DataFrame helpers for detectors (PySpark and the job jar's keyed operators, no I/O)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# The job jar's keyed operators, defined in common so that models/ (the ML features) can use them too.
from common.keyed_operators import bursts, pairs_within, with_history

__all__ = ["bursts", "keep", "pairs_within", "with_history"]


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
