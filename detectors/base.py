"""The detector contract (docs/architecture.md, "The detector contract"): what an analyst writes.

A detector is a name, a version, a watermark delay, typed parameters and a pure function from a
DataFrame of parsed transactions (``TRANSACTION_SCHEMA``, already watermarked on ``event_time`` by the
runner) to a DataFrame of alerts (``ALERT_COLUMNS``). It never touches Kafka, Redis or files: the same
function runs on a static DataFrame (tests, backtests) and on the stream.

Every alert also carries the context of its triggering transaction (``TRIGGER_COLUMNS``: customer,
merchant, terminal, amount, channel, location), copied by the ``alerts`` helper, so that the enricher
can look up the merchant without re-reading the transactions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Generic, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, DoubleType, MapType, StringType, StructField, StructType,
                               TimestampType)

# Parsed transactions, as the runner hands them to every detector.
TRANSACTION_SCHEMA = StructType([
    StructField("txn_id", StringType(), False),
    StructField("card_id", StringType(), False),
    StructField("customer_id", StringType(), False),
    StructField("merchant_id", StringType(), False),
    StructField("terminal_id", StringType(), False),
    StructField("amount", DoubleType(), False),
    StructField("currency", StringType(), False),
    StructField("event_time", TimestampType(), False),
    StructField("channel", StringType(), False),
    StructField("mcc", StringType(), False),
    StructField("lat", DoubleType(), True),
    StructField("lon", DoubleType(), True),
    # When the record entered Kafka (its Kafka timestamp), set by the job; null in static runs. Alerts carry
    # it from their triggering transaction, so latency is measured on the wall clock, not in event time.
    StructField("ingested_at", TimestampType(), True),
])

# The triggering transaction's context on every alert: optional in the contract (older writers omit it,
# lat/lon are null for e-commerce), copied from the transaction by ``alerts``.
TRIGGER_SCHEMA = StructType([
    StructField(f.name, f.dataType, True) for f in TRANSACTION_SCHEMA.fields
    if f.name in ("customer_id", "merchant_id", "terminal_id", "amount", "currency", "channel", "lat", "lon",
                  "ingested_at")
])
TRIGGER_COLUMNS = [f.name for f in TRIGGER_SCHEMA.fields]
# The same as DDL, for the output schema of a pandas step that carries the trigger along.
TRIGGER_DDL = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in TRIGGER_SCHEMA.fields)

# What a detector returns; the sink adds ``detected_at`` when it writes the alert.
ALERT_SCHEMA = StructType([
    StructField("alert_id", StringType(), False),
    StructField("detector", StringType(), False),
    StructField("detector_version", StringType(), False),
    StructField("card_id", StringType(), False),
    StructField("txn_ids", ArrayType(StringType(), False), False),
    StructField("event_time", TimestampType(), False),
    StructField("score", DoubleType(), False),
    StructField("reason", StringType(), False),
    StructField("evidence", MapType(StringType(), DoubleType(), True), False),
    *TRIGGER_SCHEMA.fields,
])
ALERT_COLUMNS = [f.name for f in ALERT_SCHEMA.fields]

P = TypeVar("P")


@dataclass(frozen=True)
class Detector(Generic[P]):
    """One registered detector. ``detect(transactions, params)`` returns alerts (``ALERT_SCHEMA``)."""

    name: str
    version: str
    description: str
    watermark: str                                   # delay for withWatermark("event_time", ...)
    params: P                                        # a frozen dataclass of typed parameters
    detect: Callable[[DataFrame, P], DataFrame]
    scenarios: tuple[str, ...] = field(default=())   # simulator scenarios this detector is meant to catch
    params_version: int = 0                          # 0: the defaults above; else the parameters topic's (detectors.params)

    def run(self, transactions: DataFrame, params: P | None = None) -> DataFrame:
        alerts = self.detect(transactions, params if params is not None else self.params)
        return alerts.select(*ALERT_COLUMNS)

    @property
    def watermark_delay(self) -> timedelta:
        """``watermark`` as a duration ("2 minutes" -> 120 s); units: seconds, minutes, hours, days."""
        amount, unit = self.watermark.split()
        return timedelta(**{unit if unit.endswith("s") else unit + "s": float(amount)})

    def with_params(self, **changes: Any) -> "Detector[P]":
        return dataclasses.replace(self, params=dataclasses.replace(self.params, **changes))

    def describe_params(self) -> dict[str, Any]:
        return dataclasses.asdict(self.params)


def alert_id_column(detector: str, txn_ids: Column) -> Column:
    """Deterministic alert id, the Spark twin of ``common.contracts.alert_id``."""
    return F.substring(F.sha2(F.concat(F.lit(f"{detector}:"), F.concat_ws("|", txn_ids)), 256), 1, 32)


def trigger_column(trigger: str | Column | None, name: str) -> Column:
    """Field ``name`` of the triggering transaction (see ``alerts``)."""
    if trigger is None:
        return F.col(name)
    if isinstance(trigger, str):
        return F.col(f"{trigger}.{name}")
    return trigger.getField(name)


def alerts(detector: Detector, card_id: Column, txn_ids: Column, event_time: Column, score: Column,
           reason: Column, evidence: dict[str, Column] | Column, *,
           trigger: str | Column | None = None) -> list[Column]:
    """The select list that turns a detector's findings into rows of ``ALERT_SCHEMA``.

    ``txn_ids`` must list the evidence transactions oldest first; ``event_time`` is the time of the
    transaction that triggered the alert; ``evidence`` maps names to numeric columns (or is a map column
    when the names are computed per row).

    ``trigger`` says where the triggering transaction's ``TRIGGER_COLUMNS`` are, to copy them onto the
    alert: ``None`` (default) when each row is that transaction or carries its columns under their own
    names; the alias of its side in a join (``"second"``); or the name of a struct column holding them
    (velocity aggregates ``F.max_by(F.struct(*TRIGGER_COLUMNS), ...)`` into one), or such a column.
    """
    evidence_map = evidence if isinstance(evidence, Column) else F.create_map(
        *[part for name, col in evidence.items() for part in (F.lit(name), col.cast("double"))])
    return [
        alert_id_column(detector.name, txn_ids).alias("alert_id"),
        F.lit(detector.name).alias("detector"),
        F.lit(detector.version).alias("detector_version"),
        card_id.alias("card_id"),
        txn_ids.alias("txn_ids"),
        event_time.alias("event_time"),
        F.least(F.greatest(score.cast("double"), F.lit(0.0)), F.lit(1.0)).alias("score"),
        reason.alias("reason"),
        evidence_map.alias("evidence"),
        *[trigger_column(trigger, f.name).cast(f.dataType).alias(f.name) for f in TRIGGER_SCHEMA.fields],
    ]
