"""The exactly-once alert writer: Kafka transactions from ``foreachBatch`` (docs/architecture.md, "Exactly once").

Spark's own Kafka sink is at-least-once: after a crash it re-runs the last micro-batch and writes its
rows again. This writer makes every micro-batch's output (alerts, dead-letter records) appear exactly
once to ``read_committed`` readers. The protocol, step by step:

1. **Fence.** At start, open a kafka-python producer with a stable ``transactional.id`` per writer
   (one per detector query) and call ``init_transactions()``. The broker bumps the producer epoch: any
   zombie writer with the same id (a driver that was SIGKILLed but whose process or requests linger)
   can no longer commit, and a transaction it left open is aborted.
2. **Recover.** Read the marker topic (compacted, one record per writer id) with ``read_committed``
   and keep the last committed ``(query_id, batch_id)`` of this writer. ``query_id`` is the id Spark
   keeps in the checkpoint's ``metadata`` file: a fresh checkpoint (new query id) restarts batch ids
   at 0, so a marker of an older checkpoint must not make us skip the new one's batches.
3. **Skip replays.** In ``foreachBatch(df, batch_id)``: if the marker's query id is this checkpoint's
   and ``batch_id <= last committed``, the batch was committed to Kafka before the crash and Spark is
   replaying it (its own commit log did not record it): write nothing.
4. **Write.** Otherwise ``begin_transaction()``; send every output row (alerts get ``detected_at``
   now); send the marker ``key = writer id, value = {query_id, batch_id}`` to the marker topic;
   ``commit_transaction()`` (which flushes, and fails if we were fenced).
5. **Fail loudly.** Any error aborts the transaction and is re-raised, so the streaming query stops
   with it instead of moving on; the next start re-runs the batch from the checkpoint.

Because the output of a batch and its marker commit atomically, a batch is either fully visible with
its marker or not at all: a crash at any point gives either "re-run and write" or "re-run and skip".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from common.contracts import format_event_time
from common.kafka_io import make_producer, read_topic
from common.settings import Settings, checkpoint_location

log = logging.getLogger(__name__)

ALERT_KIND = "alert"


@dataclass(frozen=True)
class Marker:
    query_id: str
    batch_id: int


def read_last_marker(settings: Settings, writer_id: str, timeout: float = 60.0) -> Marker | None:
    """The last committed marker of ``writer_id`` (read_committed), or None if it never committed."""
    last = None
    for record in read_topic(settings, settings.topic_alert_markers, timeout=timeout):
        if record.key is not None and record.key.decode() == writer_id and record.value is not None:
            value = json.loads(record.value)
            last = Marker(value["query_id"], int(value["batch_id"]))
    return last


def checkpoint_query_id(checkpoint: str | Path, spark=None) -> str:
    """The query id Spark stores in ``<checkpoint>/metadata`` (stable across restarts).

    With a Spark session the file is read through Hadoop's file system API, as Spark wrote it, so a
    checkpoint on HDFS or S3 (``s3a://``) works; without one (a writer driven by hand) from a local folder.
    """
    if spark is None:
        text = (Path(checkpoint) / "metadata").read_text()
    else:
        jvm = spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(checkpoint_location(checkpoint, "metadata"))
        stream = path.getFileSystem(spark._jsc.hadoopConfiguration()).open(path)
        try:
            text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
    return json.loads(text)["id"]


class ExactlyOnceWriter:
    """A ``foreachBatch`` function that writes each micro-batch in one Kafka transaction.

    The batch DataFrame has string columns ``kind``, ``topic``, ``key``, ``value``; rows of kind
    ``alert`` get ``detected_at`` (the time they are written) added to their JSON value.
    """

    def __init__(self, settings: Settings, writer_id: str, checkpoint_dir: str | Path,
                 transaction_timeout_ms: int = 60000):
        self.settings = settings
        self.writer_id = writer_id
        # Transactional ids are global to the cluster: scoped by the alerts topic, two deployments (or a
        # test beside `make demo`) on one broker never fence each other; one deployment's id is stable.
        self.transactional_id = f"fraud-writer.{settings.topic_alerts}.{writer_id}"
        self.checkpoint_dir = str(checkpoint_dir)   # a local folder or a URI (hdfs://, s3a://)
        self.transaction_timeout_ms = transaction_timeout_ms
        self.producer = None
        self.last: Marker | None = None
        self._query_id: str | None = None
        self.stats = {"batches_written": 0, "batches_skipped": 0, "records_written": 0}

    # -- steps 1 and 2 -------------------------------------------------------------------------
    def open(self) -> "ExactlyOnceWriter":
        from kafka.serializer import DefaultSerializer

        self.producer = make_producer(self.settings, transactional_id=self.transactional_id,
                                      transaction_timeout_ms=self.transaction_timeout_ms,
                                      value_serializer=DefaultSerializer(), linger_ms=20,
                                      batch_size=256 * 1024)
        self.producer.init_transactions()
        self.last = read_last_marker(self.settings, self.writer_id)
        log.info("writer %s fenced older producers; last committed batch: %s", self.writer_id, self.last)
        return self

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(timeout=10)
            self.producer = None

    @property
    def query_id(self) -> str:
        if self._query_id is None:
            self._query_id = checkpoint_query_id(self.checkpoint_dir)
        return self._query_id

    # -- steps 3, 4 and 5 ----------------------------------------------------------------------
    def __call__(self, batch_df, batch_id: int) -> None:
        if self.producer is None:
            self.open()
        if self._query_id is None:
            self._query_id = checkpoint_query_id(self.checkpoint_dir, batch_df.sparkSession)
        if self.last is not None and self.last.query_id == self.query_id and batch_id <= self.last.batch_id:
            self.stats["batches_skipped"] += 1
            log.warning("writer %s: batch %d already committed (last %d): skipped replay",
                        self.writer_id, batch_id, self.last.batch_id)
            return
        rows = batch_df.select("kind", "topic", "key", "value").collect()
        self.write_batch(((r.kind, r.topic, r.key, r.value) for r in rows), batch_id)

    def write_batch(self, rows: Iterable[tuple[str, str, str | None, str]], batch_id: int) -> int:
        producer = self.producer
        producer.begin_transaction()
        try:
            detected_at = format_event_time_now()
            count = 0
            for kind, topic, key, value in rows:
                if kind == ALERT_KIND:
                    value = with_detected_at(value, detected_at)
                producer.send(topic, key=key, value=value)
                count += 1
            marker = Marker(self.query_id, batch_id)
            producer.send(self.settings.topic_alert_markers, key=self.writer_id,
                          value=json.dumps({"query_id": marker.query_id, "batch_id": batch_id,
                                            "records": count, "committed_at": detected_at}))
            producer.commit_transaction()
        except BaseException:
            _abort_quietly(producer)
            raise
        self.last = marker
        self.stats["batches_written"] += 1
        self.stats["records_written"] += count
        return count


def with_detected_at(alert_json: str, detected_at: str) -> str:
    """Append ``detected_at`` to an alert's JSON object without re-parsing it."""
    return f'{alert_json[:-1]},"detected_at":"{detected_at}"}}'


def format_event_time_now() -> str:
    from datetime import datetime, timezone

    return format_event_time(datetime.now(timezone.utc))


def _abort_quietly(producer: Any) -> None:
    try:
        producer.abort_transaction()
    except Exception as error:  # the original error is the one worth raising
        log.error("abort_transaction failed after a failed batch: %s", error)

