"""The detector job's warm-up (spark_job/tuning/rehearsal.py) rehearses the job's queries on topics of their own: they
read every sample transaction it publishes, every rule detector alerts through the exactly-once writer, and
afterwards no query runs, the rehearsal's checkpoints are gone and its progress reaches no progress file. A
rehearsal query that cannot start or fails never keeps the job from starting; no time, no rehearsal."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from common.kafka_admin import admin_client, delete_topics
from common.kafka_io import read_topic
from detectors import registry
from detectors.harness import run_static
from spark_job.options import QueryPlan, RunOptions
from spark_job.progress import ProgressListener
from spark_job.query_names import REHEARSAL_PREFIX as PREFIX
from spark_job.tuning.rehearsal import rehearsal_settings, warm_up, warmup_transactions

pytestmark = pytest.mark.integration

RULES = ("double_swipe", "velocity", "amount_anomaly", "impossible_travel")


def _settings(stack, unique):
    return stack.replace(topic_transactions=f"test.warmup.{unique}")


def _topics(settings, tag: str) -> list[str]:
    r = rehearsal_settings(settings, tag)
    return [r.topic_transactions, r.topic_alerts, r.topic_alert_markers, r.topic_dlq]


def _existing(settings) -> set[str]:
    with admin_client(settings) as admin:
        return set(admin.list_topics())


def test_every_rule_detector_finds_its_pattern_in_the_warm_up_transactions(spark):
    for round_ in (0, 1):
        txns = warmup_transactions(round_)
        for name in RULES:
            assert run_static(registry.get(name), txns, spark), (name, round_)


def test_the_rehearsal_runs_the_job_query_on_topics_of_its_own(spark, stack, unique, tmp_path):
    settings = _settings(stack, unique)
    plan = QueryPlan("rules", RULES, with_dlq=True)
    detectors = [registry.get(name) for name in RULES]
    try:
        # No time: one round of the sample all the same (every pattern); all of it read, however slow.
        read = warm_up(spark, [plan], detectors, settings, RunOptions(checkpoint_root=str(tmp_path)), 0.1,
                       tag=unique, keep_topics=True, drain_s=600)
        rehearsal = rehearsal_settings(settings, unique)
        published = len(read_topic(rehearsal, rehearsal.topic_transactions, isolation_level="read_uncommitted"))
        assert published >= len(warmup_transactions())
        assert read == {PREFIX + "rules": published}
        alerts = [json.loads(r.value) for r in read_topic(rehearsal, rehearsal.topic_alerts)]
        assert {a["detector"] for a in alerts} == set(RULES)
        assert not spark.streams.active
        assert not (tmp_path / f"{PREFIX}{unique}").exists()
    finally:
        delete_topics(settings, _topics(settings, unique))


def test_a_rehearsal_query_that_cannot_start_or_fails_never_stops_the_job(spark, stack, unique, tmp_path, caplog):
    settings = _settings(stack, unique)
    unplannable = dataclasses.replace(registry.get("velocity"), name="unplannable", detect=_fails_to_plan)
    failing = dataclasses.replace(registry.get("double_swipe"), name="failing", detect=_fails_on_rows)
    plans = [QueryPlan("a", ("unplannable",)), QueryPlan("b", ("failing",)), QueryPlan("c", ("double_swipe",))]
    read = warm_up(spark, plans, [unplannable, failing, registry.get("double_swipe")], settings,
                   RunOptions(checkpoint_root=str(tmp_path)), 0.1, tag=unique)
    assert f"query {PREFIX}a cannot start" in caplog.text
    assert f"query {PREFIX}b failed" in caplog.text
    assert read[PREFIX + "c"] > 0 and set(read) == {PREFIX + "b", PREFIX + "c"}
    assert not spark.streams.active
    assert not set(_topics(settings, unique)) & _existing(settings)


def _fails_to_plan(transactions, params):
    raise ValueError("a detector whose code fails")


def _fails_on_rows(transactions, params):
    boom = F.udf(lambda txn_id: 1 // 0, "int")      # on the first row
    return registry.get("double_swipe").detect(transactions.where(boom("txn_id") > 0), params)


def test_no_warm_up_no_rehearsal(spark, stack, unique):
    settings = _settings(stack, unique)
    assert warm_up(spark, [QueryPlan("rules", ("velocity",))], [registry.get("velocity")], settings,
                   RunOptions(), 0, tag=unique) == {}
    assert not set(_topics(settings, unique)) & _existing(settings)


def test_the_rehearsal_reaches_no_progress_file(tmp_path: Path):
    listener = ProgressListener(tmp_path)
    listener.record({"name": PREFIX + "detectors-rules", "batchId": 1, "numInputRows": 5})
    listener.record({"name": "detectors-rules", "batchId": 1, "numInputRows": 5})
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["detectors-rules.json"]



def test_topics_that_cannot_be_deleted_leave_a_warning_not_an_error(monkeypatch, caplog):
    """The broker gone just as the rehearsal ends (kafka-python then fails after 30 s, too long for the
    suite: its error is raised here): the job still starts, its own queries meet the broker."""
    import common.kafka_admin
    from kafka.errors import KafkaConnectionError

    from spark_job.tuning.rehearsal import _delete_topics

    def gone(settings, names):
        raise KafkaConnectionError("no broker")

    monkeypatch.setattr(common.kafka_admin, "delete_topics", gone)
    _delete_topics(None, ["x.warmup-gone"])
    assert "could not delete its topics x.warmup-gone (KafkaConnectionError" in caplog.text
