"""Records of the parameters topic (``FRAUD_TOPIC_PARAMS``, compacted, key = detector name): the set of
parameters in force for one detector, as ``python -m detectors params set`` writes it and the detector
job reads it. The history topic (``FRAUD_TOPIC_PARAMS_HISTORY``) holds the same records, every one.

Value (JSON): ``detector``, ``params`` (every settable parameter: name -> number, text, list of text or
null), ``version`` (1, 2 ... per detector; 0 stands for the code's defaults and is never written),
``detector_version`` (the code's version the set was checked against), ``author``, ``reason``,
``set_at`` (event-time format, wall clock) and ``checked`` (the what-if it was checked with, or null).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from common.contracts import ContractError


@dataclass(frozen=True)
class ParamRecord:
    detector: str
    params: dict[str, Any]
    version: int
    detector_version: str
    author: str
    reason: str
    set_at: str
    checked: dict | None = field(default=None)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode("utf-8")


FIELDS = ("detector", "params", "version", "detector_version", "author", "reason", "set_at")


def decode_param_record(raw: bytes | str | None) -> ParamRecord:
    """A record of the parameters topic; ``ContractError`` (one line) when it is not one."""
    if raw is None:
        raise ContractError("empty record (a tombstone)")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ContractError("not valid JSON") from None
    if not isinstance(value, dict):
        raise ContractError("not a JSON object")
    missing = [name for name in FIELDS if name not in value]
    if missing:
        raise ContractError(f"parameter record misses {missing}")
    if not isinstance(value["params"], dict):
        raise ContractError("params must be an object")
    version = value["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ContractError("version must be a whole number >= 1")
    return ParamRecord(**{name: value[name] for name in FIELDS}, checked=value.get("checked"))
