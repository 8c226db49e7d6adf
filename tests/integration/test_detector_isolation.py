"""Detectors that share a query are isolated: one whose code fails on some record is set apart, the
others of its query run on, exactly once (``spark_job.quarantine``). Real broker and Spark."""

from __future__ import annotations

import json
import threading

import pytest

from common.contracts import alert_id
from common.kafka_io import make_producer, read_topic
from common.waiting import wait_until
from spark_job.job import JobQueries
from spark_job.options import RunOptions
from spark_job.supervision import RestartPolicy, supervise
from tests.builders import encode, txn
from tests.detectors_for_tests import BIG_AMOUNT
from tests.failing_detector import FAILS_ON_POISON, POISON_AMOUNT

pytestmark = pytest.mark.integration


def test_a_detector_that_fails_is_set_apart_and_the_others_of_its_query_run_on(stack, topics, spark, tmp_path):
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"))
    options = RunOptions(checkpoint_root=tmp_path, with_dlq=False,
                         groups=(("pair", ("big_amount", "fails_on_poison")),), group_triggers=(("pair", 0.5),))
    job = JobQueries(spark, [BIG_AMOUNT, FAILS_ON_POISON], s, options)
    queries = job.start_all()
    assert [q.name for q in queries] == ["detectors-pair"]
    producer = make_producer(s)
    values = [txn(1, amount=950.0), txn(2, amount=POISON_AMOUNT), txn(3, amount=975.0)]
    for value in values:
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.flush()

    supervised = _Supervised(spark, job, queries)
    try:
        alone = "quarantined-fails_on_poison"
        error = wait_until(lambda: _failure(job.running.get(alone)) if len(_alerts(s)) >= 2 else None, 240,
                           "the failing detector set apart and failing alone, the other's two alerts")
        assert job.plans["detectors-pair"].muted == ("fails_on_poison",)
        # set apart, it keeps its group's trigger
        assert [_trigger(job.running[q]) for q in ("detectors-pair", alone)] == ["ProcessingTimeTrigger(500)"] * 2
        assert job.running["detectors-pair"].isActive                  # the other detector runs on
        later = txn(4, amount=990.0)
        producer.send(s.topic_transactions, key=later["card_id"], value=encode(later))
        producer.flush()
        got = wait_until(lambda: _alerts(s) if len(_alerts(s)) >= 3 else None, 120, "the alert after the failure")
    finally:
        supervised.close()
        producer.close()
    expected = sorted(alert_id("big_amount", [v["txn_id"]]) for v in (*values, later) if v["amount"] >= 900)
    assert sorted(a["alert_id"] for a in got) == expected          # each exactly once
    assert "a bug that amount" in error                            # alone, it fails on the same record


def _publish(s, values: list[dict]) -> dict[str, int]:
    """Send ``values`` to the transactions topic; its end offsets after them, as a checkpoint holds them."""
    from tests.e2e.stream import end_offsets

    producer = make_producer(s)
    try:
        for value in values:
            producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
        producer.flush()
    finally:
        producer.close()
    return {str(partition): offset for partition, offset in end_offsets(s, s.topic_transactions).items()}


def _committed_up_to(checkpoint, topic: str, ends: dict[str, int]) -> dict | None:
    """The end offsets of the checkpoint's last committed batch once they reach ``ends``, else None."""
    from spark_job.alert_writer import batch_end_offsets, checkpoint_batches

    done = checkpoint_batches(checkpoint)[1]
    if not done:
        return None
    offsets = batch_end_offsets(checkpoint, done[-1])[0]
    return offsets if offsets.get(topic) == ends else None


class _Supervised:
    """``supervise`` of the job's queries in a thread (a quick restart policy) until ``close()``, which
    stops it and every query of the job."""

    def __init__(self, spark, job, queries):
        self.job, self.stop = job, threading.Event()
        policy = RestartPolicy(max_failures=2, first_backoff_s=0.1, max_backoff_s=0.2)
        self.thread = threading.Thread(target=supervise, args=(spark, queries, job.restart),
                                       kwargs=dict(until=self.stop.is_set, policy=policy, poll_seconds=0.2))
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        for query in self.job.running.values():
            query.stop()


def _trigger(query) -> str:
    return query._jsq.streamingQuery().trigger().toString()


def _failure(query) -> str | None:
    error = query.exception() if query is not None and not query.isActive else None
    return None if error is None else str(error)


def _alerts(s) -> list[dict]:
    return [json.loads(r.value) for r in read_topic(s, s.topic_alerts, min_records=0, timeout=2)]


def test_set_apart_on_the_first_batch_after_a_restart_it_starts_where_its_group_had_committed(
        stack, topics, spark, tmp_path):
    """The group fails on the first batch of its run (a poison record produced while the job was down):
    no progress of this run says where it had got to, its checkpoint does. The detector set apart reads
    from there, in a fresh checkpoint of its own (not one an earlier quarantine left), and every alert
    comes once."""
    from spark_job.tuning.backlog import _initial_offsets

    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"))
    options = RunOptions(checkpoint_root=tmp_path, with_dlq=False,
                         groups=(("pair", ("big_amount", "fails_on_poison")),), group_triggers=(("pair", 0.5),))
    group = tmp_path / "detectors-pair"
    first = [txn(1, amount=950.0), txn(2, amount=960.0)]
    ends = _publish(s, first)
    job = JobQueries(spark, [BIG_AMOUNT, FAILS_ON_POISON], s, options)
    queries = job.start_all()
    try:   # Spark records a batch in its commit log after the writer's Kafka commit: the alerts come first
        had_got_to = wait_until(lambda: _committed_up_to(group, s.topic_transactions, ends), 240,
                                "the first run's records committed in the group's checkpoint")
    finally:
        for query in queries:
            query.stop()
    assert len(_alerts(s)) == 2
    stale = tmp_path / "quarantined-fails_on_poison"
    (stale / "offsets").mkdir(parents=True)                  # an earlier run's quarantine, days back
    (stale / "offsets" / "0").write_text('v1\n{}\n{"elsewhere":{"0":0}}\n')

    second = [txn(3, amount=POISON_AMOUNT), txn(4, amount=975.0)]
    _publish(s, second)
    job = JobQueries(spark, [BIG_AMOUNT, FAILS_ON_POISON], s, options)
    queries = job.start_all()
    supervised = _Supervised(spark, job, queries)
    try:
        error = wait_until(lambda: _failure(job.running.get("quarantined-fails_on_poison"))
                           if len(_alerts(s)) >= 3 else None, 240,
                           "the detector set apart failing alone, the other's alert of the second run")
    finally:
        supervised.close()
    assert "a bug that amount" in error
    assert _initial_offsets(stale, 1) == [had_got_to]        # from the group's last commit, fresh checkpoint
    got = _alerts(s)
    assert sorted(a["alert_id"] for a in got) == sorted(
        alert_id("big_amount", [v["txn_id"]]) for v in (*first, *second) if v["amount"] >= 900)
