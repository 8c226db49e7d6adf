"""The metrics' pure parts: what a micro-batch's progress and a written batch become in the exposition
(parsed back with prometheus_client's parser), and what the services count."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from spark_job.alert_writer import ExactlyOnceWriter
from spark_job.metrics import SparkMetrics, consumer_lag, dead_letter_reason, epoch_seconds
from tests.metrics_scrape import samples

pytestmark = pytest.mark.unit

WATERMARK = "2026-11-22T10:00:00.000Z"


def scrape(registry) -> dict[tuple, float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    return samples(generate_latest(registry).decode())


def progress(batch_id: int = 3) -> dict:
    return {"name": "detectors-rules", "batchId": batch_id, "numInputRows": 120,
            "inputRowsPerSecond": 40.0, "processedRowsPerSecond": 60.5,
            "durationMs": {"triggerExecution": 1500}, "eventTime": {"watermark": WATERMARK},
            "stateOperators": [{"operatorName": "symmetricHashJoin", "numRowsTotal": 7, "memoryUsedBytes": 4096,
                                "numRowsDroppedByWatermark": 2}],
            "observedMetrics": {"validation_detectors-rules": {"records": 120, "invalid": 3}},
            "sources": [{"endOffset": json.dumps({"transactions": {"0": 50, "1": 70}}),
                         "latestOffset": json.dumps({"transactions": {"0": 80, "1": 70}})}]}


def test_a_progress_event_becomes_rates_lag_watermark_delay_state_and_counters():
    from spark_job.progress import summarize_progress

    now = epoch_seconds(WATERMARK) + 90
    metrics = SparkMetrics(clock=lambda: now)
    event = progress()
    metrics.record(event, summarize_progress(event))
    metrics.record(event, summarize_progress(event))
    got = scrape(metrics.registry)
    q = (("query", "detectors-rules"),)
    assert got[("fraud_spark_input_rows_total", q)] == 240
    assert got[("fraud_spark_invalid_records_total", q)] == 6
    assert got[("fraud_spark_late_rows_dropped_total", q)] == 4
    assert got[("fraud_spark_batch_duration_seconds_count", q)] == 2
    assert got[("fraud_spark_batch_duration_seconds_bucket", (("le", "2.0"), *q))] == 2
    assert got[("fraud_spark_input_rows_per_second", q)] == 40.0
    assert got[("fraud_spark_processed_rows_per_second", q)] == 60.5
    lag = {labels: v for (name, labels), v in got.items() if name == "fraud_spark_consumer_lag_records"}
    assert lag == {(("partition", "0"), *q, ("topic", "transactions")): 30,
                   (("partition", "1"), *q, ("topic", "transactions")): 0}
    assert got[("fraud_spark_watermark_delay_seconds", q)] == 90
    assert got[("fraud_spark_watermark_timestamp_seconds", q)] == epoch_seconds(WATERMARK)
    operator = (("operator", "0:symmetricHashJoin"), *q)
    assert got[("fraud_spark_state_rows", operator)] == 7
    assert got[("fraud_spark_state_memory_bytes", operator)] == 4096


def test_the_watermark_delay_is_measured_when_scraped_so_a_stalled_query_shows_it():
    from spark_job.progress import summarize_progress

    clock = {"now": epoch_seconds(WATERMARK) + 5}
    metrics = SparkMetrics(clock=lambda: clock["now"])
    metrics.record(progress(), summarize_progress(progress()))
    clock["now"] += 600
    assert scrape(metrics.registry)[("fraud_spark_watermark_delay_seconds", (("query", "detectors-rules"),))] == 605


def test_no_watermark_yet_gives_no_delay():
    assert epoch_seconds("1970-01-01T00:00:00.000Z") is None and epoch_seconds(None) is None


def test_lag_is_per_partition_from_the_latest_and_end_offsets():
    event = {"sources": [{"endOffset": {"t": {"0": 5, "2": 9}}, "latestOffset": {"t": {"0": 7, "2": 9, "3": 1}}}]}
    assert consumer_lag(event) == {("t", "0"): 2, ("t", "2"): 0}


@pytest.mark.parametrize("value, reason", [
    ('{"reason":"value is oversized: 20000 bytes > 16384","source_topic":"t"}', "value is oversized"),
    ('{"reason":"amount is negative","value_base64":"eyJyZWFzb24iOiJ4In0="}', "amount is negative"),
    ('{"source_topic":"t"}', "unknown"),
])
def test_a_dead_letter_reason_label_is_its_text_up_to_the_first_colon(value, reason):
    assert dead_letter_reason(value) == reason


class FakeProducer:
    def __init__(self, fail_on_commit: bool = False):
        self.sent, self.fail_on_commit, self.aborted = [], fail_on_commit, 0

    def begin_transaction(self):
        pass

    def send(self, topic, key=None, value=None):
        from kafka.future import Future

        self.sent.append((topic, key, value))
        return Future().success(None)          # acknowledged, as kafka-python's future once delivered

    def flush(self, timeout=None):
        pass

    def commit_transaction(self):
        if self.fail_on_commit:
            raise RuntimeError("fenced")

    def abort_transaction(self):
        self.aborted += 1


def alert(detector: str, n: int) -> tuple:
    value = json.dumps({"alert_id": f"a{n}", "detector": detector, "reason": 'says "detector":"x"'},
                       separators=(",", ":"))
    return "alert", "alerts", "card-1", value


def dead(reason: str) -> tuple:
    return "dlq", "transactions.dlq", "k", json.dumps({"reason": reason}, separators=(",", ":"))


@pytest.fixture
def writer(tmp_path, monkeypatch):
    from common.settings import Settings

    metrics = SparkMetrics()
    monkeypatch.setattr(ExactlyOnceWriter, "observer", metrics)
    w = ExactlyOnceWriter(Settings.from_env({"run_dir": tmp_path}), writer_id="detectors-rules",
                          checkpoint_dir=tmp_path)
    w._query_id = "q"
    return w, metrics


def test_the_writer_counts_alerts_per_detector_and_dead_letters_per_reason_once_committed(writer):
    w, metrics = writer
    w.producer = FakeProducer()
    rows = [alert("velocity", 1), alert("velocity", 2), alert("double_swipe", 3), dead("amount is negative"),
            dead("value is oversized: 17000 bytes > 16384")]
    assert w.write_batch(iter(rows), 0) == 5
    got = scrape(metrics.registry)
    q = ("query", "detectors-rules")
    assert got[("fraud_alerts_written_total", (("detector", "velocity"), q))] == 2
    assert got[("fraud_alerts_written_total", (("detector", "double_swipe"), q))] == 1
    assert got[("fraud_dead_letters_total", (q, ("reason", "amount is negative")))] == 1
    assert got[("fraud_dead_letters_total", (q, ("reason", "value is oversized")))] == 1
    assert got[("fraud_writer_transactions_total", (("outcome", "committed"), q))] == 1


def test_an_aborted_transaction_counts_as_aborted_and_its_rows_not_at_all(writer):
    w, metrics = writer
    w.producer = FakeProducer(fail_on_commit=True)
    with pytest.raises(RuntimeError):
        w.write_batch(iter([alert("velocity", 1), dead("amount is negative")]), 0)
    got = scrape(metrics.registry)
    assert got[("fraud_writer_transactions_total", (("outcome", "aborted"), ("query", "detectors-rules")))] == 1
    assert not [key for key in got if key[0] in ("fraud_alerts_written_total", "fraud_dead_letters_total")]


def test_restarts_are_counted_per_query():
    metrics = SparkMetrics()
    restart = metrics.counting_restarts(lambda name, error: [name])
    assert restart("detectors-ml", "boom") == ["detectors-ml"]
    restart("detectors-ml", "boom")
    assert scrape(metrics.registry)[("fraud_spark_query_restarts_total", (("query", "detectors-ml"),))] == 2


def test_a_query_shows_zero_restarts_from_its_first_batch():
    """So the compose Prometheus holds fraud_spark_query_restarts_total (the Grafana dashboard graphs it)."""
    from spark_job.progress import summarize_progress

    metrics = SparkMetrics()
    event = progress()
    metrics.record(event, summarize_progress(event))
    assert scrape(metrics.registry)[("fraud_spark_query_restarts_total", (("query", "detectors-rules"),))] == 0


# --- the services -------------------------------------------------------------------------------

def test_a_service_shows_zero_retries_and_redis_errors_from_its_start():
    """So the compose Prometheus holds the series the Grafana dashboard graphs before any failure."""
    from prometheus_client import REGISTRY

    from sinks import metrics

    metrics.declare_zero("test-zero")
    got = scrape(REGISTRY)
    assert got[("fraud_service_retries_total", (("service", "test-zero"), ("system", "redis")))] == 0
    assert got[("fraud_service_retries_total", (("service", "test-zero"), ("system", "kafka")))] == 0
    assert got[("fraud_service_redis_errors_total", (("service", "test-zero"),))] == 0

def test_retries_are_counted_by_system_and_redis_ones_as_redis_errors(monkeypatch):
    from prometheus_client import REGISTRY

    from sinks import metrics

    monkeypatch.setitem(metrics.current, "service", "test-retries")
    before = scrape(REGISTRY)
    metrics.retried("redis: read dedup keys")
    metrics.retried("kafka: publish enriched alerts")
    after = scrape(REGISTRY)

    def moved(name, labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)
    assert moved("fraud_service_retries_total", {"service": "test-retries", "system": "redis"}) == 1
    assert moved("fraud_service_retries_total", {"service": "test-retries", "system": "kafka"}) == 1
    assert moved("fraud_service_redis_errors_total", {"service": "test-retries"}) == 1


def test_service_lag_is_highwater_minus_committed_for_the_assigned_partitions_only():
    from collections import namedtuple

    from prometheus_client import REGISTRY

    from sinks import metrics

    TP = namedtuple("TP", "topic partition")
    a, b = TP("alerts-lag-test", 0), TP("alerts-lag-test", 1)
    consumer = SimpleNamespace(assignment=lambda: {a, b}, highwater={a: 40, b: 9}.get,
                               _committed_offset={a: 25, b: 9})
    app = SimpleNamespace(consumer=consumer)
    metrics.update_lag(app, "lag-test", "alerts-lag-test")
    lag = {dict(labels)["partition"]: v for (name, labels), v in scrape(REGISTRY).items()
           if name == "fraud_service_consumer_lag_records" and dict(labels)["service"] == "lag-test"}
    assert lag == {"0": 15, "1": 0}
    consumer.assignment = lambda: {a}                  # partition 1 moved to another worker
    metrics.update_lag(app, "lag-test", "alerts-lag-test")
    lag = {dict(labels)["partition"] for (name, labels), v in scrape(REGISTRY).items()
           if name == "fraud_service_consumer_lag_records" and dict(labels)["service"] == "lag-test"}
    assert lag == {"0"}


def test_the_demo_names_every_metrics_url_and_the_local_prometheus():
    from common.metrics_http import metrics_urls
    from common.settings import Settings

    line = metrics_urls(Settings.from_env({"detectors_metrics_port": 1, "enricher_metrics_port": 2,
                                           "cases_metrics_port": 3, "prometheus_port": 4}, environ={}))
    for url in ("http://127.0.0.1:1/metrics", "http://127.0.0.1:2/metrics", "http://127.0.0.1:3/metrics",
                "http://127.0.0.1:4/"):
        assert url in line
    assert "off" in metrics_urls(Settings.from_env({"metrics_enabled": False}, environ={}))


def test_the_local_prometheus_scrapes_the_settings_ports_on_loopback():
    import yaml

    from common.metrics_http import metrics_targets
    from common.settings import Settings
    from deploy.local_stack import prometheus_config

    config = yaml.safe_load(prometheus_config(metrics_targets(Settings.from_env(environ={}))))
    assert {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]} == {
        "detectors": ["127.0.0.1:9181"], "enricher": ["127.0.0.1:9182"], "cases": ["127.0.0.1:9183"]}


def test_a_refused_parameter_set_is_counted_per_detector():
    from spark_job.metrics import SparkMetrics

    metrics = SparkMetrics()
    metrics.params_refused.labels("double_swipe").inc()
    assert scrape(metrics.registry)[("fraud_detector_params_refused_total", (("detector", "double_swipe"),))] == 1
