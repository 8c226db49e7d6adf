"""Pure: the dashboard's JSON (``/api/summary``) from what the case manager and the detector job keep in
Redis: the live figures first (transactions read, how far the detector queries are behind, alerts and
latency per detector), then one page of the open cases, the latest alerts and the per-minute counts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from sinks.dashboard.latency import alert_latency_ms, latency_figures, percentile

__all__ = ["MAX_CASES", "CASES_PER_PAGE", "CasePage", "case_page", "percentile", "summarize"]

MAX_CASES = 50          # the most cases one answer lists (its default page size)
CASES_PER_PAGE = 20     # what the page asks for: the table never pushes the live figures out of sight
MAX_LATEST = 20
MAX_MINUTES = 15


@dataclass(frozen=True)
class CasePage:
    """One page of the open cases, newest update first (the order of ``RedisKeys.open_cases``)."""

    number: int          # 1-based, within 1..pages
    size: int
    total: int           # open cases

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    def describe(self) -> dict:
        shown = max(0, min(self.size, self.total - self.offset))
        return {"page": self.number, "per_page": self.size, "pages": self.pages, "total": self.total,
                "first": self.offset + 1 if shown else 0, "last": self.offset + shown}


def case_page(total: int, page: int = 1, per_page: int = MAX_CASES) -> CasePage:
    """Page ``page`` of ``total`` open cases, ``per_page`` (1..MAX_CASES) to a page; a page past the
    end (cases closed meanwhile) is the last one."""
    size = min(MAX_CASES, max(1, per_page))
    pages = max(1, math.ceil(total / size))
    return CasePage(min(pages, max(1, page)), size, total)


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
            "invalid_records": int(totals.get("invalid_records") or 0), "watermark": totals.get("watermark"),
            "offsets_behind_latest": _optional_int(totals.get("offsets_behind_latest"))}


def transactions(queries: Mapping[str, Mapping[str, Any]]) -> dict:
    """What the detector job has read: every query reads the whole transactions topic, so the furthest
    query's rows read; how far the slowest query is behind the topic's end (its consumer lag), when the
    job publishes it (``offsets_behind_latest``). The page turns successive ``read`` into a rate."""
    read = [int(t.get("input_rows") or 0) for t in queries.values()]
    behind = [v for v in (_optional_int(t.get("offsets_behind_latest")) for t in queries.values())
              if v is not None]
    return {"read": max(read) if read else None, "offsets_behind_latest": max(behind) if behind else None}


def _optional_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def summarize(open_cases: Iterable[Mapping[str, Any]], open_count: int,
              latest_alerts: Iterable[Mapping[str, Any]],
              minute_counts: Mapping[tuple[str, str], int],
              queries: Mapping[str, Mapping[str, Any]] | None = None,
              page: CasePage | None = None) -> dict:
    """``open_cases`` are the cases of ``page`` (default: the first ``MAX_CASES``) of ``open_count``;
    ``latest_alerts`` the newest alerts (their latency: ``sinks.dashboard.latency``);
    ``minute_counts`` maps (minute "YYYYmmddHHMM", detector) to the number of distinct alerts;
    ``queries`` each detector query's progress totals since the detector job started."""
    page = page or case_page(open_count)
    queries = queries or {}
    cases = sorted(open_cases, key=lambda c: (c["updated_at"], c["case_id"]), reverse=True)[:page.size]
    by_severity: dict[str, int] = {}          # of the cases listed
    for case in cases:
        by_severity[case["severity"]] = by_severity.get(case["severity"], 0) + 1
    alerts = sorted(latest_alerts, key=lambda a: (a["detected_at"], a["alert_id"]), reverse=True)
    all_minutes = sorted({m for m, _ in minute_counts})
    minutes = all_minutes[-MAX_MINUTES:]
    detectors = sorted({d for m, d in minute_counts if m in minutes})
    by_detector: dict[str, int] = {}
    for (_minute, detector), count in minute_counts.items():
        by_detector[detector] = by_detector.get(detector, 0) + int(count)
    return {
        "transactions": transactions(queries),
        "alerts_by_detector": dict(sorted(by_detector.items())),
        "alerts_since_minute": all_minutes[0] if all_minutes else None,
        "latency": {**latency_figures(alerts), "alerts": len(alerts)},
        "open_cases": open_count,
        "cases_page": page.describe(),
        "cases_by_severity": by_severity,
        "cases": [case_row(c) for c in cases],
        "alerts_per_minute": {
            "minutes": [f"{m[8:10]}:{m[10:12]}" for m in minutes],
            "minute_keys": minutes,
            "detectors": {d: [minute_counts.get((m, d), 0) for m in minutes] for d in detectors},
        },
        "latest_alerts": [{**a, "latency_ms": alert_latency_ms(a)} for a in alerts[:MAX_LATEST]],
        "queries": [query_row(name, totals) for name, totals in sorted(queries.items())],
    }
