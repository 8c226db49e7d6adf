"""Pure: the dashboard's JSON (``/api/summary``) from what the case manager keeps in Redis."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

MAX_CASES = 50
MAX_LATEST = 20
MAX_MINUTES = 15


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def case_row(case: Mapping[str, Any]) -> dict:
    reasons: list[str] = []
    for alert in sorted(case["alerts"], key=lambda a: a["detected_at"], reverse=True):
        text = f"{alert['detector']}: {alert['reason']}"
        if text not in reasons:
            reasons.append(text)
    return {
        "case_id": case["case_id"], "card_id": case["card_id"], "status": case["status"],
        "severity": case["severity"], "score": case["score"], "alert_count": case["alert_count"],
        "detectors": case["detectors"], "reasons": reasons[:5], "opened_at": case["opened_at"],
        "updated_at": case["updated_at"], "merchants": case.get("merchants") or [],
        "segment": case.get("segment"), "max_distance_from_home_km": case.get("max_distance_from_home_km"),
    }


def query_row(name: str, totals: Mapping[str, Any]) -> dict:
    read = int(totals.get("input_rows") or 0)
    dropped = int(totals.get("rows_dropped_by_watermark") or 0)
    return {"query": name, "input_rows": read, "rows_dropped_by_watermark": dropped,
            "dropped_share": dropped / read if read else None,
            "invalid_records": int(totals.get("invalid_records") or 0), "watermark": totals.get("watermark")}


def summarize(open_cases: Iterable[Mapping[str, Any]], open_count: int,
              latest_alerts: Iterable[Mapping[str, Any]],
              minute_counts: Mapping[tuple[str, str], int],
              queries: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
    """``minute_counts`` maps (minute "YYYYmmddHHMM", detector) to the number of distinct alerts;
    ``queries`` each detector query's progress totals since the detector job started."""
    cases = sorted(open_cases, key=lambda c: (c["updated_at"], c["case_id"]), reverse=True)
    by_severity: dict[str, int] = {}
    for case in cases:
        by_severity[case["severity"]] = by_severity.get(case["severity"], 0) + 1
    alerts = sorted(latest_alerts, key=lambda a: (a["detected_at"], a["alert_id"]), reverse=True)
    latencies = [float(a["latency_ms"]) for a in alerts]
    minutes = sorted({m for m, _ in minute_counts})[-MAX_MINUTES:]
    detectors = sorted({d for m, d in minute_counts if m in minutes})
    return {
        "open_cases": open_count,
        "cases_by_severity": by_severity,
        "cases": [case_row(c) for c in cases[:MAX_CASES]],
        "alerts_per_minute": {
            "minutes": [f"{m[8:10]}:{m[10:12]}" for m in minutes],
            "minute_keys": minutes,
            "detectors": {d: [minute_counts.get((m, d), 0) for m in minutes] for d in detectors},
        },
        "latest_alerts": alerts[:MAX_LATEST],
        "latency_ms": {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
                       "count": len(latencies)},
        "queries": [query_row(name, totals) for name, totals in sorted((queries or {}).items())],
    }
