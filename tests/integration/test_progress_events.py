"""common.progress_events against a real streaming query: progress as Spark's JSON, start and end."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import functions as F

from common.progress_events import JsonProgressListener
from common.waiting import wait_until


class Events:
    def __init__(self):
        self.lock = threading.Lock()
        self.progress: list[dict] = []
        self.started: list[tuple[str, str]] = []
        self.terminated: list[tuple[str, str | None]] = []

    def listener(self) -> JsonProgressListener:
        def keep(into):
            def add(*item):
                with self.lock:
                    into.append(item[0] if len(item) == 1 else item)
            return add
        return JsonProgressListener(keep(self.progress), on_started=keep(self.started),
                                    on_terminated=keep(self.terminated))

    def of(self, query_id: str) -> list[dict]:
        with self.lock:
            return [p for p in self.progress if p["id"] == query_id]


@pytest.fixture
def events(spark):
    events = Events()
    listener = events.listener()
    spark.streams.addListener(listener)
    yield events
    spark.streams.removeListener(listener)


def test_every_progress_arrives_as_sparks_json_with_the_observed_metrics(spark, events, tmp_path, unique):
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
            .observe("counts", F.count(F.lit(1)).alias("rows"), F.max("value").alias("last")))
    name = f"progress-{unique}"
    query = (rows.writeStream.format("noop").queryName(name).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        with_data = wait_until(lambda: [p for p in events.of(str(query.id)) if p["numInputRows"] > 0], 60,
                               "a progress event with rows")
    finally:
        query.stop()
    progress = with_data[0]
    assert progress["name"] == name and progress["runId"] == str(query.runId)
    assert progress["durationMs"]["triggerExecution"] >= 0 and progress["batchId"] >= 0
    assert progress["observedMetrics"]["counts"]["rows"] == progress["numInputRows"]
    assert (name, str(query.id)) in events.started
    wait_until(lambda: (str(query.id), None) in events.terminated, 30, "the stop to be reported without error")


def _fail(batch, batch_id):
    raise RuntimeError("the sink refused the batch")


def test_a_failed_query_is_reported_with_its_error(spark, events, tmp_path):
    query = (spark.readStream.format("rate").option("rowsPerSecond", 10).load().writeStream
             .foreachBatch(_fail).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        ended = wait_until(lambda: [e for q, e in events.terminated if q == str(query.id)], 60,
                           "the failure to be reported")
    finally:
        query.stop()
    assert "the sink refused the batch" in ended[0]
