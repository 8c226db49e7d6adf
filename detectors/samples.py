"""Hand-made transactions for detector tests and the harness: explicit event times, known patterns.

``txn(...)`` builds one transaction dict in the contract; the pattern functions build the simulator's
fraud scenarios and their look-alikes on a card of your choosing, starting at a given time. Every
pattern returns plain dicts, so a test reads like the situation it checks.
"""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta, timezone

from common.contracts import format_event_time

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)

# (lat, lon) of a few cities, for card-present transactions.
PARIS = (48.8566, 2.3522)
VERSAILLES = (48.8049, 2.1204)     # 19 km from Paris
MADRID = (40.4168, -3.7038)        # 1,050 km from Paris
NEW_YORK = (40.7128, -74.0060)     # 5,840 km from Paris
LONDON = (51.5072, -0.1276)        # 340 km from Paris

_counter = itertools.count(1)


def txn(card_id: str, at: datetime, amount: float, *, merchant_id: str = "m-grocer", channel: str = "pos",
        where: tuple[float, float] | None = PARIS, txn_id: str | None = None, currency: str = "EUR",
        mcc: str = "5411") -> dict:
    """One transaction in the contract; ``where`` is ignored (null lat/lon) for e-commerce."""
    lat, lon = (None, None) if channel == "ecom" or where is None else where
    return {
        "txn_id": txn_id or f"t-{card_id}-{next(_counter):06d}",
        "card_id": card_id, "customer_id": f"cust-{card_id}", "merchant_id": merchant_id,
        "terminal_id": f"term-{merchant_id}", "amount": round(float(amount), 2), "currency": currency,
        "event_time": format_event_time(at), "channel": channel, "mcc": mcc, "lat": lat, "lon": lon,
    }


def by_time(txns: list[dict]) -> list[dict]:
    return sorted(txns, key=lambda t: (t["event_time"], t["txn_id"]))


def out_of_order(timed: list[tuple[float, dict]], spread_s: float, per_batch: int, seed: int) -> list[list[dict]]:
    """Micro-batches of ``per_batch`` transactions in an arrival order where each ``(second, transaction)``
    comes up to ``spread_s`` seconds of event time early or late against its neighbours (keep it within
    the detector's watermark to have nothing dropped)."""
    rng = random.Random(seed)
    arrival = [t for _, t in sorted(timed, key=lambda st: st[0] + rng.uniform(-spread_s / 2, spread_s / 2))]
    return [arrival[i:i + per_batch] for i in range(0, len(arrival), per_batch)]


# --- fraud patterns -----------------------------------------------------------------------------

def double_swipe(card: str, start: datetime, gap_s: float = 12.0, amount: float = 42.50) -> list[dict]:
    return [txn(card, start, amount, merchant_id="m-cafe"),
            txn(card, start + timedelta(seconds=gap_s), amount, merchant_id="m-cafe")]


def card_testing(card: str, start: datetime, count: int = 7, every_s: float = 25.0) -> list[dict]:
    return [txn(card, start + timedelta(seconds=i * every_s), 1.00 + (i % 3) * 0.5, merchant_id=f"m-web-{i}",
                channel="ecom", mcc="5999") for i in range(count)]


def amount_spike(card: str, start: datetime, history: int = 12, every: timedelta = timedelta(minutes=10),
                 typical: float = 40.0, spike: float = 480.0) -> list[dict]:
    usual = [txn(card, start + i * every, typical * (0.8 + 0.05 * (i % 9)), merchant_id=f"m-shop-{i % 4}")
             for i in range(history)]
    return usual + [txn(card, start + history * every, spike, merchant_id="m-jeweller")]


def impossible_travel(card: str, start: datetime, hours: float = 1.0) -> list[dict]:
    return [txn(card, start, 25.0, where=PARIS, merchant_id="m-paris"),
            txn(card, start + timedelta(hours=hours), 60.0, where=NEW_YORK, merchant_id="m-nyc")]


def cash_out(card: str, start: datetime, amount: float = 2500.0) -> list[dict]:
    """The template's example (detectors/template.py): a large charge at a quasi-cash merchant, here so that
    a detector fresh from ``make new-detector`` passes the contract suite."""
    return [txn(card, start, amount, merchant_id="m-exchange", mcc="6051")]


# --- look-alikes that must not alert -------------------------------------------------------------

def same_merchant_other_amount(card: str, start: datetime) -> list[dict]:
    return [txn(card, start, 42.50, merchant_id="m-cafe"),
            txn(card, start + timedelta(seconds=12), 17.80, merchant_id="m-cafe")]


def same_amount_later(card: str, start: datetime, minutes: float = 15.0) -> list[dict]:
    return [txn(card, start, 42.50, merchant_id="m-cafe"),
            txn(card, start + timedelta(minutes=minutes), 42.50, merchant_id="m-cafe")]


def plausible_trip(card: str, start: datetime) -> list[dict]:
    """Paris to Madrid in 2.5 h (420 km/h), and a hop to Versailles: nothing impossible."""
    return [txn(card, start, 30.0, where=VERSAILLES, merchant_id="m-versailles"),
            txn(card, start + timedelta(minutes=40), 12.0, where=PARIS, merchant_id="m-paris"),
            txn(card, start + timedelta(hours=3, minutes=10), 55.0, where=MADRID, merchant_id="m-madrid")]


def few_small_online(card: str, start: datetime) -> list[dict]:
    """Three small online charges in minutes (an app store, a top-up): below the card-testing count."""
    return card_testing(card, start, count=3, every_s=60.0)


def ordinary_day(card: str, start: datetime, count: int = 6) -> list[dict]:
    """Varied purchases at one town's shops, an hour or so apart."""
    amounts = [23.10, 8.40, 61.00, 15.25, 34.99, 12.00, 47.30, 9.95]
    return [txn(card, start + timedelta(minutes=70 * i + 3 * (hash(card) % 7)), amounts[i % len(amounts)],
                merchant_id=f"m-{card}-{i % 3}") for i in range(count)]


def representative() -> list[dict]:
    """Every fraud pattern once (the template's cash-out too), every look-alike, and ordinary traffic, over
    ~3 h of event time."""
    start = T0
    txns = (double_swipe("card-ds", start + timedelta(minutes=20))
            + card_testing("card-ct", start + timedelta(minutes=50))
            + amount_spike("card-as", start)
            + impossible_travel("card-it", start + timedelta(minutes=30))
            + cash_out("card-co", start + timedelta(minutes=35))
            + same_merchant_other_amount("card-la1", start + timedelta(minutes=25))
            + same_amount_later("card-la2", start + timedelta(minutes=5))
            + plausible_trip("card-la3", start + timedelta(minutes=10))
            + few_small_online("card-la4", start + timedelta(minutes=40)))
    for i in range(4):
        txns += ordinary_day(f"card-ord{i}", start + timedelta(minutes=7 * i), count=3)
    return by_time(txns)
