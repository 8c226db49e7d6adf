"""The detector job's warm-up (spark_job/warmup.py) runs every detector on simulated transactions, as a
static DataFrame (no streaming query), until its time is up; with no time it runs no Spark job at all."""

from __future__ import annotations

import dataclasses

import pytest

from detectors import registry
from detectors.harness import run_static
from spark_job.warmup import warm_up, warmup_transactions

pytestmark = pytest.mark.integration


def test_warm_up_runs_every_detector_at_least_once_and_starts_no_query(spark):
    spark.sparkContext.setJobGroup("warmup-test", "the warm-up's jobs")
    tracker = spark.sparkContext.statusTracker()
    detectors = [registry.get("double_swipe"), registry.get("velocity"), registry.get("amount_anomaly")]
    assert warm_up(spark, detectors, 0.1) >= 1
    assert len(tracker.getJobIdsForGroup("warmup-test")) >= len(detectors)   # one collect per detector at least
    assert not any(spark.streams.active)


def test_every_rule_detector_finds_its_pattern_in_the_warm_up_transactions(spark):
    txns = warmup_transactions()
    for name in ("double_swipe", "velocity", "amount_anomaly", "impossible_travel"):
        assert run_static(registry.get(name), txns, spark), name


def test_a_failing_detector_is_left_out_and_the_others_still_warm(spark, caplog):
    broken = dataclasses.replace(registry.get("velocity"), name="broken", detect=_fails)
    assert warm_up(spark, [broken, registry.get("double_swipe")], 0.1) >= 1
    assert "warm-up: broken failed" in caplog.text


def _fails(transactions, params):
    raise ValueError("a detector whose code fails")


def test_no_warm_up_runs_no_job(spark):
    spark.sparkContext.setJobGroup("no-warmup-test", "nothing")
    assert warm_up(spark, [registry.get("velocity")], 0) == 0
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("no-warmup-test") == []
