"""Detector.run refuses a stateful operator fed by another (every operator gets the query's one watermark)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from detectors import harness, registry
from detectors.base import Detector, TRIGGER_COLUMNS, alerts
from detectors.double_swipe import DETECTOR as DOUBLE_SWIPE
from detectors.plan_checks import chained_stateful_operators
from detectors.velocity import DETECTOR as VELOCITY


def _pairs_per_minute(transactions, params):
    """Double swipes counted per card and minute: an aggregation fed by a stream-stream join."""
    counted = (DOUBLE_SWIPE.run(transactions)
               .groupBy(F.window("event_time", "1 minute"), "card_id")
               .agg(F.count(F.lit(1)).alias("pairs"), F.max("event_time").alias("event_time"),
                    *[F.first(name).alias(name) for name in TRIGGER_COLUMNS]))
    return counted.select(*alerts(CHAINED, card_id=F.col("card_id"), txn_ids=F.array(F.lit("-")),
                                  event_time=F.col("event_time"), score=F.lit(1.0), reason=F.lit("pairs"),
                                  evidence={"pairs": F.col("pairs")}))


CHAINED = Detector(name="pairs_per_minute", version="0.0.1", description="a chain of two stateful operators",
                   watermark="2 minutes", params=None, detect=_pairs_per_minute)


@pytest.fixture
def stream(spark, tmp_path):
    return harness.streaming_transactions(spark, str(tmp_path)).withWatermark("event_time", "2 minutes")


def test_a_chain_of_stateful_operators_is_refused_with_the_reason(stream):
    with pytest.raises(ValueError, match=r"pairs_per_minute: a stateful operator \(Join\) feeds another \(Aggregate\)"):
        CHAINED.run(stream)
    assert CHAINED.detect(stream, None).isStreaming            # the same plan, unchecked: Spark would run it


def test_operators_side_by_side_are_not_a_chain(stream):
    both = DOUBLE_SWIPE.run(stream).unionByName(VELOCITY.run(stream))
    assert chained_stateful_operators(both) == []


@pytest.mark.parametrize("detector", registry.all(), ids=lambda d: d.name)
def test_no_registered_detector_chains_stateful_operators(detector, stream, model_registry):
    assert chained_stateful_operators(detector.detect(stream, detector.params)) == []
