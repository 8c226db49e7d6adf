"""Bad input becomes dead-letter records with a reason; good input is processed; nothing is lost.

Property-based: hypothesis generates thousands of records, mostly valid, many broken in one of the
ways a real topic sees (wrong types, missing fields, bad timestamps, broken JSON, non-UTF-8, oversized
values, wrong keys). ``common.contracts.decode_transaction`` is the specification; the Spark validation
must agree with it, and the running pipeline must dead-letter exactly the records it rejects.
"""

from __future__ import annotations

import base64
import json
import random
from datetime import datetime, timezone

from hypothesis import HealthCheck, Phase, given, settings as hsettings
from hypothesis import strategies as st

from common.contracts import ContractError, alert_id, decode_transaction
from common.kafka_io import make_producer, read_topic
from spark_job.parsing import with_validation
from spark_job.queries import RunOptions, start_detectors
from detectors.base import TRANSACTION_SCHEMA
from producers.simulator import SimConfig, Simulator
from tests.strategies import kafka_records, valid_transaction

RECORD_TIME = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def slow(max_examples: int):
    """Each example runs Spark: few examples, no per-example deadline, reproducible."""
    return hsettings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                     max_examples=max_examples, database=None,
                     phases=[Phase.explicit, Phase.generate])  # shrinking would re-run Spark for minutes


def expected_reason(key: bytes | None, value: bytes | None) -> str | None:
    try:
        decode_transaction(value, key=key, record_time=RECORD_TIME, check_key=True)
        return None
    except ContractError as error:
        return str(error).split(":")[0]


@slow(max_examples=8)
@given(st.integers(0, 2**32))
def test_spark_validation_agrees_with_the_contract(spark, seed):
    records = kafka_records(random.Random(seed), 400)
    got = {r.offset: r._reason for r in _validated(spark, records).select("offset", "_reason").collect()}
    for offset, (key, value) in enumerate(records):
        want = expected_reason(key, value)
        reason = got[offset]
        assert (reason and reason.split(":")[0]) == want, (key, value[:300] if value else value)


def _validated(spark, records):
    rows = [(key, value, "transactions", 0, offset, RECORD_TIME.replace(tzinfo=None))
            for offset, (key, value) in enumerate(records)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                     "timestamp timestamp")
    return with_validation(df)


def test_both_parsing_paths_give_the_same_transactions(spark):
    """Canonical records (what the producers write) are read by from_json, the rest through a VARIANT:
    the same record on both paths (a leading space sends it down the general one) gives the same row."""
    rng = random.Random(7)
    txns = [valid_transaction(rng) for _ in range(300)]
    txns[0].update(amount=0, lat=-0.5, lon=180)                     # integral amount, edge coordinates
    txns[1].update(amount=12.1, lat=None, lon=None)
    for txn in txns[2:20]:
        txn.pop("lat"), txn.pop("lon")                              # e-commerce without coordinates
    canonical = [(t["card_id"].encode(), json.dumps(t, separators=(",", ":")).encode()) for t in txns]
    general = [(key, b" " + value) for key, value in canonical]
    simulated = [(json.loads(v)["card_id"].encode(), v)
                 for batch in Simulator(SimConfig(seed=5, customers=300)).take(300) for v in batch.values]
    columns = ["offset", "_canonical", "_reason", *TRANSACTION_SCHEMA.fieldNames()]
    fast = _validated(spark, canonical + simulated).select(*columns).collect()
    slow_rows = _validated(spark, general).select(*columns).collect()

    assert all(row._canonical and row._reason is None for row in fast)
    assert not any(row._canonical for row in slow_rows) and all(row._reason is None for row in slow_rows)
    strip = lambda row: row.asDict() | {"_canonical": None}        # noqa: E731
    assert [strip(row) for row in fast[:len(general)]] == [strip(row) for row in slow_rows]


@slow(max_examples=1)
@given(st.integers(0, 2**32))
def test_every_bad_record_is_dead_lettered_and_every_good_one_processed(stack, topics, spark, tmp_path_factory,
                                                                       seed):
    records = kafka_records(random.Random(seed), 2500)
    from tests.detectors_for_tests import EVERY_TRANSACTION

    s = stack.replace(topic_transactions=topics("transactions", partitions=3), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    producer = make_producer(s, max_request_size=4 * 1024 * 1024)
    sent = []
    for key, value in records:
        metadata = producer.send(s.topic_transactions, key=key, value=value).get(timeout=30)
        # The contract judges event times against the record's broker timestamp.
        record_time = datetime.fromtimestamp(metadata.timestamp / 1000, timezone.utc)
        try:
            txn = decode_transaction(value, key=key, record_time=record_time, check_key=True)
            sent.append(("good", txn["txn_id"], metadata))
        except ContractError as error:
            sent.append(("bad", str(error).split(":")[0], metadata))
    producer.close()
    good = sorted(txn_id for kind, txn_id, _ in sent if kind == "good")  # generated ids may repeat
    bad = {(m.partition, m.offset): reason for kind, reason, m in sent if kind == "bad"}
    assert len(good) > 500 and len(bad) > 500

    queries = start_detectors(spark, [EVERY_TRANSACTION], s,
                              RunOptions(checkpoint_root=tmp_path_factory.mktemp("checkpoints")))
    try:
        dlq = read_topic(s, s.topic_dlq, min_records=len(bad), timeout=240)
        alerts = read_topic(s, s.topic_alerts, min_records=len(good), timeout=240)
    finally:
        for query in queries:
            query.stop()

    dead = {}
    for record in dlq:
        letter = json.loads(record.value)
        dead[(letter["source_partition"], letter["source_offset"])] = letter
    assert set(dead) == set(bad)                                   # every bad one, nothing else
    for position, letter in dead.items():
        assert letter["reason"].split(":")[0] == bad[position]
        assert letter["source_topic"] == s.topic_transactions
        original = base64.b64decode(letter["value_base64"])
        assert letter["value_truncated"] or len(original) == letter["value_size"]
    processed = sorted(json.loads(r.value)["txn_ids"][0] for r in alerts)
    assert processed == good                                       # every good one, once
    assert sorted(json.loads(r.value)["alert_id"] for r in alerts) == sorted(
        alert_id("every_transaction", [t]) for t in good)
