"""Parameters applied without redeploy (spark_job/live_params.py), on the real broker and Spark: a running
velocity query, ``python -m detectors params set`` lowers its threshold, the job restarts that query
alone from its checkpoint, and a read_committed count over the change finds every alert exactly once:
the alerts of a static run of each stretch of the input with the parameters in force for it."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest

from common.kafka_io import make_producer, read_topic
from common.settings import get_settings
from common.waiting import wait_until
from detectors import double_swipe, velocity
from detectors.__main__ import main as detectors_cli
from detectors.harness import run_static, watermark_tick
from detectors.samples import T0, card_testing
from detectors.samples import double_swipe as swipes
from spark_job.job import JobQueries
from spark_job.live_params import ParamsFollower
from spark_job.options import RunOptions
from spark_job.supervision import RestartPolicy, supervise

pytestmark = pytest.mark.integration

APPLY_WITHIN_S = 10.0


def stretch(start, tag: str) -> list[dict]:
    """Bursts of 3, 4 and 5 small online charges, a double swipe, then a tick 30 minutes on that moves
    every watermark past them, so each stretch's alerts are out before the next stretch starts."""
    txns = [*card_testing(f"v3-{tag}", start, count=3), *card_testing(f"v4-{tag}", start, count=4),
            *card_testing(f"v5-{tag}", start, count=5), *swipes(f"ds-{tag}", start)]
    return [*txns, watermark_tick(start + timedelta(minutes=30))]


def test_lowering_velocity_min_count_applies_to_its_query_alone_with_no_alert_lost_or_doubled(
        stack, topics, spark, tmp_path, monkeypatch):
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      topic_params=topics("params", cleanup__policy="compact"),
                      topic_params_history=topics("params-history"), run_dir=tmp_path / "run")
    for name, value in (("FRAUD_TOPIC_PARAMS", s.topic_params), ("FRAUD_TOPIC_PARAMS_HISTORY", s.topic_params_history),
                        ("FRAUD_RUN_DIR", str(s.run_dir))):
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    first, second = stretch(T0, "a"), stretch(T0 + timedelta(minutes=31), "b")
    lowered = velocity.DETECTOR.with_params(min_count=3)
    expected = {**{a["alert_id"]: 0 for d in (velocity.DETECTOR, double_swipe.DETECTOR)
                   for a in run_static(d, first, spark)},
                **{a["alert_id"]: 1 for a in run_static(lowered, second, spark)},
                **{a["alert_id"]: 0 for a in run_static(double_swipe.DETECTOR, second, spark)}}
    # v5-a, ds-a and ds-b; v3-b, v4-b and v5-b from their third charge on (1 + 2 + 3)
    assert Counter(expected.values()) == {0: 3, 1: 6}

    follower = ParamsFollower(s)
    job = JobQueries(spark, [velocity.DETECTOR, double_swipe.DETECTOR], s,
                     RunOptions(checkpoint_root=tmp_path / "checkpoints", with_dlq=False))
    job.apply_params(follower.initial())
    queries = job.start_all()
    assert sorted(q.name for q in queries) == ["detector-double_swipe", "detector-velocity"]
    run_ids = {q.name: q.runId for q in queries}
    stop = threading.Event()
    supervisor = threading.Thread(target=supervise, args=(spark, queries, job.restart), kwargs=dict(
        until=stop.is_set, policy=RestartPolicy(max_failures=2, first_backoff_s=0.1), poll_seconds=0.2,
        tick=lambda: job.apply_params(follower.poll())))
    supervisor.start()
    producer = make_producer(s)
    try:
        _send(producer, s, first)
        wait_until(lambda: len(_alerts(s)) >= 2, 240, "the first stretch's two alerts")

        assert detectors_cli(["params", "set", "velocity", "min_count=3", "--reason", "card testers go slower"]) == 0
        committed = time.monotonic()
        wait_until(lambda: job.running["detector-velocity"].runId != run_ids["detector-velocity"]
                   and job.running["detector-velocity"].isActive, APPLY_WITHIN_S, "velocity restarted with v1")
        applied_s = time.monotonic() - committed
        assert job.running["detector-double_swipe"].runId == run_ids["detector-double_swipe"]   # not restarted
        assert job.running["detector-double_swipe"].isActive

        _send(producer, s, second)
        got = wait_until(lambda: _at_least(_alerts(s), len(expected)), 240, "the second stretch's alerts")
    finally:
        stop.set()
        supervisor.join(timeout=120)
        for query in job.running.values():
            query.stop()
        follower.close()
        producer.close()
    print(f"velocity restarted with new parameters {applied_s:.1f} s after the commit")
    ids = Counter(a["alert_id"] for a in got)
    assert [i for i, n in ids.items() if n > 1] == []                      # none twice
    assert set(ids) == set(expected)                                        # none missing, none extra
    assert {a["alert_id"]: a["params_version"] for a in got} == expected    # each carries its parameters' version


def _send(producer, s, txns: list[dict]) -> None:
    for value in txns:
        producer.send(s.topic_transactions, key=value["card_id"].encode(), value=json.dumps(value).encode())
    producer.flush()


def _at_least(alerts: list[dict], count: int) -> list[dict] | None:
    return alerts if len(alerts) >= count else None


def _alerts(s) -> list[dict]:
    return [json.loads(r.value) for r in read_topic(s, s.topic_alerts, timeout=5)]


def test_without_a_parameters_topic_the_job_runs_with_the_parameters_in_the_code(stack, caplog):
    """A stack whose parameters topic is gone (deleted by hand, another deployment's names) warns once
    and goes on: no parameters to apply, none to poll."""
    follower = ParamsFollower(stack.replace(topic_params="no-such-params-topic"))
    try:
        assert follower.initial() == {} and follower.poll() == {}
        assert "no topic no-such-params-topic" in caplog.text
    finally:
        follower.consumer.close()


def _plan_breaking(transactions, params):
    """big_amount's logic, but planning fails above a million: a value the ranges let through and the plan does not."""
    if params.threshold > 1e6:
        raise ValueError(f"threshold {params.threshold:g} does not fit the plan")
    from tests.detectors_for_tests import _big_amount
    return _big_amount(transactions, params)


def test_a_parameter_set_the_query_cannot_be_planned_with_is_refused_and_the_detector_keeps_its_version(
        stack, topics, spark, tmp_path, caplog):
    """Met at start (the compacted topic holds it) or while running: the detector keeps its last good
    version, one line says so, the running query is not stopped, and its alerts keep coming."""
    import dataclasses

    from common.param_records import ParamRecord
    from spark_job.supervision import FailedStart
    from tests.builders import txn
    from tests.detectors_for_tests import BIG_AMOUNT

    detector = dataclasses.replace(BIG_AMOUNT, detect=_plan_breaking)
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"), run_dir=tmp_path / "run")

    def record(version: int, threshold: float) -> dict:
        return {detector.name: ParamRecord(detector.name, {"threshold": threshold}, version, detector.version,
                                           "test", "a value that breaks the plan", "2026-12-02T00:00:00.000Z")}

    job = JobQueries(spark, [detector], s, RunOptions(checkpoint_root=tmp_path / "checkpoints", with_dlq=False))
    job.apply_params(record(1, 5e6))                      # at start: nothing running yet
    assert job.detectors[0].params_version == 0 and job.detectors[0].params.threshold == 900.0
    assert "parameters v1 of big_amount refused" in caplog.text
    queries = job.start_all()
    assert not [q for q in queries if isinstance(q, FailedStart)]
    try:
        run_id = queries[0].runId
        assert job.apply_params(record(2, 7e6)) == []        # while running: refused, not stopped
        assert "parameters v2 of big_amount refused" in caplog.text
        assert queries[0].isActive and job.running[queries[0].name].runId == run_id
        producer = make_producer(s)
        value = txn(1, amount=950.0)
        producer.send(s.topic_transactions, key=value["card_id"].encode(), value=json.dumps(value).encode())
        producer.flush()
        producer.close()
        got = wait_until(lambda: _alerts(s) or None, 120, "the alert of the version kept")
    finally:
        for query in job.running.values():
            query.stop()
    assert [(a["detector"], a["params_version"]) for a in got] == [("big_amount", 0)]
