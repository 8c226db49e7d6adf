"""The monitoring profile's files: the Grafana dashboard names only metrics the code defines, and
Prometheus scrapes every service on the port its settings give it."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from common.settings import REPO_ROOT, Settings
from tests.metrics_scrape import DASHBOARD, SUFFIXES, dashboard_expressions, dashboard_metric_names

pytestmark = pytest.mark.unit

MONITORING = REPO_ROOT / "deploy" / "monitoring"


def defined_metric_names() -> set[str]:
    """Every series name the detector job and the services can expose, from their registries."""
    from prometheus_client import REGISTRY

    import sinks.metrics  # noqa: F401 - registers the services' metrics in the default registry
    from spark_job.metrics import SparkMetrics

    names = set()
    for registry in (SparkMetrics().registry, REGISTRY):
        for family in registry.collect():
            names.add(family.name)
            names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
    return {name for name in names if name.startswith("fraud_")}


def test_the_dashboard_references_only_metric_names_the_code_defines():
    used = dashboard_metric_names()
    defined = defined_metric_names()
    assert used, "the dashboard queries no fraud_ metric"
    assert used <= defined, f"not defined by the code: {sorted(used - defined)}"


def test_the_dashboard_shows_what_the_issue_asks_for():
    exprs = " ".join(dashboard_expressions())
    for name in ("fraud_spark_input_rows_total", "fraud_spark_consumer_lag_records", "fraud_service_consumer_lag_records",
                 "fraud_spark_batch_duration_seconds_bucket", "fraud_spark_watermark_delay_seconds",
                 "fraud_alert_latency_seconds_bucket", "fraud_alerts_written_total", "fraud_dead_letters_total"):
        assert name in exprs, name
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_metric_names_follow_the_prometheus_conventions():
    for name in defined_metric_names():
        assert re.fullmatch(r"fraud_[a-z0-9_]+", name), name
        assert not re.search(r"_(ms|milliseconds|kb|mb)(_|$)", name), f"{name}: base units (seconds, bytes)"


def test_compose_prometheus_scrapes_every_service_on_its_settings_port():
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    s = Settings()
    assert targets == {"detectors": [f"detectors:{s.detectors_metrics_port}"],
                       "enricher": [f"enricher:{s.enricher_metrics_port}"],
                       "cases": [f"cases:{s.cases_metrics_port}"]}


def test_grafana_is_provisioned_with_the_dashboard_and_the_prometheus_data_source():
    compose = yaml.safe_load((REPO_ROOT / "deploy" / "docker-compose.yml").read_text())
    grafana, configs = compose["services"]["grafana"], compose["configs"]
    mounted = {c["target"]: (REPO_ROOT / "deploy" / configs[c["source"]]["file"]).resolve() for c in grafana["configs"]}
    assert mounted["/etc/grafana/dashboards/fraud-pipeline.json"] == DASHBOARD.resolve()
    provider = yaml.safe_load((MONITORING / "grafana" / "dashboards.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    source = yaml.safe_load((MONITORING / "grafana" / "datasource.yml").read_text())["datasources"][0]
    uids = {t["datasource"]["uid"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]}
    assert uids == {source["uid"]} and source["url"] == "http://prometheus:9090"
    assert compose["services"]["prometheus"]["profiles"] == ["monitoring", "prometheus"]
    assert grafana["profiles"] == ["monitoring"]
