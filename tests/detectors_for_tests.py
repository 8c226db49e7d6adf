"""Detectors that exist only for the tests of the Spark job and its writer (not registered)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import functions as F

from detectors.base import Detector, alerts

# The registered rule detectors the tests run together (ml_score needs a trained model: the models issue).
BUILT_IN = ["double_swipe", "velocity", "amount_anomaly", "impossible_travel"]


@dataclass(frozen=True)
class BigAmountParams:
    threshold: float = 900.0


def _big_amount(transactions, params):
    big = transactions.where(F.col("amount") >= params.threshold)
    return big.select(*alerts(BIG_AMOUNT, F.col("card_id"), F.array(F.col("txn_id")), F.col("event_time"),
                              F.lit(0.5), F.concat(F.lit("amount "), F.col("amount").cast("string")),
                              {"amount": F.col("amount")}))


BIG_AMOUNT = Detector(name="big_amount", version="1", description="test: one alert per amount >= threshold",
                      watermark="1 minute", params=BigAmountParams(), detect=_big_amount)


@dataclass(frozen=True)
class NoParams:
    pass


def _every_transaction(transactions, params):
    return transactions.select(*alerts(EVERY_TRANSACTION, F.col("card_id"), F.array(F.col("txn_id")),
                                       F.col("event_time"), F.lit(0.1), F.lit("processed"),
                                       {"amount": F.col("amount")}))


EVERY_TRANSACTION = Detector(name="every_transaction", version="1", description="test: one alert per transaction",
                             watermark="1 minute", params=NoParams(), detect=_every_transaction)
