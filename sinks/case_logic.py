"""Pure case management: enriched alerts grouped per card into cases (no Faust, no Redis).

A case is everything suspicious about one card in one burst of activity:

- it is opened by the first alert of a card and stays open while further alerts of that card arrive
  within ``CASE_WINDOW`` (24 h) of event time after its latest alert; an alert later than that closes
  the case and opens a new one (``apply_to_card`` returns both). A case also rolls over after
  ``MAX_ALERTS_PER_CASE`` alerts, so a case never grows without bound.
- several detectors flagging the same transactions make ONE case: all their alerts, reasons and
  detectors are listed in it.
- ``score`` = 1 - prod over detectors of (1 - the detector's highest score in the case): independent
  detectors agreeing raise the score, one detector repeating itself does not. ``severity`` maps it:
  < 0.5 low, < 0.8 medium, < 0.95 high, else critical.
- idempotent: applying an alert_id already in the case (or in the card's previous case) changes
  nothing, and the result does not depend on the order alerts arrive in (alerts are kept sorted by
  event time), so a redelivery after a crash is harmless.
- forgetting: a card with no alert for ``CARD_RETENTION`` (7 days) of event time is forgotten (its
  state deleted: a tombstone in the table's changelog, so memory and restore time stay bounded); its
  open case is closed first (``forget_card``). Longer than ``CASE_WINDOW``: a forgotten card's next
  alert would have opened a new case anyway.
- times: ``opened_at`` / ``updated_at`` are the earliest / latest ``detected_at`` of its alerts (when the
  case was first and last known), ``first_event_time`` / ``last_event_time`` their event times. No wall
  clock is read: the same alerts always give the same case.

Case format (the value published to the ``cases`` topic, key = card_id, and stored in Redis):

    {case_id, card_id, status: "open" | "closed", version, opened_at, updated_at, first_event_time,
     last_event_time, alert_count, alert_ids, detectors, txn_ids, score, severity,
     alerts: [{alert_id, detector, detector_version, score, reason, event_time, detected_at,
               ingested_at, txn_ids, merchant_name, distance_from_home_km}],
     customer_id, segment, merchants, max_distance_from_home_km, profile_missing,
     closed_reason (closed cases only)}
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any, Mapping

from common.contracts import parse_event_time

CASE_WINDOW = timedelta(hours=24)
CARD_RETENTION = timedelta(days=7)
MAX_ALERTS_PER_CASE = 200  # a case is one table value and one Kafka record: keep it well under 1 MB
MAX_MERCHANTS = 20
SEVERITIES = ((0.5, "low"), (0.8, "medium"), (0.95, "high"))


def case_id_for(card_id: str, first_alert_id: str) -> str:
    """Deterministic: the same first alert of a card always opens the same case id (32 hex characters:
    read as a hash, never as a card number, by ``common.card_numbers``)."""
    return hashlib.sha256(f"case:{card_id}:{first_alert_id}".encode()).hexdigest()[:32]


def severity_of(score: float) -> str:
    for bound, name in SEVERITIES:
        if score < bound:
            return name
    return "critical"


def combined_score(alerts: list[Mapping[str, Any]]) -> float:
    best: dict[str, float] = {}
    for alert in alerts:
        best[alert["detector"]] = max(best.get(alert["detector"], 0.0), float(alert["score"]))
    remaining = 1.0
    for score in best.values():
        remaining *= 1.0 - min(1.0, max(0.0, score))
    return round(1.0 - remaining, 6)


def _alert_entry(alert: Mapping[str, Any]) -> dict:
    enrichment = alert.get("enrichment") or {}
    return {
        "alert_id": alert["alert_id"],
        "detector": alert["detector"],
        "detector_version": alert.get("detector_version"),
        "score": float(alert["score"]),
        "reason": alert["reason"],
        "event_time": alert["event_time"],
        "detected_at": alert["detected_at"],
        "ingested_at": alert.get("ingested_at"),     # the dashboard's latency, when Redis is rebuilt from cases
        "txn_ids": list(alert["txn_ids"]),
        "merchant_name": enrichment.get("merchant_name"),
        "distance_from_home_km": enrichment.get("distance_from_home_km"),
    }


def _rebuild(case: dict, entries: list[dict], latest: Mapping[str, Any]) -> dict:
    """Every derived field of ``case`` from its alert entries (order-independent)."""
    entries = sorted(entries, key=lambda e: (e["event_time"], e["alert_id"]))
    enrichment = latest.get("enrichment") or {}
    merchants = sorted({e["merchant_name"] for e in entries if e["merchant_name"]})[:MAX_MERCHANTS]
    distances = [e["distance_from_home_km"] for e in entries if e["distance_from_home_km"] is not None]
    score = combined_score(entries)
    case.update({
        "alerts": entries,
        "alert_ids": [e["alert_id"] for e in entries],
        "alert_count": len(entries),
        "detectors": sorted({e["detector"] for e in entries}),
        "txn_ids": sorted({t for e in entries for t in e["txn_ids"]}),
        "opened_at": min(e["detected_at"] for e in entries),
        "updated_at": max(e["detected_at"] for e in entries),
        "first_event_time": entries[0]["event_time"],
        "last_event_time": max(e["event_time"] for e in entries),
        "score": score,
        "severity": severity_of(score),
        "customer_id": enrichment.get("customer_id") or case.get("customer_id"),
        "segment": enrichment.get("segment") or case.get("segment"),
        "merchants": merchants,
        "max_distance_from_home_km": max(distances) if distances else None,
        "profile_missing": sorted(set(latest.get("profile_missing") or [])),
    })
    return case


def new_case(alert: Mapping[str, Any]) -> dict:
    case = {"case_id": case_id_for(alert["card_id"], alert["alert_id"]), "card_id": alert["card_id"],
            "status": "open", "version": 1}
    return _rebuild(case, [_alert_entry(alert)], alert)


def belongs_to(case: Mapping[str, Any], alert: Mapping[str, Any]) -> bool:
    """Whether ``alert`` joins ``case`` (else it closes it and opens a new one)."""
    if case["status"] != "open" or case["alert_count"] >= MAX_ALERTS_PER_CASE:
        return False
    gap = parse_event_time(alert["event_time"]) - parse_event_time(case["last_event_time"])
    return gap <= CASE_WINDOW  # late alerts (negative gap) join the open case


def apply_alert(case: Mapping[str, Any] | None, alert: Mapping[str, Any]) -> dict:
    """The case after ``alert``: the same case if the alert is already in it, the updated case if it
    belongs to it, else a new case (its ``case_id`` differs from ``case``'s)."""
    if case is None or not belongs_to(case, alert):
        if case is not None and alert["alert_id"] in case["alert_ids"]:
            return dict(case)
        return new_case(alert)
    if alert["alert_id"] in case["alert_ids"]:
        return dict(case)
    updated = dict(case)
    updated["version"] = case["version"] + 1
    return _rebuild(updated, list(case["alerts"]) + [_alert_entry(alert)], alert)


def close_case(case: Mapping[str, Any], reason: str) -> dict:
    closed = dict(case)
    closed.update(status="closed", version=case["version"] + 1, closed_reason=reason)
    return closed


def already_handled(state: Mapping[str, Any] | None, alert: Mapping[str, Any]) -> bool:
    """Whether ``alert`` is in the card's open case or in its previous, closed one."""
    if not state:
        return False
    return any(case is not None and alert["alert_id"] in case["alert_ids"]
               for case in (state.get("case"), state.get("previous_case")))


def current_versions(state: Mapping[str, Any] | None) -> list[dict]:
    """The card's cases as they stand, oldest first: the previous (closed) case, then the open one.

    What a redelivered alert re-sends: a crash after the state was saved but before the case versions
    were published would otherwise lose them for good (a closing version most of all: the closed
    case would stay "open" on the topic, or its last alert in no case at all).
    """
    if not state:
        return []
    return [case for case in (state.get("previous_case"), state.get("case")) if case is not None]


def apply_to_card(state: Mapping[str, Any] | None, alert: Mapping[str, Any]) -> tuple[dict, list[dict]]:
    """One card's state ``{"case": open case, "previous_case": the last closed case}`` after ``alert``.

    Returns the new state and the case versions to publish, oldest first: ``[]`` for an alert already
    handled (``already_handled``: in the open case or the previous, closed one), ``[updated]`` or
    ``[closed, opened]``.
    """
    state = dict(state or {"case": None, "previous_case": None})
    case = state["case"]
    if already_handled(state, alert):
        return state, []
    result = apply_alert(case, alert)
    if case is not None and result["case_id"] != case["case_id"]:
        why = ("no alert for the card within 24 h of event time"
               if case["alert_count"] < MAX_ALERTS_PER_CASE else "case reached its size limit")
        closed = close_case(case, why)
        return {"case": result, "previous_case": closed}, [closed, result]
    state["case"] = result
    return state, [result]


def last_event_time(state: Mapping[str, Any] | None) -> datetime | None:
    """The event time of the card's latest alert (in its open or its previous case)."""
    times = [parse_event_time(case["last_event_time"]) for case in current_versions(state)]
    return max(times) if times else None


def forgotten(state: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether the card has had no alert for ``CARD_RETENTION`` of event time at ``now`` (event time)."""
    latest = last_event_time(state)
    return latest is not None and now - latest > CARD_RETENTION


def forget_card(state: Mapping[str, Any] | None) -> list[dict]:
    """The case versions to publish before the card is forgotten: its open case, closed."""
    case = (state or {}).get("case")
    if case is None or case["status"] != "open":
        return []
    return [close_case(case, f"no alert for the card within {CARD_RETENTION.days} days of event time")]
