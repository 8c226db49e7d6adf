"""Serve a Prometheus registry at ``/metrics`` on a settings port (docs/metrics.md)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def serve_metrics(registry, host: str, port: int, what: str):
    """Start prometheus_client's HTTP server for ``registry`` on ``host:port`` in a daemon thread; the
    server, or None when the port is taken. Observability must never stop the pipeline: a port in use
    (another copy of the service on this host) is one error line, and the process runs on unobserved."""
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        log.error("%s: cannot serve metrics on %s:%d (%s); running without /metrics "
                  "(set its FRAUD_*_METRICS_PORT, docs/metrics.md)", what, host, port, error.strerror or error)
        return None
    log.info("%s: metrics on http://%s:%d/metrics", what, host, port)
    return server


def metrics_targets(settings) -> dict[str, str]:
    """``host:port`` of each process's ``/metrics`` (the Prometheus job names are the keys)."""
    host = settings.metrics_host if settings.metrics_host not in ("0.0.0.0", "::") else "127.0.0.1"
    return {"detectors": f"{host}:{settings.detectors_metrics_port}",
            "enricher": f"{host}:{settings.enricher_metrics_port}",
            "cases": f"{host}:{settings.cases_metrics_port}"}


def metrics_urls(settings) -> str:
    """One line naming every ``/metrics`` URL and the local Prometheus (what ``make demo`` prints)."""
    if not settings.metrics_enabled:
        return "metrics: off (FRAUD_METRICS_ENABLED=false)"
    urls = ", ".join(f"{name} http://{target}/metrics" for name, target in metrics_targets(settings).items())
    return f"metrics: {urls}; Prometheus (when `make up` started one) http://127.0.0.1:{settings.prometheus_port}/"
