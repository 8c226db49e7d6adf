"""What a running Prometheus says over its HTTP API: each scrape target's health and the metric names it
has scraped. Used for the local stack's Prometheus (deploy/local_stack.py) and, by the end-to-end suite,
for the compose stack's (the `monitoring` profile, published on 127.0.0.1)."""

from __future__ import annotations

import json
import urllib.request


def _data(url: str, path: str):
    with urllib.request.urlopen(url.rstrip("/") + "/" + path, timeout=5) as response:
        return json.load(response)["data"]


def targets_health(url: str) -> dict[str, str]:
    """Each scrape target's job and health (``/api/v1/targets``): ``{job: "up"|"down"|"unknown"}``."""
    return {target["labels"]["job"]: target["health"] for target in _data(url, "api/v1/targets")["activeTargets"]}


def metric_names(url: str) -> set[str]:
    """Every metric name Prometheus holds samples of (``/api/v1/label/__name__/values``)."""
    return set(_data(url, "api/v1/label/__name__/values"))
