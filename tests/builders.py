"""Small, explicit test data in the contracts: transactions and alerts (tests own their event times)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from common.contracts import alert_id, format_event_time

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=timezone.utc)  # in the past: never ahead of the broker's clock


def txn(i: int, card: str | None = None, amount: float = 10.0, seconds: float | None = None,
        merchant: str = "m-1", channel: str = "pos", lat: float | None = 48.85, lon: float | None = 2.35,
        **extra) -> dict:
    """Transaction number ``i``: by default card ``card-{i % 100}`` at T0 + i seconds."""
    value = {
        "txn_id": f"t-{i:07d}", "card_id": card or f"card-{i % 100:05d}", "customer_id": f"cust-{i % 100:05d}",
        "merchant_id": merchant, "terminal_id": f"term-{merchant}", "amount": amount, "currency": "EUR",
        "event_time": format_event_time(T0 + timedelta(seconds=i if seconds is None else seconds)),
        "channel": channel, "mcc": "5411", "lat": lat if channel != "ecom" else None,
        "lon": lon if channel != "ecom" else None,
    }
    value.update(extra)
    return value


def encode(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def pan_like() -> str:
    """A Luhn-valid 16-digit number, built at run time so no card number is ever written in the repo:
    for testing that such values are refused where a card token belongs."""
    from common.contracts import luhn_valid

    body = "4" + "1" * 14
    return next(body + str(d) for d in range(10) if luhn_valid(body + str(d)))


# Alerts, for the tests of the downstream services.

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
