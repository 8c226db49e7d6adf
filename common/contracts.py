"""The event contracts of docs/architecture.md ("Contracts") in plain Python: what every component checks against.

``decode_transaction`` (with ``validate_transaction``) is the one specification of a valid transaction.
The detector job runs its Java twin (``fraud.spark.TransactionValidation`` in ``spark_job/jvm``, wired by
``spark_job/parsing.py``), and ``tests/integration/test_dlq.py`` generates records with hypothesis and
holds the twin to this file: change a rule here, then there, and that test says where they differ.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Iterable

from common.card_numbers import holds_card_number, luhn_valid, mask_card_numbers  # noqa: F401 (luhn_valid: API)

# ---------------------------------------------------------------------------------------------
# Transactions (topic `transactions`, key = card_id)
# ---------------------------------------------------------------------------------------------

ID_FIELDS = ("txn_id", "card_id", "customer_id", "merchant_id", "terminal_id")
REQUIRED_FIELDS = ID_FIELDS + ("amount", "currency", "event_time", "channel", "mcc")
OPTIONAL_FIELDS = ("lat", "lon")  # number or null; null for e-commerce
CHANNELS = ("pos", "ecom", "atm")

MAX_VALUE_BYTES = 16 * 1024          # a transaction is ~300 bytes; anything this big is not one
MAX_ID_LENGTH = 128
MAX_AMOUNT = 10_000_000              # larger amounts are absurd for one card swipe
MIN_EVENT_TIME = datetime(2000, 1, 1, tzinfo=timezone.utc)
# How far event time may lead the broker's record timestamp by default (FRAUD_EVENT_TIME_MAX_AHEAD_S): no
# more than the shortest watermark delay, so one record from a fast clock cannot make real traffic late.
EVENT_TIME_MAX_AHEAD = timedelta(seconds=60)

# Whole-string patterns (used with fullmatch here, wrapped in \A(?:...)\z by Spark): ASCII digits only and
# no "$", which in Python and Java alike also matches before a trailing newline (Java before \r too).
EVENT_TIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
EVENT_TIME_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSX"  # the same format for Spark's to_timestamp
CURRENCY_RE = re.compile(r"[A-Z]{3}")
MCC_RE = re.compile(r"[0-9]{4}")
# A \u escape of a lone surrogate (not an escaped backslash followed by "u"): JSON's grammar allows it,
# but no text holds it; Spark's parser turns it into "?". Searched in the raw text, in Python and Java.
LONE_SURROGATE_RE = re.compile(r"(?:^|[^\\])(?:\\\\)*+(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                               r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})")


class ContractError(ValueError):
    """A record breaks the transaction contract; the message is the reason stored in the DLQ.

    Card numbers in the message (a value quoted in it) are masked: reasons are logged and printed."""

    def __init__(self, message: str):
        super().__init__(mask_card_numbers(message))


def format_event_time(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z: ``2026-11-22T10:15:30.123Z``."""
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_event_time(text: str) -> datetime:
    if not isinstance(text, str) or not EVENT_TIME_RE.fullmatch(text):
        raise ContractError(f"event_time is not ISO-8601 UTC with milliseconds: {str(text)[:40]!r}")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ContractError(f"event_time is not a real date: {text!r}") from None


def looks_like_pan(value: str) -> bool:
    """``value`` holds a card number, bare, spaced or dashed (``common.card_numbers``)."""
    return holds_card_number(value)


def validate_transaction(txn: Any, key: bytes | str | None = None, record_time: datetime | None = None,
                         check_key: bool = False, max_ahead: timedelta = EVENT_TIME_MAX_AHEAD) -> dict:
    """Check one decoded transaction against the contract and return it normalised.

    Raises ``ContractError`` with the first broken rule. With ``check_key`` (records read from Kafka),
    ``key`` (the record key) must be present and equal ``card_id``; ``record_time`` (the broker's
    timestamp), when given, bounds ``event_time`` to at most ``max_ahead`` after it.
    """
    if not isinstance(txn, dict):
        raise ContractError(f"value is a JSON {_json_type(txn)}, not an object")
    for name in REQUIRED_FIELDS:
        if name not in txn:
            raise ContractError(f"missing required field {name}")
        if txn[name] is None:
            raise ContractError(f"required field {name} is null")
    for name in ID_FIELDS + ("currency", "event_time", "channel", "mcc"):
        if not isinstance(txn[name], str):
            raise ContractError(f"{name} must be a string, got {_json_type(txn[name])}")
    for name in ID_FIELDS:
        if not txn[name].strip(" "):
            raise ContractError(f"{name} is empty")
        if len(txn[name]) > MAX_ID_LENGTH:
            raise ContractError(f"{name} is longer than {MAX_ID_LENGTH} characters")
    for name in ID_FIELDS:
        if looks_like_pan(txn[name]):
            raise ContractError(f"{name} holds a card number (PAN); ids must be tokens")

    amount = txn["amount"]
    if isinstance(amount, bool) or not isinstance(amount, (int, float, Decimal)):
        raise ContractError(f"amount must be a number, got {_json_type(amount)}")
    if isinstance(amount, float) and not math.isfinite(amount) or (
            isinstance(amount, Decimal) and not amount.is_finite()):
        raise ContractError("amount is not finite")
    if amount < 0:
        raise ContractError(f"amount is negative: {amount}")
    if amount > MAX_AMOUNT:
        raise ContractError(f"amount is absurdly large: {amount}")
    if _decimal_places(amount) > 2:
        raise ContractError(f"amount has more than 2 decimals: {amount}")

    if not CURRENCY_RE.fullmatch(txn["currency"]):
        raise ContractError(f"currency is not an ISO 4217 code: {txn['currency'][:10]!r}")
    if txn["channel"] not in CHANNELS:
        raise ContractError(f"channel must be one of {', '.join(CHANNELS)}: {txn['channel'][:10]!r}")
    if not MCC_RE.fullmatch(txn["mcc"]):
        raise ContractError(f"mcc is not a 4-digit merchant category code: {txn['mcc'][:10]!r}")

    moment = parse_event_time(txn["event_time"])
    if moment < MIN_EVENT_TIME:
        raise ContractError(f"event_time is absurdly far in the past: {txn['event_time']}")
    if record_time is not None and moment > record_time + max_ahead:
        raise ContractError(f"event_time is more than {_seconds(max_ahead)} s ahead of the record's timestamp: "
                            f"{txn['event_time']}")

    for name, bound in (("lat", 90), ("lon", 180)):
        value = txn.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise ContractError(f"{name} must be a number or null, got {_json_type(value)}")
        if not (-bound <= value <= bound):
            raise ContractError(f"{name} is out of range: {value}")

    if check_key:
        if key is None:
            raise ContractError("record key is missing (it must be the card_id)")
        key_text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        if key_text != txn["card_id"]:
            raise ContractError("record key does not match card_id")

    normalised = dict(txn)
    normalised["amount"] = float(amount)
    for name in OPTIONAL_FIELDS:
        normalised[name] = None if txn.get(name) is None else float(txn[name])
    return normalised


def _seconds(span: timedelta) -> str:
    """Whole milliseconds as seconds without trailing zeros ("60", "0.5"), as the Java twin writes them."""
    return format(Decimal(span // timedelta(milliseconds=1)).scaleb(-3).normalize(), "f")


def decode_transaction(raw: bytes | None, key: bytes | str | None = None, record_time: datetime | None = None,
                       check_key: bool = False, max_ahead: timedelta = EVENT_TIME_MAX_AHEAD) -> dict:
    """Bytes from Kafka (or a JSONL line) to a validated transaction; ``ContractError`` otherwise."""
    if raw is None or len(raw) == 0:
        raise ContractError("empty value")
    if len(raw) > MAX_VALUE_BYTES:
        raise ContractError(f"value is oversized: {len(raw)} bytes > {MAX_VALUE_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ContractError("value is not valid UTF-8") from None
    try:
        obj = json.loads(text, parse_float=Decimal, parse_constant=_reject_constant,
                         object_pairs_hook=_reject_duplicate_keys)
    except (ValueError, RecursionError):
        raise ContractError("value is not valid JSON") from None
    if "\\u" in text and LONE_SURROGATE_RE.search(text):
        raise ContractError("value is not valid JSON: a \\u escape of half a surrogate pair")
    return validate_transaction(obj, key=key, record_time=record_time, check_key=check_key, max_ahead=max_ahead)


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key in JSON object")
    return result


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _decimal_places(amount: int | float | Decimal) -> int:
    """Decimal places of the numeric value (12.50 has 1, 1E+2 has 0), not of how it was written."""
    if isinstance(amount, int):
        return 0
    try:
        exponent = Decimal(str(amount)).normalize().as_tuple().exponent
    except InvalidOperation:
        return 99
    return max(0, -exponent) if isinstance(exponent, int) else 99


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float, Decimal)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# ---------------------------------------------------------------------------------------------
# Alerts (topic `alerts`, key = card_id)
# ---------------------------------------------------------------------------------------------

ALERT_FIELDS = ("alert_id", "detector", "detector_version", "card_id", "txn_ids", "event_time",
                "detected_at", "score", "reason", "evidence")
# Optional: the context of the triggering transaction (the last of txn_ids), copied from it by the
# detectors (``detectors.base.TRIGGER_SCHEMA``). Absent in alerts of older writers; null or absent
# when unknown (lat/lon of e-commerce). The enricher looks the merchant up by ``merchant_id``.
ALERT_TRIGGER_TEXT_FIELDS = ("customer_id", "merchant_id", "terminal_id", "currency", "channel")
ALERT_TRIGGER_NUMBER_FIELDS = ("amount", "lat", "lon")
ALERT_TRIGGER_FIELDS = ALERT_TRIGGER_TEXT_FIELDS + ALERT_TRIGGER_NUMBER_FIELDS
# Optional: when the triggering transaction entered Kafka (its record timestamp), in the event-time
# format; ``detected_at - ingested_at`` is the pipeline's latency on the wall clock.
ALERT_INGESTED_AT = "ingested_at"
# Optional: the version of the detector's parameters that produced the alert (``detectors.params``):
# 0 for the defaults in the code, then 1, 2 ... per change on the parameters topic.
ALERT_PARAMS_VERSION = "params_version"


def alert_id(detector: str, txn_ids: Iterable[str]) -> str:
    """Deterministic id of a finding: the same detector naming the same transactions, the same id.

    The Spark detectors compute it natively as ``sha2(detector || ':' || concat_ws('|', txn_ids), 256)``
    cut to 32 hex characters; this is the same function in Python.
    """
    material = f"{detector}:{'|'.join(txn_ids)}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


def validate_alert(alert: dict) -> dict:
    missing = [name for name in ALERT_FIELDS if name not in alert]
    if missing:
        raise ContractError(f"alert misses fields {missing}")
    if not isinstance(alert["txn_ids"], list) or not alert["txn_ids"]:
        raise ContractError("txn_ids must be a non-empty list")
    if not 0.0 <= float(alert["score"]) <= 1.0:
        raise ContractError(f"score out of 0..1: {alert['score']}")
    if alert["alert_id"] != alert_id(alert["detector"], alert["txn_ids"]):
        raise ContractError("alert_id is not the deterministic id of detector and txn_ids")
    if not isinstance(alert["evidence"], dict):
        raise ContractError("evidence must be an object")
    for name in ALERT_TRIGGER_FIELDS:
        value = alert.get(name)
        wanted = str if name in ALERT_TRIGGER_TEXT_FIELDS else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, wanted)):
            raise ContractError(f"{name} must be a {'string' if wanted is str else 'number'} or null, "
                                f"got {_json_type(value)}")
    parse_event_time(alert["event_time"])
    if alert.get(ALERT_INGESTED_AT) is not None:
        parse_event_time(alert[ALERT_INGESTED_AT])
    version = alert.get(ALERT_PARAMS_VERSION)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise ContractError(f"{ALERT_PARAMS_VERSION} must be a whole number >= 0 or null")
    return alert


# ---------------------------------------------------------------------------------------------
# Reference profiles in Redis (written by `python -m producers load-reference`, read by the enricher)
# ---------------------------------------------------------------------------------------------

def customer_key(customer_id: str) -> str:
    """Redis hash: segment, home_lat, home_lon, mean_amount, std_amount."""
    return f"profile:customer:{customer_id}"


def card_key(card_id: str) -> str:
    """Redis hash: customer_id, issued (date), status."""
    return f"profile:card:{card_id}"


def merchant_key(merchant_id: str) -> str:
    """Redis hash: name, mcc, category, lat, lon (lat/lon empty for e-commerce merchants)."""
    return f"profile:merchant:{merchant_id}"
