"""Pure enrichment of one alert with the customer, card and merchant context (no Faust, no Redis).

The enricher (``sinks/enricher.py``) reads the three profile hashes of ``common.contracts`` from Redis
and the card's recent alert count, then calls ``enrich``. Profiles arrive as Redis hashes: every value
a string, an empty string or a missing field meaning unknown.

Where the merchant comes from: the alert's optional trigger context (``common.contracts.
ALERT_TRIGGER_FIELDS``, copied by every detector from the triggering transaction): its ``merchant_id``
names the merchant profile, its ``customer_id`` the customer (else the card profile's). An alert without
``merchant_id`` (an older writer) is still enriched, with the merchant marked missing. The location of
the swipe is the alert's own ``lat``/``lon`` if present (the terminal), else the merchant profile's.

The output is the alert unchanged plus:

- ``enrichment``: customer_id, segment, home_lat, home_lon, card_status, merchant_id, merchant_name,
  merchant_category, mcc, location_lat, location_lon, location_source ("terminal" | "merchant" |
  None), distance_from_home_km (None unless home and location are both known),
  card_recent_alerts (int), recent_window_hours
- ``profile_missing``: the sorted profiles that were not found, from "card", "customer", "merchant"
  (never a reason to drop the alert)
- ``enriched_at``: when it was enriched (ISO UTC ms, the caller's clock)
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Mapping

from common.contracts import ContractError, format_event_time, parse_event_time, validate_alert

RECENT_WINDOW_HOURS = 24
EARTH_RADIUS_KM = 6371.0088


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in kilometres."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi = phi2 - phi1
    dlmb = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


def _text(profile: Mapping[str, Any] | None, name: str) -> str | None:
    if not profile:
        return None
    value = profile.get(name)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _number(source: Mapping[str, Any] | None, name: str) -> float | None:
    if not source:
        return None
    value = source.get(name)
    if value is None or isinstance(value, bool) or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _coordinates(source: Mapping[str, Any] | None, lat_name: str, lon_name: str):
    lat, lon = _number(source, lat_name), _number(source, lon_name)
    if lat is None or lon is None or not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    return lat, lon


def customer_id_of(alert: Mapping[str, Any], card: Mapping[str, Any] | None) -> str | None:
    """The customer to look up: the alert's own ``customer_id`` if given, else the card profile's."""
    return _text(alert, "customer_id") or _text(card, "customer_id")


def enrich(alert: Mapping[str, Any], customer: Mapping[str, Any] | None,
           card: Mapping[str, Any] | None, merchant: Mapping[str, Any] | None,
           recent_alert_count: int, now: datetime) -> dict:
    """The enriched alert; ``None`` or an empty mapping for a profile means it was not found."""
    missing = [name for name, profile in (("card", card), ("customer", customer),
                                           ("merchant", merchant)) if not profile]
    home = _coordinates(customer, "home_lat", "home_lon")
    terminal = _coordinates(alert, "lat", "lon")
    merchant_place = _coordinates(merchant, "lat", "lon")
    location, source = (terminal, "terminal") if terminal else (
        (merchant_place, "merchant") if merchant_place else (None, None))
    distance = round(haversine_km(*home, *location), 3) if home and location else None
    enrichment = {
        "customer_id": customer_id_of(alert, card),
        "segment": _text(customer, "segment"),
        "home_lat": home[0] if home else None,
        "home_lon": home[1] if home else None,
        "card_status": _text(card, "status"),
        "merchant_id": _text(alert, "merchant_id"),
        "merchant_name": _text(merchant, "name"),
        "merchant_category": _text(merchant, "category"),
        "mcc": _text(merchant, "mcc"),
        "location_lat": location[0] if location else None,
        "location_lon": location[1] if location else None,
        "location_source": source,
        "distance_from_home_km": distance,
        "card_recent_alerts": int(recent_alert_count),
        "recent_window_hours": RECENT_WINDOW_HOURS,
    }
    enriched = dict(alert)
    enriched["enrichment"] = enrichment
    enriched["profile_missing"] = sorted(missing)
    enriched["enriched_at"] = format_event_time(now)
    return enriched


def decode_alert(raw: bytes | str | dict) -> dict:
    """Bytes from the topic to a valid alert; ``ContractError`` otherwise."""
    try:
        alert = raw if isinstance(raw, dict) else json.loads(raw)
    except (ValueError, TypeError):
        raise ContractError("alert is not valid JSON") from None
    if not isinstance(alert, dict):
        raise ContractError("alert is not a JSON object")
    try:
        validate_alert(alert)
        parse_event_time(alert["detected_at"])          # the case manager and dashboard need it
        if not isinstance(alert["card_id"], str) or not isinstance(alert["reason"], str):
            raise ContractError("card_id and reason must be strings")
        return alert
    except ContractError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise ContractError(f"alert is malformed: {exc}") from None
