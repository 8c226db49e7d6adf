"""Parsing and validation of raw Kafka records into the transaction schema, on the JVM.

``common.contracts.decode_transaction`` is the specification; ``spark_job/jvm`` holds its Java twin, a
Spark UDF (``fraud.spark.TransactionValidation``) that gives the same rules in the same order and the
same reason up to its first colon. ``tests/integration/test_dlq.py`` holds the two to agreement with
generated records. The contract's values (fields, patterns, bounds) are passed to it from
``common.contracts`` and ``common.card_numbers`` here, so they are defined once.

Why one opaque expression: Spark plans every micro-batch again, and the validation written as Catalyst
expressions (about sixty rules over forty columns) appeared in the rules query's plan once per branch,
most of each batch's planning (docs/performance.md). Known difference: JSON nested deeper than about
1,000 levels, where Python's recursion limit and Jackson's nesting limit fall apart.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DoubleType, StringType, StructField, StructType, TimestampType

from common import card_numbers as CN
from common import contracts as C
from detectors.base import TRANSACTION_SCHEMA, Detector

# The Kafka source's columns that the dead-letter record keeps.
RAW_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
VALIDATION_FUNCTION = "fraud_validate_transaction"
VALIDATION_CLASS = "fraud.spark.TransactionValidation"
MASKED_COPY_FUNCTION = "fraud_masked_copy"     # common.card_numbers.masked_copy: (value, limit) -> bytes or null
CARD_NUMBERS_CLASS = "fraud.spark.CardNumbers"
# What the UDF returns: the reason (null when valid), then the contract's fields typed (null when invalid).
CHECKED_SCHEMA = StructType([
    StructField("_reason", StringType()),
    *[StructField(name, DoubleType() if name == "amount" else TimestampType() if name == "event_time"
                  else StringType()) for name in C.REQUIRED_FIELDS],
    *[StructField(name, DoubleType()) for name in C.OPTIONAL_FIELDS],
])


def register_validation(spark: SparkSession) -> None:
    """Register the contract's UDF and the dead letters' card-number masking in ``spark`` once (their jar is
    on ``spark.jars``: common.spark)."""
    if spark.catalog.functionExists(VALIDATION_FUNCTION):
        return
    jvm = spark.sparkContext._jvm
    try:
        cards = getattr(jvm, CARD_NUMBERS_CLASS)(CN.CANDIDATE_PATTERN, CN.MIN_DIGITS, CN.MAX_DIGITS, CN.KEEP_FIRST,
                                                 CN.KEEP_LAST, CN.HASH_CHARS)
        validation = getattr(jvm, VALIDATION_CLASS)(
            ",".join(C.ID_FIELDS), ",".join(C.REQUIRED_FIELDS), ",".join(C.CHANNELS), C.MAX_VALUE_BYTES,
            C.MAX_ID_LENGTH, C.MAX_AMOUNT, int(C.MIN_EVENT_TIME.timestamp() * 1000),
            C.EVENT_TIME_RE.pattern, C.CURRENCY_RE.pattern,
            C.MCC_RE.pattern, C.LONE_SURROGATE_RE.pattern, cards)
    except TypeError as error:    # py4j: a JavaPackage, not a class, when the jar is not loaded
        raise RuntimeError(f"{VALIDATION_CLASS} is not on the Spark classpath: run `python -m deploy fetch` "
                           f"(common.spark adds its jar)") from error
    jsession = spark._jsparkSession
    jsession.udf().register(VALIDATION_FUNCTION, validation, jsession.parseDataType(CHECKED_SCHEMA.json()))
    jsession.udf().register(MASKED_COPY_FUNCTION, cards, jsession.parseDataType(BinaryType().json()))


def fast_clock_warning(max_ahead_s: float, detectors: Sequence[Detector]) -> str | None:
    """A line when event time may lead the broker's clock by more than a detector's watermark delay: one
    record that far ahead moves the watermark past real traffic, which is then dropped as late."""
    shortest = min(detectors, key=lambda d: d.watermark_delay, default=None)
    if shortest is None or max_ahead_s <= shortest.watermark_delay.total_seconds():
        return None
    return (f"FRAUD_EVENT_TIME_MAX_AHEAD_S={max_ahead_s:g} is more than {shortest.name}'s watermark delay "
            f"({shortest.watermark}): one record that far ahead of the broker's clock makes real traffic late")


def with_validation(raw: DataFrame, max_ahead: timedelta = C.EVENT_TIME_MAX_AHEAD) -> DataFrame:
    """Add ``_reason`` (null for a valid record) and the typed transaction columns to raw Kafka rows;
    ``max_ahead``: how far event time may lead the record's timestamp (``event_time_max_ahead_s``).

    ``raw`` has the Kafka source's columns: key, value (binary), topic, partition, offset, timestamp.
    """
    register_validation(raw.sparkSession)
    max_ahead_ms = F.lit(max_ahead // timedelta(milliseconds=1)).cast("long")
    checked = raw.select(*raw.columns, F.call_function(VALIDATION_FUNCTION, "value", "key", "timestamp",
                                                       max_ahead_ms).alias("_checked"))
    typed = {name: F.col(f"_checked.{name}") for name in TRANSACTION_SCHEMA.fieldNames()}
    typed["ingested_at"] = F.col("timestamp")
    return checked.select(*raw.columns, F.col("_checked._reason").alias("_reason"),
                          *[typed[name].alias(name) for name in TRANSACTION_SCHEMA.fieldNames()])


def _rows_where(validated: DataFrame, keep: Column, columns: list[Column]) -> DataFrame:
    """The rows where ``keep`` holds, as ``columns``, written as an explode instead of a filter.

    A filter on ``_reason`` would be pushed down through the validation's projections and have every
    rule, and the JSON parse under it, inlined and evaluated again (~100x slower). An explode of a
    one-element array is not rewritten that way, so each record is parsed and checked exactly once.
    """
    picked = F.explode(F.when(keep, F.array(F.struct(*columns))).otherwise(F.array())).alias("_row")
    return validated.select(picked).select("_row.*")


def valid_transactions(validated: DataFrame) -> DataFrame:
    """The rows that passed, in ``TRANSACTION_SCHEMA``."""
    return _rows_where(validated, F.col("_reason").isNull(),
                       [F.col(name) for name in TRANSACTION_SCHEMA.fieldNames()])


def invalid_records(validated: DataFrame) -> DataFrame:
    """The rows that failed, with what the dead-letter record needs."""
    return _rows_where(validated, F.col("_reason").isNotNull(),
                       [F.col("_reason").alias("reason"), *map(F.col, RAW_COLUMNS)])
