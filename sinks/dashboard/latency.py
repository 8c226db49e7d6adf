"""Pure: the pipeline's latency per detector, from the alerts the case manager keeps in Redis.

Latency is ``detected_at - ingested_at``: from the moment the triggering transaction entered Kafka (its
record timestamp, which the detector job copies onto the alert as the optional ``ingested_at``) to the
moment the exactly-once writer wrote the alert. It is what the demo's report measures (``demo.monitor``).

Never event time: the simulator runs its own clock (a fixed day months ago, faster than the wall clock),
so ``now - event_time`` measures the simulation, not the system. An alert without ``ingested_at`` (an
older writer, a test) simply has no latency figure; it is counted in ``without``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from common.contracts import ContractError, parse_event_time

INGESTED_AT = "ingested_at"          # the alert's optional field (common.contracts)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def alert_latency_ms(alert: Mapping[str, Any]) -> int | None:
    """``detected_at - ingested_at`` in milliseconds; None without (or with an unreadable) ``ingested_at``."""
    ingested = alert.get(INGESTED_AT)
    if not ingested:
        return None
    try:
        delta = parse_event_time(alert["detected_at"]) - parse_event_time(ingested)
    except (ContractError, KeyError):
        return None
    return round(delta.total_seconds() * 1000)


def stats(latencies: list[float], without: int) -> dict:
    return {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "count": len(latencies), "without": without}


def latency_figures(alerts: Iterable[Mapping[str, Any]]) -> dict:
    """p50/p99 overall and per detector: ``{"overall": stats, "detectors": {name: stats}}``, where
    ``stats`` is ``{p50_ms, p99_ms, count (alerts with a figure), without (alerts without one)}``."""
    by_detector: dict[str, list[float]] = {}
    missing: dict[str, int] = {}
    for alert in alerts:
        name = alert["detector"]
        by_detector.setdefault(name, [])
        missing.setdefault(name, 0)
        latency = alert_latency_ms(alert)
        if latency is None:
            missing[name] += 1
        else:
            by_detector[name].append(latency)
    everything = [v for values in by_detector.values() for v in values]
    return {"overall": stats(everything, sum(missing.values())),
            "detectors": {name: stats(by_detector[name], missing[name]) for name in sorted(by_detector)}}
