"""Small, explicit test data in the transaction contract (tests own their event times)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from common.contracts import format_event_time

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=timezone.utc)  # in the past: the contract rejects event times a day ahead of the broker


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
