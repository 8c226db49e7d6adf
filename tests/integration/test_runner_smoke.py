"""The runner end to end on the real broker and Spark, with a stateless test detector."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from common.kafka_io import make_producer, read_topic
from common.contracts import ALERT_TRIGGER_FIELDS, alert_id, validate_alert
from common.waiting import wait_until
from detectors import harness, registry
from spark_job.queries import RunOptions, query_name, start_detectors
from spark_job.alert_writer import read_last_marker
from tests.detectors_for_tests import BIG_AMOUNT
from tests.builders import T0, encode, txn


@pytest.mark.parametrize("shared", [False, True], ids=["query-per-detector", "shared-query"])
def test_alerts_and_dead_letters_arrive_once_each_in_a_fault_free_run(stack, topics, spark, tmp_path, shared):
    s = stack.replace(topic_transactions=topics("transactions", partitions=4), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    producer = make_producer(s)
    # big amounts at merchant m-{i}, every third of them online (no location)
    values = [txn(i, amount=950.0, merchant=f"m-{i}", channel=("ecom", "pos", "atm")[i // 10 % 3])
              if i % 10 == 0 else txn(i, amount=12.0) for i in range(300)]
    for value in values:
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.send(s.topic_transactions, key="card-x", value=b"{not json")
    producer.send(s.topic_transactions, key="card-00001", value=encode(txn(1000, card="card-00001", amount=-5)))
    producer.flush()
    producer.close()

    queries = start_detectors(spark, [BIG_AMOUNT], s, RunOptions(checkpoint_root=tmp_path, shared=shared))
    try:
        got = wait_until(lambda: _alerts(s) if len(_alerts(s)) >= 30 else None, 120, "30 alerts")
        dlq = read_topic(s, s.topic_dlq, min_records=2, timeout=120)
        if shared:   # the detector and the dead-letter branch read and validate each batch once
            plan = queries[0]._jsq.explainInternal(False)
            assert plan.count("MicroBatchScan") == 1 and plan.count("ReusedExchange") == 1, plan
    finally:
        for q in queries:
            q.stop()
    expected = {alert_id("big_amount", [v["txn_id"]]) for v in values if v["amount"] >= 900}
    assert sorted(a["alert_id"] for a in got) == sorted(expected)
    assert all(a["detected_at"] and a["event_time"].endswith("Z") for a in got)
    by_txn = {v["txn_id"]: v for v in values}
    for a in got:                          # the triggering transaction's context, in the contract
        validate_alert(a)
        trigger = by_txn[a["txn_ids"][-1]]
        assert {n: a.get(n) for n in ALERT_TRIGGER_FIELDS} == {n: trigger[n] for n in ALERT_TRIGGER_FIELDS}
    reasons = sorted(json.loads(r.value)["reason"] for r in dlq)
    assert reasons == ["amount is negative", "value is not valid JSON"]


def test_a_checkpoint_root_given_as_a_uri_holds_the_checkpoints(stack, topics, spark, tmp_path):
    """FRAUD_CHECKPOINT_ROOT may be a file system URI (hdfs://, s3a://; file:// here): the queries
    checkpoint there, and the exactly-once writer reads the query id back."""
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      checkpoint_root=f"file://{tmp_path}/checkpoints/")
    producer = make_producer(s)
    for i in range(3):
        value = txn(i, amount=950.0, merchant=f"m-{i}")
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.flush()
    producer.close()

    [query] = start_detectors(spark, [BIG_AMOUNT], s, RunOptions(with_dlq=False))
    try:
        wait_until(lambda: harness.raise_if_failed(query) or len(_alerts(s)) >= 3, 120, "3 alerts")
    finally:
        query.stop()
    name = query_name(BIG_AMOUNT)
    metadata = json.loads((tmp_path / "checkpoints" / name / "metadata").read_text())
    assert read_last_marker(s, name).query_id == metadata["id"]
    # a file:// root is read directly; any other scheme through Hadoop's file system, as here
    from spark_job.alert_writer import read_through_hadoop

    assert json.loads(read_through_hadoop(f"{s.checkpoint_root}{name}", "metadata", spark))["id"] == metadata["id"]


def _alerts(s):
    return [json.loads(r.value) for r in read_topic(s, s.topic_alerts)]


def test_stateful_detectors_of_a_shared_query_read_one_exchange_and_all_get_the_watermark(stack, topics, spark,
                                                                                         tmp_path):
    """double_swipe (a keyed pair operator) and velocity (a keyed burst operator) in one query: one scan, no shuffle of
    their own (one shuffle partition), and each operator gets the watermark: both evict their state once the
    tick's event time passes it."""
    s = stack.replace(topic_transactions=topics("transactions", partitions=4), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    swipes = [txn(1, card="card-ds", amount=42.0, merchant="m-ds"), txn(2, card="card-ds", amount=42.0, merchant="m-ds")]
    burst = [txn(10 + k, card="card-vel", amount=1.0 + k / 10, channel="ecom", seconds=100 + 20 * k) for k in range(5)]
    tick = harness.watermark_tick(T0 + timedelta(hours=1))
    producer = make_producer(s)
    for value in swipes + burst + [tick]:
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.flush()
    producer.close()

    detectors = [registry.get("double_swipe"), registry.get("velocity")]
    [query] = start_detectors(spark, detectors, s, RunOptions(checkpoint_root=tmp_path, shared=True))
    try:
        got = wait_until(lambda: alerts if len(alerts := _alerts(s)) >= 2 else None, 120, "both alerts")
        wait_until(lambda: _removed(query) == [True, True], 60, "both operators to evict state")
        plan = query._jsq.explainInternal(False)
    finally:
        query.stop()
    assert sorted(a["detector"] for a in got) == ["double_swipe", "velocity"]
    # one read of the source (a data-free batch's plan has an empty LocalTableScan in its place)
    assert plan.count("MicroBatchScan") + plan.count("LocalTableScan") == 1, plan
    if s.spark_shuffle_partitions == 1:
        assert "REQUIRED_BY_STATEFUL_OPERATOR" not in plan, plan


def _removed(query) -> list[bool]:
    """For each stateful operator, whether it has evicted state rows so far."""
    ops = [p["stateOperators"] for p in query.recentProgress]
    return [any(o[i]["numRowsRemoved"] for o in ops if len(o) > i) for i in range(max(map(len, ops), default=0))]
