"""Helpers for tests of the downstream services: alerts in the contract with explicit times."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from common.contracts import alert_id, format_event_time

BASE_TIME = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> str:
    """``BASE_TIME`` + ``seconds``, in the contract's time format."""
    return format_event_time(BASE_TIME + timedelta(seconds=seconds))


def make_alert(card_id: str, txn_ids: list[str], detector: str = "double_swipe", *,
               event_s: float = 0.0, latency_s: float = 1.5, score: float = 0.7,
               reason: str | None = None, **extra: Any) -> dict:
    """An alert of the contract: event time ``BASE_TIME + event_s``, written ``latency_s`` later."""
    alert = {
        "alert_id": alert_id(detector, txn_ids),
        "detector": detector,
        "detector_version": "1.0.0",
        "card_id": card_id,
        "txn_ids": list(txn_ids),
        "event_time": at(event_s),
        "detected_at": at(event_s + latency_s),
        "score": score,
        "reason": reason or f"{detector} flagged {len(txn_ids)} transactions",
        "evidence": {"gap_seconds": 12.3},
    }
    alert.update(extra)
    return alert
