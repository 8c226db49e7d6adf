"""Issue 29: Prometheus scraped every service of the run, and the Grafana dashboard queries only metric
names that exist. On the local target: the run's own Prometheus (Debian's binary) and each service's
``/metrics``; on the compose target: the `monitoring` profile's Prometheus (``make e2e-compose`` starts it)
and the names it has scraped (``/api/v1/label/__name__/values``)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(1500)   # the first test may also run the diamond

JOBS = {"detectors": "up", "enricher": "up", "cases": "up"}


def test_prometheus_scraped_every_service_of_the_run(diamond_run):
    metrics = diamond_run.metrics
    health = metrics["prometheus_targets"]
    if health is None and diamond_run.target == "local":
        pytest.skip("no prometheus binary and none can be had from Debian's packages here")
    assert health is not None, (f"no Prometheus answered at {metrics['prometheus_url']}: the compose stack runs "
                                "it in the `monitoring` profile (make e2e-compose starts it)")
    assert health == JOBS


def test_the_grafana_dashboard_names_only_metrics_the_services_expose(diamond_run):
    from tests.metrics_scrape import dashboard_metric_names

    exposed = set().union(*diamond_run.metrics["metric_names"].values())
    used = dashboard_metric_names()
    assert used <= exposed, f"the dashboard queries metrics no service exposed: {sorted(used - exposed)}"
