"""Reading a /metrics exposition back in tests, with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


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
