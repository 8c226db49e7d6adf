"""The downstream services' Prometheus metrics (docs/metrics.md). One service per process: the metrics
live in prometheus_client's default registry, labelled with the service, and ``serve`` starts its HTTP
server on the service's port setting when the worker starts."""

from __future__ import annotations

import logging

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

log = logging.getLogger(__name__)

LAG_EVERY_S = 5.0
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0)

RECORDS = Counter("fraud_service_records", "Records the service consumed and handled", ["service"])
PUBLISHED = Counter("fraud_service_records_published", "Records the service published (enriched alerts, "
                    "case versions)", ["service"])
DEDUPE_HITS = Counter("fraud_service_dedupe_hits", "Alerts already handled (redelivered or duplicated), "
                      "dropped or re-applied idempotently", ["service"])
INVALID = Counter("fraud_service_invalid_records", "Records that broke the contract (logged, not handled)",
                  ["service"])
RETRIES = Counter("fraud_service_retries", "Failed calls retried with back-off, by system (redis, kafka)",
                  ["service", "system"])
REDIS_ERRORS = Counter("fraud_service_redis_errors", "Redis calls that failed, retried or not", ["service"])
LAG = Gauge("fraud_service_consumer_lag_records", "Records of an assigned partition beyond the committed "
            "offset (the log end includes transaction markers)", ["service", "topic", "partition"])
OPEN_CASES = Gauge("fraud_cases_open", "Open cases (the dashboard's cases:open in Redis)")
LATENCY = Histogram("fraud_alert_latency_seconds", "Pipeline latency of each new alert the case manager "
                    "receives: detected_at - ingested_at, wall clock", ["detector"], buckets=LATENCY_BUCKETS)

current = {"service": "unknown"}     # the service this process runs (set by ``serve``)


def retried(what: str) -> None:
    """One failed attempt of ``what`` (``"redis: ..."``, ``"kafka: ..."``) that will be retried."""
    system = what.split(":", 1)[0].strip() or "other"
    RETRIES.labels(current["service"], system).inc()
    if system == "redis":
        REDIS_ERRORS.labels(current["service"]).inc()


def redis_failed() -> None:
    REDIS_ERRORS.labels(current["service"]).inc()


def update_lag(app, service: str, topic: str) -> None:
    """The lag gauges of ``topic``'s partitions assigned to this worker (Faust's highwater and committed
    offsets, both already in memory: no broker call); partitions it lost are removed."""
    consumer = app.consumer
    seen = set()
    for tp in consumer.assignment():
        if tp.topic != topic:
            continue
        highwater, committed = consumer.highwater(tp), consumer._committed_offset.get(tp)
        if highwater is None:
            continue
        LAG.labels(service, topic, str(tp.partition)).set(max(0, highwater - (committed or 0)))
        seen.add(str(tp.partition))
    for labels in [s.labels for m in LAG.collect() for s in m.samples]:
        if labels["service"] == service and labels["topic"] == topic and labels["partition"] not in seen:
            LAG.remove(service, topic, labels["partition"])


def install(app, service: str, topic: str) -> None:
    """A Faust timer refreshing the lag gauges of ``topic`` every few seconds (on the worker's loop)."""
    @app.timer(interval=LAG_EVERY_S, name=f"{service}.metrics_lag")
    async def _lag() -> None:
        try:
            update_lag(app, service, topic)
        except Exception as error:  # noqa: BLE001 - metrics must never stop the worker
            log.warning("metrics: cannot read the consumer lag: %s", error)


def declare_zero(service: str) -> None:
    """The service's retry and Redis error series at 0 from the start: a labelled counter has no series
    until its first increment, and a Prometheus that never saw one has no such metric to graph or alert on."""
    for system in ("redis", "kafka"):
        RETRIES.labels(service, system)
    REDIS_ERRORS.labels(service)


def serve(settings, service: str, port: int):
    """Start ``/metrics`` for ``service`` on ``FRAUD_METRICS_HOST:port`` unless metrics are off."""
    from common.metrics_http import serve_metrics

    current["service"] = service
    declare_zero(service)
    if not settings.metrics_enabled:
        return None
    return serve_metrics(REGISTRY, settings.metrics_host, port, service)
