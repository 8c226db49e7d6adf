"""A keyed operator's packed state (``fraud.spark.StateCodec``) read by a query that carries other
columns than the one that wrote it: the query stops with one line saying to start from a new checkpoint,
instead of misreading the bytes or dying at their end. (Each operator's round trip through its state,
batch after batch, is what its own suite checks: the stream gives what the static DataFrame gives.)"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from detectors import harness
from detectors.base import Detector, alerts
from detectors.operators import pairs_within
from detectors.samples import T0, txn

pytestmark = pytest.mark.integration


def _pairs(extra_column: bool):
    def detect(transactions, params):
        rows = transactions.withColumn("extra", F.lit("x")) if extra_column else transactions
        pairs = pairs_within(rows, key="card_id", max_gap_seconds=60, names=("earlier", "later"))
        return pairs.select(*alerts(DETECTOR, card_id=F.col("later.card_id"),
                                    txn_ids=F.array(F.col("earlier.txn_id"), F.col("later.txn_id")),
                                    event_time=F.col("later.event_time"), score=F.lit(1.0), reason=F.lit("pair"),
                                    evidence={}, trigger="later"))
    return detect


DETECTOR = Detector(name="packed_state_probe", version="1", description="probe", watermark="10 minutes",
                    params=None, detect=_pairs(False))


def test_state_written_for_other_columns_stops_the_query_in_one_line(spark, tmp_path):
    # pairs_within keeps each key's rows as they are; with_history and bursts keep state of fixed columns.
    checkpoint = tmp_path / "checkpoint"
    harness.run_microbatches(DETECTOR, [[txn("card-1", T0, 10.0, txn_id="a")]], spark, checkpoint)
    changed = dataclasses.replace(DETECTOR, detect=_pairs(True))
    with pytest.raises(Exception) as failed:
        harness.run_microbatches(changed, [[txn("card-1", T0 + timedelta(seconds=5), 10.0, txn_id="b")]],
                                 spark, checkpoint)
    message = str(failed.value)
    assert "keyed operator state in the checkpoint written for other columns" in message
    assert "start the query from a new checkpoint" in message


def test_the_same_columns_read_their_state_back(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    harness.run_microbatches(DETECTOR, [[txn("card-1", T0, 10.0, txn_id="a")]], spark, checkpoint)
    again = harness.run_microbatches(DETECTOR, [[txn("card-1", T0 + timedelta(seconds=5), 10.0, txn_id="b")]],
                                     spark, checkpoint)
    assert [a["txn_ids"] for a in again.alerts] == [["a", "b"]]
