"""The exactly-once writer's memory is bounded by bytes, not by the micro-batch, and its transaction's time
by the batch: a flood of large invalid records (one micro-batch of ~360 MB of dead letters) through the
real broker and Spark, with the driver's heap fixed at 512 MB and the least transaction timeout far
shorter than sending them takes, arrives in the dead-letter topic exactly once (``read_committed``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from common.kafka_io import assigned_consumer, make_producer
from common.settings import REPO_ROOT
from common.waiting import wait_until
from spark_job.alert_writer import read_last_marker
from tests.integration.test_exactly_once import _kill_group, _settings_env

RECORDS = 16_000
RECORD_BYTES = 17_000           # above the DLQ's 16 KiB cap: every dead letter carries the largest copy
DRIVER_HEAP = "512m"            # Spark's smallest driver; the batch's dead letters alone are ~360 MB
# The batch takes longer than this to send on any machine: with it as its timeout the broker would abort
# the transaction and every re-run alike (its cleanup looks every 10 s); the writer sizes it up first.
LEAST_TRANSACTION_TIMEOUT_MS = 2000


def _dead_letter_sources(s) -> Counter:
    """(source partition, source offset) of every committed dead letter, without keeping the records."""
    consumer, tps = assigned_consumer(s, s.topic_dlq)
    seen: Counter = Counter()
    try:
        end = consumer.end_offsets(tps)
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for batch in consumer.poll(timeout_ms=500).values():
                for record in batch:
                    value = json.loads(record.value)
                    assert value["value_truncated"] and value["value_size"] == RECORD_BYTES
                    seen[(value["source_partition"], value["source_offset"])] += 1
    finally:
        consumer.close()
    return seen


def test_a_flood_of_large_invalid_records_is_dead_lettered_exactly_once_by_a_small_driver(stack, topics, tmp_path):
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts"),
                      topic_dlq=topics("dlq", partitions=3),
                      topic_alert_markers=topics("markers", cleanup__policy="compact"))
    producer = make_producer(s, linger_ms=20)
    for i in range(RECORDS):       # not even UTF-8, and far over the 16 KiB a transaction may take
        producer.send(s.topic_transactions, key=f"card-{i:05d}".encode(), value=os.urandom(RECORD_BYTES))
    producer.flush()
    producer.close()

    env = _settings_env(s, tmp_path / "checkpoints")
    env.update(FRAUD_SPARK_DRIVER_MEMORY=DRIVER_HEAP, FRAUD_RUN_DIR=str(tmp_path / "run"),
               FRAUD_WRITER_TRANSACTION_TIMEOUT_MS=str(LEAST_TRANSACTION_TIMEOUT_MS))
    log_path = tmp_path / "driver.log"
    with open(log_path, "ab") as log:     # one micro-batch takes the whole flood (200,000 offsets at most)
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.crash_driver", "dlq", "exactly-once",
                                 "200000"], cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or read_last_marker(s, "dlq", timeout=30) is not None, 600,
                   "the flood's micro-batch committed")
        assert proc.poll() is None, f"the job died: {log_path.read_text()[-3000:]}"
    finally:
        _kill_group(proc)

    sources = _dead_letter_sources(s)
    assert len(sources) == RECORDS
    assert set(sources.values()) == {1}
    log_text = log_path.read_text()
    assert "OutOfMemoryError" not in log_text
    assert "its transaction gets" in log_text and "UndeliveredRecordsError" not in log_text
    assert "ProducerFenced" not in log_text and "InvalidProducerEpoch" not in log_text
