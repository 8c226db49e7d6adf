"""Exactly-once alerts against the real broker and real Spark: crashes, replays and fencing.

The crash test SIGKILLs the whole detector job (Python driver, JVM and workers: its process group) at
random moments, several times, restarts it from its checkpoint, and then counts with a
``read_committed`` reader. The same run with Spark's built-in Kafka sink reports its duplicates.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kafka import TopicPartition

from common.contracts import alert_id
from common.kafka_io import make_consumer, make_producer, read_topic
from common.settings import REPO_ROOT
from common.waiting import wait_until
from deploy.processes import group_alive
from spark_job.alert_writer import ExactlyOnceWriter, read_last_marker
from tests.builders import encode, txn

TRANSACTIONS = 100_000
ALERT_EVERY = 50          # every 50th transaction is a big amount: 2,000 expected alerts
KILLS = 3
MAX_OFFSETS_PER_TRIGGER = 10_000
ARTIFACTS = REPO_ROOT / "artifacts" / "exactly-once"


def _settings_env(s, checkpoint_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"FRAUD_TOPIC_TRANSACTIONS": s.topic_transactions, "FRAUD_TOPIC_ALERTS": s.topic_alerts,
                "FRAUD_TOPIC_ALERT_MARKERS": s.topic_alert_markers, "FRAUD_TOPIC_DLQ": s.topic_dlq,
                "FRAUD_CHECKPOINT_ROOT": str(checkpoint_root), "FRAUD_KAFKA_BOOTSTRAP": s.kafka_bootstrap,
                "FRAUD_SPARK_LOG_LEVEL": "ERROR"})
    return env


def _start_driver(env: dict[str, str], sink: str, log_path: Path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.crash_driver", "big_amount", sink,
                                 str(MAX_OFFSETS_PER_TRIGGER)], cwd=REPO_ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started (the JVM, Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    wait_until(lambda: not group_alive(proc.pid), 30, "the killed job's processes to be gone", interval=0.1)


def _written_offsets(s, topic: str) -> int:
    """Records written to ``topic`` so far, committed or not (the high watermark, cheap to read)."""
    consumer = make_consumer(s, isolation_level="read_uncommitted")
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def _publish_input(s) -> set[str]:
    producer = make_producer(s, linger_ms=20, batch_size=256 * 1024)
    expected = set()
    for i in range(TRANSACTIONS):
        value = txn(i, card=f"card-{i % 5000:05d}", amount=950.0 if i % ALERT_EVERY == 0 else 20.0)
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
        if value["amount"] >= 900:
            expected.add(alert_id("big_amount", [value["txn_id"]]))
    producer.flush()
    producer.close()
    return expected


# The comparison with Spark's own Kafka sink (how many duplicates the same kills make) is a slow run:
# make test-slow (its figures are in docs/performance.md).
@pytest.mark.parametrize("sink", ["exactly-once", pytest.param("spark-kafka", marks=pytest.mark.slow)])
def test_sigkilled_driver_restarts_without_losing_or_duplicating_alerts(stack, topics, tmp_path, sink):
    s = stack.replace(topic_transactions=topics("transactions", partitions=4), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    expected = _publish_input(s)
    assert len(expected) >= 1000
    env = _settings_env(s, tmp_path / "checkpoints")
    log_path = tmp_path / "driver.log"
    rng = random.Random(20261122)
    kill_points = []

    for _ in range(KILLS):
        proc = _start_driver(env, sink, log_path)
        # A random moment: once the job has written a random number of new records to the alerts topic
        # (so the kill often lands inside an open transaction).
        target = _written_offsets(s, s.topic_alerts) + rng.randint(1, len(expected) // (KILLS + 1))
        wait_until(lambda: proc.poll() is not None or _written_offsets(s, s.topic_alerts) >= target, 300,
                   "the detector job to write alerts", interval=0.05)
        assert proc.poll() is None, f"the job died by itself: {log_path.read_text()[-2000:]}"
        _kill_group(proc)
        kill_points.append(target)

    proc = _start_driver(env, sink, log_path)
    try:
        wait_until(lambda: len({json.loads(r.value)["alert_id"] for r in read_topic(s, s.topic_alerts)})
                   >= len(expected) or proc.poll() is not None, 600, "every expected alert")
        assert proc.poll() is None, f"the job died by itself: {log_path.read_text()[-2000:]}"
    finally:
        _kill_group(proc)

    ids = [json.loads(r.value)["alert_id"] for r in read_topic(s, s.topic_alerts, isolation_level="read_committed")]
    counts = Counter(ids)
    figures = {"sink": sink, "transactions": TRANSACTIONS, "kills": KILLS, "expected": len(expected),
               "present": len(counts), "missing": len(expected - set(counts)),
               "duplicates": sum(n - 1 for n in counts.values()), "unexpected": len(set(counts) - expected),
               "kill_points_records_written": kill_points}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"crash-{sink}.json").write_text(json.dumps(figures, indent=2))
    print(f"\ncrash test {sink}: {figures}")

    assert figures["missing"] == 0 and figures["unexpected"] == 0
    if sink == "exactly-once":
        assert figures["duplicates"] == 0


def test_a_second_writer_with_the_same_id_fences_the_first(stack, topics, tmp_path):
    s = stack.replace(topic_alerts=topics("alerts"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    checkpoint = tmp_path / "cp"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": "query-1"}))
    rows = [("alert", s.topic_alerts, "card-1", '{"alert_id":"a1"}')]

    first = ExactlyOnceWriter(s, "fencing-test", checkpoint).open()
    first.write_batch(rows, batch_id=0)
    second = ExactlyOnceWriter(s, "fencing-test", checkpoint).open()   # init_transactions fences `first`
    assert second.last is not None and second.last.batch_id == 0       # it recovered the marker

    from kafka.errors import KafkaError
    with pytest.raises(KafkaError):
        first.write_batch([("alert", s.topic_alerts, "card-1", '{"alert_id":"zombie"}')], batch_id=1)
    second.write_batch([("alert", s.topic_alerts, "card-1", '{"alert_id":"a2"}')], batch_id=1)
    first.close()
    second.close()

    values = [json.loads(r.value)["alert_id"] for r in read_topic(s, s.topic_alerts)]
    assert values == ["a1", "a2"]
    assert read_last_marker(s, "fencing-test").batch_id == 1
