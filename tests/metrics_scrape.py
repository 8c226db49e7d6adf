"""Reading a /metrics exposition back in tests, with prometheus_client's own parser."""

from __future__ import annotations

import json
import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from common.settings import REPO_ROOT

DASHBOARD = REPO_ROOT / "deploy" / "monitoring" / "grafana" / "fraud-pipeline.json"
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created")}


def samples(text: str) -> dict[tuple, float]:
    """Every sample: (name, sorted label pairs) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple, float] | None:
    """The samples served on ``host:port``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
            return samples(response.read().decode())
    except OSError:
        return None


def by_label(got: dict[tuple, float], name: str, label: str, **where: str) -> dict[str, float]:
    """The values of ``name``'s samples keyed by ``label``, for the samples whose labels match ``where``."""
    out: dict[str, float] = {}
    for (sample, labels), value in got.items():
        labels = dict(labels)
        if sample == name and all(labels.get(k) == v for k, v in where.items()):
            out[labels.get(label, "")] = out.get(labels.get(label, ""), 0) + value
    return out


def total(got: dict[tuple, float], name: str, **where: str) -> float:
    return sum(by_label(got, name, "", **where).values())


def exposed_names(target: str) -> set[str]:
    """Every series name ``host:port``'s ``/metrics`` declares (a labelled metric with no sample yet is
    declared by its HELP and TYPE lines), with the suffixes of its type."""
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=5) as response:
        families = list(text_string_to_metric_families(response.read().decode()))
    names = set()
    for family in families:
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


def dashboard_expressions() -> list[str]:
    """The PromQL of every panel of the provisioned Grafana dashboard."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def dashboard_metric_names() -> set[str]:
    return {name for expr in dashboard_expressions() for name in re.findall(r"\bfraud_[a-z0-9_]+", expr)}
