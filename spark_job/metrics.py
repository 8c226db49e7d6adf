"""The detector job's Prometheus metrics (docs/metrics.md): fed by the progress listener once per
micro-batch and by the exactly-once writer's hook once per batch it writes, served at ``/metrics``.

Per-batch cost is a few dictionary updates: gauges are kept as the last progress of each query and
turned into metric families only when Prometheus scrapes (``LatestProgress``), which is also when the
watermark's delay behind the wall clock is computed, so a stalled query's delay keeps growing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Iterator

from spark_job.alert_writer import ALERT_KIND

log = logging.getLogger(__name__)

BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0)


def dead_letter_reason(value: str) -> str:
    """The label of a dead letter's reason: its text up to the first colon (the rest is a detail such
    as a size, which would make a label per record), as the two validators agree on it."""
    return (_string_field(value, '"reason":') or "unknown").split(":", 1)[0].strip()[:120]


def alert_detector(value: str) -> str:
    return _string_field(value, '"detector":') or "unknown"


_DECODER = json.JSONDecoder()


def _string_field(value: str, key: str) -> str | None:
    """The string value of the first ``key`` in a JSON object's text, without parsing the rest (a quote
    inside a JSON string is escaped, so the first unescaped ``"name":`` is the key)."""
    at = value.find(key) if isinstance(value, str) else -1
    if at < 0:
        return None
    try:
        found, _end = _DECODER.raw_decode(value, at + len(key))
    except ValueError:
        return None
    return found if isinstance(found, str) else None


def _offsets(text) -> dict:
    offsets = json.loads(text) if isinstance(text, str) else (text or {})
    return offsets if isinstance(offsets, dict) else {}


def consumer_lag(progress: dict) -> dict[tuple[str, str], int]:
    """Per (topic, partition): records in the topic beyond what the batch read up to, the source's
    ``latestOffset`` (the log's end when the batch was planned) minus its ``endOffset``."""
    lag: dict[tuple[str, str], int] = {}
    for source in progress.get("sources") or []:
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        for topic, partitions in latest.items():
            read = end.get(topic) or {}
            for partition, offset in (partitions or {}).items():
                if partition in read:
                    lag[(topic, str(partition))] = max(0, int(offset) - int(read[partition]))
    return lag


def epoch_seconds(text: str | None) -> float | None:
    """Spark's progress time (``2026-11-22T10:15:30.123Z``) as epoch seconds; None for none or Spark's
    "no watermark yet" (the epoch itself)."""
    if not text:
        return None
    seconds = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    return seconds if seconds > 0 else None


class SparkMetrics:
    """The job's metrics in their own registry (tests make several)."""

    def __init__(self, registry=None, clock: Callable[[], float] = time.time):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        self.clock = clock
        r = self.registry
        self.input_rows = Counter("fraud_spark_input_rows", "Records read from Kafka by the query", ["query"],
                                  registry=r)
        self.invalid = Counter("fraud_spark_invalid_records", "Records that failed validation (dead-lettered)",
                               ["query"], registry=r)
        self.late_rows = Counter("fraud_spark_late_rows_dropped", "Rows the stateful operators dropped behind "
                                 "the watermark (late events)", ["query"], registry=r)
        self.batch_duration = Histogram("fraud_spark_batch_duration_seconds", "Micro-batch duration "
                                        "(triggerExecution)", ["query"], buckets=BATCH_BUCKETS, registry=r)
        self.alerts = Counter("fraud_alerts_written", "Alerts committed by the exactly-once writer",
                              ["query", "detector"], registry=r)
        self.dead_letters = Counter("fraud_dead_letters", "Dead letters committed by the exactly-once writer",
                                    ["query", "reason"], registry=r)
        self.transactions = Counter("fraud_writer_transactions", "Kafka transactions of the exactly-once "
                                    "writer by outcome (committed, aborted)", ["query", "outcome"], registry=r)
        self.skipped = Counter("fraud_writer_batches_skipped", "Replayed batches the writer had already "
                               "committed (written nothing)", ["query"], registry=r)
        self.restarts = Counter("fraud_spark_query_restarts", "Restarts of a failed query from its checkpoint",
                                ["query"], registry=r)
        self.params_refused = Counter("fraud_detector_params_refused", "Parameter sets the job could not plan "
                                      "a detector with (it kept its last good version)", ["detector"], registry=r)
        self._lock = threading.Lock()
        self.latest: dict[str, dict] = {}          # query -> the gauges of its last progress
        r.register(LatestProgress(self))

    # -- the progress listener: once per micro-batch ------------------------------------------------
    def record(self, progress: dict, summary: dict) -> None:
        query = summary.get("name") or "unnamed"
        self.restarts.labels(query)        # 0 from its first batch: Prometheus has the series before a restart
        self.input_rows.labels(query).inc(summary.get("input_rows") or 0)
        self.invalid.labels(query).inc(summary.get("invalid_records") or 0)
        self.late_rows.labels(query).inc(summary.get("rows_dropped_by_watermark") or 0)
        if summary.get("batch_duration_ms") is not None:
            self.batch_duration.labels(query).observe(summary["batch_duration_ms"] / 1000)
        operators = [(f"{i}:{op.get('operatorName')}", op.get("numRowsTotal") or 0, op.get("memoryUsedBytes") or 0)
                     for i, op in enumerate(progress.get("stateOperators") or [])]
        latest = {"input_rate": progress.get("inputRowsPerSecond") or 0.0,
                  "processed_rate": progress.get("processedRowsPerSecond") or 0.0,
                  "watermark": epoch_seconds(summary.get("watermark")),
                  "lag": consumer_lag(progress), "operators": operators}
        with self._lock:
            self.latest[query] = latest

    def counting_restarts(self, restart: Callable[[str, str], list]) -> Callable[[str, str], list]:
        """``restart`` (``JobQueries.restart``) counting each attempt in ``fraud_spark_query_restarts_total``."""
        def counted(name: str, error: str = "") -> list:
            self.restarts.labels(name).inc()
            return restart(name, error)
        return counted

    # -- the exactly-once writer's hook (ExactlyOnceWriter.observer): once per batch ----------------
    def batch(self, writer_id: str) -> "BatchTally":
        return BatchTally(self, writer_id)

    def skipped_batch(self, writer_id: str) -> None:
        self.skipped.labels(writer_id).inc()


class BatchTally:
    """One batch's rows by detector and by dead-letter reason, counted once its transaction commits."""

    __slots__ = ("metrics", "query", "alerts", "dead")

    def __init__(self, metrics: SparkMetrics, query: str):
        self.metrics, self.query = metrics, query
        self.alerts: dict[str, int] = {}
        self.dead: dict[str, int] = {}

    def rows(self, rows: Iterable[tuple]) -> Iterator[tuple]:
        count = self.count
        for row in rows:
            count(row)
            yield row

    def count(self, row: tuple) -> None:
        if row[0] == ALERT_KIND:
            name = alert_detector(row[3])
            self.alerts[name] = self.alerts.get(name, 0) + 1
        else:
            reason = dead_letter_reason(row[3])
            self.dead[reason] = self.dead.get(reason, 0) + 1

    def committed(self) -> None:
        m = self.metrics
        m.transactions.labels(self.query, "committed").inc()
        for name, count in self.alerts.items():
            m.alerts.labels(self.query, name).inc(count)
        for reason, count in self.dead.items():
            m.dead_letters.labels(self.query, reason).inc(count)

    def aborted(self) -> None:
        self.metrics.transactions.labels(self.query, "aborted").inc()


class LatestProgress:
    """A collector of each query's last progress as gauges, built when scraped."""

    def __init__(self, metrics: SparkMetrics):
        self.metrics = metrics

    def describe(self):      # nothing at registration: collect() would run before any progress
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        with self.metrics._lock:
            latest = {query: dict(values) for query, values in self.metrics.latest.items()}
        now = self.metrics.clock()
        input_rate = GaugeMetricFamily("fraud_spark_input_rows_per_second", "Input rate of the last micro-batch",
                                       labels=["query"])
        processed = GaugeMetricFamily("fraud_spark_processed_rows_per_second",
                                      "Processing rate of the last micro-batch", labels=["query"])
        lag = GaugeMetricFamily("fraud_spark_consumer_lag_records", "Records of a partition beyond what the "
                                "query has read (latest offset - end offset of its last batch)",
                                labels=["query", "topic", "partition"])
        watermark = GaugeMetricFamily("fraud_spark_watermark_timestamp_seconds", "The query's event-time "
                                      "watermark (epoch seconds)", labels=["query"])
        delay = GaugeMetricFamily("fraud_spark_watermark_delay_seconds", "Wall clock minus the watermark, "
                                  "when scraped", labels=["query"])
        state_rows = GaugeMetricFamily("fraud_spark_state_rows", "Rows in a stateful operator's state",
                                       labels=["query", "operator"])
        state_memory = GaugeMetricFamily("fraud_spark_state_memory_bytes", "Memory of a stateful operator's "
                                         "state", labels=["query", "operator"])
        for query, values in sorted(latest.items()):
            input_rate.add_metric([query], values["input_rate"])
            processed.add_metric([query], values["processed_rate"])
            for (topic, partition), records in sorted(values["lag"].items()):
                lag.add_metric([query, topic, partition], records)
            if values["watermark"] is not None:
                watermark.add_metric([query], values["watermark"])
                delay.add_metric([query], now - values["watermark"])
            for operator, rows, memory in values["operators"]:
                state_rows.add_metric([query, operator], rows)
                state_memory.add_metric([query, operator], memory)
        return [input_rate, processed, lag, watermark, delay, state_rows, state_memory]


def start_job_metrics(settings) -> SparkMetrics | None:
    """The job's metrics, hooked into the exactly-once writer and served on
    ``FRAUD_METRICS_HOST:FRAUD_DETECTORS_METRICS_PORT``; None when ``FRAUD_METRICS_ENABLED`` is false."""
    from common.metrics_http import serve_metrics
    from spark_job.alert_writer import ExactlyOnceWriter

    if not settings.metrics_enabled:
        return None
    metrics = SparkMetrics()
    ExactlyOnceWriter.observer = metrics
    serve_metrics(metrics.registry, settings.metrics_host, settings.detectors_metrics_port, "detector job")
    return metrics
