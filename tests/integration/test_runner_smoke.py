"""The runner end to end on the real broker and Spark, with a stateless test detector."""

from __future__ import annotations

import json

import pytest

from common.kafka_io import make_producer, read_topic
from common.contracts import ALERT_TRIGGER_FIELDS, alert_id, validate_alert
from common.waiting import wait_until
from detectors.runner import RunOptions, start_detectors
from tests.detectors_for_tests import BIG_AMOUNT
from tests.factories import encode, txn


@pytest.mark.parametrize("shared", [False, True], ids=["query-per-detector", "shared-query"])
def test_alerts_and_dead_letters_arrive_exactly_once(stack, topics, spark, tmp_path, shared):
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


def _alerts(s):
    return [json.loads(r.value) for r in read_topic(s, s.topic_alerts)]
