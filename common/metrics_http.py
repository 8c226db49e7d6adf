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
