"""The exactly-once writer's recovery paths on the real broker and real Spark, each driven on purpose:
a replayed batch that was already committed is skipped (a crash between Kafka's commit and Spark's),
a checkpoint restored from an older copy stops the query with one clear line instead of losing alerts,
and the documented way on from there (a fresh checkpoint from the marker's offsets) loses and
duplicates nothing. Counted with ``read_committed``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from common.contracts import alert_id
from common.kafka_io import make_producer, read_topic
from common.settings import REPO_ROOT
from common.waiting import wait_until
from spark_job.alert_writer import read_last_marker
from tests.builders import encode, txn
from tests.integration.test_exactly_once import _kill_group, _settings_env

QUERY = "detector-big_amount"


def _driver(env, log_path: Path, max_offsets: int, *extra: str) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.crash_driver", "big_amount",
                                 "exactly-once", str(max_offsets), *extra], cwd=REPO_ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _publish(s, first: int, count: int, big_every: int) -> set[str]:
    """Transactions ``first`` .. ``first + count - 1``; every ``big_every``-th is an alert of big_amount."""
    producer = make_producer(s, linger_ms=20)
    expected = set()
    for i in range(first, first + count):
        value = txn(i, amount=950.0 if i % big_every == 0 else 20.0)
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
        if i % big_every == 0:
            expected.add(alert_id("big_amount", [value["txn_id"]]))
    producer.flush()
    producer.close()
    return expected


def _alert_counts(s) -> Counter:
    return Counter(json.loads(r.value)["alert_id"]
                   for r in read_topic(s, s.topic_alerts, isolation_level="read_committed"))


def _settings(stack, topics, partitions: int):
    return stack.replace(topic_transactions=topics("transactions", partitions=partitions),
                         topic_alerts=topics("alerts"), topic_dlq=topics("dlq"),
                         topic_alert_markers=topics("markers", cleanup__policy="compact"))


def _env(s, tmp_path: Path) -> dict[str, str]:
    env = _settings_env(s, tmp_path / "checkpoints")
    env["FRAUD_RUN_DIR"] = str(tmp_path / "run")      # the writer's stats land here
    return env


def _writer_stats(tmp_path: Path) -> dict:
    path = tmp_path / "run" / "writers" / f"{QUERY}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_batch_committed_before_a_crash_is_skipped_when_spark_replays_it(stack, topics, tmp_path):
    s = _settings(stack, topics, partitions=2)
    expected = _publish(s, 0, 2_000, big_every=20)
    env, log_path = _env(s, tmp_path), tmp_path / "driver.log"
    checkpoint = tmp_path / "checkpoints" / QUERY

    crashing = _driver(env, log_path, 250, "--crash-after-commit", "2")
    try:
        wait_until(lambda: crashing.poll() is not None, 300, "the job to kill itself after committing batch 2")
    finally:
        _kill_group(crashing)
    # Kafka has batch 2 (its marker), Spark's commit log does not: the restart replays it.
    assert read_last_marker(s, QUERY).batch_id == 2
    assert (checkpoint / "offsets" / "2").exists() and not (checkpoint / "commits" / "2").exists()

    restarted = _driver(env, log_path, 250)
    try:
        wait_until(lambda: restarted.poll() is not None or len(_alert_counts(s)) >= len(expected), 300,
                   "every expected alert")
        assert restarted.poll() is None, f"the job died: {log_path.read_text()[-3000:]}"
        stats = wait_until(lambda: _writer_stats(tmp_path).get("batches_written", 0) >= 5 and _writer_stats(tmp_path),
                           60, "the writer's stats")
    finally:
        _kill_group(restarted)

    counts = _alert_counts(s)
    assert set(counts) == expected
    assert max(counts.values()) == 1
    assert stats["batches_skipped"] == 1          # the replayed batch 2, not written again
    assert stats["batches_written"] == 5          # batches 3..7 of 250 records
    assert set(stats["recent_phases_ms"]) == {"run_ms", "fetch_send_ms", "commit_ms"}   # where addBatch went


def test_a_checkpoint_restored_from_an_older_copy_stops_the_query_instead_of_losing_alerts(stack, topics, tmp_path):
    s = _settings(stack, topics, partitions=1)
    env, log_path = _env(s, tmp_path), tmp_path / "driver.log"
    checkpoint = tmp_path / "checkpoints" / QUERY
    snapshot = tmp_path / "snapshot"

    def run_until_committed(batch: int, *extra: str) -> None:
        proc = _driver(env, log_path, 100, *extra)
        try:
            wait_until(lambda: proc.poll() is not None or (checkpoint / "commits" / str(batch)).exists(), 300,
                       f"batch {batch} committed")
            assert proc.poll() is None, f"the job died: {log_path.read_text()[-3000:]}"
        finally:
            _kill_group(proc)
        assert not (checkpoint / "offsets" / str(batch + 1)).exists()

    first = _publish(s, 0, 600, big_every=10)                  # batches 0..5 of 100 records
    run_until_committed(5)
    shutil.copytree(checkpoint, snapshot)
    second = _publish(s, 600, 500, big_every=10)               # batches 6..10
    run_until_committed(10)
    assert _alert_counts(s) == Counter(first | second)

    shutil.rmtree(checkpoint)
    shutil.copytree(snapshot, checkpoint)                      # the checkpoint of batch 5 is back
    third = _publish(s, 1_100, 300, big_every=10)
    # With more records per batch, batch 6 covers offsets 600..1400: skipping it by its id (6 <= 10)
    # would lose the 30 alerts of the third part.
    proc = _driver(env, log_path, 10_000)
    try:
        wait_until(lambda: proc.poll() is not None, 300, "the query to stop on the restored checkpoint")
    finally:
        _kill_group(proc)
    log = log_path.read_text()
    assert "went backwards (batch 6 is behind the last committed batch 10" in log
    assert _alert_counts(s) == Counter(first | second)         # nothing written, nothing twice

    # The way on (docs/architecture.md, "Exactly once"): a fresh checkpoint from the marker's offsets.
    marker = read_last_marker(s, QUERY)
    assert marker.end_offsets == [{s.topic_transactions: {"0": 1_100}}]
    shutil.rmtree(checkpoint)
    proc = _driver(env, log_path, 10_000, "--starting-offsets", json.dumps(marker.end_offsets[0]))
    try:
        wait_until(lambda: proc.poll() is not None or len(_alert_counts(s)) >= len(first | second | third), 300,
                   "the third part's alerts")
        assert proc.poll() is None, f"the job died: {log_path.read_text()[-3000:]}"
    finally:
        _kill_group(proc)
    assert _alert_counts(s) == Counter(first | second | third)
