"""The detector runner: Kafka source → parse/validate → watermark → detector → exactly-once sink.

Reads like section 1 of design.md::

    transactions ──► parse + validate ──► invalid ──► dlq query ─────────────► transactions.dlq
                                     └──► valid ──► withWatermark ──► detector ──► alerts
                                                                   (one query per detector)

Each detector runs as its own named streaming query with its own checkpoint directory and its own
transactional writer, so one can be added, restarted or fail without touching the others. With
``--shared`` all detectors (and the dead-letter branch) share one read of the topic in a single query
and a single transaction per micro-batch: fewer reads, but they stand and fall together.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.errors import StreamingQueryException

from common.kafka_clients import spark_kafka_options
from common.settings import Settings, checkpoint_location, get_settings
from detectors.base import TRANSACTION_SCHEMA, Detector
from detectors.registry import in_registry_order
from detectors.parsing import RAW_COLUMNS, invalid_records, valid_transactions, with_validation
from sinks.alert_writer import ALERT_KIND, ExactlyOnceWriter
from sinks.dlq import dlq_values

log = logging.getLogger("detectors.runner")

DLQ_QUERY = "dlq"
SINKS = ("exactly-once", "spark-kafka")


@dataclass
class RunOptions:
    sink: str = "exactly-once"                  # or "spark-kafka": Spark's built-in, at-least-once sink
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = 200_000
    trigger_seconds: float = 0.0                # 0: start the next micro-batch as soon as one ends
    checkpoint_root: str | Path | None = None     # a local folder or a URI; None: the settings'
    shared: bool = False                        # all detectors in one query (one read of the topic)
    with_dlq: bool = True                       # run the dead-letter branch
    fail_on_data_loss: bool = True
    extra_source_options: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------

def read_transactions(spark: SparkSession, settings: Settings, options: RunOptions) -> DataFrame:
    """The raw Kafka records of the transactions topic, read with ``read_committed``."""
    reader = (spark.readStream.format("kafka")
              .options(**spark_kafka_options(settings))
              .option("subscribe", settings.topic_transactions)
              .option("startingOffsets", options.starting_offsets)
              .option("kafka.isolation.level", "read_committed")
              .option("kafka.fetch.max.wait.ms", str(settings.spark_kafka_fetch_max_wait_ms))
              .option("failOnDataLoss", str(options.fail_on_data_loss).lower()))
    if options.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
    raw = reader.options(**options.extra_source_options).load()
    # Fewer, longer scan tasks than one per topic partition: see Settings.spark_source_tasks.
    return raw.coalesce(settings.spark_source_tasks or spark.sparkContext.defaultParallelism)


def validated(raw: DataFrame, name: str) -> DataFrame:
    """Parse and validate, and count valid/invalid records in the query progress (observed metrics)."""
    checked = with_validation(raw)
    return checked.observe(f"validation_{name}",
                           F.count(F.lit(1)).alias("records"),
                           F.count(F.col("_reason")).alias("invalid"))


def alert_rows(alerts: DataFrame, settings: Settings, sink: str) -> DataFrame:
    """Alerts as output rows (kind, topic, key, value) in the alert contract's JSON.

    Every column of ``ALERT_SCHEMA`` goes out (a null trigger field such as ``lat`` is omitted)."""
    fields = [F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("event_time")
              if name == "event_time" else name for name in alerts.columns]
    if sink == "spark-kafka":  # the exactly-once writer adds detected_at when it writes
        fields.append(F.date_format(F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("detected_at"))
    return alerts.select(F.lit(ALERT_KIND).alias("kind"), F.lit(settings.topic_alerts).alias("topic"),
                         F.col("card_id").alias("key"), F.to_json(F.struct(*fields)).alias("value"))


def dlq_rows(checked: DataFrame, settings: Settings) -> DataFrame:
    """Dead-letter records of ``checked`` (validated rows, or ``read_once`` of them)."""
    return dlq_values(invalid_records(checked)).select(
        F.lit("dlq").alias("kind"), F.lit(settings.topic_dlq).alias("topic"), "key", "value")


def read_once(checked: DataFrame, settings: Settings) -> DataFrame:
    """The validated records behind one shuffle, so that every branch of a query reads them once.

    Spark plans each branch of a query (each detector of the shared query, each side of a self-join, the
    dead-letter branch) down to its own scan of the micro-batch, and a streaming plan cannot be cached:
    the four built-in detectors read and validated every record seven times. An exchange that several
    branches share is planned once and reused (ReuseExchange), so the topic is read and validated once.

    Only identical exchanges are reused, and column pruning would give each branch an exchange of just
    the columns it reads. So the exchange carries one struct of everything any branch needs (the
    transaction columns, the reason, and the raw record for invalid ones only) and is unpacked after it;
    ``common.spark`` switches off the nested-field pruning that would take the struct apart again.
    Measured in the README (Performance).
    """
    invalid = F.col("_reason").isNotNull()
    record = F.struct(F.col("_reason"), *[F.col(name) for name in TRANSACTION_SCHEMA.fieldNames()],
                      *[F.when(invalid, F.col(name)).alias(name) for name in RAW_COLUMNS if name != "key"])
    return (checked.select("key", record.alias("_record"))
            .repartition(settings.spark_shuffle_partitions, "key")
            .select("key", "_record.*"))


def detector_input(once: DataFrame, detector: Detector, settings: Settings) -> DataFrame:
    """The valid transactions of ``read_once``, watermarked with the detector's delay.

    With one shuffle partition, ``coalesce(1)`` after the watermark: Spark's watermark operator reports
    no output partitioning, so every stateful operator above it (each side of a join) would shuffle its
    input again although the single partition of ``read_once`` already holds everything together. A
    coalesce to one partition moves no data and says "single partition", which satisfies them all: the
    detectors run in the stage that reads the shared exchange. Measured in the README (Performance).
    """
    transactions = valid_transactions(once).withWatermark("event_time", detector.watermark)
    return transactions.coalesce(1) if settings.spark_shuffle_partitions == 1 else transactions


def detector_alerts(once: DataFrame, detector: Detector, settings: Settings) -> DataFrame:
    return detector.run(detector_input(once, detector, settings))


def start_query(rows: DataFrame, name: str, settings: Settings, options: RunOptions):
    """Start one named query writing ``rows`` with the chosen sink and its own checkpoint."""
    if options.sink not in SINKS:
        raise ValueError(f"unknown sink {options.sink!r}: choose one of {', '.join(SINKS)}")
    checkpoint = checkpoint_location(options.checkpoint_root or settings.checkpoint_root, name)
    exactly_once = options.sink == "exactly-once"
    writer = ((rows if exactly_once else rows.drop("kind")).writeStream.queryName(name)
              .option("checkpointLocation", checkpoint).outputMode("append"))
    if options.trigger_seconds:
        writer = writer.trigger(processingTime=f"{options.trigger_seconds} seconds")
    if exactly_once:
        write = CodegenByBatchSize(ExactlyOnceWriter(settings, writer_id=name, checkpoint_dir=checkpoint).open(),
                                   settings)
        write.query = writer.foreachBatch(write).start()
        return write.query
    return writer.format("kafka").options(**spark_kafka_options(settings)).start()


FALLBACK = "FALLBACK"


class CodegenByBatchSize:
    """A ``foreachBatch`` function that runs ``write`` and picks how the query's next batches run code.

    Small micro-batches (a query that keeps up) run best interpreted (``Settings.spark_codegen_factory_mode``,
    NO_CODEGEN): their cost is per batch, and compiled code would be generated again every batch for the
    eviction predicates that embed the watermark. Large ones (a query catching up) run best compiled:
    their cost is per row, and NO_CODEGEN also turns whole-stage code generation off. So when the batch
    just written read ``spark_codegen_large_batch_rows`` records or more, the stream's own session (the
    one Spark plans and runs this query's batches with) is set to FALLBACK, Spark's default, for the next
    batch, and back once a batch is small again.
    Measured in the README (Performance).
    """

    def __init__(self, write: Callable, settings: Settings):
        self.write = write
        self.large_rows = settings.spark_codegen_large_batch_rows
        self.small_mode = settings.spark_codegen_factory_mode
        self.query = None          # set once the query has started
        self.mode = self.small_mode

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        self.write(batch_df, batch_id)
        if not self.large_rows:    # the switch is off: no py4j round trips for the batch's count
            return
        wanted = self.mode_for(self.input_rows())
        if wanted != self.mode:
            batch_df.sparkSession.conf.set("spark.sql.codegen.factoryMode", wanted)
            log.info("query %s: next batches with spark.sql.codegen.factoryMode=%s", self.query.name, wanted)
            self.mode = wanted

    def mode_for(self, input_rows: int | None) -> str:
        if input_rows is None:
            return self.mode
        return FALLBACK if input_rows >= self.large_rows else self.small_mode

    def input_rows(self) -> int | None:
        """Records the batch just written read from the topic: the runner's validation counts them
        (``observe``), so the batch's own execution has the figure as soon as its job has run."""
        if self.query is None:     # the first batch can run before start() has returned
            return None
        observed = self.query._jsq.streamingQuery().lastExecution().observedMetrics()
        return None if observed.isEmpty() else int(observed.valuesIterator().next().getAs("records"))


def query_name(detector: Detector) -> str:
    return f"detector-{detector.name}"


def start_detector_query(spark: SparkSession, detector: Detector, settings: Settings, options: RunOptions):
    checked = validated(read_transactions(spark, settings, options), detector.name)
    rows = alert_rows(detector_alerts(read_once(checked, settings), detector, settings), settings, options.sink)
    return start_query(rows, query_name(detector), settings, options)


def start_dlq_query(spark: SparkSession, settings: Settings, options: RunOptions):
    checked = validated(read_transactions(spark, settings, options), DLQ_QUERY)
    return start_query(dlq_rows(checked, settings), DLQ_QUERY, settings, options)


def start_shared_query(spark: SparkSession, detectors: Sequence[Detector], settings: Settings,
                       options: RunOptions):
    """All detectors and the dead-letter branch over one read of the topic, one transaction per batch.

    The branches follow the registry's order, longest-running first (see ``detectors.registry``)."""
    once = read_once(validated(read_transactions(spark, settings, options), "shared"), settings)
    parts = [alert_rows(detector_alerts(once, d, settings), settings, options.sink)
             for d in in_registry_order(detectors)]
    if options.with_dlq:
        parts.append(dlq_rows(once, settings))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return start_query(rows, "detectors-shared", settings, options)


def start_detectors(spark: SparkSession, detectors: Sequence[Detector], settings: Settings,
                    options: RunOptions) -> list:
    """Start the queries: one per detector (+ the dead-letter query), or one shared query."""
    if options.shared:
        return [start_shared_query(spark, detectors, settings, options)]
    queries = [start_detector_query(spark, d, settings, options) for d in detectors]
    if options.with_dlq:
        queries.append(start_dlq_query(spark, settings, options))
    return queries


# ---------------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------------

def summarize_progress(progress: dict) -> dict:
    """The figures worth watching from one ``StreamingQueryProgress`` (as JSON dict)."""
    state = progress.get("stateOperators") or []
    observed = progress.get("observedMetrics") or {}
    validation = next(iter(observed.values()), {}) if observed else {}
    return {
        "name": progress.get("name"),
        "batch_id": progress.get("batchId"),
        "input_rows": progress.get("numInputRows", 0),
        "input_rows_per_second": round(progress.get("inputRowsPerSecond") or 0.0, 1),
        "processed_rows_per_second": round(progress.get("processedRowsPerSecond") or 0.0, 1),
        "batch_duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "state_rows": sum(op.get("numRowsTotal", 0) for op in state),
        "rows_dropped_by_watermark": sum(op.get("numRowsDroppedByWatermark", 0) for op in state),
        "invalid_records": validation.get("invalid", 0),
        "end_offset_total": _end_offset_total(progress),
    }


def _end_offset_total(progress: dict) -> int:
    """Sum over partitions of the Kafka offsets this batch read up to (how far the query has got)."""
    total = 0
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        offsets = json.loads(end) if isinstance(end, str) else (end or {})
        for partitions in offsets.values() if isinstance(offsets, dict) else []:
            total += sum(int(v) for v in partitions.values())
    return total


class ProgressListener:
    """Logs a compact line per micro-batch and keeps the latest progress of each query in a JSON file
    under ``<run_dir>/progress/`` (read by the demo's live view and the dashboard)."""

    def __init__(self, progress_dir: Path, publish: Callable[[str, dict], None] | None = None):
        from common.progress_events import JsonProgressListener

        self.progress_dir = progress_dir
        self.publish = publish
        progress_dir.mkdir(parents=True, exist_ok=True)
        self.listener = JsonProgressListener(
            self.record,
            on_started=lambda name, query_id: log.info("query %s started (id %s)", name, query_id),
            on_terminated=self._terminated)
        self.totals: dict[str, dict] = {}

    @staticmethod
    def _terminated(query_id: str, error: str | None) -> None:
        if error:
            log.error("query %s failed: %s", query_id, error.splitlines()[0])

    def record(self, progress: dict) -> None:
        summary = summarize_progress(progress)
        name = summary["name"] or "unnamed"
        totals = self.totals.setdefault(name, {"input_rows": 0, "rows_dropped_by_watermark": 0,
                                               "invalid_records": 0})
        for key in totals:
            totals[key] += summary[key] or 0
        summary["totals"] = dict(totals)
        if summary["input_rows"]:
            log.info("%(name)s batch %(batch_id)s: %(input_rows)s rows, %(processed_rows_per_second)s rows/s, "
                     "%(batch_duration_ms)s ms, watermark %(watermark)s, state %(state_rows)s rows, "
                     "late-dropped %(rows_dropped_by_watermark)s, invalid %(invalid_records)s", summary)
        path = self.progress_dir / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary))
        tmp.replace(path)
        if self.publish is not None:
            self.publish(name, summary)


class RedisProgress:
    """Publishes each query's progress totals to Redis (``RedisKeys.queries``), where the dashboard
    shows them: rows read, rows dropped by the watermark (late events), invalid records. Observability
    only: an unreachable Redis is logged once per outage and never fails the job."""

    def __init__(self, settings: Settings):
        from common.redis_clients import redis_client
        from sinks.redis_keys import RedisKeys

        self.client = redis_client(settings, socket_timeout=2, socket_connect_timeout=2)
        self.key = RedisKeys(settings.sinks_namespace).queries
        self.failing = False

    def __call__(self, name: str, summary: dict) -> None:
        value = {**summary["totals"], "watermark": summary["watermark"], "batch_id": summary["batch_id"],
                 "state_rows": summary["state_rows"]}
        try:
            self.client.hset(self.key, name, json.dumps(value))
            self.failing = False
        except Exception as error:  # noqa: BLE001 - progress must never stop detection
            if not self.failing:
                log.warning("cannot publish progress to Redis: %s", error)
            self.failing = True


# ---------------------------------------------------------------------------------------------
# Supervision and the command line
# ---------------------------------------------------------------------------------------------

@dataclass
class RestartPolicy:
    """When a failed query is started again from its checkpoint: after a back-off that doubles with
    each failure in a row (1, 2, 4 ... 30 s), so a broker that is restarting has time to come back,
    and at most ``max_failures`` times within ``window_s``: a query that keeps failing stays stopped
    (and the job says so) instead of spinning."""

    max_failures: int = 6
    window_s: float = 600.0
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    failures: dict[str, list[float]] = field(default_factory=dict)

    def next_attempt(self, name: str, now: float) -> float | None:
        """Record a failure of ``name`` at ``now``; the moment to restart it, or None: give up."""
        recent = [t for t in self.failures.get(name, []) if now - t < self.window_s] + [now]
        self.failures[name] = recent
        if len(recent) > self.max_failures:
            return None
        return now + min(self.max_backoff_s, self.first_backoff_s * 2 ** (len(recent) - 1))


def supervise(spark: SparkSession, queries: list, restart: Callable[[str], object] | None,
              until: Callable[[], bool] = lambda: False, policy: RestartPolicy | None = None,
              poll_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic) -> int:
    """Watch the queries until ``until()`` or all stopped. A query that fails is logged and, with
    ``restart``, started again from its checkpoint when ``policy`` allows; the others keep running
    either way. Returns the number of queries that ended with an error."""
    policy = policy or RestartPolicy()
    failed = 0
    active = {q.name: q for q in queries}
    pending: dict[str, float] = {}                  # name -> when to restart it

    def failure(name: str, error: str) -> None:
        nonlocal failed
        due = policy.next_attempt(name, clock()) if restart is not None else None
        if due is None:
            log.error("query %s failed: %s; not restarted", name, error)
            failed += 1
        else:
            log.error("query %s failed: %s; restarting it from its checkpoint in %.0f s", name, error, due - clock())
            pending[name] = due

    while (active or pending) and not until():
        for name, query in list(active.items()):
            if query.isActive:
                continue
            del active[name]
            error = query.exception()
            if error is not None:
                failure(name, str(error).splitlines()[0])
        for name, due in list(pending.items()):
            if clock() >= due:
                del pending[name]
                try:
                    active[name] = restart(name)
                except Exception as error:  # e.g. the broker is still away: try again later
                    failure(name, f"restart failed: {error}")
        if active:
            try:
                spark.streams.awaitAnyTermination(timeout=poll_seconds)
            except StreamingQueryException:
                pass                                # it rethrows a failed query's error: handled above
            spark.streams.resetTerminated()
        else:
            time.sleep(poll_seconds)                # only restarts are due: nothing to wait on
    return failed


def main(names: Sequence[str] = (), argv: Sequence[str] = ()) -> int:
    from common.spark import get_spark
    from detectors import registry

    parser = argparse.ArgumentParser(prog="python -m detectors run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sink", choices=SINKS, default="exactly-once")
    parser.add_argument("--shared", action="store_true", help="all detectors in one query (one read of the topic)")
    parser.add_argument("--no-dlq", action="store_true", help="do not run the dead-letter branch")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest | latest | JSON offsets")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=200_000)
    parser.add_argument("--trigger-seconds", type=float, default=0.0)
    parser.add_argument("--checkpoint-root", default=None, help="a local folder or a URI (hdfs://, s3a://)")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: run until Ctrl-C)")
    args = parser.parse_args(list(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    settings = get_settings()
    detectors = [registry.get(name) for name in names] if names else registry.all()
    options = RunOptions(sink=args.sink, starting_offsets=args.starting_offsets,
                         max_offsets_per_trigger=args.max_offsets_per_trigger, trigger_seconds=args.trigger_seconds,
                         checkpoint_root=args.checkpoint_root, shared=args.shared, with_dlq=not args.no_dlq)
    spark = get_spark("fraud-detectors", settings)
    listener = ProgressListener(settings.run_dir / "progress", publish=RedisProgress(settings))
    spark.streams.addListener(listener.listener)

    by_query = {query_name(d): d for d in detectors}

    def restart(name: str):
        if options.shared:
            return start_shared_query(spark, detectors, settings, options)
        if name == DLQ_QUERY:
            return start_dlq_query(spark, settings, options)
        return start_detector_query(spark, by_query[name], settings, options)

    queries = start_detectors(spark, detectors, settings, options)
    log.info("running %s", ", ".join(q.name for q in queries))
    stop_at = time.monotonic() + args.duration if args.duration else None
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    try:
        failed = supervise(spark, queries, restart,
                           until=lambda: stopping["now"] or (stop_at is not None and time.monotonic() > stop_at))
    except KeyboardInterrupt:
        failed = 0
    finally:
        for query in spark.streams.active:
            query.stop()
        spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:2], sys.argv[2:]))
