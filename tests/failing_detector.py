"""A test detector whose code raises on one amount (666.66): a detector with a bug that some record
triggers. In a module of its own, as every detector is, so its traceback names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pandas as pd
from pyspark.sql import functions as F

from detectors.base import Detector, alerts

POISON_AMOUNT = 666.66


@dataclass(frozen=True)
class NoParams:
    pass


def _raise_on_poison(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for pdf in frames:
        if (pdf["amount"] == POISON_AMOUNT).any():
            raise ValueError(f"a bug that amount {POISON_AMOUNT} triggers")
        yield pdf.iloc[0:0]


def _detect(transactions, params):
    checked = transactions.mapInPandas(_raise_on_poison, transactions.schema)
    return checked.select(*alerts(FAILS_ON_POISON, F.col("card_id"), F.array(F.col("txn_id")), F.col("event_time"),
                                  F.lit(0.5), F.lit("never"), {"amount": F.col("amount")}))


FAILS_ON_POISON = Detector(name="fails_on_poison", version="1", description="test: raises on one amount",
                           watermark="1 minute", params=NoParams(), detect=_detect)
