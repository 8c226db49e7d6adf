"""The detector job's queries: Kafka source → parse/validate → watermark → detector → exactly-once sink.

::

    transactions ──► parse + validate ──► invalid ──► dead letters ──────────► transactions.dlq
                                     └──► valid ──► withWatermark ──► detector ──► alerts
                                                   (one query per group of detectors)

Which detectors share a query is ``spark_job.options.plan_queries``: by default the groups of the
setting ``FRAUD_DETECTOR_GROUPS`` (the rule detectors and the dead letters in one query, ``ml_score`` in
another), each query with one read and validation of the topic, its own checkpoint and its own
transactional writer; ``--query-per-detector`` gives every detector a query of its own, ``--shared``
puts all in one. Detectors of one query share its micro-batches and its fate.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.kafka_clients import spark_kafka_options
from common.settings import Settings, checkpoint_location
from detectors.base import TRANSACTION_SCHEMA, Detector
from detectors.operators import keep
from detectors.registry import in_registry_order
from spark_job.alert_writer import ALERT_KIND, ExactlyOnceWriter
from spark_job.tuning.codegen import CodegenByBatchSize
from spark_job.dead_letters import dlq_hash_key, dlq_values
from spark_job import checkpoint_members, query_names
from spark_job.options import SINKS, QueryPlan, RunOptions, plan_queries
from spark_job.parsing import RAW_COLUMNS, invalid_records, valid_transactions, with_validation
from spark_job.writer_closing import close_when_query_ends

TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"      # the contracts' time format, in Spark's pattern letters

__all__ = ["RunOptions", "plan_queries", "query_name", "start_detectors"]


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


def counted(checked: DataFrame, name: str) -> DataFrame:
    """``with_validation``'s rows, counted valid/invalid in query ``name``'s progress (observed metrics)."""
    return checked.observe(f"validation_{name}",
                           F.count(F.lit(1)).alias("records"),
                           F.count(F.col("_reason")).alias("invalid"))


def alert_rows(alerts: DataFrame, settings: Settings, sink: str) -> DataFrame:
    """Alerts as output rows (kind, topic, key, value) in the alert contract's JSON.

    Every column of ``ALERT_SCHEMA`` goes out (a null trigger field such as ``lat`` is omitted)."""
    fields = [F.date_format(name, TIME_FORMAT).alias(name) if name in ("event_time", "ingested_at") else name
              for name in alerts.columns]
    if sink == "spark-kafka":  # the exactly-once writer adds detected_at when it writes
        fields.append(F.date_format(F.current_timestamp(), TIME_FORMAT).alias("detected_at"))
    return alerts.select(F.lit(ALERT_KIND).alias("kind"), F.lit(settings.topic_alerts).alias("topic"),
                         F.col("card_id").alias("key"), F.to_json(F.struct(*fields)).alias("value"))


def dlq_rows(checked: DataFrame, settings: Settings) -> DataFrame:
    """Dead-letter records of ``checked`` (validated rows, or ``read_once`` of them)."""
    return dlq_values(invalid_records(checked), dlq_hash_key(settings)).select(
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
    Measured in docs/performance.md.
    """
    invalid = F.col("_reason").isNotNull()
    record = F.struct(F.col("_reason"), *[F.col(name) for name in TRANSACTION_SCHEMA.fieldNames()],
                      *[F.when(invalid, F.col(name)).alias(name) for name in RAW_COLUMNS if name != "key"])
    return (checked.select("key", record.alias("_record"))
            .repartition("key")          # into spark.sql.shuffle.partitions: the checkpoint's, on a restart
            .select("key", "_record.*"))


def detector_input(once: DataFrame, detector: Detector, settings: Settings) -> DataFrame:
    """The valid transactions of ``read_once``, watermarked with the detector's delay.

    With one shuffle partition, ``coalesce(1)`` after the watermark: Spark's watermark operator reports
    no output partitioning, so every stateful operator above it (each side of a join) would shuffle its
    input again although the single partition of ``read_once`` already holds everything together. A
    coalesce to one partition moves no data and says "single partition", which satisfies them all: the
    detectors run in the stage that reads the shared exchange. Measured in docs/performance.md.
    """
    transactions = valid_transactions(once).withWatermark("event_time", detector.watermark)
    single = once.sparkSession.conf.get("spark.sql.shuffle.partitions") == "1"
    return transactions.coalesce(1) if single else transactions


def detector_alerts(once: DataFrame, detector: Detector, settings: Settings, muted: bool = False) -> DataFrame:
    """The detector's alerts; a ``muted`` one reads no rows but keeps its operators, its state (evicted as
    the watermark moves) and its place in the plan, so the query's checkpoint still fits. The filter
    sits above the watermark (``keep``) and cannot be folded away by the optimizer."""
    transactions = detector_input(once, detector, settings)
    alerts = detector.run(keep(transactions, F.length("txn_id") < 0) if muted else transactions)
    return alerts.withColumn("params_version", F.lit(detector.params_version))   # spark_job/live_params.py


def start_query(rows: DataFrame, name: str, settings: Settings, options: RunOptions, trigger_seconds: float = 0.0):
    """Start one named query writing ``rows`` with the chosen sink and its own checkpoint, a micro-batch
    every ``trigger_seconds`` (0: as soon as the last one ends)."""
    if options.sink not in SINKS:
        raise ValueError(f"unknown sink {options.sink!r}: choose one of {', '.join(SINKS)}")
    checkpoint = checkpoint_location(options.checkpoint_root or settings.checkpoint_root, name)
    exactly_once = options.sink == "exactly-once"
    writer = ((rows if exactly_once else rows.drop("kind")).writeStream.queryName(name)
              .option("checkpointLocation", checkpoint).outputMode("append"))
    if trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    if exactly_once:
        kafka_writer = ExactlyOnceWriter(settings, writer_id=name, checkpoint_dir=checkpoint).open()
        write = CodegenByBatchSize(kafka_writer, settings, name, checkpoint)
        with write.starting(rows.sparkSession):
            query = writer.foreachBatch(write).start()
        close_when_query_ends(rows.sparkSession, query, kafka_writer)
        return query
    return writer.format("kafka").options(**spark_kafka_options(settings)).start()


def query_name(detector: Detector) -> str:
    """The query of a detector that runs alone (``plan_queries``)."""
    return query_names.alone(detector.name)


def start_planned_query(spark: SparkSession, plan: QueryPlan, detectors: Sequence[Detector], settings: Settings,
                        options: RunOptions, rows: DataFrame | None = None):
    """Start the query of ``plan`` (its ``planned_rows``, built now unless given), once its checkpoint is
    known to fit the plan's detectors (``spark_job.checkpoint_members``)."""
    checkpoint_members.check(plan.name, list(plan.detectors),
                             checkpoint_location(options.checkpoint_root or settings.checkpoint_root, plan.name))
    if rows is None:
        rows = planned_rows(spark, plan, detectors, settings, options)
    return start_query(rows, plan.name, settings, options, plan.trigger_seconds)


def planned_rows(spark: SparkSession, plan: QueryPlan, detectors: Sequence[Detector], settings: Settings,
                 options: RunOptions) -> DataFrame:
    """What the query of ``plan`` writes: one read and validation of the topic, one branch per detector (in
    the registry's order, longest-running first: see ``detectors.registry``) and the dead letters if the
    plan has them, all written in one transaction per micro-batch. Building it takes seconds of py4j calls
    in a JVM that has just started: a standby builds it before it takes over (``spark_job.job``)."""
    by_name = {d.name: d for d in detectors}
    checked = counted(with_validation(read_transactions(spark, settings, options),
                                      settings.event_time_max_ahead), plan.name)
    if not plan.detectors:                       # the dead letters alone: no shuffle needed
        return dlq_rows(checked, settings)
    once = read_once(checked, settings)
    parts = [alert_rows(detector_alerts(once, d, settings, muted=d.name in plan.muted), settings, options.sink)
             for d in in_registry_order([by_name[n] for n in plan.detectors])]
    if plan.with_dlq:
        parts.append(dlq_rows(once, settings))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return rows


def start_detectors(spark: SparkSession, detectors: Sequence[Detector], settings: Settings,
                    options: RunOptions) -> list:
    """Start every query of ``plan_queries`` (one per detector and the dead letters, the groups, or one
    shared query)."""
    return [start_planned_query(spark, plan, detectors, settings, options)
            for plan in plan_queries([d.name for d in detectors], options)]
