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
3. **Skip replays.** In ``foreachBatch(df, batch_id)``: if the marker's query id is this checkpoint's,
   ``batch_id`` is the marker's and so are the batch's end offsets (the checkpoint's
   ``offsets/<batch_id>``), the batch was committed to Kafka before the crash and Spark is replaying it
   (its own commit log did not record it): write nothing, count it (``batches_skipped``). A batch id
   below the marker's, or the same id with other offsets, cannot happen in Spark's recovery (it re-runs
   at most the last planned batch, with its planned offsets): the checkpoint went backwards (restored
   from an older copy, partly lost), and skipping would lose alerts silently. Raise
   ``CheckpointWentBackError`` (one line: what happened, what to do) instead.
4. **Write.** Otherwise ``begin_transaction()``; send every output row (alerts get ``detected_at``
   now), pulled from Spark a bounded number of bytes at a time (``StagedBatch``); send the marker
   ``key = writer id, value = {query_id, batch_id, end_offsets, ...}`` to the marker topic;
   ``commit_transaction()`` (which flushes, and fails if we were fenced). The broker aborts a
   transaction open longer than its timeout, and the re-run would time out the same way: a batch staged
   larger than the timeout allows opens the producer again with a longer one first
   (``transaction_timeout_for``; step 1 again, nothing of this batch sent yet).
5. **Fail loudly.** Any error aborts the transaction and is re-raised, so the streaming query stops
   with it instead of moving on; the next start re-runs the batch from the checkpoint.

Because the output of a batch and its marker commit atomically, a batch is either fully visible with
its marker or not at all: a crash at any point gives either "re-run and write" or "re-run and skip".
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kafka.errors import KafkaError

from common.contracts import format_event_time
from common.kafka_io import make_producer, read_topic
from common.settings import Settings, checkpoint_location, local_folder

log = logging.getLogger(__name__)

ALERT_KIND = "alert"


@dataclass(frozen=True)
class Marker:
    query_id: str
    batch_id: int
    end_offsets: list | None = None    # the batch's offsets/<batch_id> source lines; None in older markers


class CheckpointWentBackError(RuntimeError):
    """The checkpoint is behind what this writer already committed to Kafka (docs/architecture.md,
    "Exactly once": what a lost checkpoint means and how to go on)."""


def read_last_marker(settings: Settings, writer_id: str, timeout: float = 60.0) -> Marker | None:
    """The last committed marker of ``writer_id`` (read_committed), or None if it never committed."""
    last = None
    for record in read_topic(settings, settings.topic_alert_markers, timeout=timeout):
        if record.key is not None and record.key.decode() == writer_id and record.value is not None:
            value = json.loads(record.value)
            last = Marker(value["query_id"], int(value["batch_id"]), value.get("end_offsets"))
    return last


def replay_action(last: Marker | None, query_id: str, batch_id: int, end_offsets: list | None,
                  writer_id: str = "", checkpoint: str = "") -> str:
    """``"write"`` or ``"skip"`` for batch ``batch_id`` of query ``query_id`` ending at ``end_offsets``,
    given the writer's last committed marker; raises ``CheckpointWentBackError`` when the checkpoint is
    behind the marker. A marker without offsets (written before they were kept) skips by batch id."""
    if last is None or last.query_id != query_id or batch_id > last.batch_id:
        return "write"
    if batch_id == last.batch_id and (last.end_offsets is None or last.end_offsets == end_offsets):
        return "skip"
    what = (f"batch {batch_id} ends at offsets {json.dumps(end_offsets)}, not at the committed batch's "
            f"{json.dumps(last.end_offsets)}" if batch_id == last.batch_id
            else f"batch {batch_id} is behind the last committed batch {last.batch_id}")
    raise CheckpointWentBackError(
        f"writer {writer_id}: the checkpoint {checkpoint} went backwards ({what}; restored from an older copy "
        f"or partly lost): its batches' output is already in Kafka, so nothing is written. Restore the latest "
        f"checkpoint, or move this one away and start the query again with --starting-offsets "
        f"'{json.dumps(_only_source(last.end_offsets))}' (no duplicates; the detectors' state starts empty), "
        f"see docs/architecture.md \"Exactly once\"")


def _only_source(end_offsets: list | None):
    return end_offsets[0] if end_offsets and len(end_offsets) == 1 else end_offsets


def read_checkpoint_file(checkpoint: str | Path, name: str, spark=None) -> str:
    """The text of ``<checkpoint>/<name>``. A checkpoint on another file system (HDFS, S3 as ``s3a://``) is
    read through Hadoop's file system API with the Spark session, as Spark wrote it; a local one directly
    (the writer reads a file per batch: through the JVM it is a dozen py4j round trips, 10-130 ms on two
    busy cores)."""
    local = local_folder(checkpoint)
    if spark is None or local is not None:
        return ((local or Path(checkpoint)) / name).read_text()
    return read_through_hadoop(checkpoint, name, spark)


def read_through_hadoop(checkpoint: str | Path, name: str, spark) -> str:
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(checkpoint_location(checkpoint, name))
    stream = path.getFileSystem(spark._jsc.hadoopConfiguration()).open(path)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def checkpoint_query_id(checkpoint: str | Path, spark=None) -> str:
    """The query id Spark stores in ``<checkpoint>/metadata`` (stable across restarts)."""
    return json.loads(read_checkpoint_file(checkpoint, "metadata", spark))["id"]


def parse_offsets_file(text: str) -> list:
    """The end offsets of a batch from its ``offsets/<batch_id>`` file: a version line, the batch's
    metadata line, then one line per source (its JSON offsets, or ``-`` for a source with none)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"not a Spark offsets file: {text[:80]!r}")
    return [None if line.strip() == "-" else json.loads(line) for line in lines[2:] if line.strip()]


def checkpoint_batches(checkpoint: str | Path) -> tuple[list[int], list[int]] | None:
    """The planned and the committed batch ids of a local checkpoint, in order (None when it is not local)."""
    folder = local_folder(checkpoint)
    if folder is None:
        return None

    def ids(log: Path) -> list[int]:
        return sorted(int(p.name) for p in log.iterdir() if p.name.isdigit()) if log.is_dir() else []
    return ids(folder / "offsets"), ids(folder / "commits")


def batch_end_offsets(checkpoint: str | Path, batch_id: int, spark=None) -> list:
    """The end offsets Spark planned for ``batch_id`` (written before the batch runs)."""
    return parse_offsets_file(read_checkpoint_file(checkpoint, f"offsets/{batch_id}", spark))


def fetch_partitions(rows: int, total_bytes: int, largest: int, max_bytes: int) -> int:
    """How many pieces the writer pulls a batch's output in so that each holds about ``max_bytes`` at
    most: rows are dealt round-robin, so a piece holds up to ``ceil(rows / n)`` rows of up to ``largest``
    bytes each."""
    if rows <= 0 or total_bytes <= max_bytes:
        return 1
    per_piece = max(1, max_bytes // max(1, largest))
    return max(1, min(rows, math.ceil(rows / per_piece)))


class StagedBatch:
    """A micro-batch's ``(kind, topic, key, value)`` rows, of which the driver holds about ``max_bytes`` at once.

    ``collect()`` held the whole batch on the driver (a flood of large invalid records ran it out of
    memory). So the batch runs once into Spark's local disk (``localCheckpoint``, DISK_ONLY: the stateful
    plan is not run twice), before the transaction opens, and its rows are measured on the way; ``rows()``
    then brings them to the driver one piece at a time (``toLocalIterator``): one piece when the batch
    is small, round-robin pieces of about ``max_bytes`` when it is not.
    """

    def __init__(self, batch_df, max_bytes: int):
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        # Bytes, which a UTF-8 string knows; its length in characters would be counted by reading it.
        size = F.octet_length("value") + F.coalesce(F.octet_length("key"), F.lit(0))
        # Measured as they are staged (the plan's observed metrics), not by another job over the rows.
        observed = batch_df.select("kind", "topic", "key", "value").observe(
            "writer_rows", F.count(F.lit(1)).alias("rows"), F.sum(size).alias("bytes"), F.max(size).alias("largest"))
        self.staged = observed.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
        stats = observed._jdf.queryExecution().observedMetrics().get("writer_rows").get()
        rows, total, largest = (stats.getAs(name) for name in ("rows", "bytes", "largest"))
        self.row_count, self.bytes = rows, total or 0
        self.empty = rows == 0
        self.pieces = fetch_partitions(rows, total or 0, largest or 0, max_bytes)

    def rows(self) -> Iterator[tuple]:
        if self.empty:    # every batch after the traffic: no second Spark job to fetch nothing
            return
        source = self.staged.coalesce(1) if self.pieces == 1 else self.staged.repartition(self.pieces)
        for row in source.toLocalIterator(prefetchPartitions=False):
            yield row.kind, row.topic, row.key, row.value

    def release(self) -> None:
        """Drop the staged rows from Spark's local disk now rather than when the JVM collects them."""
        try:
            self.staged._jdf.queryExecution().logical().rdd().unpersist(False)
        except Exception as error:  # the blocks go when the context cleaner finds the RDD unreferenced
            log.warning("could not release a staged batch: %s", error)


class ExactlyOnceWriter:
    """A ``foreachBatch`` function that writes each micro-batch in one Kafka transaction.

    The batch DataFrame has string columns ``kind``, ``topic``, ``key``, ``value``; rows of kind
    ``alert`` get ``detected_at`` (the time they are written) added to their JSON value.
    """

    # Test-only: called as after_commit(writer, batch_id) right after a batch's transaction commits, before
    # Spark records the batch; the crash tests' driver sets it to die there. Nothing else sets it.
    after_commit: Callable[["ExactlyOnceWriter", int], None] | None = None
    # Metrics (spark_job.metrics.SparkMetrics, set by the job when they are on): observer.batch(writer_id)
    # tallies the rows it passes on and counts them when told committed(); skipped_batch(writer_id).
    observer = None

    def __init__(self, settings: Settings, writer_id: str, checkpoint_dir: str | Path):
        self.settings = settings
        self.writer_id = writer_id
        # Transactional ids are global to the cluster: scoped by the alerts topic, two deployments (or a
        # test beside `make demo`) on one broker never fence each other; one deployment's id is stable.
        self.transactional_id = f"fraud-writer.{settings.topic_alerts}.{writer_id}"
        self.checkpoint_dir = str(checkpoint_dir)   # a local folder or a URI (hdfs://, s3a://)
        self.transaction_timeout_ms = settings.writer_transaction_timeout_ms
        self.producer = None
        self.last: Marker | None = None
        self._query_id: str | None = None
        self.stats = {"batches_written": 0, "batches_skipped": 0, "records_written": 0}
        # Where each written batch's time went (ms): running it into the staging area, fetching its rows and
        # handing them to the producer, flushing and committing the transaction. Medians of the recent ones
        # are published with the stats: together they are the batch's addBatch in Spark's progress.
        self.recent_phases: deque[dict[str, float]] = deque(maxlen=RECENT_PHASES)
        # Where the stats are published after each batch (skipped replays are worth seeing).
        self.stats_path = stats_path(settings, writer_id)

    # -- steps 1 and 2 -------------------------------------------------------------------------
    def open(self) -> "ExactlyOnceWriter":
        from kafka.serializer import DefaultSerializer

        self.producer = make_producer(self.settings, transactional_id=self.transactional_id,
                                      transaction_timeout_ms=self.transaction_timeout_ms,
                                      value_serializer=DefaultSerializer(), batch_size=256 * 1024,
                                      **delivery_config(self.settings, linger_ms=20))
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
        spark = batch_df.sparkSession
        if self._query_id is None:
            self._query_id = checkpoint_query_id(self.checkpoint_dir, spark)
        end_offsets = batch_end_offsets(self.checkpoint_dir, batch_id, spark)
        try:
            action = replay_action(self.last, self.query_id, batch_id, end_offsets, self.writer_id,
                                   self.checkpoint_dir)
        except CheckpointWentBackError as error:
            log.error("%s", error)
            raise
        if action == "skip":
            self.stats["batches_skipped"] += 1
            if type(self).observer is not None:
                type(self).observer.skipped_batch(self.writer_id)
            self._publish_stats()
            log.warning("writer %s: batch %d already committed with the same offsets: skipped replay",
                        self.writer_id, batch_id)
            return
        started = time.perf_counter()
        staged = StagedBatch(batch_df, self.settings.writer_fetch_bytes)   # runs the batch
        run_ms = (time.perf_counter() - started) * 1000
        try:
            self._fit_transaction_timeout(staged, batch_id)
            self.write_batch(staged.rows(), batch_id, end_offsets, run_ms=run_ms)
        finally:
            staged.release()

    def _fit_transaction_timeout(self, staged: "StagedBatch", batch_id: int) -> None:
        s = self.settings
        needed = transaction_timeout_for(staged.bytes, staged.row_count, s.writer_transaction_timeout_ms,
                                         s.writer_transaction_max_timeout_ms)
        if needed <= self.transaction_timeout_ms:
            return
        log.warning("writer %s: batch %d stages %d rows, %.0f MB: its transaction gets %.0f s instead of %.0f s "
                    "(producer opened again)%s", self.writer_id, batch_id, staged.row_count, staged.bytes / 1e6,
                    needed / 1000, self.transaction_timeout_ms / 1000,
                    "; at the broker's maximum, lower FRAUD_DETECTOR_MAX_OFFSETS_PER_TRIGGER if it times out"
                    if needed >= s.writer_transaction_max_timeout_ms else "")
        self.close()
        self.transaction_timeout_ms = needed
        self.open()

    def write_batch(self, rows: Iterable[tuple[str, str, str | None, str]], batch_id: int,
                    end_offsets: list | None = None, run_ms: float | None = None) -> int:
        """One batch's rows in one transaction; ``run_ms``, how long running the batch took, joins the
        writer's recent phases (none when the rows come from elsewhere)."""
        producer = self.producer
        tally = type(self).observer.batch(self.writer_id) if type(self).observer is not None else None
        if tally is not None:
            rows = tally.rows(rows)
        started = time.perf_counter()
        producer.begin_transaction()
        undelivered: list[BaseException] = []     # appended to by the producer's I/O thread
        try:
            detected_at = format_event_time_now()
            count = 0
            for kind, topic, key, value in rows:
                if kind == ALERT_KIND:
                    value = with_detected_at(value, detected_at)
                producer.send(topic, key=key, value=value).add_errback(undelivered.append)
                count += 1
            marker = Marker(self.query_id, batch_id, end_offsets)
            producer.send(self.settings.topic_alert_markers, key=self.writer_id,
                          value=json.dumps({"query_id": marker.query_id, "batch_id": batch_id,
                                            "end_offsets": end_offsets, "records": count,
                                            "committed_at": detected_at})).add_errback(undelivered.append)
            sent = time.perf_counter()
            # kafka-python fails the records of a batch that expired (delivery timeout: a partition
            # without a reachable leader, as while a broker dies) without making the transaction
            # abortable, and would commit it without them. Every record must be acknowledged first.
            producer.flush()
            if undelivered:
                error = UndeliveredRecordsError(
                    f"writer {self.writer_id}: {len(undelivered)} record(s) of batch {batch_id} were not "
                    f"delivered ({undelivered[0]}); the transaction is aborted and the batch re-run")
                log.error("%s", error)      # one line in the driver's log, whatever Spark makes of the raise
                raise error from undelivered[0]
            producer.commit_transaction()
        except BaseException:
            _abort_quietly(producer)
            if tally is not None:
                tally.aborted()
            raise
        if tally is not None:
            tally.committed()
        self.last = marker
        self.stats["batches_written"] += 1
        self.stats["records_written"] += count
        phases = {**({} if run_ms is None else {"run_ms": run_ms}), "fetch_send_ms": (sent - started) * 1000,
                  "commit_ms": (time.perf_counter() - sent) * 1000}
        self.recent_phases.append(phases)
        if sum(phases.values()) > SLOW_BATCH_MS:
            log.info("writer %s batch %d: %d records, %s", self.writer_id, batch_id, count,
                     ", ".join(f"{name[:-3]} {ms:.0f} ms" for name, ms in phases.items()))
        if type(self).after_commit is not None:
            type(self).after_commit(self, batch_id)
        self._publish_stats()
        return count

    def _publish_stats(self) -> None:
        try:
            self.stats_path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.stats_path.with_suffix(".json.partial")
            partial.write_text(json.dumps({"writer_id": self.writer_id, **self.stats,
                                           "recent_phases_ms": phase_medians(self.recent_phases)}))
            os.replace(partial, self.stats_path)
        except OSError as error:   # a full disk must not fail a batch that is already committed
            log.warning("writer %s: could not publish its stats: %s", self.writer_id, error)


RECENT_PHASES = 50


def stats_path(settings: Settings, writer_id: str) -> Path:
    """Where writer ``writer_id`` publishes its stats after each batch (bench and the demo's report read them)."""
    return Path(settings.run_dir) / "writers" / f"{writer_id}.json"
SLOW_BATCH_MS = 2000       # a batch that took longer says where its time went (the job's log)


def phase_medians(recent: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per phase, the median over ``recent`` batches (those that had it), in whole ms."""
    values: dict[str, list[float]] = {}
    for phases in recent:
        for name, ms in phases.items():
            values.setdefault(name, []).append(ms)
    return {name: round(statistics.median(ms)) for name, ms in values.items()}


# Rates the writer keeps to on any machine it is meant for, well below what it was measured at on two cores
# (docs/performance.md, "A flood of broken records"): a transaction timeout too long costs nothing while
# the writer lives (a new one fences and aborts), one too short aborts the batch and every re-run of it.
WRITE_FLOOR_BYTES_PER_S = 2_000_000
WRITE_FLOOR_ROWS_PER_S = 2_000


def transaction_timeout_for(staged_bytes: int, rows: int, least_ms: int, most_ms: int) -> int:
    """The transaction timeout (ms) a batch of ``rows`` and ``staged_bytes`` needs: the least plus its
    sending at the floor rates, at most the broker's maximum (a longer one is refused at init)."""
    per = WRITE_FLOOR_BYTES_PER_S * WRITE_FLOOR_ROWS_PER_S          # whole milliseconds, rounded up
    sending_ms = -(-1000 * (staged_bytes * WRITE_FLOOR_ROWS_PER_S + rows * WRITE_FLOOR_BYTES_PER_S) // per)
    return min(most_ms, least_ms + sending_ms)


class UndeliveredRecordsError(KafkaError):
    """A record of a batch was not acknowledged: its transaction must not commit."""


def delivery_config(settings: Settings, linger_ms: int) -> dict[str, int]:
    """The writer's producer timeouts: ``FRAUD_WRITER_DELIVERY_TIMEOUT_MS``, and a request timeout that
    fits in it (kafka-python wants delivery >= linger + request; its default request timeout is 30 s)."""
    delivery = settings.writer_delivery_timeout_ms
    return {"linger_ms": linger_ms, "delivery_timeout_ms": delivery,
            "request_timeout_ms": min(30000, delivery - linger_ms)}


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

