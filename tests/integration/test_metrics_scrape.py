"""/metrics of every service during a real run: the detector job's queries on the real broker and Spark,
the enricher and the case manager as their own processes, each scraped over HTTP and parsed with
prometheus_client's parser. The counters must agree with the run's own figures: the alerts and dead
letters read back with read_committed, the records the services handled."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest

from common.kafka_io import make_producer, read_topic
from common.metrics_http import serve_metrics
from common.waiting import wait_until
from deploy.local_stack import free_ports
from deploy.processes import ProcessGroup
from spark_job.alert_writer import ExactlyOnceWriter
from spark_job.metrics import SparkMetrics
from spark_job.progress import ProgressListener
from spark_job.queries import RunOptions, start_detectors
from detectors import harness
from tests.builders import T0, encode, txn
from tests.detectors_for_tests import BIG_AMOUNT
from tests.metrics_scrape import by_label, scrape, total

PORTS = (29100, 29200)      # this project's metrics ports in tests; the lowest free ones are taken
BAD = [(b"{not json", "card-x"), (encode(txn(1000, card="card-00001", amount=-5)), "card-00001"),
       (encode(txn(1001, card="card-00002", amount=-7)), "card-00002")]


def test_every_service_serves_metrics_that_agree_with_the_run(stack, topics, spark, unique, redis_client, tmp_path,
                                                             monkeypatch):
    s = stack.replace(topic_transactions=topics("transactions", partitions=4), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      topic_alerts_enriched=topics("enriched", 2), topic_cases=topics("cases", 2),
                      partitions_alerts=2)
    values = [txn(i, amount=950.0 if i % 10 == 0 else 12.0, merchant=f"m-{i}") for i in range(200)]
    producer = make_producer(s)
    for value in values:
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    for raw, key in BAD:
        producer.send(s.topic_transactions, key=key, value=raw)
    producer.flush()

    job_port = free_ports(*PORTS)
    enricher_port = free_ports(job_port + 1, PORTS[1])
    cases_port = free_ports(enricher_port + 1, PORTS[1])
    metrics = SparkMetrics()
    monkeypatch.setattr(ExactlyOnceWriter, "observer", metrics)
    server = serve_metrics(metrics.registry, "127.0.0.1", job_port, "detector job (test)")
    assert server is not None
    listener = ProgressListener(tmp_path / "progress", metrics=metrics)
    spark.streams.addListener(listener.listener)
    env = {**s.to_env(), "FRAUD_ENRICHER_APP_ID": f"test-enricher-{unique}", "FRAUD_CASES_APP_ID": f"test-cases-{unique}",
           "FRAUD_SINKS_NAMESPACE": f"t-metrics-{unique}", "FRAUD_RUN_DIR": str(tmp_path / "run"),
           "FRAUD_ENRICHER_METRICS_PORT": str(enricher_port), "FRAUD_CASES_METRICS_PORT": str(cases_port),
           "PYTHONUNBUFFERED": "1"}
    with ProcessGroup(tmp_path / "logs", env) as group:
        group.start("enricher", ["-m", "sinks.enricher", "worker", "-l", "info"])
        group.start("cases", ["-m", "sinks.cases", "worker", "-l", "info"])
        queries = start_detectors(spark, [BIG_AMOUNT], s, RunOptions(checkpoint_root=tmp_path / "ckpt", shared=True))
        try:
            expected_alerts = sum(v["amount"] >= 900 for v in values)
            alerts = wait_until(lambda: got if len(got := _values(s, s.topic_alerts)) >= expected_alerts else None,
                                180, f"{expected_alerts} alerts")
            dead = _values(s, s.topic_dlq, min_records=len(BAD))
            # the job: written = read back (read_committed), per detector and per reason
            job = wait_until(lambda: m if (m := scrape(job_port)) and total(m, "fraud_spark_input_rows_total")
                             >= len(values) + len(BAD) else None, 120, "the job's metrics to count every record")
            assert by_label(job, "fraud_alerts_written_total", "detector") == dict(Counter(a["detector"] for a in alerts))
            assert by_label(job, "fraud_dead_letters_total", "reason") == dict(Counter(d["reason"] for d in dead))
            assert total(job, "fraud_writer_transactions_total", outcome="committed") >= 1
            assert total(job, "fraud_writer_transactions_total", outcome="aborted") == 0
            assert total(job, "fraud_spark_invalid_records_total") == len(BAD)
            assert total(job, "fraud_spark_batch_duration_seconds_count") >= 1
            lag = by_label(job, "fraud_spark_consumer_lag_records", "partition", topic=s.topic_transactions)
            assert sorted(lag) == ["0", "1", "2", "3"], lag
            # A stateless query reports the watermark its first batch set in the next one with input.
            tick = harness.watermark_tick(T0 + timedelta(hours=1))
            producer.send(s.topic_transactions, key=tick["card_id"], value=encode(tick))
            producer.flush()
            delay = wait_until(lambda: by_label(scrape(job_port) or {}, "fraud_spark_watermark_delay_seconds",
                                                "query"), 120, "the watermark's delay")
            assert list(delay) == ["detectors-shared"] and delay["detectors-shared"] > 0
            # the services: every alert handled once by each, the latency of each in the histogram
            cases = wait_until(lambda: m if (m := scrape(cases_port)) and total(
                m, "fraud_service_records_total", service="cases") >= len(alerts) else None, 180,
                "the case manager's metrics to count every alert")
            enricher = scrape(enricher_port)
            assert total(enricher, "fraud_service_records_total", service="enricher") == len(alerts)
            assert total(enricher, "fraud_service_records_published_total", service="enricher") == len(alerts)
            assert total(enricher, "fraud_service_dedupe_hits_total", service="enricher") == 0
            assert total(cases, "fraud_service_records_total", service="cases") == len(alerts)
            assert total(cases, "fraud_alert_latency_seconds_count", detector="big_amount") == len(alerts)
            cards = {a["card_id"] for a in alerts}
            wait_until(lambda: total(scrape(cases_port) or {}, "fraud_cases_open") == len(cards), 60,
                       f"{len(cards)} open cases")
            wait_until(lambda: by_label(scrape(enricher_port) or {}, "fraud_service_consumer_lag_records", "partition",
                                        topic=s.topic_alerts).keys() == {"0", "1"}, 60, "the enricher's lag gauges")
        finally:
            for q in queries:
                q.stop()
            spark.streams.removeListener(listener.listener)
            server.shutdown()
            server.server_close()
            producer.close()
        for name in ("enricher", "cases"):
            assert group.children[name].running(), group.children[name].tail()


def _values(s, topic, min_records: int = 0) -> list[dict]:
    return [json.loads(r.value) for r in read_topic(s, topic, min_records=min_records, timeout=120)]
