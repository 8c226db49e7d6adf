"""A stopped query's exactly-once writer lets its Kafka producer go: no network thread outlives the query
(spark_job.writer_closing), on the real broker and Spark."""

from __future__ import annotations

import threading

from common.waiting import wait_until
from spark_job.queries import RunOptions, start_detectors
from tests.detectors_for_tests import BIG_AMOUNT


def _producer_threads() -> set[str]:
    return {t.name for t in threading.enumerate()
            if t.name.startswith("kafka-python-producer-") and t.name.endswith("-network-thread")}


def test_stopping_the_queries_closes_their_writers_producers(stack, topics, spark, tmp_path):
    s = stack.replace(topic_transactions=topics("transactions"), topic_alerts=topics("alerts"),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    before = _producer_threads()
    queries = start_detectors(spark, [BIG_AMOUNT], s, RunOptions(checkpoint_root=tmp_path))
    try:
        started = _producer_threads() - before
        assert len(started) == len(queries) == 2          # the detector's query and the dead letters'
    finally:
        for query in queries:
            query.stop()
    wait_until(lambda: not (_producer_threads() & started), 60, "the stopped queries' producers to close")
