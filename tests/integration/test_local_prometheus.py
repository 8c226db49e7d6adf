"""The local stack's Prometheus (``make up``): Debian's binary, started on 127.0.0.1, scrapes the
targets it was given until every one is up."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter

from common.metrics_http import serve_metrics
from common.settings import Settings
from common.waiting import wait_until
from deploy.local_stack import PrometheusServer, ensure_prometheus, free_ports

PORTS = (29100, 29200)


def test_prometheus_scrapes_every_target_it_was_given(tmp_path):
    settings = Settings.from_env({"run_dir": tmp_path / "run"})
    if ensure_prometheus(settings) is None:
        pytest.skip("no prometheus binary and none can be had from Debian's packages here")
    registry = CollectorRegistry()
    Counter("fraud_test_scraped", "a sample", registry=registry).inc()
    first = free_ports(*PORTS)
    second = free_ports(first + 1, PORTS[1])
    servers = [serve_metrics(registry, "127.0.0.1", port, "test") for port in (first, second)]
    prometheus = PrometheusServer(settings.replace(prometheus_port=free_ports(second + 1, PORTS[1])),
                                  {"one": f"127.0.0.1:{first}", "two": f"127.0.0.1:{second}"})
    try:
        assert "scraping" in prometheus.up()
        assert wait_until(lambda: (h := prometheus.targets_health()) == {"one": "up", "two": "up"} and h, 60,
                          "both targets up")
    finally:
        prometheus.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
    assert prometheus.pid() is None
